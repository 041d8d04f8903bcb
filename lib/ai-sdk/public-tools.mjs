// The single-tool factories with bashkit's signatures: `createXTool(sandbox, config?)`.
import * as T from "./tools.mjs";
import { refuseUnknownKeys } from "../config-keys.mjs";

const envOf = (name, sandbox, config) => {
  refuseUnknownKeys(`create${name}Tool`, config, name === "Bash" ? [...T.TOOL_CONFIG_KEYS, "onProgress"] : T.TOOL_CONFIG_KEYS);
  return T.toolEnv(sandbox, { defaultTimeout: config?.timeout });
};

export const createBashTool = (sandbox, config) => T.createBashTool(envOf("Bash", sandbox, config), config ?? {});
export const createReadTool = (sandbox, config) => T.createReadTool(envOf("Read", sandbox, config), config ?? {});
export const createWriteTool = (sandbox, config) => T.createWriteTool(envOf("Write", sandbox, config), config ?? {});
export const createEditTool = (sandbox, config) => T.createEditTool(envOf("Edit", sandbox, config), config ?? {});
export const createGlobTool = (sandbox, config) => T.createGlobTool(envOf("Glob", sandbox, config), config ?? {});
export const createGrepTool = (sandbox, config) => T.createGrepTool(envOf("Grep", sandbox, config), config ?? {});
export const createPatchTool = (sandbox, config) => T.createPatchTool(envOf("Patch", sandbox, config), config ?? {});
