// Drives the console (/ui) in headless Chromium through what a new user met (issue 55)
// and reports what was seen: an audit row's details opened (its lines, its columns'
// widths before and after), a family's page by its address, each account's network,
// create on a main network (a second step naming it) and on a testnet (none), EOS
// create, the empty Wallets page's hint, and an approver's card after its vote.
// Input: {url, chromium, shots?, tag?, token, approver, approver2, refused, pending}.
// With walk "units": the amounts of a Litecoin approval, the policy's caps and the daily
// cap bars, each named by the unit it counts (input {…, token, pending}). With walk
// "more": the dry-run form (an account select, the endpoint's example prefilled, fields
// aligned, a deny naming its rule once), Cancel for the requester (none for an
// approver), and a wallet's key formats (input {…, token, approver, pending, wallet}).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({ executablePath: input.chromium, headless: true, args: ["--no-sandbox"] });
const seen = { errors: [], shots: [], failures: {}, axe: {} };

function watch(page) {
  page.on("console", (m) => { if (m.type() === "error") seen.errors.push(m.text()); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("response", (r) => { if (r.status() >= 500) seen.errors.push(`${r.status()} ${r.url()}`); });
}

async function signIn(token) {
  const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  watch(page);
  await page.goto(`${input.url}/ui`);
  await page.fill("#token", token);
  await page.click("#use");
  await page.waitForSelector("#page:not([hidden]) h1");
  return page;
}

/** Go to a route (typed in the address bar: a new load) and wait until it is drawn. */
async function open(page, name, hash) {
  await page.evaluate(() => { delete document.body.dataset.painted; });
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction(() => document.body.dataset.painted !== undefined && !document.getElementById("page").hasAttribute("aria-busy"));
  await shot(page, name);
}

/** axe-core's serious and critical findings on the page as it is now. */
async function axe(page, name) {
  await page.evaluate(AXE);
  seen.axe[name] = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => ["serious", "critical"].includes(v.impact)).map((v) => `${v.id}: ${v.help}`);
  });
}

async function shot(page, name) {
  if (!input.shots) return;
  const path = `${input.shots}/console-pages-${input.tag || "x"}-${name}.png`;
  await page.screenshot({ path, fullPage: true });
  seen.shots.push(path);
}

/** How many lines the text of `selector` (its first match) takes. */
const lines = (page, selector) => page.evaluate((s) => {
  const range = document.createRange();
  range.selectNodeContents(document.querySelector(s));
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}, selector);

const widths = (page) => page.locator("table.audit thead th").evaluateAll((ths) => ths.map((t) => Math.round(t.getBoundingClientRect().width)));

/** Submit the create form on `network`; the confirm step's text (null: none shown). */
async function create(page, network) {
  await page.selectOption("#create-network", network);
  const before = await page.evaluate(() => location.hash);
  await page.click("#create button[type=submit]");
  await page.waitForFunction((h) => location.hash !== h || !document.getElementById("create-confirm").hidden, before);
  return (await page.isVisible("#create-confirm")) ? page.textContent("#create-confirm") : null;
}

async function created(page) {
  await page.waitForFunction(() => location.hash.startsWith("#/account/") && !document.getElementById("page").hasAttribute("aria-busy"));
  return { hash: await page.evaluate(() => decodeURIComponent(location.hash)), message: await page.textContent("#message") };
}

/** One part of the walk: a failure is reported under its name, and the next part runs.
 * A part named `walk:name` runs only in that walk (input.walk); the others without one. */
async function part(name, walk) {
  const group = name.includes(":") ? name.split(":")[0] : undefined;
  if (group !== input.walk) return;
  try {
    await walk();
  } catch (e) {
    seen.failures[name] = String(e.stack || e).slice(0, 2000);
  }
}

try {
  const page = await signIn(input.token);

  // Audit: a refusal's details open under its row, in lines, the columns as they were
  await part("audit", async () => {
    await open(page, "audit", "#/audit?outcome=refused");
    const row = `table.audit tr.event[data-id="${input.refused}"]`;
    seen.auditRows = await page.locator("table.audit tbody tr.event").count();
    seen.widthsBefore = await widths(page);
    seen.detailHiddenBefore = await page.isHidden(`${row} + tr.detail`);
    await page.click(`${row} button.details`, { timeout: 5000 });
    await page.waitForSelector(`${row} + tr.detail pre.json`, { state: "visible" });
    seen.widthsAfter = await widths(page);
    seen.expanded = await page.getAttribute(`${row} button.details`, "aria-expanded");
    seen.details = await page.innerText(`${row} + tr.detail pre`);
    seen.detailSpan = await page.getAttribute(`${row} + tr.detail td`, "colspan");
    const box = (s) => page.locator(s).first().evaluate((e) => { const r = e.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.width)]; });
    seen.preBox = await box(`${row} + tr.detail pre`);
    seen.tableBox = await box("table.audit");
    seen.timeLines = await lines(page, `${row} td.time`);
    seen.outcomeLines = await lines(page, `${row} td:nth-child(3)`);
    seen.outcome = await page.textContent(`${row} td:nth-child(3)`);
    await shot(page, "audit-details");
    await axe(page, "audit-details");
    await page.click(`${row} button.details`);
    seen.detailHiddenAgain = await page.isHidden(`${row} + tr.detail`);
  });

  // Policy: the document, in lines too
  await part("policy", async () => {
    await open(page, "policy", "#/policy");
    await page.click("section.policy > details > summary", { timeout: 5000 });
    seen.policyDocument = await page.innerText("section.policy > details pre");
  });

  // Accounts: a family by its address, with a query after it
  await part("route", async () => {
    await open(page, "litecoin-search", "#/accounts/litecoin?prefix=ltc1");
    seen.tab = await page.textContent("nav.tabs a[aria-current]");
    seen.prefixValue = await page.inputValue("#prefix");
    seen.litecoinRows = await page.locator("table.accounts tbody tr td:first-child").allTextContents();
  });
  // each account's network (looked up after the page is drawn)
  await part("networks", async () => {
    await open(page, "dogecoin", "#/accounts/dogecoin");
    await page.waitForFunction(() => document.querySelectorAll("table.accounts [aria-busy]").length === 0);
    seen.columns = await page.locator("table.accounts thead th").allTextContents();
    seen.networks = await page.locator("table.accounts tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  });

  // Create: on a main network a second step names it; Cancel makes nothing
  await part("create", async () => {
    await open(page, "litecoin", "#/accounts/litecoin");
    seen.mainnetConfirm = await create(page, "mainnet");
    await shot(page, "create-confirm");
    await axe(page, "create-confirm");
    seen.confirmFocused = await page.evaluate(() => document.activeElement && document.activeElement.textContent);
    await page.click("#create-confirm button:not(.danger)");
    seen.confirmHiddenAfterCancel = await page.isHidden("#create-confirm");
    seen.hashAfterCancel = await page.evaluate(() => location.hash);
    seen.mainnetConfirmAgain = await create(page, "mainnet");
    await page.click("#create-confirm button.danger");
    seen.mainnetCreated = await created(page);
    // on a testnet: made at once
    await open(page, "litecoin-again", "#/accounts/litecoin");
    seen.testnetConfirm = await create(page, "testnet");
    seen.testnetCreated = await created(page);
  });
  // EOS has create too
  await part("eos", async () => {
    await open(page, "eos", "#/accounts/eos");
    seen.eosForm = await page.locator("#create").count();
    seen.eosConfirm = await create(page, "eos");
    await page.click("#create-confirm button.danger");
    seen.eosCreated = await created(page);
  });

  // Wallets: the empty page says what to do
  await part("wallets", async () => {
    await open(page, "wallets-empty", "#/wallets");
    seen.walletsEmpty = await page.textContent("#page p.empty");
  });

  // An approver: after its vote the card says so, and offers no Approve again
  await part("approvals", async () => {
    const ap = await signIn(input.approver);
    const card = `li.approval[data-id="${input.pending}"]`;
    await open(ap, "approvals", "#/approvals");
    seen.approveBefore = await ap.locator(`${card} button.approve`).count();
    await ap.click(`${card} button.approve`);
    await ap.waitForFunction((id) => document.getElementById("message").textContent.startsWith(`${id}:`), input.pending);
    await ap.waitForFunction((c) => !document.getElementById("page").hasAttribute("aria-busy") && document.querySelector(c), card);
    seen.approveMessage = await ap.textContent("#message");
    seen.approveAfter = await ap.locator(`${card} button.approve`).count();
    seen.rejectAfter = await ap.locator(`${card} button.reject`).count();
    seen.voted = await ap.locator(`${card} p.voted`).count() ? await ap.textContent(`${card} p.voted`) : null;
    seen.stateAfter = await ap.textContent(`${card} .state`);
    await shot(ap, "approvals-voted");
    await axe(ap, "approvals-voted");
    // another person of the group still votes
    const other = await signIn(input.approver2);
    await open(other, "approvals-other", "#/approvals");
    seen.otherApprove = await other.locator(`${card} button.approve`).count();
  });

  // Units: a Litecoin approval's amounts and fee in LTC beside litoshi, never "900000 LTC"
  await part("units:approvals", async () => {
    const card = `li.approval[data-id="${input.pending}"]`;
    await open(page, "units-approvals", "#/approvals");
    seen.card = await page.innerText(card);
    await axe(page, "units-approvals");
  });
  // the policy's caps as people read them, the document as it was set
  await part("units:policy", async () => {
    await open(page, "units-policy", "#/policy");
    seen.rules = await page.innerText("ol.rules");
  });
  // the daily cap bars
  await part("units:overview", async () => {
    await open(page, "units-overview", "#/overview");
    seen.caps = await page.innerText("table.caps");
  });

  // The dry run: the family's accounts to choose from, its endpoints, the example body
  await part("more:dryrun", async () => {
    await open(page, "more-policy", "#/policy");
    await page.selectOption("#t-family", "litecoin");
    await page.waitForFunction(() => document.querySelector("#t-account option") && document.querySelector("#t-account option").value !== "" && document.querySelectorAll("#t-kind option").length > 0);
    seen.accountTag = await page.evaluate(() => document.getElementById("t-account").tagName);
    seen.accounts = await page.locator("#t-account option").evaluateAll((os) => os.map((o) => o.value));
    seen.kinds = await page.locator("#t-kind option").evaluateAll((os) => os.map((o) => o.value));
    await page.selectOption("#t-kind", "sign-psbt");
    seen.body = await page.inputValue("#t-request");
    const box = (s) => page.locator(s).evaluate((e) => { const r = e.getBoundingClientRect(); return [Math.round(r.top), Math.round(r.height)]; });
    seen.controls = [await box("#t-family"), await box("#t-account"), await box("#t-kind")];
    seen.labels = [await box("label[for=t-family]"), await box("label[for=t-account]"), await box("label[for=t-kind]")];
    await page.click("#dryrun button[type=submit]");
    await page.waitForSelector("#dryrun-result p.decision");
    seen.decision = await page.innerText("#dryrun-result p.decision");
    seen.decidedBy = await page.locator("#dryrun-result p.decided-by").count() ? await page.innerText("#dryrun-result p.decided-by") : null;
    seen.result = await page.innerText("#dryrun-result");
    await shot(page, "more-dryrun");
    await axe(page, "more-dryrun");
  });
  // The requester cancels its own pending request; an approver is offered no Cancel
  await part("more:cancel", async () => {
    const card = `li.approval[data-id="${input.pending}"]`;
    const ap = await signIn(input.approver);
    await open(ap, "more-approver", "#/approvals");
    seen.approverCancel = await ap.locator(`${card} button.cancel`).count();
    await open(page, "more-requester", "#/approvals");
    seen.requesterCancel = await page.locator(`${card} button.cancel`).count();
    await axe(page, "more-requester");
    await page.click(`${card} button.cancel`);
    await page.waitForFunction((id) => document.getElementById("message").textContent.startsWith(`${id}:`), input.pending);
    await page.waitForFunction(() => !document.getElementById("page").hasAttribute("aria-busy"));
    seen.cancelMessage = await page.textContent("#message");
    seen.cardAfter = await page.locator(card).count();
  });
  // A wallet's keys in each format the API offers (Litecoin native segwit: zpub too)
  await part("more:wallet", async () => {
    await open(page, "more-wallet", `#/wallet/${encodeURIComponent(input.wallet)}`);
    seen.formats = await page.locator("div.xpub").evaluateAll((ds) => ds.map((d) => [
      d.dataset.family, d.dataset.type, d.querySelector("select.xpub-format") ? [...d.querySelectorAll("select.xpub-format option")].map((o) => o.value) : null,
      d.querySelector(".xpub-key code").textContent]));
    const block = 'div.xpub[data-family="litecoin"][data-type="p2wpkh"]';
    const before = await page.textContent(`${block} .xpub-key code`);
    await page.selectOption(`${block} select.xpub-format`, "zpub");
    await page.waitForFunction(([b, was]) => document.querySelector(`${b} .xpub-key code`).textContent !== was, [block, before]);
    seen.zpub = await page.textContent(`${block} .xpub-key code`);
    seen.zpubButton = await page.getAttribute(`${block} .xpub-key button`, "aria-label");
    await shot(page, "more-wallet");
    await axe(page, "more-wallet");
  });
} catch (e) {
  seen.failure = String(e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
