//! What a gate approves: one exact action.

use crate::layers::call_digest;
use loopward_core::AgentId;
use serde::{Deserialize, Serialize};

/// The exact action an [`Approval`](super::Approval) is bound to.
///
/// ```
/// use loopward_runner::layers::stopgate::GatedAction;
/// use serde_json::json;
/// let a = GatedAction::tool("write_file", &json!({"path": "a.txt", "content": "x"}));
/// let b = GatedAction::tool("write_file", &json!({"content": "x", "path": "a.txt"}));
/// assert_eq!(a, b); // key order does not matter
/// assert_ne!(a, GatedAction::tool("write_file", &json!({"path": "b.txt", "content": "x"})));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum GatedAction {
    /// An agent's turn.
    Turn {
        /// The agent.
        agent: AgentId,
    },
    /// Entering a named phase.
    Phase {
        /// The phase.
        name: String,
    },
    /// One tool call: the tool and the SHA-256 of its canonical arguments.
    Tool {
        /// The tool.
        tool: String,
        /// [`call_digest`] of the tool and its arguments.
        digest: String,
    },
}

impl GatedAction {
    /// The action of calling `tool` with `arguments`.
    pub fn tool(tool: &str, arguments: &serde_json::Value) -> Self {
        Self::Tool {
            tool: tool.into(),
            digest: call_digest(tool, arguments),
        }
    }

    /// A stable one-line key: `turn:<agent>`, `phase:<name>`, `tool:<tool>:<digest>`.
    pub fn key(&self) -> String {
        match self {
            Self::Turn { agent } => format!("turn:{agent}"),
            Self::Phase { name } => format!("phase:{name}"),
            Self::Tool { tool, digest } => format!("tool:{tool}:{digest}"),
        }
    }
}
