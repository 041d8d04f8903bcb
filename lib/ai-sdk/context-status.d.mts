import type { ContextStatus, ContextStatusConfig } from "./index.mjs";
export type { ContextStatus, ContextStatusConfig };
export declare const MODEL_CONTEXT_LIMITS: Readonly<Record<string, number>>;
export declare function getContextStatus(messages: readonly unknown[], maxTokens: number, config?: ContextStatusConfig): ContextStatus;
export declare function contextNeedsAttention(status: ContextStatus): boolean;
export declare function contextNeedsCompaction(status: ContextStatus): boolean;
