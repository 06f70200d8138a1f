//! Handoffs: one agent passing the work to another.

use crate::id::AgentId;
use serde::{Deserialize, Serialize};

/// A request, made by a tool call, to end this turn and give the work to another agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    // Fields in sorted order of their names: the ledger writes them as declared (see `AuditEvent`).
    /// The agent handing off.
    pub from: AgentId,
    /// What the next agent is told.
    pub message: String,
    /// The agent that takes over.
    pub to: AgentId,
}
