export { DiskDurableStore, SqlDurableStore } from "./index.mjs";
export type { DurableStore, DurableRunOptions, SqlExecutor } from "./index.mjs";
export declare function defaultDurableRoot(rootDir?: string): string;
