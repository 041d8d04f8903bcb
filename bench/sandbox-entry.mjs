// The entry module of bench/sandbox.mjs: its workers import it to find the agent.
import { agent, auto, schema, tool } from "../lib/index.mjs";

const noop = tool({ name: "noop", description: "Returns its input.", input: schema.object({ n: schema.number() }), effect: "read", execute: ({ n }) => ({ n }) });

export const hostAgent = agent({ id: "bench-host", instructions: "x", model: auto(), sandbox: "host", tools: [noop] });
export const requiredAgent = agent({ id: "bench-required", instructions: "x", model: auto(), sandbox: "required", tools: [noop] });
