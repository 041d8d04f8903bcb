// `sha256` and `stableStringify` over the core's one canonical JSON and digest.
import { native } from "./native.mjs";

const NOT_CANONICAL = "caveman agent: value is not canonically serializable";

/** Lowercase hex SHA-256; strings are hashed as UTF-8. */
export function sha256(value) {
  if (typeof value === "string") return native.sha256Hex(value);
  if (value instanceof Uint8Array) return native.sha256Hex(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  throw new TypeError("caveman agent: sha256 needs a string or Uint8Array");
}

/**
 * Canonical JSON: keys sorted recursively, no whitespace. A value JSON would drop (undefined,
 * a function, a symbol) anywhere in the tree throws instead of disappearing.
 */
export function stableStringify(value) {
  const json = JSON.stringify(value, (_key, v) => {
    if (v === undefined || typeof v === "function" || typeof v === "symbol") throw new Error(NOT_CANONICAL);
    return v;
  });
  if (json === undefined) throw new Error(NOT_CANONICAL);
  return native.canonicalJson(json);
}
