// Types of the `caveman-code` CLI module (`@caveman-ai/coding-agent/cli`).
import type { SessionBill, CodingSessionRunOptions, createCodingAgent, runCodingSession, codingModelsAtProviderBaseURL } from "../code.mjs";

// In a declaration file every top-level declaration is exported unless the file has an export
// declaration; this one keeps the two helper aliases below out of the module's names.
export {};

type Output = NonNullable<CodingSessionRunOptions["output"]>;
type Input = NonNullable<CodingSessionRunOptions["input"]>;

export interface CodingAgentCLIOptions {
  readonly help: boolean;
  readonly workspace?: string;
  readonly model?: string;
  readonly cave?: "off";
  readonly maxCostUsd?: number;
  readonly ensureRuntime?: false;
}

/** The `--help` text (printed followed by one newline). */
export declare const CODING_AGENT_HELP: string;
/** Throws `caveman-code: missing value for <flag>`, `caveman-code: --max-cost-usd must be positive`, `caveman-code: unknown option <token>`. */
export declare function parseCodingAgentCLIArgs(argv: readonly string[]): CodingAgentCLIOptions;
export declare function main(
  argv?: readonly string[],
  io?: { stdout: Output; stderr: Output; stdin?: Input },
  runtime?: {
    createCodingAgent: typeof createCodingAgent;
    runCodingSession: typeof runCodingSession;
    codingModelsAtProviderBaseURL?: typeof codingModelsAtProviderBaseURL;
  },
): Promise<SessionBill | undefined>;
/** Runs `main()` as the process (the `caveman-code` bin): exit status 0 after a session or `--help`, 1 with the message on stderr. */
export declare function runCli(): void;
