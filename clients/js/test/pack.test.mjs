// `npm pack` gives a tarball that installs into a fresh project and imports:
// the main entry with no peer installed, the WharfKit entry once its peers are.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
const node = (code, cwd) => execFileSync(process.execPath, ["--input-type=module", "-e", code], { cwd, encoding: "utf8" });
let dir, tgz;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "chainkeys-pack-"));
  const out = JSON.parse(npm(["pack", "--json", "--pack-destination", dir], pkg));
  tgz = join(dir, out[0].filename);
  const files = out[0].files.map((f) => f.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/wharfkit.d.ts") && files.includes("README.md"));
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")), files.join(" "));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
});
after(() => dir && rmSync(dir, { recursive: true, force: true }));

test("the tarball installs with no peer, and the main entry imports", () => {
  npm(["install", tgz, "--no-audit", "--no-fund", "--offline"], dir);
  assert.ok(!existsSync(join(dir, "node_modules", "@cosmjs")), "optional peers are not installed");
  const names = node(`import * as m from "@chainkeys/signers"; console.log(Object.keys(m).sort().join(","))`, dir).trim();
  assert.equal(names, "ApprovalPending,ChainkeysClient,ChainkeysCosmosMultisig,ChainkeysCosmosSigner,ChainkeysError,ChainkeysSignatureProvider,challengeBytes,coinOf,signPsbt,verifyApproval");
  const sub = node(`import { ChainkeysCosmosSigner } from "@chainkeys/signers/cosmjs"; import { signPsbt } from "@chainkeys/signers/bitcoinjs";
    import { ChainkeysSignatureProvider } from "@chainkeys/signers/eosjs"; import { ChainkeysError } from "@chainkeys/signers/errors";
    console.log(typeof ChainkeysCosmosSigner, typeof signPsbt, typeof ChainkeysSignatureProvider, typeof ChainkeysError)`, dir).trim();
  assert.equal(sub, "function function function function");
});

test("with its peers installed, the WharfKit entry imports and type-checks", () => {
  npm(["install", "@wharfkit/session@1.7.0", "@wharfkit/antelope@1.2.0", "@cosmjs/proto-signing@0.39.0", "@cosmjs/amino@0.39.0",
    "--no-audit", "--no-fund", "--prefer-offline"], dir);
  const out = node(`import { ChainkeysWalletPlugin } from "@chainkeys/signers/wharfkit";
    const p = new ChainkeysWalletPlugin({ url: "http://x", token: "t", account: "chainkeyjs11" });
    console.log(p.id, p.metadata.name, p.permission)`, dir).trim();
  assert.equal(out, "chainkeys chainkeys active");
  writeFileSync(join(dir, "consumer.ts"), `
import type { OfflineDirectSigner } from "@cosmjs/proto-signing";
import type { OfflineAminoSigner } from "@cosmjs/amino";
import type { WalletPlugin } from "@wharfkit/session";
import { ChainkeysCosmosSigner } from "@chainkeys/signers/cosmjs";
import { ChainkeysWalletPlugin } from "@chainkeys/signers/wharfkit";
import { ApprovalPending, ChainkeysError } from "@chainkeys/signers/errors";
const opts = { url: "http://x", token: "t", account: "cosmos1..." };
const direct: OfflineDirectSigner = new ChainkeysCosmosSigner(opts);
const amino: OfflineAminoSigner = new ChainkeysCosmosSigner(opts);
const plugin: WalletPlugin = new ChainkeysWalletPlugin(opts);
function handle(e: unknown): string | undefined {
  if (e instanceof ApprovalPending) return e.id;
  if (e instanceof ChainkeysError) return e.code + e.status;
  return undefined;
}
export { direct, amino, plugin, handle };
`);
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: {
    module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, skipLibCheck: true,
    lib: ["ES2022", "DOM"], types: [] }, files: ["consumer.ts"] }));
  execFileSync(process.execPath, [join(pkg, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { cwd: dir, encoding: "utf8" });
});
