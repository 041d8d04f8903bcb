//! `NativeRun`: one `run()`/`stream()` of the Rust kernel. Everything the kernel asks of JS
//! (model turns, user tools, the policy, events, `onOutput`) goes through one weak threadsafe
//! function, the run's dispatcher, so events and calls reach JS in the order Rust made them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use knap_core::durable::store::{DiskStore, DurableStore};
use knap_core::durable::DurableError;
use knap_core::exec::BoxFuture;
use knap_core::kernel::host::{Host, HostToolCall, ModelCall};
use knap_core::kernel::spec::{AgentSpec, RunOptionsSpec};
use knap_core::kernel::{definition_sha256, run_agent, DurableSetup, Prepared};
use knap_core::policy::ToolPolicy;
use knap_core::tools::ShellTools;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::policy::{JsDispatchFn, JsPolicy};
use crate::shell_tools::toolset_by_id;

/// How a run ended: `phase` is `"options"` (invalid options: throw a plain Error before the
/// run), `"run"` (a run error: `message` and `receiptJson`), or `"done"` (`resultJson`).
#[napi(object)]
pub struct BindingRunOutcome {
  pub phase: String,
  pub code: Option<String>,
  pub message: Option<String>,
  pub receipt_json: Option<String>,
  pub result_json: Option<String>,
}

struct JsHost {
  dispatch: Arc<JsDispatchFn>,
  policy: Option<Arc<dyn ToolPolicy>>,
  /// Model turns and JS tools answer through `NativeRun.reply` rather than a returned Promise:
  /// one thread hop each way instead of three (call, returned Promise, its settlement).
  replies: Option<Arc<Replies>>,
}

/// Requests waiting for `NativeRun.reply(id, ok, text)`.
#[derive(Default)]
struct Replies {
  next: AtomicU32,
  waiting: Mutex<HashMap<u32, tokio::sync::oneshot::Sender<std::result::Result<String, String>>>>,
}

impl Replies {
  fn settle(&self, id: u32, answer: std::result::Result<String, String>) {
    let sender = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    if let Some(sender) = sender {
      // The run may have stopped waiting (abort); the answer is then dropped.
      let _ = sender.send(answer);
    }
  }
}

impl JsHost {
  fn send(&self, msg: Value) {
    let _ = self
      .dispatch
      .call(msg.to_string(), ThreadsafeFunctionCallMode::NonBlocking);
  }

  /// Sends `msg` with a `reply` id; JS answers with `NativeRun.reply(id, ok, text)`.
  fn request(&self, mut msg: Value) -> BoxFuture<std::result::Result<String, String>> {
    let Some(replies) = self.replies.clone() else {
      return self.ask(msg);
    };
    let id = replies.next.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = tokio::sync::oneshot::channel();
    replies
      .waiting
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .insert(id, tx);
    msg["reply"] = json!(id);
    let status = self
      .dispatch
      .call(msg.to_string(), ThreadsafeFunctionCallMode::NonBlocking);
    if status != Status::Ok {
      replies.settle(
        id,
        Err(format!(
          "cave_internal: the run's dispatcher is closed ({status})"
        )),
      );
    }
    Box::pin(async move {
      rx.await
        .unwrap_or_else(|_| Err("cave_internal: the request was dropped".into()))
    })
  }

  fn ask(&self, msg: Value) -> BoxFuture<std::result::Result<String, String>> {
    let f = self.dispatch.clone();
    let text = msg.to_string();
    Box::pin(async move {
      match f.call_async_catch(text).await {
        Err(e) => Err(e.reason.clone()),
        Ok(Either::A(promise)) => promise.await.map_err(|e| e.reason.clone()),
        Ok(Either::B(s)) => Ok(s),
      }
    })
  }
}

impl Host for JsHost {
  fn emit(&self, event: Value) {
    self.send(json!({"k": "event", "event": event}));
  }

  fn model_call(&self, call: ModelCall) -> BoxFuture<std::result::Result<Value, String>> {
    let reply = self.request(json!({
      "k": "model", "conversation": call.conversation, "modelKey": call.model_key, "append": call.append,
      "systemPrompt": call.system_prompt, "tools": call.tools, "maxTokens": call.max_tokens, "reasoning": call.reasoning
    }));
    Box::pin(async move {
      let text = reply.await?;
      serde_json::from_str(&text)
        .map_err(|e| format!("cave_provider_terminal_error: unreadable assistant message: {e}"))
    })
  }

  fn tool_call(&self, call: HostToolCall) -> BoxFuture<std::result::Result<String, String>> {
    self.request(json!({
      "k": "tool", "callId": call.call_id, "key": call.key, "args": call.args,
      "toolCallId": call.tool_call_id, "parentToolCallId": call.parent_tool_call_id,
      "durable": call.durable.map(|(key, resumed)| json!({"idempotencyKey": key, "resumed": resumed}))
    }))
  }

  fn abort_tool(&self, call_id: u64) {
    self.send(json!({"k": "abortTool", "callId": call_id}));
  }

  fn on_output(&self, toolset: u32, label: &str, text: &str) {
    self.send(json!({"k": "output", "toolset": toolset, "label": label, "text": text}));
  }

  fn policy(&self) -> Option<Arc<dyn ToolPolicy>> {
    self.policy.clone()
  }

  fn native_toolset(&self, id: u32) -> Option<Arc<ShellTools>> {
    toolset_by_id(id)
  }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingDurable {
  store: BindingStoreRef,
  input: Value,
  session_id: String,
}

#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum BindingStoreRef {
  /// The embedded disk store, run natively.
  Disk { root: String },
  /// A JS store object (`SqlDurableStore`, a user's own), called through the dispatcher.
  Js,
}

/// A JS `DurableStore` as a core store: `{k:"store", op, runId, data?}` through the dispatcher.
struct JsStore {
  dispatch: Arc<JsDispatchFn>,
}

impl JsStore {
  fn op(
    &self,
    op: &'static str,
    run_id: &str,
    data: Option<String>,
  ) -> BoxFuture<std::result::Result<String, DurableError>> {
    let host = JsHost {
      dispatch: self.dispatch.clone(),
      policy: None,
      replies: None,
    };
    let reply = host.ask(json!({"k": "store", "op": op, "runId": run_id, "data": data}));
    Box::pin(async move {
      reply.await.map_err(|message| {
        let code = message
          .split(':')
          .next()
          .filter(|c| c.starts_with("cave_"))
          .unwrap_or("cave_durable_store_failed")
          .to_string();
        DurableError::new(code, message)
      })
    })
  }
}

impl DurableStore for JsStore {
  fn load(&self, run_id: &str) -> BoxFuture<std::result::Result<Vec<String>, DurableError>> {
    let f = self.op("load", run_id, None);
    Box::pin(async move {
      let text = f.await?;
      serde_json::from_str::<Vec<String>>(&text).map_err(|_| {
        DurableError::coded(
          "cave_durable_store_failed",
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

#[napi]
pub struct NativeRun {
  cancel: CancellationToken,
  replies: Arc<Replies>,
  local: Local,
}

/// A kernel future polled on the JS thread (`startLocal`).
#[derive(Default)]
struct Local {
  future: Mutex<Option<BoxFuture<BindingRunOutcome>>>,
  wake: Arc<LocalWake>,
}

struct LocalWake {
  js_thread: std::thread::ThreadId,
  /// Set while this thread polls (or settles a reply): a wake then means "poll again".
  polling: AtomicBool,
  again: AtomicBool,
  /// A `{k:"pump"}` dispatch is queued and not yet answered.
  scheduled: AtomicBool,
  dispatch: Mutex<Option<Arc<JsDispatchFn>>>,
}

impl Default for LocalWake {
  fn default() -> Self {
    Self {
      js_thread: std::thread::current().id(),
      polling: AtomicBool::new(false),
      again: AtomicBool::new(false),
      scheduled: AtomicBool::new(false),
      dispatch: Mutex::new(None),
    }
  }
}

impl std::task::Wake for LocalWake {
  fn wake(self: Arc<Self>) {
    self.wake_by_ref();
  }

  fn wake_by_ref(self: &Arc<Self>) {
    if std::thread::current().id() == self.js_thread && self.polling.load(Ordering::SeqCst) {
      self.again.store(true, Ordering::SeqCst);
      return;
    }
    if !self.scheduled.swap(true, Ordering::SeqCst) {
      if let Some(dispatch) = self.dispatch.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let _ = dispatch.call(
          r#"{"k":"pump"}"#.to_string(),
          ThreadsafeFunctionCallMode::NonBlocking,
        );
      }
    }
  }
}

#[napi]
impl NativeRun {
  #[napi(constructor)]
  pub fn new() -> Self {
    Self {
      cancel: CancellationToken::new(),
      replies: Arc::new(Replies::default()),
      local: Local::default(),
    }
  }

  /// Answers request `id` (a model turn or a JS tool call): `ok` with its text, or the error message.
  #[napi]
  pub fn reply(&self, id: u32, ok: bool, text: String) -> Option<BindingRunOutcome> {
    let wake = &self.local.wake;
    let local = std::thread::current().id() == wake.js_thread && !wake.polling.swap(true, Ordering::SeqCst);
    self.replies.settle(id, if ok { Ok(text) } else { Err(text) });
    if local {
      wake.polling.store(false, Ordering::SeqCst);
      if wake.again.swap(false, Ordering::SeqCst) {
        return self.drive();
      }
    }
    None
  }

  /// Polls the local kernel future until it needs something from elsewhere.
  fn drive(&self) -> Option<BindingRunOutcome> {
    let wake = self.local.wake.clone();
    if wake.polling.swap(true, Ordering::SeqCst) {
      wake.again.store(true, Ordering::SeqCst);
      return None;
    }
    let waker = std::task::Waker::from(wake.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let outcome = napi::bindgen_prelude::within_runtime_if_available(|| loop {
      wake.again.store(false, Ordering::SeqCst);
      let mut slot = self.local.future.lock().unwrap_or_else(|e| e.into_inner());
      let Some(future) = slot.as_mut() else { return None };
      if let std::task::Poll::Ready(outcome) = future.as_mut().poll(&mut cx) {
        *slot = None;
        return Some(outcome);
      }
      drop(slot);
      if !wake.again.load(Ordering::SeqCst) {
        return None;
      }
    });
    wake.polling.store(false, Ordering::SeqCst);
    if outcome.is_some() {
      wake.dispatch.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    outcome
  }

  /// Aborts the run: the model call is dropped and running tools are killed.
  #[napi]
  pub fn cancel(&self) {
    self.cancel.cancel();
  }

  /// Runs the agent described by `agentJson` with `optionsJson`. `dispatch` receives JSON
  /// messages `{k: "event" | "model" | "tool" | "abortTool" | "policy" | "output", …}`.
  #[napi]
  pub async fn start(
    &self,
    agent_json: String,
    options_json: String,
    dispatch: Arc<JsDispatchFn>,
  ) -> BindingRunOutcome {
    run_outcome(
      agent_json,
      options_json,
      dispatch,
      self.cancel.clone(),
      self.replies.clone(),
    )
    .await
  }

  /// `start`, but the kernel future is polled on this (the JS) thread: a model turn or a JS tool
  /// answered by `reply()` resumes the kernel right there, with no hand-off to a runtime worker
  /// and back. Wakes from other threads (native tools, timers) come back as a `{k:"pump"}`
  /// dispatch, to be answered with `pump()`. Returns the outcome once the run is over, else
  /// `null`; `reply()` and `pump()` return it the same way. The caller keeps the event loop alive
  /// while a run is pending.
  #[napi]
  pub fn start_local(
    &self,
    agent_json: String,
    options_json: String,
    dispatch: Arc<JsDispatchFn>,
  ) -> Option<BindingRunOutcome> {
    let future = run_outcome(
      agent_json,
      options_json,
      dispatch.clone(),
      self.cancel.clone(),
      self.replies.clone(),
    );
    {
      let mut slot = self.local.future.lock().unwrap_or_else(|e| e.into_inner());
      *slot = Some(Box::pin(future));
    }
    *self.local.wake.dispatch.lock().unwrap_or_else(|e| e.into_inner()) = Some(dispatch);
    self.drive()
  }

  /// Polls a `startLocal` run after a `{k:"pump"}` dispatch.
  #[napi]
  pub fn pump(&self) -> Option<BindingRunOutcome> {
    self.local.wake.scheduled.store(false, Ordering::SeqCst);
    self.drive()
  }
}

async fn run_outcome(
  agent_json: String,
  options_json: String,
  dispatch: Arc<JsDispatchFn>,
  cancel: CancellationToken,
  replies: Arc<Replies>,
) -> BindingRunOutcome {
  let options_error = |code: &str, message: String| BindingRunOutcome {
    phase: "options".into(),
    code: Some(code.into()),
    message: Some(message),
    receipt_json: None,
    result_json: None,
  };
  let agent: AgentSpec = match serde_json::from_str(&agent_json) {
    Ok(a) => a,
    Err(e) => {
      return options_error(
        "cave_agent_definition_invalid",
        format!("cave_agent_definition_invalid: {e}"),
      )
    }
  };
  let options: RunOptionsSpec = match serde_json::from_str(&options_json) {
    Ok(o) => o,
    Err(e) => {
      return options_error(
        "cave_run_options_invalid",
        format!("cave_run_options_invalid: {e}"),
      )
    }
  };
  let has_policy = options.has_policy;
  let durable_options: Option<BindingDurable> = serde_json::from_str::<Value>(&options_json)
    .ok()
    .and_then(|v| v.get("durable").cloned())
    .filter(|d| !d.is_null())
    .and_then(|d| serde_json::from_value(d).ok());
  let prepared = match Prepared::new(options) {
    Ok(p) => p,
    Err(e) => return options_error(&e.code, e.message),
  };
  let policy: Option<Arc<dyn ToolPolicy>> = if has_policy {
    Some(Arc::new(JsPolicy::enveloped(dispatch.clone())))
  } else {
    None
  };
  let durable = durable_options.map(|d| {
    let store: Arc<dyn DurableStore> = match d.store {
      BindingStoreRef::Disk { root } => Arc::new(Arc::new(DiskStore::new(root))),
      BindingStoreRef::Js => Arc::new(JsStore {
        dispatch: dispatch.clone(),
      }),
    };
    let agent_value: Value = serde_json::from_str(&agent_json).unwrap_or_default();
    DurableSetup {
      store,
      definition_sha256: definition_sha256(&agent_value),
      input: d.input,
      session_id: d.session_id,
    }
  });
  let host = Arc::new(JsHost {
    dispatch,
    policy,
    replies: Some(replies),
  });
  match run_agent(host, agent, prepared, cancel, durable).await {
    Err(f) if f.pre_run => BindingRunOutcome {
      phase: "options".into(),
      code: f.code,
      message: Some(f.message),
      receipt_json: None,
      result_json: None,
    },
    Ok(result) => BindingRunOutcome {
      phase: "done".into(),
      code: None,
      message: None,
      receipt_json: None,
      result_json: Some(result.to_string()),
    },
    Err(f) => BindingRunOutcome {
      phase: "run".into(),
      code: f.code,
      message: Some(f.message),
      receipt_json: Some(f.receipt.to_string()),
      result_json: None,
    },
  }
}

impl Default for NativeRun {
  fn default() -> Self {
    Self::new()
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
  let tools = Value::Array(knap_core::kernel::tool_schemas(&agent)).to_string();
  Ok(BindingStaticContext {
    static_context_bytes: (prompt.len() + tools.len()) as u32,
    available_tool_count: agent.tools.len() as u32,
  })
}
