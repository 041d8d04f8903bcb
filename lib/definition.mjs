// Definition primitives: agent(), tool(), schema, output(), subagent(), context(), file().
// Plain frozen objects with the reference's fields and validation messages; the kernel reads
// them when a run starts.

import { withHint } from "./hint.mjs";

const OPTIONAL = Symbol.for("knap.schema.optional");
const EFFECTS = new Set(["read", "write", "idempotent", "external"]);
const SANDBOXES = new Set(["required", "fixture", "host"]);
const RESULT_POLICIES = new Set(["auto", "inline", "page", "compress", "exact_ccr"]);
const AGENT_ID = /^[a-z0-9][a-z0-9_-]{0,95}$/;
const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,127}$/;
const SHA256 = /^[a-f0-9]{64}$/;
const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

function fail(message) {
  throw new Error(`caveman agent: ${message}`);
}

/** `fail` with what to do on a second line (`error.hint`). */
function failWithHint(message, hint) {
  throw withHint(new Error(`caveman agent: ${message}`), hint);
}

/** The hint for a value outside a closed set (this module loads without the addon, so no nearest-name match). */
const oneOf = (field, values) => `${field} is one of ${[...values].map((v) => JSON.stringify(v)).join(", ")}`;

const isPositiveInteger = (n) => Number.isSafeInteger(n) && n > 0;

function strip(schemaObject) {
  const { [OPTIONAL]: _optional, ...rest } = schemaObject;
  return rest;
}

/** JSON Schema builders with TypeBox's names (`schema.object`, `schema.string`, …). */
export const schema = Object.freeze({
  any: (options = {}) => ({ ...options }),
  string: (options = {}) => ({ ...options, type: "string" }),
  number: (options = {}) => ({ ...options, type: "number" }),
  integer: (options = {}) => ({ ...options, type: "integer" }),
  boolean: (options = {}) => ({ ...options, type: "boolean" }),
  null: (options = {}) => ({ ...options, type: "null" }),
  literal: (value, options = {}) => ({ ...options, const: value, type: value === null ? "null" : typeof value }),
  array: (items, options = {}) => ({ ...options, type: "array", items: strip(items) }),
  union: (variants, options = {}) => ({ ...options, anyOf: variants.map(strip) }),
  enum: (values, options = {}) => ({ ...options, enum: [...values] }),
  optional: (inner) => ({ ...inner, [OPTIONAL]: true }),
  object: (properties, options = {}) => {
    const props = {};
    const required = [];
    for (const [key, value] of Object.entries(properties)) {
      props[key] = strip(value);
      if (!value[OPTIONAL]) required.push(key);
    }
    return { ...options, type: "object", properties: props, ...(required.length ? { required } : {}) };
  },
});

function deepFreeze(value) {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze(value[key]);
  }
  return value;
}

/** Converts a Standard Schema (zod 4 etc.) or a JSON Schema into plain JSON Schema. */
function inputJsonSchema(input, options) {
  if (options.inputJSONSchema) return JSON.parse(JSON.stringify(options.inputJSONSchema));
  if (input && typeof input === "object" && input["~standard"]) {
    const toJSON = input["~standard"].jsonSchema?.input ?? input.toJSONSchema;
    if (typeof input.toJSONSchema === "function") return input.toJSONSchema();
    if (typeof toJSON === "function") return toJSON({ target: "draft-07" });
    const zod3 = input["~standard"].vendor === "zod" && input._def !== undefined && input._zod === undefined;
    failWithHint(
      `tool ${JSON.stringify(options.name)} input is a Standard Schema without JSON Schema; pass inputJSONSchema`,
      zod3
        ? "this is a zod 3 schema: zod 4 schemas carry their JSON Schema (npm install zod@^4, then use it as is), or pass inputJSONSchema yourself"
        : "pass inputJSONSchema (the same schema as JSON Schema), or use a library whose schemas expose it (zod 4, valibot with @valibot/to-json-schema)",
    );
  }
  // The AI SDK's jsonSchema()/zodSchema() objects carry the JSON Schema they were made from.
  if (input && typeof input === "object" && input[Symbol.for("vercel.ai.schema")] === true && input.jsonSchema && typeof input.jsonSchema.then !== "function") {
    return JSON.parse(JSON.stringify(input.jsonSchema));
  }
  return JSON.parse(JSON.stringify(input ?? { type: "object", properties: {} }));
}

/** Throws `caveman agent: invalid tool name "<name>"` unless `name` is a valid tool name. */
export function assertToolName(name) {
  if (typeof name !== "string" || !TOOL_NAME.test(name)) fail(`invalid tool name ${JSON.stringify(name)}`);
}

export function tool(options) {
  if (!options || typeof options !== "object") fail("tool options are required");
  // The AI SDK's spelling works exactly like knap's: `inputSchema` is `input` (one of the two).
  if (options.inputSchema !== undefined) {
    if (options.input !== undefined) failWithHint(`tool ${JSON.stringify(options.name)} has both input and inputSchema`, "pass one of them (they are the same option)");
    options = { ...options, input: options.inputSchema };
  }
  if (options.parameters !== undefined && options.input === undefined) {
    failWithHint(`tool ${JSON.stringify(options.name)} has parameters, which knap does not read`, "pass the schema as input (or inputSchema, the AI SDK 5+ name)");
  }
  const { name, description, effect } = options;
  assertToolName(name);
  if (typeof description !== "string") fail(`tool ${JSON.stringify(name)} needs a description`);
  if (!EFFECTS.has(effect)) failWithHint(`unknown tool effect ${JSON.stringify(effect)}`, oneOf("effect", EFFECTS));
  if (options.speculative && effect !== "read") fail("speculative tool must be read-only");
  const timeoutMs = options.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
  if (!isPositiveInteger(timeoutMs)) fail("tool timeoutMs must be a positive integer");
  if (options.schemaSemanticsSHA256 !== undefined && !SHA256.test(options.schemaSemanticsSHA256)) {
    fail("schemaSemanticsSHA256 must be lowercase SHA-256");
  }
  const result = options.result ?? "auto";
  if (typeof result === "string" && !RESULT_POLICIES.has(result)) failWithHint(`unknown tool result policy ${JSON.stringify(result)}`, oneOf("result", RESULT_POLICIES));
  const { nestedTools, speculativeTools } = compositeOptions(options);
  const standardInput = options.input && typeof options.input === "object" && options.input["~standard"] ? options.input : undefined;
  const userExecute = options.execute;
  const execute = async (input, signal, context) => {
    if (typeof userExecute !== "function") throw new Error(`cave_tool_definition_invalid:${name}`);
    let value = input;
    if (standardInput) {
      const checked = await standardInput["~standard"].validate(input);
      if (checked.issues) throw new Error(`cave_tool_input_schema_mismatch:${name}`);
      value = checked.value;
    }
    return userExecute(value, signal, context);
  };
  const definition = {
    kind: "tool",
    name,
    description,
    input: deepFreeze(inputJsonSchema(options.input, options)),
    ...(options.output !== undefined ? { output: deepFreeze(JSON.parse(JSON.stringify(options.output))) } : {}),
    effect,
    result,
    ...(options.allowRepeat !== undefined ? { allowRepeat: Boolean(options.allowRepeat) } : {}),
    ...(options.speculative !== undefined ? { speculative: Boolean(options.speculative) } : {}),
    timeoutMs,
    ...(options.runtime !== undefined ? { runtime: options.runtime } : {}),
    ...(nestedTools !== undefined ? { nestedTools } : {}),
    ...(speculativeTools !== undefined ? { speculativeTools } : {}),
    execute,
  };
  return Object.freeze(definition);
}

/**
 * A composite tool's `nestedTools` and `speculativeTools`, checked as the reference's `tool()`
 * checks them (caveman-code.md §4.1, its messages verbatim). The kernel admits each
 * `context.dispatch` against these lists, so they are frozen copies.
 */
function compositeOptions(options) {
  const { name, effect, nestedTools, speculativeTools } = options;
  if (nestedTools === undefined) {
    if (speculativeTools !== undefined) fail("speculativeTools requires nestedTools");
    return {};
  }
  if (!Array.isArray(nestedTools) || nestedTools.some((t) => t?.kind !== "tool" || typeof t.name !== "string")) {
    failWithHint(`tool ${JSON.stringify(name)} nestedTools must be an array of tool() definitions`, "build each nested tool with tool() (or take them from shellTools())");
  }
  if (options.runtime !== undefined) fail("composite tool runtime unsupported");
  const names = new Set([name]);
  for (const nested of nestedTools) {
    if (effect === "read" && nested.effect !== "read") fail("read composite cannot contain effectful nested tools");
    if (nested.runtime !== undefined && nested.runtime?.kind !== "subagent") fail(`nested tool runtime unsupported ${JSON.stringify(nested.name)}`);
    if (nested.nestedTools !== undefined) fail(`nested tools must be flat ${JSON.stringify(nested.name)}`);
    if (names.has(nested.name)) fail(`duplicate nested tool ${JSON.stringify(nested.name)}`);
    names.add(nested.name);
  }
  if (speculativeTools === undefined) return { nestedTools: Object.freeze([...nestedTools]) };
  if (!Array.isArray(speculativeTools)) failWithHint(`tool ${JSON.stringify(name)} speculativeTools must be an array of nested tool names`, "list the names of nested read tools with speculative: true");
  const seen = new Set();
  for (const entry of speculativeTools) {
    const nested = nestedTools.find((t) => t.name === entry);
    if (seen.has(entry) || !nested || nested.effect !== "read" || nested.speculative !== true) fail(`invalid speculative nested tool ${JSON.stringify(entry)}`);
    seen.add(entry);
  }
  return { nestedTools: Object.freeze([...nestedTools]), speculativeTools: Object.freeze([...speculativeTools]) };
}

export function output(options) {
  const maxTokens = options?.maxTokens;
  if (!isPositiveInteger(maxTokens)) fail("output maxTokens must be a positive integer");
  return Object.freeze({ kind: "output", maxTokens, ...(options.schema !== undefined ? { schema: options.schema } : {}) });
}

export function file(path) {
  if (typeof path !== "string" || path === "") fail("file path is required");
  return Object.freeze({ kind: "file", path });
}

export function context(options) {
  const { id, kind, source, stability } = options ?? {};
  return Object.freeze({
    kind: "context",
    id,
    contextKind: kind,
    source,
    stability,
    safety: options.safety ?? "S0",
    priority: options.priority ?? "required",
    recovery: options.recovery ?? "none",
    cacheRegion: options.cacheRegion ?? (stability === "build" ? "frozen_prefix" : "live_zone"),
    privacy: options.privacy ?? "local_sensitive",
    opaque: options.opaque ?? false,
    ...(options.ttlTurns !== undefined ? { ttlTurns: options.ttlTurns } : {}),
  });
}

export function agent(options) {
  if (!options || typeof options !== "object") fail("agent options are required");
  const { id } = options;
  if (typeof id !== "string" || !AGENT_ID.test(id)) fail(`invalid agent id ${JSON.stringify(id)}`);
  const tools = Array.from(options.tools ?? []);
  const names = new Set();
  for (const t of tools) {
    if (names.has(t.name)) fail("duplicate tool name");
    names.add(t.name);
  }
  const sandbox = options.sandbox ?? "required";
  if (!SANDBOXES.has(sandbox)) failWithHint(`unknown sandbox mode ${JSON.stringify(sandbox)}`, oneOf("sandbox", SANDBOXES));
  for (const t of tools) {
    if (typeof t.name === "string" && t.name.startsWith("cave_")) fail(`tool prefix cave_ is reserved by framework (${t.name})`);
  }
  return Object.freeze({
    kind: "agent",
    id,
    instructions: options.instructions,
    model: options.model,
    reasoning: options.reasoning ?? "low",
    tools: Object.freeze(tools),
    contexts: Object.freeze(Array.from(options.contexts ?? [])),
    sandbox,
    sandboxDeclared: options.sandbox !== undefined,
    ...(options.memory !== undefined ? { memory: options.memory } : {}),
    ...(options.output !== undefined ? { output: options.output } : {}),
  });
}

export function subagent(options) {
  const {
    name,
    description,
    agent: definition,
    timeoutMs,
    maxInputChars = 32_768,
    maxCalls = 1,
    maxCostUsd = 1,
    maxTokens,
    maxContextTokens = 128_000,
  } = options ?? {};
  if (!isPositiveInteger(maxInputChars)) fail("subagent maxInputChars must be a positive integer");
  if (!isPositiveInteger(maxCalls)) fail("subagent maxCalls must be a positive integer");
  if (!(typeof maxCostUsd === "number" && Number.isFinite(maxCostUsd) && maxCostUsd > 0)) fail("subagent maxCostUsd must be positive");
  if (maxTokens !== undefined && !isPositiveInteger(maxTokens)) fail("subagent maxTokens must be a positive integer");
  if (!isPositiveInteger(maxContextTokens)) fail("subagent maxContextTokens must be a positive integer");
  return tool({
    name,
    description,
    input: schema.object({ task: schema.string() }),
    effect: "read",
    result: "auto",
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    runtime: Object.freeze({
      kind: "subagent",
      definition,
      maxInputChars,
      maxCalls,
      maxCostUsd,
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      maxContextTokens,
    }),
    execute: () => {
      throw new Error("cave_subagent_framework_runner_required");
    },
  });
}

const MEMORY_NAMESPACE = /^[a-z0-9][a-z0-9_-]{0,95}$/;
const MEMORY_TTL = /^([1-9][0-9]*)(m|h|d)$/;
const TTL_UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 };

function coded(code, detail) {
  const error = new Error(`${code}: ${detail}`);
  error.code = code;
  return error;
}

/** `"30d"` → milliseconds (`m`, `h`, `d` units). */
export function memoryTTLMilliseconds(ttl) {
  const m = typeof ttl === "string" ? MEMORY_TTL.exec(ttl) : null;
  const ms = m ? Number(m[1]) * TTL_UNIT_MS[m[2]] : NaN;
  if (!Number.isSafeInteger(ms) || ms <= 0) throw coded("cave_memory_ttl_invalid", `memory ttl must match ${MEMORY_TTL} (got ${JSON.stringify(ttl)})`);
  return ms;
}

/**
 * A local memory declaration, validated as the reference validates it. knap's kernel does not
 * run the memory engine yet: a definition may carry it, runs ignore it.
 */
export function memory(options = {}) {
  const { namespace, provenance = "local", ttl = "30d", recallBudget = 800, consent = "local_only", ambient = {} } = options;
  if (typeof namespace !== "string" || !MEMORY_NAMESPACE.test(namespace)) fail(`invalid memory namespace ${JSON.stringify(namespace)}`);
  if (provenance !== "local") throw coded("cave_memory_provenance_unsupported", 'only "local" memory is supported');
  if (consent !== "local_only") throw coded("cave_memory_consent_unsupported", 'only "local_only" consent is supported');
  if (!Number.isSafeInteger(recallBudget) || recallBudget < 0) fail("memory recallBudget must be a non-negative integer");
  try {
    memoryTTLMilliseconds(ttl);
  } catch {
    fail("memory ttl must use positive m, h, or d duration");
  }
  return Object.freeze({ kind: "memory", namespace, provenance, ttl, recallBudget, consent, ambient: ambient === false ? false : Object.freeze({ ...ambient }) });
}

