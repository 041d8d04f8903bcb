//! The coding agent's native pieces: `capOutput`, the limits `knap/code` exposes, and the
//! host-side rules of programmatic cells (`knap_core::program`).

use std::sync::Arc;

use knap_core::limits;
use knap_core::program::{self, CellLedger, ProgramTool, ProgramTools};
use napi_derive::napi;

use crate::{coded_error, ErrorCode};

/// `capOutput(text, maxBytes)` of `shell-tools.ts`: the first `maxBytes` bytes and the
/// `[caveman-code: output capped at …]` marker when the text is longer.
#[napi]
pub fn cap_output(text: String, max_bytes: u32) -> String {
  knap_core::cap::cap_output(&text, max_bytes as usize)
}

#[napi(object)]
pub struct BindingCodingLimits {
  pub cap_read_file: u32,
  pub cap_grep: u32,
  pub cap_bash: u32,
  pub cap_write_file: u32,
  pub cap_edit_file: u32,
  pub cap_read_tool_output: u32,
  pub breaker_repeated_tool_calls: u32,
  pub breaker_repeated_window_turns: u32,
  pub breaker_no_progress_turns: u32,
  pub breaker_max_tool_calls_per_turn: u32,
  pub program_max_tool_calls_per_cell: u32,
  pub program_sync_timeout_ms: u32,
  pub program_timeout_ms: u32,
  pub program_tool_timeout_ms: u32,
  pub program_source_max_bytes: u32,
  pub program_output_max_bytes: u32,
  pub program_settle_ms: u32,
  pub program_worker_old_generation_mb: u32,
  pub program_worker_young_generation_mb: u32,
  pub program_worker_stack_mb: u32,
}

/// The limits the JS layer of `knap/code` needs, from `knap_core::limits` (one place).
#[napi]
pub fn coding_limits() -> BindingCodingLimits {
  BindingCodingLimits {
    cap_read_file: limits::CAP_READ_FILE as u32,
    cap_grep: limits::CAP_GREP as u32,
    cap_bash: limits::CAP_BASH as u32,
    cap_write_file: limits::CAP_WRITE_FILE as u32,
    cap_edit_file: limits::CAP_EDIT_FILE as u32,
    cap_read_tool_output: limits::CAP_READ_TOOL_OUTPUT as u32,
    breaker_repeated_tool_calls: limits::BREAKER_REPEATED_TOOL_CALLS,
    breaker_repeated_window_turns: limits::BREAKER_REPEATED_WINDOW_TURNS,
    breaker_no_progress_turns: limits::BREAKER_NO_PROGRESS_TURNS,
    breaker_max_tool_calls_per_turn: limits::BREAKER_MAX_TOOL_CALLS_PER_TURN,
    program_max_tool_calls_per_cell: limits::PROGRAM_MAX_TOOL_CALLS_PER_CELL,
    program_sync_timeout_ms: limits::PROGRAM_SYNC_TIMEOUT_MS as u32,
    program_timeout_ms: limits::PROGRAM_TIMEOUT_MS as u32,
    program_tool_timeout_ms: limits::PROGRAM_TOOL_TIMEOUT_MS as u32,
    program_source_max_bytes: limits::PROGRAM_SOURCE_MAX_BYTES as u32,
    program_output_max_bytes: limits::PROGRAM_OUTPUT_MAX_BYTES as u32,
    program_settle_ms: limits::PROGRAM_SETTLE_MS as u32,
    program_worker_old_generation_mb: limits::PROGRAM_WORKER_OLD_GENERATION_MB,
    program_worker_young_generation_mb: limits::PROGRAM_WORKER_YOUNG_GENERATION_MB,
    program_worker_stack_mb: limits::PROGRAM_WORKER_STACK_MB,
  }
}

/// One tool a cell may call, as `createProgrammaticToolRuntime` passes it.
#[napi(object)]
pub struct BindingProgramTool {
  pub name: String,
  pub description: String,
  /// JSON Schema of the input, as JSON text.
  pub input_json: String,
  pub allow_repeat: bool,
}

/// The nested tools of one programmatic runtime.
#[napi]
pub struct NativeProgramTools {
  inner: Arc<ProgramTools>,
}

#[napi]
impl NativeProgramTools {
  #[napi(constructor)]
  pub fn new(tools: Vec<BindingProgramTool>) -> napi::Result<Self, ErrorCode> {
    let mut list = Vec::with_capacity(tools.len());
    for t in tools {
      let input = serde_json::from_str(&t.input_json)
        .map_err(|_| coded_error(knap_core::ToolError::coded(format!("cave_tool_definition_invalid:{}", t.name))))?;
      list.push(ProgramTool {
        name: t.name,
        description: t.description,
        input,
        allow_repeat: t.allow_repeat,
      });
    }
    Ok(Self {
      inner: Arc::new(ProgramTools::new(list)),
    })
  }

  /// The cell tool's description (head line, then each tool as comments and a declaration).
  #[napi]
  pub fn description(&self) -> String {
    self.inner.description()
  }
}

/// The per-call ledger of one running cell.
#[napi]
pub struct NativeProgramCell {
  tools: Arc<ProgramTools>,
  ledger: CellLedger,
}

#[napi]
impl NativeProgramCell {
  #[napi(constructor)]
  pub fn new(tools: &NativeProgramTools) -> Self {
    Self {
      tools: tools.inner.clone(),
      ledger: CellLedger::default(),
    }
  }

  /// Admits one nested call: `null` when it may be dispatched, else the error code (which is
  /// also the message the cell sees).
  #[napi]
  pub fn admit(&mut self, name: String, args_json: String) -> Option<String> {
    self.tools.admit(&mut self.ledger, &name, &args_json).err().map(|e| e.code)
  }
}

/// `null` when the cell source may run, else `cave_program_source_required` /
/// `cave_program_source_limit`.
#[napi]
pub fn check_program_source(code: Option<String>) -> Option<String> {
  program::check_source(code.as_deref()).err().map(|e| e.code)
}

/// The cell's result text: printed lines, else the formatted return value, else `ok`; capped.
#[napi]
pub fn program_cell_output(printed: Vec<String>, returned: Option<String>) -> String {
  program::cell_output(&printed, returned.as_deref())
}
