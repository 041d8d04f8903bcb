// `knap/programmatic-tools` (`@caveman-ai/agent/programmatic-tools`): an agent's tools collapsed
// into one code-cell tool, `caveman_code`. The model writes a short async JavaScript cell; the
// cell calls the tools as async functions, and every call is admitted by the kernel as a nested
// call of the cell (policy input with `parentToolCallId`).
//
// A cell runs in a `vm` context inside a worker thread. That is NOT an isolation boundary: it
// keeps the cell away from Node's APIs by construction, not by a security sandbox.
import { native, codedError } from "./native.mjs";
import { tool, assertToolName } from "./definition.mjs";
import { runCell, codingLimits } from "./program/cell.mjs";
import { PROGRAM_CELLS } from "./program/speculation.mjs";

export const PROGRAMMATIC_TOOL_NAME = "caveman_code";
// The reference's internal pieces of this entry (the speculation scope's class, error wrapping,
// metadata) resolve and say they are not exposed; the speculation itself is built (kernel).
export { ProgrammaticSpeculationScope, createProgrammaticToolErrorWrapper, programmaticToolMetadata } from "./unsupported.mjs";

const CORE = [
  "Use the caveman_code tool for ordinary workspace work: one async JavaScript cell can call several typed tools.",
  "Run independent calls together with Promise.all, filter their results locally, and then print or return only the evidence you need.",
  "Intermediate results stay inside the cell and out of the context, so prefer one cell over many small calls.",
  "Pass each tool exactly one object argument, preferably a JSON literal with double-quoted keys.",
  "Complete literal read calls may start while the cell streams; writes and external tools are never speculated.",
  "Every nested call is validated and policy-checked like a direct call and it fails closed.",
  "Concurrent agents need separate git worktrees.",
].join("\n");

const RECOVERY = [
  "Some results hold <cave-compressed> markers whose original bytes are recoverable.",
  "Call cave_retrieve with the marker's recovery_handle before guessing at any content that it omits or condenses.",
].join("\n");

/** True when `text` already tells the model how to recover compressed results. */
function hasRecoveryGuidance(text) {
  return ["<cave-compressed>", "cave_retrieve", "recovery_handle"].every((part) => text.includes(part)) && /before guessing/i.test(text);
}

/**
 * The cell guidance, then (unless `additional` already has it) the recovery guidance, then
 * `additional`, joined by blank lines.
 */
export function programmaticToolInstructions(additional, options = {}) {
  const toolName = options?.toolName ?? PROGRAMMATIC_TOOL_NAME;
  assertToolName(toolName);
  const extra = typeof additional === "string" ? additional : "";
  const parts = [CORE.replaceAll(PROGRAMMATIC_TOOL_NAME, toolName)];
  if (!hasRecoveryGuidance(extra)) parts.push(RECOVERY);
  if (extra.trim() !== "") parts.push(extra);
  return parts.join("\n\n");
}

const CELL_INPUT = Object.freeze({
  type: "object",
  properties: Object.freeze({ code: Object.freeze({ type: "string" }) }),
  required: Object.freeze(["code"]),
  additionalProperties: false,
});

/**
 * `createProgrammaticToolRuntime(direct, { instructions?, speculate = true, toolName = "caveman_code" })`:
 * `{ definition, wrapModels, wrapStreamFn, stats, close }`, where `definition` is `direct` with
 * one cell tool in place of its tools.
 */
export function createProgrammaticToolRuntime(direct, options = {}) {
  const { instructions, speculate = true, toolName = PROGRAMMATIC_TOOL_NAME } = options ?? {};
  if (direct?.sandbox !== "host") throw codedError("cave_programmatic_tools_require_host_sandbox");
  const tools = Array.from(direct.tools ?? []);
  if (tools.length === 0) throw codedError("cave_programmatic_tools_required");
  for (const t of tools) {
    if (t.runtime !== undefined && t.runtime?.kind !== "subagent") throw codedError("cave_programmatic_tool_runtime_unsupported");
  }
  assertToolName(toolName);

  const nested = new Map(tools.map((t) => [t.name, t]));
  const nativeTools = new native.NativeProgramTools(
    tools.map((t) => ({ name: t.name, description: t.description, inputJson: JSON.stringify(t.input ?? {}), allowRepeat: Boolean(t.allowRepeat) })),
  );
  const counters = { launched: 0, claimed: 0, missed: 0, abandoned: 0 };
  const runtime = { nativeTools, nested, speculate: Boolean(speculate), stats: counters };
  const codeTool = tool({
    name: toolName,
    description: nativeTools.description(),
    input: CELL_INPUT,
    effect: "idempotent",
    result: "inline",
    timeoutMs: codingLimits().programToolTimeoutMs,
    nestedTools: tools,
    speculativeTools: speculate ? tools.filter((t) => t.speculative).map((t) => t.name) : [],
    execute: (input, signal, context) => runCell(runtime, input?.code, signal, context),
  });
  // The kernel streams this tool's calls with speculation (when on) and counts into `stats()`.
  PROGRAM_CELLS.set(codeTool, runtime);
  const definition = Object.freeze({
    ...direct,
    instructions: instructions ?? programmaticToolInstructions(typeof direct.instructions === "string" ? direct.instructions : undefined, { toolName }),
    tools: Object.freeze([codeTool]),
  });
  return Object.freeze({
    definition,
    wrapModels: (models) => models,
    wrapStreamFn: (streamFn) => streamFn,
    stats: () => Object.freeze({ ...counters }),
    close: async () => {},
  });
}
