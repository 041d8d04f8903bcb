// Types of `knap/programmatic-tools` (`@caveman-ai/agent/programmatic-tools`).
import type { AgentDefinition, StreamFn, Models } from "./index.mjs";

/** `"caveman_code"`. */
export declare const PROGRAMMATIC_TOOL_NAME: "caveman_code";

export interface ProgrammaticToolStats {
  /** Literal nested reads started while a cell streamed (non-durable runs only). */
  readonly launched: number;
  /** Cell calls answered by such a launch instead of running again. */
  readonly claimed: number;
  /** Claims that found no launch and ran the call normally. */
  readonly missed: number;
  /** Launches no cell call claimed (aborted with `cave_program_speculation_abandoned` if still running). */
  readonly abandoned: number;
}

export interface ProgrammaticToolRuntime {
  /** The direct definition with one cell tool in place of its tools (frozen). */
  readonly definition: AgentDefinition;
  wrapModels<T extends Models>(models: T): T;
  wrapStreamFn<T extends StreamFn>(streamFn: T): T;
  /** Counters over the runtime's lifetime, across runs. */
  stats(): ProgrammaticToolStats;
  close(): Promise<void>;
}

export interface ProgrammaticToolRuntimeOptions {
  /** Replaces the generated instructions. */
  instructions?: string;
  /** Default true. */
  speculate?: boolean;
  /** Default `"caveman_code"`. */
  toolName?: string;
}

export interface ProgrammaticToolInstructionOptions {
  toolName?: string;
}

/**
 * One code-cell tool over `direct`'s tools. Throws `cave_programmatic_tools_require_host_sandbox`,
 * `cave_programmatic_tools_required`, `cave_programmatic_tool_runtime_unsupported`, or
 * `caveman agent: invalid tool name "<name>"`.
 */
export declare function createProgrammaticToolRuntime(direct: AgentDefinition, options?: ProgrammaticToolRuntimeOptions): ProgrammaticToolRuntime;
/** The cell guidance (+ recovery guidance unless `additional` has it) + `additional`. */
export declare function programmaticToolInstructions(additional?: string, options?: ProgrammaticToolInstructionOptions): string;

/** Not built in knap: these throw `cave_programmatic_tools_unsupported`. */
export { ProgrammaticSpeculationScope, createProgrammaticToolErrorWrapper, programmaticToolMetadata } from "./surface.mjs";
export interface ProgrammaticSpeculationLaunch {
  readonly name: string;
  readonly args: unknown;
  readonly provisionalParentToolCallId: string;
}
export interface ProgrammaticSpeculationActivation {
  readonly toolCallId: string;
  readonly source: string;
}
export interface ProgrammaticSpeculationDispatch {
  readonly claimSpeculation?: boolean;
  readonly signal?: AbortSignal;
}
