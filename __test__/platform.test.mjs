// A platform without a binary: one clear error naming the platform and the two ways out, instead of
// napi's "npm has a bug related to optional dependencies". Simulated by loading a copy of the
// package without its .node file (and, for an unsupported platform, with process.arch changed).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");

function packageWithoutBinary(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knap-nobinary-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const f of ["package.json", "index.js", "index.d.ts"]) fs.copyFileSync(path.join(root, f), path.join(dir, f));
  fs.cpSync(path.join(root, "lib"), path.join(dir, "lib"), { recursive: true });
  return dir;
}

function load(dir, preload) {
  const args = [];
  if (preload) {
    fs.writeFileSync(path.join(dir, "preload.cjs"), preload);
    args.push("--require", path.join(dir, "preload.cjs"));
  }
  const env = { ...process.env };
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH;
  const script = `import("./lib/index.mjs").then(() => console.log("loaded"), (e) => { console.log(JSON.stringify({ code: e.code, message: e.message, hint: e.hint, cause: String(e.cause?.message ?? "") })); });`;
  const r = spawnSync(process.execPath, [...args, "--input-type=module", "-e", script], { cwd: dir, encoding: "utf8", env });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim());
}

test("a supported platform whose binary is missing: names it and says to reinstall or build from source", (t) => {
  const e = load(packageWithoutBinary(t));
  assert.equal(e.code, "cave_native_binding_missing");
  const [first, second] = e.message.split("\n");
  assert.match(first, /^knap: the native binary for linux-x64-(gnu|musl) is not installed or did not load \(Node v\d+/);
  assert.match(second, /^hint: reinstall so npm fetches the optional package knap-linux-x64-/);
  assert.match(e.hint, /build from source with Rust ≥ 1\.88/);
  assert.doesNotMatch(e.message, /npm has a bug/);
  assert.match(e.cause, /Cannot find native binding/); // napi's error stays reachable as the cause
});

test("an unsupported platform: names it, lists the supported ones, and the two ways out", (t) => {
  const e = load(packageWithoutBinary(t), 'Object.defineProperty(process, "arch", { value: "riscv64" });');
  assert.equal(e.code, "cave_native_binding_missing");
  assert.match(e.message, /^knap: no native binary for linux-riscv64-(gnu|musl) \(Node v[\d.]+\); knap ships binaries for linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64, win32-x64-msvc\n/);
  assert.equal(e.hint, "run on one of those platforms, or build from source with Rust ≥ 1.88 (https://rustup.rs): clone knap, npm ci && npm run build, and depend on that directory");
});

test("every supported target has its npm/ package and is in the napi targets", async () => {
  const { SUPPORTED_TARGETS } = await import("../lib/native.mjs");
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
  assert.equal(pkg.napi.targets.length, SUPPORTED_TARGETS.length);
  for (const target of SUPPORTED_TARGETS) {
    const sub = JSON.parse(fs.readFileSync(path.join(root, "npm", target, "package.json"), "utf8"));
    assert.equal(sub.name, `knap-${target}`);
    assert.equal(sub.main, `knap.${target}.node`);
    assert.equal(sub.version, pkg.version);
  }
});
