// The single-tool factories with bashkit's signatures: `createXTool(sandbox, config?)`.
import * as T from "./tools.mjs";

const envOf = (sandbox, config) => T.toolEnv(sandbox, { defaultTimeout: config?.timeout });

export const createBashTool = (sandbox, config) => T.createBashTool(envOf(sandbox, config), config ?? {});
export const createReadTool = (sandbox, config) => T.createReadTool(envOf(sandbox, config), config ?? {});
export const createWriteTool = (sandbox, config) => T.createWriteTool(envOf(sandbox, config), config ?? {});
export const createEditTool = (sandbox, config) => T.createEditTool(envOf(sandbox, config), config ?? {});
export const createGlobTool = (sandbox, config) => T.createGlobTool(envOf(sandbox, config), config ?? {});
export const createGrepTool = (sandbox, config) => T.createGrepTool(envOf(sandbox, config), config ?? {});
export const createPatchTool = (sandbox, config) => T.createPatchTool(envOf(sandbox, config), config ?? {});
