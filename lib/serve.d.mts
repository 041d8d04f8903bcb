import type { Server } from "node:http";
import type { RunOptions } from "./index.mjs";
import type { AgentHandlerOptions, PerRunOptionsFactory, RecoveryReport } from "./serve-handler.mjs";

export type { RecoveryReport } from "./serve-handler.mjs";

export interface AgentServerOptions extends Omit<AgentHandlerOptions, "runOptions" | "upgrade"> {
  runOptions?: Omit<RunOptions, "durable"> | PerRunOptionsFactory;
}

export interface AgentServer {
  readonly server: Server;
  /** Host default "0.0.0.0"; resolves the port actually bound, after the first recovery sweep. */
  listen(port: number, host?: string): Promise<number>;
  recover(): Promise<RecoveryReport>;
  nextWakeAt(): Promise<Date | undefined>;
  /** Default 30_000 ms. */
  close(graceMs?: number): Promise<void>;
}

export declare function createAgentServer(options: AgentServerOptions): AgentServer;
