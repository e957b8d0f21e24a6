// Drives the console's approvals page (/ui/approvals) in headless Chromium (Debian's, through playwright-core):
// paste a token, find the request, approve it, see it signed; and note everything a
// user would see go wrong (console errors, CSP violations, requests to elsewhere).
// Input: {url, token, approval, screenshot, chromium}. Output: what was seen.
import { chromium } from "playwright-core";

const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({
  executablePath: input.chromium, headless: true, args: ["--no-sandbox"],
});
const seen = { errors: [], foreign: [] };
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") seen.errors.push(m.text()); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("response", (r) => { if (r.status() >= 400 && r.status() !== 403) seen.errors.push(`${r.status()} ${r.url()}`); });
  page.on("request", (r) => { if (!r.url().startsWith(input.url)) seen.foreign.push(r.url()); });

  const response = await page.goto(`${input.url}/ui/approvals`);
  seen.csp = response.headers()["content-security-policy"];
  await page.fill("#token", input.token);
  await page.click("#use");
  await page.waitForSelector("#page:not([hidden]) li.approval");
  seen.who = `${await page.textContent("#who")} ${await page.textContent("#page p.hint")}`;
  seen.tokenFieldHidden = await page.isHidden("#token");
  const card = page.locator(`li.approval[data-id="${input.approval}"]`);
  await card.waitFor();
  seen.card = await card.innerText();
  seen.pwned = await page.evaluate(() => window.pwned === 1 || document.querySelector("b.injected") !== null);

  const draws = Number(await page.evaluate(() => document.body.dataset.draws || 0));
  await card.locator("button.approve").click();
  // the message, then the list drawn again after it (the console repaints the page it is on)
  await page.waitForFunction((before) => /approved by you/.test(document.getElementById("message").textContent)
    && Number(document.body.dataset.draws || 0) > before, draws);
  seen.message = await page.textContent("#message");
  seen.stillListed = await page.locator(`li.approval[data-id="${input.approval}"]`).count();
  await page.selectOption("#state", "signed");
  const signed = page.locator(`li.approval[data-id="${input.approval}"] .state`);
  await signed.waitFor();
  seen.state = await signed.textContent();
  seen.signedHasButtons = await page.locator(`li.approval[data-id="${input.approval}"] button.approve`).isVisible();
  await page.screenshot({ path: input.screenshot, fullPage: true });

  seen.session = await page.evaluate(() => Object.keys(sessionStorage));
  seen.local = await page.evaluate(() => localStorage.length);
  seen.cookies = (await context.cookies()).length;
  await page.reload();
  await page.waitForSelector("#page:not([hidden]) h1");
  seen.keptOnReload = true;
  const other = await browser.newContext();
  const fresh = await other.newPage();
  await fresh.goto(`${input.url}/ui/approvals`);
  seen.freshTabBoardHidden = await fresh.isHidden("#page");
  await page.click("#forget");
  seen.afterForget = await page.evaluate(() => sessionStorage.length);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
