//! `HttpDurableStore`: the journal kept by a server, over the reference's wire contract. Every
//! request carries `Authorization: Bearer <token>`:
//!
//! | request | answer |
//! |---|---|
//! | `GET {base}/runs` | `{"runIds":[…]}` |
//! | `GET {base}/runs/{id}/journal` | the raw text, or 404 for no journal |
//! | `POST {base}/runs/{id}/journal` `{data, lock?}` | 204 once the bytes are durable |
//! | `POST {base}/runs/{id}/lock` `{ttlMs}` | 200 `{token, expiresAt}`, 409 when held |
//! | `POST {base}/runs/{id}/lock/renew` `{token, ttlMs}` | 204, 409 when the lease was lost |
//! | `DELETE {base}/runs/{id}/lock` `{token}` | 204 |
//!
//! The lease is renewed every third of its TTL; a failed renewal poisons the run's appends with
//! `cave_durable_http_lock_lost`. An append carries the lease's token as `lock`; a 409 to it
//! means another process holds the run now (`cave_durable_run_lock_lost`, also sticky). Appends
//! are never retried. The transport (the host's `fetch`)
//! is a trait; every request is bounded by `requestTimeoutMs` here, and dropping a request
//! aborts it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::lease::{lease_ttl, lock_lost, LeaseBook, LeaseEngine, Leased};
use super::store::{journal_limit, locked_error, remote_journal_lines};
use super::{valid_run_id, DurableError};
use crate::code::Code;
use crate::exec::BoxFuture;
use crate::limits::{
  DURABLE_HTTP_LIST_MAX_BYTES, DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES, DURABLE_HTTP_REQUEST_TIMEOUT_DEFAULT_MS,
  DURABLE_HTTP_REQUEST_TIMEOUT_MAX_MS, DURABLE_MAX_JOURNAL_BYTES,
};

/// One request of the store. `max_bytes`: the transport reads at most this much of the body
/// (and says so with `truncated`).
#[derive(Debug, Clone)]
pub struct HttpRequest {
  pub method: &'static str,
  pub url: String,
  pub headers: Vec<(String, String)>,
  pub body: Option<String>,
  pub max_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct HttpResponse {
  pub status: u16,
  pub body: Vec<u8>,
  /// The body went on past `max_bytes`.
  pub truncated: bool,
}

/// How requests leave: the host's `fetch`. `Err` is a transport failure (no answer); dropping
/// the future must abort the request.
pub trait HttpTransport: Send + Sync {
  fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, String>>;
}

/// `HttpDurableStoreOptions` (the transport aside).
#[derive(Debug, Clone, Default)]
pub struct HttpStoreOptions {
  pub url: Option<String>,
  pub token: Option<String>,
  pub lock_ttl_ms: Option<f64>,
  pub request_timeout_ms: Option<f64>,
}

#[derive(Clone)]
struct Lease {
  token: String,
}

/// `HttpDurableStore`: [`Leased`] over the HTTP engine.
pub type HttpStore = Leased<HttpEngine>;

pub struct HttpEngine {
  base: String,
  token: String,
  ttl_ms: u64,
  timeout: Duration,
  transport: Arc<dyn HttpTransport>,
  book: Arc<LeaseBook<Lease>>,
}

/// `scheme://host[:port]/path` → (lower-case scheme, lower-case host). Only what the https rule
/// needs; anything else is not a URL this store can put paths after.
fn scheme_and_host(url: &str) -> Option<(String, String)> {
  let (scheme, rest) = url.split_once("://")?;
  if scheme.is_empty()
    || !scheme
      .bytes()
      .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
  {
    return None;
  }
  // A `\` is a `/` to WHATWG URL parsers (Node's fetch): `http://evil\@localhost/` goes to
  // `evil`. Refused, so the host judged here is the host the token is sent to.
  if url.contains(['?', '#', '\\']) || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
    return None;
  }
  let authority = rest.split('/').next().unwrap_or_default();
  let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
  let host = if let Some(v6) = host_port.strip_prefix('[') {
    format!("[{}]", v6.split(']').next()?)
  } else {
    let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
    if !port.bytes().all(|b| b.is_ascii_digit()) {
      return None;
    }
    host.to_string()
  };
  if host.is_empty() {
    return None;
  }
  Some((scheme.to_ascii_lowercase(), host.to_ascii_lowercase()))
}

impl Leased<HttpEngine> {
  /// Validates the options in the reference's terms: `https:` unless the host is `localhost` or
  /// `127.0.0.1` (`cave_durable_http_insecure`), a token (`_token_required`), a lock TTL of at
  /// least 3 s (`_lock_ttl_invalid`); knap also refuses what is not a URL (`_url_invalid`) and a
  /// request timeout that is not a positive integer of ms (`_request_timeout_invalid`).
  pub fn new(options: HttpStoreOptions, transport: Arc<dyn HttpTransport>) -> Result<Self, DurableError> {
    let url = options.url.unwrap_or_default();
    let base = url.trim_end_matches('/').to_string();
    let Some((scheme, host)) = scheme_and_host(&base) else {
      return Err(DurableError::coded(
        Code::DurableHttpUrlInvalid,
        format!(
          "url must be an http(s) URL without query or fragment, got {}",
          json!(url)
        ),
      ));
    };
    let local = host == "localhost" || host == "127.0.0.1";
    if !(scheme == "https" || (scheme == "http" && local)) {
      return Err(DurableError::coded(
        Code::DurableHttpInsecure,
        "the journal server must be https: unless its host is localhost or 127.0.0.1 (the journal holds message content and the token would travel in the clear)",
      ));
    }
    let token = options.token.unwrap_or_default();
    if token.is_empty() {
      return Err(DurableError::coded(
        Code::DurableHttpTokenRequired,
        "HttpDurableStore needs the journal server's bearer token",
      ));
    }
    if token.chars().any(|c| c.is_control()) {
      return Err(DurableError::coded(
        Code::DurableHttpTokenRequired,
        "the token must not contain control characters (it goes in an Authorization header)",
      ));
    }
    let ttl_ms = lease_ttl(options.lock_ttl_ms, Code::DurableHttpLockTtlInvalid, "lockTtlMs")?;
    let timeout_ms = match options.request_timeout_ms {
      None => DURABLE_HTTP_REQUEST_TIMEOUT_DEFAULT_MS,
      Some(v)
        if v.is_finite()
          && v.fract() == 0.0
          && v >= 1.0
          && v <= DURABLE_HTTP_REQUEST_TIMEOUT_MAX_MS as f64 =>
      {
        v as u64
      }
      Some(_) => {
        return Err(DurableError::coded(
          Code::DurableHttpRequestTimeoutInvalid,
          format!("requestTimeoutMs must be an integer from 1 to {DURABLE_HTTP_REQUEST_TIMEOUT_MAX_MS}"),
        ))
      }
    };
    Ok(Leased::over(HttpEngine {
      base,
      token,
      ttl_ms,
      timeout: Duration::from_millis(timeout_ms),
      transport,
      book: Arc::default(),
    }))
  }
}

impl HttpEngine {
  fn url(&self, path: &str) -> String {
    format!("{}{path}", self.base)
  }

  async fn send(
    &self,
    method: &'static str,
    path: &str,
    body: Option<Value>,
    max_bytes: usize,
  ) -> Result<HttpResponse, String> {
    let mut headers = vec![("authorization".to_string(), format!("Bearer {}", self.token))];
    if body.is_some() {
      headers.push(("content-type".to_string(), "application/json".to_string()));
    }
    let request = HttpRequest {
      method,
      url: self.url(path),
      headers,
      body: body.map(|b| b.to_string()),
      max_bytes,
    };
    match tokio::time::timeout(self.timeout, self.transport.send(request)).await {
      Ok(r) => r,
      Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
    }
  }

  /// `<code>: <METHOD> <url> answered HTTP <status>` / `… failed: <why>`.
  fn failure(&self, code: Code, method: &str, path: &str, what: Result<u16, String>) -> DurableError {
    let url = self.url(path);
    match what {
      Ok(status) => DurableError::coded(code, format!("{method} {url} answered HTTP {status}")),
      Err(why) => DurableError::coded(code, format!("{method} {url} failed: {why}")),
    }
  }

  async fn renew(&self, run_id: &str, token: &str) -> Result<(), DurableError> {
    let path = format!("/runs/{run_id}/lock/renew");
    let lost = |why: String| {
      DurableError::coded(
        Code::DurableHttpLockLost,
        format!("the lease of run \"{run_id}\" could not be renewed ({why}); appends are refused"),
      )
    };
    let r = self
      .send(
        "POST",
        &path,
        Some(json!({ "token": token, "ttlMs": self.ttl_ms })),
        DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES,
      )
      .await
      .map_err(lost)?;
    match r.status {
      204 => Ok(()),
      s => Err(lost(format!("POST {} answered HTTP {s}", self.url(&path)))),
    }
  }
}

impl LeaseEngine for HttpEngine {
  async fn load(&self, run_id: &str) -> Result<Vec<String>, DurableError> {
    let path = format!("/runs/{run_id}/journal");
    let code = Code::DurableHttpLoadFailed;
    let r = self
      .send("GET", &path, None, DURABLE_MAX_JOURNAL_BYTES)
      .await
      .map_err(|e| self.failure(code.clone(), "GET", &path, Err(e)))?;
    match r.status {
      404 => Ok(Vec::new()),
      200 if r.truncated => Err(journal_limit(false)),
      200 => remote_journal_lines(r.body, &format!("at {}", self.url(&path))),
      s => Err(self.failure(code, "GET", &path, Ok(s))),
    }
  }

  async fn append(&self, run_id: &str, data: String) -> Result<(), DurableError> {
    if let Some(lost) = self.book.lost(run_id) {
      return Err(lost);
    }
    let mut body = json!({ "data": data });
    let held = self.book.get(run_id);
    if let Some((_, lease)) = &held {
      body["lock"] = Value::String(lease.token.clone());
    }
    let path = format!("/runs/{run_id}/journal");
    let code = Code::DurableHttpAppendFailed;
    // Never retried: a request that failed may still have landed.
    let r = self
      .send("POST", &path, Some(body), DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES)
      .await
      .map_err(|e| self.failure(code.clone(), "POST", &path, Err(e)))?;
    match (r.status, held) {
      (204, _) => Ok(()),
      // The server refused the lease this append carried: another process holds the run now.
      (409, Some((id, _))) => {
        self.book.lose(run_id, id, lock_lost(run_id));
        Err(lock_lost(run_id))
      }
      (s, _) => Err(self.failure(code, "POST", &path, Ok(s))),
    }
  }

  async fn acquire(self: Arc<Self>, run_id: &str) -> Result<u64, DurableError> {
    let path = format!("/runs/{run_id}/lock");
    let code = Code::DurableHttpLockFailed;
    let r = self
      .send(
        "POST",
        &path,
        Some(json!({ "ttlMs": self.ttl_ms })),
        DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES,
      )
      .await
      .map_err(|e| self.failure(code.clone(), "POST", &path, Err(e)))?;
    match r.status {
      200 => {}
      409 => return Err(locked_error(run_id)),
      s => return Err(self.failure(code, "POST", &path, Ok(s))),
    }
    let invalid = |why: &str| {
      DurableError::coded(
        Code::DurableHttpLockResponseInvalid,
        format!("POST {} answered 200 without {why}", self.url(&path)),
      )
    };
    if r.truncated {
      return Err(invalid(&format!("a lock response of at most {} KiB", DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES / 1024)));
    }
    let v: Value = serde_json::from_slice(&r.body).map_err(|_| invalid("a JSON body"))?;
    let token = match v.get("token") {
      Some(Value::String(t)) if !t.is_empty() => t.clone(),
      _ => return Err(invalid("a non-empty string token")),
    };
    let expires_ok = match v.get("expiresAt") {
      Some(Value::Number(n)) => n.as_f64().is_some_and(f64::is_finite),
      Some(Value::String(s)) => !s.is_empty(),
      _ => false,
    };
    if !expires_ok {
      return Err(invalid("expiresAt"));
    }
    let renewing = token.clone();
    let id = self.book.hold_for(&self, run_id, Lease { token }, self.ttl_ms, move |engine, run, _| {
      let token = renewing.clone();
      async move { engine.renew(&run, &token).await }
    });
    Ok(id)
  }

  async fn release(&self, run_id: &str, id: Option<u64>) -> Result<(), DurableError> {
    let Some(lease) = self.book.take(run_id, id) else {
      return Ok(());
    };
    let path = format!("/runs/{run_id}/lock");
    let code = Code::DurableHttpLockFailed;
    let r = self
      .send(
        "DELETE",
        &path,
        Some(json!({ "token": lease.token })),
        DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES,
      )
      .await
      .map_err(|e| self.failure(code.clone(), "DELETE", &path, Err(e)))?;
    match r.status {
      204 => Ok(()),
      s => Err(self.failure(code, "DELETE", &path, Ok(s))),
    }
  }

  async fn list(&self) -> Result<Vec<String>, DurableError> {
    let path = "/runs";
    let r = self
      .send("GET", path, None, DURABLE_HTTP_LIST_MAX_BYTES)
      .await
      .map_err(|e| self.failure(Code::DurableHttpListFailed, "GET", path, Err(e)))?;
    if r.status != 200 {
      return Err(self.failure(Code::DurableHttpListFailed, "GET", path, Ok(r.status)));
    }
    let invalid = |why: &str| {
      DurableError::coded(
        Code::DurableHttpListInvalid,
        format!(
          "GET {} answered 200 with {why}; expected {{\"runIds\":[…]}}",
          self.url(path)
        ),
      )
    };
    if r.truncated {
      return Err(invalid(&format!("a body over {} MiB", DURABLE_HTTP_LIST_MAX_BYTES >> 20)));
    }
    let v: Value = serde_json::from_slice(&r.body).map_err(|_| invalid("a body that is not JSON"))?;
    let Some(ids) = v.get("runIds").and_then(Value::as_array) else {
      return Err(invalid("no runIds array"));
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
      let Some(id) = id.as_str() else {
        return Err(invalid("a runId that is not a string"));
      };
      // As the SQL store: only ids a run can have.
      if valid_run_id(id) {
        out.push(id.to_string());
      }
    }
    out.sort();
    out.dedup();
    Ok(out)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::collections::HashMap;
  use std::sync::Mutex;

  /// (method, path, body, headers) of one request.
  type Logged = (String, String, Option<String>, Vec<(String, String)>);

  /// A journal server in memory, speaking the wire contract; `script` overrides the answer to
  /// a request (`"METHOD path"` → status) and `hang` makes matching requests never answer.
  #[derive(Default)]
  struct Server {
    journals: Mutex<HashMap<String, Vec<u8>>>,
    locks: Mutex<HashMap<String, String>>,
    log: Mutex<Vec<Logged>>,
    script: Mutex<HashMap<String, (u16, Vec<u8>)>>,
    hang: Mutex<Option<String>>,
    tokens: std::sync::atomic::AtomicU64,
  }

  struct Fake(Arc<Server>);

  impl HttpTransport for Fake {
    fn send(&self, r: HttpRequest) -> BoxFuture<Result<HttpResponse, String>> {
      let s = self.0.clone();
      Box::pin(async move {
        let path = r
          .url
          .strip_prefix("http://127.0.0.1:9/base")
          .expect("base")
          .to_string();
        let route = format!("{} {path}", r.method);
        s.log.lock().unwrap().push((
          r.method.to_string(),
          path.clone(),
          r.body.clone(),
          r.headers.clone(),
        ));
        if s.hang.lock().unwrap().as_deref() == Some(route.as_str()) {
          std::future::pending::<()>().await;
        }
        if let Some((status, body)) = s.script.lock().unwrap().get(&route).cloned() {
          return Ok(HttpResponse {
            status,
            body,
            truncated: false,
          });
        }
        let body: Value = r
          .body
          .as_deref()
          .map(|b| serde_json::from_str(b).unwrap())
          .unwrap_or(Value::Null);
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let answer = |status: u16, body: Vec<u8>| {
          Ok(HttpResponse {
            status,
            truncated: body.len() > r.max_bytes,
            body,
          })
        };
        match (r.method, parts.as_slice()) {
          ("GET", ["runs"]) => {
            let ids: Vec<String> = s.journals.lock().unwrap().keys().cloned().collect();
            answer(200, json!({ "runIds": ids }).to_string().into_bytes())
          }
          ("GET", ["runs", id, "journal"]) => match s.journals.lock().unwrap().get(*id) {
            Some(text) => answer(200, text.clone()),
            None => answer(404, Vec::new()),
          },
          ("POST", ["runs", id, "journal"]) => {
            let holder = s.locks.lock().unwrap().get(*id).cloned();
            if let Some(lock) = body.get("lock").and_then(Value::as_str) {
              if holder.as_deref() != Some(lock) {
                return answer(409, Vec::new());
              }
            }
            s.journals
              .lock()
              .unwrap()
              .entry(id.to_string())
              .or_default()
              .extend_from_slice(body["data"].as_str().unwrap().as_bytes());
            answer(204, Vec::new())
          }
          ("POST", ["runs", id, "lock"]) => {
            let mut locks = s.locks.lock().unwrap();
            if locks.contains_key(*id) {
              return answer(409, Vec::new());
            }
            let token = format!("t{}", s.tokens.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            locks.insert(id.to_string(), token.clone());
            answer(
              200,
              json!({ "token": token, "expiresAt": 1 }).to_string().into_bytes(),
            )
          }
          ("POST", ["runs", id, "lock", "renew"]) => {
            let ok = s.locks.lock().unwrap().get(*id).map(String::as_str) == body["token"].as_str();
            answer(if ok { 204 } else { 409 }, Vec::new())
          }
          ("DELETE", ["runs", id, "lock"]) => {
            let mut locks = s.locks.lock().unwrap();
            if locks.get(*id).map(String::as_str) == body["token"].as_str() {
              locks.remove(*id);
            }
            answer(204, Vec::new())
          }
          _ => answer(404, Vec::new()),
        }
      })
    }
  }

  fn options() -> HttpStoreOptions {
    HttpStoreOptions {
      url: Some("http://127.0.0.1:9/base/".into()),
      token: Some("secret-token".into()),
      ..Default::default()
    }
  }

  fn store(server: &Arc<Server>) -> HttpStore {
    HttpStore::new(options(), Arc::new(Fake(server.clone()))).unwrap()
  }

  fn code_of(o: HttpStoreOptions) -> String {
    match HttpStore::new(o, Arc::new(Fake(Arc::default()))) {
      Ok(_) => "ok".into(),
      Err(e) => {
        assert!(e.message.starts_with(e.code.as_str()), "{}", e.message);
        e.code.to_string()
      }
    }
  }

  #[test]
  fn options_are_validated_with_the_references_codes() {
    let with_url = |u: &str| HttpStoreOptions {
      url: Some(u.into()),
      ..options()
    };
    assert_eq!(code_of(with_url("https://journal.example.com/v1")), "ok");
    assert_eq!(code_of(with_url("http://localhost:8080")), "ok");
    assert_eq!(code_of(with_url("HTTP://LOCALHOST")), "ok");
    assert_eq!(code_of(with_url("http://127.0.0.1")), "ok");
    for insecure in [
      "http://journal.example.com",
      "http://127.0.0.2:80",
      "http://[::1]:80",
      "http://localhost.evil.com",
      "ftp://localhost/x",
    ] {
      assert_eq!(
        code_of(with_url(insecure)),
        "cave_durable_http_insecure",
        "{insecure}"
      );
    }
    for bad in [
      "",
      "journal.example.com",
      "https://",
      "https://h/x?a=1",
      "https://h/#f",
      "https://h:port/",
      "http://evil.example\\@localhost/",
      "https://h\\x",
    ] {
      assert_eq!(code_of(with_url(bad)), "cave_durable_http_url_invalid", "{bad}");
    }
    assert_eq!(
      code_of(HttpStoreOptions {
        url: None,
        ..options()
      }),
      "cave_durable_http_url_invalid"
    );
    assert_eq!(
      code_of(HttpStoreOptions {
        token: None,
        ..options()
      }),
      "cave_durable_http_token_required"
    );
    assert_eq!(
      code_of(HttpStoreOptions {
        token: Some(String::new()),
        ..options()
      }),
      "cave_durable_http_token_required"
    );
    assert_eq!(
      code_of(HttpStoreOptions {
        token: Some("a\nb".into()),
        ..options()
      }),
      "cave_durable_http_token_required"
    );
    assert_eq!(
      code_of(HttpStoreOptions {
        lock_ttl_ms: Some(2_999.0),
        ..options()
      }),
      "cave_durable_http_lock_ttl_invalid"
    );
    assert_eq!(
      code_of(HttpStoreOptions {
        lock_ttl_ms: Some(3_000.0),
        ..options()
      }),
      "ok"
    );
    for bad in [0.0, 1.5, f64::NAN, -5.0] {
      assert_eq!(
        code_of(HttpStoreOptions {
          request_timeout_ms: Some(bad),
          ..options()
        }),
        "cave_durable_http_request_timeout_invalid"
      );
    }
  }

  #[tokio::test]
  async fn round_trip_list_and_every_request_carries_the_bearer_token() {
    let server: Arc<Server> = Arc::default();
    let s = store(&server);
    assert_eq!(s.load("never").await.unwrap(), Vec::<String>::new());
    s.append("r-1", "{\"a\":1}\n".into()).await.unwrap();
    s.append("r-2", "{\"b\":1}\n".into()).await.unwrap();
    s.append("r-1", "{\"a\":2}\n{\"a\":3}\n".into()).await.unwrap();
    assert_eq!(
      s.load("r-1").await.unwrap(),
      vec!["{\"a\":1}", "{\"a\":2}", "{\"a\":3}"]
    );
    assert_eq!(s.list().await.unwrap(), vec!["r-1", "r-2"]);
    let log = server.log.lock().unwrap().clone();
    assert!(log
      .iter()
      .all(|(_, _, _, h)| h.contains(&("authorization".into(), "Bearer secret-token".into()))));
    let (_, path, body, _) = &log[1];
    assert_eq!(path, "/runs/r-1/journal");
    assert_eq!(
      body.as_deref(),
      Some("{\"data\":\"{\\\"a\\\":1}\\n\"}"),
      "no lock field without a lease"
    );
    assert_eq!(
      s.load("bad/id").await.unwrap_err().code,
      Code::DurableRunIdInvalid
    );
  }

  #[tokio::test]
  async fn failures_map_to_the_http_codes() {
    let server: Arc<Server> = Arc::default();
    let s = store(&server);
    let set = |route: &str, status: u16, body: &str| {
      server
        .script
        .lock()
        .unwrap()
        .insert(route.into(), (status, body.as_bytes().to_vec()));
    };
    set("GET /runs/a/journal", 500, "");
    let e = s.load("a").await.unwrap_err();
    assert_eq!(e.code, Code::DurableHttpLoadFailed);
    assert_eq!(
      e.message,
      "cave_durable_http_load_failed: GET http://127.0.0.1:9/base/runs/a/journal answered HTTP 500"
    );
    set("GET /runs/b/journal", 200, "{\"v\":2}\n{\"v\":2,");
    assert_eq!(s.load("b").await.unwrap_err().code, Code::DurableJournalCorrupt);
    set("POST /runs/c/journal", 200, "");
    assert_eq!(
      s.append("c", "x\n".into()).await.unwrap_err().code,
      Code::DurableHttpAppendFailed
    );
    set("POST /runs/d/lock", 503, "");
    assert_eq!(
      s.acquire_lease("d").await.unwrap_err().code,
      Code::DurableHttpLockFailed
    );
    for body in [
      "",
      "[]",
      "{\"token\":\"\",\"expiresAt\":1}",
      "{\"token\":\"t\"}",
      "{\"token\":7,\"expiresAt\":1}",
    ] {
      set("POST /runs/e/lock", 200, body);
      assert_eq!(
        s.acquire_lease("e").await.unwrap_err().code,
        Code::DurableHttpLockResponseInvalid,
        "{body}"
      );
    }
    set("GET /runs", 502, "");
    assert_eq!(s.list().await.unwrap_err().code, Code::DurableHttpListFailed);
    for body in ["nope", "{}", "{\"runIds\":\"a\"}", "{\"runIds\":[1]}"] {
      set("GET /runs", 200, body);
      assert_eq!(
        s.list().await.unwrap_err().code,
        Code::DurableHttpListInvalid,
        "{body}"
      );
    }
    set("GET /runs", 200, "{\"runIds\":[\"b\",\"a\",\"../x\",\"a\"]}");
    assert_eq!(s.list().await.unwrap(), vec!["a", "b"]);
  }

  #[tokio::test]
  async fn appends_are_never_retried_and_a_request_past_the_timeout_fails() {
    let server: Arc<Server> = Arc::default();
    let s = HttpStore::new(
      HttpStoreOptions {
        request_timeout_ms: Some(50.0),
        ..options()
      },
      Arc::new(Fake(server.clone())),
    )
    .unwrap();
    *server.hang.lock().unwrap() = Some("POST /runs/slow/journal".into());
    let e = s.append("slow", "{}\n".into()).await.unwrap_err();
    assert_eq!(e.code, Code::DurableHttpAppendFailed);
    assert!(
      e.message.ends_with("failed: no answer within 50 ms"),
      "{}",
      e.message
    );
    let posts = server
      .log
      .lock()
      .unwrap()
      .iter()
      .filter(|(m, p, ..)| m == "POST" && p == "/runs/slow/journal")
      .count();
    assert_eq!(posts, 1);
  }

  #[tokio::test(start_paused = true)]
  async fn the_lease_is_exclusive_renewed_carried_on_appends_and_a_lost_one_poisons_appends() {
    let server: Arc<Server> = Arc::default();
    let (s1, s2) = (store(&server), store(&server));
    let id = s1.acquire_lease("run").await.unwrap();
    let e = s2.acquire_lease("run").await.unwrap_err();
    assert_eq!(e.code, Code::DurableRunLocked);
    s1.append("run", "{}\n".into()).await.unwrap();
    let body = server.log.lock().unwrap().last().unwrap().2.clone().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["lock"], "t0");
    // Renewed every ttl/3 = 10 s, with the token and the TTL.
    tokio::time::sleep(Duration::from_millis(25_000)).await;
    let renewals: Vec<String> = server
      .log
      .lock()
      .unwrap()
      .iter()
      .filter(|(_, p, ..)| p == "/runs/run/lock/renew")
      .map(|r| r.2.clone().unwrap())
      .collect();
    assert_eq!(renewals, vec!["{\"token\":\"t0\",\"ttlMs\":30000}"; 2]);
    // The server gives the lease to someone else: the next renewal fails, appends are refused.
    server.locks.lock().unwrap().insert("run".into(), "other".into());
    tokio::time::sleep(Duration::from_millis(10_000)).await;
    let e = s1.append("run", "{}\n".into()).await.unwrap_err();
    assert_eq!(e.code, Code::DurableHttpLockLost);
    assert!(e.message.contains("answered HTTP 409"), "{}", e.message);
    assert_eq!(
      s1.append("run", "{}\n".into()).await.unwrap_err().code,
      Code::DurableHttpLockLost
    );
    let before = server.log.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(60_000)).await;
    assert_eq!(
      server.log.lock().unwrap().len(),
      before,
      "renewals stopped, refused appends sent nothing"
    );
    // Releasing a lost lease sends nothing; a new acquire clears the poison.
    s1.release("run", Some(id)).await.unwrap();
    server.locks.lock().unwrap().clear();
    let id2 = s1.acquire_lease("run").await.unwrap();
    s1.append("run", "{}\n".into()).await.unwrap();
    // A stale release id gives nothing back; the right one does.
    s1.release("run", Some(id)).await.unwrap();
    assert!(server.locks.lock().unwrap().contains_key("run"));
    s1.release("run", Some(id2)).await.unwrap();
    assert!(!server.locks.lock().unwrap().contains_key("run"));
    s2.acquire_lease("run").await.unwrap();
  }

  #[tokio::test]
  async fn an_append_whose_lease_the_server_refuses_has_lost_the_run() {
    let server: Arc<Server> = Arc::default();
    let (s1, s2) = (store(&server), store(&server));
    s1.acquire_lease("run").await.unwrap();
    s1.append("run", "{\"a\":1}\n".into()).await.unwrap();
    // The lease lapsed at the server and another process took the run over.
    server.locks.lock().unwrap().clear();
    s2.acquire_lease("run").await.unwrap();
    let e = s1.append("run", "{\"a\":2}\n".into()).await.unwrap_err();
    assert_eq!(
      e.message,
      "cave_durable_run_lock_lost: run \"run\" is no longer held by this process"
    );
    let posts = server.log.lock().unwrap().len();
    assert_eq!(
      s1.append("run", "{}\n".into()).await.unwrap_err().code,
      Code::DurableRunLockLost
    );
    assert_eq!(
      server.log.lock().unwrap().len(),
      posts,
      "refused without a request"
    );
    assert_eq!(s2.load("run").await.unwrap(), vec!["{\"a\":1}"]);
    // A lock-free writer (a cancel request) still appends.
    store(&server).append("run", "{\"c\":1}\n".into()).await.unwrap();
  }
}
