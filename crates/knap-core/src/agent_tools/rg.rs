//! Grep in a sandbox that is not knap's: `sandbox.rgPath` run through `sandbox.exec` with every
//! argument shell-quoted (bashkit put the pattern in the command line as is), its `--json`
//! output read back into bashkit's three output shapes, context lines grouped as rg groups them.

use serde_json::Value;

use super::sandbox::{ExecCall, Sandbox, SandboxError};
use super::{shell_quote, text, GrepInput, GrepOutput};
use crate::search::{ContentMatch, Printer};
use crate::truncate::cut_line;

pub(super) enum Failure {
  Message(String),
  Sandbox(SandboxError),
}

fn count_of(v: Option<f64>) -> usize {
  v.filter(|x| x.is_finite() && *x > 0.0)
    .map(|x| x.floor() as usize)
    .unwrap_or(0)
}

pub(super) async fn grep(
  sb: &dyn Sandbox,
  rg: &str,
  input: &GrepInput,
  printer: Printer,
  search_path: &str,
  ms: u64,
  max_line: usize,
) -> Result<GrepOutput, Failure> {
  let mut flags: Vec<String> = Vec::new();
  if input.case_insensitive {
    flags.push("-i".into());
  }
  if input.multiline {
    flags.extend(["-U".into(), "--multiline-dotall".into()]);
  }
  if let Some(g) = input.glob.as_deref().filter(|g| !g.is_empty()) {
    flags.extend(["-g".into(), shell_quote(g)]);
  }
  if let Some(t) = input.file_type.as_deref().filter(|t| !t.is_empty()) {
    flags.extend(["-t".into(), shell_quote(t)]);
  }
  let c = count_of(input.context);
  let after = if c > 0 { c } else { count_of(input.after) };
  if printer == Printer::Content {
    let before = if c > 0 { c } else { count_of(input.before) };
    if before > 0 {
      flags.extend(["-B".into(), before.to_string()]);
    }
    if after > 0 {
      flags.extend(["-A".into(), after.to_string()]);
    }
  }
  let mode = if printer == Printer::Files { "-l" } else { "--json" };
  let command = format!(
    "{} {mode}{}{} -e {} -- {}",
    shell_quote(rg),
    if flags.is_empty() { "" } else { " " },
    flags.join(" "),
    shell_quote(&input.pattern),
    shell_quote(search_path)
  );
  let r = sb
    .exec(ExecCall {
      command,
      timeout_ms: Some(ms),
      progress: None,
    })
    .await
    .map_err(Failure::Sandbox)?;
  if r.interrupted == Some(true) {
    return Err(Failure::Message(text::timed_out("Grep", ms)));
  }
  if r.exit_code == Some(2) && r.stdout.is_empty() {
    let e = r.stderr.trim();
    return Err(Failure::Message(if e.is_empty() {
      "rg failed".into()
    } else {
      e.to_string()
    }));
  }
  if printer == Printer::Files {
    let mut files: Vec<String> = r
      .stdout
      .split('\n')
      .filter(|l| !l.is_empty())
      .map(str::to_string)
      .collect();
    files.sort();
    return Ok(GrepOutput::Files(files));
  }
  let events: Vec<Value> = r
    .stdout
    .split('\n')
    .filter_map(|l| serde_json::from_str(l).ok())
    .collect();
  let path_of = |e: &Value| {
    e.pointer("/data/path/text")
      .and_then(Value::as_str)
      .map(str::to_string)
  };
  if printer == Printer::Counts {
    let mut counts: Vec<(String, u64)> = events
      .iter()
      .filter(|e| e["type"] == "end")
      .filter_map(|e| {
        Some((
          path_of(e)?,
          e.pointer("/data/stats/matches")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        ))
      })
      .collect();
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    return Ok(GrepOutput::Counts(counts));
  }
  // Rows per file, in the order rg reported the files; then grouped as rg groups context.
  let mut by_file: Vec<(String, Vec<(bool, u64, String)>)> = Vec::new();
  for e in &events {
    let kind = e["type"].as_str().unwrap_or("");
    if kind != "match" && kind != "context" {
      continue;
    }
    let Some(file) = path_of(e) else { continue };
    let raw = e
      .pointer("/data/lines/text")
      .and_then(Value::as_str)
      .unwrap_or("");
    let raw = raw.strip_suffix('\n').unwrap_or(raw);
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let row = (
      kind == "match",
      e.pointer("/data/line_number")
        .and_then(Value::as_u64)
        .unwrap_or(0),
      cut_line(raw, max_line),
    );
    match by_file.iter_mut().find(|(f, _)| *f == file) {
      Some((_, rows)) => rows.push(row),
      None => by_file.push((file, vec![row])),
    }
  }
  by_file.sort_by(|a, b| a.0.cmp(&b.0));
  let mut matches: Vec<ContentMatch> = Vec::new();
  for (file, mut rows) in by_file {
    rows.sort_by_key(|r| r.1);
    let mut pending: Vec<String> = Vec::new();
    let mut last: Option<usize> = None;
    let mut last_end = 0u64;
    for (is_match, n, text) in rows {
      if is_match {
        last_end = n + text.matches('\n').count() as u64;
        matches.push(ContentMatch {
          file: file.clone(),
          line_number: n,
          line: text,
          before_context: std::mem::take(&mut pending),
          after_context: Vec::new(),
        });
        last = Some(matches.len() - 1);
      } else if let Some(i) = last.filter(|_| n > last_end && n - last_end <= after as u64) {
        // rg's grouping: a line within -A of the previous match is its after-context.
        matches[i].after_context.push(text);
      } else {
        pending.push(text);
      }
    }
  }
  Ok(GrepOutput::Content(matches))
}
