//! The memory engine's storage and ranking over `knap_core::memory`: `NativeMemoryStore` holds
//! each scope's state (in memory, or in the reference's file under a root) with its recall index;
//! `memoryApply` runs one operation on a state a JS storage adapter holds.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use knap_core::memory::{self as core, Op, State};
use napi_derive::napi;
use serde_json::json;

use crate::{async_error, ErrorCode};

#[derive(Default)]
struct Scoped {
  state: State,
  index: core_index::Index,
  /// The file's (mtime, len) when last read or written: another process's write is re-read.
  seen: Option<(SystemTime, u64)>,
}

mod core_index {
  pub use knap_core::memory::Index;
}

fn parse_op(op_json: &str) -> Result<Op, String> {
  serde_json::from_str(op_json).map_err(|e| format!("cave_memory_operation_invalid:{e}"))
}

fn valid_component(s: &str, max: usize, first_alpha: bool) -> bool {
  let b = s.as_bytes();
  !b.is_empty()
    && b.len() <= max
    && (if first_alpha { b[0].is_ascii_alphabetic() } else { b[0].is_ascii_alphanumeric() })
    && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
}

#[napi]
pub struct NativeMemoryStore {
  root: Option<PathBuf>,
  scopes: Arc<Mutex<HashMap<String, Scoped>>>,
}

impl NativeMemoryStore {
  fn file(&self, tenant: &str, agent: &str, namespace: &str) -> Option<PathBuf> {
    self.root.as_ref().map(|r| r.join(tenant).join(agent).join(format!("{namespace}.json")))
  }
}

fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
  fs::metadata(path).ok().map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
}

fn write_atomic(path: &PathBuf, text: &str) -> Result<(), String> {
  let dir = path.parent().ok_or("cave_memory_storage_failed: no parent")?;
  fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| format!("cave_memory_storage_failed: {e}"))?;
  let tmp = PathBuf::from(format!("{}.{}.{}.tmp", path.display(), std::process::id(), uuid_v4()));
  let result = (|| {
    let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, path)
  })();
  let _ = fs::remove_file(&tmp);
  result.map_err(|e| format!("cave_memory_storage_failed: {e}"))
}

fn uuid_v4() -> String {
  knap_core::memory::new_id()
}

#[napi]
impl NativeMemoryStore {
  /// `root`: the file adapter's root; none for the in-memory storage.
  #[napi(constructor)]
  pub fn new(root: Option<String>) -> Self {
    Self {
      root: root.map(PathBuf::from),
      scopes: Arc::new(Mutex::new(HashMap::new())),
    }
  }

  /// Runs one operation on the scope's state: `{result, changed, revision}` as JSON. For a file
  /// store the state is (re)read when the file changed and written back atomically when it did.
  #[napi]
  pub async fn apply(&self, tenant: String, agent_id: String, namespace: String, op_json: String, now: f64) -> napi::Result<String> {
    if !(tenant == "_" || valid_component(&tenant.to_ascii_lowercase(), 128, false)) {
      return Err(async_error("cave_memory_tenant_invalid", "cave_memory_tenant_invalid"));
    }
    if !valid_component(&agent_id, 128, true) {
      return Err(async_error("cave_memory_agent_invalid", "cave_memory_agent_invalid"));
    }
    if !valid_component(&namespace, 96, false) || namespace.as_bytes()[0] == b'_' || namespace.as_bytes()[0] == b'-' {
      return Err(async_error("cave_memory_namespace_invalid", "cave_memory_namespace_invalid"));
    }
    let file = self.file(&tenant, &agent_id, &namespace);
    let scopes = self.scopes.clone();
    let key = format!("{tenant}/{agent_id}/{namespace}");
    let task = tokio::task::spawn_blocking(move || -> Result<String, String> {
      let op = parse_op(&op_json)?;
      let mut all = scopes.lock().map_err(|_| "cave_memory_storage_failed: poisoned".to_string())?;
      let scoped = all.entry(key).or_default();
      if let Some(path) = &file {
        let now_stamp = stamp(path);
        if now_stamp != scoped.seen {
          scoped.state = fs::read_to_string(path).map(|t| core::read_state(&t)).unwrap_or_default();
          scoped.seen = now_stamp;
        }
      }
      let (result, changed) = core::apply(&mut scoped.state, &mut scoped.index, op, now)?;
      if changed {
        if let Some(path) = &file {
          write_atomic(path, &core::write_state(&scoped.state))?;
          scoped.seen = stamp(path);
        }
      }
      Ok(json!({"result": result, "changed": changed, "revision": scoped.state.revision}).to_string())
    });
    match task.await {
      Ok(Ok(s)) => Ok(s),
      Ok(Err(m)) => Err(async_error(m.split([':', ' ']).next().unwrap_or(&m), &m)),
      Err(e) => Err(async_error("cave_memory_storage_failed", &format!("cave_memory_storage_failed: {e}"))),
    }
  }

  /// The scope's state document as JSON (what `read(scope)` returns).
  #[napi]
  pub async fn read(&self, tenant: String, agent_id: String, namespace: String) -> napi::Result<String> {
    let out = self.apply(tenant.clone(), agent_id.clone(), namespace.clone(), r#"{"op":"read"}"#.into(), 0.0).await?;
    let _ = out;
    let key = format!("{tenant}/{agent_id}/{namespace}");
    let all = self.scopes.lock().map_err(|_| napi::Error::from_reason("poisoned"))?;
    Ok(all.get(&key).map(|s| core::write_state(&s.state)).unwrap_or_else(|| core::write_state(&State::default())))
  }

  /// Replaces the scope's state with a mutator's result (`update(scope, mutate)`).
  #[napi]
  pub async fn replace(&self, tenant: String, agent_id: String, namespace: String, state_json: String) -> napi::Result<()> {
    let state: State = serde_json::from_str(&state_json).map_err(|_| async_error("cave_memory_state_invalid", "cave_memory_state_invalid"))?;
    let file = self.file(&tenant, &agent_id, &namespace);
    let key = format!("{tenant}/{agent_id}/{namespace}");
    let mut all = self.scopes.lock().map_err(|_| napi::Error::from_reason("poisoned"))?;
    let scoped = all.entry(key).or_default();
    scoped.state = state;
    if let Some(path) = &file {
      write_atomic(path, &core::write_state(&scoped.state)).map_err(|m| async_error("cave_memory_storage_failed", &m))?;
      scoped.seen = stamp(path);
    }
    Ok(())
  }
}

/// One operation on a state held by a JS storage adapter: `{state, result, changed}` as JSON.
#[napi]
pub fn memory_apply(state_json: String, op_json: String, now: f64) -> napi::Result<String, ErrorCode> {
  let coded = |m: String| napi::Error::new(ErrorCode(m.split([':', ' ']).next().unwrap_or(&m).to_string()), m);
  let mut state: State = serde_json::from_str(&state_json).map_err(|_| coded("cave_memory_state_invalid".into()))?;
  let op = parse_op(&op_json).map_err(coded)?;
  let mut index = core_index::Index::default();
  let (result, changed) = core::apply(&mut state, &mut index, op, now).map_err(coded)?;
  Ok(json!({"state": state, "result": result, "changed": changed}).to_string())
}

/// Validates a state document (a storage adapter's mutator result).
#[napi]
pub fn memory_state_valid(state_json: String) -> bool {
  serde_json::from_str::<State>(&state_json).is_ok_and(|s| s.schema_version == 1)
}

#[napi]
pub fn memory_read_state(text: String) -> String {
  core::write_state(&core::read_state(&text))
}

/// `packVector(adapterId, numbers)` as JSON.
#[napi]
pub fn memory_pack_vector(adapter: String, values: Vec<f64>) -> String {
  serde_json::to_string(&core::pack(&adapter, &values)).unwrap_or_default()
}

/// `cosine(a, b)` of two packed vectors (0 across adapters or sizes).
#[napi]
pub fn memory_cosine(a_json: String, b_json: String) -> f64 {
  let (Ok(a), Ok(b)) = (serde_json::from_str::<core::Vector>(&a_json), serde_json::from_str::<core::Vector>(&b_json)) else {
    return 0.0;
  };
  if a.adapter != b.adapter || a.dimensions != b.dimensions {
    return 0.0;
  }
  match (core::unpack(&a), core::unpack(&b)) {
    (Some(x), Some(y)) => core::cosine(&x, &y),
    _ => 0.0,
  }
}

#[napi]
pub fn memory_sparse_embed(text: String, dimensions: u32) -> Vec<f64> {
  core::sparse_embed(&text, dimensions as usize)
}

#[napi]
pub fn memory_is_sensitive(text: String) -> bool {
  core::is_sensitive(&text)
}
