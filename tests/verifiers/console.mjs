// Drives the console (/ui) in headless Chromium (Debian's, through playwright-core) the
// way a person would, and reports what was seen: every page's figures, its first
// paint (the browser's clock), a deposit QR code decoded by an independent reader
// (jsQR), the audit download's content, an axe-core scan of each page, screenshots,
// and everything a user would see go wrong (console errors, CSP violations, requests
// to elsewhere, injected markup that ran).
// Input: {url, chromium, shots, mode: "tour" | "paint", token, approver?, ...}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";
import jsQR from "jsqr";
import { PNG } from "pngjs";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({ executablePath: input.chromium, headless: true, args: ["--no-sandbox"] });
const seen = { errors: [], foreign: [], paints: {}, axe: {}, shots: [] };

function watch(page) {
  page.on("console", (m) => { if (m.type() === "error") seen.errors.push(m.text()); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("response", (r) => {
    if (r.status() >= 500) seen.errors.push(`${r.status()} ${r.url()}`);
  });
  page.on("request", (r) => { if (!r.url().startsWith(input.url) && !r.url().startsWith("blob:")) seen.foreign.push(r.url()); });
}

async function signIn(page, token, how = "click") {
  await page.goto(`${input.url}${input.path || "/ui"}`);
  if (how === "keyboard") {
    await page.focus("#token");
    await page.keyboard.type(token);
    await page.keyboard.press("Enter");
  } else {
    await page.fill("#token", token);
    await page.click("#use");
  }
  await page.waitForSelector("#page:not([hidden]) h1");
}

/** Go to a route and wait until its page is drawn; its paint time and an axe scan. */
async function visit(page, name, hash) {
  await page.evaluate(() => { delete document.body.dataset.painted; });
  await page.evaluate((h) => {
    if (location.hash === h) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = h;
  }, hash);
  await page.waitForFunction(() => document.body.dataset.painted !== undefined && !document.getElementById("page").hasAttribute("aria-busy"));
  seen.paints[name] = Number(await page.evaluate(() => document.body.dataset.painted));
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
  });
  seen.axe[name] = result;
  if (input.shots) {
    const path = `${input.shots}/console-${input.tag || "x"}-${name}.png`;
    await page.screenshot({ path, fullPage: true });
    seen.shots.push(path);
  }
  return page.locator("#page");
}

async function tabTo(page, selector, limit = 400) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement && document.activeElement.matches(s), selector)) return true;
  }
  return false;
}

async function decodeQr(page) {
  const png = PNG.sync.read(await page.locator("svg.qr").screenshot());
  const found = jsQR(new Uint8ClampedArray(png.data), png.width, png.height);
  return found ? found.data : null;
}

try {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  watch(page);
  const response = await page.goto(`${input.url}/ui`);
  seen.csp = response.headers()["content-security-policy"];
  await signIn(page, input.token);
  seen.nav = await page.locator("#nav a").allTextContents();

  if (input.mode === "paint") {
    const routes = { overview: "#/overview", accounts: `#/accounts?family=${input.family}`,
      search: `#/accounts?family=${input.family}&prefix=${encodeURIComponent(input.prefix)}`,
      account: `#/account/${input.family}/${encodeURIComponent(input.account)}`,
      audit: "#/audit", policy: "#/policy", wallets: "#/wallets", token: "#/token" };
    for (const [name, hash] of Object.entries(routes)) {
      const p = await visit(page, name, hash);
      seen[`${name}Rows`] = await p.locator("tbody tr").count();
    }
    seen.firstContentfulPaint = await page.evaluate(() => {
      const e = performance.getEntriesByName("first-contentful-paint")[0];
      return e ? Math.round(e.startTime) : null;
    });
  } else {
    // Overview: the counts and each cap's bar
    let p = await visit(page, "overview", "#/overview");
    seen.overview = {
      signed: await p.locator("#signed-count").textContent(),
      refused: await p.locator("#refused-count").textContent(),
      pending: await p.locator("#pending-count").count() ? await p.locator("#pending-count").textContent() : null,
      remaining: await p.locator("strong.remaining").allTextContents(),
      spent: await p.locator("span.spent").allTextContents(),
      meters: await p.locator("meter").evaluateAll((ms) => ms.map((m) => Number(m.value))),
    };
    // Accounts: a family's first page, a search, the next page
    p = await visit(page, "accounts", `#/accounts?family=dogecoin`);
    seen.accounts = { rows: await p.locator("table.accounts tbody tr").count(), next: await p.getByText("Next page").count() };
    await page.fill("#prefix", input.prefix);
    await page.press("#prefix", "Enter");
    await page.waitForFunction((x) => location.hash.includes(`prefix=${x}`), encodeURIComponent(input.prefix));
    await page.waitForFunction(() => !document.getElementById("page").hasAttribute("aria-busy"));
    await page.waitForSelector("table.accounts, p.empty");
    seen.search = await page.locator("table.accounts tbody tr td:first-child").allTextContents();
    // An account: its QR code read back by an independent decoder, its recent events
    p = await visit(page, "account", `#/account/cosmos/${encodeURIComponent(input.cosmos)}`);
    seen.qr = await decodeQr(page);
    seen.accountEvents = await p.locator("table.events tbody tr").allInnerTexts();
    seen.accountFacts = await p.locator("dl.facts").innerText();
    // Wallets: the list, a wallet's page, derive-next from it
    p = await visit(page, "wallets", "#/wallets");
    seen.walletRows = await p.locator("tbody tr").count();
    p = await visit(page, "wallet", `#/wallet/${encodeURIComponent(input.wallet)}`);
    seen.walletKeys = await p.locator("div.xpub code").allTextContents();
    seen.derivedBefore = await p.locator("table.derived tbody tr").count();
    await page.selectOption("#derive-family", "dogecoin");
    await page.click("#derive button");
    await page.waitForFunction(() => /^Derived /.test(document.getElementById("message").textContent));
    await page.waitForFunction((n) => document.querySelectorAll("table.derived tbody tr").length > n, seen.derivedBefore);
    seen.derivedAfter = await page.locator("table.derived tbody tr").count();
    seen.derivedMessage = await page.textContent("#message");
    // Audit: refusals with their reason, the filtered download
    p = await visit(page, "audit", "#/audit?outcome=refused");
    seen.refusals = await p.locator("table.audit tbody tr.event").allInnerTexts();
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("button.download.csv")]);
    seen.csv = readFileSync(await download.path(), "utf8");
    seen.csvName = download.suggestedFilename();
    // Policy: the rules drawn, the history, a dry run
    p = await visit(page, "policy", "#/policy");
    seen.rules = await p.locator("li.rule h3").allTextContents();
    seen.history = await p.locator("ol.history li summary").allTextContents();
    await page.selectOption("#t-family", "cosmos");
    await page.waitForSelector(`#t-account option[value="${input.cosmos}"]`, { state: "attached" });
    await page.selectOption("#t-account", input.cosmos);
    await page.selectOption("#t-kind", "sign-transfer");
    await page.fill("#t-request", JSON.stringify(input.dryRun));
    await page.click("#dryrun button[type=submit]");
    await page.waitForSelector("#dryrun-result p");
    seen.dryRun = await page.textContent("#dryrun-result");
    // Token
    p = await visit(page, "token", "#/token");
    seen.token = await p.innerText();
    seen.pwned = await page.evaluate(() => window.pwned === 1 || document.querySelector("b.injected") !== null);
    seen.session = await page.evaluate(() => Object.keys(sessionStorage));
    seen.local = await page.evaluate(() => localStorage.length);
    seen.cookies = (await context.cookies()).length;
    await page.click("#forget");
    seen.afterForget = await page.evaluate(() => sessionStorage.length);
    seen.pageHiddenAfterForget = await page.isHidden("#page");

    // An approver, keyboard only: sign in, approve one request, reject another
    if (input.approver) {
      const other = await browser.newContext();
      const ap = await other.newPage();
      watch(ap);
      await signIn(ap, input.approver, "keyboard");
      p = await visit(ap, "approvals", "#/approvals");
      await ap.waitForSelector(`li.approval[data-id="${input.approve}"]`);
      seen.card = await ap.locator(`li.approval[data-id="${input.approve}"]`).innerText();
      seen.rejectCard = await ap.locator(`li.approval[data-id="${input.reject}"]`).innerText();
      seen.approverPwned = await ap.evaluate(() => window.pwned === 1 || document.querySelector("b.injected") !== null);
      const [saved] = await Promise.all([ap.waitForEvent("download"),
        ap.click(`li.approval[data-id="${input.approve}"] button.download`)]);
      seen.approvalFile = { name: saved.suggestedFilename(), approval: JSON.parse(readFileSync(await saved.path(), "utf8")) };
      seen.tabbedToApprove = await tabTo(ap, `li.approval[data-id="${input.approve}"] button.approve`);
      await ap.keyboard.press("Enter");
      await ap.waitForFunction((id) => document.getElementById("message").textContent.startsWith(`${id}:`), input.approve);
      seen.approveMessage = await ap.textContent("#message");
      await ap.waitForSelector(`li.approval[data-id="${input.reject}"] input.reason`);
      seen.tabbedToReason = await tabTo(ap, `li.approval[data-id="${input.reject}"] input.reason`);
      await ap.keyboard.type(input.rejectReason);
      seen.tabbedToReject = await tabTo(ap, `li.approval[data-id="${input.reject}"] button.reject`, 3);
      await ap.keyboard.press("Enter");
      await ap.waitForFunction((id) => document.getElementById("message").textContent.startsWith(`${id}:`), input.reject);
      seen.rejectMessage = await ap.textContent("#message");
      await other.close();
    }
  }
} catch (e) {
  seen.failure = String(e.stack || e); // what was seen up to here is reported with it
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
