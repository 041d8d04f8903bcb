// `@caveman-ai/agent/adapters`: framework adapters of the Caveman gateway (throws `cave_adapters_unsupported`).
import { unsupported } from "../unsupported.mjs";
export const createAdapter = unsupported("adapters", "createAdapter", "@caveman-ai/adapter-kit and the Caveman gateway");
