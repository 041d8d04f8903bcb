//! Kernel tests with a fake host: a scripted model, fake tools and a fake policy (no Node).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::event::RunEvent;
use super::host::{Host, HostError, HostToolCall, ModelCall};
use super::message::AssistantMessage;
use super::nested::{NestedAbort, NestedInbox, NestedRequest};
use super::spec::{AgentSpec, RunOptionsSpec};
use super::{run_agent, Prepared, RunFailure};
use crate::exec::BoxFuture;
use crate::policy::{PolicyAnswer, PolicyInput, ToolPolicy};
use crate::tools::{ShellTools, ShellToolsConfig};

/// A provider call as a host's transcript mirror sees it: `append` holds the assistant message
/// the previous call returned (the host keeps it) and then what the kernel sent.
struct Call {
  model_key: u32,
  model: Option<String>,
  append: Vec<Value>,
  system_prompt: Option<String>,
  conversation: u64,
  max_tokens: Option<u64>,
  context: Option<Vec<Value>>,
}

#[derive(Default)]
struct FakeHost {
  turns: Mutex<VecDeque<Value>>,
  calls: Mutex<Vec<Call>>,
  /// Per conversation, the assistant message the last call returned.
  replied: Mutex<HashMap<u64, Value>>,
  events: Mutex<Vec<RunEvent>>,
  tool_log: Mutex<Vec<String>>,
  durable_log: Mutex<Vec<Option<(String, bool)>>>,
  policy: Option<Arc<dyn ToolPolicy>>,
  toolset: Option<Arc<ShellTools>>,
  /// Routes the dispatches of the fake composite containers (keys 5 and 6).
  inbox: Option<Arc<NestedInbox>>,
  /// What the containers' dispatches settled to, in order: `Ok(value)` or the error message.
  dispatched: Arc<Mutex<Vec<Result<Value, String>>>>,
  /// Per host tool call: (tool_call_id, parent_tool_call_id, composite, nested).
  contexts: Mutex<Vec<(String, String, bool, bool)>>,
  /// `RunOptions.controller`'s queue; `arrivals[n]` is queued while provider call `n` runs.
  queue: Arc<super::controller::ControllerQueue>,
  arrivals: Mutex<HashMap<usize, Vec<(super::controller::QueueKind, u32, String)>>>,
  delivered: Mutex<Vec<u32>>,
  /// `budget.compaction.newContext`: its answers in order (`None`: the run has no callback),
  /// and what it was asked.
  seeds: Option<Mutex<VecDeque<Result<String, HostError>>>>,
  new_context_log: Mutex<Vec<Value>>,
  /// Per provider call `n`: what its stream shows the speculation scope, in order
  /// (content index, cell source so far, the call id once complete).
  streams: Mutex<HashMap<usize, Vec<(u32, String, Option<String>)>>>,
  /// Whether provider call `n` came with a speculation scope.
  scoped: Mutex<Vec<bool>>,
  /// The `stats()` counts reported, in order: (container key, count).
  counts: Mutex<Vec<(u32, &'static str)>>,
}

impl FakeHost {
  fn new(turns: Vec<Value>) -> Self {
    Self {
      turns: Mutex::new(turns.into()),
      ..Default::default()
    }
  }

  fn event_types(&self) -> Vec<String> {
    self
      .events
      .lock()
      .unwrap()
      .iter()
      .map(|e| match e {
        RunEvent::Pi { event, .. } => format!("pi:{}", event.kind()),
        other => other.kind().to_string(),
      })
      .collect()
  }
}

/// A scripted assistant turn: `(text, [(name, args)])`.
fn turn(text: &str, calls: &[(&str, Value)]) -> Value {
  let mut content = Vec::new();
  if !text.is_empty() {
    content.push(json!({"type": "text", "text": text}));
  }
  for (i, (name, args)) in calls.iter().enumerate() {
    content.push(json!({"type": "toolCall", "id": format!("c{i}-{name}"), "name": name, "arguments": args}));
  }
  json!({
    "role": "assistant", "content": content, "provider": "anthropic", "model": "faux-1",
    "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110},
    "stopReason": if calls.is_empty() { "stop" } else { "toolUse" }
  })
}

impl Host for FakeHost {
  fn emit(&self, event: RunEvent) {
    self.events.lock().unwrap().push(event);
  }

  fn model_call(&self, call: ModelCall) -> BoxFuture<Result<AssistantMessage, HostError>> {
    let mut replied = self.replied.lock().unwrap();
    let mut append: Vec<Value> = replied.remove(&call.conversation).into_iter().collect();
    append.extend(call.append.iter().map(|m| serde_json::to_value(m).unwrap()));
    self.calls.lock().unwrap().push(Call {
      model_key: call.model_key,
      model: call.model.clone(),
      append,
      system_prompt: call.system_prompt.clone(),
      conversation: call.conversation,
      max_tokens: call.max_tokens,
      context: call
        .context
        .as_ref()
        .map(|c| c.iter().map(|m| serde_json::to_value(m).unwrap()).collect()),
    });
    let n = self.calls.lock().unwrap().len() - 1;
    self.scoped.lock().unwrap().push(call.speculation.is_some());
    if let Some(sink) = &call.speculation {
      for (index, code, end) in self.streams.lock().unwrap().remove(&n).unwrap_or_default() {
        sink.observe(index, "cell", &code, end.as_deref());
      }
    }
    for (kind, id, text) in self.arrivals.lock().unwrap().remove(&n).unwrap_or_default() {
      let message = super::message::UserMessage {
        content: super::message::UserContent::Text(text),
        timestamp: None,
      };
      self.queue.push(kind, id, message);
    }
    let next = self.turns.lock().unwrap().pop_front();
    if let Some(m) = &next {
      replied.insert(call.conversation, m.clone());
    }
    let reply = next
      .map(|m| serde_json::from_value::<AssistantMessage>(m).expect("a scripted assistant message"))
      .ok_or_else(|| HostError::new("cave_testing_script_exhausted: no more turns"));
    Box::pin(async move { reply })
  }

  fn tool_call(&self, call: HostToolCall) -> BoxFuture<Result<String, HostError>> {
    self
      .tool_log
      .lock()
      .unwrap()
      .push(format!("{}:{}", call.key, call.args));
    self
      .durable_log
      .lock()
      .unwrap()
      .push(call.durable.clone().map(|d| (d.idempotency_key, d.resumed)));
    self.contexts.lock().unwrap().push((
      call.tool_call_id.clone(),
      call.parent_tool_call_id.clone(),
      call.composite,
      call.nested,
    ));
    let inbox = self.inbox.clone().filter(|_| call.composite);
    let dispatched = self.dispatched.clone();
    Box::pin(async move {
      // A composite container: `args.calls` is `[[name, args, claimSpeculation?], …]`.
      let script: Vec<(String, Value, bool)> = call.args["calls"]
        .as_array()
        .map(|a| {
          a.iter()
            .map(|c| (c[0].as_str().unwrap().to_string(), c[1].clone(), c[2] == json!(true)))
            .collect()
        })
        .unwrap_or_default();
      let send = |inbox: &NestedInbox, (name, args, claim): (String, Value, bool)| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let log = dispatched.clone();
        inbox.dispatch(NestedRequest {
          container: call.call_id,
          name,
          args,
          claim_speculation: claim,
          abort: NestedAbort::new(),
          reply: Box::new(move |r| {
            log.lock().unwrap().push(r.map_err(|e| e.message));
            let _ = tx.send(());
          }),
        });
        rx
      };
      match call.key {
        // Awaits each dispatch in turn.
        5 => {
          let inbox = inbox.expect("a composite call");
          for step in script {
            let _ = send(&inbox, step).await;
          }
          Ok("container done".into())
        }
        // Dispatches and returns without waiting.
        6 => {
          let inbox = inbox.expect("a composite call");
          for step in script {
            drop(send(&inbox, step));
          }
          Ok("left them running".into())
        }
        0 => Ok(format!("echo {}", call.args["q"].as_str().unwrap_or_default())),
        1 => Err(HostError::new("tool exploded")),
        _ => {
          tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
          Ok("late".into())
        }
      }
    })
  }

  fn abort_tool(&self, _call_id: u64) {}

  fn speculation(&self, key: u32, count: super::speculation::SpeculationCount) {
    self.counts.lock().unwrap().push((key, count.as_str()));
  }

  fn on_output(&self, _toolset: u32, _label: &str, _text: &str) {}

  fn policy(&self) -> Option<Arc<dyn ToolPolicy>> {
    self.policy.clone()
  }

  fn native_toolset(&self, _id: u32) -> Option<Arc<ShellTools>> {
    self.toolset.clone()
  }

  fn nested_inbox(&self) -> Option<Arc<NestedInbox>> {
    self.inbox.clone()
  }

  fn take_queued(&self, kind: super::controller::QueueKind) -> Option<super::message::UserMessage> {
    let (id, message) = self.queue.take(kind)?;
    self.delivered.lock().unwrap().push(id);
    Some(message)
  }

  fn new_context(&self, input: super::host::NewContextInput) -> Option<BoxFuture<Result<String, HostError>>> {
    let seeds = self.seeds.as_ref()?;
    self.new_context_log.lock().unwrap().push(serde_json::to_value(&input).unwrap());
    let answer = seeds.lock().unwrap().pop_front().unwrap_or_else(|| Err(HostError::new("no seed scripted")));
    Some(Box::pin(async move { answer }))
  }
}

/// A run failure as the tests read it.
#[derive(Debug)]
struct Failure {
  message: String,
  receipt: Value,
  code: Option<String>,
  pre_run: bool,
}

impl From<RunFailure> for Failure {
  fn from(f: RunFailure) -> Self {
    Self {
      message: f.error.message.clone(),
      receipt: serde_json::to_value(&f.receipt).unwrap(),
      code: Some(f.code.as_str().to_string()),
      pre_run: f.pre_run,
    }
  }
}

struct DenyWrites(Arc<Mutex<Vec<PolicyInput>>>);

impl ToolPolicy for DenyWrites {
  fn evaluate(&self, input: &PolicyInput) -> BoxFuture<Result<PolicyAnswer, String>> {
    self.0.lock().unwrap().push(input.clone());
    let answer = if input.effect == "write" {
      json!({"deny": "read_only_review"})
    } else {
      Value::Null
    };
    Box::pin(async move { Ok(PolicyAnswer::Value(answer)) })
  }
}

struct Throwing;

impl ToolPolicy for Throwing {
  fn evaluate(&self, _: &PolicyInput) -> BoxFuture<Result<PolicyAnswer, String>> {
    Box::pin(async { Err("policy blew up".to_string()) })
  }
}

fn host_tool(name: &str, key: u32, effect: &str, timeout_ms: u64) -> Value {
  json!({"name": name, "description": name, "effect": effect, "timeoutMs": timeout_ms,
    "input": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    "runtime": {"kind": "host", "key": key}})
}

fn agent(tools: Vec<Value>, extra: Value) -> AgentSpec {
  let mut a = json!({"id": "reviewer", "instructions": "Be brief.", "sandbox": "host",
    "model": {"key": 0, "provider": "anthropic", "id": "faux-1"}, "tools": tools});
  if let (Some(o), Some(e)) = (a.as_object_mut(), extra.as_object()) {
    for (k, v) in e {
      o.insert(k.clone(), v.clone());
    }
  }
  serde_json::from_value(a).unwrap()
}

fn options(extra: Value) -> RunOptionsSpec {
  let mut o = json!({"runId": "run-1", "input": [{"type": "text", "text": "go"}]});
  if let (Some(m), Some(e)) = (o.as_object_mut(), extra.as_object()) {
    for (k, v) in e {
      m.insert(k.clone(), v.clone());
    }
  }
  serde_json::from_value(o).unwrap()
}

async fn go(host: Arc<FakeHost>, agent: AgentSpec, opts: RunOptionsSpec) -> Result<Value, Failure> {
  run_agent(
    host,
    agent,
    Prepared::new(opts).unwrap(),
    CancellationToken::new(),
    None,
  )
  .await
  .map(|r| r.to_value())
  .map_err(Failure::from)
}

#[path = "controller_tests.rs"]
mod controller_tests;

#[tokio::test]
async fn three_turns_with_a_host_tool_and_receipt() {
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("lookup", json!({"q": "a"}))]),
    turn("", &[("lookup", json!({"q": "b"})), ("boom", json!({"q": "c"}))]),
    turn("done", &[]),
  ]));
  let a = agent(
    vec![
      host_tool("lookup", 0, "read", 1000),
      host_tool("boom", 1, "write", 1000),
    ],
    json!({}),
  );
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  assert_eq!(r["text"], "done");
  assert_eq!(r["stopReason"], "complete");
  assert_eq!(r["toolCalls"], json!(["lookup", "lookup", "boom"]));
  assert_eq!(
    r["receipt"]["tools"],
    json!([{"name": "lookup", "calls": 2, "errors": 0}, {"name": "boom", "calls": 1, "errors": 1}])
  );
  assert_eq!(r["inputTokens"], 300);
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 3);
  assert_eq!(r["priceBasis"], "unpriced");
  // Only new messages travel on later calls; the system prompt only on the first.
  let calls = host.calls.lock().unwrap();
  assert_eq!(calls[0].append.len(), 1);
  assert!(calls[0].system_prompt.is_some() && calls[1].system_prompt.is_none());
  assert_eq!(calls[1].append.len(), 2, "assistant message + one tool result");
  assert_eq!(calls[2].append[2]["content"][0]["text"], "tool exploded");
  assert_eq!(calls[2].append[2]["isError"], true);
  let types = host.event_types();
  assert_eq!(types.first().unwrap(), "run_start");
  assert_eq!(types.last().unwrap(), "run_end");
  assert!(types.contains(&"pi:tool_execution_start".to_string()));
}

#[tokio::test]
async fn policy_denial_continues_and_failure_ends_the_run() {
  let log = Arc::new(Mutex::new(Vec::new()));
  let mut host = FakeHost::new(vec![turn("", &[("boom", json!({"q": "x"}))]), turn("ok", &[])]);
  host.policy = Some(Arc::new(DenyWrites(log.clone())));
  let host = Arc::new(host);
  let r = go(
    host.clone(),
    agent(vec![host_tool("boom", 1, "write", 1000)], json!({})),
    options(json!({"hasPolicy": true})),
  )
  .await
  .unwrap();
  assert_eq!(
    r["receipt"]["tools"],
    json!([{"name": "boom", "calls": 1, "errors": 1, "denied": 1}])
  );
  assert!(host.tool_log.lock().unwrap().is_empty(), "denied call never ran");
  assert_eq!(
    host.calls.lock().unwrap()[1].append[1]["content"][0]["text"],
    "cave_tool_denied:read_only_review"
  );
  assert_eq!(log.lock().unwrap()[0].agent_path, Vec::<String>::new());

  let mut host = FakeHost::new(vec![
    turn("", &[("lookup", json!({"q": "x"}))]),
    turn("never", &[]),
  ]);
  host.policy = Some(Arc::new(Throwing));
  let host = Arc::new(host);
  let e = go(
    host.clone(),
    agent(vec![host_tool("lookup", 0, "read", 1000)], json!({})),
    options(json!({})),
  )
  .await
  .unwrap_err();
  assert_eq!(e.message, "cave_tool_policy_failed");
  assert_eq!(e.receipt["tools"][0]["calls"], 1);
  assert!(host.tool_log.lock().unwrap().is_empty());
  assert_eq!(host.event_types().last().unwrap(), "run_error");
}

#[tokio::test]
async fn call_caps_and_unknown_tools() {
  let host = Arc::new(FakeHost::new(vec![
    turn(
      "",
      &[
        ("lookup", json!({"q": "1"})),
        ("lookup", json!({"q": "2"})),
        ("nope", json!({})),
      ],
    ),
    turn("", &[("lookup", json!({"q": 3}))]),
    turn("never", &[]),
  ]));
  let a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({}));
  let r = go(
    host.clone(),
    a,
    options(json!({"maxToolCalls": 1, "maxModelCalls": 2})),
  )
  .await
  .unwrap();
  assert_eq!(r["stopReason"], "call_budget_exhausted");
  let calls = host.calls.lock().unwrap();
  let results: Vec<&str> = calls[1].append[1..]
    .iter()
    .map(|m| m["content"][0]["text"].as_str().unwrap())
    .collect();
  // The call cap comes before the unknown-tool check in the reference's order.
  assert_eq!(
    results,
    vec![
      "echo 1",
      "cave_tool_call_budget_exceeded",
      "cave_tool_call_budget_exceeded"
    ]
  );
  assert_eq!(calls.len(), 2);
}

#[tokio::test]
async fn arguments_are_validated_before_the_policy() {
  let log = Arc::new(Mutex::new(Vec::new()));
  let mut host = FakeHost::new(vec![turn("", &[("lookup", json!({"q": [5]}))]), turn("ok", &[])]);
  host.policy = Some(Arc::new(DenyWrites(log.clone())));
  let host = Arc::new(host);
  go(
    host.clone(),
    agent(vec![host_tool("lookup", 0, "read", 1000)], json!({})),
    options(json!({})),
  )
  .await
  .unwrap();
  assert!(
    log.lock().unwrap().is_empty(),
    "policy never saw invalid arguments"
  );
  let text = host.calls.lock().unwrap()[1].append[1]["content"][0]["text"]
    .as_str()
    .unwrap()
    .to_string();
  assert!(
    text.starts_with("Validation failed for tool \"lookup\""),
    "{text}"
  );
}

#[tokio::test]
async fn loop_breaker_stops_the_run() {
  let same = || turn("", &[("lookup", json!({"q": "same"}))]);
  let host = Arc::new(FakeHost::new(vec![same(), same(), same(), turn("never", &[])]));
  let a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({}));
  let r = go(
    host.clone(),
    a,
    options(json!({"breakers": {"repeatedToolCalls": 2}})),
  )
  .await
  .unwrap();
  assert_eq!(r["stopReason"], "loop_detected");
  assert_eq!(r["receipt"]["breakers"][0]["kind"], "loop_detected");
  assert_eq!(
    host.tool_log.lock().unwrap().len(),
    1,
    "the second identical call was blocked"
  );
}

#[tokio::test]
async fn tool_timeout_is_an_error_result() {
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("slow", json!({"q": "x"}))]),
    turn("ok", &[]),
  ]));
  let a = agent(vec![host_tool("slow", 9, "read", 20)], json!({}));
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  assert_eq!(
    host.calls.lock().unwrap()[1].append[1]["content"][0]["text"],
    "cave_tool_timeout"
  );
  assert_eq!(r["receipt"]["tools"][0]["errors"], 1);
}

#[tokio::test]
async fn budgets_fail_closed_and_stop() {
  let host = Arc::new(FakeHost::new(vec![turn("x", &[])]));
  let e = go(
    host.clone(),
    agent(vec![], json!({})),
    options(json!({"budget": {"maxUsd": 1}})),
  )
  .await
  .unwrap_err();
  assert!(e
    .message
    .starts_with("cave_budget_denomination_unavailable: anthropic/faux-1 is not in the public catalog"));
  assert!(
    host.calls.lock().unwrap().is_empty(),
    "no provider call under an unpriced USD budget"
  );

  let lookup = || turn("", &[("lookup", json!({"q": "a"}))]);
  let host = Arc::new(FakeHost::new(vec![
    lookup(),
    lookup(),
    lookup(),
    turn("never", &[]),
  ]));
  let a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({}));
  let r = go(host.clone(), a, options(json!({"budget": {"maxTokens": 400}})))
    .await
    .unwrap();
  assert_eq!(r["stopReason"], "budget_exhausted");
  assert_eq!(r["receipt"]["denomination"], "tokens");
  assert_eq!(r["receipt"]["max"], 400.0);
  assert_eq!(
    host.calls.lock().unwrap().len(),
    1,
    "the second call could not reserve even the output floor"
  );
  let clamped = r["receipt"]["calls"][0]["clampedOutputTokens"].as_u64().unwrap();
  assert!((256..4000).contains(&clamped));
}

#[tokio::test]
async fn priced_usd_budget_meters_calls() {
  let mut a = agent(vec![], json!({}));
  a.model.id = "claude-haiku-4-5".into();
  let host = Arc::new(FakeHost::new(vec![turn("x", &[])]));
  let r = go(host, a, options(json!({"budget": {"maxUsd": 1}})))
    .await
    .unwrap();
  let spent = r["receipt"]["spent"].as_f64().unwrap();
  assert!(spent > 0.0 && spent < 0.01);
  assert_eq!(r["priceBasis"], "public_catalog");
  assert_eq!(r["receipt"]["denomination"], "usd");
}

#[tokio::test]
async fn output_schema_success_and_failures() {
  let out = json!({"output": {"maxTokens": 100, "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}});
  let host = Arc::new(FakeHost::new(vec![turn("{\"n\": 3}", &[])]));
  let r = go(host.clone(), agent(vec![], out.clone()), options(json!({})))
    .await
    .unwrap();
  assert_eq!(r["output"], json!({"n": 3}));
  let system = host.calls.lock().unwrap()[0].system_prompt.clone().unwrap();
  assert!(system.ends_with(r#"<cave-output max_tokens=100>Return exactly one JSON document matching this JSON Schema and no other prose:
{"properties":{"n":{"type":"integer"}},"required":["n"],"type":"object"}</cave-output>"#));
  let e = go(
    Arc::new(FakeHost::new(vec![turn("nope", &[])])),
    agent(vec![], out.clone()),
    options(json!({})),
  )
  .await
  .unwrap_err();
  assert_eq!(e.message, "cave_output_schema_invalid_json");
  let e = go(
    Arc::new(FakeHost::new(vec![turn("{\"n\":\"x\"}", &[])])),
    agent(vec![], out),
    options(json!({})),
  )
  .await
  .unwrap_err();
  assert_eq!(e.message, "cave_output_schema_mismatch");
  let r = go(
    Arc::new(FakeHost::new(vec![turn("plain", &[])])),
    agent(vec![], json!({})),
    options(json!({})),
  )
  .await
  .unwrap();
  assert!(r.get("output").is_none());
}

#[tokio::test]
async fn native_shell_tools_run_inside_rust() {
  let dir = tempfile::tempdir().unwrap();
  std::fs::write(dir.path().join("notes.txt"), "a\nb\n").unwrap();
  let mut host = FakeHost::new(vec![
    turn("", &[("bash", json!({"command": "wc -l < notes.txt"}))]),
    turn("2 lines", &[]),
  ]);
  host.toolset = Some(Arc::new(
    ShellTools::new(ShellToolsConfig::new(dir.path())).unwrap(),
  ));
  let host = Arc::new(host);
  let tool = json!({"name": "bash", "description": "sh", "effect": "external", "timeoutMs": 120000,
    "input": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    "result": "inline", "runtime": {"kind": "native", "toolset": 1, "hasOnOutput": false}});
  let r = go(host.clone(), agent(vec![tool], json!({})), options(json!({})))
    .await
    .unwrap();
  assert_eq!(r["text"], "2 lines");
  assert_eq!(
    host.calls.lock().unwrap()[1].append[1]["content"][0]["text"],
    "exit 0\n2\n"
  );
}

#[tokio::test]
async fn subagents_get_their_agent_path() {
  let log = Arc::new(Mutex::new(Vec::new()));
  let mut host = FakeHost::new(vec![
    turn("", &[("delegate", json!({"task": "look"}))]),
    turn("", &[("lookup", json!({"q": "child"}))]),
    turn("child done", &[]),
    turn("parent done", &[]),
  ]);
  host.policy = Some(Arc::new(DenyWrites(log.clone())));
  let host = Arc::new(host);
  let child = json!({"id": "policy-child", "instructions": "child", "sandbox": "host",
    "model": {"key": 0, "provider": "anthropic", "id": "faux-1"}, "tools": [host_tool("lookup", 0, "read", 1000)]});
  let delegate = json!({"name": "delegate", "description": "d", "effect": "read", "timeoutMs": 30000,
    "input": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
    "runtime": {"kind": "subagent", "agent": child, "maxInputChars": 32768, "maxCalls": 1, "maxCostUsd": 1, "maxContextTokens": 128000}});
  let mut a = agent(vec![delegate], json!({}));
  a.id = "policy-parent".into();
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  let seen: Vec<(String, Vec<String>, String)> = log
    .lock()
    .unwrap()
    .iter()
    .map(|p| (p.agent_id.clone(), p.agent_path.clone(), p.name.clone()))
    .collect();
  assert_eq!(
    seen,
    vec![
      ("policy-parent".into(), vec![], "delegate".into()),
      ("policy-child".into(), vec!["delegate".into()], "lookup".into())
    ]
  );
  assert_eq!(r["receipt"]["subagents"].as_array().unwrap().len(), 1);
  assert_eq!(r["inputTokens"], 400, "child usage rolls up");
  let result: Value = serde_json::from_str(
    host.calls.lock().unwrap()[3].append[1]["content"][0]["text"]
      .as_str()
      .unwrap(),
  )
  .unwrap();
  assert_eq!(result["text"], "child done");
  assert_eq!(result["agent_id"], "policy-child");
  assert_eq!(result["claim_basis"], "inferred");
}

#[tokio::test]
async fn option_errors() {
  for (o, code) in [
    (json!({"maxModelCalls": 0}), "cave_max_model_calls_invalid"),
    (json!({"maxToolCalls": 1.5}), "cave_max_tool_calls_invalid"),
    (json!({"deadlineMs": -1}), "cave_run_deadline_invalid"),
    (json!({"budget": {}}), "cave_budget_denomination_ambiguous"),
    (
      json!({"budget": {"maxUsd": 1, "maxTokens": 2}}),
      "cave_budget_denomination_ambiguous",
    ),
    (json!({"budget": {"maxTokens": 1.5}}), "cave_budget_max_invalid"),
    (
      json!({"breakers": {"repeatedToolCalls": 0}}),
      "cave_breaker_threshold_invalid",
    ),
    (
      json!({"budget": {"maxUsd": 1}, "maxCostUsd": 1}),
      "cave_budget_conflicting_cap",
    ),
  ] {
    let e = Prepared::new(options(o.clone()))
      .err()
      .unwrap_or_else(|| panic!("{o} accepted"));
    assert_eq!(e.code, code, "{o}");
  }
}

#[tokio::test]
async fn abort_stops_before_the_next_call() {
  let host = Arc::new(FakeHost::new(vec![turn("x", &[])]));
  let token = CancellationToken::new();
  token.cancel();
  let e = run_agent(
    host.clone(),
    agent(vec![], json!({})),
    Prepared::new(options(json!({}))).unwrap(),
    token,
    None,
  )
  .await
  .map_err(Failure::from)
  .unwrap_err();
  assert!(e.message.starts_with("cave_run_aborted"));
  assert!(host.calls.lock().unwrap().is_empty());
}

mod durable {
  use super::*;
  use crate::durable::store::DiskStore;
  use crate::kernel::{definition_sha256, DurableSetup};

  fn setup(store: &Arc<DiskStore>, agent: &AgentSpec) -> DurableSetup {
    let spec = json!({"id": agent.id, "tools": agent.tools.iter().map(|t| &t.name).collect::<Vec<_>>()});
    DurableSetup {
      store: Arc::new(store.clone()),
      definition_sha256: definition_sha256(&spec),
      input: json!("go"),
      session_id: "s".into(),
      conversation: None,
    }
  }

  pub(super) async fn go_durable(host: Arc<FakeHost>, a: AgentSpec, store: &Arc<DiskStore>) -> Result<Value, Failure> {
    go_durable_with(host, a, store, json!({})).await
  }

  async fn go_durable_with(host: Arc<FakeHost>, a: AgentSpec, store: &Arc<DiskStore>, extra: Value) -> Result<Value, Failure> {
    let s = setup(store, &a);
    run_agent(
      host,
      a,
      Prepared::new(options(extra)).unwrap(),
      CancellationToken::new(),
      Some(s),
    )
    .await
    .map(|r| r.to_value())
    .map_err(Failure::from)
  }

  fn journal(store: &DiskStore) -> Vec<Value> {
    store
      .load_sync("run-1")
      .unwrap()
      .iter()
      .map(|l| serde_json::from_str(l).unwrap())
      .collect()
  }

  /// Keeps the journal up to (and including) the first event of `kind`, as a crash there would.
  fn crash_after(store: &DiskStore, kind: &str, nth: usize) {
    let lines = store.load_sync("run-1").unwrap();
    let mut seen = 0;
    let cut = lines
      .iter()
      .position(|l| {
        if serde_json::from_str::<Value>(l).unwrap()["type"] == kind {
          seen += 1;
        }
        seen == nth
      })
      .unwrap();
    let path = store.run_dir("run-1").join("journal.jsonl");
    std::fs::write(
      &path,
      lines[..=cut].iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
  }

  /// A compaction is journaled as a `snapshot` of the new context, durable with the summarizer's
  /// settlement: a resume after it goes on from the compacted context, without a second
  /// summarizer call, and the conversation's transcript stays whole.
  #[tokio::test]
  async fn a_resume_after_a_compaction_does_not_pay_for_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    let budget = json!({"budget": {"maxTokens": 8_000, "compaction": {"keepRecentTokens": 10, "minYieldTokens": 1, "summaryMaxTokens": 50}}});
    let host = Arc::new(FakeHost::new(super::long_turns(vec![turn(super::SUMMARY, &[]), turn("done", &[])])));
    let first = go_durable_with(host, super::compacting_agent(), &store, budget.clone()).await.unwrap();
    assert_eq!(first["receipt"]["compactions"][0]["tier"], "summarized");
    let events = journal(&store);
    let kinds: Vec<String> = events
      .iter()
      .map(|e| match e["kind"].as_str() {
        Some(k) => format!("{}:{k}", e["type"].as_str().unwrap()),
        None => e["type"].as_str().unwrap().to_string(),
      })
      .collect();
    let at = kinds.iter().position(|k| k == "snapshot").expect("the compaction is journaled");
    assert_eq!(kinds[at - 2..at], ["call_started:compaction", "call_settled:compaction"]);
    assert_eq!(kinds[at + 1], "call_started:model");
    let snapshot = events[at]["messages"].as_array().unwrap();
    assert_eq!(snapshot.len(), 4, "prompt, summary, the last turn and its result");
    assert!(snapshot[1]["content"].as_str().unwrap().starts_with("<cave-context-summary>"));

    // The process dies right after the compaction.
    crash_after(&store, "snapshot", 1);
    let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
    let r = go_durable_with(host.clone(), super::compacting_agent(), &store, budget).await.unwrap();
    assert_eq!(r["text"], "done");
    assert_eq!(r["resumed"], true);
    assert_eq!(r["receipt"]["compactions"], json!([]), "this attempt compacted nothing");
    assert_eq!(r["receipt"]["resume"]["priorCalls"], 3, "two working calls and the summarizer");
    assert_eq!(r["receipt"]["spent"], 440.0, "the summarizer's spend is kept, once");
    let calls = host.calls.lock().unwrap();
    assert_eq!(calls.len(), 1, "no second summarizer call");
    let context = calls[0].context.as_ref().expect("the provider goes on from the compacted context");
    assert_eq!(context.len(), 4);
    assert!(context[1]["content"].as_str().unwrap().starts_with("<cave-context-summary>\n{\"schema_version\":2"));
    assert_eq!(calls[0].append.len(), 5, "the host's transcript is the whole one");
    assert!(calls[0].append[1]["content"][0]["text"].as_str().unwrap().starts_with("yyyy"));
  }

  fn two_lookups() -> Vec<Value> {
    vec![
      turn("", &[("lookup", json!({"q": "a"}))]),
      turn("", &[("act", json!({"q": "b"}))]),
      turn("done", &[]),
    ]
  }

  fn tools(act_effect: &str) -> Vec<Value> {
    vec![
      host_tool("lookup", 0, "read", 1000),
      host_tool("act", 0, act_effect, 1000),
    ]
  }

  #[tokio::test]
  async fn completed_run_replays_without_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    let first = go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap();
    let kinds: Vec<String> = journal(&store)
      .iter()
      .map(|e| e["type"].as_str().unwrap().to_string())
      .collect();
    assert_eq!(kinds.first().unwrap(), "run_started");
    assert_eq!(kinds.last().unwrap(), "run_completed");
    assert_eq!(kinds.iter().filter(|k| *k == "tool_intent").count(), 2);
    let host = Arc::new(FakeHost::new(vec![]));
    let again = go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap();
    assert_eq!(again, first);
    assert!(
      host.calls.lock().unwrap().is_empty(),
      "a replay never calls the model"
    );
    assert!(host.tool_log.lock().unwrap().is_empty());
  }

  #[tokio::test]
  async fn unsettled_write_fails_closed_and_settled_write_replays() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap();
    // Crash right after the write tool's intent: its effect may or may not have happened.
    crash_after(&store, "tool_intent", 2);
    let host = Arc::new(FakeHost::new(two_lookups()));
    let e = go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap_err();
    assert!(
      e.message
        .starts_with("cave_durable_tool_effect_uncertain:act:c0-act"),
      "{}",
      e.message
    );
    assert!(host.calls.lock().unwrap().is_empty() && host.tool_log.lock().unwrap().is_empty());
    // That failure is terminal and replays.
    let again = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert_eq!(again.message, e.message);

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap();
    crash_after(&store, "tool_settled", 2);
    // The resumed model re-issues the call; the journaled result is used, the tool does not run.
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("act", json!({"q": "b"}))]),
      turn("done again", &[]),
    ]));
    let r = go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap();
    assert_eq!(r["resumed"], true);
    assert_eq!(r["text"], "done again");
    assert!(
      host.tool_log.lock().unwrap().is_empty(),
      "settled write replayed, not re-run"
    );
    assert_eq!(
      host.calls.lock().unwrap()[1].append.last().unwrap()["content"][0]["text"],
      "echo b"
    );
    assert_eq!(r["receipt"]["resume"]["attempts"], 2);
    assert_eq!(r["receipt"]["resume"]["priorCalls"], 2);
    assert_eq!(r["inputTokens"], 400, "prior settled calls are counted once");
  }

  #[tokio::test]
  async fn unsettled_read_reruns_with_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    let host = Arc::new(FakeHost::new(two_lookups()));
    go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap();
    let first_key = host.durable_log.lock().unwrap()[0].clone().unwrap();
    assert!(!first_key.1 && first_key.0.starts_with("cave-") && first_key.0.len() == 69);
    crash_after(&store, "tool_intent", 1);
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("lookup", json!({"q": "a"}))]),
      turn("done", &[]),
    ]));
    let r = go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap();
    assert_eq!(
      host.durable_log.lock().unwrap()[0],
      Some((first_key.0, true)),
      "same key, resumed"
    );
    assert_eq!(r["receipt"]["resume"]["possibleDoubleCountCalls"], 0);
    // The completed resumed journal reads back cleanly (the reference would call it corrupt).
    let replay = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap();
    assert_eq!(replay["text"], "done");
  }

  #[tokio::test]
  async fn crash_during_a_model_call_counts_a_possible_double_charge() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap();
    crash_after(&store, "call_started", 2);
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("act", json!({"q": "b"}))]),
      turn("done", &[]),
    ]));
    let r = go_durable(host.clone(), agent(tools("read"), json!({})), &store)
      .await
      .unwrap();
    let resume = &r["receipt"]["resume"];
    assert_eq!(resume["possibleDoubleCountCalls"], 1);
    assert_eq!(resume["priorCalls"], 1);
    assert_eq!(resume["discardedPartialTurn"], false);
    let first = &host.calls.lock().unwrap()[0];
    assert_eq!(
      first.append.last().unwrap()["role"],
      "toolResult",
      "re-entered after the last completed turn"
    );
    assert_eq!(
      first.append.iter().filter(|m| m["role"] == "user").count(),
      1,
      "the prompt is not asked twice"
    );
    // And that completed journal replays cleanly, too.
    go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap();
  }

  #[tokio::test]
  async fn mismatched_arguments_stop_before_more_spend() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("write"), json!({})),
      &store,
    )
    .await
    .unwrap();
    crash_after(&store, "tool_settled", 2);
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("act", json!({"q": "DIFFERENT"}))]),
      turn("never", &[]),
    ]));
    let e = go_durable(host.clone(), agent(tools("write"), json!({})), &store)
      .await
      .unwrap_err();
    assert!(
      e.message
        .starts_with("cave_durable_tool_replay_mismatch:act:c0-act"),
      "{}",
      e.message
    );
    assert_eq!(host.calls.lock().unwrap().len(), 1);
    assert!(host.tool_log.lock().unwrap().is_empty());
  }

  #[tokio::test]
  async fn identity_drift_and_corruption_refuse_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap();
    crash_after(&store, "turn", 1);
    let e = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(vec![host_tool("other", 0, "read", 1000)], json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert!(e.pre_run && e.message.starts_with("cave_durable_definition_changed"));
    let a = agent(tools("read"), json!({}));
    let mut s = setup(&store, &a);
    s.input = json!("another task");
    let e = run_agent(
      Arc::new(FakeHost::new(vec![])),
      a,
      Prepared::new(options(json!({}))).unwrap(),
      CancellationToken::new(),
      Some(s),
    )
    .await
    .map_err(Failure::from)
    .unwrap_err();
    assert!(e.message.starts_with("cave_durable_input_mismatch"));
    // A corrupted middle line: a clear error, and the journal is left as it was.
    let path = store.run_dir("run-1").join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{not json";
    let broken = lines.join("\n") + "\n";
    std::fs::write(&path, &broken).unwrap();
    let e = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert_eq!(
      e.message,
      "cave_durable_journal_corrupt: unparseable journal line"
    );
    assert_eq!(
      std::fs::read_to_string(&path).unwrap(),
      broken,
      "nothing overwritten"
    );
  }

  #[tokio::test]
  async fn a_held_lock_refuses_a_second_driver() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    store.acquire_sync("run-1").unwrap();
    let e = go_durable(
      Arc::new(FakeHost::new(two_lookups())),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert!(e.pre_run);
    assert_eq!(e.code.as_deref(), Some("cave_durable_run_locked"));
  }

  /// A run must never write a journal it cannot read back: a re-driven turn that leaves an
  /// unsettled journaled call behind fails the run before its `turn` checkpoint would cross it.
  #[tokio::test]
  async fn a_re_driven_turn_that_skips_an_unsettled_call_fails_readably() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    let both = vec![
      turn(
        "",
        &[("lookup", json!({"q": "a"})), ("lookup", json!({"q": "b"}))],
      ),
      turn("done", &[]),
    ];
    go_durable(
      Arc::new(FakeHost::new(both)),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap();
    // Crash with the parallel reads' intents durable and only the first settled.
    crash_after(&store, "tool_settled", 1);
    // The re-driven model asks for the first read only, then answers.
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("lookup", json!({"q": "a"}))]),
      turn("done", &[]),
    ]));
    let e = go_durable(host.clone(), agent(tools("read"), json!({})), &store)
      .await
      .unwrap_err();
    assert!(
      e.message
        .starts_with("cave_durable_tool_replay_incomplete:lookup:c1-lookup"),
      "{}",
      e.message
    );
    assert!(
      host.tool_log.lock().unwrap().is_empty(),
      "the settled read replayed"
    );
    let kinds: Vec<String> = journal(&store)
      .iter()
      .map(|e| e["type"].as_str().unwrap().to_string())
      .collect();
    assert_eq!(
      kinds.iter().filter(|k| *k == "turn").count(),
      0,
      "no checkpoint crossed the unsettled call"
    );
    // The failure is the run's journaled outcome and replays as such.
    let again = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert_eq!(again.message, e.message);
  }

  /// Two calls with one id in one step would journal duplicate intents (unreadable): refused.
  #[tokio::test]
  async fn a_call_id_reused_within_a_step_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskStore::new(dir.path()));
    let mut dup = turn(
      "",
      &[("lookup", json!({"q": "a"})), ("lookup", json!({"q": "b"}))],
    );
    dup["content"][1]["id"] = json!("c0-lookup");
    // Across steps the same id is fine (providers that number calls per turn).
    let script = vec![turn("", &[("lookup", json!({"q": "x"}))]), dup, turn("done", &[])];
    let host = Arc::new(FakeHost::new(script));
    let e = go_durable(host.clone(), agent(tools("read"), json!({})), &store)
      .await
      .unwrap_err();
    assert!(
      e.message
        .starts_with("cave_durable_tool_call_id_reused:lookup:c0-lookup"),
      "{}",
      e.message
    );
    assert_eq!(
      host.calls.lock().unwrap().len(),
      2,
      "no provider call after the refusal"
    );
    let again = go_durable(
      Arc::new(FakeHost::new(vec![])),
      agent(tools("read"), json!({})),
      &store,
    )
    .await
    .unwrap_err();
    assert_eq!(again.message, e.message, "the journal reads back");
  }
}

/// A composite container tool (fake keys 5 and 6) over `lookup` (read) and `boom` (write).
fn container_tool(name: &str, key: u32, effect: &str) -> Value {
  json!({"name": name, "description": name, "effect": effect, "timeoutMs": 10000,
    "input": {"type": "object", "properties": {"calls": {"type": "array"}}},
    "runtime": {"kind": "host", "key": key},
    "nestedTools": [host_tool("lookup", 0, "read", 1000), host_tool("boom", 1, "write", 1000),
      host_tool("slow", 2, "read", 60000)]})
}

fn nested_events(host: &FakeHost) -> Vec<Value> {
  host
    .events
    .lock()
    .unwrap()
    .iter()
    .filter(|e| matches!(e, RunEvent::NestedToolStart { .. } | RunEvent::NestedToolEnd { .. }))
    .map(|e| serde_json::to_value(e).unwrap())
    .collect()
}

#[tokio::test]
async fn composite_dispatch_is_admitted_policy_checked_accounted_and_evented() {
  let log = Arc::new(Mutex::new(Vec::new()));
  let calls = json!([["lookup", {"q": "a"}], ["boom", {"q": "b"}], ["nope", {}], ["lookup", {"q": 5}],
    ["boom", {"q": "c"}, true]]);
  let mut host = FakeHost::new(vec![turn("", &[("box", json!({"calls": calls}))]), turn("ok", &[])]);
  host.policy = Some(Arc::new(DenyWrites(log.clone())));
  host.inbox = Some(NestedInbox::new());
  let host = Arc::new(host);
  let a = agent(vec![container_tool("box", 5, "idempotent")], json!({}));
  let r = go(host.clone(), a, options(json!({}))).await.unwrap();
  assert_eq!(
    *host.dispatched.lock().unwrap(),
    vec![
      Ok(json!("echo a")),
      Err("cave_tool_denied:read_only_review".to_string()),
      Err("cave_nested_tool_not_allowed:nope".to_string()),
      Err("cave_tool_input_schema_mismatch:lookup".to_string()),
      Err("cave_nested_tool_speculation_not_allowed:boom".to_string()),
    ]
  );
  // The container and each started nested call are in toolCalls and the receipt; a name that
  // is not nested and a refused speculation claim never start.
  assert_eq!(r["toolCalls"], json!(["box", "lookup", "boom", "lookup"]));
  assert_eq!(
    r["receipt"]["tools"],
    json!([{"name": "box", "calls": 1, "errors": 0}, {"name": "lookup", "calls": 2, "errors": 1},
      {"name": "boom", "calls": 1, "errors": 1, "denied": 1}])
  );
  // The policy saw the container without parentToolCallId, then the nested calls with it.
  let seen = log.lock().unwrap();
  let keys: Vec<(String, Option<String>)> =
    seen.iter().map(|i| (i.tool_call_id.clone(), i.parent_tool_call_id.clone())).collect();
  assert_eq!(
    keys,
    vec![
      ("c0-box".to_string(), None),
      ("c0-box:nested:1".to_string(), Some("c0-box".to_string())),
      ("c0-box:nested:2".to_string(), Some("c0-box".to_string())),
    ]
  );
  assert!(!serde_json::to_value(&seen[0]).unwrap().as_object().unwrap().contains_key("parentToolCallId"));
  drop(seen);
  let events = nested_events(&host);
  assert_eq!(events.len(), 6);
  assert_eq!(
    events[0],
    json!({"type": "nested_tool_start", "runId": "run-1", "id": "c0-box:nested:1", "name": "lookup", "args": {"q": "a"}})
  );
  assert_eq!(
    events[1],
    json!({"type": "nested_tool_end", "runId": "run-1", "id": "c0-box:nested:1", "name": "lookup", "isError": false, "result": "echo a"})
  );
  assert_eq!(events[3]["result"], "cave_tool_denied:read_only_review");
  assert_eq!(events[5]["id"], "c0-box:nested:3");
  assert_eq!(events[5]["isError"], true);
  // The container ran with dispatch available; its nested JS call knew its parent.
  let contexts = host.contexts.lock().unwrap();
  assert_eq!(contexts[0], ("c0-box".into(), "c0-box".into(), true, false));
  assert_eq!(contexts[1], ("c0-box:nested:1".into(), "c0-box".into(), false, true));
  assert_eq!(contexts.len(), 2, "denied and refused nested calls never ran");
}

#[tokio::test]
async fn nested_calls_count_toward_max_tool_calls_and_containers_do_not() {
  let calls = json!([["lookup", {"q": "a"}], ["lookup", {"q": "b"}], ["lookup", {"q": "c"}]]);
  let mut host = FakeHost::new(vec![turn("", &[("box", json!({"calls": calls}))]), turn("ok", &[])]);
  host.inbox = Some(NestedInbox::new());
  let host = Arc::new(host);
  let a = agent(vec![container_tool("box", 5, "read")], json!({}));
  let r = go(host.clone(), a, options(json!({"maxToolCalls": 2}))).await.unwrap();
  assert_eq!(
    *host.dispatched.lock().unwrap(),
    vec![
      Ok(json!("echo a")),
      Ok(json!("echo b")),
      Err("cave_tool_call_budget_exceeded".to_string())
    ]
  );
  assert_eq!(r["receipt"]["tools"][1], json!({"name": "lookup", "calls": 3, "errors": 1}));
}

#[tokio::test]
async fn without_a_host_inbox_a_composite_runs_with_dispatch_unavailable() {
  let host = Arc::new(FakeHost::new(vec![turn("", &[("box", json!({}))]), turn("ok", &[])]));
  let a = agent(vec![container_tool("box", 0, "read")], json!({}));
  go(host.clone(), a, options(json!({}))).await.unwrap();
  assert_eq!(host.contexts.lock().unwrap()[0].2, false);
}

#[tokio::test(start_paused = true)]
async fn nested_calls_left_running_are_aborted_and_the_container_fails_unquiesced() {
  let calls = json!([["slow", {"q": "a"}]]);
  let mut host = FakeHost::new(vec![turn("", &[("box", json!({"calls": calls}))]), turn("ok", &[])]);
  host.inbox = Some(NestedInbox::new());
  let host = Arc::new(host);
  let a = agent(vec![container_tool("box", 6, "read")], json!({}));
  go(host.clone(), a, options(json!({}))).await.unwrap();
  let model_calls = host.calls.lock().unwrap();
  assert_eq!(
    model_calls[1].append[1]["content"][0]["text"],
    "cave_program_nested_calls_unquiesced"
  );
  assert_eq!(
    *host.dispatched.lock().unwrap(),
    vec![Err("cave_nested_tool_aborted".to_string())]
  );
  let events = nested_events(&host);
  assert_eq!(events[1]["result"], "cave_nested_tool_aborted");
}

fn compacting_agent() -> AgentSpec {
  let mut a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({}));
  a.model.max_tokens = Some(100);
  a
}

#[tokio::test]
async fn a_budget_compacts_by_evicting_old_tool_output() {
  let big = "x".repeat(8_000);
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("lookup", json!({"q": big}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn("done", &[]),
  ]));
  let budget = json!({"budget": {"maxTokens": 10_000, "compaction": {"keepRecentTokens": 10}}});
  let r = go(host.clone(), compacting_agent(), options(budget)).await.unwrap();
  assert_eq!(r["text"], "done");
  let c = &r["receipt"]["compactions"];
  assert_eq!(c.as_array().unwrap().len(), 1, "{c}");
  let c = &c[0];
  assert_eq!(c["tier"], "evicted");
  assert_eq!(c["index"], 0);
  assert_eq!(c["pinnedSegmentIds"], json!(["runtime.user_intent.0"]));
  assert_eq!(c["elidedSegmentDigests"].as_array().unwrap().len(), 1);
  assert_eq!(c["meteredCost"], 0.0);
  assert_eq!(c["workingCallsAfter"], 1);
  assert!(c.get("summarySchemaVersion").is_none());
  let (pre, post) = (c["preTokens"].as_i64().unwrap(), c["postTokens"].as_i64().unwrap());
  assert!(pre - post > 1_500, "the 8,000-byte output went: {pre} -> {post}");
  assert_eq!(c["modeledNetTokens"].as_i64().unwrap(), (pre - post) - post);
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 3, "eviction makes no provider call");
  let calls = host.calls.lock().unwrap();
  assert!(calls[1].context.is_none());
  let context = calls[2].context.as_ref().expect("the compacted context goes with the next call");
  assert_eq!(context.len(), 5);
  let pointer = context[2]["content"][0]["text"].as_str().unwrap();
  assert!(pointer.starts_with("[cave: output of lookup (call c0-lookup) elided by compaction: 8005 bytes, sha256:"), "{pointer}");
  assert_eq!(context[4]["content"][0]["text"], "echo b", "the tail is verbatim");
  assert_eq!(calls[2].append.len(), 2, "the host's own transcript still gets the new messages");
  let v = crate::receipt_check::validate_receipt_json(&r["receipt"].to_string());
  assert!(v.is_ok(), "{v:?}");
}

#[tokio::test]
async fn a_budget_compacts_by_summarizing_with_one_metered_call() {
  let long_text = "y".repeat(8_000);
  let summary = r#"{"schema_version":2,"goal":"look things up","state":"a and b looked up","anchors":[{"kind":"fact","value":"a"}]}"#;
  let host = Arc::new(FakeHost::new(vec![
    turn(&long_text, &[("lookup", json!({"q": "a"}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn(summary, &[]),
    turn("done", &[]),
  ]));
  let budget = json!({"budget": {"maxTokens": 8_000, "compaction": {"keepRecentTokens": 10, "minYieldTokens": 1, "summaryMaxTokens": 50}}});
  let r = go(host.clone(), compacting_agent(), options(budget)).await.unwrap();
  assert_eq!(r["text"], "done");
  let c = &r["receipt"]["compactions"][0];
  assert_eq!(c["tier"], "summarized", "{}", r["receipt"]);
  assert_eq!(c["summarySchemaVersion"], 2);
  assert_eq!(c["meteredCost"], 110.0, "the summarizer's usage, in tokens");
  assert_eq!(c["elidedSegmentDigests"].as_array().unwrap().len(), 2);
  assert_eq!(c["workingCallsAfter"], 1);
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 4, "the summarizer call is on the receipt");
  assert_eq!(r["receipt"]["spent"], 440.0);
  assert_eq!(r["inputTokens"], 400);
  let calls = host.calls.lock().unwrap();
  let summarizer = &calls[2];
  assert_ne!(summarizer.conversation, calls[0].conversation);
  assert_eq!(summarizer.max_tokens, Some(50));
  assert!(summarizer.system_prompt.as_deref().is_some_and(|s| s.starts_with("Be brief.")));
  let instruction = summarizer.append.last().unwrap()["content"].as_str().unwrap();
  assert!(instruction.contains("\"schema_version\":2") && instruction.contains("- message.1 assistant sha256:"), "{instruction}");
  let context = calls[3].context.as_ref().unwrap();
  assert_eq!(context.len(), 4, "prompt, summary, last turn and its result");
  assert_eq!(context[0]["content"][0]["text"], "go");
  let rendered = context[1]["content"].as_str().unwrap();
  assert!(rendered.starts_with("<cave-context-summary>\n{\"schema_version\":2,\"goal\":\"look things up\""), "{rendered}");
  assert_eq!(context[3]["content"][0]["text"], "echo b");
  let v = crate::receipt_check::validate_receipt_json(&r["receipt"].to_string());
  assert!(v.is_ok(), "{v:?}");
}

#[tokio::test]
async fn an_unusable_summary_or_stop_leaves_the_context_alone() {
  let long_text = "y".repeat(8_000);
  let host = Arc::new(FakeHost::new(vec![
    turn(&long_text, &[("lookup", json!({"q": "a"}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn("here is a summary in prose", &[]),
    turn("done", &[]),
  ]));
  let budget = json!({"budget": {"maxTokens": 8_000, "compaction": {"keepRecentTokens": 10, "minYieldTokens": 1, "summaryMaxTokens": 50}}});
  let r = go(host.clone(), compacting_agent(), options(budget)).await.unwrap();
  assert_eq!(r["receipt"]["compactions"], json!([]));
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 4, "the paid summarizer call is still metered");
  assert!(host.calls.lock().unwrap()[3].context.is_none());
  // onExhausted: "stop" never compacts.
  let host = Arc::new(FakeHost::new(vec![
    turn(&long_text, &[("lookup", json!({"q": "a"}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn("done", &[]),
  ]));
  let budget = json!({"budget": {"maxTokens": 8_000, "onExhausted": "stop", "compaction": {"keepRecentTokens": 10, "minYieldTokens": 1}}});
  let r = go(host.clone(), compacting_agent(), options(budget)).await.unwrap();
  assert_eq!((r["text"].as_str(), r["receipt"]["calls"].as_array().unwrap().len()), (Some("done"), 3));
}

/// `sandbox: "required"` (reference §2.3, §6.3): with an entry the level's host tools run (the
/// JS side puts them in worker processes); a composite is still blocked; without an entry the
/// run fails before any provider call; a `"host"` child under a required ancestor is refused.
mod required_sandbox {
  use super::*;

  fn delegate(name: &str, child_sandbox: &str, child_tools: Vec<Value>) -> Value {
    let child = json!({"id": format!("{name}-child"), "instructions": "child", "sandbox": child_sandbox,
      "model": {"key": 0, "provider": "anthropic", "id": "faux-1"}, "tools": child_tools});
    json!({"name": name, "description": "d", "effect": "read", "timeoutMs": 30000,
      "input": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
      "runtime": {"kind": "subagent", "agent": child, "maxInputChars": 32768, "maxCalls": 1, "maxCostUsd": 1, "maxContextTokens": 128000}})
  }

  #[tokio::test]
  async fn with_an_entry_host_tools_run_and_composites_are_blocked() {
    let host = Arc::new(FakeHost::new(vec![
      turn("", &[("lookup", json!({"q": "a"})), ("box", json!({"calls": []}))]),
      turn("done", &[]),
    ]));
    let a = agent(
      vec![host_tool("lookup", 0, "read", 1000), container_tool("box", 5, "read")],
      json!({"sandbox": "required"}),
    );
    let r = go(host.clone(), a, options(json!({"entryPath": "agent.mjs"}))).await.unwrap();
    assert_eq!(r["text"], "done");
    let results = &host.calls.lock().unwrap()[1].append;
    assert_eq!(results[1]["content"][0]["text"], "echo a");
    assert_eq!(results[2]["content"][0]["text"], "cave_nested_tool_sandbox_unsupported");
    assert_eq!(results[2]["isError"], true);
    assert_eq!(host.tool_log.lock().unwrap().len(), 1, "the composite never ran");
  }

  #[tokio::test]
  async fn without_an_entry_the_run_fails_before_the_first_call() {
    let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
    let a = agent(vec![host_tool("lookup", 0, "read", 1000)], json!({"sandbox": "required"}));
    let e = go(host.clone(), a, options(json!({}))).await.unwrap_err();
    // The reference's coarse errorCode(): the code is generic, the message names the cause.
    assert_eq!(e.code.as_deref(), Some("cave_agent_run_failed"));
    assert_eq!(
      e.message,
      "cave_tool_sandbox_entry_required: sandboxed tools need RunOptions.entryPath; use sandbox fixture only for trusted tests"
    );
    assert!(!e.pre_run, "a run error with the receipt, not an option error");
    assert!(host.calls.lock().unwrap().is_empty());
    // Subagent tools are child runs, not closures: a required root with only those runs.
    let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
    let a = agent(vec![delegate("delegate", "required", vec![])], json!({"sandbox": "required"}));
    assert_eq!(go(host, a, options(json!({}))).await.unwrap()["text"], "done");
  }

  #[tokio::test]
  async fn a_host_child_under_a_required_ancestor_is_refused_before_the_run() {
    let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
    let a = agent(vec![delegate("delegate", "host", vec![])], json!({"sandbox": "required"}));
    let e = go(host.clone(), a, options(json!({"entryPath": "a.mjs"}))).await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("cave_host_sandbox_nested_under_required"));
    assert!(e.pre_run, "thrown as a plain Error before the run");
    assert!(e.message.starts_with(
      "cave_host_sandbox_nested_under_required: subagent tool \"delegate\" runs agent \"delegate-child\" with sandbox \"host\" under agent \"reviewer\""
    ));
    assert!(host.calls.lock().unwrap().is_empty());
    // Two levels down, through a fixture level: still under the required root.
    let middle = delegate("inner", "host", vec![]);
    let a = agent(vec![delegate("outer", "fixture", vec![middle])], json!({"sandbox": "required"}));
    let e = go(host.clone(), a, options(json!({}))).await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("cave_host_sandbox_nested_under_required"));
    // A host root (declared, or downgraded by host-by-default) may have host children.
    let host = Arc::new(FakeHost::new(vec![turn("done", &[])]));
    let a = agent(vec![delegate("delegate", "host", vec![])], json!({"sandbox": "host"}));
    assert_eq!(go(host, a, options(json!({}))).await.unwrap()["text"], "done");
  }
}
/// The summarize scenario of the tests above: an 8,000-byte assistant text (nothing to evict),
/// then a budget that cannot afford four more calls of that context.
fn long_turns(after: Vec<Value>) -> Vec<Value> {
  let mut turns = vec![
    turn(&"y".repeat(8_000), &[("lookup", json!({"q": "a"}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
  ];
  turns.extend(after);
  turns
}

const SUMMARY: &str = r#"{"schema_version":2,"goal":"look things up","state":"a and b looked up","anchors":[{"kind":"fact","value":"a"}]}"#;

#[tokio::test]
async fn the_summarizer_model_serves_the_summary_when_its_window_holds_the_history() {
  let summarizer = |window: u64| json!({"key": 7, "provider": "anthropic", "id": "claude-haiku-4-5", "contextWindow": window});
  let budget = |window: u64| {
    json!({"budget": {"maxTokens": 8_000, "compaction": {"keepRecentTokens": 10, "minYieldTokens": 1, "summaryMaxTokens": 50, "summarizerModel": summarizer(window)}}})
  };
  let host = Arc::new(FakeHost::new(long_turns(vec![turn(SUMMARY, &[]), turn("done", &[])])));
  let r = go(host.clone(), compacting_agent(), options(budget(200_000))).await.unwrap();
  assert_eq!(r["receipt"]["compactions"][0]["tier"], "summarized", "{}", r["receipt"]);
  let calls = host.calls.lock().unwrap();
  let keys: Vec<(u32, Option<String>)> = calls.iter().map(|c| (c.model_key, c.model.clone())).collect();
  assert_eq!(keys, vec![(0, None), (0, None), (7, None), (0, None)], "only the summary goes to the summarizer's handle");
  drop(calls);
  // A window smaller than the history: the working model summarizes.
  let host = Arc::new(FakeHost::new(long_turns(vec![turn(SUMMARY, &[]), turn("done", &[])])));
  let r = go(host.clone(), compacting_agent(), options(budget(100))).await.unwrap();
  assert_eq!(r["receipt"]["compactions"][0]["tier"], "summarized");
  assert_eq!(host.calls.lock().unwrap()[2].model_key, 0);
}

#[tokio::test]
async fn new_context_mode_rolls_over_to_the_pins_and_the_callbacks_seed() {
  let budget = json!({"budget": {"maxTokens": 8_000, "compaction": {"mode": "new-context", "newContext": true, "keepRecentTokens": 10, "minYieldTokens": 1}}});
  let mut host = FakeHost::new(long_turns(vec![turn("done", &[])]));
  host.seeds = Some(Mutex::new(vec![Ok("Saved to notes/1.md. Next: report a and b.".to_string())].into()));
  let host = Arc::new(host);
  let r = go(host.clone(), compacting_agent(), options(budget.clone())).await.unwrap();
  assert_eq!(r["text"], "done");
  let c = &r["receipt"]["compactions"][0];
  assert_eq!(c["tier"], "new-context", "{}", r["receipt"]);
  assert_eq!(c["meteredCost"], 0.0);
  assert!(c.get("summarySchemaVersion").is_none());
  assert_eq!(c["pinnedSegmentIds"], json!(["runtime.user_intent.0"]));
  assert_eq!(c["elidedSegmentDigests"].as_array().unwrap().len(), 2, "everything but the prompt: {c}");
  assert_eq!(c["workingCallsAfter"], 2, "the trigger held after the first turn already");
  assert_eq!(r["receipt"]["calls"].as_array().unwrap().len(), 3, "no provider call");
  let asked = host.new_context_log.lock().unwrap();
  assert_eq!(asked.len(), 1);
  assert_eq!(asked[0]["generation"], 1);
  assert_eq!(asked[0]["agentPath"], json!([]));
  let window: Vec<&str> = asked[0]["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
  assert_eq!(window, ["user", "assistant", "toolResult"], "the window being closed");
  let calls = host.calls.lock().unwrap();
  let context = calls[1].context.as_ref().expect("the new context goes with the next call");
  assert_eq!(context.len(), 2);
  assert_eq!(context[0]["content"][0]["text"], "go");
  assert_eq!(context[1]["content"], "Saved to notes/1.md. Next: report a and b.");
  let v = crate::receipt_check::validate_receipt_json(&r["receipt"].to_string());
  assert!(v.is_ok(), "{v:?}");
  drop(calls);

  // A seed too big to save minYieldTokens: the ladder goes on to the summarizer.
  let mut host = FakeHost::new(long_turns(vec![turn(SUMMARY, &[]), turn("done", &[])]));
  host.seeds = Some(Mutex::new(vec![Ok("z".repeat(40_000)), Ok("z".repeat(40_000))].into()));
  let host = Arc::new(host);
  let mut b = budget.clone();
  b["budget"]["compaction"]["summaryMaxTokens"] = json!(50);
  let r = go(host.clone(), compacting_agent(), options(b)).await.unwrap();
  assert_eq!(r["receipt"]["compactions"][0]["tier"], "summarized", "{}", r["receipt"]);
  let asked: Vec<Value> = host.new_context_log.lock().unwrap().iter().map(|a| a["generation"].clone()).collect();
  assert_eq!(asked, [json!(1), json!(1)], "asked at each trigger (a declined rollover is no compaction)");

  // A callback that throws fails the run with its error (the run's coarse code, as a router's).
  for error in [
    HostError::new("disk full"),
    HostError {
      message: "cave_compaction_new_context_invalid: newContext must resolve to the seed of the new context (a string), got number".into(),
      code: Some("cave_compaction_new_context_invalid".into()),
    },
  ] {
    let mut host = FakeHost::new(long_turns(vec![turn("done", &[])]));
    host.seeds = Some(Mutex::new(vec![Err(error.clone())].into()));
    let host = Arc::new(host);
    let e = go(host.clone(), compacting_agent(), options(budget.clone())).await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("cave_agent_run_failed"));
    assert_eq!(e.message, error.message);
    assert_eq!(host.calls.lock().unwrap().len(), 1, "no call after the failed rollover");
  }
}

#[tokio::test]
async fn a_subagent_compacts_on_its_wallet() {
  let big = "x".repeat(8_000);
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("delegate", json!({"task": "look"}))]),
    turn("", &[("lookup", json!({"q": big}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn("child done", &[]),
    turn("parent done", &[]),
  ]));
  let child = json!({"id": "child", "instructions": "child", "sandbox": "host",
    "model": {"key": 0, "provider": "anthropic", "id": "faux-1", "maxTokens": 100}, "tools": [host_tool("lookup", 0, "read", 1000)]});
  let delegate = json!({"name": "delegate", "description": "d", "effect": "read", "timeoutMs": 30000,
    "input": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
    "runtime": {"kind": "subagent", "agent": child, "maxInputChars": 32768, "maxCalls": 1, "maxTokens": 10_000, "maxContextTokens": 128000}});
  let budget = json!({"budget": {"maxTokens": 100_000, "compaction": {"keepRecentTokens": 10}}});
  let r = go(host.clone(), agent(vec![delegate.clone()], json!({})), options(budget)).await.unwrap();
  assert_eq!(r["text"], "parent done");
  assert_eq!(r["receipt"]["compactions"], json!([]), "the parent had room");
  let sub = &r["receipt"]["subagents"][0];
  assert_eq!(sub["compactions"].as_array().unwrap().len(), 1, "{sub}");
  assert_eq!(sub["compactions"][0]["tier"], "evicted");
  assert_eq!(sub["compactions"][0]["workingCallsAfter"], 1);
  let calls = host.calls.lock().unwrap();
  let context = calls[3].context.as_ref().expect("the child's next call sees its compacted context");
  assert!(context[2]["content"][0]["text"].as_str().unwrap().starts_with("[cave: output of lookup (call c0-lookup) elided by compaction"));
  assert!(calls[4].context.is_none(), "the parent's context is its own");
  let v = crate::receipt_check::validate_receipt_json(&r["receipt"].to_string());
  assert!(v.is_ok(), "{v:?}");
  drop(calls);
  // onExhausted: "stop" on the root budget: the child does not compact either.
  let host = Arc::new(FakeHost::new(vec![
    turn("", &[("delegate", json!({"task": "look"}))]),
    turn("", &[("lookup", json!({"q": "x".repeat(8_000)}))]),
    turn("", &[("lookup", json!({"q": "b"}))]),
    turn("child done", &[]),
    turn("parent done", &[]),
  ]));
  let budget = json!({"budget": {"maxTokens": 100_000, "onExhausted": "stop", "compaction": {"keepRecentTokens": 10}}});
  let r = go(host.clone(), agent(vec![delegate], json!({})), options(budget)).await.unwrap();
  assert_eq!(r["receipt"]["subagents"][0]["compactions"], json!([]));
}

mod speculation {
  use super::*;

  /// A programmatic cell tool (key 5: it dispatches `args.calls` in turn) whose source is
  /// `args.code`, with speculation on for `lookup` and `slow`.
  fn cell_tool() -> Value {
    let speculative = |mut t: Value| {
      t["speculative"] = json!(true);
      t
    };
    json!({"name": "cell", "description": "cell", "effect": "idempotent", "timeoutMs": 10000,
      "input": {"type": "object", "properties": {"code": {"type": "string"}, "calls": {"type": "array"}}},
      "runtime": {"kind": "host", "key": 5}, "speculationSource": "code",
      "speculativeTools": ["lookup", "slow"],
      "nestedTools": [speculative(host_tool("lookup", 0, "read", 1000)), host_tool("boom", 1, "write", 1000),
        speculative(host_tool("slow", 2, "read", 60000))]})
  }

  fn counts(host: &FakeHost) -> Vec<&'static str> {
    host.counts.lock().unwrap().iter().map(|(k, c)| {
      assert_eq!(*k, 5, "counted for the cell tool's runtime");
      *c
    }).collect()
  }

  fn setup(code: &str, calls: Value, stream: Vec<(u32, String, Option<String>)>) -> Arc<FakeHost> {
    let mut host = FakeHost::new(vec![turn("", &[("cell", json!({"code": code, "calls": calls}))]), turn("ok", &[])]);
    host.inbox = Some(NestedInbox::new());
    host.streams.lock().unwrap().insert(0, stream);
    Arc::new(host)
  }

  #[tokio::test]
  async fn bets_launched_while_the_cell_streams_are_claimed_by_its_dispatches() {
    let code = r#"await lookup({"q": "a"}); await lookup({"q": "b"}); await lookup({"q": "c"})"#;
    let calls = json!([["lookup", {"q": "a"}, true], ["lookup", {"q": "b"}, true], ["lookup", {"q": "c"}, true]]);
    let partial = r#"await lookup({"q": "a"}); await lookup({"q": "b"})"#.to_string();
    let host = setup(code, calls, vec![(0, partial, None), (0, code.to_string(), Some("c0-cell".into()))]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut h = Arc::try_unwrap(host).ok().unwrap();
    h.policy = Some(Arc::new(DenyWrites(log.clone())));
    let host = Arc::new(h);
    let r = go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert_eq!(
      *host.dispatched.lock().unwrap(),
      vec![Ok(json!("echo a")), Ok(json!("echo b")), Ok(json!("echo c"))]
    );
    // Every lookup ran once: a and b as bets (all three sites launched while streaming), c's
    // claim took its bet too.
    let ran: Vec<String> = host.tool_log.lock().unwrap().iter().filter(|l| l.starts_with("0:")).cloned().collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(counts(&host), ["launched", "launched", "launched", "claimed", "claimed", "claimed"]);
    // The bets were admitted with the provisional parent, and appear before their container.
    let parents: Vec<(String, Option<String>)> =
      log.lock().unwrap().iter().map(|p| (p.tool_call_id.clone(), p.parent_tool_call_id.clone())).collect();
    assert_eq!(
      parents,
      [
        ("run-1:spec:1:0:nested:1".to_string(), Some("run-1:spec:1:0".to_string())),
        ("run-1:spec:1:0:nested:2".to_string(), Some("run-1:spec:1:0".to_string())),
        ("run-1:spec:1:0:nested:3".to_string(), Some("run-1:spec:1:0".to_string())),
        ("c0-cell".to_string(), None),
      ]
    );
    assert_eq!(r["toolCalls"], json!(["lookup", "lookup", "lookup", "cell"]));
    let events = nested_events(&host);
    assert_eq!(events.len(), 6, "one start and one end per bet, none for a claim");
    assert!(host.scoped.lock().unwrap()[0], "the first provider call had a scope");
  }

  #[tokio::test]
  async fn a_claim_without_a_matching_bet_misses_and_the_call_runs() {
    let code = r#"await lookup({"q": "a"})"#;
    let calls = json!([["lookup", {"q": "other"}, true], ["lookup", {"q": "a"}, true]]);
    let host = setup(code, calls, vec![(0, code.to_string(), Some("c0-cell".into()))]);
    let r = go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert_eq!(*host.dispatched.lock().unwrap(), vec![Ok(json!("echo other")), Ok(json!("echo a"))]);
    assert_eq!(counts(&host), ["launched", "missed", "claimed"]);
    assert_eq!(r["toolCalls"], json!(["lookup", "cell", "lookup"]));
  }

  #[tokio::test(start_paused = true)]
  async fn unclaimed_bets_are_abandoned_when_the_cell_closes_and_stay_in_the_receipt() {
    let code = r#"await slow({"q": "s"}); await lookup({"q": "a"})"#;
    let host = setup(code, json!([]), vec![(0, code.to_string(), Some("c0-cell".into()))]);
    let r = go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert_eq!(counts(&host), ["launched", "launched", "abandoned", "abandoned"]);
    assert_eq!(r["toolCalls"], json!(["slow", "lookup", "cell"]));
    let events = nested_events(&host);
    let ends: Vec<(String, bool, Value)> = events
      .iter()
      .filter(|e| e["type"] == "nested_tool_end")
      .map(|e| (e["name"].as_str().unwrap().to_string(), e["isError"].as_bool().unwrap(), e["result"].clone()))
      .collect();
    assert!(ends.contains(&("lookup".into(), false, json!("echo a"))), "a settled bet keeps its result: {ends:?}");
    assert!(ends.contains(&("slow".into(), true, json!("cave_program_speculation_abandoned"))), "{ends:?}");
    let tools = &r["receipt"]["tools"];
    let slow = tools.as_array().unwrap().iter().find(|t| t["name"] == "slow").unwrap();
    assert_eq!((slow["calls"].as_u64(), slow["errors"].as_u64()), (Some(1), Some(1)));
    // The container itself settled normally.
    assert_eq!(host.calls.lock().unwrap()[1].append[1]["content"][0]["text"], "container done");
  }

  #[tokio::test(start_paused = true)]
  async fn a_final_source_that_differs_fails_closed_and_unactivated_bets_end_before_the_next_call() {
    // The streamed source is not the final one: nothing activates, the claim misses.
    let code = r#"await lookup({"q": "a"})"#;
    let host = setup(code, json!([["lookup", {"q": "a"}, true]]), vec![(0, r#"lookup({"q": "a"}) "#.into(), Some("c0-cell".into()))]);
    go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert_eq!(counts(&host), ["launched", "abandoned", "missed"]);
    // A stream whose call never arrives under that id: abandoned before the next provider call.
    let host = setup(code, json!([]), vec![(0, code.to_string(), Some("another-id".into()))]);
    go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert_eq!(counts(&host), ["launched", "abandoned"]);
  }

  #[tokio::test]
  async fn a_cell_that_calls_a_write_first_launches_nothing_after_it() {
    let code = r#"await boom({"q": "x"}); await lookup({"q": "a"})"#;
    let host = setup(code, json!([]), vec![(0, code.to_string(), Some("c0-cell".into()))]);
    go(host.clone(), agent(vec![cell_tool()], json!({})), options(json!({}))).await.unwrap();
    assert!(counts(&host).is_empty());
  }

  #[tokio::test]
  async fn a_durable_run_has_no_speculation_scope() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(crate::durable::store::DiskStore::new(dir.path()));
    let code = r#"await lookup({"q": "a"})"#;
    let host = setup(code, json!([]), vec![(0, code.to_string(), Some("c0-cell".into()))]);
    super::durable::go_durable(host.clone(), agent(vec![cell_tool()], json!({})), &store).await.unwrap();
    assert_eq!(*host.scoped.lock().unwrap(), [false, false]);
    assert!(counts(&host).is_empty());
  }
}

#[tokio::test(start_paused = true)]
async fn a_write_tool_whose_body_outlives_its_timeout_by_a_second_is_unquiesced() {
  // Key 9 never settles (the fake host ignores the abort).
  for (effect, expected) in [("write", "cave_tool_effect_unquiesced"), ("idempotent", "cave_tool_effect_unquiesced"), ("read", "cave_tool_timeout")] {
    let host = Arc::new(FakeHost::new(vec![turn("", &[("slow", json!({"q": "x"}))]), turn("ok", &[])]));
    let a = agent(vec![host_tool("slow", 9, effect, 20)], json!({}));
    go(host.clone(), a, options(json!({}))).await.unwrap();
    assert_eq!(host.calls.lock().unwrap()[1].append[1]["content"][0]["text"], expected, "{effect}");
  }
}
