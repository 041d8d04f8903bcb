//! `read_tool_output`: pages and literal search over stored outputs.

use serde_json::Value;

use super::args::{is_safe_integer, Args};
use super::{ShellToolName, ShellTools, ToolOutput};
use crate::cap::cap_output;
use crate::error::{Caveman, ToolError};
use crate::limits::{READ_TOOL_OUTPUT_DEFAULT_LIMIT, READ_TOOL_OUTPUT_PAGE_OVERHEAD};

pub(super) fn run(tools: &ShellTools, input: &Value) -> Result<ToolOutput, ToolError> {
  let args = Args::new("read_tool_output", input)?;
  let handle = args.string("handle")?;
  let cap = tools.cap(ShellToolName::ReadToolOutput) as i64;
  let entry = tools
    .store()
    .and_then(|s| s.get(handle))
    .ok_or_else(|| ToolError::caveman(Caveman::ToolOutputHandleUnknown))?;
  let offset = match args.opt_number("offset") {
    Ok(None) => 0.0,
    Ok(Some(o)) if is_safe_integer(o) && o >= 0.0 => o,
    _ => return Err(ToolError::caveman(Caveman::ToolOutputOffsetInvalid)),
  };
  let limit = match args.opt_number("limit") {
    Ok(None) => {
      (READ_TOOL_OUTPUT_DEFAULT_LIMIT as i64).min(cap - READ_TOOL_OUTPUT_PAGE_OVERHEAD as i64) as f64
    }
    Ok(Some(l)) if is_safe_integer(l) && l > 0.0 => l,
    _ => return Err(ToolError::caveman(Caveman::ToolOutputLimitInvalid)),
  };
  let page = (limit as i64)
    .min((cap - READ_TOOL_OUTPUT_PAGE_OVERHEAD as i64).max(1))
    .max(1) as usize;
  let bytes = entry.text.as_bytes();
  let total = bytes.len();
  let mut start = (offset as usize).min(total);
  if let Some(query) = args.opt_string("query")? {
    if query.is_empty() {
      return Err(ToolError::caveman(Caveman::ToolOutputQueryEmpty));
    }
    match find(&bytes[start..], query.as_bytes()) {
      Some(at) => start += at,
      None => {
        let text = format!("no literal match in {} at or after byte {start}", entry.label);
        return Ok(ToolOutput {
          text: cap_output(&text, cap as usize),
          label: None,
        });
      }
    }
  }
  let end = total.min(start + page);
  let capture = if entry.complete {
    "complete capture"
  } else {
    "partial capture; later process output was unavailable"
  };
  let mut text = format!("{} · bytes {start}-{end} of {total} · {capture}\n", entry.label);
  text.push_str(&String::from_utf8_lossy(&bytes[start..end]));
  if end < total {
    text.push_str(&format!("\n[next offset: {end}]"));
  }
  Ok(ToolOutput {
    text: cap_output(&text, cap as usize),
    label: None,
  })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
  memchr::memmem::find(haystack, needle)
}
