//! `NativeRun`: one `run()`/`stream()` of the Rust kernel, polled on the JS thread by the core's
//! local executor. Everything the kernel asks of JS goes into the run's outbox, in order, and
//! is delivered between polls through one typed callback per hook: `model` (a model turn), `tool`
//! (a JS tool call), `policy`, `events` (a batch of stream events), `abortTool`, `output`,
//! `store`. Model turns and tool calls are answered by `replyModel` / `replyTool` /
//! `replyError`; a sync policy answer is judged at once. Only a wake from another thread (a
//! native tool done, a timer) goes through a threadsafe function: `pump`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use knap_core::code::{Code, Error};
use knap_core::durable::store::{DiskStore, DurableStore};
use knap_core::durable::DurableError;
use knap_core::exec::BoxFuture;
use knap_core::kernel::budget::{ExhaustionAnswer, ExhaustionContext, MeterCell, Tranche};
use knap_core::kernel::controller::{ControllerQueue, QueueKind};
use knap_core::kernel::event::RunEvent;
use knap_core::kernel::host::{Host, HostError, HostToolCall, ModelCall, NewContextInput, ToolSchema};
use knap_core::kernel::local::{LocalExecutor, LocalHandle};
use knap_core::kernel::nested::{NestedAbort, NestedInbox, NestedRequest};
use knap_core::kernel::speculation::{SpeculationCount, SpeculationSink};
use knap_core::kernel::route::{ModelRouter, RouteInput};
use knap_core::kernel::message::{
  AssistantMessage, Message, MessageUsage, Part, StopReason, TextPart, ToolResultMessage, UsageCost, UserContent,
  UserMessage,
};
use knap_core::kernel::spec::{AgentSpec, RunOptionsSpec};
use knap_core::kernel::{definition_sha256, run_agent, DurableSetup, Prepared};
use knap_core::policy::{PolicyAnswer, PolicyInput, ToolPolicy};
use knap_core::tools::ShellTools;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde::Serialize;
use serde_json::{Number, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::budget::BudgetAnswerJs;
use crate::js::{Js, MaybePromise, OptNum, OptStr};
use crate::policy::PolicyAnswerJs;
use crate::route::RouteAnswerJs;
use crate::shell_tools::toolset_by_id;
use crate::ErrorCode;

/// A Rust value handed to JS as the plain object serde makes of it, written straight into JS
/// values (`src/js.rs`: no JSON text, no `serde_json::Value` in between; integers up to 2^53 as
/// numbers, as napi's `serde_json` conversion gives them).
pub struct Serde<T>(pub T);

impl<T: Serialize> ToNapiValue for Serde<T> {
  unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
    Js::new(env)?.write(&val.0)
  }
}

/// How a run ended: `phase` is `"options"` (invalid options or a refusal before the run: throw a
/// plain Error), else `"run"` / `"done"` (the terminal event carries the rest).
#[napi(object)]
pub struct BindingRunOutcome {
  pub phase: String,
  pub code: Option<String>,
  pub message: Option<String>,
}

/// The hooks a run calls, one per concern.
#[napi(object, object_to_js = false)]
pub struct BindingRunHooks {
  #[napi(
    ts_type = "(request: { reply: number; conversation: number; modelKey: number; model?: string; append: object[]; systemPrompt?: string; tools?: { name: string; description: string; parameters: unknown }[]; maxTokens?: number; reasoning?: string; context?: object[]; speculate?: string[] }) => void"
  )]
  pub model: FunctionRef<Serde<ModelRequest>, ()>,
  /// The common model turn, positional: the kernel appended one tool result with one text part
  /// since the last call, and nothing else changed. `effect` / `resultPolicy` are the result's
  /// `details` (`null`: `{}`, a failed call's).
  #[napi(
    ts_type = "(reply: number, conversation: number, modelKey: number, maxTokens: number | null, reasoning: string | null, toolCallId: string, toolName: string, text: string, isError: boolean, timestamp: number, effect: string | null, resultPolicy: string | null) => void"
  )]
  pub model_step: FunctionRef<ModelStep, ()>,
  #[napi(
    ts_type = "(request: { reply: number; callId: number; key: number; args: unknown; toolCallId: string; parentToolCallId: string; durable?: { idempotencyKey: string; resumed: boolean }; composite: boolean; nested: boolean }) => void"
  )]
  pub tool: FunctionRef<Serde<ToolRequest>, ()>,
  /// A `context.dispatch` settled: its value, or the error it failed with.
  #[napi(ts_type = "(answer: { reply: number; ok: boolean; value?: unknown; message?: string; code?: string }) => void")]
  pub nested: FunctionRef<Serde<NestedAnswer>, ()>,
  /// The user's policy (wrapped): its decision, or a Promise of it.
  #[napi(
    ts_type = "(input: { runId: string; agentId: string; agentPath: string[]; toolCallId: string; parentToolCallId?: string; name: string; effect: string; args: unknown }) => unknown"
  )]
  pub policy: Option<FunctionRef<Serde<PolicyInput>, MaybePromise<PolicyAnswerJs>>>,
  /// The user's `onBudgetExhausted` handler: `"stop"`, `{release, reason}`, or a Promise of it.
  #[napi(
    ts_type = "(ctx: { denomination: string; max: number; released: number; spent: number; remaining: number; releasable: number; calls: number }) => unknown"
  )]
  pub budget: Option<FunctionRef<Serde<ExhaustionContext>, MaybePromise<BudgetAnswerJs>>>,
  /// The user's `modelRouter` (wrapped): its decision, or a Promise of it.
  #[napi(
    ts_type = "(input: { callIndex: number; role: string; provider: string; currentModel: string; ctxTokens: number; hasImages: boolean; toolErrorStreak: number; previousUsage?: { model: string; inputTokens?: number; cacheReadTokens: number; cacheWriteTokens: number } }) => unknown"
  )]
  pub route: Option<FunctionRef<Serde<RouteInput>, MaybePromise<RouteAnswerJs>>>,
  /// A batch of `CavemanRunEvent`s, in order.
  #[napi(ts_type = "(events: object[]) => void")]
  pub events: FunctionRef<Serde<Vec<RunEvent>>, ()>,
  #[napi(ts_type = "(callId: number) => void")]
  pub abort_tool: FunctionRef<f64, ()>,
  #[napi(ts_type = "(toolset: number, label: string, text: string) => void")]
  pub output: FunctionRef<FnArgs<(u32, String, String)>, ()>,
  /// A JS durable store's operation; never rejects (a failure resolves `{ error }`).
  #[napi(ts_type = "(request: { op: string; runId: string; data?: string }) => Promise<BindingStoreResult>")]
  pub store: Option<FunctionRef<Serde<StoreRequest>, Promise<BindingStoreResult>>>,
  /// Asks for `pump()` from another thread's wake; called through a threadsafe function.
  #[napi(ts_type = "() => void")]
  pub pump: FunctionRef<(), ()>,
  /// `RunOptions.controller`: the kernel delivered queued message `id` into the run.
  #[napi(ts_type = "(id: number) => void")]
  pub delivered: Option<FunctionRef<u32, ()>>,
  /// `budget.compaction.newContext`: answered with `replyTool(reply, seed)` or `replyError`.
  #[napi(ts_type = "(request: { reply: number; messages: object[]; generation: number; agentPath: string[] }) => void")]
  pub new_context: Option<FunctionRef<Serde<NewContextRequest>, ()>>,
  /// A programmatic runtime's `stats()`: one `count` for the cell tool held under `key`.
  #[napi(ts_type = "(key: number, count: \"launched\" | \"claimed\" | \"missed\" | \"abandoned\") => void")]
  pub speculation: Option<FunctionRef<FnArgs<(u32, &'static str)>, ()>>,
}

/// A `newContext` call: the kernel's input and the reply id its seed comes back under.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewContextRequest {
  reply: u32,
  #[serde(flatten)]
  input: NewContextInput,
}

/// One model turn for the `model` hook.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
  reply: u32,
  conversation: u64,
  model_key: u32,
  /// `"provider/id"` of a model the router chose (the JS side resolves its object).
  #[serde(skip_serializing_if = "Option::is_none")]
  model: Option<String>,
  append: Vec<Message>,
  #[serde(skip_serializing_if = "Option::is_none")]
  system_prompt: Option<String>,
  #[serde(skip_serializing_if = "Option::is_none")]
  tools: Option<Vec<ToolSchema>>,
  #[serde(skip_serializing_if = "Option::is_none")]
  max_tokens: Option<u64>,
  #[serde(skip_serializing_if = "Option::is_none")]
  reasoning: Option<String>,
  /// After a compaction: the context the provider sees from this call on.
  #[serde(skip_serializing_if = "Option::is_none")]
  context: Option<Vec<Message>>,
  /// The cell tools whose first call's source the stream shows the kernel (`speculate`).
  #[serde(skip_serializing_if = "Option::is_none")]
  speculate: Option<Vec<String>>,
}

/// [`ModelRequest`] in the shape of `model_step`: what a step of the loop sends most of the time.
type ModelStep = FnArgs<(
  u32,
  f64,
  u32,
  Option<f64>,
  Option<String>,
  String,
  String,
  String,
  bool,
  f64,
  Option<String>,
  Option<String>,
)>;

impl ModelRequest {
  /// The request has `model_step`'s shape: one step-shaped tool result appended, nothing else
  /// (a turn that speculates goes as an object: its stream is watched for the cell's source).
  fn is_step(&self) -> bool {
    self.model.is_none()
      && self.system_prompt.is_none()
      && self.tools.is_none()
      && self.context.is_none()
      && self.speculate.is_none()
      && self.max_tokens.is_none_or(|n| n < (1 << 53))
      && matches!(self.append.as_slice(), [Message::ToolResult(t)] if step_shaped(t))
  }

  /// `model_step`'s arguments of a request that [`ModelRequest::is_step`].
  fn into_step(mut self) -> ModelStep {
    let Some(Message::ToolResult(t)) = self.append.pop() else {
      unreachable!("a step request appends one tool result")
    };
    let Some(Part::Text(text)) = t.content.into_iter().next() else {
      unreachable!("a step's tool result has one text part")
    };
    let (effect, policy) = match t.details {
      Value::Object(mut d) if d.len() == 2 => (
        d.shift_remove("effect").and_then(|v| v.as_str().map(str::to_string)),
        d.shift_remove("resultPolicy").and_then(|v| v.as_str().map(str::to_string)),
      ),
      _ => (None, None),
    };
    FnArgs::from((
      self.reply,
      self.conversation as f64,
      self.model_key,
      self.max_tokens.map(|n| n as f64),
      self.reasoning,
      t.tool_call_id,
      t.tool_name,
      text.text,
      t.is_error,
      t.timestamp.and_then(|n| n.as_u64()).unwrap_or_default() as f64,
      effect,
      policy,
    ))
  }
}

/// A tool result `model_step` carries exactly: one plain text part, `details` of `{}` or
/// `{effect, resultPolicy}` (strings, in that order), a millisecond timestamp.
fn step_shaped(t: &ToolResultMessage) -> bool {
  let details = match &t.details {
    Value::Object(d) if d.is_empty() => true,
    Value::Object(d) => {
      let keys: Vec<(&String, &Value)> = d.iter().collect();
      matches!(keys.as_slice(), [(k1, Value::String(_)), (k2, Value::String(_))] if k1.as_str() == "effect" && k2.as_str() == "resultPolicy")
    }
    _ => false,
  };
  details
    && matches!(t.content.as_slice(), [Part::Text(TextPart { text_signature: None, .. })])
    && t.timestamp.as_ref().and_then(Number::as_u64).is_some_and(|n| n < (1 << 53))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DurableJs {
  idempotency_key: String,
  resumed: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequest {
  reply: u32,
  call_id: u64,
  key: u32,
  args: Value,
  tool_call_id: String,
  parent_tool_call_id: String,
  #[serde(skip_serializing_if = "Option::is_none")]
  durable: Option<DurableJs>,
  composite: bool,
  nested: bool,
}

/// How one `context.dispatch` settled.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NestedAnswer {
  reply: u32,
  ok: bool,
  #[serde(skip_serializing_if = "Option::is_none")]
  value: Option<Value>,
  #[serde(skip_serializing_if = "Option::is_none")]
  message: Option<String>,
  #[serde(skip_serializing_if = "Option::is_none")]
  code: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreRequest {
  op: &'static str,
  run_id: String,
  #[serde(skip_serializing_if = "Option::is_none")]
  data: Option<String>,
}

/// What a JS store operation resolved to: `lines` for `load`, or the `error` it threw.
#[napi(object)]
pub struct BindingStoreResult {
  pub lines: Option<Vec<String>>,
  pub error: Option<BindingHostError>,
}

/// What a JS callback threw: its message and, when it had one, its `code`.
#[napi(object)]
pub struct BindingHostError {
  pub message: String,
  pub code: Option<String>,
}

/// Where a JS hook's return goes back to the kernel (`Err`: what the call threw).
type Reply<R> = oneshot::Sender<std::result::Result<R, String>>;

/// What the kernel asked for and JS has not been handed yet, in order.
enum Out {
  Events(Vec<RunEvent>),
  Model(ModelRequest),
  Tool(ToolRequest),
  Nested(NestedAnswer),
  Policy(PolicyInput, Reply<MaybePromise<PolicyAnswerJs>>),
  Budget(ExhaustionContext, Reply<MaybePromise<BudgetAnswerJs>>),
  Route(RouteInput, Reply<MaybePromise<RouteAnswerJs>>),
  AbortTool(u64),
  Speculation(u32, &'static str),
  Output(u32, String, String),
  Delivered(u32),
  NewContext(NewContextRequest),
  Store(StoreRequest, Reply<Promise<BindingStoreResult>>),
}

/// The run's outbox: filled by the host during a poll, drained between polls.
#[derive(Default)]
struct Outbox {
  items: Mutex<VecDeque<Out>>,
  handle: OnceLock<LocalHandle>,
}

impl Outbox {
  fn push(&self, out: Out) {
    {
      let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
      match (items.back_mut(), out) {
        // Consecutive events go to JS as one batch.
        (Some(Out::Events(batch)), Out::Events(more)) => batch.extend(more),
        (_, out) => items.push_back(out),
      }
    }
    if let Some(h) = self.handle.get() {
      if !h.in_turn() {
        h.nudge();
      }
    }
  }

  fn pop(&self) -> Option<Out> {
    self.items.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
  }
}

enum Waiting {
  Model(oneshot::Sender<std::result::Result<AssistantMessage, HostError>>),
  Tool(oneshot::Sender<std::result::Result<String, HostError>>),
}

/// Model turns and JS tool calls waiting for their reply.
#[derive(Default)]
struct Replies {
  next: AtomicU32,
  waiting: Mutex<HashMap<u32, Waiting>>,
}

impl Replies {
  fn wait(&self, w: Waiting) -> u32 {
    let id = self.next.fetch_add(1, Ordering::Relaxed);
    self
      .waiting
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .insert(id, w);
    id
  }

  fn take(&self, id: u32) -> Option<Waiting> {
    self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&id)
  }
}

fn dropped() -> HostError {
  HostError::new("cave_internal: the run stopped waiting for this answer")
}

/// The speculation scope of each provider stream in flight, by its model reply id.
type Sinks = Arc<Mutex<HashMap<u32, Arc<SpeculationSink>>>>;

struct JsHost {
  outbox: Arc<Outbox>,
  replies: Arc<Replies>,
  sinks: Sinks,
  policy: Option<Arc<dyn ToolPolicy>>,
  router: Option<Arc<dyn ModelRouter>>,
  inbox: Arc<NestedInbox>,
  /// The run has an `onBudgetExhausted` handler.
  budget_handler: bool,
  /// The run has a `budget.compaction.newContext` callback.
  new_context: bool,
  queue: Arc<ControllerQueue>,
}

impl Host for JsHost {
  fn emit(&self, event: RunEvent) {
    self.outbox.push(Out::Events(vec![event]));
  }

  fn model_call(&self, call: ModelCall) -> BoxFuture<std::result::Result<AssistantMessage, HostError>> {
    let (tx, rx) = oneshot::channel();
    let reply = self.replies.wait(Waiting::Model(tx));
    let speculate = call.speculation.map(|sink| {
      let tools = sink.tools();
      self.sinks.lock().unwrap_or_else(|e| e.into_inner()).insert(reply, sink);
      tools
    });
    self.outbox.push(Out::Model(ModelRequest {
      reply,
      conversation: call.conversation,
      model_key: call.model_key,
      model: call.model,
      append: call.append,
      system_prompt: call.system_prompt,
      tools: call.tools,
      max_tokens: call.max_tokens,
      reasoning: call.reasoning,
      context: call.context,
      speculate,
    }));
    Box::pin(async move { rx.await.unwrap_or_else(|_| Err(dropped())) })
  }

  fn tool_call(&self, call: HostToolCall) -> BoxFuture<std::result::Result<String, HostError>> {
    let (tx, rx) = oneshot::channel();
    let reply = self.replies.wait(Waiting::Tool(tx));
    self.outbox.push(Out::Tool(ToolRequest {
      reply,
      call_id: call.call_id,
      key: call.key,
      args: call.args,
      tool_call_id: call.tool_call_id,
      parent_tool_call_id: call.parent_tool_call_id,
      durable: call.durable.map(|d| DurableJs {
        idempotency_key: d.idempotency_key,
        resumed: d.resumed,
      }),
      composite: call.composite,
      nested: call.nested,
    }));
    Box::pin(async move { rx.await.unwrap_or_else(|_| Err(dropped())) })
  }

  fn abort_tool(&self, call_id: u64) {
    self.outbox.push(Out::AbortTool(call_id));
  }

  fn speculation(&self, key: u32, count: SpeculationCount) {
    self.outbox.push(Out::Speculation(key, count.as_str()));
  }

  fn on_output(&self, toolset: u32, label: &str, text: &str) {
    self.outbox.push(Out::Output(toolset, label.into(), text.into()));
  }

  fn policy(&self) -> Option<Arc<dyn ToolPolicy>> {
    self.policy.clone()
  }

  fn native_toolset(&self, id: u32) -> Option<Arc<ShellTools>> {
    toolset_by_id(id)
  }

  fn nested_inbox(&self) -> Option<Arc<NestedInbox>> {
    Some(self.inbox.clone())
  }

  /// Called between polls like the policy; a sync answer settles at once.
  fn budget_exhausted(
    &self,
    context: ExhaustionContext,
  ) -> Option<BoxFuture<std::result::Result<ExhaustionAnswer, HostError>>> {
    if !self.budget_handler {
      return None;
    }
    let (tx, rx) = oneshot::channel();
    self.outbox.push(Out::Budget(context, tx));
    Some(Box::pin(async move {
      let answer = rx.await.map_err(|_| dropped())?.map_err(HostError::new)?;
      answer.settle().await.map(|a| a.0).map_err(HostError::new)
    }))
  }

  fn new_context(&self, input: NewContextInput) -> Option<BoxFuture<std::result::Result<String, HostError>>> {
    if !self.new_context {
      return None;
    }
    let (tx, rx) = oneshot::channel();
    let reply = self.replies.wait(Waiting::Tool(tx));
    self.outbox.push(Out::NewContext(NewContextRequest { reply, input }));
    Some(Box::pin(async move { rx.await.unwrap_or_else(|_| Err(dropped())) }))
  }

  fn take_queued(&self, kind: QueueKind) -> Option<UserMessage> {
    let (id, message) = self.queue.take(kind)?;
    // The JS controller drops the entry when this reaches it (after this poll).
    self.outbox.push(Out::Delivered(id));
    Some(message)
  }

  fn router(&self) -> Option<Arc<dyn ModelRouter>> {
    self.router.clone()
  }
}

/// The run's `modelRouter`: called between polls, as the policy is; a sync answer settles at once.
struct JsRouter(Arc<Outbox>);

impl ModelRouter for JsRouter {
  fn route(&self, input: &RouteInput) -> BoxFuture<std::result::Result<Value, String>> {
    let (tx, rx) = oneshot::channel();
    self.0.push(Out::Route(input.clone(), tx));
    Box::pin(async move {
      let answer = rx.await.map_err(|_| "the modelRouter call was dropped".to_string())??;
      answer.settle().await.map(|d| d.0)
    })
  }
}

/// The run's `toolPolicy`: called between polls; a sync answer settles at once.
struct JsPolicy(Arc<Outbox>);

impl ToolPolicy for JsPolicy {
  fn evaluate(&self, input: &PolicyInput) -> BoxFuture<std::result::Result<PolicyAnswer, String>> {
    let (tx, rx) = oneshot::channel();
    self.0.push(Out::Policy(input.clone(), tx));
    Box::pin(async move {
      let answer = rx.await.map_err(|_| "the policy call was dropped".to_string())??;
      answer.settle().await.map(|a| a.0)
    })
  }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingDurable {
  store: BindingStoreRef,
  input: Value,
  session_id: String,
  /// The bound Conversation's base checkpoint (`run_started.conversation`).
  #[serde(default)]
  conversation: Option<Value>,
}

#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum BindingStoreRef {
  /// The embedded disk store, run natively.
  Disk { root: String },
  /// A JS store object (`SqlDurableStore`, a user's own), called through the `store` hook.
  Js,
}

/// A JS `DurableStore` as a core store.
struct JsStore(Arc<Outbox>);

impl JsStore {
  fn op(
    &self,
    op: &'static str,
    run_id: &str,
    data: Option<String>,
  ) -> BoxFuture<std::result::Result<Option<Vec<String>>, DurableError>> {
    let (tx, rx) = oneshot::channel();
    self.0.push(Out::Store(
      StoreRequest {
        op,
        run_id: run_id.into(),
        data,
      },
      tx,
    ));
    let failed = |m: String| Error::new(Code::DurableStoreFailed, m);
    Box::pin(async move {
      let promise = rx
        .await
        .map_err(|_| failed("cave_durable_store_failed: the store call was dropped".into()))?
        .map_err(failed)?;
      let result = promise.await.map_err(|e| failed(e.reason.clone()))?;
      match result.error {
        None => Ok(result.lines),
        Some(e) => {
          // The store's own code when it raised one (`cave_durable_run_locked`, …).
          let code = e
            .code
            .as_deref()
            .and_then(Code::parse)
            .unwrap_or(Code::DurableStoreFailed);
          Err(Error::new(code, e.message))
        }
      }
    })
  }
}

impl DurableStore for JsStore {
  fn load(&self, run_id: &str) -> BoxFuture<std::result::Result<Vec<String>, DurableError>> {
    let f = self.op("load", run_id, None);
    Box::pin(async move {
      f.await?.ok_or_else(|| {
        Error::coded(
          Code::DurableStoreFailed,
          "load must resolve to an array of strings",
        )
      })
    })
  }

  fn append(&self, run_id: &str, data: String) -> BoxFuture<std::result::Result<(), DurableError>> {
    let f = self.op("append", run_id, Some(data));
    Box::pin(async move { f.await.map(|_| ()) })
  }

  fn acquire(&self, run_id: &str) -> BoxFuture<std::result::Result<(), DurableError>> {
    let f = self.op("acquire", run_id, None);
    Box::pin(async move { f.await.map(|_| ()) })
  }

  fn release(&self, run_id: &str) -> BoxFuture<std::result::Result<(), DurableError>> {
    let f = self.op("release", run_id, None);
    Box::pin(async move { f.await.map(|_| ()) })
  }

  fn close(&self, run_id: &str) -> BoxFuture<std::result::Result<(), DurableError>> {
    let f = self.op("close", run_id, None);
    Box::pin(async move { f.await.map(|_| ()) })
  }

  fn list(&self) -> Option<BoxFuture<std::result::Result<Vec<String>, DurableError>>> {
    None
  }
}

type PumpFn = ThreadsafeFunction<(), (), (), Status, false, true>;

#[napi]
pub struct NativeRun {
  cancel: CancellationToken,
  outbox: Arc<Outbox>,
  replies: Arc<Replies>,
  executor: OnceLock<LocalExecutor<BindingRunOutcome>>,
  hooks: OnceLock<BindingRunHooks>,
  inbox: Arc<NestedInbox>,
  sinks: Sinks,
  /// The `options.signal` of each pending `context.dispatch`, by reply id.
  nested_aborts: Arc<Mutex<HashMap<u32, Arc<NestedAbort>>>>,
  /// `RunOptions.controller`'s messages for this run (filled from JS, drained by the kernel).
  queue: Arc<ControllerQueue>,
  /// The root meter once the options are valid (`RunOptions.budget`): a `BudgetController`.
  meter: Arc<OnceLock<MeterCell>>,
}

/// What a `BudgetController`'s getters read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSnapshot {
  denomination: &'static str,
  max: f64,
  released: f64,
  spent: f64,
  tranches: Vec<Tranche>,
}

impl Default for NativeRun {
  fn default() -> Self {
    Self::new()
  }
}

#[napi]
impl NativeRun {
  #[napi(constructor)]
  pub fn new() -> Self {
    Self {
      cancel: CancellationToken::new(),
      outbox: Arc::new(Outbox::default()),
      replies: Arc::new(Replies::default()),
      executor: OnceLock::new(),
      hooks: OnceLock::new(),
      inbox: NestedInbox::new(),
      sinks: Sinks::default(),
      nested_aborts: Arc::default(),
      meter: Arc::default(),
      queue: Arc::default(),
    }
  }

  /// `BudgetController.releaseBudget(amount, reason)`: the root meter's release, with its
  /// codes. `amount` is NaN and `reason` undefined when JS was handed something else.
  #[napi(ts_return_type = "{ amount: number; reason: string; atCall: number }")]
  pub fn release_budget(
    &self,
    amount: f64,
    reason: Option<String>,
  ) -> napi::Result<Serde<Tranche>, ErrorCode> {
    let Some(meter) = self.meter.get() else {
      return Err(napi::Error::new(
        ErrorCode(Code::BudgetControllerUnbound.to_string()),
        "cave_budget_controller_unbound: the run has no budget meter yet",
      ));
    };
    let released = meter.lock().release(amount, reason.as_deref());
    released
      .map(Serde)
      .map_err(|e| napi::Error::new(ErrorCode(e.code.to_string()), e.message))
  }

  /// The root meter's figures for a `BudgetController`'s getters (`null` before the run has one).
  #[napi(
    ts_return_type = "{ denomination: string; max: number; released: number; spent: number; tranches: { amount: number; reason: string; atCall: number }[] } | null"
  )]
  pub fn budget_snapshot(&self) -> Option<Serde<BudgetSnapshot>> {
    let m = self.meter.get()?.lock();
    Some(Serde(BudgetSnapshot {
      denomination: m.denomination.as_str(),
      max: m.max,
      released: knap_core::kernel::budget::round10(m.released),
      spent: knap_core::kernel::budget::round10(m.spent),
      tranches: m.tranches.clone(),
    }))
  }

  /// Starts the run described by `agentJson` and `optionsJson` (JSON once per run, not per
  /// step) and polls it until it waits on something. Returns the outcome if the run is already
  /// over, else `null`; `replyModel` / `replyTool` / `replyError` / `pump` return it the same
  /// way. The caller keeps the event loop alive while a run is pending.
  #[napi]
  pub fn start(
    &self,
    env: Env,
    agent_json: String,
    options_json: String,
    hooks: BindingRunHooks,
  ) -> Result<Option<BindingRunOutcome>> {
    let pump: Arc<PumpFn> = Arc::new(
      hooks
        .pump
        .borrow_back(&env)?
        .build_threadsafe_function::<()>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?,
    );
    let policy: Option<Arc<dyn ToolPolicy>> = hooks
      .policy
      .is_some()
      .then(|| Arc::new(JsPolicy(self.outbox.clone())) as Arc<dyn ToolPolicy>);
    let budget_handler = hooks.budget.is_some();
    let new_context = hooks.new_context.is_some();
    let router: Option<Arc<dyn ModelRouter>> = hooks
      .route
      .is_some()
      .then(|| Arc::new(JsRouter(self.outbox.clone())) as Arc<dyn ModelRouter>);
    if self.hooks.set(hooks).is_err() {
      return Err(napi::Error::from_reason("cave_internal: a NativeRun starts once"));
    }
    let future = run_outcome(
      agent_json,
      options_json,
      JsHost {
        outbox: self.outbox.clone(),
        replies: self.replies.clone(),
        sinks: self.sinks.clone(),
        policy,
        router,
        inbox: self.inbox.clone(),
        budget_handler,
        new_context,
        queue: self.queue.clone(),
      },
      self.cancel.clone(),
      self.meter.clone(),
    );
    let executor = LocalExecutor::new(future, move || {
      let _ = pump.call((), ThreadsafeFunctionCallMode::NonBlocking);
    });
    let _ = self.outbox.handle.set(executor.handle());
    let _ = self.executor.set(executor);
    self.turn(&env, || {})
  }

  /// Answers model turn `id` with the final assistant message, Pi's `AssistantMessage` taken
  /// apart by `lib/run.mjs` (`replyModel`): its `content` array, its other members, and the
  /// members of its `usage` and `usage.cost` (`hasUsage` / `hasCost`: the object was there).
  /// Positional, so the model's reply costs a handful of reads instead of a property lookup per
  /// member (the content parts are read off their objects).
  #[napi(
    ts_args_type = "id: number, content: unknown[], api: string | undefined, provider: string | undefined, model: string | undefined, responseId: string | undefined, stopReason: string | undefined, errorMessage: string | undefined, timestamp: number | undefined, hasUsage: boolean, input: number | undefined, output: number | undefined, cacheRead: number | undefined, cacheWrite: number | undefined, reasoning: number | undefined, totalTokens: number | undefined, hasCost: boolean, costInput: number | undefined, costOutput: number | undefined, costCacheRead: number | undefined, costCacheWrite: number | undefined, costTotal: number | undefined"
  )]
  #[allow(clippy::too_many_arguments)]
  pub fn reply_model(
    &self,
    env: Env,
    id: u32,
    content: Unknown,
    api: OptStr,
    provider: OptStr,
    model: OptStr,
    response_id: OptStr,
    stop_reason: OptStr,
    error_message: OptStr,
    timestamp: OptNum,
    has_usage: bool,
    input: OptNum,
    output: OptNum,
    cache_read: OptNum,
    cache_write: OptNum,
    reasoning: OptNum,
    total_tokens: OptNum,
    has_cost: bool,
    cost_input: OptNum,
    cost_output: OptNum,
    cost_cache_read: OptNum,
    cost_cache_write: OptNum,
    cost_total: OptNum,
  ) -> Result<Option<BindingRunOutcome>> {
    let content = Js::new(env.raw())?.read_content(content.raw())?;
    let usage = if has_usage {
      MessageUsage {
        input: input.0,
        output: output.0,
        cache_read: cache_read.0,
        cache_write: cache_write.0,
        reasoning: reasoning.0,
        total_tokens: total_tokens.0,
        cost: has_cost.then_some(UsageCost {
          input: cost_input.0,
          output: cost_output.0,
          cache_read: cost_cache_read.0,
          cache_write: cost_cache_write.0,
          total: cost_total.0,
        }),
      }
    } else {
      MessageUsage::default()
    };
    let stop_reason = match stop_reason.0.as_deref() {
      Some("length") => StopReason::Length,
      Some("toolUse") => StopReason::ToolUse,
      Some("error") => StopReason::Error,
      Some("aborted") => StopReason::Aborted,
      _ => StopReason::Stop,
    };
    let message = AssistantMessage {
      content,
      api: api.0,
      provider: provider.0,
      model: model.0,
      response_id: response_id.0,
      usage,
      stop_reason,
      error_message: error_message.0,
      timestamp: timestamp.0,
    };
    self.turn(&env, || {
      self.sinks.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
      if let Some(Waiting::Model(tx)) = self.replies.take(id) {
        let _ = tx.send(Ok(message));
      }
    })
  }

  /// The source of model turn `id`'s first cell call (tool `name`, content index
  /// `contentIndex`) as it streams; `endId` is the call's id once it is complete. The kernel
  /// launches the literal read calls it finds (speculation); a turn without a scope ignores it.
  #[napi]
  pub fn speculate(
    &self,
    env: Env,
    id: u32,
    content_index: u32,
    name: String,
    code: String,
    end_id: Option<String>,
  ) -> Result<Option<BindingRunOutcome>> {
    let sink = self.sinks.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
    let Some(sink) = sink else {
      return Ok(None);
    };
    self.turn(&env, || sink.observe(content_index, &name, &code, end_id.as_deref()))
  }

  /// Answers JS tool call `id` with its text result.
  #[napi]
  pub fn reply_tool(&self, env: Env, id: u32, text: String) -> Result<Option<BindingRunOutcome>> {
    self.turn(&env, || {
      if let Some(Waiting::Tool(tx)) = self.replies.take(id) {
        let _ = tx.send(Ok(text));
      }
    })
  }

  /// Answers request `id` (a model turn or a JS tool call) with what it threw.
  #[napi]
  pub fn reply_error(&self, env: Env, id: u32, error: BindingHostError) -> Result<Option<BindingRunOutcome>> {
    self.turn(&env, || {
      let e = HostError {
        message: error.message,
        code: error.code,
      };
      self.sinks.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
      match self.replies.take(id) {
        Some(Waiting::Model(tx)) => {
          let _ = tx.send(Err(e));
        }
        Some(Waiting::Tool(tx)) => {
          let _ = tx.send(Err(e));
        }
        None => {}
      }
    })
  }

  /// `context.dispatch(name, input, options)` of the composite container running as JS tool
  /// call `callId`: the kernel admits and runs it, and answers through the `nested` hook with
  /// `reply` (the caller's id for this dispatch). `aborted`: `options.signal` had already
  /// aborted (`reason`: its reason's message when that was an Error).
  #[napi]
  #[allow(clippy::too_many_arguments)]
  pub fn dispatch_nested(
    &self,
    env: Env,
    reply: u32,
    call_id: f64,
    name: String,
    #[napi(ts_arg_type = "unknown")] args: Value,
    claim_speculation: bool,
    aborted: bool,
    reason: Option<String>,
  ) -> Result<Option<BindingRunOutcome>> {
    let abort = NestedAbort::new();
    if aborted {
      abort.abort(reason);
    }
    self
      .nested_aborts
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .insert(reply, abort.clone());
    let outbox = self.outbox.clone();
    let aborts = self.nested_aborts.clone();
    let request = NestedRequest {
      container: call_id as u64,
      name,
      args,
      claim_speculation,
      abort,
      reply: Box::new(move |result| {
        aborts.lock().unwrap_or_else(|e| e.into_inner()).remove(&reply);
        outbox.push(Out::Nested(match result {
          Ok(value) => NestedAnswer {
            reply,
            ok: true,
            value: Some(value),
            message: None,
            code: None,
          },
          Err(e) => NestedAnswer {
            reply,
            ok: false,
            value: None,
            message: Some(e.message),
            code: e.code,
          },
        }));
      }),
    };
    self.turn(&env, || self.inbox.dispatch(request))
  }

  /// The `options.signal` of dispatch `reply` aborted (`reason`: its reason's message when
  /// that was an Error).
  #[napi]
  pub fn abort_nested(&self, env: Env, reply: u32, reason: Option<String>) -> Result<Option<BindingRunOutcome>> {
    let abort = self
      .nested_aborts
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(&reply)
      .cloned();
    self.turn(&env, || {
      if let Some(a) = abort {
        a.abort(reason);
      }
    })
  }

  /// Polls the run after a wake from another thread (the `pump` hook).
  #[napi]
  pub fn pump(&self, env: Env) -> Result<Option<BindingRunOutcome>> {
    let Some(executor) = self.executor.get() else {
      return Ok(None);
    };
    let mut failed = None;
    let out =
      napi::bindgen_prelude::within_runtime_if_available(|| executor.pump(|| self.flush(&env, &mut failed)));
    failed.map_or(Ok(out), Err)
  }

  /// `AgentRunController.steer` (`steer`) / `followUp`: queues message `id` for the kernel, which
  /// takes it at a turn boundary (and reports it through the `delivered` hook). Never polls: the
  /// kernel does not wait for these.
  #[napi]
  pub fn controller_push(&self, steer: bool, id: u32, text: String, timestamp: f64) {
    let kind = if steer { QueueKind::Steering } else { QueueKind::FollowUp };
    let message = UserMessage {
      content: UserContent::Parts(vec![Part::Text(TextPart::new(text))]),
      timestamp: crate::js::js_number(timestamp),
    };
    self.queue.push(kind, id, message);
  }

  /// `clear(index)`: drops queued message `id` (a no-op once delivered).
  #[napi]
  pub fn controller_remove(&self, id: u32) {
    self.queue.remove(id);
  }

  /// `clear()`: drops every queued message.
  #[napi]
  pub fn controller_clear(&self) {
    self.queue.clear();
  }

  /// `interrupt()` / `resume()`: while held, nothing is delivered.
  #[napi]
  pub fn controller_hold(&self, held: bool) {
    self.queue.hold(held);
  }

  /// Aborts the run: the model call is dropped and running tools are killed.
  #[napi]
  pub fn cancel(&self) {
    self.cancel.cancel();
  }
}

impl NativeRun {
  fn turn(&self, env: &Env, before: impl FnOnce()) -> Result<Option<BindingRunOutcome>> {
    let Some(executor) = self.executor.get() else {
      return Ok(None);
    };
    let mut failed = None;
    let out = napi::bindgen_prelude::within_runtime_if_available(|| {
      executor.turn(before, || self.flush(env, &mut failed))
    });
    failed.map_or(Ok(out), Err)
  }

  /// Hands JS what the last poll queued, in order. A hook that throws is a bug of the JS layer
  /// (its adapters catch user errors); the first such error is returned to the caller.
  fn flush(&self, env: &Env, failed: &mut Option<napi::Error>) {
    let Some(hooks) = self.hooks.get() else { return };
    while let Some(out) = self.outbox.pop() {
      let r = match out {
        Out::Events(batch) => hooks.events.borrow_back(env).and_then(|f| f.call(Serde(batch))),
        Out::Model(request) if request.is_step() => {
          hooks.model_step.borrow_back(env).and_then(|f| f.call(request.into_step()))
        }
        Out::Model(request) => hooks.model.borrow_back(env).and_then(|f| f.call(Serde(request))),
        Out::Tool(request) => hooks.tool.borrow_back(env).and_then(|f| f.call(Serde(request))),
        Out::Nested(answer) => hooks.nested.borrow_back(env).and_then(|f| f.call(Serde(answer))),
        Out::AbortTool(id) => hooks.abort_tool.borrow_back(env).and_then(|f| f.call(id as f64)),
        Out::NewContext(request) => match &hooks.new_context {
          Some(f) => f.borrow_back(env).and_then(|f| f.call(Serde(request))),
          None => Ok(()),
        },
        Out::Speculation(key, count) => match &hooks.speculation {
          Some(h) => h.borrow_back(env).and_then(|f| f.call(FnArgs::from((key, count)))),
          None => Ok(()),
        },
        Out::Delivered(id) => match &hooks.delivered {
          Some(d) => d.borrow_back(env).and_then(|f| f.call(id)),
          None => Ok(()),
        },
        Out::Output(toolset, label, text) => hooks
          .output
          .borrow_back(env)
          .and_then(|f| f.call(FnArgs::from((toolset, label, text)))),
        Out::Policy(input, tx) => answer(env, &hooks.policy, "policy", Serde(input), tx),
        Out::Budget(context, tx) => answer(env, &hooks.budget, "budget", Serde(context), tx),
        Out::Route(input, tx) => answer(env, &hooks.route, "route", Serde(input), tx),
        Out::Store(request, tx) => answer(env, &hooks.store, "store", Serde(request), tx),
      };
      if let Err(e) = r {
        failed.get_or_insert(e);
      }
    }
  }
}

/// Calls a hook whose return the kernel awaits and sends that return (or what the call threw)
/// back; a send to a kernel that stopped waiting is dropped.
fn answer<A: JsValuesTupleIntoVec, R: FromNapiValue>(
  env: &Env,
  hook: &Option<FunctionRef<A, R>>,
  name: &str,
  args: A,
  tx: Reply<R>,
) -> Result<()> {
  let r = match hook {
    Some(h) => h
      .borrow_back(env)
      .and_then(|f| f.call(args))
      .map_err(|e| e.reason.clone()),
    None => Err(format!("cave_internal: no {name} hook")),
  };
  let _ = tx.send(r);
  Ok(())
}

/// A run's options, parsed and checked (limits, budget, compaction) as the run would.
fn prepare_options(options_json: &str) -> std::result::Result<Prepared, Error> {
  let options: RunOptionsSpec = serde_json::from_str(options_json).map_err(|e| {
    // Name the field, the type it needs and the value received (serde's message names none).
    serde_json::from_str::<Value>(options_json)
      .ok()
      .and_then(|v| knap_core::kernel::spec::explain_option_types(&v))
      .unwrap_or_else(|| Error::coded(Code::RunOptionsInvalid, e))
  })?;
  Prepared::new(options)
}

/// Checks run options without running (`{ code, message }` of the refusal, or null): the JS layer
/// asks before it resolves the model, because the reference validates options (plain Errors)
/// before the model (a run error), so a bad `deadlineMs` is reported before a missing credential.
#[napi]
pub fn check_run_options(options_json: String) -> Option<BindingRunOutcome> {
  prepare_options(&options_json).err().map(|e| BindingRunOutcome {
    phase: "options".into(),
    code: Some(e.code.to_string()),
    message: Some(e.message),
  })
}

async fn run_outcome(
  agent_json: String,
  options_json: String,
  host: JsHost,
  cancel: CancellationToken,
  meter: Arc<OnceLock<MeterCell>>,
) -> BindingRunOutcome {
  let refused = |e: Error| BindingRunOutcome {
    phase: "options".into(),
    code: Some(e.code.to_string()),
    message: Some(e.message),
  };
  let agent: AgentSpec = match serde_json::from_str(&agent_json) {
    Ok(a) => a,
    Err(e) => return refused(Error::coded(Code::AgentDefinitionInvalid, e)),
  };
  let prepared = match prepare_options(&options_json) {
    Ok(p) => p,
    Err(e) => return refused(e),
  };
  let durable_options: Option<BindingDurable> = serde_json::from_str::<Value>(&options_json)
    .ok()
    .and_then(|v| v.get("durable").cloned())
    .filter(|d| !d.is_null())
    .and_then(|d| serde_json::from_value(d).ok());
  if let Some(m) = prepared.meter() {
    let _ = meter.set(m);
  }
  let durable = durable_options.map(|d| {
    let store: Arc<dyn DurableStore> = match d.store {
      BindingStoreRef::Disk { root } => Arc::new(Arc::new(DiskStore::new(root))),
      BindingStoreRef::Js => Arc::new(JsStore(host.outbox.clone())),
    };
    let agent_value: Value = serde_json::from_str(&agent_json).unwrap_or_default();
    DurableSetup {
      store,
      definition_sha256: definition_sha256(&agent_value),
      input: d.input,
      session_id: d.session_id,
      conversation: d.conversation.filter(|c| !c.is_null()),
    }
  });
  match run_agent(Arc::new(host), agent, prepared, cancel, durable).await {
    Err(f) if f.pre_run => refused(f.error),
    Ok(_) => BindingRunOutcome {
      phase: "done".into(),
      code: None,
      message: None,
    },
    Err(f) => BindingRunOutcome {
      phase: "run".into(),
      code: Some(f.code.to_string()),
      message: Some(f.error.message),
    },
  }
}

/// Process-wide kernel counters (profiling, `bench/kernel.mjs`): model calls and the time spent
/// waiting for the transport, executed tool calls and the time spent executing them. Nanosecond
/// totals are numbers (exact up to 2^53 ns, about 104 days).
#[napi(object)]
pub struct BindingKernelStats {
  pub model_calls: f64,
  pub model_wait_ns: f64,
  pub tool_calls: f64,
  pub tool_exec_ns: f64,
  /// Whether this addon is a debug build (timings from one are not representative).
  pub debug_build: bool,
}

#[napi]
pub fn kernel_stats() -> BindingKernelStats {
  let s = knap_core::kernel::stats::snapshot();
  BindingKernelStats {
    model_calls: s.model_calls as f64,
    model_wait_ns: s.model_wait_ns as f64,
    tool_calls: s.tool_calls as f64,
    tool_exec_ns: s.tool_exec_ns as f64,
    debug_build: cfg!(debug_assertions),
  }
}

/// The code `run()` rejects with for a failure with `message` (the reference's coarse
/// `errorCode()`; the one implementation, in the core).
#[napi]
pub fn run_error_code(message: String) -> String {
  Code::for_run_failure(&message).to_string()
}

/// `agentStaticContextDiagnostics`: bytes of the system prompt plus the tool schemas a model is
/// sent, without calling one.
#[napi(object)]
pub struct BindingStaticContext {
  pub static_context_bytes: u32,
  pub available_tool_count: u32,
}

#[napi]
pub fn static_context_diagnostics(agent_json: String) -> napi::Result<BindingStaticContext> {
  let agent: AgentSpec = serde_json::from_str(&agent_json)
    .map_err(|e| napi::Error::from_reason(format!("cave_agent_definition_invalid: {e}")))?;
  let prompt = knap_core::kernel::system_prompt(&agent);
  let tools = serde_json::to_string(&knap_core::kernel::tool_schemas(&agent)).unwrap_or_default();
  Ok(BindingStaticContext {
    static_context_bytes: (prompt.len() + tools.len()) as u32,
    available_tool_count: agent.tools.len() as u32,
  })
}
