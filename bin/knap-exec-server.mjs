#!/usr/bin/env node
// `npx knap-exec-server --workspace DIR --listen 127.0.0.1:PORT --token-file FILE`: runs the
// knap-exec-server binary with the same arguments, passing signals on and exiting as it does.
// The binary is, in order: $KNAP_EXEC_SERVER_BINARY; `knap-exec-server` in the package root
// (`npm run build` puts it there, and the published tarball carries the linux-x64-gnu one);
// `knap-exec-server` in the platform package (knap-<platform>, as for the addon); a checkout's
// target/release.
import { spawn } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function platformPackage() {
  let name = `${process.platform}-${process.arch}`;
  if (process.platform === "linux") name += process.report?.getReport?.().header?.glibcVersionRuntime ? "-gnu" : "-musl";
  try {
    return path.join(path.dirname(createRequire(import.meta.url).resolve(`knap-${name}/package.json`)), "knap-exec-server");
  } catch {
    return undefined;
  }
}

const candidates = process.env.KNAP_EXEC_SERVER_BINARY
  ? [process.env.KNAP_EXEC_SERVER_BINARY]
  : [path.join(root, "knap-exec-server"), platformPackage(), path.join(root, "target", "release", "knap-exec-server")].filter(Boolean);
const binary = candidates.find((p) => fs.existsSync(p));
if (!binary) {
  console.error(
    `knap-exec-server: no binary for ${process.platform}-${process.arch} (looked in ${candidates.join(", ")}).\n` +
      "Build it in a knap checkout with `npm run build` (needs a Rust toolchain), or set KNAP_EXEC_SERVER_BINARY to its path.",
  );
  process.exit(127);
}
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("error", (e) => {
  console.error(`knap-exec-server: cannot run ${binary}: ${e.message}`);
  process.exit(126);
});
child.on("exit", (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
