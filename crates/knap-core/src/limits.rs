//! Every limit knap enforces, in one place. Values follow `@caveman-ai/agent` 0.2.0
//! (`shell-tools.ts`, `tool-policy.ts`); each is a compatibility promise.

use std::time::Duration;

/// Default raw-byte output caps per tool (`CODING_TOOL_OUTPUT_CAPS`).
pub const CAP_READ_FILE: usize = 24_000;
pub const CAP_GREP: usize = 16_000;
pub const CAP_BASH: usize = 24_000;
pub const CAP_WRITE_FILE: usize = 2_000;
pub const CAP_EDIT_FILE: usize = 2_000;
pub const CAP_READ_TOOL_OUTPUT: usize = 24_000;

/// `bash` hard timeout (`BASH_TIMEOUT_MS`); a request may only lower it.
pub const BASH_TIMEOUT_MS: u64 = 120_000;
/// Combined stdout+stderr bytes a process may leave in memory (`PROCESS_CAPTURE_MAX_BYTES`).
pub const PROCESS_CAPTURE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// After the shell exits, how long to wait for pipes that background children keep open.
pub const PIPE_DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);
/// Read size for process pipes and file streaming.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// `grep`: matching lines returned (`GREP_MAX_MATCHES`), also rg's per-file `--max-count`.
pub const GREP_MAX_MATCHES: usize = 200;
/// `grep`: the reference runs rg with a 30 s timeout.
pub const GREP_TIMEOUT_MS: u64 = 30_000;
/// Default `timeoutMs` of every tool but bash (`READ_TIMEOUT_MS`, `tool()` default).
pub const TOOL_TIMEOUT_MS: u64 = 30_000;

/// Output store: one entry at most 8 MiB, all entries at most 16 MiB, oldest evicted first.
pub const STORE_ENTRY_MAX_BYTES: usize = 8 * 1024 * 1024;
pub const STORE_TOTAL_MAX_BYTES: usize = 16 * 1024 * 1024;
/// `read_tool_output`: default page is `min(8000, cap - 512)`; a page never exceeds `cap - 512`.
pub const READ_TOOL_OUTPUT_DEFAULT_LIMIT: usize = 8_000;
pub const READ_TOOL_OUTPUT_PAGE_OVERHEAD: usize = 512;

/// `TOOL_POLICY_TIMEOUT_MS`: a policy that has not answered by then fails the call.
pub const TOOL_POLICY_TIMEOUT_MS: u64 = 10_000;
/// Deny codes: `^[a-z][a-z0-9_]{0,63}$`.
pub const DENY_CODE_MAX_CHARS: usize = 64;

/// Largest JavaScript safe integer, for validating integer tool arguments.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `edit_file` reads the whole file into memory to replace text; larger files are refused.
pub const EDIT_FILE_MAX_BYTES: usize = 256 * 1024 * 1024;
