//! What a hook answers, and the JSON it prints on stdout for the client.

use serde_json::{json, Map, Value};

/// What a hook answers, before it is rendered to stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Print nothing, exit 0: Claude Code carries on as it would without the hook.
    Silent,
    /// `PreToolUse`: the gates allow the call.
    Allow {
        /// Why (shown in Claude Code's debug log).
        reason: String,
    },
    /// `PreToolUse`: if it runs, the call runs as rewritten (`updatedInput`): a `Bash` command
    /// wrapped in loopward's sandbox. No `permissionDecision` is given, so whether it runs stays
    /// the client's own decision (its permission mode and rules, asking the person where they
    /// say to): the wrap never turns a call the client would ask about into one it runs.
    Rewrite {
        /// Why (shown in Claude Code's debug log).
        reason: String,
        /// The tool's whole input, as it must run.
        input: Value,
    },
    /// `PreToolUse`: the gates deny the call; the reason is shown to the model.
    Deny {
        /// What was wrong and what to do instead.
        reason: String,
    },
    /// `PostToolUse`: the call already ran; the reason is fed back to the model.
    Block {
        /// What was reverted and why.
        reason: String,
    },
    /// `PostToolUseFailure`: the call failed; the text is added to the model's context.
    FailureContext {
        /// What was reverted and why.
        context: String,
    },
}

impl Reply {
    /// `PreToolUse`: the call denied, the refusal's text shown to the model.
    pub(crate) fn denied(refusal: &impl std::fmt::Display) -> Self {
        Self::Deny {
            reason: refusal.to_string(),
        }
    }

    /// The JSON printed on stdout for this reply (empty for [`Reply::Silent`]).
    pub fn render(&self) -> String {
        let value = match self {
            Self::Silent => return String::new(),
            Self::Allow { reason } => pre_tool_use("allow", reason),
            Self::Deny { reason } => pre_tool_use("deny", reason),
            Self::Rewrite { reason, input } => json!({ "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecisionReason": reason,
                "updatedInput": input,
            } }),
            Self::Block { reason } => json!({ "decision": "block", "reason": reason }),
            Self::FailureContext { context } => json!({ "hookSpecificOutput": {
                "hookEventName": "PostToolUseFailure", "additionalContext": context } }),
        };
        let mut out = value.to_string();
        out.push('\n');
        out
    }
}

fn pre_tool_use(decision: &str, reason: &str) -> Value {
    let mut inner = Map::new();
    inner.insert("hookEventName".into(), json!("PreToolUse"));
    inner.insert("permissionDecision".into(), json!(decision));
    inner.insert("permissionDecisionReason".into(), json!(reason));
    json!({ "hookSpecificOutput": Value::Object(inner) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_renders_claude_codes_permission_decision() {
        let out = Reply::Deny {
            reason: "no".into(),
        }
        .render();
        assert_eq!(
            out,
            "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"no\"}}\n"
        );
        assert_eq!(Reply::Silent.render(), "");
    }

    #[test]
    fn a_rewrite_leaves_the_permission_decision_to_the_client() {
        let out = Reply::Rewrite {
            reason: "wrapped".into(),
            input: json!({"command": "wrapped"}),
        }
        .render();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["updatedInput"]["command"],
            "wrapped"
        );
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert!(
            v["hookSpecificOutput"].get("permissionDecision").is_none(),
            "{out}"
        );
    }
}
