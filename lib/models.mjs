// Model resolution with the reference's order and messages (caveman-agent-api.md §3.7):
//   RunOptions.model > definition model object > "provider/id" string > auto()
// and auto(): CAVE_MODEL > <rootDir>/.caveman/provider.json > first provider credential.
// The Pi catalog and transport come from the optional peer @mariozechner/pi-ai, imported lazily.
import { readFileSync } from "node:fs";
import path from "node:path";
import { loadPiAi } from "./pi-ai.mjs";
import { withHint } from "./hint.mjs";
import {
  AI_SDK_LANGUAGE_MODEL,
  aiSdkStreamFn,
  isAiSdkLanguageModel,
  looksLikeAiSdkLanguageModel,
  piModelFromAiSdk,
} from "./ai-sdk-model.mjs";

export { AI_SDK_LANGUAGE_MODEL, aiSdkStreamFn, isAiSdkLanguageModel, piModelFromAiSdk } from "./ai-sdk-model.mjs";

/** `Symbol.for("@caveman-ai/agent:auto")`, the brand of the `auto()` marker. */
export const AUTO = Symbol.for("@caveman-ai/agent:auto");

const AUTO_MARKER = Object.freeze({ kind: "auto", [AUTO]: true });

/** The marker meaning "choose the model from the environment": `{ kind: "auto", [AUTO]: true }`, frozen. */
export function auto() {
  return AUTO_MARKER;
}

/** True for `auto()` (and for a plain `{ kind: "auto" }`). */
export function isAuto(value) {
  return value !== null && typeof value === "object" && (value[AUTO] === true || value.kind === "auto");
}

/** The credential baselines of `auto()`, in the order they are tried. */
export const AUTO_BASELINES = Object.freeze([
  Object.freeze({ env: Object.freeze(["ANTHROPIC_API_KEY"]), provider: "anthropic", id: "claude-haiku-4-5" }),
  Object.freeze({ env: Object.freeze(["OPENAI_API_KEY"]), provider: "openai", id: "gpt-5.4-mini" }),
  Object.freeze({ env: Object.freeze(["GEMINI_API_KEY", "GOOGLE_API_KEY"]), provider: "google", id: "gemini-2.5-flash" }),
]);

const PINNED_FORMAT = "caveman agent: pinned model must use provider/model format";
const PROVIDER_JSON_INVALID = "caveman agent: invalid .caveman/provider.json";
const NO_CREDENTIAL = "caveman agent: no supported provider credential found";
const NO_CREDENTIAL_HINT =
  "set ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY or GOOGLE_API_KEY (or CAVE_MODEL=provider/id with that provider's key); " +
  "to run offline, pass { model: fauxModel(), streamFn: scriptedStream([...]) } from knap/testing";

/** The reference's "unknown model" error, with the nearest catalog ids as the hint. */
async function unknownModel(spec) {
  const error = new Error(`caveman agent: unknown model ${JSON.stringify(spec)}`);
  let near = [];
  try {
    // the catalog lives in the native addon; the model layer itself loads without it
    near = (await import("./prices.mjs")).nearestModels(spec, 3);
  } catch {
    // the catalog is advice here; the error stands without it
  }
  return withHint(
    error,
    near.length
      ? `did you mean ${near.map((k) => JSON.stringify(k)).join(" or ")}? (ids use dashes: "anthropic/claude-haiku-4-5")`
      : 'use "provider/id" as the provider names it, e.g. "anthropic/claude-haiku-4-5" or "openai/gpt-5.4-mini"',
  );
}

let multipleCredentialNoticeShown = false;

/** Tests only: let the once-per-process "multiple provider credentials" notice print again. */
export function resetAutoNoticeForTests() {
  multipleCredentialNoticeShown = false;
}

function isPiModelObject(value) {
  return value !== null && typeof value === "object" && typeof value.provider === "string" && !looksLikeAiSdkLanguageModel(value);
}

/**
 * The catalog used for "provider/id" lookups: `runOptions.models` (anything with
 * `getModel(provider, id)`) or pi-ai's built-in catalog. Rejects with an
 * `npm install @mariozechner/pi-ai` error when pi-ai is needed and missing.
 */
export async function builtinModels(internals = {}) {
  return loadPiAi('resolving a "provider/id" model', internals.importPiAi);
}

/**
 * A `RunOptions.models` catalog may carry `[MODELS_READY]()`: awaited before its first lookup, so
 * a catalog can load lazily (knap/code's `codingModelsAtProviderBaseURL` over pi-ai's).
 */
export const MODELS_READY = Symbol.for("knap.models.ready");

async function catalog(runOptions, internals) {
  const models = runOptions?.models;
  if (models !== undefined && models !== null) {
    if (typeof models[MODELS_READY] === "function") await models[MODELS_READY]();
    if (typeof models.getModel !== "function") throw new TypeError("caveman agent: RunOptions.models must have getModel(provider, id)");
    return models;
  }
  // With the run's own transport, "provider/id" resolves from knap's catalog: no pi-ai needed.
  // (loaded lazily: the model layer itself loads without the addon, for knap/testing).
  if (typeof runOptions?.streamFn === "function") {
    const { native } = await import("./native.mjs");
    return { getModel: (provider, id) => native.catalogModel(String(provider), String(id)) ?? undefined };
  }
  return builtinModels(internals);
}

function splitPinned(spec) {
  if (typeof spec !== "string") throw new Error(PINNED_FORMAT);
  const slash = spec.indexOf("/");
  if (slash <= 0 || slash === spec.length - 1) throw new Error(PINNED_FORMAT);
  return [spec.slice(0, slash), spec.slice(slash + 1)];
}

/** Resolve a `"provider/id"` string (the id may itself contain `/`, e.g. openrouter ids). */
async function lookupPinned(spec, runOptions, internals) {
  const [provider, id] = splitPinned(spec);
  const models = await catalog(runOptions, internals);
  const model = models.getModel(provider, id);
  if (!model) throw await unknownModel(spec);
  return model;
}

function envValue(env, name) {
  const value = env[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function readProviderJson(rootDir) {
  const file = path.join(rootDir, ".caveman", "provider.json");
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if (error?.code === "ENOENT" || error?.code === "ENOTDIR") return undefined;
    throw new Error(PROVIDER_JSON_INVALID, { cause: error });
  }
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(PROVIDER_JSON_INVALID, { cause: error });
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed) || typeof parsed.model !== "string" || parsed.model === "") {
    throw new Error(PROVIDER_JSON_INVALID);
  }
  return parsed.model;
}

async function resolveAuto(runOptions, internals) {
  const env = internals.env ?? process.env;
  const caveModel = envValue(env, "CAVE_MODEL");
  if (caveModel !== undefined) return { model: await lookupPinned(caveModel, runOptions, internals), source: "auto:CAVE_MODEL" };
  const fromFile = readProviderJson(runOptions?.rootDir ?? process.cwd());
  if (fromFile !== undefined) {
    return { model: await lookupPinned(fromFile, runOptions, internals), source: "auto:provider.json" };
  }
  const found = AUTO_BASELINES.filter((baseline) => baseline.env.some((name) => envValue(env, name) !== undefined));
  if (found.length === 0) {
    const error = withHint(new Error(NO_CREDENTIAL), NO_CREDENTIAL_HINT);
    error.code = "cave_provider_credentials";
    throw error;
  }
  const { provider, id } = found[0];
  if (found.length > 1 && !multipleCredentialNoticeShown) {
    multipleCredentialNoticeShown = true;
    const warn = internals.warn ?? ((text) => process.stderr.write(text));
    warn(`cave: multiple provider credentials found — using ${provider}/${id}; set CAVE_MODEL to choose another\n`);
  }
  const models = await catalog(runOptions, internals);
  const model = models.getModel(provider, id);
  if (!model) throw new Error(`caveman agent: baseline model unavailable: ${provider}/${id}`);
  return { model, source: "auto:credential" };
}

async function fromAiSdk(languageModel, runOptions, internals) {
  if (!isAiSdkLanguageModel(languageModel)) piModelFromAiSdk(languageModel); // throws the clear "unsupported version" error
  // Borrow name, cost, limits from the catalog entry of the same provider/id when one is at hand.
  let base;
  try {
    const models = await catalog(runOptions, internals);
    const probe = piModelFromAiSdk(languageModel);
    base = models.getModel(probe.provider, probe.id) ?? undefined;
  } catch {
    base = undefined; // no catalog (pi-ai absent): defaults; the model stays unpriced unless the price file knows it
  }
  return piModelFromAiSdk(languageModel, base);
}

async function resolveOne(value, runOptions, internals, objectSource) {
  if (looksLikeAiSdkLanguageModel(value)) return { model: await fromAiSdk(value, runOptions, internals), source: "ai-sdk" };
  if (isPiModelObject(value)) return { model: value, source: objectSource };
  if (typeof value === "string") return { model: await lookupPinned(value, runOptions, internals), source: "pinned" };
  if (value === undefined || value === null || isAuto(value)) return resolveAuto(runOptions, internals);
  throw new Error('caveman agent: model must be auto(), a "provider/id" string or a Pi Model object');
}

async function resolveWithSource(definitionModel, runOptions, internals) {
  if (runOptions?.model !== undefined && runOptions?.model !== null) {
    return resolveOne(runOptions.model, runOptions, internals, "run-options");
  }
  return resolveOne(definitionModel, runOptions, internals, "definition");
}

/**
 * Resolve the Pi `Model` for a run (reference §3.7). `internals` is for tests:
 * `{ env?: Record<string,string|undefined>, warn?: (text) => void, importPiAi?: () => Promise<module> }`.
 * An AI SDK language model (in either place) becomes a Pi model via `piModelFromAiSdk`.
 * Errors are plain `Error`s with the reference's messages.
 */
export async function resolveModel(definitionModel, runOptions = {}, internals = {}) {
  return (await resolveWithSource(definitionModel, runOptions ?? {}, internals)).model;
}

/**
 * `options.streamFn ?? models.streamSimple`: a Pi `StreamFn` that calls `runOptions.models.streamSimple`
 * when given, else pi-ai's `streamSimple` (imported on first call; a missing pi-ai rejects with an
 * `npm install @mariozechner/pi-ai` error). A model built by `piModelFromAiSdk` is routed to its AI
 * SDK language model instead. For Google models `GOOGLE_API_KEY` serves as the API key when
 * `GEMINI_API_KEY` is unset. The returned function is async (returns a Promise of the stream).
 */
export function defaultStreamFn(runOptions = {}, internals = {}) {
  return async function knapDefaultStreamFn(model, context, options) {
    const languageModel = model?.[AI_SDK_LANGUAGE_MODEL];
    if (languageModel) return aiSdkStreamFn(languageModel)(model, context, options);
    const env = internals.env ?? process.env;
    let callOptions = options;
    if (
      model?.provider === "google" &&
      !options?.apiKey &&
      envValue(env, "GEMINI_API_KEY") === undefined &&
      envValue(env, "GOOGLE_API_KEY") !== undefined
    ) {
      callOptions = { ...options, apiKey: envValue(env, "GOOGLE_API_KEY") };
    }
    const models = runOptions?.models;
    if (models && typeof models.streamSimple === "function") return models.streamSimple(model, context, callOptions);
    const piAi = await loadPiAi("calling a model provider", internals.importPiAi);
    return piAi.streamSimple(model, context, callOptions);
  };
}

/**
 * Everything the kernel needs to call the model of a run:
 * `{ model, streamFn, source }` where `streamFn` is `runOptions.streamFn` when given, else the AI
 * SDK bridge for an AI SDK model, else `defaultStreamFn(runOptions)`. `source` is one of
 * `"run-options" | "definition" | "pinned" | "auto:CAVE_MODEL" | "auto:provider.json" |
 * "auto:credential" | "ai-sdk"`.
 */
export async function resolveModelCall(definitionModel, runOptions = {}, internals = {}) {
  const resolved = await resolveWithSource(definitionModel, runOptions ?? {}, internals);
  let streamFn = runOptions?.streamFn;
  if (typeof streamFn !== "function") {
    const languageModel = resolved.model?.[AI_SDK_LANGUAGE_MODEL];
    streamFn = languageModel ? aiSdkStreamFn(languageModel) : defaultStreamFn(runOptions ?? {}, internals);
  }
  return { model: resolved.model, streamFn, source: resolved.source };
}
