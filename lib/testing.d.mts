import type { Model, StreamFn, Usage } from "./pi-types.mjs";

export interface FauxModelOptions {
  /** Default `"anthropic"`. */
  provider?: string;
  /** Default: `"claude-haiku-4-5"` when `priced`, else `"faux-1"`. */
  id?: string;
  /** Use an id the price catalog knows (`claude-haiku-4-5`). */
  priced?: boolean;
}

export interface ScriptedTurn {
  text?: string;
  toolCalls?: ReadonlyArray<{ name: string; args: unknown }>;
  /** Merged over `{ input: 100, output: 10, cacheRead: 0, cacheWrite: 0, reasoning: 0, cost: 0s }`. */
  usage?: Partial<Usage>;
}

export declare const FAUX_DEFAULT_MODEL_ID: "faux-1";
export declare const FAUX_PRICED_MODEL_ID: "claude-haiku-4-5";
export declare function fauxModel(options?: FauxModelOptions): Model;
export declare function scriptedStream(turns: ReadonlyArray<ScriptedTurn>): StreamFn;
