//! The tool-call service boundary: what a tool call is, what it returns, how tools declare what
//! they will touch, and the innermost service that runs them.
//!
//! Gates and other layers wrap [`ToolExecutor`]; they see every call before it runs, with the
//! [`Access`]es the tool declared, already resolved by the workspace canonicaliser.

mod error;
mod executor;
mod set;

pub use error::ToolError;
pub use executor::ToolExecutor;
pub use set::ToolSet;

use crate::context::TurnContext;
use crate::workspace::WorkPath;
use futures::future::BoxFuture;
use loopward_core::{AgentId, Effect, ToolCall, ToolSpec};
use std::sync::Arc;

/// What a tool call will touch, declared by the tool before it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Reads a path.
    Read(WorkPath),
    /// Creates or modifies a file.
    Write(WorkPath),
    /// Deletes a path.
    Delete(WorkPath),
    /// Moves `from` to `to` (a write at both ends).
    Rename {
        /// Source.
        from: WorkPath,
        /// Destination.
        to: WorkPath,
    },
    /// Creates a link at `path` pointing at `target` (a write at both).
    Link {
        /// Where the link is created.
        path: WorkPath,
        /// Where it points.
        target: WorkPath,
    },
    /// Replaces the text `old` with `new` in the file at `path` (a write there; the same
    /// replacement across many files is one unit of work for the sprawl gate).
    Edit {
        /// The file.
        path: WorkPath,
        /// The text replaced.
        old: String,
        /// The text put in its place.
        new: String,
    },
    /// Hands the work to another agent (the review gates and one-handoff rule judge it).
    Handoff {
        /// The agent taking over.
        to: AgentId,
    },
    /// Runs a command whose writes cannot be known in advance; judged by what it changes.
    Exec,
}

impl Access {
    /// The paths this access writes (empty for reads and exec).
    pub fn written_paths(&self) -> Vec<&WorkPath> {
        match self {
            Self::Read(_) | Self::Exec | Self::Handoff { .. } => vec![],
            Self::Write(p) | Self::Delete(p) | Self::Edit { path: p, .. } => vec![p],
            Self::Rename { from, to } => vec![from, to],
            Self::Link { path, target } => vec![path, target],
        }
    }
}

/// One tool call on its way through the tool stack.
#[derive(Clone)]
pub struct ToolInvocation {
    /// The call as the model made it.
    pub call: ToolCall,
    /// The tool that will run it.
    pub tool: Arc<dyn Tool>,
    /// What it will touch, resolved.
    pub accesses: Vec<Access>,
    /// The turn it belongs to.
    pub turn: TurnContext,
}

impl std::fmt::Debug for ToolInvocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolInvocation")
            .field("call", &self.call)
            .field("accesses", &self.accesses)
            .finish_non_exhaustive()
    }
}

/// What a tool call returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Whether the model should read it as an error.
    pub is_error: bool,
    /// What changed on disk.
    pub effects: Vec<Effect>,
}

impl ToolOutput {
    /// A successful result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    /// A successful result with effects.
    pub fn with_effects(content: impl Into<String>, effects: Vec<Effect>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            effects,
        }
    }
}

/// A tool an agent can call.
///
/// `accesses` validates the arguments and declares what the call will touch, so gates can
/// decide before anything runs. `call` does the work.
pub trait Tool: Send + Sync + 'static {
    /// The spec shown to the model.
    fn spec(&self) -> ToolSpec;

    /// Validates `arguments` and declares what the call will touch.
    fn accesses(
        &self,
        arguments: &serde_json::Value,
        turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError>;

    /// Runs the call.
    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;

    /// Whether the tool records [`AuditEvent::ToolStarted`](loopward_core::AuditEvent) itself
    /// and commits the audit sink ([`TurnContext::commit`](crate::TurnContext::commit)), at the
    /// moment its effect is released (the shell tool: after the command's process
    /// exists and before it may run). Otherwise [`ToolExecutor`] records it just before calling
    /// the tool. Either way, a call with no such record had no effect.
    fn records_own_start(&self) -> bool {
        false
    }
}

/// The JSON schema of a tool's arguments: an object with exactly `properties`, of which
/// `required` must be given (the built-in tools' one shape: no other member is accepted).
pub(crate) fn object_schema(properties: serde_json::Value, required: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// Parses arguments into a typed struct, turning serde's message into a correctable error.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: &serde_json::Value,
) -> Result<T, ToolError> {
    if !arguments.is_object() {
        return Err(ToolError::BadArguments {
            tool: tool.into(),
            why: format!(
                "arguments must be a JSON object, got {}",
                json_kind(arguments)
            ),
        });
    }
    serde_json::from_value(arguments.clone()).map_err(|e| ToolError::BadArguments {
        tool: tool.into(),
        why: e.to_string(),
    })
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The type-erased tool-call service that stacks are built from.
pub type BoxToolService = tower::util::BoxCloneSyncService<ToolInvocation, ToolOutput, ToolError>;
