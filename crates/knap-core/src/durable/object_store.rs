//! `ObjectDurableStore`: the journal in an object store (S3, R2, GCS, Azure) through the
//! reference's three-method `ObjectStorage` adapter, `get` / `put(key, data, {ifMatch?})` /
//! `list(prefix)`. Nothing is ever rewritten in place except a lease holder's own lease:
//!
//! - a journal is immutable chunks `<prefix><runId>/journal/<seq>` (seq zero-padded to 12
//!   digits), each one append, created with a create-if-absent put (`ifMatch: ""`); on a
//!   conflict the next sequence is re-derived, up to 8 attempts (`cave_durable_append_conflict`);
//! - a lease is `<prefix><runId>/lease/<generation>` holding `{owner, expiresAt}`; an expired one
//!   is taken over by creating the next generation (create-if-absent, so of several contenders
//!   exactly one wins); an unreadable one counts as held; the holder renews its own key every
//!   third of the TTL and writes `expiresAt: 0` to release it. It has lost the lease when its key
//!   is no longer the newest generation (or its own expiry passed unrenewed): appends and
//!   renewals then fail with `cave_durable_run_lock_lost`.
//!
//! Locking needs conditional puts (`conditionalPut: true`), else `acquire` refuses with
//! `cave_durable_object_conditional_put_required` before writing anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::lease::{lease_ttl, lock_lost, now_ms, LeaseBook, LeaseEngine, Leased};
use super::store::{journal_limit, locked_error, remote_journal_lines};
use super::{valid_run_id, DurableError};
use crate::code::Code;
use crate::exec::BoxFuture;
use crate::limits::{
  DURABLE_MAX_JOURNAL_BYTES, DURABLE_OBJECT_APPEND_ATTEMPTS, DURABLE_OBJECT_KNOWN_RUNS_MAX,
  DURABLE_OBJECT_LEASE_MAX_BYTES, DURABLE_OBJECT_PREFIX,
};

/// The host's object storage. `put` resolves `false` when its `if_match` precondition failed
/// (`Some("")`: the key already exists). A failure is `cave_durable_store_failed` whose message
/// is the adapter's own (the store adds the step), or a `cave_*` code the adapter raised.
pub trait ObjectStorage: Send + Sync {
  fn get(&self, key: String) -> BoxFuture<Result<Option<Vec<u8>>, DurableError>>;
  fn put(
    &self,
    key: String,
    data: Vec<u8>,
    if_match: Option<String>,
  ) -> BoxFuture<Result<bool, DurableError>>;
  fn list(&self, prefix: String) -> BoxFuture<Result<Vec<String>, DurableError>>;
}

#[derive(Debug, Clone, Default)]
pub struct ObjectStoreOptions {
  /// Default `caveman/durable/`.
  pub prefix: Option<String>,
  /// The storage's puts honour `ifMatch` (create-if-absent): required to lock runs.
  pub conditional_put: bool,
  pub lease_ttl_ms: Option<f64>,
}

#[derive(Clone)]
struct Lease {
  generation: u64,
  owner: String,
  expires_at: u64,
}

/// What this instance knows of a journal: the next free chunk sequence and the bytes so far
/// (for the 256 MiB limit without re-reading every chunk on each append).
#[derive(Clone, Copy, Default)]
struct Known {
  next: u64,
  bytes: usize,
}

/// `ObjectDurableStore`: [`Leased`] over the object-storage engine.
pub type ObjectStore = Leased<ObjectEngine>;

pub struct ObjectEngine {
  storage: Arc<dyn ObjectStorage>,
  prefix: String,
  conditional_put: bool,
  ttl_ms: u64,
  book: Arc<LeaseBook<Lease>>,
  known: Mutex<HashMap<String, Known>>,
  /// One append at a time per run from this instance (the others would only collide).
  appending: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A storage failure, named by the step it broke. Adapters report their errors as
/// `cave_durable_store_failed` with the raw message (see [`ObjectStorage`]); a `cave_*` code the
/// adapter raised itself passes through unchanged.
fn store_failed(what: &str, e: DurableError) -> DurableError {
  if e.code == Code::DurableStoreFailed {
    DurableError::coded(Code::DurableStoreFailed, format!("{what}: {}", e.message))
  } else {
    e
  }
}

impl Leased<ObjectEngine> {
  pub fn new(options: ObjectStoreOptions, storage: Arc<dyn ObjectStorage>) -> Result<Self, DurableError> {
    let prefix = options
      .prefix
      .unwrap_or_else(|| DURABLE_OBJECT_PREFIX.to_string());
    if prefix.len() > 1024 || prefix.chars().any(|c| c.is_control()) {
      return Err(DurableError::coded(
        Code::DurableObjectPrefixInvalid,
        "prefix must be at most 1024 bytes without control characters",
      ));
    }
    let ttl_ms = lease_ttl(
      options.lease_ttl_ms,
      Code::DurableObjectLeaseTtlInvalid,
      "leaseTtlMs",
    )?;
    Ok(Leased::over(ObjectEngine {
      storage,
      prefix,
      conditional_put: options.conditional_put,
      ttl_ms,
      book: Arc::default(),
      known: Mutex::default(),
      appending: Mutex::default(),
    }))
  }

  pub fn prefix(&self) -> &str {
    &self.engine().prefix
  }
}

impl ObjectEngine {
  fn journal_prefix(&self, run_id: &str) -> String {
    format!("{}{run_id}/journal/", self.prefix)
  }

  fn lease_prefix(&self, run_id: &str) -> String {
    format!("{}{run_id}/lease/", self.prefix)
  }

  /// The chunks of a journal as (seq, key), in sequence order.
  async fn chunks(&self, run_id: &str) -> Result<Vec<(u64, String)>, DurableError> {
    let prefix = self.journal_prefix(run_id);
    let keys = self
      .storage
      .list(prefix.clone())
      .await
      .map_err(|e| store_failed("list journal chunks", e))?;
    let mut chunks = Vec::with_capacity(keys.len());
    for key in keys {
      let Some(rest) = key.strip_prefix(&prefix) else {
        continue;
      };
      let seq = (!rest.is_empty() && rest.len() <= 19 && rest.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rest.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| {
          DurableError::coded(
            Code::DurableJournalCorrupt,
            format!(
              "object {} is not a journal chunk (its name after journal/ must be a sequence number)",
              json!(key)
            ),
          )
        })?;
      chunks.push((seq, key));
    }
    chunks.sort();
    chunks.dedup_by_key(|c| c.0);
    Ok(chunks)
  }

  async fn get_chunk(&self, key: &str) -> Result<Vec<u8>, DurableError> {
    self
      .storage
      .get(key.to_string())
      .await
      .map_err(|e| store_failed("get journal chunk", e))?
      .ok_or_else(|| {
        DurableError::coded(
          Code::DurableStoreFailed,
          format!("journal chunk {} was listed but is gone", json!(key)),
        )
      })
  }

  /// Reads the chunks at or after `from.next` and adds them to `from`.
  async fn catch_up(&self, run_id: &str, mut from: Known) -> Result<Known, DurableError> {
    for (seq, key) in self.chunks(run_id).await? {
      if seq < from.next {
        continue;
      }
      let bytes = self.get_chunk(&key).await?.len();
      from.bytes += bytes;
      from.next = seq + 1;
    }
    Ok(from)
  }

  /// Only a cache (an append without an entry catches up from the chunks): bounded, it starts
  /// over past `DURABLE_OBJECT_KNOWN_RUNS_MAX` runs — a server's sweeps load every run.
  fn remember(&self, run_id: &str, known: Known) {
    let mut map = self.known.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= DURABLE_OBJECT_KNOWN_RUNS_MAX && !map.contains_key(run_id) {
      map.clear();
    }
    map.insert(run_id.to_string(), known);
  }

  /// This instance is done with the run: its append turn and cached position go.
  fn forget(&self, run_id: &str) {
    self.appending.lock().unwrap_or_else(|e| e.into_inner()).remove(run_id);
    self.known.lock().unwrap_or_else(|e| e.into_inner()).remove(run_id);
  }

  /// While this instance holds the run's lease: its key must still be the newest generation and
  /// its expiry not passed, else the lease is lost (`cave_durable_run_lock_lost`, sticky).
  async fn prove_held(&self, run_id: &str) -> Result<(), DurableError> {
    if let Some(lost) = self.book.lost(run_id) {
      return Err(lost);
    }
    let Some((id, lease)) = self.book.get(run_id) else {
      return Ok(());
    };
    let newest = self.newest_generation(run_id).await?;
    if newest.map(|(g, _)| g) != Some(lease.generation) || now_ms() >= lease.expires_at {
      self.book.lose(run_id, id, lock_lost(run_id));
      return Err(lock_lost(run_id));
    }
    Ok(())
  }

  /// The newest lease generation of a run, with its key.
  async fn newest_generation(&self, run_id: &str) -> Result<Option<(u64, String)>, DurableError> {
    let prefix = self.lease_prefix(run_id);
    let keys = self
      .storage
      .list(prefix.clone())
      .await
      .map_err(|e| store_failed("list leases", e))?;
    let mut newest: Option<(u64, String)> = None;
    for key in keys {
      let Some(rest) = key.strip_prefix(&prefix) else {
        continue;
      };
      let generation = (!rest.is_empty() && rest.len() <= 19 && rest.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rest.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| {
          DurableError::coded(
            Code::DurableObjectLeaseInvalid,
            format!("lease object {} has a non-numeric generation", json!(key)),
          )
        })?;
      if newest.as_ref().is_none_or(|(g, _)| generation > *g) {
        newest = Some((generation, key));
      }
    }
    Ok(newest)
  }

  fn lease_body(owner: &str, expires_at: u64) -> Vec<u8> {
    json!({ "owner": owner, "expiresAt": expires_at })
      .to_string()
      .into_bytes()
  }

  async fn renew(&self, run_id: &str, id: u64) -> Result<(), DurableError> {
    let Some((_, lease)) = self.book.get(run_id).filter(|(i, _)| *i == id) else {
      return Ok(());
    };
    let newest = self
      .newest_generation(run_id)
      .await
      .map_err(|_| lock_lost(run_id))?;
    if newest.map(|(g, _)| g) != Some(lease.generation) || now_ms() >= lease.expires_at {
      return Err(lock_lost(run_id));
    }
    let expires_at = now_ms() + self.ttl_ms;
    let key = format!("{}{:012}", self.lease_prefix(run_id), lease.generation);
    self
      .storage
      .put(key, Self::lease_body(&lease.owner, expires_at), None)
      .await
      .map_err(|_| lock_lost(run_id))?;
    self.book.update(run_id, id, |l| l.expires_at = expires_at);
    Ok(())
  }
}

impl LeaseEngine for ObjectEngine {
  async fn load(&self, run_id: &str) -> Result<Vec<String>, DurableError> {
    let mut text = Vec::new();
    let mut next = 0;
    for (seq, key) in self.chunks(run_id).await? {
      let chunk = self.get_chunk(&key).await?;
      if text.len() + chunk.len() > DURABLE_MAX_JOURNAL_BYTES {
        return Err(journal_limit(false));
      }
      text.extend_from_slice(&chunk);
      next = seq + 1;
    }
    let bytes = text.len();
    let lines = remote_journal_lines(text, &format!("under {}", json!(self.journal_prefix(run_id))))?;
    self.remember(
      run_id,
      Known {
        next: next.max(1),
        bytes,
      },
    );
    Ok(lines)
  }

  async fn append(&self, run_id: &str, data: String) -> Result<(), DurableError> {
    let turn = self
      .appending
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .entry(run_id.to_string())
      .or_default()
      .clone();
    let _one = turn.lock().await;
    let cached = self
      .known
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(run_id)
      .copied();
    let mut known = match cached {
      Some(k) => k,
      None => self.catch_up(run_id, Known { next: 1, bytes: 0 }).await?,
    };
    let bytes = data.into_bytes();
    for attempt in 0..DURABLE_OBJECT_APPEND_ATTEMPTS {
      self.prove_held(run_id).await?;
      if known.bytes + bytes.len() > DURABLE_MAX_JOURNAL_BYTES {
        return Err(journal_limit(true));
      }
      let key = format!("{}{:012}", self.journal_prefix(run_id), known.next);
      let written = self
        .storage
        .put(key, bytes.clone(), Some(String::new()))
        .await
        .map_err(|e| store_failed("put journal chunk", e))?;
      if written {
        known.next += 1;
        known.bytes += bytes.len();
        self.remember(run_id, known);
        return Ok(());
      }
      // Another writer took that sequence: read what it wrote, then try the next free one
      // (after a short full-jitter pause, so racing writers spread out).
      known = self.catch_up(run_id, known).await?;
      if attempt + 1 < DURABLE_OBJECT_APPEND_ATTEMPTS {
        let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
        tokio::time::sleep(Duration::from_micros(jitter * 4 * u64::from(attempt + 1))).await;
      }
    }
    Err(DurableError::coded(
      Code::DurableAppendConflict,
      format!(
        "run \"{run_id}\" could not claim a free journal chunk in {DURABLE_OBJECT_APPEND_ATTEMPTS} attempts"
      ),
    ))
  }

  async fn acquire(self: Arc<Self>, run_id: &str) -> Result<u64, DurableError> {
    if !self.conditional_put {
      return Err(DurableError::coded(
        Code::DurableObjectConditionalPutRequired,
        "locking a run needs an ObjectStorage whose put honours ifMatch (create-if-absent); declare conditionalPut: true once it does",
      ));
    }
    let next = match self.newest_generation(run_id).await? {
      None => 1,
      Some((generation, key)) => {
        let body = self
          .storage
          .get(key.clone())
          .await
          .map_err(|e| store_failed("get lease", e))?;
        // An unreadable lease counts as held: nobody can tell when it ends.
        let expires_at = body
          .filter(|b| b.len() <= DURABLE_OBJECT_LEASE_MAX_BYTES)
          .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
          .filter(|v| v.get("owner").is_some_and(Value::is_string))
          .and_then(|v| v.get("expiresAt").and_then(Value::as_f64))
          .filter(|e| e.is_finite());
        match expires_at {
          None => {
            let mut e = locked_error(run_id);
            e.message.push_str(&format!(
              "\nhint: its lease object {} is unreadable, which counts as held; delete it once no process drives the run",
              json!(key)
            ));
            return Err(e);
          }
          Some(at) if at > now_ms() as f64 => return Err(locked_error(run_id)),
          Some(_) => generation + 1,
        }
      }
    };
    let owner = format!("{run_id}:{}", uuid::Uuid::new_v4());
    let expires_at = now_ms() + self.ttl_ms;
    let key = format!("{}{next:012}", self.lease_prefix(run_id));
    let created = self
      .storage
      .put(
        key.clone(),
        Self::lease_body(&owner, expires_at),
        Some(String::new()),
      )
      .await
      .map_err(|e| store_failed("put lease", e))?;
    if !created {
      return Err(locked_error(run_id));
    }
    let lease = Lease {
      generation: next,
      owner,
      expires_at,
    };
    let id = self.book.hold_for(&self, run_id, lease, self.ttl_ms, |engine, run, id| async move {
      engine.renew(&run, id).await
    });
    Ok(id)
  }

  async fn release(&self, run_id: &str, id: Option<u64>) -> Result<(), DurableError> {
    let Some(lease) = self.book.take(run_id, id) else {
      return Ok(());
    };
    self.forget(run_id);
    // Only while the key is still the newest: a taken-over generation is left as it is.
    if self.newest_generation(run_id).await?.map(|(g, _)| g) != Some(lease.generation) {
      return Ok(());
    }
    let key = format!("{}{:012}", self.lease_prefix(run_id), lease.generation);
    self
      .storage
      .put(key, Self::lease_body(&lease.owner, 0), None)
      .await
      .map_err(|e| store_failed("release lease", e))?;
    Ok(())
  }

  async fn close(&self, run_id: &str) -> Result<(), DurableError> {
    self.release(run_id, None).await?;
    self.forget(run_id);
    Ok(())
  }

  /// Every run with at least one journal chunk.
  async fn list(&self) -> Result<Vec<String>, DurableError> {
    let keys = self
      .storage
      .list(self.prefix.clone())
      .await
      .map_err(|e| store_failed("list", e))?;
    let mut ids: Vec<String> = keys
      .iter()
      .filter_map(|k| k.strip_prefix(self.prefix.as_str()))
      .filter_map(|rest| rest.split_once("/journal/").map(|(id, _)| id))
      .filter(|id| valid_run_id(id))
      .map(str::to_string)
      .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::collections::BTreeMap;

  /// Object storage in memory with create-if-absent puts. `conditional: false` ignores
  /// `ifMatch` (an adapter without conditional puts); `refuse_conditional` answers every
  /// conditional put with a failed precondition (declared, but not supported).
  #[derive(Default)]
  struct Bucket {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
    puts: Mutex<Vec<(String, Option<String>)>>,
    refuse_conditional: bool,
    ignore_if_match: bool,
  }

  impl Bucket {
    fn keys(&self) -> Vec<String> {
      self.objects.lock().unwrap().keys().cloned().collect()
    }
    fn json(&self, key: &str) -> Value {
      serde_json::from_slice(&self.objects.lock().unwrap()[key]).unwrap()
    }
  }

  struct Fake(Arc<Bucket>);

  impl ObjectStorage for Fake {
    fn get(&self, key: String) -> BoxFuture<Result<Option<Vec<u8>>, DurableError>> {
      let b = self.0.clone();
      Box::pin(async move { Ok(b.objects.lock().unwrap().get(&key).cloned()) })
    }
    fn put(
      &self,
      key: String,
      data: Vec<u8>,
      if_match: Option<String>,
    ) -> BoxFuture<Result<bool, DurableError>> {
      let b = self.0.clone();
      Box::pin(async move {
        b.puts.lock().unwrap().push((key.clone(), if_match.clone()));
        let mut objects = b.objects.lock().unwrap();
        if if_match.as_deref() == Some("")
          && !b.ignore_if_match
          && (b.refuse_conditional || objects.contains_key(&key))
        {
          return Ok(false);
        }
        objects.insert(key, data);
        Ok(true)
      })
    }
    fn list(&self, prefix: String) -> BoxFuture<Result<Vec<String>, DurableError>> {
      let b = self.0.clone();
      Box::pin(async move {
        Ok(
          b.objects
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect(),
        )
      })
    }
  }

  fn store(bucket: &Arc<Bucket>) -> ObjectStore {
    let options = ObjectStoreOptions {
      conditional_put: true,
      ..Default::default()
    };
    ObjectStore::new(options, Arc::new(Fake(bucket.clone()))).unwrap()
  }

  const J: &str = "caveman/durable/run/journal/";
  const L: &str = "caveman/durable/run/lease/";

  #[tokio::test]
  async fn chunks_are_immutable_objects_loaded_in_order() {
    let bucket: Arc<Bucket> = Arc::default();
    let s = store(&bucket);
    assert_eq!(s.load("run").await.unwrap(), Vec::<String>::new());
    s.append("run", "{\"a\":1}\n".into()).await.unwrap();
    s.append("run", "{\"a\":2}\n{\"a\":3}\n".into()).await.unwrap();
    assert_eq!(
      bucket.keys(),
      vec![format!("{J}000000000001"), format!("{J}000000000002")]
    );
    assert!(
      bucket
        .puts
        .lock()
        .unwrap()
        .iter()
        .all(|(_, m)| m.as_deref() == Some("")),
      "create-if-absent puts"
    );
    assert_eq!(
      store(&bucket).load("run").await.unwrap(),
      vec!["{\"a\":1}", "{\"a\":2}", "{\"a\":3}"]
    );
    store(&bucket).append("other", "{}\n".into()).await.unwrap();
    assert_eq!(s.list().await.unwrap(), vec!["other", "run"]);
    // A foreign object among the chunks is corruption, not skipped.
    bucket
      .objects
      .lock()
      .unwrap()
      .insert(format!("{J}notes.txt"), b"x".to_vec());
    assert_eq!(s.load("run").await.unwrap_err().code, Code::DurableJournalCorrupt);
  }

  #[tokio::test]
  async fn what_an_instance_keeps_per_run_is_bounded_and_goes_with_the_lease() {
    let bucket: Arc<Bucket> = Arc::default();
    let s = store(&bucket);
    let id = s.acquire_lease("run").await.unwrap();
    s.load("run").await.unwrap();
    s.append("run", "{}\n".into()).await.unwrap();
    assert!(s.0.known.lock().unwrap().contains_key("run"));
    assert!(s.0.appending.lock().unwrap().contains_key("run"));
    s.release("run", Some(id)).await.unwrap();
    assert!(s.0.known.lock().unwrap().is_empty(), "released: the position is forgotten");
    assert!(s.0.appending.lock().unwrap().is_empty(), "released: the append turn is forgotten");
    // Loads of runs this instance never holds (a server's sweep) stay a bounded cache.
    for n in 0..DURABLE_OBJECT_KNOWN_RUNS_MAX + 10 {
      s.0.remember(&format!("r{n}"), Known { next: 1, bytes: 0 });
    }
    assert!(s.0.known.lock().unwrap().len() <= DURABLE_OBJECT_KNOWN_RUNS_MAX);
    // A forgotten position is caught up from the chunks: appends go on after what is there.
    let id = s.acquire_lease("run").await.unwrap();
    s.append("run", "{\"b\":1}\n".into()).await.unwrap();
    s.release("run", Some(id)).await.unwrap();
    assert_eq!(store(&bucket).load("run").await.unwrap(), vec!["{}", "{\"b\":1}"]);
  }

  #[tokio::test]
  async fn without_conditional_puts_acquire_refuses_and_writes_nothing() {
    let bucket: Arc<Bucket> = Arc::default();
    let s = ObjectStore::new(ObjectStoreOptions::default(), Arc::new(Fake(bucket.clone()))).unwrap();
    let e = s.acquire_lease("run").await.unwrap_err();
    assert_eq!(e.code, Code::DurableObjectConditionalPutRequired);
    assert!(e
      .message
      .starts_with("cave_durable_object_conditional_put_required: "));
    assert!(bucket.keys().is_empty());
    // Declared, but the storage refuses conditional puts: the lease is never created.
    let refusing = Arc::new(Bucket {
      refuse_conditional: true,
      ..Default::default()
    });
    assert_eq!(
      store(&refusing).acquire_lease("run").await.unwrap_err().code,
      Code::DurableRunLocked
    );
    assert!(refusing.keys().is_empty());
    let e = ObjectStore::new(
      ObjectStoreOptions {
        lease_ttl_ms: Some(2_999.0),
        ..Default::default()
      },
      Arc::new(Fake(bucket.clone())),
    )
    .err()
    .unwrap();
    assert_eq!(e.code, Code::DurableObjectLeaseTtlInvalid);
  }

  #[tokio::test]
  async fn leases_are_exclusive_expired_ones_taken_over_by_the_next_generation() {
    let bucket: Arc<Bucket> = Arc::default();
    let (s1, s2) = (store(&bucket), store(&bucket));
    let id = s1.acquire_lease("run").await.unwrap();
    assert_eq!(
      s2.acquire_lease("run").await.unwrap_err().code,
      Code::DurableRunLocked
    );
    assert_eq!(
      s1.acquire_lease("run").await.unwrap_err().code,
      Code::DurableRunLocked,
      "also for its holder"
    );
    let first = format!("{L}000000000001");
    assert_eq!(
      bucket.json(&first)["owner"].as_str().unwrap().split(':').next(),
      Some("run")
    );
    // Expired (its holder stopped renewing): the next acquirer creates generation 2.
    bucket.objects.lock().unwrap().insert(
      first.clone(),
      json!({"owner": "run:x", "expiresAt": 0}).to_string().into_bytes(),
    );
    let id2 = s2.acquire_lease("run").await.unwrap();
    assert_eq!(bucket.keys(), vec![first.clone(), format!("{L}000000000002")]);
    // The old holder has lost it: appends refuse, and keep refusing.
    let e = s1.append("run", "{}\n".into()).await.unwrap_err();
    assert_eq!(e.code, Code::DurableRunLockLost);
    assert_eq!(
      e.message,
      "cave_durable_run_lock_lost: run \"run\" is no longer held by this process"
    );
    assert_eq!(
      s1.append("run", "{}\n".into()).await.unwrap_err().code,
      Code::DurableRunLockLost
    );
    assert!(
      store(&bucket).load("run").await.unwrap().is_empty(),
      "nothing written by the lost holder"
    );
    // Its release leaves the new generation alone.
    s1.release("run", Some(id)).await.unwrap();
    assert!(
      bucket.json(&format!("{L}000000000002"))["expiresAt"]
        .as_u64()
        .unwrap()
        > 0
    );
    s2.append("run", "{}\n".into()).await.unwrap();
    // Release writes expiresAt 0; the next acquire takes generation 3.
    s2.release("run", Some(id2)).await.unwrap();
    assert_eq!(bucket.json(&format!("{L}000000000002"))["expiresAt"], 0);
    s1.acquire_lease("run").await.unwrap();
    assert!(bucket.keys().contains(&format!("{L}000000000003")));
    s1.append("run", "{}\n".into()).await.unwrap();
  }

  #[tokio::test]
  async fn an_unreadable_lease_counts_as_held_and_a_non_numeric_generation_is_invalid() {
    let bucket: Arc<Bucket> = Arc::default();
    bucket
      .objects
      .lock()
      .unwrap()
      .insert(format!("{L}000000000001"), b"garbage".to_vec());
    let e = store(&bucket).acquire_lease("run").await.unwrap_err();
    assert_eq!(e.code, Code::DurableRunLocked);
    assert!(e
      .message
      .starts_with("cave_durable_run_locked: run \"run\" is held by another live process\nhint: "));
    bucket
      .objects
      .lock()
      .unwrap()
      .insert(format!("{L}latest"), b"{}".to_vec());
    assert_eq!(
      store(&bucket).acquire_lease("run").await.unwrap_err().code,
      Code::DurableObjectLeaseInvalid
    );
  }

  #[tokio::test]
  async fn a_lock_free_writer_interleaved_with_the_holder_never_overwrites_a_chunk() {
    let bucket: Arc<Bucket> = Arc::default();
    let (holder, canceller) = (store(&bucket), store(&bucket));
    holder.acquire_lease("run").await.unwrap();
    holder.append("run", "{\"n\":1}\n".into()).await.unwrap();
    canceller
      .append("run", "{\"cancel\":true}\n".into())
      .await
      .unwrap();
    holder.append("run", "{\"n\":2}\n".into()).await.unwrap();
    let chunks: Vec<String> = bucket.keys().into_iter().filter(|k| k.starts_with(J)).collect();
    assert_eq!(chunks.len(), 3);
    assert_eq!(
      holder.load("run").await.unwrap(),
      vec!["{\"n\":1}", "{\"cancel\":true}", "{\"n\":2}"]
    );
  }

  #[tokio::test]
  async fn an_append_that_cannot_claim_a_chunk_in_eight_tries_is_a_conflict() {
    let bucket = Arc::new(Bucket {
      refuse_conditional: true,
      ..Default::default()
    });
    let e = store(&bucket).append("run", "{}\n".into()).await.unwrap_err();
    assert_eq!(e.code, Code::DurableAppendConflict);
    assert_eq!(bucket.puts.lock().unwrap().len(), 8);
  }

  #[tokio::test]
  async fn the_append_that_would_cross_256_mib_is_refused() {
    let bucket: Arc<Bucket> = Arc::default();
    let mut big = vec![b'x'; DURABLE_MAX_JOURNAL_BYTES - 10];
    *big.last_mut().unwrap() = b'\n';
    bucket
      .objects
      .lock()
      .unwrap()
      .insert(format!("{J}000000000001"), big);
    let s = store(&bucket);
    let e = s.append("run", "0123456789\n".into()).await.unwrap_err();
    assert_eq!(e.code, Code::DurableJournalLimit);
    assert_eq!(bucket.keys().len(), 1, "nothing written");
    s.append("run", "012345678".into()).await.unwrap();
  }

  #[tokio::test(start_paused = true)]
  async fn the_holder_renews_its_own_key_and_stops_once_it_lost_it() {
    let bucket: Arc<Bucket> = Arc::default();
    let s = store(&bucket);
    s.acquire_lease("run").await.unwrap();
    let renewals = || {
      bucket
        .puts
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, m)| k == &format!("{L}000000000001") && m.is_none())
        .count()
    };
    tokio::time::sleep(Duration::from_millis(25_000)).await;
    assert_eq!(renewals(), 2, "every ttl/3");
    // Another generation appears (a takeover): the next renewal finds it and stops.
    bucket.objects.lock().unwrap().insert(
      format!("{L}000000000002"),
      json!({"owner": "x", "expiresAt": u64::MAX / 2})
        .to_string()
        .into_bytes(),
    );
    tokio::time::sleep(Duration::from_millis(10_000)).await;
    assert_eq!(
      s.append("run", "{}\n".into()).await.unwrap_err().code,
      Code::DurableRunLockLost
    );
    tokio::time::sleep(Duration::from_millis(60_000)).await;
    assert_eq!(renewals(), 2);
  }
}
