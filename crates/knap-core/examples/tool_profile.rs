//! Per-call cost of shellTools `read_file` and `grep` on bench/kernel.mjs's workspace, without
//! the JS side: for `strace -c`, `perf record` and callgrind.
//!
//!   cargo run -p knap-core --release --example tool_profile -- [grep|read_file|both] [calls] [rounds]

use std::time::Instant;

use knap_core::tools::{ShellTools, ShellToolsConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn workspace() -> (tempfile::TempDir, Vec<String>) {
  let dir = tempfile::Builder::new()
    .prefix("knap-tool-profile-")
    .tempdir()
    .unwrap();
  let words = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
  ];
  let mut files = Vec::new();
  for d in 0..4 {
    std::fs::create_dir(dir.path().join(format!("pkg{d}"))).unwrap();
    for f in 0..6 {
      let rel = format!("pkg{d}/mod{f}.js");
      let lines: Vec<String> = (0..40)
        .map(|i| {
          format!(
            "export const {}_{i} = {}; // line {}",
            words[(i + f + d) % words.len()],
            i * (f + 1),
            i + 1
          )
        })
        .collect();
      std::fs::write(dir.path().join(&rel), lines.join("\n") + "\n").unwrap();
      files.push(rel);
    }
  }
  std::fs::write(
    dir.path().join("README.md"),
    "# bench workspace\nalpha beta gamma\n",
  )
  .unwrap();
  files.push("README.md".into());
  (dir, files)
}

fn main() {
  let args: Vec<String> = std::env::args().collect();
  let which = args.get(1).map(String::as_str).unwrap_or("both").to_string();
  let calls: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
  let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
  let (dir, files) = workspace();
  // Files changed in the last two seconds are never kept by grep's contents cache; the bench's
  // workspace is older than that after its first rounds. `KNAP_PROFILE_FRESH=1` skips the wait.
  if std::env::var_os("KNAP_PROFILE_FRESH").is_none() {
    std::thread::sleep(std::time::Duration::from_millis(2500));
  }
  let mut config = ShellToolsConfig::new(dir.path());
  config.tools = Some(vec!["read_file".into(), "grep".into()]);
  let tools = ShellTools::new(config).unwrap();
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let patterns = [
    "alpha_1\\b",
    "beta_[0-9]+ = 1",
    "gamma",
    "theta_3",
    "line 4\\b",
    "zeta_.*= 2",
  ];
  for round in 0..rounds {
    let t0 = Instant::now();
    let mut bytes = 0usize;
    for i in 0..calls {
      let read = match which.as_str() {
        "read_file" => true,
        "grep" => false,
        _ => i % 2 == 0,
      };
      let (name, input) = if read {
        (
          "read_file",
          json!({ "path": files[i % files.len()], "offset": 1 + (i % 20), "limit": 20 }),
        )
      } else {
        ("grep", json!({ "pattern": patterns[i % patterns.len()] }))
      };
      let out = rt
        .block_on(tools.execute(name, &input, CancellationToken::new()))
        .unwrap();
      bytes += out.text.len();
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / calls as f64;
    eprintln!("round {round}: {which} {us:.1} us/call ({bytes} bytes out)");
  }
}
