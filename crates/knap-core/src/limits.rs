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
/// After a command ends, how long to wait for its pipes when its launcher could not report that
/// none of its processes is left (it was killed from outside); otherwise they are read to EOF.
pub const PIPE_DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);
/// How long a launcher told to kill its command may take to exit before its group is SIGKILLed.
pub const LAUNCHER_EXIT_GRACE: Duration = Duration::from_secs(5);
/// Read size for process pipes and file streaming.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// File writes go out in pieces of this size so a cancelled or timed-out call stops between
/// them instead of finishing a 100 MB write nobody waits for.
pub const WRITE_CHUNK_BYTES: usize = 1024 * 1024;

/// The one path validator (`workspace::check_path`): a tool path longer than this many bytes is
/// `cave_path_invalid` (Linux's `PATH_MAX`; no single path syscall takes a longer one).
pub const PATH_MAX_BYTES: usize = 4096;
/// ... or with more components than this (a 3,000-deep path made resolution and a failed
/// write's directory chain the cost of the call; real workspaces are far shallower).
pub const PATH_MAX_COMPONENTS: usize = 1024;
/// Symlinks one resolution follows before it fails with `ELOOP` (Linux's `MAXSYMLINKS`).
pub const PATH_MAX_SYMLINKS: usize = 40;

/// Execution backends: the largest `timeoutMs` an `exec` request may ask for (24 h).
pub const EXEC_MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Execution backends: the largest `maxOutputBytes` an `exec` request may ask for (512 MiB,
/// about what one V8 string can hold).
pub const EXEC_MAX_OUTPUT_BYTES: usize = 512 * 1024 * 1024;
/// `localExecutionBackend().readFile` without `maxBytes`: Node refuses files over 2 GiB.
pub const LOCAL_READ_FILE_MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// `httpExecutionBackend`: response caps (`/exec` is `2·maxOutputBytes + 4096`, `/read` with
/// `maxBytes` is `ceil(maxBytes·4/3) + 4096`, `/cancel` 4096, every other response 64 MiB).
pub const HTTP_BACKEND_RESPONSE_SLACK_BYTES: u64 = 4096;
pub const HTTP_BACKEND_RESPONSE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// `httpExecutionBackend`: how long the `/cancel` after an aborted `/exec` may take.
pub const HTTP_BACKEND_CANCEL_TIMEOUT_MS: u64 = 5_000;
/// A JS backend's `exec` after an abort: how long Rust waits for it to settle (it posts
/// `/cancel` first) before giving up on it.
pub const JS_BACKEND_ABORT_GRACE: Duration = Duration::from_secs(10);

/// Command sessions: after a hard timeout or a kill, how long to wait for the process before
/// finalizing the session anyway.
pub const COMMAND_SESSION_FORCE_FINALIZE: Duration = Duration::from_millis(500);
/// The bash tool's session limits (`BASH_SESSION_*`; the coding agent's runtime values).
pub const BASH_SESSION_MAX_SESSIONS: usize = 8;
pub const BASH_SESSION_MAX_WAIT_MS: u64 = 30_000;
pub const BASH_SESSION_MAX_INPUT_BYTES: usize = 64 * 1024;
pub const BASH_SESSION_READ_CHUNK_BYTES: usize = 64 * 1024;
/// `bash` session `query`: 1 to this many UTF-8 bytes.
pub const BASH_SESSION_QUERY_MAX_BYTES: usize = 4096;

/// `grep`: matching lines returned (`GREP_MAX_MATCHES`), also rg's per-file `--max-count`.
pub const GREP_MAX_MATCHES: usize = 200;
/// The directory walk (grep, Glob): a walk runs on the calling thread alone until it has found
/// this many entries, then its other threads start (starting threads costs more than walking a
/// small tree).
pub const WALK_SPREAD_AFTER_ENTRIES: usize = 512;
/// `grep`: a scope of at most this many walk entries whose files hold at most
/// `GREP_INLINE_MAX_BYTES` together is searched on the calling thread (no blocking-pool hop, no
/// timeout task): like `INLINE_READ_MAX_BYTES`, the hop costs more than the search.
pub const GREP_INLINE_MAX_ENTRIES: usize = 64;
pub const GREP_INLINE_MAX_BYTES: u64 = 256 * 1024;
/// grep (and the AI SDK Grep) keep the contents of files of at most this many bytes from search
/// to search, by identity (see `search::contents`), up to `GREP_CONTENTS_MAX_BYTES` in all (then
/// the whole cache is dropped and starts again).
pub const GREP_CONTENTS_FILE_MAX_BYTES: u64 = 16 * 1024;
pub const GREP_CONTENTS_MAX_BYTES: usize = 8 * 1024 * 1024;
/// A file is kept only if its last change (`ctime`) is at least this old when it is read: a
/// change after that gets a later change time (timestamps on the listed file systems are taken
/// from a clock that ticks every few milliseconds), so the identity moves with the contents.
pub const GREP_CONTENTS_SETTLED: Duration = Duration::from_secs(2);
/// grep's walk keeps directory listings the same way (`walk::Listing::read_kept`), this much in all.
pub const WALK_LISTINGS_MAX_BYTES: usize = 4 * 1024 * 1024;
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

/// Kernel defaults (`runtime.ts`).
pub const DEFAULT_MAX_MODEL_CALLS: u32 = 64;
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 64;
pub const DEFAULT_SUBAGENT_DEPTH: u32 = 2;
pub const ABSOLUTE_SUBAGENT_DEPTH_LIMIT: u32 = 8;
/// `RunOptions.maxSubagentInvocations`: at most this many (no default: unlimited).
pub const MAX_SUBAGENT_INVOCATIONS_LIMIT: u32 = 65_536;
/// `RunOptions.maxConcurrentSubagents`: at most this many (no default: unlimited).
pub const MAX_CONCURRENT_SUBAGENTS_LIMIT: u32 = 1_024;
/// A tool result with `result: "inline"`/`"auto"` above this needs the recovery engine.
pub const INLINE_TOOL_RESULT_MAX_BYTES: usize = 32_768;
/// Any tool result above this is refused (`cave_tool_result_limit:<name>`).
pub const TOOL_RESULT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// `OUTPUT_CLAMP_FLOOR_TOKENS`.
pub const OUTPUT_CLAMP_FLOOR_TOKENS: u64 = 256;
/// Framing tokens reserved per message when estimating a call's input.
pub const BUDGET_FRAMING_TOKENS_PER_MESSAGE: u64 = 16;
/// Compaction triggers between turns when the remaining budget is below this many times the
/// next working call's cold worst case (`COMPACTION_TRIGGER_MULTIPLIER`).
pub const COMPACTION_TRIGGER_MULTIPLIER: f64 = 4.0;
/// `SUMMARY_SCHEMA_VERSION` of `@caveman-ai/agent/compaction`.
pub const SUMMARY_SCHEMA_VERSION: u64 = 2;
/// A context summary's JSON is refused above this size (a summary replaces history; it cannot
/// be larger than any window).
pub const CONTEXT_SUMMARY_MAX_BYTES: usize = 1024 * 1024;
/// Anchors one summary may carry.
pub const CONTEXT_SUMMARY_MAX_ANCHORS: usize = 512;
/// Breaker defaults (`breakers.ts`).
pub const BREAKER_REPEATED_TOOL_CALLS: u32 = 3;
pub const BREAKER_REPEATED_WINDOW_TURNS: u32 = 8;
pub const BREAKER_NO_PROGRESS_TURNS: u32 = 3;
pub const BREAKER_MAX_TOOL_CALLS_PER_TURN: u32 = 8;
/// Output tokens asked for when neither the definition nor the model says (pi's default cap).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4_000;

/// Durable journal limits (`durable-limits.ts`).
pub const DURABLE_JOURNAL_VERSION: u64 = 2;
pub const DURABLE_MAX_JOURNAL_EVENTS: usize = 100_000;
pub const DURABLE_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
pub const DURABLE_MAX_JOURNAL_BYTES: usize = 256 * 1024 * 1024;
pub const DURABLE_MAX_ARGUMENT_BYTES: usize = 1024 * 1024;
pub const DURABLE_MAX_VALUE_DEPTH: usize = 64;
pub const DURABLE_MAX_VALUE_NODES: usize = 200_000;
pub const DURABLE_MAX_ERROR_MESSAGE_BYTES: usize = 4096;
pub const DURABLE_MAX_ERROR_NAME_BYTES: usize = 256;
pub const DURABLE_MAX_CODE_BYTES: usize = 512;
/// `list()` reads at most this much of each journal's first line.
pub const DURABLE_LIST_FIRST_LINE_BYTES: usize = 64 * 1024;
/// A disk lock whose owner cannot be named (garbage `owner.json`, none, a pid ≤ 0) and that no
/// live knap process holds is stale only once it has not changed for this long: a writer of
/// another implementation between `mkdir lock.d` and writing `owner.json` is given that time.
pub const DURABLE_LOCK_SETTLE: Duration = Duration::from_secs(10);
/// `owner.json` bytes read when judging a lock.
pub const DURABLE_LOCK_OWNER_MAX_BYTES: usize = 4096;
/// Leases of the SQL, HTTP and object stores: 30 s by default, at least 3 s, renewed every third
/// of the TTL (`lockTtlMs` / `leaseTtlMs`).
pub const DURABLE_LEASE_TTL_DEFAULT_MS: u64 = 30_000;
pub const DURABLE_LEASE_TTL_MIN_MS: u64 = 3_000;
/// `HttpDurableStore`'s `requestTimeoutMs` default; at most a day.
pub const DURABLE_HTTP_REQUEST_TIMEOUT_DEFAULT_MS: u64 = 10_000;
pub const DURABLE_HTTP_REQUEST_TIMEOUT_MAX_MS: u64 = 24 * 60 * 60 * 1000;
/// The largest `GET /runs` and lock response read (a journal is read up to
/// `DURABLE_MAX_JOURNAL_BYTES`); a larger one is invalid.
pub const DURABLE_HTTP_LIST_MAX_BYTES: usize = 64 * 1024 * 1024;
pub const DURABLE_HTTP_LOCK_RESPONSE_MAX_BYTES: usize = 64 * 1024;
/// `ObjectDurableStore`: create-if-absent attempts for one journal chunk before
/// `cave_durable_append_conflict`, and the lease object bytes read.
pub const DURABLE_OBJECT_APPEND_ATTEMPTS: u32 = 8;
/// Runs whose journal position an object store instance caches (knap's; a cache, no behaviour).
pub const DURABLE_OBJECT_KNOWN_RUNS_MAX: usize = 4096;
pub const DURABLE_OBJECT_LEASE_MAX_BYTES: usize = 64 * 1024;
/// The default key prefix of `ObjectDurableStore`.
pub const DURABLE_OBJECT_PREFIX: &str = "caveman/durable/";

/// Programmatic tool cells (`caveman_code`, `programmatic-tools.ts`).
/// Nested tool calls one cell may make.
pub const PROGRAM_MAX_TOOL_CALLS_PER_CELL: u32 = 8;
/// The same tool with the same canonical arguments, more often than this in one cell, is refused
/// (unless the tool sets `allowRepeat`).
pub const PROGRAM_MAX_REPEATED_CALLS: u32 = 3;
/// The cell's synchronous part (the vm script run) and the whole cell.
pub const PROGRAM_SYNC_TIMEOUT_MS: u64 = 2_000;
pub const PROGRAM_TIMEOUT_MS: u64 = 120_000;
/// The kernel's deadline for the cell tool itself.
pub const PROGRAM_TOOL_TIMEOUT_MS: u64 = 125_000;
/// Source text of one cell, UTF-8 bytes.
pub const PROGRAM_SOURCE_MAX_BYTES: usize = 65_536;
/// Cell output: above this, the first and last `PROGRAM_OUTPUT_EDGE_BYTES` around a marker.
pub const PROGRAM_OUTPUT_MAX_BYTES: usize = 24_576;
pub const PROGRAM_OUTPUT_EDGE_BYTES: usize = 12_288;
/// After a failed cell, admitted nested calls get this long to settle.
pub const PROGRAM_SETTLE_MS: u64 = 1_000;
/// After a composite tool's `execute` settles, its admitted nested calls get this long to
/// settle before the container fails with `cave_program_nested_calls_unquiesced`.
pub const NESTED_SETTLE_MS: u64 = 1_000;
/// `sandbox: "required"` tool workers (`RunOptions.entryPath`; lib/sandbox.mjs).
/// Worker processes one run keeps at once; concurrent calls beyond it wait for a free one.
pub const SANDBOX_WORKERS_PER_RUN: u32 = 4;
/// A new worker must import the entry and find the agent and its tools within this long.
pub const SANDBOX_START_TIMEOUT_MS: u64 = 60_000;
/// After a call's abort (its timeout, the run's abort) the worker's tool gets this long to
/// settle; then its process group is killed. An aborted worker is never reused.
pub const SANDBOX_ABORT_GRACE_MS: u64 = 1_000;
/// Streaming speculation: launches per cell, and launches running at once.
pub const SPECULATION_MAX_LAUNCHES: u32 = 8;
pub const SPECULATION_MAX_IN_FLIGHT: u32 = 4;
/// A non-read tool's own body after its timeout: more than this → `cave_tool_effect_unquiesced`.
pub const EFFECT_SETTLE_MS: u64 = 1_000;
/// The cell's Worker: V8 heap and stack limits.
pub const PROGRAM_WORKER_OLD_GENERATION_MB: u32 = 64;
pub const PROGRAM_WORKER_YOUNG_GENERATION_MB: u32 = 16;
pub const PROGRAM_WORKER_STACK_MB: u32 = 4;
/// Type rendering in the cell tool's description stops at this depth (`unknown`).
pub const PROGRAM_TYPE_MAX_DEPTH: usize = 5;

/// The AI SDK tool set (`knap/ai-sdk`, bashkit 0.7.1's defaults).
/// `defaultTimeout` of every tool (ms).
pub const AI_DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Bash: a call's own `timeout` is capped here (ms).
pub const AI_BASH_MAX_TIMEOUT_MS: u64 = 600_000;
/// Bash: `maxOutputLength` of each stream (UTF-16 units, middle-truncated).
pub const AI_BASH_MAX_OUTPUT_LENGTH: usize = 30_000;
/// Read: without a `limit`, files with more lines are refused (`maxFileSize` replaces it).
pub const AI_READ_MAX_LINES: u64 = 500;
/// Read and Grep: lines are cut at this many UTF-16 units (`maxLineLength`).
pub const AI_READ_MAX_LINE_LENGTH: usize = 2_000;
/// Read: `content` is middle-truncated at this many UTF-16 units (`maxOutputLength`).
pub const AI_READ_MAX_OUTPUT_LENGTH: usize = 60_000;
/// Read: a NUL among this many first characters of a file with a binary extension refuses it.
pub const AI_READ_BINARY_SNIFF_CHARS: usize = 1_000;
/// `sandbox.exec`: at most this many UTF-16 units per stream come back (middle-truncated).
pub const AI_EXEC_MAX_OUTPUT_LENGTH: usize = 10_000_000;
/// Bash `onProgress` / `sandbox.exec({ onOutput })`: bytes of output waiting for a slow consumer
/// at most; beyond it chunks are dropped and counted (`skipped`), never waited for.
pub const AI_PROGRESS_BUFFER_BYTES: usize = 256 * 1024;
/// `discoverInstructions`: the merged instruction text is cut at this many UTF-16 units
/// (bashkit's `maxBytes` default, measured as bashkit measures it: `String.length`).
pub const AI_INSTRUCTIONS_MAX_BYTES: usize = 32_768;
/// `discoverInstructions`: directories walked up from the start directory at most.
pub const AI_INSTRUCTIONS_MAX_DEPTH: usize = PATH_MAX_COMPONENTS;
/// `collectEnvironment`: the `timeout` each of its commands is given (ms).
pub const AI_ENVIRONMENT_EXEC_TIMEOUT_MS: u64 = 5_000;
/// `collectEnvironment`: past its timeout plus this grace a command is given up on (a sandbox
/// that ignores `timeout` cannot hang it); its field is then what a failed command gives.
pub const AI_ENVIRONMENT_EXEC_GRACE_MS: u64 = 1_000;
/// Bash `run_in_background`: launching the command may take this long (ms).
pub const AI_BACKGROUND_START_TIMEOUT_MS: u64 = 10_000;
/// `read_file` and the AI SDK's Read: a regular file up to this size is read on the calling
/// thread. A hop to the blocking pool and back (a futex wake of an idle core each way) costs
/// more than reading 64 KiB from the page cache; past this size the read streams on the pool.
pub const INLINE_READ_MAX_BYTES: u64 = 64 * 1024;
/// Cache: results are kept this long by default (ms), in an LRU of this many entries.
pub const AI_CACHE_TTL_MS: u64 = 5 * 60 * 1000;
pub const AI_CACHE_MAX_ENTRIES: usize = 1_000;
/// The invalidation log of one tool set keeps this many writes.
pub const AI_CACHE_LOG_MAX_EVENTS: usize = 512;
/// OpenRouter's model registry: kept this long, fetched with this timeout, and after a failure
/// not asked again for this long (ms).
pub const AI_OPENROUTER_CACHE_TTL_MS: u64 = 24 * 60 * 60 * 1000;
pub const AI_OPENROUTER_FETCH_TIMEOUT_MS: u64 = 10_000;
pub const AI_OPENROUTER_RETRY_AFTER_MS: u64 = 5 * 60 * 1000;
/// OpenRouter's registry: at most this many models are read, each context length at most this.
pub const AI_OPENROUTER_MAX_MODELS: usize = 10_000;
pub const AI_OPENROUTER_MAX_CONTEXT: u64 = 10_000_000;
/// knap/ai-sdk: Glob paths returned at most (the newest), and Grep files / lines / counts
/// returned without a `head_limit`, by default (`maxResults` per tool changes it). A cut list
/// always ends with a note saying so (`text::search_truncated_note`).
pub const AI_SDK_SEARCH_MAX_RESULTS: usize = 1_000;
/// Cancel and sleep reasons: at most this many bytes (`durable-control.ts`).
pub const DURABLE_MAX_CONTROL_REASON_BYTES: usize = 4096;
/// `MAX_DURABLE_SLEEP_MS`: a wake at most 30 days ahead.
pub const DURABLE_MAX_SLEEP_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// Serving (`serve-handler.ts`, `serve-events.ts`, `serve-session.ts`).
/// `maxBodyBytes` default: 1 MiB.
pub const SERVE_MAX_BODY_BYTES: usize = 1_048_576;
/// `maxConcurrentRuns` and `maxQueuedRuns` defaults.
pub const SERVE_MAX_CONCURRENT_RUNS: u32 = 2;
pub const SERVE_MAX_QUEUED_RUNS: u32 = 64;
/// Bearer tokens are at least this many characters.
pub const SERVE_MIN_TOKEN_CHARS: usize = 16;
/// Frames kept per event stream (the last ones).
pub const SERVE_EVENT_BUFFER_FRAMES: usize = 2048;
/// A stream whose consumer queue holds this many bytes is closed (slow readers are dropped).
pub const SERVE_STREAM_HIGH_WATER_BYTES: usize = 4 * 1024 * 1024;
/// `: keepalive` comment period on event streams.
pub const SERVE_HEARTBEAT_MS: u64 = 15_000;
/// `/runs` event buffers: kept this long after settling, at most this many.
pub const SERVE_SETTLED_BUFFER_MS: u64 = 5 * 60 * 1000;
pub const SERVE_SETTLED_BUFFERS: usize = 256;
/// Sessions held in memory; messages kept per session; deletion tombstones.
pub const SERVE_MAX_SESSIONS: usize = 1024;
pub const SERVE_SESSION_MESSAGES: usize = 256;
pub const SERVE_SESSION_TOMBSTONES: usize = 4096;
/// An idle session may be evicted this long after its last run settled.
pub const SERVE_SESSION_IDLE_MS: u64 = 5 * 60 * 1000;
/// `SESSION_MESSAGE_CONTEXT_MAX_BYTES`: the serialized message context, UTF-8.
pub const SERVE_SESSION_MESSAGE_CONTEXT_MAX_BYTES: usize = 64 * 1024;
/// Settled run ids the recovery sweep remembers (never re-read).
pub const SERVE_SETTLED_MEMO: usize = 50_000;
/// `RECOVERY_SWEEP_INTERVAL_MS`.
pub const SERVE_RECOVERY_SWEEP_INTERVAL_MS: u64 = 60_000;
/// `close(graceMs)` default, and how often a drain polls for in-flight runs.
pub const SERVE_CLOSE_GRACE_MS: u64 = 30_000;
pub const SERVE_DRAIN_POLL_MS: u64 = 250;
/// Text fields of stream frames (`argsSummary`, `delta`, `detail`): at most this many characters.
pub const SERVE_FRAME_TEXT_CHARS: usize = 240;
