// AI SDK input schemas without importing `ai`: the SDK recognises a schema object by two
// registry symbols (`Symbol.for`, shared by every copy of `@ai-sdk/provider-utils`, ai@5 and
// ai@6 alike) and calls its `validate`. The JSON Schema is the one bashkit's zod schemas
// produce (optional fields `{type:[T,"null"], default:null}`, not in `required`); `validate` is
// knap-core's one JSON Schema validator in zod's manner (knap_core::schema::conform): type
// checks, enums, array bounds, defaults filled with `null`, unknown keys dropped.
import { native } from "../native.mjs";

const SCHEMA = Symbol.for("vercel.ai.schema");
const VALIDATOR = Symbol.for("vercel.ai.validator");

export const s = {
  string: (description) => ({ type: "string", description }),
  number: (description) => ({ type: "number", description }),
  boolean: (description) => ({ type: "boolean", description }),
  nullable(type, description) {
    return { default: null, description, type: [type, "null"] };
  },
  nullableEnum(values, description) {
    return { default: null, description, anyOf: [{ type: "string", enum: values }, { type: "null" }] };
  },
  nullableArray(items, description) {
    return { default: null, description, anyOf: [{ type: "array", items }, { type: "null" }] };
  },
  array(items, description, { min, max } = {}) {
    const out = {};
    if (min !== undefined) out.minItems = min;
    if (max !== undefined) out.maxItems = max;
    return { ...out, type: "array", items, description };
  },
  object(properties, required, description) {
    const out = { type: "object", properties, required, additionalProperties: false };
    if (description) out.description = description;
    return out;
  },
};

/** An AI SDK schema object over a JSON Schema, validated by the core. */
export function toolSchema(json) {
  const full = { $schema: "http://json-schema.org/draft-07/schema#", ...json };
  const checker = new native.ToolInputSchema(json);
  return {
    [SCHEMA]: true,
    [VALIDATOR]: true,
    _type: undefined,
    jsonSchema: full,
    validate(value) {
      let r;
      try {
        r = checker.check(value);
      } catch (error) {
        // Not representable as JSON (a function, a BigInt, a cycle).
        return { success: false, error: new TypeError(`Invalid input: ${error?.message ?? error}`) };
      }
      return r.error === undefined || r.error === null ? { success: true, value: r.value } : { success: false, error: new TypeError(r.error) };
    },
  };
}

/** An AI SDK schema over any JSON Schema, passed through without validation (as `jsonSchema()`). */
export function passThroughSchema(json) {
  return { [SCHEMA]: true, [VALIDATOR]: true, _type: undefined, jsonSchema: json, validate: undefined };
}
