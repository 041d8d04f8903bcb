// Agent input: the part kinds, their validation and limits (`normalizeAgentInput`), and input
// encoders (`encodeAgentInput`, `defineAgentInputEncoder`).
import { codedError } from "./native.mjs";

export const AGENT_INPUT_MAX_PARTS = 64;
export const AGENT_INPUT_MAX_TEXT_BYTES = 1024 * 1024;
export const AGENT_INPUT_MAX_BASE64_BYTES_PER_PART = 32 * 1024 * 1024;
export const AGENT_INPUT_MAX_BASE64_BYTES_TOTAL = 64 * 1024 * 1024;
export const AGENT_INPUT_MAX_URL_LENGTH = 8_192;
export const AGENT_INPUT_MAX_MIME_LENGTH = 127;
export const AGENT_INPUT_MAX_FILE_NAME_LENGTH = 255;

const PROVIDER = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const ENCODER_ID = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,63})$/;
const MIME = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const err = (code, detail) => codedError(code, detail === undefined ? code : `${code}:${detail}`);

function isRecord(value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  return Reflect.ownKeys(value).every((k) => typeof k === "string" && "value" in Object.getOwnPropertyDescriptor(value, k));
}

function exactKeys(value, required, optional = []) {
  const keys = Object.keys(value);
  return required.every((k) => k in value) && keys.every((k) => required.includes(k) || optional.includes(k));
}

function finiteJSON(value, depth = 0) {
  if (depth > 64) return false;
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((v) => finiteJSON(v, depth + 1));
  return isRecord(value) && Object.values(value).every((v) => finiteJSON(v, depth + 1));
}

function base64Bytes(data) {
  const pad = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return (data.length / 4) * 3 - pad;
}

function checkUrl(url, i) {
  if (typeof url !== "string" || url.length > AGENT_INPUT_MAX_URL_LENGTH || CONTROL.test(url) || url !== url.trim()) throw err("cave_input_url_invalid", i);
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw err("cave_input_url_invalid", i);
  }
  if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || !parsed.hostname || parsed.username || parsed.password) {
    throw err("cave_input_url_invalid", i);
  }
}

/** `normalizeAgentInput(input)`: validated, frozen `{parts, textBytes, base64Bytes, remoteReferences}`. */
export function normalizeAgentInput(input) {
  const list = typeof input === "string" ? [{ type: "text", text: input }] : input;
  if (!Array.isArray(list) || list.length < 1 || list.length > AGENT_INPUT_MAX_PARTS) throw err("cave_input_parts_invalid");
  let textBytes = 0;
  let base64Total = 0;
  let remoteReferences = 0;
  const parts = [];
  for (let i = 0; i < list.length; i++) {
    if (!(i in list)) throw err("cave_input_parts_invalid");
    const part = list[i];
    if (!isRecord(part)) throw err("cave_input_part_invalid", i);
    switch (part.type) {
      case "text": {
        if (!exactKeys(part, ["type", "text"]) || typeof part.text !== "string") throw err("cave_input_part_invalid", i);
        const bytes = Buffer.byteLength(part.text, "utf8");
        textBytes += bytes;
        if (bytes > AGENT_INPUT_MAX_TEXT_BYTES || textBytes > AGENT_INPUT_MAX_TEXT_BYTES) throw err("cave_input_text_bytes_limit");
        parts.push(Object.freeze({ type: "text", text: part.text }));
        break;
      }
      case "opaque": {
        if (!exactKeys(part, ["type", "provider", "value"]) || typeof part.provider !== "string" || !PROVIDER.test(part.provider) || !finiteJSON(part.value)) {
          throw err("cave_input_part_invalid", i);
        }
        parts.push(Object.freeze({ type: "opaque", provider: part.provider, value: structuredClone(part.value) }));
        break;
      }
      case "image":
      case "audio":
      case "file": {
        const ok = part.type === "file" ? exactKeys(part, ["type", "mimeType", "source"], ["name"]) : exactKeys(part, ["type", "mimeType", "source"]);
        if (!ok || typeof part.mimeType !== "string" || part.mimeType.length > AGENT_INPUT_MAX_MIME_LENGTH || !MIME.test(part.mimeType)) {
          throw err("cave_input_part_invalid", i);
        }
        if (part.type !== "file" && !part.mimeType.startsWith(`${part.type}/`)) throw err("cave_input_part_invalid", i);
        if (part.type === "file" && part.name !== undefined) {
          const name = part.name;
          if (
            typeof name !== "string" || name.length < 1 || name.length > AGENT_INPUT_MAX_FILE_NAME_LENGTH || /[/\\]/.test(name) ||
            CONTROL.test(name) || name === "." || name === ".." || name !== name.trim()
          ) {
            throw err("cave_input_file_name_invalid", i);
          }
        }
        const source = part.source;
        let copy;
        if (isRecord(source) && source.type === "url" && exactKeys(source, ["type", "url"])) {
          checkUrl(source.url, i);
          remoteReferences += 1;
          copy = { type: "url", url: source.url };
        } else if (isRecord(source) && source.type === "base64" && exactKeys(source, ["type", "data"])) {
          if (typeof source.data !== "string" || !BASE64.test(source.data)) throw err("cave_input_base64_invalid", i);
          if (source.data.length === 0 && part.type !== "file") throw err("cave_input_base64_empty", i);
          const bytes = base64Bytes(source.data);
          if (bytes > AGENT_INPUT_MAX_BASE64_BYTES_PER_PART) throw err("cave_input_base64_part_bytes_limit");
          base64Total += bytes;
          if (base64Total > AGENT_INPUT_MAX_BASE64_BYTES_TOTAL) throw err("cave_input_base64_total_bytes_limit");
          copy = { type: "base64", data: source.data };
        } else {
          throw err("cave_input_source_invalid", i);
        }
        parts.push(Object.freeze({ type: part.type, mimeType: part.mimeType, source: Object.freeze(copy), ...(part.name !== undefined ? { name: part.name } : {}) }));
        break;
      }
      default:
        throw err("cave_input_part_invalid", i);
    }
  }
  return Object.freeze({ parts: Object.freeze(parts), textBytes, base64Bytes: base64Total, remoteReferences });
}

/** `defineAgentInputEncoder({id, supports, encode})`. */
export function defineAgentInputEncoder(encoder) {
  if (
    !isRecord(encoder) || !exactKeys(encoder, ["id", "supports", "encode"]) || typeof encoder.id !== "string" ||
    !ENCODER_ID.test(encoder.id) || typeof encoder.supports !== "function" || typeof encoder.encode !== "function"
  ) {
    throw err("cave_input_encoder_invalid");
  }
  return Object.freeze({ id: encoder.id, supports: encoder.supports, encode: encoder.encode });
}

/** `encodeAgentInput(input, encoder, signal?)`: normalize once, check support per part, encode. */
export async function encodeAgentInput(input, encoder, signal) {
  const e = defineAgentInputEncoder(encoder);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw err("cave_input_signal_invalid");
  const normalized = normalizeAgentInput(input);
  const errors = [];
  const unsupported = [];
  normalized.parts.forEach((part, i) => {
    try {
      const answer = e.supports(part);
      if (typeof answer !== "boolean") errors.push(err("cave_input_encoder_support_invalid", i));
      else if (!answer) unsupported.push(i);
    } catch (error) {
      errors.push(error);
    }
  });
  if (errors.length) throw new AggregateError(errors, "cave_input_encoder_support_failed");
  if (unsupported.length) throw err("cave_input_unsupported", `${e.id}:${unsupported.join(",")}`);
  const aborted = () => signal?.reason ?? err("cave_input_aborted");
  if (signal?.aborted) throw aborted();
  if (!signal) return e.encode(normalized, signal);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(aborted());
    signal.addEventListener("abort", onAbort, { once: true });
    Promise.resolve()
      .then(() => e.encode(normalized, signal))
      .then(resolve, reject)
      .finally(() => signal.removeEventListener("abort", onAbort));
  });
}
