//! Human stop-gates. A gate stands before an agent's turn, a named phase, a tool, writes under
//! a glob, or a handoff to a named agent, and answers in one of four [`StopMode`]s:
//! `interactive` (asks a person through an [`Approver`] the application provides), `auto`
//! (approves and logs it), `deny`, and `durable` (writes a pending record under
//! `.loopward/pending/`, ends the run [`AwaitingApproval`](loopward_core::RunStatus::AwaitingApproval),
//! and runs the action exactly once after [`approve`] when the run is started again — also in
//! a new process).
//!
//! What a gate grants is an [`Approval`]: no public constructor, not `Clone`, bound to one
//! [`GatedAction`] (the phase, the agent's turn, or the tool and the SHA-256 of its canonical
//! arguments). The gated services run an action only after an approval for that exact action
//! was consumed. A denied tool call is a correctable refusal the model reads; a denied turn or
//! phase ends the run `Stopped`. Every verdict is a `LayerDecision { layer: "stopgate" }`.
//!
//! ```
//! use loopward_core::RunStatus;
//! use loopward_runner::layers::stopgate::{approve, list_pending, pending_dir, StopGateConfig,
//!     StopGates, StopMode};
//! use loopward_runner::layers::testing::{run, turn, Probe};
//! use loopward_runner::tool::{ToolError, ToolExecutor};
//! use serde_json::json;
//! use tower::{Layer, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)]).unwrap();
//! let tools = gates.tool_layer().layer(ToolExecutor);
//! let deploy = Probe::new("deploy");
//! let dir = tempfile::tempdir().unwrap();
//!
//! // First run: the call is refused and a pending record is written.
//! let (r1, _) = run(dir.path(), "r1");
//! let t = turn(&r1, "builder", 1);
//! let out = tools.clone().oneshot(deploy.invocation(&t, json!({"env": "prod"}))).await;
//! assert!(matches!(out, Err(ToolError::Refused(_))));
//! let pending = list_pending(&pending_dir(dir.path())).unwrap();
//! assert_eq!(pending.len(), 1);
//!
//! // A person approves; the run is started again (fresh state, same files).
//! approve(&pending_dir(dir.path()), &pending[0].id).unwrap();
//! let (r1_again, _) = run(dir.path(), "r1");
//! let t = turn(&r1_again, "builder", 1);
//! tools.clone().oneshot(deploy.invocation(&t, json!({"env": "prod"}))).await.unwrap();
//! assert_eq!(deploy.calls(), 1);
//! # });
//! ```

mod action;
mod approval;
mod config;
mod durable;
mod gates;
mod service;

pub use action::GatedAction;
pub use approval::{Answer, Approval, ApprovalMismatch, ApprovalRequest, Approver, Granted};
pub use config::{StopGateConfig, StopMode};
pub use durable::{
    approve, deny, find_pending, list_pending, pending_dir, ApprovalStore, Decided, DurableError,
    PendingApproval, PendingScan, PendingState, Skipped, MAX_DECIDER_BYTES, MAX_RECORD_BYTES,
    PENDING_DIR,
};
pub use gates::StopGates;
pub use service::{
    StopGatePolicy, StopGateToolLayer, StopGateToolService, StopGateTurnLayer, StopGateTurnService,
};
