import type { AssistantMessage, AssistantMessageEvent, Context, Model, StreamFn, StreamOptions } from "./pi-types.mjs";

export type MessageLifecycleEvent =
  | { type: "message_start"; message: AssistantMessage }
  | { type: "message_update"; message: AssistantMessage; assistantMessageEvent: AssistantMessageEvent }
  | { type: "message_end"; message: AssistantMessage };

export declare function callModel(args: {
  model: Model;
  context: Context;
  options?: StreamOptions;
  streamFn: StreamFn;
  onEvent?: (event: MessageLifecycleEvent) => void | Promise<void>;
}): Promise<AssistantMessage>;

/** Watches `signal` for the model calls that will wait on it (run() calls it once per run). */
export declare function abortGate(signal: AbortSignal): { aborted: boolean };
