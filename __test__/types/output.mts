// Compiled by types.test.mjs: `result.output` is typed from the definition's output schema
// (AgentDefinition<TOutput>, AgentOutput<D>), and the root's type names the reference lists exist.
import { agent, auto, run, runLocked, output, schema, createConversation } from "knap";
import type {
  AgentDefinition, AgentOutput, ConversationState, ExecRequest, ExecResult, ExecutionBackend, MemoryEngine, RunResult,
  ReceiptCompaction, ModelCallRouter, ModelCallRouteInput, ModelCallRouteDecision, ContextKind, TSchema, Static, RunBudget,
} from "knap";
import { parseContextSummary, renderSummary, SUMMARY_SCHEMA_VERSION } from "knap/compaction";
import type { ContextSummary } from "knap/compaction";
import { createMemoryEngine, memory } from "knap/memory";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(): T | void {}

const verdictSchema = schema.object({
  verdict: schema.union([schema.literal("pass"), schema.literal("fail")]),
  score: schema.number(),
  notes: schema.optional(schema.array(schema.string())),
  tag: schema.enum(["a", "b"]),
});
type Verdict = Static<typeof verdictSchema>;
assertType<Equal<Verdict, { verdict: "pass" | "fail"; score: number; notes?: string[]; tag: "a" | "b" }>>();

const judge = agent({ id: "judge", instructions: "Judge.", model: auto(), output: output({ maxTokens: 200, schema: verdictSchema }) });
const plain = agent({ id: "plain", instructions: "Talk.", model: auto() });
const jsonSchema = agent({ id: "raw", instructions: "r", model: auto(), output: output({ maxTokens: 10, schema: { type: "object" } }) });
assertType<Equal<AgentOutput<typeof judge>, Verdict>>();
assertType<Equal<AgentOutput<typeof plain>, undefined>>();
assertType<Equal<AgentOutput<typeof jsonSchema>, unknown>>();
assertType<Equal<AgentOutput<AgentDefinition>, unknown>>();

export async function typedOutput(): Promise<void> {
  const r = await run(judge, "judge this");
  if (r.output) {
    const v: "pass" | "fail" = r.output.verdict;
    const s: number = r.output.score;
    // @ts-expect-error: score is a number
    const wrong: string = r.output.score;
    console.log(v, s, wrong, r.output.notes?.length);
  }
  const p = await run(plain, "hi");
  assertType<Equal<typeof p.output, undefined>>();
  // A typed definition still goes where any definition goes.
  const any: AgentDefinition = judge;
  const widened: RunResult = await run(any, "x");
  console.log(widened.output, (await runLocked(judge, "x", {} as never)).output?.verdict);
}

export function rootTypes(backend: ExecutionBackend, engine: MemoryEngine): void {
  const req: ExecRequest = { command: "ls", args: [], cwd: "/", env: {}, timeoutMs: 1000, maxOutputBytes: 1024 };
  void backend.exec(req).then((res: ExecResult) => console.log(res.stdout, res.code, res.timedOut));
  const conversation: ConversationState = createConversation();
  console.log(conversation.sessionId, engine);
  const router: ModelCallRouter = (input: ModelCallRouteInput): ModelCallRouteDecision => ({ model: input.currentModel, reason: "same", signals: [] });
  const kind: ContextKind = "reference";
  const budget: RunBudget = { maxTokens: 1000, onExhausted: "compact", compaction: { maxCompactions: 2, keepRecentTokens: 500 } };
  const c = ([] as ReceiptCompaction[])[0];
  const s: TSchema<string> = schema.string();
  console.log(router, kind, budget, c?.tier, s);
  const summary: ContextSummary = parseContextSummary('{"schema_version":2,"goal":"g","state":"s"}');
  const text: string = renderSummary(summary);
  console.log(text, SUMMARY_SCHEMA_VERSION, createMemoryEngine, memory({ namespace: "notes" }).namespace);
}
