// Conversation size: token estimates (4 characters a token, 4 tokens of framing a message) and
// two ways of shrinking a history.
import { refuseUnknownKeys } from "../config-keys.mjs";

export function estimateTokens(text) {
  return Math.ceil(String(text).length / 4);
}

const isToolCall = (p) => p && typeof p === "object" && p.type === "tool-call";
const isToolResult = (p) => p && typeof p === "object" && p.type === "tool-result";

export function estimateMessageTokens(message) {
  let tokens = 0;
  const c = message?.content;
  if (typeof c === "string") tokens += estimateTokens(c);
  else if (Array.isArray(c)) {
    for (const part of c) {
      if (typeof part === "string") tokens += estimateTokens(part);
      else if (typeof part?.text === "string") tokens += estimateTokens(part.text);
      else if (isToolResult(part)) tokens += estimateTokens(JSON.stringify(part.output ?? null));
      else if (isToolCall(part)) tokens += estimateTokens(JSON.stringify(part.input ?? null));
      else tokens += estimateTokens(JSON.stringify(part ?? null));
    }
  }
  return tokens + 4;
}

export function estimateMessagesTokens(messages) {
  let sum = 0;
  for (const m of messages) sum += estimateMessageTokens(m);
  return sum;
}

/**
 * Drops the oldest messages until the estimate fits `maxTokens` (default 100,000). Never dropped:
 * system messages, and everything from the `protectRecentUserMessages`-th most recent user
 * message on (default 3). An assistant message is dropped together with the tool messages that
 * follow it (a tool call is never separated from its result), and the history never restarts on
 * an assistant or tool message when an older one had to go. Returns a new array; the messages
 * themselves are not modified.
 */
export function pruneMessages(messages, options = {}) {
  refuseUnknownKeys("pruneMessages", options, ["maxTokens", "protectRecentUserMessages"]);
  const { maxTokens = 100_000, protectRecentUserMessages = 3 } = options;
  const list = Array.from(messages ?? []);
  const sizes = list.map(estimateMessageTokens);
  let total = sizes.reduce((a, b) => a + b, 0);
  if (total <= maxTokens) return list;
  let protectFrom = list.length;
  if (protectRecentUserMessages > 0) {
    let seen = 0;
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i].role === "user" && ++seen === protectRecentUserMessages) {
        protectFrom = i;
        break;
      }
    }
    if (seen < protectRecentUserMessages) protectFrom = list.findIndex((m) => m.role === "user");
    if (protectFrom === -1) protectFrom = list.length;
  }
  // Units: an assistant message with the tool messages right after it; any other message alone.
  const units = [];
  for (let i = 0; i < protectFrom; ) {
    if (list[i].role === "system") {
      i++;
      continue;
    }
    let j = i + 1;
    if (list[i].role === "assistant") while (j < list.length && list[j].role === "tool") j++;
    if (j > protectFrom) break; // reaches into the protected part: keep it whole
    units.push([i, j]);
    i = j;
  }
  const removed = new Set();
  let u = 0;
  for (; u < units.length && total > maxTokens; u++) {
    const [a, b] = units[u];
    for (let k = a; k < b; k++) {
      removed.add(k);
      total -= sizes[k];
    }
  }
  // Do not start the remaining history on an assistant or tool message.
  if (removed.size > 0) {
    for (; u < units.length; u++) {
      const [a, b] = units[u];
      if (list[a].role === "user") break;
      for (let k = a; k < b; k++) removed.add(k);
    }
  }
  return list.filter((_, i) => !removed.has(i));
}

/**
 * bashkit's `pruneMessagesByTokens`: keeps every message but replaces old tool-call inputs and
 * tool results with placeholders once the running total passes `targetTokens` (only when that
 * saves more than `minSavingsThreshold`).
 */
export function pruneMessagesByTokens(messages, config = {}) {
  refuseUnknownKeys("pruneMessagesByTokens", config, ["targetTokens", "minSavingsThreshold", "protectLastNUserMessages"]);
  const { targetTokens = 40000, minSavingsThreshold = 20000, protectLastNUserMessages = 3 } = config;
  const total = estimateMessagesTokens(messages);
  if (total - targetTokens <= minSavingsThreshold) return messages;
  let protectFrom = messages.length;
  let seen = 0;
  for (let i = messages.length - 1; i >= 0 && seen < protectLastNUserMessages; i--) {
    if (messages[i].role === "user") {
      seen++;
      protectFrom = i;
    }
  }
  const out = [];
  let running = 0;
  messages.forEach((m, i) => {
    const size = estimateMessageTokens(m);
    if (i >= protectFrom || running + size <= targetTokens || !Array.isArray(m.content)) {
      out.push(m);
      running += size;
      return;
    }
    let pruned = m;
    if (m.role === "assistant") {
      pruned = { ...m, content: m.content.map((p) => (isToolCall(p) ? { ...p, input: { _pruned: true, toolName: p.toolName } } : p)) };
    } else if (m.role === "tool") {
      pruned = { ...m, content: m.content.map((p) => (isToolResult(p) ? { ...p, output: { type: "text", value: "pruned" } } : p)) };
    }
    out.push(pruned);
    running += estimateMessageTokens(pruned);
  });
  return out;
}
