//! Tool calls, their results, and the specs that describe tools to a model.

use crate::call::{CallId, ToolName};
use serde::{Deserialize, Serialize};

/// A tool call as the model made it. Arguments are kept as raw JSON: validating them is the
/// tool stack's job, and a malformed call must still be recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    // Fields in sorted order of their names: the ledger writes them as declared (see `AuditEvent`).
    /// The arguments the model gave (should be a JSON object; may not be).
    pub arguments: serde_json::Value,
    /// The call id, unique within one model reply.
    pub id: CallId,
    /// The tool the model asked for.
    pub name: ToolName,
}

impl ToolCall {
    /// Builds a tool call.
    pub fn new(
        id: impl Into<CallId>,
        name: impl Into<ToolName>,
        arguments: serde_json::Value,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// What a tool call returned to the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: CallId,
    /// The tool's name (repeated for readability of transcripts).
    pub name: ToolName,
    /// The text the model reads.
    pub content: String,
    /// Whether the call failed or was refused; the model reads this as a correctable error.
    #[serde(default)]
    pub is_error: bool,
}

/// Describes a tool to a model: its name, what it does, and a JSON schema of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: ToolName,
    /// One or two sentences the model reads to decide when to call it.
    pub description: String,
    /// A JSON schema (an object schema) for the arguments.
    pub parameters: serde_json::Value,
}
