// A tool's settled value as the text the model reads (the reference's `settleToolOutput`). No
// native import: sandbox workers (lib/sandbox-worker.mjs) serialize with it before a value
// crosses the IPC channel, so the parent and the worker agree byte for byte.

/** A string as-is; anything else as JSON (`undefined` → `"null"`); unserializable → `cave_tool_result_not_json_safe:<name>`. */
export function serializeToolResult(name, value) {
  if (typeof value === "string") return value;
  if (value === undefined) return "null";
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    throw new Error(`cave_tool_result_not_json_safe:${name}`);
  }
  if (text === undefined) throw new Error(`cave_tool_result_not_json_safe:${name}`);
  return text;
}
