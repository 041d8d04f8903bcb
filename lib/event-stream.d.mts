import type { AssistantMessage, AssistantMessageEvent, Usage } from "./pi-types.mjs";

export declare class AssistantMessageEventStream implements AsyncIterable<AssistantMessageEvent> {
  push(event: AssistantMessageEvent): void;
  end(result?: AssistantMessage): void;
  [Symbol.asyncIterator](): AsyncIterator<AssistantMessageEvent>;
  result(): Promise<AssistantMessage>;
}
export declare function createAssistantMessageEventStream(): AssistantMessageEventStream;
export declare function zeroUsage(): Usage;
