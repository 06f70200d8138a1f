//! A tool call's id and a tool's name, as types: both are any string a model or host gives (a
//! model names its calls, a client names its tools), so the types do not validate; they keep an
//! id from being passed as a name, or either as a path. Written in the ledger as the bare string.
//!
//! ```
//! use loopward_core::{CallId, ToolName};
//! let id = CallId::from("toolu_01");
//! let tool = ToolName::from(String::from("write_file"));
//! assert_eq!((id.as_str(), tool.as_str()), ("toolu_01", "write_file"));
//! assert!(tool == "write_file" && id.to_string() == "toolu_01");
//! // The ledger's bytes are the string.
//! assert_eq!(serde_json::to_string(&tool).unwrap(), r#""write_file""#);
//! let back: CallId = serde_json::from_str(r#""toolu_01""#).unwrap();
//! assert_eq!(back, id);
//! ```
//!
//! An id is not a name:
//!
//! ```compile_fail
//! fn run(_: &loopward_core::ToolName) {}
//! run(&loopward_core::CallId::from("c1"));
//! ```

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

macro_rules! shared_str {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        ///
        /// Cloning one is a reference-count increment: the decisions on one call share its text.
        /// Its `Debug` is the string's (`"toolu_01"`), as in the messages that quote one.
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The text as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.into())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s.into())
            }
        }

        impl From<&String> for $name {
            fn from(s: &String) -> Self {
                Self(s.as_str().into())
            }
        }

        impl From<Arc<str>> for $name {
            fn from(s: Arc<str>) -> Self {
                Self(s)
            }
        }

        impl From<$name> for Arc<str> {
            fn from(s: $name) -> Self {
                s.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == &*other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == &*other.0
            }
        }
    };
}

shared_str!(
    /// The id a model (or a client) gave one tool call: unique within its reply, and how its
    /// result, its gate decisions and its ledger records name it.
    CallId
);

shared_str!(
    /// The name of a tool, as the agent's tool set or the client names it (`write_file`,
    /// `Bash`, `mcp__fs__read`).
    ToolName
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditEvent, ToolCall};

    #[test]
    fn a_record_with_a_call_id_and_a_tool_name_reads_back_to_the_same_bytes() {
        let lines = [
            r#"{"kind":"tool_requested","arguments":{"path":"a.md"},"call_id":"toolu_01","tool":"write_file"}"#,
            r#"{"kind":"tool_finished","call_id":"c-ü","is_error":false,"summary":"ok","tool":"mcp__fs__read"}"#,
            r#"{"kind":"model_reply","text":"","tool_calls":[{"arguments":{},"id":"","name":"shell"}]}"#,
        ];
        for line in lines {
            let event: AuditEvent = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&event).unwrap(), line);
        }
        let call = ToolCall::new("c1", "shell", serde_json::json!({}));
        assert_eq!((call.id.as_str(), call.name.as_str()), ("c1", "shell"));
    }

    #[test]
    fn debug_quotes_the_string_as_messages_do() {
        let name = ToolName::from("no_such_tool");
        assert_eq!(
            format!("no tool named {name:?}"),
            r#"no tool named "no_such_tool""#
        );
    }

    #[test]
    fn clones_share_the_text() {
        let id = CallId::from("c1");
        let again = id.clone();
        assert!(std::ptr::eq(id.as_str(), again.as_str()));
    }
}
