// The console's Changes page, its layout on a phone and a sealed server's /ui, in
// headless Chromium (Debian's, through playwright-core), reporting what was seen.
//
// walk "changes" (input {url, chromium, shots?, tag?, admin, code, loosen, tighten,
// reader}): an admin signs in with their admin token, enrols a passkey (a CDP virtual
// authenticator) with the operator's code on the Passkeys page, sees the changes, opens
// one, approves it with the passkey (keyboard: Tab to the button, Enter) and cancels
// another; a read token's menu has no Changes. Then, at 390 px wide, each page of both
// tokens: the document's scrollWidth against the viewport's width.
// walk "sealed" (input {url, chromium, shots?, tag?}): /ui of a sealed server, at 1024
// and 390 px: its text, its progress line.
import { chromium } from "playwright-core";

const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({ executablePath: input.chromium, headless: true, args: ["--no-sandbox"] });
const seen = { errors: [], shots: [], widths: {} };

function watch(page) {
  page.on("console", (m) => { if (m.type() === "error" && !m.text().includes("503")) seen.errors.push(m.text()); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("response", (r) => { if (r.status() >= 500 && r.status() !== 503) seen.errors.push(`${r.status()} ${r.url()}`); });
}

async function shot(page, name) {
  if (!input.shots) return;
  const path = `${input.shots}/console-changes-${input.tag || "x"}-${name}.png`;
  await page.screenshot({ path, fullPage: true });
  seen.shots.push(path);
}

async function tabTo(page, selector, limit = 400) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement && document.activeElement.matches(s), selector)) return true;
  }
  return false;
}

async function message(page, prefix) {
  await page.waitForFunction((p) => document.getElementById("message").textContent.startsWith(p), prefix);
  return page.textContent("#message");
}

/** Go to a route and wait until it is drawn (or refused: "Not here" is not painted). */
async function open(page, hash) {
  await page.evaluate(() => { delete document.body.dataset.painted; document.getElementById("page").replaceChildren(); });
  await page.evaluate((h) => {
    if (location.hash === h) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = h;
  }, hash);
  await page.waitForFunction(() => {
    const drawn = document.body.dataset.painted !== undefined && !document.getElementById("page").hasAttribute("aria-busy");
    const h1 = document.querySelector("#page h1");
    return drawn || (h1 && h1.textContent === "Not here");
  });
}

async function signIn(context, token) {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  watch(page);
  await page.goto(`${input.url}/ui`);
  await page.fill("#token", token);
  await page.click("#use");
  await page.waitForSelector("#page:not([hidden]) h1");
  return page;
}

/** Each route at 390 px: [scrollWidth, the viewport's width]. */
async function narrow(page, who, hashes) {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const hash of hashes) {
    await open(page, hash);
    seen.widths[`${who} ${hash}`] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    await shot(page, `390-${who}-${hash.replace(/[^a-z0-9]+/gi, "-")}`);
  }
}

async function changes() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await signIn(context, input.admin);
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true,
      isUserVerified: true, automaticPresenceSimulation: true },
  });
  seen.adminMenu = await page.locator("#nav a").allTextContents();
  seen.adminFirst = await page.evaluate(() => [location.hash, document.querySelector("#page h1").textContent]);

  await open(page, "#/passkeys");
  await page.fill("#enrol-code", input.code);
  await page.click("#enrol");
  seen.enrolMessage = await message(page, "Passkey");

  await open(page, "#/changes");
  await shot(page, "list");
  const card = (id) => `li.change[data-id="${id}"]`;
  seen.loosenCard = await page.locator(card(input.loosen)).innerText();
  seen.tightenCard = await page.locator(card(input.tighten)).innerText();

  await open(page, `#/change/${input.loosen}`);
  seen.detail = await page.locator("#page").innerText();
  seen.tabbedToApprove = await tabTo(page, `${card(input.loosen)} button.approve`);
  await page.keyboard.press("Enter");
  seen.approveMessage = await message(page, `${input.loosen}:`);
  await page.waitForSelector(`${card(input.loosen)} .state.scheduled`);
  seen.scheduledCard = await page.locator(card(input.loosen)).innerText();
  seen.effectiveTitle = await page.locator(`${card(input.loosen)} .countdown time`).getAttribute("title");
  await shot(page, "scheduled");

  await open(page, "#/changes");
  await page.click(`${card(input.tighten)} button.cancel`);
  seen.cancelMessage = await message(page, `${input.tighten}:`);
  await page.waitForSelector(`${card(input.tighten)} .state.cancelled`);

  await narrow(page, "admin", ["#/changes", `#/change/${input.loosen}`, "#/passkeys", "#/token"]);

  const reader = await signIn(await browser.newContext({ viewport: { width: 1280, height: 900 } }), input.reader);
  seen.readerMenu = await reader.locator("#nav a").allTextContents();
  await open(reader, "#/audit");
  seen.auditTime = await reader.locator("table.audit td.time time").first().evaluate((t) => [t.textContent, t.getAttribute("title"), t.getAttribute("datetime")]);
  await shot(reader, "audit-1280");
  seen.auditAccountWidth = await reader.locator("table.audit td.account").first().evaluate((t) => Math.round(t.getBoundingClientRect().width));
  await narrow(reader, "reader", ["#/overview", "#/accounts", "#/wallets", "#/approvals", "#/audit", "#/policy", "#/token", "#/changes"]);
  seen.readerChanges = await reader.locator("#page").innerText();
}

async function sealed() {
  const context = await browser.newContext({ viewport: { width: 1024, height: 768 }, ignoreHTTPSErrors: true });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  watch(page);
  const response = await page.goto(`${input.url}/ui`);
  seen.status = response.status();
  await page.waitForFunction(() => document.getElementById("progress").textContent !== "");
  seen.text = await page.locator("main").innerText();
  seen.progress = await page.textContent("#progress");
  await shot(page, "sealed");
  await page.setViewportSize({ width: 390, height: 844 });
  seen.widths.sealed = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  await shot(page, "sealed-390");
}

try {
  await (input.walk === "sealed" ? sealed() : changes());
} catch (e) {
  seen.failure = String(e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
