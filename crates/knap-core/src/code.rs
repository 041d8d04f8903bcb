//! The `cave_*` codes the kernel, the policy evaluator and the durable journal raise, as one enum,
//! and the one error type that carries a code. The code becomes its string only at the boundary
//! (`Code::as_str`); nothing recovers a code by splitting a message.

use std::fmt;

macro_rules! codes {
  ($($(#[$doc:meta])* $name:ident => $text:literal,)*) => {
    /// A stable error code. `Other` carries a `cave_*` code raised by user code (a JS durable
    /// store, say) that knap does not raise itself, so it reaches the caller unchanged.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub enum Code {
      $($(#[$doc])* $name,)*
      Other(Box<str>),
    }

    impl Code {
      pub fn as_str(&self) -> &str {
        match self {
          $(Code::$name => $text,)*
          Code::Other(code) => code,
        }
      }

      /// The code named `text`: a known one, or `Other` for any other `cave_*` code.
      pub fn parse(text: &str) -> Option<Code> {
        match text {
          $($text => Some(Code::$name),)*
          other if is_code_text(other) => Some(Code::Other(other.into())),
          _ => None,
        }
      }

      /// Every code knap raises itself (for tests of the table).
      pub const KNOWN: &'static [Code] = &[$(Code::$name,)*];
    }
  };
}

/// `cave_` followed by lower-case letters, digits and underscores.
fn is_code_text(text: &str) -> bool {
  text.len() > 5
    && text.starts_with("cave_")
    && text
      .bytes()
      .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

codes! {
  // Run lifecycle and options.
  AgentRunFailed => "cave_agent_run_failed",
  AgentDefinitionInvalid => "cave_agent_definition_invalid",
  RunOptionsInvalid => "cave_run_options_invalid",
  RunAborted => "cave_run_aborted",
  RunDeadlineExceeded => "cave_run_deadline_exceeded",
  RunDeadlineInvalid => "cave_run_deadline_invalid",
  MaxModelCallsInvalid => "cave_max_model_calls_invalid",
  MaxToolCallsInvalid => "cave_max_tool_calls_invalid",
  InputInvalid => "cave_input_invalid",
  OutputSchemaInvalidJson => "cave_output_schema_invalid_json",
  OutputSchemaMismatch => "cave_output_schema_mismatch",
  ProviderTerminalError => "cave_provider_terminal_error",
  ProviderTerminalAborted => "cave_provider_terminal_aborted",
  ProviderCredentials => "cave_provider_credentials",
  CachePrefixDrift => "cave_cache_prefix_drift",
  Internal => "cave_internal",
  // The model router (`RunOptions.modelRouter`) and model input kinds.
  ModelRouteDecisionInvalid => "cave_model_route_decision_invalid",
  ModelRouteCrossProvider => "cave_model_route_cross_provider",
  ModelRouteUnknown => "cave_model_route_unknown",
  ModelRouteIncompatible => "cave_model_route_incompatible",
  ModelInputUnsupported => "cave_model_input_unsupported",
  // Budget and breakers.
  BudgetExhausted => "cave_budget_exhausted",
  BudgetRevoked => "cave_budget_revoked",
  BudgetConflictingCap => "cave_budget_conflicting_cap",
  BudgetDenominationAmbiguous => "cave_budget_denomination_ambiguous",
  BudgetDenominationUnavailable => "cave_budget_denomination_unavailable",
  BudgetMaxInvalid => "cave_budget_max_invalid",
  BudgetInitialInvalid => "cave_budget_initial_invalid",
  BudgetOutputFloorInvalid => "cave_budget_output_floor_invalid",
  BudgetOnExhaustedInvalid => "cave_budget_on_exhausted_invalid",
  BudgetExhaustionResultInvalid => "cave_budget_exhaustion_result_invalid",
  BudgetReleaseInvalid => "cave_budget_release_invalid",
  BudgetReleaseReasonRequired => "cave_budget_release_reason_required",
  BudgetReleaseExceedsMax => "cave_budget_release_exceeds_max",
  BudgetCapBreached => "cave_budget_cap_breached",
  BudgetControllerUnbound => "cave_budget_controller_unbound",
  /// The legacy `maxCostUsd` ledger is spent.
  RunCostBudgetExceeded => "cave_run_cost_budget_exceeded",
  /// A model under `maxCostUsd` has no catalog price.
  SubagentUnpricedBudget => "cave_subagent_unpriced_budget",
  CompactionOptionInvalid => "cave_compaction_option_invalid",
  /// `budget.compaction.newContext` resolved to something other than a string seed.
  CompactionNewContextInvalid => "cave_compaction_new_context_invalid",
  /// A context summary that is not knap's summary JSON (schema_version 2), or that drops anchors.
  ContextSummaryInvalid => "cave_context_summary_invalid",
  BreakerThresholdInvalid => "cave_breaker_threshold_invalid",
  BreakerRetryRequiresBudget => "cave_breaker_retry_requires_budget",
  // Tool admission and execution.
  ToolCallBudgetExceeded => "cave_tool_call_budget_exceeded",
  FanOutCapExceeded => "cave_fan_out_cap_exceeded",
  ToolCallLoopDetected => "cave_tool_call_loop_detected",
  UnknownTool => "cave_unknown_tool",
  SideEffectBlocked => "cave_side_effect_blocked",
  ToolArgumentsInvalid => "cave_tool_arguments_invalid",
  ToolSandboxEntryRequired => "cave_tool_sandbox_entry_required",
  SandboxEntryRequired => "cave_sandbox_entry_required",
  HostSandboxNestedUnderRequired => "cave_host_sandbox_nested_under_required",
  ToolDenied => "cave_tool_denied",
  ToolTimeout => "cave_tool_timeout",
  ToolDefinitionInvalid => "cave_tool_definition_invalid",
  ToolOutputSchemaMismatch => "cave_tool_output_schema_mismatch",
  ToolResultLimit => "cave_tool_result_limit",
  ToolResultInlineLimit => "cave_tool_result_inline_limit",
  ToolResultRequiresRecovery => "cave_tool_result_requires_recovery",
  ToolResultNotJsonSafe => "cave_tool_result_not_json_safe",
  ToolInputSchemaMismatch => "cave_tool_input_schema_mismatch",
  // Composite tools (`context.dispatch`, caveman-code.md §4).
  NestedToolDispatchUnavailable => "cave_nested_tool_dispatch_unavailable",
  NestedToolParentInactive => "cave_nested_tool_parent_inactive",
  NestedToolNotAllowed => "cave_nested_tool_not_allowed",
  NestedToolSpeculationNotAllowed => "cave_nested_tool_speculation_not_allowed",
  NestedToolSandboxUnsupported => "cave_nested_tool_sandbox_unsupported",
  NestedToolAborted => "cave_nested_tool_aborted",
  ProgramNestedCallsUnquiesced => "cave_program_nested_calls_unquiesced",
  ProgramSpeculationAbandoned => "cave_program_speculation_abandoned",
  ToolEffectUnquiesced => "cave_tool_effect_unquiesced",
  // The policy.
  ToolPolicyFailed => "cave_tool_policy_failed",
  ToolPolicyDecisionInvalid => "cave_tool_policy_decision_invalid",
  ToolPolicyReasonInvalid => "cave_tool_policy_reason_invalid",
  ToolPolicyTimeout => "cave_tool_policy_timeout",
  // Subagents.
  SubagentArgumentsInvalid => "cave_subagent_arguments_invalid",
  SubagentInputLimit => "cave_subagent_input_limit",
  SubagentCallBudget => "cave_subagent_call_budget",
  SubagentDepthLimit => "cave_subagent_depth_limit",
  SubagentDepthLimitInvalid => "cave_subagent_depth_limit_invalid",
  SubagentInvocationLimit => "cave_subagent_invocation_limit",
  SubagentInvocationLimitInvalid => "cave_subagent_invocation_limit_invalid",
  SubagentConcurrencyLimit => "cave_subagent_concurrency_limit",
  SubagentConcurrencyLimitInvalid => "cave_subagent_concurrency_limit_invalid",
  SubagentContextBudget => "cave_subagent_context_budget",
  SubagentWalletUnavailable => "cave_subagent_wallet_unavailable",
  SubagentWalletDenominationUnavailable => "cave_subagent_wallet_denomination_unavailable",
  // Durable runs (every `cave_durable_*` code of the reference).
  DurableRunIdInvalid => "cave_durable_run_id_invalid",
  DurableSubagentUnsupported => "cave_durable_subagent_unsupported",
  DurableMaxCostUsdUnsupported => "cave_durable_max_cost_usd_unsupported",
  DurableCandidatePlanUnsupported => "cave_durable_candidate_plan_unsupported",
  DurableInputReservedPrefix => "cave_durable_input_reserved_prefix",
  DurableInputBytesLimit => "cave_durable_input_bytes_limit",
  DurableSessionMismatch => "cave_durable_session_mismatch",
  DurableConversationMismatch => "cave_durable_conversation_mismatch",
  DurableConversationInvalid => "cave_durable_conversation_invalid",
  DurableConversationUnsupported => "cave_durable_conversation_unsupported",
  DurableSessionIdInvalid => "cave_durable_session_id_invalid",
  DurableDefinitionChanged => "cave_durable_definition_changed",
  DurableAgentMismatch => "cave_durable_agent_mismatch",
  DurableInputMismatch => "cave_durable_input_mismatch",
  DurableBudgetChanged => "cave_durable_budget_changed",
  DurableJournalCorrupt => "cave_durable_journal_corrupt",
  DurableJournalEventUnknown => "cave_durable_journal_event_unknown",
  DurableJournalVersionUnsupported => "cave_durable_journal_version_unsupported",
  DurableJournalLimit => "cave_durable_journal_limit",
  DurableEventLimit => "cave_durable_event_limit",
  DurableEventNotSerializable => "cave_durable_event_not_serializable",
  DurableMeterNotFresh => "cave_durable_meter_not_fresh",
  DurableValueNotJson => "cave_durable_value_not_json",
  DurableValueNotPlainData => "cave_durable_value_not_plain_data",
  DurableValueCycle => "cave_durable_value_cycle",
  DurableValueLimit => "cave_durable_value_limit",
  DurableToolEffectUncertain => "cave_durable_tool_effect_uncertain",
  DurableToolReplayMismatch => "cave_durable_tool_replay_mismatch",
  DurableToolReplayIncomplete => "cave_durable_tool_replay_incomplete",
  DurableToolCallIdReused => "cave_durable_tool_call_id_reused",
  DurableToolCallIdInvalid => "cave_durable_tool_call_id_invalid",
  DurableToolCallIdMissing => "cave_durable_tool_call_id_missing",
  DurableToolIdentityInvalid => "cave_durable_tool_identity_invalid",
  DurableToolPathInvalid => "cave_durable_tool_path_invalid",
  DurableToolLimit => "cave_durable_tool_limit",
  DurableRunLocked => "cave_durable_run_locked",
  DurableRunLockLost => "cave_durable_run_lock_lost",
  DurableAppendConflict => "cave_durable_append_conflict",
  DurableStoreFailed => "cave_durable_store_failed",
  DurableStoreInvalid => "cave_durable_store_invalid",
  DurableStoreRootRequired => "cave_durable_store_root_required",
  DurableSqlDialectUnsupported => "cave_durable_sql_dialect_unsupported",
  DurableSqlTableInvalid => "cave_durable_sql_table_invalid",
  DurableSqlLeaseTtlInvalid => "cave_durable_sql_lease_ttl_invalid",
  DurableSqlLockLost => "cave_durable_sql_lock_lost",
  DurableHttpInsecure => "cave_durable_http_insecure",
  DurableHttpUrlInvalid => "cave_durable_http_url_invalid",
  DurableHttpTokenRequired => "cave_durable_http_token_required",
  DurableHttpLockTtlInvalid => "cave_durable_http_lock_ttl_invalid",
  DurableHttpRequestTimeoutInvalid => "cave_durable_http_request_timeout_invalid",
  DurableHttpLoadFailed => "cave_durable_http_load_failed",
  DurableHttpAppendFailed => "cave_durable_http_append_failed",
  DurableHttpLockFailed => "cave_durable_http_lock_failed",
  DurableHttpLockResponseInvalid => "cave_durable_http_lock_response_invalid",
  DurableHttpLockLost => "cave_durable_http_lock_lost",
  DurableHttpListFailed => "cave_durable_http_list_failed",
  DurableHttpListInvalid => "cave_durable_http_list_invalid",
  DurableObjectConditionalPutRequired => "cave_durable_object_conditional_put_required",
  DurableObjectLeaseInvalid => "cave_durable_object_lease_invalid",
  DurableObjectLeaseTtlInvalid => "cave_durable_object_lease_ttl_invalid",
  DurableObjectPrefixInvalid => "cave_durable_object_prefix_invalid",
  DurableObjectStorageInvalid => "cave_durable_object_storage_invalid",
  DurableRunCancelled => "cave_durable_run_cancelled",
  DurableCancelReasonInvalid => "cave_durable_cancel_reason_invalid",
  DurableSleepReasonInvalid => "cave_durable_sleep_reason_invalid",
  DurableSleepWakeInvalid => "cave_durable_sleep_wake_invalid",
}

impl Code {
  /// The code `run()` rejects with for a run that failed with `message` (the reference's coarse
  /// `errorCode()`): the policy's codes and prefix drift by name, a credential problem, else
  /// `cave_agent_run_failed`. The one place this mapping lives.
  pub fn for_run_failure(message: &str) -> Code {
    for code in [
      Code::CachePrefixDrift,
      Code::ToolPolicyFailed,
      Code::ToolPolicyDecisionInvalid,
      Code::ToolPolicyReasonInvalid,
    ] {
      if message.starts_with(code.as_str()) {
        return code;
      }
    }
    if message.contains("credential") {
      return Code::ProviderCredentials;
    }
    Code::AgentRunFailed
  }
}

impl fmt::Display for Code {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.as_str())
  }
}

impl PartialEq<str> for Code {
  fn eq(&self, other: &str) -> bool {
    self.as_str() == other
  }
}

impl PartialEq<&str> for Code {
  fn eq(&self, other: &&str) -> bool {
    self.as_str() == *other
  }
}

/// A code given by its text: a known one, or `Other` (an errno name, a code user code raised).
impl From<&str> for Code {
  fn from(text: &str) -> Self {
    Code::parse(text).unwrap_or_else(|| Code::Other(text.into()))
  }
}

impl serde::Serialize for Code {
  fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(self.as_str())
  }
}

/// The kernel's and the journal's error: a code and the reference's message (which, for most
/// codes, starts with the code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
  pub code: Code,
  pub message: String,
}

impl Error {
  /// The message is the code itself (`cave_tool_timeout`).
  pub fn bare(code: Code) -> Self {
    Self {
      message: code.as_str().to_string(),
      code,
    }
  }

  /// `<code>: <detail>`.
  pub fn coded(code: impl Into<Code>, detail: impl fmt::Display) -> Self {
    let code = code.into();
    Self {
      message: format!("{}: {detail}", code.as_str()),
      code,
    }
  }

  /// `<code>:<a>:<b>…`: the reference's colon-joined form (`cave_tool_result_limit:<tool>`).
  pub fn tagged(code: Code, parts: &[&str]) -> Self {
    let mut message = code.as_str().to_string();
    for p in parts {
      message.push(':');
      message.push_str(p);
    }
    Self { code, message }
  }

  /// A message that does not follow one of the forms above.
  pub fn new(code: impl Into<Code>, message: impl Into<String>) -> Self {
    Self {
      code: code.into(),
      message: message.into(),
    }
  }
}

impl fmt::Display for Error {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&self.message)
  }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn codes_are_distinct_and_round_trip() {
    let mut seen = std::collections::HashSet::new();
    for code in Code::KNOWN {
      assert!(is_code_text(code.as_str()), "{code}");
      assert!(seen.insert(code.as_str()), "duplicate {code}");
      assert_eq!(Code::parse(code.as_str()).as_ref(), Some(code));
    }
    assert_eq!(
      Code::parse("cave_serve_instance_already_active"),
      Some(Code::Other("cave_serve_instance_already_active".into()))
    );
    assert_eq!(Code::parse("ENOENT"), None);
    assert_eq!(Code::parse("cave_"), None);
    assert!(Code::DurableRunLocked == "cave_durable_run_locked");
  }

  #[test]
  fn error_forms() {
    assert_eq!(Error::bare(Code::ToolTimeout).message, "cave_tool_timeout");
    assert_eq!(
      Error::coded(Code::RunAborted, "the run was aborted").message,
      "cave_run_aborted: the run was aborted"
    );
    assert_eq!(
      Error::tagged(Code::DurableToolReplayMismatch, &["lookup", "c1"]).message,
      "cave_durable_tool_replay_mismatch:lookup:c1"
    );
  }

  #[test]
  fn run_failure_codes_are_the_references_coarse_ones() {
    assert_eq!(
      Code::for_run_failure("cave_tool_policy_failed"),
      Code::ToolPolicyFailed
    );
    assert_eq!(
      Code::for_run_failure("cave_cache_prefix_drift: x"),
      Code::CachePrefixDrift
    );
    assert_eq!(
      Code::for_run_failure("401: missing credentials"),
      Code::ProviderCredentials
    );
    assert_eq!(
      Code::for_run_failure("cave_budget_denomination_unavailable: x"),
      Code::AgentRunFailed
    );
  }
}
