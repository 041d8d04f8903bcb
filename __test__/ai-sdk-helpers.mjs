// Shared helpers of the knap/ai-sdk tests: scripted mock models, temporary workspaces, a plain
// Node Sandbox (to check that other sandbox objects work with createAgentTools too).
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, readFileSync, statSync, readdirSync, unlinkSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { execFile } from "node:child_process";
import { generateText, streamText, stepCountIs, simulateReadableStream } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { createLocalSandbox, createAgentTools } from "knap/ai-sdk";

export const usage = (i = 10, o = 5) => ({
  inputTokens: { total: i, noCache: i, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: o, text: o, reasoning: undefined },
});

let callCounter = 0;
/** A tool call of the mock model; `input` is an object (sent to the SDK as a JSON string). */
export const call = (toolName, input, toolCallId = `call_${++callCounter}`) => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) });

/** One model turn: an array of tool calls, or a string (final text). */
function turn(step, modelUsage) {
  if (typeof step === "string") {
    return { content: [{ type: "text", text: step }], finishReason: { unified: "stop", raw: undefined }, usage: modelUsage ?? usage(), warnings: [] };
  }
  return { content: step, finishReason: { unified: "tool-calls", raw: undefined }, usage: modelUsage ?? usage(), warnings: [] };
}

/** A MockLanguageModelV3 that plays `steps` in order (then keeps answering "done"). */
export function scripted(steps, { modelId = "mock-model-id", usagePerStep } = {}) {
  let i = 0;
  return new MockLanguageModelV3({
    modelId,
    doGenerate: async () => {
      const step = i < steps.length ? steps[i] : "done";
      i++;
      return turn(step, usagePerStep);
    },
  });
}

/** Streams the same scripted turns through `doStream`. */
export function scriptedStream(steps, { modelId = "mock-model-id" } = {}) {
  let i = 0;
  return new MockLanguageModelV3({
    modelId,
    doStream: async () => {
      const step = i < steps.length ? steps[i] : "done";
      i++;
      const chunks = [];
      if (typeof step === "string") {
        chunks.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: step }, { type: "text-end", id: "t" });
        chunks.push({ type: "finish", finishReason: { unified: "stop", raw: undefined }, usage: usage() });
      } else {
        chunks.push(...step);
        chunks.push({ type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage: usage() });
      }
      return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) };
    },
  });
}

/**
 * Runs a real `generateText` loop in which the model calls `calls` (one step, concurrently),
 * then answers; returns the tool outputs in call order, and what the model saw.
 */
export async function runTools(tools, calls, options = {}) {
  const model = scripted([calls, "done"]);
  const result = await generateText({ model, tools, prompt: options.prompt ?? "go", stopWhen: stepCountIs(options.steps ?? 5), ...options.generate });
  const step = result.steps[0];
  const outputs = calls.map((c) => {
    const r = step.content.find((p) => (p.type === "tool-result" || p.type === "tool-error") && p.toolCallId === c.toolCallId);
    return r?.type === "tool-error" ? { __toolError: r.error instanceof Error ? r.error.message : String(r.error) } : r?.output;
  });
  return { outputs, result, model };
}

/** One tool call through a generateText loop; returns its output. */
export async function runTool(tools, name, input) {
  const c = call(name, input);
  const { outputs } = await runTools(tools, [c]);
  return outputs[0];
}

export async function runStream(tools, calls) {
  const model = scriptedStream([calls, "done"]);
  const result = streamText({ model, tools, prompt: "go", stopWhen: stepCountIs(5) });
  const parts = [];
  for await (const part of result.fullStream) parts.push(part);
  return { parts, text: await result.text, steps: await result.steps };
}

export function tempWorkspace(files = {}) {
  const dir = mkdtempSync(join(tmpdir(), "knap-ai-sdk-"));
  for (const [path, content] of Object.entries(files)) {
    const p = join(dir, path);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, content);
  }
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A plain Node implementation of bashkit's Sandbox interface (no knap native code). */
export function nodeSandbox(cwd) {
  const full = (p) => resolve(cwd, p);
  return {
    workingDirectory: cwd,
    exec(command, options = {}) {
      const started = performance.now();
      return new Promise((done) => {
        execFile("/bin/sh", ["-c", command], { cwd: options.cwd ?? cwd, timeout: options.timeout ?? 0, maxBuffer: 1 << 30, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
          const interrupted = Boolean(error?.killed);
          const exitCode = error ? (typeof error.code === "number" ? error.code : interrupted ? 124 : 1) : 0;
          done({ stdout: String(stdout), stderr: String(stderr), exitCode, durationMs: Math.round(performance.now() - started), interrupted });
        });
      });
    },
    async readFile(p) {
      return readFileSync(full(p), "utf8");
    },
    async writeFile(p, content) {
      mkdirSync(dirname(full(p)), { recursive: true });
      writeFileSync(full(p), content);
    },
    async readDir(p) {
      return readdirSync(full(p)).sort();
    },
    async fileExists(p) {
      try {
        statSync(full(p));
        return true;
      } catch {
        return false;
      }
    },
    async isDirectory(p) {
      try {
        return statSync(full(p)).isDirectory();
      } catch {
        return false;
      }
    },
    async deleteFile(p) {
      unlinkSync(full(p));
    },
    async rename(a, b) {
      renameSync(full(a), full(b));
    },
    async destroy() {},
  };
}

/** Replaces Date.now for the duration of `fn` (TTL tests without waiting). */
export async function withClock(start, fn) {
  const real = Date.now;
  let now = start;
  Date.now = () => now;
  try {
    return await fn((ms) => {
      now += ms;
    });
  } finally {
    Date.now = real;
  }
}

/** A temp workspace with `files`, knap's local sandbox on it, and `createAgentTools(sandbox, config)`. */
export async function setup(files, config) {
  const ws = tempWorkspace(files);
  const sandbox = createLocalSandbox({ workingDirectory: ws.dir });
  const result = await createAgentTools(sandbox, config);
  return { ws, sandbox, ...result };
}
