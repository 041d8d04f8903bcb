// The recovery proof: compress the largest recorded tool output with the external Caveman
// engine, retrieve it by handle and compare digests. knap ships no engine; without one on PATH
// (or `engineBin` / CAVEMAN_ENGINE_BIN) the proof says the engine is unavailable.
import { createRequire } from "node:module";
import { native, codedError } from "../native.mjs";

const TRANSFORM_ID = "caveman.engine.terminal.v1";
const ENGINE_TIMEOUT_MS = 30_000;

const require = createRequire(import.meta.url);
const sha256 = (bytes) => native.sha256Hex(bytes);

function runEngine(bin, args, stdin) {
  return new Promise((resolve, reject) => {
    let child;
    try {
      child = require("node:child_process").spawn(bin, args, { stdio: ["pipe", "pipe", "pipe"], timeout: ENGINE_TIMEOUT_MS });
    } catch (error) {
      reject(error);
      return;
    }
    const stdout = [];
    const stderr = [];
    child.stdout.on("data", (chunk) => stdout.push(chunk));
    child.stderr.on("data", (chunk) => stderr.push(chunk));
    child.on("error", (error) =>
      reject(codedError("coding_recovery_engine_unavailable", `caveman-code: the Caveman engine is not available (${bin}: ${error.code ?? error.message})`)),
    );
    child.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(stdout));
      else reject(new Error(`caveman-code: ${bin} ${args[0]} exited ${code}: ${Buffer.concat(stderr).toString("utf8").trim()}`));
    });
    child.stdin.on("error", () => {});
    child.stdin.end(stdin);
  });
}

/**
 * `proveRecovery(session)`: the round trip of `agent.samples[0]` through
 * `<engine> compress --type terminal` (JSON `{handle, compressed, tokensBefore?, tokensAfter?}` on
 * stdout) and `<engine> retrieve <handle>` (the original bytes on stdout).
 */
export async function proveRecovery(session) {
  const sample = session.agent.samples[0];
  if (!sample) throw new Error("caveman-code: no tool output recorded yet to prove recovery on");
  const engine = session.options.engineBin ?? process.env.CAVEMAN_ENGINE_BIN ?? "caveman-engine";
  const original = Buffer.from(sample.text, "utf8");
  const base = { transformID: TRANSFORM_ID, originalSHA256: sha256(original), originalBytes: original.length, segment: sample.label };
  const reply = JSON.parse((await runEngine(engine, ["compress", "--type", "terminal"], original)).toString("utf8"));
  const compressedBytes = Buffer.byteLength(String(reply.compressed ?? ""));
  const tokens = {
    ...(Number.isFinite(reply.tokensBefore) ? { tokensBefore: reply.tokensBefore } : {}),
    ...(Number.isFinite(reply.tokensAfter) ? { tokensAfter: reply.tokensAfter } : {}),
  };
  if (typeof reply.handle !== "string" || compressedBytes >= original.length) {
    return { ...base, outcome: "not_smaller", compressedBytes, ...tokens };
  }
  const recovered = await runEngine(engine, ["retrieve", reply.handle], Buffer.alloc(0));
  const recoveredSHA256 = sha256(recovered);
  return {
    ...base,
    outcome: recoveredSHA256 === base.originalSHA256 ? "recovered" : "mismatch",
    handle: reply.handle,
    recoveredSHA256,
    compressedBytes,
    ...tokens,
  };
}

/** One line per outcome (the reference's text). */
export function formatRecoveryProof(proof) {
  if (proof.outcome === "recovered") {
    return `recovery proof: ${proof.segment} round-trip OK (sha256 match ${proof.originalSHA256.slice(0, 12)})`;
  }
  if (proof.outcome === "not_smaller") {
    return `recovery proof: ${proof.segment} not compressed — the engine kept the original bytes, nothing to recover`;
  }
  return `recovery proof: ${proof.segment} FAILED (sha256 mismatch) — the plan falls back to the original body`;
}
