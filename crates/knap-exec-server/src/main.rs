//! `knap-exec-server`: serves the HTTP execution-backend protocol (`httpExecutionBackend`) for
//! one workspace, so agent tools can run inside a container or on another machine.
//!
//! ```text
//! knap-exec-server --workspace DIR --listen 127.0.0.1:PORT --token-file FILE
//! ```

mod server;

use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use server::{log, Limits, Server};

const USAGE: &str = "usage: knap-exec-server --workspace DIR --listen HOST:PORT (--token-file FILE | KNAP_EXEC_SERVER_TOKEN)
  [--client-workspace DIR]   the client's workspace path (default: --workspace); request paths are under it
  [--max-concurrency N]      /exec calls at once; more get 429 (16)
  [--max-transfers N]        /read and /write calls at once; more wait (4)
  [--max-request-bytes N]    request body limit (67108864)
  [--max-read-bytes N]       largest file /read sends (50331648)
  [--max-output-bytes N]     largest maxOutputBytes of an /exec (16777216)
  [--max-timeout-ms N]       largest timeoutMs of an /exec (600000)";

/// Tokens shorter than this are refused: a bearer token is the only thing between the network
/// and a shell.
const MIN_TOKEN_BYTES: usize = 16;

/// How long a shutdown waits for open calls to be answered.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A line on stdout that never panics (a closed pipe must not take the server down).
fn say(line: &str) {
  use std::io::Write;
  let mut out = std::io::stdout().lock();
  let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn fail(message: &str) -> ! {
  log!("{message}\n{USAGE}");
  std::process::exit(2);
}

struct Config {
  workspace: PathBuf,
  client_workspace: Option<PathBuf>,
  listen: String,
  token: Vec<u8>,
  limits: Limits,
}

fn parse_args() -> Config {
  let mut args = std::env::args().skip(1);
  let (mut workspace, mut client, mut listen, mut token_file) = (None, None, None, None);
  let mut limits = Limits::default();
  while let Some(flag) = args.next() {
    if flag == "--help" || flag == "-h" {
      say(USAGE);
      std::process::exit(0);
    }
    let Some(value) = args.next() else {
      fail(&format!("{flag} needs a value"));
    };
    let number = |v: &str| -> u64 {
      v.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or_else(|| fail(&format!("{flag} must be a positive integer")))
    };
    match flag.as_str() {
      "--workspace" => workspace = Some(PathBuf::from(value)),
      "--client-workspace" => client = Some(PathBuf::from(value)),
      "--listen" => listen = Some(value),
      "--token-file" => token_file = Some(PathBuf::from(value)),
      "--max-concurrency" => limits.max_concurrency = number(&value) as usize,
      "--max-transfers" => limits.max_transfers = number(&value) as usize,
      "--max-request-bytes" => limits.max_request_bytes = number(&value) as usize,
      "--max-read-bytes" => limits.max_read_bytes = number(&value),
      "--max-output-bytes" => limits.max_output_bytes = number(&value) as usize,
      "--max-timeout-ms" => limits.max_timeout_ms = number(&value),
      other => fail(&format!("unknown option {other}")),
    }
  }
  let token = match token_file {
    Some(file) => {
      use std::os::unix::fs::PermissionsExt;
      if std::fs::metadata(&file).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        log!("warning: the token file {} is readable by other users (chmod 600 it)", file.display());
      }
      std::fs::read(&file).unwrap_or_else(|e| fail(&format!("cannot read the token file {}: {e}", file.display())))
    }
    None => std::env::var("KNAP_EXEC_SERVER_TOKEN")
      .map(String::into_bytes)
      .unwrap_or_else(|_| fail("a token is required: --token-file FILE or KNAP_EXEC_SERVER_TOKEN")),
  };
  let token = token.trim_ascii().to_vec();
  if token.len() < MIN_TOKEN_BYTES {
    fail(&format!("the token must be at least {MIN_TOKEN_BYTES} bytes"));
  }
  Config {
    workspace: workspace.unwrap_or_else(|| fail("--workspace is required")),
    client_workspace: client,
    listen: listen.unwrap_or_else(|| fail("--listen is required")),
    token,
    limits,
  }
}

fn main() {
  let config = parse_args();
  let runtime = tokio::runtime::Builder::new_multi_thread()
    .enable_all()
    .build()
    .unwrap_or_else(|e| fail(&format!("cannot start the runtime: {e}")));
  runtime.block_on(serve(config));
}

async fn serve(config: Config) {
  let workspace = knap_core::workspace::absolutize(&config.workspace);
  let client = config.client_workspace.map_or(workspace.clone(), |c| knap_core::workspace::absolutize(&c));
  let server = Server::new(workspace.clone(), client, config.token, config.limits)
    .unwrap_or_else(|e| fail(&format!("the workspace cannot be used: {}", e.message)));
  let listener = tokio::net::TcpListener::bind(&config.listen)
    .await
    .unwrap_or_else(|e| fail(&format!("cannot listen on {}: {e}", config.listen)));
  let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or(config.listen);
  if !listener.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
    // The client sends its token in the clear over http: only loopback is safe without TLS.
    log!("warning: {addr} is not a loopback address; serve it behind TLS (httpExecutionBackend accepts http only for loopback)");
  }
  say(&format!("knap-exec-server listening on http://{addr} (workspace {})", workspace.display()));
  let handler = {
    let server = server.clone();
    move |req: Request<Body>| {
      let server = server.clone();
      async move { server.handle(req).await }
    }
  };
  let app = axum::Router::new().fallback(handler);
  let shutdown = {
    let server = server.clone();
    async move {
      stop_signal().await;
      log!("shutting down");
      server.stop();
      // Running commands are being killed and their calls answered; a connection that does
      // not finish in time, or a second signal, ends the process anyway.
      tokio::spawn(async {
        tokio::select! {
          _ = tokio::time::sleep(DRAIN_TIMEOUT) => log!("connections still open after {}s, exiting", DRAIN_TIMEOUT.as_secs()),
          _ = stop_signal() => log!("second signal, exiting"),
        }
        std::process::exit(1);
      });
    }
  };
  // TCP_NODELAY: a streamed response (/read's body after its head) is several small writes, and
  // with Nagle each waits for the client's delayed ACK: ~40 ms per /read on loopback.
  let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
    if let Err(e) = tcp.set_nodelay(true) {
      log!("TCP_NODELAY not set on a connection: {e}");
    }
  });
  let served = axum::serve(listener, app).with_graceful_shutdown(shutdown);
  if let Err(e) = served.await {
    log!("{e}");
    std::process::exit(1);
  }
}

async fn stop_signal() {
  use tokio::signal::unix::{signal, SignalKind};
  let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
    return std::future::pending().await;
  };
  tokio::select! {
    _ = term.recv() => {}
    _ = int.recv() => {}
  }
}
