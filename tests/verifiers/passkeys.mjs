// Approver passkeys in the console (/ui), in headless Chromium (Debian's, through
// playwright-core) with a CDP virtual authenticator standing for the approver's
// device (ctap2, internal transport, resident keys, user verification): sign in with
// an approve token, enrol a passkey with the operator's code, approve one request and
// reject another with it, keyboard only; and report what was seen (messages, the
// credentials the authenticator holds, the cards' votes, anything that went wrong).
// Input: {url, chromium, token, code, approve, reject, rejectReason}.
import { chromium } from "playwright-core";

const input = JSON.parse(await new Promise((ok) => {
  let data = "";
  process.stdin.on("data", (c) => { data += c; }).on("end", () => ok(data));
}));

const browser = await chromium.launch({ executablePath: input.chromium, headless: true, args: ["--no-sandbox"] });
const seen = { errors: [], foreign: [] };

async function tabTo(page, selector, limit = 400) {
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement && document.activeElement.matches(s), selector)) return true;
  }
  return false;
}

/** The status line once it says something about `prefix` (it starts with it). */
async function message(page, prefix) {
  await page.waitForFunction((p) => document.getElementById("message").textContent.startsWith(p), prefix);
  return page.textContent("#message");
}

try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") seen.errors.push(m.text()); });
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("response", (r) => { if (r.status() >= 500) seen.errors.push(`${r.status()} ${r.url()}`); });
  page.on("request", (r) => { if (!r.url().startsWith(input.url)) seen.foreign.push(r.url()); });
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true,
      isUserVerified: true, automaticPresenceSimulation: true },
  });

  // sign in, keyboard only
  await page.goto(`${input.url}/ui`);
  await page.focus("#token");
  await page.keyboard.type(input.token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#page:not([hidden]) h1");
  seen.secure = await page.evaluate(() => window.isSecureContext);
  seen.menu = await page.locator("#nav a").allTextContents();

  // enrol: the Passkeys page, the code typed, Enter
  seen.tabbedToMenu = await tabTo(page, 'a[data-page="passkeys"]');
  await page.keyboard.press("Enter");
  await page.waitForSelector("#enrol-code");
  seen.tabbedToCode = await tabTo(page, "#enrol-code");
  await page.keyboard.type(input.code);
  await page.keyboard.press("Enter");
  seen.enrolMessage = await message(page, "Passkey");
  await page.waitForSelector("table.credentials tbody tr");
  seen.listed = await page.locator("table.credentials tbody tr").allInnerTexts();
  const held = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
  seen.held = held.credentials.map((c) => ({ resident: c.isResidentCredential, rpId: c.rpId, signCount: c.signCount }));

  // approve one request with the passkey (Tab to its button, Enter)
  await page.evaluate(() => { location.hash = "#/approvals"; });
  await page.waitForSelector(`li.approval[data-id="${input.approve}"] button.approve`);
  seen.card = await page.locator(`li.approval[data-id="${input.approve}"]`).innerText();
  seen.tabbedToApprove = await tabTo(page, `li.approval[data-id="${input.approve}"] button.approve`);
  await page.keyboard.press("Enter");
  seen.approveMessage = await message(page, `${input.approve}:`);
  await page.waitForSelector(`li.approval[data-id="${input.approve}"] p.voted`);
  seen.votedCard = await page.locator(`li.approval[data-id="${input.approve}"] .votes`).innerText();

  // reject another: a reason typed, Tab to Reject, Enter
  await page.waitForSelector(`li.approval[data-id="${input.reject}"] input.reason`);
  seen.tabbedToReason = await tabTo(page, `li.approval[data-id="${input.reject}"] input.reason`);
  await page.keyboard.type(input.rejectReason);
  seen.tabbedToReject = await tabTo(page, `li.approval[data-id="${input.reject}"] button.reject`, 3);
  await page.keyboard.press("Enter");
  seen.rejectMessage = await message(page, `${input.reject}:`);
  const after = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
  seen.signCount = after.credentials.map((c) => c.signCount);
} catch (e) {
  seen.failure = String(e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(seen));
