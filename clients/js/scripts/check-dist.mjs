// dist/ is committed (so `npm install ./clients/js` works without a build):
// check it is exactly what a fresh `tsc` build of src/ gives.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = mkdtempSync(join(tmpdir(), "chainkeys-dist-"));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");

function files(dir) {
  const all = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) all.push(...files(p));
    else all.push(p);
  }
  return all;
}

try {
  execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json"), "--outDir", out], { stdio: "inherit" });
  const fresh = files(out).map((f) => relative(out, f)).sort();
  const committed = files(join(root, "dist")).map((f) => relative(join(root, "dist"), f)).sort();
  const problems = [];
  for (const f of new Set([...fresh, ...committed])) {
    if (!fresh.includes(f)) problems.push(`dist/${f}: not built from src (stale file)`);
    else if (!committed.includes(f)) problems.push(`dist/${f}: missing`);
    else if (!readFileSync(join(out, f)).equals(readFileSync(join(root, "dist", f)))) problems.push(`dist/${f}: differs`);
  }
  if (problems.length) {
    console.error("dist/ is not a fresh build of src/ (run `npm run build` and commit dist/):\n  " + problems.join("\n  "));
    process.exit(1);
  }
  console.log(`dist/ matches a fresh tsc build (${fresh.length} files)`);
} finally {
  rmSync(out, { recursive: true, force: true });
}
