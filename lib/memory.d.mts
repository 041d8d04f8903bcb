export type MemoryKind = "fact" | "preference" | "procedure" | "correction" | "decision";
export type MemoryRelation = "relates_to" | "supersedes" | "contradicts" | "derived_from";
export interface MemoryScope { readonly tenant?: string; readonly agentId: string; readonly namespace: string }
export interface MemoryVector { readonly adapter: string; readonly dimensions: number; readonly scale: number; readonly data: string }
export interface MemorySource { readonly sessionId: string; readonly turnId?: string; readonly at: number }
export interface MemoryRecord {
  readonly id: string; readonly text: string; readonly kind: MemoryKind; readonly tags: readonly string[]; readonly createdAt: number;
  readonly updatedAt: number; readonly expiresAt: number; readonly confidence: number; readonly strength: number; readonly active: boolean;
  readonly sources: readonly MemorySource[]; readonly vector?: MemoryVector;
}
export interface MemoryTurn { readonly id: string; readonly sessionId: string; readonly sequence: number; readonly role: "user" | "assistant"; readonly text: string; readonly createdAt: number; readonly vector?: MemoryVector }
export interface MemoryEdge { readonly from: string; readonly to: string; readonly relation: MemoryRelation; readonly weight: number; readonly createdAt: number }
export interface MemoryState { readonly schemaVersion: 1; readonly revision: number; readonly memories: readonly MemoryRecord[]; readonly turns: readonly MemoryTurn[]; readonly edges: readonly MemoryEdge[] }
export interface MemoryHit { readonly id: string; readonly text: string; readonly kind: MemoryKind; readonly tags: readonly string[]; readonly score: number; readonly confidence: number; readonly source: "vector" | "lexical" | "graph" }
export interface MemorySessionHit { readonly id: string; readonly sessionId: string; readonly sequence: number; readonly role: "user" | "assistant"; readonly text: string; readonly score: number; readonly source: "vector" | "lexical" }
export interface MemoryRecall { readonly query: string; readonly hits: readonly MemoryHit[]; readonly prompt: string; readonly basis: "inferred"; readonly sidecarContext?: string }
export interface MemoryStorageAdapter { read(scope: MemoryScope): Promise<MemoryState>; update(scope: MemoryScope, mutate: (state: MemoryState) => MemoryState | Promise<MemoryState>): Promise<MemoryState> }
export interface MemoryEmbeddingAdapter { readonly id: string; readonly dimensions?: number; embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]> }
export interface MemorySidecarAdapter { review?(input: unknown, signal?: AbortSignal): Promise<{ keep: string[]; context?: string }>; extract?(input: unknown, signal?: AbortSignal): Promise<MemoryDraft[]>; consolidate?(input: unknown, signal?: AbortSignal): Promise<MemoryDraft[]> }
export interface MemoryDraft { text: string; kind?: MemoryKind; tags?: string[]; confidence?: number }
export interface MemoryRememberInput extends MemoryDraft { sessionId?: string; turnId?: string; supersedes?: string | string[]; contradicts?: string | string[] }
export interface MemorySearchOptions { maxResults?: number; minScore?: number; graphDepth?: number; exclude?: Iterable<string>; signal?: AbortSignal }
export interface MemoryTurnInput { sessionId: string; text: string; turnId?: string }
export interface MemoryAmbientOptions { extractEveryTurns?: number; driftThreshold?: number; consolidateEveryWrites?: number }
export interface CreateMemoryEngineOptions {
  scope: MemoryScope; ttlMs: number; storage?: MemoryStorageAdapter; embedding?: MemoryEmbeddingAdapter | false; sidecar?: MemorySidecarAdapter;
  onError?: (error: unknown) => void; allowStore?: (text: string) => boolean; now?: () => number; recallTokens?: number; maxResults?: number;
  minScore?: number; graphDepth?: number; maxSessionTurns?: number; ambient?: false | MemoryAmbientOptions;
}
export interface MemoryRuntimeConfig {
  root?: string; tenant?: string; engine?: MemoryEngine; storage?: MemoryStorageAdapter; embedding?: MemoryEmbeddingAdapter | false;
  sidecar?: MemorySidecarAdapter; onError?: (error: unknown) => void; allowStore?: (text: string) => boolean;
}
export declare class MemoryEngine {
  readonly scope: Required<MemoryScope>;
  readonly storage: MemoryStorageAdapter;
  readonly embedding: MemoryEmbeddingAdapter | undefined;
  constructor(options: CreateMemoryEngineOptions);
  beginTurn(input: MemoryTurnInput): MemoryRecall | undefined;
  endTurn(input: MemoryTurnInput): void;
  endSession(sessionId: string, signal?: AbortSignal): Promise<void>;
  flush(): Promise<void>;
  remember(input: MemoryRememberInput, signal?: AbortSignal): Promise<MemoryRecord>;
  search(query: string, options?: MemorySearchOptions): Promise<readonly MemoryHit[]>;
  recall(query: string, options?: MemorySearchOptions): Promise<MemoryRecall>;
  searchSessions(query: string, options?: MemorySearchOptions): Promise<readonly MemorySessionHit[]>;
  forget(id: string): Promise<boolean>;
  link(from: string, to: string, relation: MemoryRelation, weight?: number): Promise<void>;
  consolidate(signal?: AbortSignal): Promise<unknown>;
}
export declare function createMemoryEngine(options: CreateMemoryEngineOptions): MemoryEngine;
export declare function createInMemoryMemoryStorage(): MemoryStorageAdapter;
export declare function createFileMemoryAdapter(options?: { root?: string }): MemoryStorageAdapter;
export declare class SqlMemoryStorage implements MemoryStorageAdapter {
  constructor(options: { exec: (sql: string, params: unknown[]) => Promise<any[]>; dialect?: "sqlite" | "postgres"; table?: string });
  read(scope: MemoryScope): Promise<MemoryState>;
  update(scope: MemoryScope, mutate: (state: MemoryState) => MemoryState | Promise<MemoryState>): Promise<MemoryState>;
}
export declare function createSparseEmbeddingAdapter(dimensions?: number): MemoryEmbeddingAdapter;
export interface OpenAICompatibleMemoryEmbeddingOptions { baseURL: string; model: string; apiKey?: string; dimensions?: number; fetch?: typeof fetch }
export declare function openAICompatibleMemoryEmbedding(options: OpenAICompatibleMemoryEmbeddingOptions): MemoryEmbeddingAdapter;
export interface CompletionMemorySidecarOptions { complete(request: { system: string; prompt: string; signal?: AbortSignal }): Promise<string> }
export declare function completionMemorySidecar(options: CompletionMemorySidecarOptions): MemorySidecarAdapter;
export declare function createMemoryWorkflow(engine: MemoryEngine, sessionId: string): {
  beforeTurn(text: string): string | undefined; afterTurn(text: string): void; search: MemoryEngine["search"];
  remember(input: string | MemoryRememberInput): Promise<MemoryRecord>; searchSessions: MemoryEngine["searchSessions"]; close(signal?: AbortSignal): Promise<void>;
};
export declare function emptyMemoryState(): MemoryState;
export declare function cosine(a: MemoryVector, b: MemoryVector): number;
export declare function packVector(adapter: string, values: ArrayLike<number>): MemoryVector;
export declare const MEMORY_SYSTEM_PROMPT: string;
