//! # loopward-core
//!
//! The vocabulary of loopward, shared by the runner, its layers and gates, and anyone who writes
//! their own: ids, messages with a typed [`Origin`], tool calls and results, [`Effect`]s on disk,
//! [`Handoff`]s, [`Usage`], gate [`Decision`]s with correctable [`Refusal`]s, and the closed set of
//! [`AuditEvent`]s a run records.
//!
//! This crate does no IO, spawns nothing and prints nothing.
//!
//! | concept | type |
//! |---|---|
//! | who is speaking | [`Message`], [`Origin`] (only `Human` is a person) |
//! | what the model asked | [`ToolCall`] ([`CallId`], [`ToolName`]), [`ToolSpec`] |
//! | what the tool answered | [`ToolResult`] |
//! | what changed on disk | [`Effect`], [`EffectKind`], [`EffectStatus`] |
//! | passing the work on | [`Handoff`] |
//! | what was decided on | [`Action`] (`tool:write_file`, `handoff:auditor`) |
//! | what a gate said | [`GateId`] ([`GateKind`] + name), [`Decision`], [`Refusal`] ([`RefusedBy`]), [`GateMode`] |
//! | what a layer said | [`LayerVerdict`], [`VerdictEffect`], [`LayerDetail`] (typed or JSON figures) |
//! | which turn a model call belongs to | [`model::TurnSlot`] (opaque here; the runner fills it) |
//! | what the ledger records | [`AuditEvent`], [`Scope`], [`AuditSink`], [`Remedy`] |
//! | a gate changed at run time | [`GateChange`], [`GateDefinition`] ([`GateRules`] by kind) |
//!
//! ```
//! use loopward_core::{AgentId, Decision, GateKind, Refusal};
//! let planner = AgentId::new("planner").unwrap();
//! let d = Decision::Deny(Refusal::new(
//!     GateKind::Territory,
//!     format!("plan.md belongs to {planner}"),
//!     "hand the change to planner",
//! ));
//! assert!(!d.permits());
//! ```

mod action;
mod audit;
mod audit_data;
mod call;
mod chat;
mod decision;
mod detail;
mod effect;
mod gate_definition;
mod handoff;
mod id;
mod layer_id;
mod message;
pub mod model;
mod person;
mod refusal;
mod remedy;
mod slot;
mod tool;
mod usage;
mod verdict;

pub use action::{Action, InvalidAction};
pub use audit::{AuditError, AuditEvent, AuditSink, FinishReason, RunStatus, Scope};
pub use call::{CallId, ToolName};
pub use chat::{ChatMessage, ChatRole, NOTICE_MARK};
pub use decision::{Decision, GateChange, GateId, GateKind, GateMode};
pub use detail::{
    BudgetExceededDetail, CapReachedDetail, CapsAllowDetail, ClassJumpDetail,
    ClassJumpRefusedDetail, HookDetail, HookEventDetail, InboxRefusedDetail, LayerDetail,
    NoProgressDetail, PolicyVersionDetail, RateLimitDetail, RepeatDetail, ReportedCostDetail,
    ResumeDetail, SessionChangesDetail, SessionEndedDetail, SessionLedgerDetail,
    SessionStartedDetail, StopGateDetail, StopRefusedDetail, StoppedDetail, TimeoutDetail,
    VerifyDetail, WallTimeDetail, WrappedUpDetail,
};
pub use effect::{Effect, EffectKind, EffectStatus};
pub use gate_definition::{
    GateDefinition, GateRules, ListedGate, ReviewRules, ShownGate, SprawlRules, TerritoryRules,
};
pub use handoff::Handoff;
pub use id::{AgentId, InvalidAgentId, RunId, TurnNumber, MAX_AGENT_NAME};
pub use layer_id::LayerId;
pub use message::{HumanWords, Message, Origin, Said};
pub use person::Person;
pub use refusal::{Refusal, RefusedBy};
pub use remedy::Remedy;
pub use tool::{ToolCall, ToolResult, ToolSpec};
pub use usage::{Price, Usage};
pub use verdict::{LayerVerdict, VerdictEffect};
