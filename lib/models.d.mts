import type { Model, Models, StreamFn } from "./pi-types.mjs";
import type { AiSdkLanguageModel } from "./ai-sdk-model.mjs";
export { AI_SDK_LANGUAGE_MODEL, aiSdkStreamFn, isAiSdkLanguageModel, piModelFromAiSdk } from "./ai-sdk-model.mjs";

export declare const AUTO: unique symbol;
export interface Auto { readonly kind: "auto"; readonly [AUTO]: true }
export declare function auto(): Auto;
export declare function isAuto(value: unknown): value is Auto;

export declare const AUTO_BASELINES: ReadonlyArray<{ readonly env: readonly string[]; readonly provider: string; readonly id: string }>;

export type ModelSpec = Auto | string | Model | AiSdkLanguageModel;

export interface ModelRunOptions {
  model?: ModelSpec;
  models?: Models;
  streamFn?: StreamFn;
  rootDir?: string;
  [key: string]: unknown;
}

/** Test hooks; production callers omit them. */
export interface ModelInternals {
  env?: Record<string, string | undefined>;
  warn?: (text: string) => void;
  importPiAi?: () => Promise<any>;
}

export type ModelSource =
  | "run-options"
  | "definition"
  | "pinned"
  | "auto:CAVE_MODEL"
  | "auto:provider.json"
  | "auto:credential"
  | "ai-sdk";

export declare function builtinModels(internals?: ModelInternals): Promise<Models & Record<string, any>>;
export declare function resolveModel(definitionModel: ModelSpec | undefined, runOptions?: ModelRunOptions, internals?: ModelInternals): Promise<Model>;
export declare function defaultStreamFn(runOptions?: ModelRunOptions, internals?: ModelInternals): StreamFn;
export declare function resolveModelCall(
  definitionModel: ModelSpec | undefined,
  runOptions?: ModelRunOptions,
  internals?: ModelInternals,
): Promise<{ model: Model; streamFn: StreamFn; source: ModelSource }>;
export declare function resetAutoNoticeForTests(): void;
