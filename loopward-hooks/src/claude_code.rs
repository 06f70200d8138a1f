//! Claude Code's hook protocol: the JSON a hook command reads on stdin and the answers it gives.
//!
//! What this module relies on (Claude Code hooks reference, code.claude.com/docs/en/hooks, as
//! summarised in the hook input/output tables of the `claudetto` wiki pages "Claude Code Hooks
//! Events Tool" and "Claude Code Hooks Output", and the Agent SDK's `PreToolUseHookInput` /
//! `PostToolUseHookInput` types):
//!
//! - Every event carries `session_id`, `transcript_path`, `cwd` and `hook_event_name`; newer
//!   versions add fields (`permission_mode`, `prompt_id`, …), so unknown fields are ignored.
//! - Tool events carry `tool_name`, `tool_input` (file paths are absolute) and `tool_use_id`;
//!   `PostToolUse` adds `tool_response`. Inside a subagent, `agent_id` and `agent_type` (the
//!   subagent's name) are present; the main agent's events omit them.
//! - `UserPromptSubmit` carries `prompt`. Plain stdout on exit 0 would be added to the model's
//!   context, so this hook prints nothing for it.
//! - `PreToolUse` answers with `hookSpecificOutput.permissionDecision` (`allow` skips Claude
//!   Code's own permission prompt but not its deny rules; `deny` blocks and shows
//!   `permissionDecisionReason` to the model).
//! - `hookSpecificOutput.updatedInput` replaces the tool's input. Given without a
//!   `permissionDecision`, the client still makes its own permission decision (its mode, its
//!   allow/ask/deny rules), on the replaced input: in the default mode without a rule that
//!   allows it, a rewritten `Bash` call is asked about (refused in `-p`), with `"allow"` it
//!   would run unasked, and `"ask"` asks even where a rule allows it. Checked against Claude
//!   Code 2.1.332 (`loopward-cli/tests/clients/`). Because the rules are matched
//!   against the replaced input, a rule naming the original command (`Bash(npm test:*)`,
//!   `deny: Bash(curl:*)`) no longer matches it.
//! - `PostToolUse` cannot undo a tool call; `{"decision": "block", "reason": …}` feeds the reason
//!   back to the model, which is how a reverted shell write is reported.
//! - A tool call that fails (a `Bash` command exiting non-zero, an interrupted one) fires
//!   `PostToolUseFailure` instead, with `error`; it can only add context for the model
//!   (`hookSpecificOutput.additionalContext`). A failed command may still have written files, so
//!   it is judged like a finished one.
//! - Exit status 2 is a blocking error whose stderr is the reason; any other non-zero status is a
//!   non-blocking error and the tool goes ahead. So every failure of this hook exits 2.
//!
//! This file reads the input into an [`Event`]; `tool.rs` holds the tools and how each host's
//! names map to them, `reply.rs` the answers and their JSON.
//!
//! ```
//! use loopward_hooks::claude_code::{HookInput, Event, ClaudeTool};
//! let input = HookInput::parse(r#"{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/p",
//!     "hook_event_name":"PreToolUse","tool_name":"Write","tool_use_id":"toolu_1",
//!     "tool_input":{"file_path":"/p/plan.md","content":"x"},"agent_type":"planner"}"#).unwrap();
//! assert_eq!(input.agent_type.as_deref(), Some("planner"));
//! match input.event().unwrap() {
//!     Event::PreToolUse(call) => assert_eq!(call.tool, ClaudeTool::Write { file_path: "/p/plan.md".into() }),
//!     other => panic!("{other:?}"),
//! }
//! ```

use loopward_core::{CallId, ToolName};
use loopward_runner::gates::Host;
use serde::Deserialize;
use serde_json::Value;

mod reply;
mod tool;

pub use reply::Reply;
pub use tool::{ClaudeTool, ReadTool, QUIET_TOOLS};

/// The largest hook input accepted, in bytes; larger input is refused, not parsed.
pub const MAX_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// Why a hook input was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The input is not JSON, or not a JSON object with the fields every event has.
    #[error("the hook input is not a Claude Code hook event: {0}")]
    Malformed(String),
    /// The input is larger than [`MAX_INPUT_BYTES`].
    #[error("the hook input is {0} bytes; the limit is {MAX_INPUT_BYTES}")]
    TooLarge(usize),
    /// A field the event needs is missing or has the wrong type.
    #[error("{event} event: {field} {why}")]
    Field {
        /// The event.
        event: String,
        /// The field (`tool_input.file_path`, …).
        field: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// One hook event as Claude Code sends it on stdin.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct HookInput {
    /// The session; becomes the ledger's run id (sanitised).
    pub session_id: String,
    /// The conversation transcript (recorded, never read).
    #[serde(default)]
    pub transcript_path: Option<String>,
    /// The working directory when the hook runs.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, …
    pub hook_event_name: String,
    /// The subagent's id, inside a subagent.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The subagent's name, inside a subagent; absent for the main agent.
    #[serde(default)]
    pub agent_type: Option<String>,
    /// The tool, for tool events.
    #[serde(default)]
    pub tool_name: Option<ToolName>,
    /// The tool's arguments, for tool events.
    #[serde(default)]
    pub tool_input: Option<Value>,
    /// The tool's result, for `PostToolUse`.
    #[serde(default)]
    pub tool_response: Option<Value>,
    /// The tool call's id, pairing a `PreToolUse` with its `PostToolUse`.
    #[serde(default)]
    pub tool_use_id: Option<CallId>,
    /// Why the tool failed, for `PostToolUseFailure`.
    #[serde(default)]
    pub error: Option<String>,
    /// The person's prompt, for `UserPromptSubmit`.
    #[serde(default)]
    pub prompt: Option<String>,
}

/// A tool call as the hook sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolUse {
    /// What the tool is, with the arguments loopward judges.
    pub tool: ClaudeTool,
    /// The call's id (`toolu_…`).
    pub id: Option<CallId>,
    /// The arguments as given (logged).
    pub input: Value,
}

/// A hook event, checked and typed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Before a tool runs: the hook may deny it.
    PreToolUse(ToolUse),
    /// After a tool ran successfully: the hook records its effect and may report a violation.
    PostToolUse(ToolUse),
    /// After a tool call failed (or was interrupted): it may still have changed files.
    PostToolUseFailure(ToolUse),
    /// A person submitted a prompt: the only event that starts a new turn.
    UserPromptSubmit {
        /// The prompt.
        prompt: String,
    },
    /// Any other event (`Stop`, `Notification`, `SubagentStop`, …): recorded, allowed.
    Other(String),
}

impl HookInput {
    /// Parses one hook input. Anything that is not a JSON object with a `session_id` and a
    /// `hook_event_name` is refused.
    pub fn parse(raw: &str) -> Result<Self, ProtocolError> {
        if raw.len() > MAX_INPUT_BYTES {
            return Err(ProtocolError::TooLarge(raw.len()));
        }
        serde_json::from_str(raw).map_err(|e| ProtocolError::Malformed(e.to_string()))
    }

    /// The typed event. A file-writing tool without a string path, a tool event without a tool
    /// name or an object `tool_input`, or a prompt event without a prompt is refused.
    pub fn event(&self) -> Result<Event, ProtocolError> {
        self.event_for(Host::ClaudeCode)
    }

    /// The typed event as `host` sends it, its tools mapped to what loopward judges (see
    /// [`crate::codex`]); refused as [`HookInput::event`] refuses.
    pub fn event_for(&self, host: Host) -> Result<Event, ProtocolError> {
        let name = self.hook_event_name.as_str();
        let field = |field: &'static str, why: &'static str| ProtocolError::Field {
            event: name.to_string(),
            field,
            why,
        };
        let event = match host {
            // Gemini CLI's events reaching another host's hook: a config meant for Gemini CLI.
            _ if host != Host::GeminiCli && crate::gemini::is_own_event(name) => {
                return Err(field(
                    "hook_event_name",
                    "is a Gemini CLI event: the hook was installed for another host; run `loopward hook install --host gemini`",
                ))
            }
            Host::GeminiCli => {
                let failed = self
                    .tool_response
                    .as_ref()
                    .is_some_and(|r| !r.get("error").unwrap_or(&Value::Null).is_null());
                crate::gemini::event_name(name, failed).map_err(|()| {
                    field(
                        "hook_event_name",
                        "is not a Gemini CLI event (BeforeTool, AfterTool, BeforeAgent, …): the hook was installed for another host; run `loopward hook install --host gemini`",
                    )
                })?
            }
            _ => name,
        };
        match event {
            "PreToolUse" | "PostToolUse" | "PostToolUseFailure" => {
                let name = self
                    .tool_name
                    .as_ref()
                    .filter(|n| !n.as_str().is_empty())
                    .ok_or_else(|| field("tool_name", "is missing"))?;
                let input = match &self.tool_input {
                    Some(Value::Object(map)) => map,
                    Some(_) => return Err(field("tool_input", "is not a JSON object")),
                    None => return Err(field("tool_input", "is missing")),
                };
                let string = |key: &'static str, name: &'static str| match input.get(key) {
                    Some(Value::String(s)) => Ok(s.clone()),
                    Some(_) => Err(field(name, "is not a string")),
                    None => Err(field(name, "is missing")),
                };
                let tool = ClaudeTool::parse(host, name, string)?;
                let input = Value::Object(input.clone());
                let id = match host {
                    // Gemini CLI gives no call id: the call is known by what it is.
                    Host::GeminiCli => self
                        .tool_use_id
                        .clone()
                        .or_else(|| Some(crate::gemini::call_id(name.as_str(), &input))),
                    _ => self.tool_use_id.clone(),
                };
                let call = ToolUse { tool, id, input };
                Ok(match event {
                    "PreToolUse" => Event::PreToolUse(call),
                    "PostToolUse" => Event::PostToolUse(call),
                    _ => Event::PostToolUseFailure(call),
                })
            }
            "UserPromptSubmit" => match &self.prompt {
                Some(prompt) => Ok(Event::UserPromptSubmit {
                    prompt: prompt.clone(),
                }),
                None => Err(field("prompt", "is missing")),
            },
            "" => Err(field("hook_event_name", "is empty")),
            _ => Ok(Event::Other(name.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Event, ProtocolError> {
        HookInput::parse(&v.to_string())?.event()
    }

    #[test]
    fn write_without_a_string_path_is_refused() {
        let e = parse(json!({"session_id":"s","hook_event_name":"PreToolUse",
            "tool_name":"Write","tool_input":{"file_path": 7}}));
        assert_eq!(
            e.unwrap_err().to_string(),
            "PreToolUse event: tool_input.file_path is not a string"
        );
    }

    #[test]
    fn missing_session_or_event_name_is_malformed() {
        assert!(matches!(
            HookInput::parse(r#"{"hook_event_name":"Stop"}"#),
            Err(ProtocolError::Malformed(_))
        ));
        assert!(matches!(
            HookInput::parse("[1,2]"),
            Err(ProtocolError::Malformed(_))
        ));
    }
}
