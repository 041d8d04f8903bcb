//! `NativeLeasedStore`: the core's lease-based durable stores (HTTP, object storage) as one JS
//! handle. Their transports are the host's: `fetch` (one request per call, aborted by id when
//! Rust drops it) and an `ObjectStorage` adapter's `get`/`put`/`list`, as typed weak
//! threadsafe functions whose Promises Rust awaits without blocking the JS thread. The JS side
//! never rejects: a thrown error arrives as `ok: false` with its message (and `code`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use indexmap::IndexMap;
use knap_core::code::Code;
use knap_core::durable::http_store::{HttpRequest, HttpResponse, HttpStore, HttpStoreOptions, HttpTransport};
use knap_core::durable::lease::LeaseStore;
use knap_core::durable::object_store::{ObjectStorage, ObjectStore, ObjectStoreOptions};
use knap_core::durable::DurableError;
use knap_core::exec::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use crate::durable::{js_error, sync_error};
use crate::execution_backend::AbortOnDrop;
use crate::ErrorCode;

/// A lease id as JS holds it (ids count up from 1, far below 2^53).
fn lease_id(id: Option<f64>) -> Option<u64> {
  id.filter(|i| i.is_finite() && *i >= 0.0).map(|i| i as u64)
}

/// `HttpDurableStore`'s and `ObjectDurableStore`'s engine.
#[napi]
pub struct NativeLeasedStore {
  inner: Arc<dyn LeaseStore>,
  prefix: Option<String>,
}

#[napi]
impl NativeLeasedStore {
  /// Throws the option codes (`cave_durable_http_insecure`, `_token_required`, …).
  #[napi(factory)]
  pub fn http(
    options: BindingHttpStoreOptions,
    request: Arc<JsHttpRequestFn>,
    abort: Arc<JsHttpAbortFn>,
  ) -> napi::Result<Self, ErrorCode> {
    let options = HttpStoreOptions {
      url: options.url,
      token: options.token,
      lock_ttl_ms: options.lock_ttl_ms,
      request_timeout_ms: options.request_timeout_ms,
    };
    let transport = Arc::new(JsFetch {
      request,
      abort,
      next_call: AtomicU32::new(1),
    });
    let store = HttpStore::new(options, transport).map_err(sync_error)?;
    Ok(Self {
      inner: Arc::new(store),
      prefix: None,
    })
  }

  /// Throws `cave_durable_object_lease_ttl_invalid` / `_prefix_invalid`.
  #[napi(factory)]
  pub fn object(
    options: BindingObjectStoreOptions,
    get: Arc<JsObjectFn>,
    put: Arc<JsObjectFn>,
    list: Arc<JsObjectFn>,
  ) -> napi::Result<Self, ErrorCode> {
    let options = ObjectStoreOptions {
      prefix: options.prefix,
      conditional_put: options.conditional_put,
      lease_ttl_ms: options.lease_ttl_ms,
    };
    let storage = Arc::new(JsObjectStorage { get, put, list });
    let store = ObjectStore::new(options, storage).map_err(sync_error)?;
    Ok(Self {
      prefix: Some(store.prefix().to_string()),
      inner: Arc::new(store),
    })
  }

  /// The object store's key prefix (none for the HTTP store).
  #[napi(getter)]
  pub fn prefix(&self) -> Option<String> {
    self.prefix.clone()
  }

  #[napi]
  pub async fn load(&self, run_id: String) -> napi::Result<Vec<String>> {
    self.inner.load(&run_id).await.map_err(js_error)
  }

  #[napi]
  pub async fn append(&self, run_id: String, data: String) -> napi::Result<()> {
    self.inner.append(&run_id, data).await.map_err(js_error)
  }

  /// Takes the lease; resolves to its id, for `release`.
  #[napi]
  pub async fn acquire(&self, run_id: String) -> napi::Result<f64> {
    self
      .inner
      .acquire_lease(&run_id)
      .await
      .map(|id| id as f64)
      .map_err(js_error)
  }

  /// Gives back lease `id` (any lease of the run when absent).
  #[napi]
  pub async fn release(&self, run_id: String, id: Option<f64>) -> napi::Result<()> {
    self.inner.release_lease(&run_id, lease_id(id)).await.map_err(js_error)
  }

  #[napi]
  pub async fn close(&self, run_id: String) -> napi::Result<()> {
    self.inner.close(&run_id).await.map_err(js_error)
  }

  #[napi]
  pub async fn list(&self) -> napi::Result<Vec<String>> {
    match self.inner.list() {
      Some(f) => f.await.map_err(js_error),
      None => Ok(Vec::new()),
    }
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP.

#[napi(object)]
pub struct BindingHttpStoreOptions {
  pub url: Option<String>,
  pub token: Option<String>,
  pub lock_ttl_ms: Option<f64>,
  pub request_timeout_ms: Option<f64>,
}

/// One request for the JS `fetch`: read at most `maxBytes` of the body (then `truncated`).
#[napi(object)]
pub struct BindingHttpCall {
  pub call_id: u32,
  pub method: String,
  pub url: String,
  pub headers: IndexMap<String, String>,
  pub body: Option<String>,
  pub max_bytes: f64,
}

/// `ok: false` when there was no answer (`message` says why).
#[napi(object)]
pub struct BindingHttpReply {
  pub ok: bool,
  pub status: Option<u32>,
  pub body: Option<Buffer>,
  pub truncated: Option<bool>,
  pub message: Option<String>,
}

#[napi]
pub type JsHttpRequestFn =
  ThreadsafeFunction<BindingHttpCall, Promise<BindingHttpReply>, BindingHttpCall, Status, false, true>;
/// `abort(callId)`: aborts that request's `AbortSignal`. Must not throw.
#[napi]
pub type JsHttpAbortFn = ThreadsafeFunction<u32, (), u32, Status, false, true>;

struct JsFetch {
  request: Arc<JsHttpRequestFn>,
  abort: Arc<JsHttpAbortFn>,
  next_call: AtomicU32,
}

impl HttpTransport for JsFetch {
  fn send(&self, request: HttpRequest) -> BoxFuture<std::result::Result<HttpResponse, String>> {
    let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
    let (fetch, abort) = (self.request.clone(), self.abort.clone());
    let call = BindingHttpCall {
      call_id,
      method: request.method.to_string(),
      url: request.url,
      headers: request.headers.into_iter().collect(),
      body: request.body,
      max_bytes: request.max_bytes as f64,
    };
    let max = request.max_bytes;
    Box::pin(async move {
      // Dropped before the answer (the request timed out): the fetch is aborted too.
      let mut guard = AbortOnDrop::new(abort, call_id);
      let reply = match fetch.call_async_catch(call).await {
        Err(e) => Err(e),
        Ok(promise) => promise.await,
      };
      guard.settled();
      let reply = reply.map_err(|e| e.reason.clone())?;
      if !reply.ok {
        return Err(reply.message.unwrap_or_else(|| "fetch failed".into()));
      }
      let status = reply
        .status
        .filter(|s| (100..=999).contains(s))
        .ok_or("fetch gave no HTTP status")?;
      let mut body = reply.body.map(|b| b.to_vec()).unwrap_or_default();
      // The JS side caps its read; held to the cap here too.
      let truncated = reply.truncated == Some(true) || body.len() > max;
      body.truncate(max);
      Ok(HttpResponse {
        status: status as u16,
        body,
        truncated,
      })
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Object storage.

#[napi(object)]
pub struct BindingObjectStoreOptions {
  pub prefix: Option<String>,
  pub conditional_put: bool,
  pub lease_ttl_ms: Option<f64>,
}

#[napi(object)]
pub struct BindingObjectCall {
  pub key: Option<String>,
  pub prefix: Option<String>,
  pub data: Option<Buffer>,
  /// `""`: create only if absent.
  pub if_match: Option<String>,
}

/// How an adapter call settled: `data` (get; absent for a missing object), `written` (put;
/// false when `ifMatch` failed), `keys` (list); or `ok: false` with what it threw.
#[napi(object)]
pub struct BindingObjectReply {
  pub ok: bool,
  pub code: Option<String>,
  pub message: Option<String>,
  pub data: Option<Buffer>,
  pub written: Option<bool>,
  pub keys: Option<Vec<String>>,
}

#[napi]
pub type JsObjectFn =
  ThreadsafeFunction<BindingObjectCall, Promise<BindingObjectReply>, BindingObjectCall, Status, false, true>;

struct JsObjectStorage {
  get: Arc<JsObjectFn>,
  put: Arc<JsObjectFn>,
  list: Arc<JsObjectFn>,
}

async fn object_call(
  f: Arc<JsObjectFn>,
  call: BindingObjectCall,
) -> std::result::Result<BindingObjectReply, DurableError> {
  let reply = match f.call_async_catch(call).await {
    Err(e) => Err(e),
    Ok(promise) => promise.await,
  };
  let reply = reply.map_err(|e| DurableError::new(Code::DurableStoreFailed, e.reason.clone()))?;
  if reply.ok {
    return Ok(reply);
  }
  let message = reply.message.clone().unwrap_or_default();
  // A cave_* code the adapter raised passes through; anything else is a storage failure.
  Err(match reply.code.as_deref().and_then(Code::parse) {
    Some(code) => DurableError::new(code, message),
    None => DurableError::new(Code::DurableStoreFailed, message),
  })
}

impl ObjectStorage for JsObjectStorage {
  fn get(&self, key: String) -> BoxFuture<std::result::Result<Option<Vec<u8>>, DurableError>> {
    let f = self.get.clone();
    Box::pin(async move {
      let call = BindingObjectCall {
        key: Some(key),
        prefix: None,
        data: None,
        if_match: None,
      };
      Ok(object_call(f, call).await?.data.map(|b| b.to_vec()))
    })
  }

  fn put(
    &self,
    key: String,
    data: Vec<u8>,
    if_match: Option<String>,
  ) -> BoxFuture<std::result::Result<bool, DurableError>> {
    let f = self.put.clone();
    Box::pin(async move {
      let call = BindingObjectCall {
        key: Some(key),
        prefix: None,
        data: Some(data.into()),
        if_match,
      };
      Ok(object_call(f, call).await?.written != Some(false))
    })
  }

  fn list(&self, prefix: String) -> BoxFuture<std::result::Result<Vec<String>, DurableError>> {
    let f = self.list.clone();
    Box::pin(async move {
      let call = BindingObjectCall {
        key: None,
        prefix: Some(prefix),
        data: None,
        if_match: None,
      };
      Ok(object_call(f, call).await?.keys.unwrap_or_default())
    })
  }
}
