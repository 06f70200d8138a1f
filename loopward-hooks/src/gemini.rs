//! Google Gemini CLI's hook protocol, where it differs from Claude Code's (Gemini CLI 0.61.0's
//! own `docs/hooks/reference.md`, shipped in its npm package).
//!
//! - Events: `BeforeTool` (before a tool runs: loopward's `PreToolUse`), `AfterTool` (after it:
//!   `PostToolUse`; with `tool_response.error` set, a failed call), `BeforeAgent` (a person's
//!   prompt: a new turn). Claude Code's event names are not Gemini's: sent to this hook they are
//!   refused, as a config meant for another host.
//! - Tools: `write_file {file_path, content}` is a write, `replace {file_path, old_string,
//!   new_string}` an edit, `run_shell_command {command}` a command; any other tool name is one
//!   the installed matcher does not send, so the hook denies it rather than guess.
//! - No call id: a call is known by a hash of its tool and arguments ([`call_id`]), the wrapped
//!   shell command read back as the command it wraps, so `BeforeTool` and `AfterTool` pair up.
//!   Two identical calls in flight at once share it.
//! - No subagent in the events: every call is the main agent's.
//! - Answers: `{"decision": "deny", "reason": …}` refuses a call (the reason goes to the model);
//!   `hookSpecificOutput.tool_input` merges into the arguments (the wrapped command); after a
//!   call, `hookSpecificOutput.additionalContext` is appended to its result (a reverted write);
//!   an allowed call gets no answer.
//!
//! ```
//! use loopward_hooks::gemini::call_id;
//! use serde_json::json;
//! let plain = call_id("run_shell_command", &json!({"command": "ls"}));
//! let wrapped = call_id("run_shell_command",
//!     &json!({"command": "'/bin/loopward' sandbox exec --config '/p/l.toml' --agent 'root' --session 's' -- bash -c 'ls'"}));
//! assert_eq!(plain, wrapped);
//! assert_ne!(plain, call_id("run_shell_command", &json!({"command": "ls -a"})));
//! ```

use super::claude_code::Reply;
use loopward_core::CallId;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The event loopward reads a Gemini CLI event name as, given whether the call failed.
pub(crate) fn event_name(name: &str, failed: bool) -> Result<&'static str, ()> {
    Ok(match name {
        "BeforeTool" => "PreToolUse",
        "AfterTool" if failed => "PostToolUseFailure",
        "AfterTool" => "PostToolUse",
        "BeforeAgent" => "UserPromptSubmit",
        // Claude Code's and Codex's tool events: a config written for another host.
        "PreToolUse" | "PostToolUse" | "PostToolUseFailure" | "UserPromptSubmit" => return Err(()),
        _ => "Other",
    })
}

/// Whether `name` is an event only Gemini CLI sends (another host's hook refuses it).
pub(crate) fn is_own_event(name: &str) -> bool {
    matches!(
        name,
        "BeforeTool"
            | "AfterTool"
            | "BeforeAgent"
            | "AfterAgent"
            | "BeforeModel"
            | "AfterModel"
            | "BeforeToolSelection"
    )
}

/// The id of a Gemini CLI tool call: a hash of its tool and arguments, with a command loopward
/// wrapped in its sandbox read as the command it wraps.
pub fn call_id(tool: &str, input: &Value) -> CallId {
    let mut input = input.clone();
    if let Some(cmd) = input.get("command").and_then(Value::as_str) {
        if let Some(inner) = unwrapped(cmd) {
            input["command"] = Value::String(inner);
        }
    }
    // serde_json's map is sorted: the same arguments hash alike whatever their order.
    let digest = Sha256::digest(format!("{tool}\0{input}").as_bytes());
    format!("gemini-{}", hex::encode(&digest[..12])).into()
}

/// The command inside `'<exe>' sandbox exec … -- bash -c '<command>'`, if `cmd` is one.
fn unwrapped(cmd: &str) -> Option<String> {
    if !cmd.starts_with('\'') || !cmd.contains("' sandbox exec --config ") {
        return None;
    }
    let (_, tail) = cmd.split_once(" -- bash -c '")?;
    let quoted = tail.strip_suffix('\'')?;
    Some(quoted.replace("'\\''", "'"))
}

/// `reply` as Gemini CLI reads it on stdout (see the [module docs](self)).
pub(crate) fn render(reply: &Reply) -> String {
    let value = match reply {
        Reply::Silent | Reply::Allow { .. } => return String::new(),
        Reply::Deny { reason } => json!({ "decision": "deny", "reason": reason }),
        Reply::Rewrite { input, .. } => json!({ "hookSpecificOutput": { "tool_input": input } }),
        Reply::Block { reason } | Reply::FailureContext { context: reason } => {
            json!({ "hookSpecificOutput": { "additionalContext": reason } })
        }
    };
    let mut out = value.to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_inside_the_wrapped_command_reads_back() {
        let w = "'/x' sandbox exec --config '/c' --agent 'a' --session 's' -- bash -c 'echo '\\''hi'\\'''";
        assert_eq!(unwrapped(w).as_deref(), Some("echo 'hi'"));
        assert_eq!(unwrapped("echo -- bash -c 'x'"), None);
    }

    #[test]
    fn claude_code_events_are_not_gemini_events() {
        assert!(event_name("PreToolUse", false).is_err());
        assert_eq!(event_name("AfterTool", true), Ok("PostToolUseFailure"));
        assert_eq!(event_name("SessionStart", false), Ok("Other"));
    }

    #[test]
    fn a_deny_carries_the_reason_gemini_sends_to_the_model() {
        let out = render(&Reply::Deny {
            reason: "no".into(),
        });
        assert_eq!(out, "{\"decision\":\"deny\",\"reason\":\"no\"}\n");
        assert_eq!(
            render(&Reply::Allow {
                reason: "ok".into()
            }),
            ""
        );
    }
}
