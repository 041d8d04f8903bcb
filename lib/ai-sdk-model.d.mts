import type { Context, Model, StreamFn, Usage } from "./pi-types.mjs";

/** The parts of an AI SDK LanguageModelV2 / V3 the bridge uses. */
export interface AiSdkLanguageModel {
  readonly specificationVersion: "v2" | "v3";
  readonly provider: string;
  readonly modelId: string;
  doStream(options: Record<string, unknown>): PromiseLike<{ stream: ReadableStream<any> }>;
}

export declare const AI_SDK_SPECIFICATION_VERSIONS: readonly ["v2", "v3"];
export declare const AI_SDK_LANGUAGE_MODEL: unique symbol;
export declare function looksLikeAiSdkLanguageModel(value: unknown): boolean;
export declare function isAiSdkLanguageModel(value: unknown): value is AiSdkLanguageModel;
export declare function piProviderFromAiSdk(provider: string): string;
export declare function piModelFromAiSdk(languageModel: AiSdkLanguageModel, base?: Partial<Model>): Model;
export declare function toAiSdkPrompt(context: Context, options?: { version?: "v2" | "v3" }): Array<Record<string, any>>;
export declare function toAiSdkTools(tools: Context["tools"]): Array<{ type: "function"; name: string; description?: string; inputSchema: Record<string, unknown> }>;
export declare function piUsageFromAiSdk(usage: unknown): Usage;
export declare function aiSdkStreamFn(languageModel: AiSdkLanguageModel): StreamFn;
