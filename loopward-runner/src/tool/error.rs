//! Errors of a tool call. Every one becomes an error result the model reads in the same turn.

use crate::workspace::PathError;
use loopward_core::{AuditError, Refusal, ToolName};

/// Why a tool call did not succeed. The `Display` text is what the model reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The model named a tool that does not exist.
    #[error("there is no tool named {name:?}; available tools: {available}")]
    UnknownTool {
        /// The name given (its first 80 characters).
        name: ToolName,
        /// The tools that exist, comma-separated.
        available: String,
    },
    /// The arguments do not match the tool's schema.
    #[error(
        "invalid arguments for {tool}: {why}; call it again with arguments that match its schema"
    )]
    BadArguments {
        /// The tool.
        tool: ToolName,
        /// What is wrong.
        why: String,
    },
    /// A path was refused by the canonicaliser.
    #[error("{0}")]
    Path(#[from] PathError),
    /// A gate or layer refused the call.
    #[error("{0}")]
    Refused(Refusal),
    /// The call ran and failed (file not found, command failed, …).
    #[error("{0}")]
    Failed(String),
    /// The call took too long and was stopped.
    #[error("the call took longer than {secs}s and was stopped; try a smaller step")]
    Timeout {
        /// The limit, in seconds.
        secs: u64,
    },
    /// The audit ledger could not record the call; it did not run.
    #[error("not run: the audit ledger could not record it ({})", .0.0)]
    Audit(#[from] AuditError),
}

impl ToolError {
    /// Whether this error must stop the run rather than go back to the model: only
    /// [`ToolError::Audit`], which carries the ledger's [`AuditError`] on to
    /// [`TurnError::Audit`](crate::TurnError::Audit).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Audit(_))
    }
}
