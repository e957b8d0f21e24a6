// What a new user meets in the console (/ui), in headless Chromium (Debian's, through
// playwright-core): opened at http://127.0.0.1 as the README once said, with passkeys
// bound to localhost, enrolling a passkey says where to go instead; and an EOS
// account's QR code is labelled as its account name, not a deposit address.
// Input: {url (the 127.0.0.1 address), chromium, approver, code, token, eos, cosmos}.
import { chromium } from "playwright-core";

const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({ executablePath: input.chromium, headless: true, args: ["--no-sandbox"] });
const seen = { errors: [] };

async function signedIn(token) {
  const page = await (await browser.newContext()).newPage();
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  await page.goto(`${input.url}/ui`);
  await page.fill("#token", token);
  await page.click("#use");
  await page.waitForSelector("#page:not([hidden]) h1");
  return page;
}

/** An account's page once drawn (the console marks each page painted: the page before
 * it must not be read), its QR code's caption and its facts' terms. */
async function caption(page, family, name) {
  await page.evaluate(() => { delete document.body.dataset.painted; });
  await page.evaluate((h) => { location.hash = h; }, `#/account/${family}/${encodeURIComponent(name)}`);
  await page.waitForFunction(() => document.body.dataset.painted !== undefined && !document.getElementById("page").hasAttribute("aria-busy"));
  return { caption: await page.textContent("figure figcaption"), facts: await page.locator("dl dt").allTextContents() };
}

try {
  const approver = await signedIn(input.approver);
  seen.secure = await approver.evaluate(() => window.isSecureContext);
  await approver.evaluate(() => { location.hash = "#/passkeys"; });
  await approver.waitForSelector("#enrol-code");
  await approver.fill("#enrol-code", input.code);
  await approver.press("#enrol-code", "Enter");
  await approver.waitForFunction(() => document.getElementById("message").textContent.startsWith("no passkey"));
  seen.enrolMessage = await approver.textContent("#message");

  const owner = await signedIn(input.token);
  seen.eos = await caption(owner, "eos", input.eos);
  seen.cosmos = await caption(owner, "cosmos", input.cosmos);
} catch (e) {
  seen.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
