// AI SDK input schemas without importing `ai`: the SDK recognises a schema object by two
// registry symbols (`Symbol.for`, shared by every copy of `@ai-sdk/provider-utils`, ai@5 and
// ai@6 alike) and calls its `validate`. The JSON Schema is the one bashkit's zod schemas
// produce (optional fields `{type:[T,"null"], default:null}`, not in `required`), and
// `validate` does what zod did for bashkit: type checks, enums, array bounds, defaults filled
// with `null`, unknown keys dropped.

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

function typeName(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function matchesType(type, v) {
  if (type === "number") return typeof v === "number" && Number.isFinite(v);
  if (type === "integer") return Number.isInteger(v);
  if (type === "null") return v === null;
  if (type === "array") return Array.isArray(v);
  if (type === "object") return v !== null && typeof v === "object" && !Array.isArray(v);
  return typeof v === type;
}

/** Validates `value` against `schema`; returns the value with defaults filled, or throws. */
export function check(schema, value, path = "") {
  const at = path === "" ? "input" : `"${path}"`;
  if (schema.anyOf) {
    const errors = [];
    for (const option of schema.anyOf) {
      try {
        return check(option, value, path);
      } catch (e) {
        errors.push(e.message);
      }
    }
    throw new TypeError(`Invalid ${at}: ${errors.join("; or ")}`);
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => matchesType(t, value))) {
      throw new TypeError(`Invalid ${at}: expected ${types.join(" or ")}, received ${typeName(value)}`);
    }
  }
  if (schema.enum && !schema.enum.includes(value)) {
    throw new TypeError(`Invalid ${at}: expected one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      throw new TypeError(`Invalid ${at}: expected at least ${schema.minItems} items`);
    }
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      throw new TypeError(`Invalid ${at}: expected at most ${schema.maxItems} items`);
    }
    if (schema.items) return value.map((item, i) => check(schema.items, item, `${path}[${i}]`));
    return value;
  }
  if (value !== null && typeof value === "object" && schema.properties) {
    const out = {};
    for (const key of schema.required ?? []) {
      if (value[key] === undefined) throw new TypeError(`Invalid input: "${path ? `${path}.` : ""}${key}" is required`);
    }
    for (const [key, sub] of Object.entries(schema.properties)) {
      const v = value[key];
      if (v === undefined) {
        if ("default" in sub) out[key] = sub.default;
        continue;
      }
      out[key] = check(sub, v, path ? `${path}.${key}` : key);
    }
    return out;
  }
  return value;
}

/** An AI SDK schema object over a JSON Schema, validated by `check`. */
export function toolSchema(json) {
  const full = { $schema: "http://json-schema.org/draft-07/schema#", ...json };
  return {
    [SCHEMA]: true,
    [VALIDATOR]: true,
    _type: undefined,
    jsonSchema: full,
    validate(value) {
      try {
        return { success: true, value: check(json, value) };
      } catch (error) {
        return { success: false, error };
      }
    },
  };
}

/** An AI SDK schema over any JSON Schema, passed through without validation (as `jsonSchema()`). */
export function passThroughSchema(json) {
  return { [SCHEMA]: true, [VALIDATOR]: true, _type: undefined, jsonSchema: json, validate: undefined };
}
