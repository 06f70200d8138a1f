//! What a gate approves: one exact action.

use crate::layers::call_digest;
use loopward_core::{Action, AgentId, InvalidAction, ToolName};
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
        tool: ToolName,
        /// [`call_digest`] of the tool and its arguments.
        digest: String,
    },
}

impl GatedAction {
    /// The action of calling `tool` with `arguments`.
    pub fn tool(tool: impl Into<ToolName>, arguments: &serde_json::Value) -> Self {
        let tool = tool.into();
        Self::Tool {
            digest: call_digest(tool.as_str(), arguments),
            tool,
        }
    }

    /// A stable one-line key: `turn:<agent>`, `phase:<name>`, `tool:<tool>:<digest>` (its
    /// [`Display`](std::fmt::Display); [`str::parse`] reads it back).
    pub fn key(&self) -> String {
        self.to_string()
    }

    /// The [`Action`] it is, without the arguments' digest (what the ledger's `action` fields
    /// name).
    pub fn action(&self) -> Action {
        match self {
            Self::Turn { agent } => Action::Turn(agent.clone()),
            Self::Phase { name } => Action::Phase(name.as_str().into()),
            Self::Tool { tool, .. } => Action::tool(tool.clone()),
        }
    }
}

impl std::fmt::Display for GatedAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tool { tool, digest } => write!(f, "tool:{tool}:{digest}"),
            other => other.action().fmt(f),
        }
    }
}

/// Reads a [`GatedAction::key`] back; a tool's key must end in its digest.
///
/// ```
/// use loopward_runner::layers::stopgate::GatedAction;
/// use serde_json::json;
/// let a = GatedAction::tool("mcp:deploy", &json!({"env": "prod"}));
/// assert_eq!(a.key().parse::<GatedAction>().unwrap(), a);
/// assert_eq!("turn:reviewer".parse::<GatedAction>().unwrap().key(), "turn:reviewer");
/// assert!("tool:deploy".parse::<GatedAction>().is_err(), "no digest");
/// assert!("handoff:auditor".parse::<GatedAction>().is_err(), "not a stop-gate action");
/// ```
impl std::str::FromStr for GatedAction {
    type Err = InvalidAction;

    fn from_str(key: &str) -> Result<Self, InvalidAction> {
        let bad = |why: &str| InvalidAction {
            text: key.to_string(),
            why: why.to_string(),
        };
        match key.parse::<Action>()? {
            Action::Turn(agent) => Ok(Self::Turn { agent }),
            Action::Phase(name) => Ok(Self::Phase {
                name: name.to_string(),
            }),
            Action::Tool(rest) => match rest.as_str().rsplit_once(':') {
                Some((tool, digest))
                    if !tool.is_empty()
                        && digest.len() == 64
                        && digest.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    Ok(Self::Tool {
                        tool: tool.into(),
                        digest: digest.into(),
                    })
                }
                _ => Err(bad(
                    "a gated tool call's key ends in :<sha-256 of its arguments>",
                )),
            },
            _ => Err(bad("a stop-gate gates turns, phases and tool calls")),
        }
    }
}
