//! Audit events: the closed set of things a run records in its ledger.
//!
//! Every governance figure loopward shows is computed from these events, so allows are recorded
//! as well as denials (a census, not an invariant).

use crate::action::Action;
use crate::call::{CallId, ToolName};
use crate::decision::{Decision, GateChange, GateId, GateMode};
use crate::detail::LayerDetail;
use crate::effect::Effect;
use crate::handoff::Handoff;
use crate::id::{AgentId, RunId, TurnNumber};
use crate::layer_id::LayerId;
use crate::message::Said;
use crate::remedy::Remedy;
use crate::tool::ToolCall;
use crate::usage::Usage;
use crate::verdict::LayerVerdict;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use std::sync::Arc;

/// Where in a run an event happened. Filled in by the runner, not by whoever emits the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// The run.
    pub run: RunId,
    /// The turn, when the event belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnNumber>,
    /// The agent acting, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
}

/// How a run ended.
///
/// Written as one object with its keys sorted (`{"cap":"turns","status":"cap_reached"}`), as the
/// ledger writes every object.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// The last agent finished without handing off.
    Completed,
    /// A cap (turns, hops, steps, wall time) was reached.
    CapReached {
        /// Which cap.
        cap: String,
    },
    /// Every strategy of a subtask failed its allowance (anti-loop class-jump ran out).
    Exhausted,
    /// A token or cost budget was spent.
    BudgetExceeded {
        /// Which budget.
        budget: String,
    },
    /// A stop-gate denied, or the run waits for a person's approval.
    Stopped {
        /// Why.
        reason: String,
    },
    /// The run paused for a durable approval; resume it after `loopward approve`.
    AwaitingApproval {
        /// The pending approval's id.
        pending: String,
    },
    /// The audit ledger could not be written; the action it was to record did not run.
    AuditFailed {
        /// The write error.
        error: String,
    },
    /// A fatal error (a backend failed beyond its retries, a script ran out, …).
    Failed {
        /// The error.
        error: String,
    },
}

impl RunStatus {
    /// A short stable label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::CapReached { .. } => "cap_reached",
            Self::Exhausted => "exhausted",
            Self::BudgetExceeded { .. } => "budget_exceeded",
            Self::Stopped { .. } => "stopped",
            Self::AwaitingApproval { .. } => "awaiting_approval",
            Self::AuditFailed { .. } => "audit_failed",
            Self::Failed { .. } => "failed",
        }
    }
}

impl Serialize for RunStatus {
    /// By hand, because a derived one writes the `status` tag first and every field's name sorts
    /// before it; the ledger's keys are sorted.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let field = match self {
            Self::Completed | Self::Exhausted => None,
            Self::CapReached { cap } => Some(("cap", cap)),
            Self::BudgetExceeded { budget } => Some(("budget", budget)),
            Self::Stopped { reason } => Some(("reason", reason)),
            Self::AwaitingApproval { pending } => Some(("pending", pending)),
            Self::AuditFailed { error } | Self::Failed { error } => Some(("error", error)),
        };
        let mut st = s.serialize_struct("RunStatus", 1 + usize::from(field.is_some()))?;
        if let Some((name, value)) = field {
            st.serialize_field(name, value)?;
        }
        st.serialize_field("status", self.label())?;
        st.end()
    }
}

/// Why a turn ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// The model answered without calling tools.
    Done,
    /// The agent handed off.
    Handoff,
    /// The per-turn tool-step cap was reached.
    StepCap,
    /// A layer stopped the turn (cap, budget, gate, timeout).
    Stopped,
    /// The agent's work did not pass its verifier (a CLI agent's session): the same agent
    /// takes another turn, whatever the agent said.
    Unverified,
}

/// One thing that happened in a run.
///
/// Every variant's fields, and the fields of every type they hold, are declared in sorted order of
/// their written names (`rename` and `flatten` included): the ledger writes an event's fields
/// straight from it, in declaration order, and its format promises them sorted. A debug build of
/// the ledger checks each record against a sorted re-serialisation, so a field out of place fails
/// the tests that write one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditEvent {
    /// A run began.
    RunStarted {
        /// The first agent.
        agent: AgentId,
        /// The task, as the human gave it.
        task: String,
    },
    /// A genuine human message entered the run (starts a new turn for turn-scoped gates).
    HumanMessage {
        /// Its text: only a person's words make one ([`Said`]).
        content: Said,
    },
    /// A turn began.
    TurnStarted {
        /// The turn's agent.
        agent: AgentId,
    },
    /// A model call finished.
    ModelCall {
        /// Cost of this call in micro-dollars, when a price is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
        /// The model's name, as configured.
        model: String,
        /// How many tool calls the reply made.
        tool_calls: u32,
        /// Tokens used.
        usage: Usage,
    },
    /// What the model answered, recorded right after its [`AuditEvent::ModelCall`] (which holds
    /// the reply's usage and cost). A resumed run feeds this reply back instead of calling the
    /// model again; `replay` re-judges the run against it.
    ModelReply {
        /// How the reply ended (absent: finished; `token_limit`: cut off mid-reply).
        #[serde(default, skip_serializing_if = "crate::model::StopReason::is_finished")]
        stop: crate::model::StopReason,
        /// The reply's visible text.
        text: String,
        /// The tool calls it made, with their ids and arguments, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool call was requested by the model (before any gate looks at it).
    ToolRequested {
        /// Arguments as given.
        arguments: serde_json::Value,
        /// Call id.
        call_id: CallId,
        /// Tool name.
        tool: ToolName,
    },
    /// A tool call passed every gate and its tool is about to run: recorded by the innermost
    /// tool service, just before the effect starts. A call with this record and no
    /// [`AuditEvent::ToolFinished`] was interrupted while its effect may have been under way.
    ToolStarted {
        /// Call id.
        call_id: CallId,
        /// Tool name.
        tool: ToolName,
    },
    /// A gate decided on a tool call or other action. Its text is shared (`Arc<str>`): the
    /// decisions on one call, and of one gate, hold the same strings instead of copies.
    GateDecision {
        /// The action decided on (`tool:write_file`, `handoff:auditor` in the ledger).
        action: Action,
        /// The tool call decided on, when the action is a tool call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<CallId>,
        /// The decision.
        decision: Decision,
        /// The gate: its kind and name (`gate_kind` and `gate` in the ledger).
        #[serde(flatten)]
        gate: GateId,
        /// Its mode.
        mode: GateMode,
        /// Canonical workspace-relative path, when it could be resolved.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<Arc<str>>,
        /// Path as the model wrote it, when the action names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path_raw: Option<Arc<str>>,
        /// Where the deciding rule is written (`loopward.toml:12`: its `[[territory]]`,
        /// `[[gates.review]]` or `[gates.sprawl]`), when it came from a config file; absent for
        /// built-in gates, rules added at run time, and ledgers written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<Arc<str>>,
    },
    /// A one-shot override was consumed (recorded before the write it authorises runs).
    OverrideConsumed {
        /// The agent it was granted to.
        agent: AgentId,
        /// The sentinel's id.
        id: String,
        /// The path it covers.
        path: String,
        /// Why it was granted.
        reason: String,
    },
    /// A tool call finished (or was refused: then `is_error` is set and no effects are listed).
    ToolFinished {
        /// Call id.
        call_id: CallId,
        /// What changed on disk.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        effects: Vec<Effect>,
        /// Whether the model reads it as an error.
        is_error: bool,
        /// The whole result the model read, when the runner recorded it (a resumed run feeds it
        /// back instead of running the call again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// A short summary of the result (the first line, truncated).
        summary: String,
        /// Tool name.
        tool: ToolName,
    },
    /// A write was made that the rules forbid (caught after the fact, e.g. through `shell`).
    Violation {
        /// The path written.
        path: String,
        /// The rule broken.
        reason: String,
        /// What was done about it.
        remedy: Remedy,
    },
    /// A handoff was registered and will end the turn.
    HandoffRegistered(Handoff),
    /// A second handoff in the same turn was refused.
    HandoffRefused {
        /// The handoff that stands.
        standing: AgentId,
        /// The refused target.
        to: AgentId,
    },
    /// A turn ended.
    TurnEnded {
        /// How the run ends after this turn, when the turn ended it (a stop-gate denied, a
        /// subtask was exhausted): a run resumed after this record ends so too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ends_run: Option<RunStatus>,
        /// Why.
        finish: FinishReason,
        /// Tokens used in the turn.
        usage: Usage,
    },
    /// A layer took a decision that is not a gate decision (cap reached, budget spent,
    /// rate-limit wait, timeout, class-jump, approval requested/granted/denied …).
    ///
    /// Read back, its detail is typed where its layer writes a built-in detail that gives the
    /// same bytes again ([`LayerDetail::read`]); JSON otherwise.
    #[serde(deserialize_with = "crate::detail::read_layer_decision")]
    LayerDecision {
        /// What it decided (`cap_reached`, `approved`, `class_jump` … in the ledger).
        decision: LayerVerdict,
        /// Figures and details: typed for the built-in layers' frequent decisions, JSON
        /// otherwise and when read back; written the same either way.
        #[serde(default)]
        detail: LayerDetail,
        /// The layer, typed: a built-in one, or a custom layer by its own name.
        layer: LayerId,
    },
    /// A gate was added, removed or changed at run time.
    GateChanged {
        /// Who changed it.
        by: String,
        /// Added, removed, or its mode set.
        change: GateChange,
        /// The gate's definition after the change (or before, for a removal).
        gate: crate::GateDefinition,
    },
    /// A sandboxed command asked the egress proxy for a connection: allowed or refused, before
    /// any byte went out.
    EgressDecided {
        /// Whether the connection was made.
        allowed: bool,
        /// The shell call whose command asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<CallId>,
        /// The host asked for, as the command named it (a name or an address).
        host: String,
        /// The port.
        port: u16,
        /// Why: the allow-list entry, or what refused it.
        reason: String,
    },
    /// An allowed egress connection ended.
    EgressClosed {
        /// Bytes received from the host and handed to the command.
        bytes_in: u64,
        /// Bytes the command sent to the host.
        bytes_out: u64,
        /// The shell call whose command made it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<CallId>,
        /// The host.
        host: String,
        /// The port.
        port: u16,
    },
    /// The ledger was reopened after a crash and a torn last line was truncated.
    LedgerRecovered {
        /// Bytes dropped.
        truncated_bytes: u64,
    },
    /// A run was started again from its ledger: what follows continues the recorded run.
    RunResumed {
        /// Tool calls that were started but never finished (see the runner's resume rule).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupted: Vec<CallId>,
        /// How the previous part ended (`None`: it was killed before recording its end).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<RunStatus>,
        /// Turns fed back from the ledger.
        replayed_turns: u32,
    },
    /// A run ended.
    RunEnded {
        /// Total cost in micro-dollars, when prices are known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
        /// How.
        status: RunStatus,
        /// Total tokens used.
        usage: Usage,
    },
}

impl AuditEvent {
    /// The event's kind as written in the ledger.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run_started",
            Self::HumanMessage { .. } => "human_message",
            Self::TurnStarted { .. } => "turn_started",
            Self::ModelCall { .. } => "model_call",
            Self::ModelReply { .. } => "model_reply",
            Self::ToolStarted { .. } => "tool_started",
            Self::RunResumed { .. } => "run_resumed",
            Self::ToolRequested { .. } => "tool_requested",
            Self::GateDecision { .. } => "gate_decision",
            Self::OverrideConsumed { .. } => "override_consumed",
            Self::ToolFinished { .. } => "tool_finished",
            Self::Violation { .. } => "violation",
            Self::HandoffRegistered(_) => "handoff_registered",
            Self::HandoffRefused { .. } => "handoff_refused",
            Self::TurnEnded { .. } => "turn_ended",
            Self::LayerDecision { .. } => "layer_decision",
            Self::GateChanged { .. } => "gate_changed",
            Self::EgressDecided { .. } => "egress_decided",
            Self::EgressClosed { .. } => "egress_closed",
            Self::LedgerRecovered { .. } => "ledger_recovered",
            Self::RunEnded { .. } => "run_ended",
        }
    }

    /// Whether a sink may hold the event in memory until the next
    /// [`commit`](AuditSink::commit) (or the next event it does not hold) and write them
    /// together: the event is a step on the way to an action that has not run yet — the turn's
    /// start, a verdict that lets the action through, the tool request, the model call whose
    /// reply is recorded right after it. A killed process that loses such an event had not acted
    /// on it; everything else — a tool's start (a tool may release its effect right after
    /// recording it), a reply, an effect's end, a refusal, a person's word — is written when it
    /// is recorded.
    pub fn may_wait_for_commit(&self) -> bool {
        match self {
            Self::TurnStarted { .. } | Self::ModelCall { .. } | Self::ToolRequested { .. } => true,
            Self::GateDecision { decision, .. } => matches!(decision, Decision::Allow),
            Self::LayerDecision { decision, .. } => matches!(
                decision,
                LayerVerdict::Allow | LayerVerdict::Admitted | LayerVerdict::AutoApproved
            ),
            _ => false,
        }
    }

    /// Whether the event authorises an action and must be durable before the action runs.
    pub fn is_decision(&self) -> bool {
        matches!(
            self,
            Self::GateDecision { .. }
                | Self::EgressDecided { .. }
                | Self::OverrideConsumed { .. }
                | Self::LayerDecision { .. }
                | Self::HandoffRegistered(_)
        )
    }
}

/// Receives audit events. Implemented by the ledger (and by test sinks).
///
/// `record` writes the event (once it returns, a killed process no longer loses it), except
/// that events which [may wait for the commit](AuditEvent::may_wait_for_commit) may be held
/// until the next `commit` or the next event written at once, so that one `write` carries them
/// all; an error means the action the event describes must not run. [`AuditEvent::is_decision`]
/// events must also be on stable storage before the action they authorise runs: whoever is about
/// to run an action calls [`commit`](AuditSink::commit) first, so all the decisions gating one
/// action share one sync (a group commit) instead of one each.
pub trait AuditSink: Send + Sync {
    /// Records one event.
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError>;

    /// Records one event the caller no longer needs: a sink that keeps events (in memory)
    /// takes it instead of copying it. The default records it by reference; whatever a sink
    /// does here must mean the same as [`record`](AuditSink::record).
    fn record_owned(&self, scope: &Scope, event: AuditEvent) -> Result<(), AuditError> {
        self.record(scope, &event)
    }

    /// Writes every event held so far and makes every decision recorded so far durable; called
    /// just before the action they authorise runs (a tool's effect, a model call). An error
    /// means that action must not run.
    /// Sinks without stable storage have nothing to do (the default); a sink that wraps another
    /// forwards it.
    fn commit(&self) -> Result<(), AuditError> {
        Ok(())
    }
}

/// The ledger could not record an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit ledger write failed: {0}")]
pub struct AuditError(pub String);
