import type { PrepareStepFunction, ToolSet } from "ai";
import type {
  Sandbox,
  InstructionDiscoveryConfig,
  DiscoveredInstructions,
  EnvironmentContext,
  EnvironmentContextConfig,
  ToolGuidanceConfig,
  SystemContextConfig,
  SystemContext,
  PrepareStepConfig,
} from "./index.mjs";
/**
 * AGENTS.md (else CLAUDE.md) of each directory from `cwd` (default: the sandbox's working
 * directory) up to the one holding `.git`, outermost first, after `globalPath`; joined and cut
 * at `maxBytes` (32,768, counted as `String.length` counts). `null` when none is found. Reads
 * through the sandbox's `fileExists` / `readFile`; knap's own sandbox stops at its workspace.
 */
export declare function discoverInstructions(sandbox: Sandbox, config?: InstructionDiscoveryConfig): Promise<DiscoveredInstructions | null>;
/**
 * The shell, platform, date, timezone, git branch and number of changed files, through
 * `sandbox.exec` (each command with `timeout: 5000`, given up 1 s later if the sandbox ignores
 * it). `config.custom` is printed by formatEnvironment / buildSystemContext, not here.
 */
export declare function collectEnvironment(sandbox: Sandbox, config?: EnvironmentContextConfig): Promise<EnvironmentContext>;
/** `<environment_context>…</environment_context>`: a tag per field, then one per `custom` entry. */
export declare function formatEnvironment(env: EnvironmentContext, custom?: Record<string, string>): string;
/** `## Available Tools` with a one-line hint per listed tool that has one, then `## Guidelines`. */
export declare function buildToolGuidance(config: ToolGuidanceConfig): string;
/** The sections asked for (others `null`) and `combined`, for a system prompt built once. */
export declare function buildSystemContext(sandbox: Sandbox, config?: SystemContextConfig): Promise<SystemContext>;
/**
 * bashkit's `PrepareStepFunction<ToolSet>`, generic in the tool set so it also fits a
 * `generateText` whose tools are typed more precisely (createAgentTools' `AgentTools`).
 */
export type SystemPrepareStep = <TOOLS extends ToolSet = ToolSet>(
  options: Parameters<PrepareStepFunction<TOOLS>>[0],
) => ReturnType<PrepareStepFunction<TOOLS>>;
/**
 * An AI SDK `prepareStep`: compaction, then `<context_status>` and `<plan_mode>` user messages
 * appended, then `extend`. It never sets `system`.
 */
export declare function createPrepareStep(config: PrepareStepConfig): SystemPrepareStep;
