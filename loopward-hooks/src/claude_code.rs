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

use loopward_core::CallId;
use loopward_runner::gates::Host;
use serde::Deserialize;
use serde_json::{json, Map, Value};

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
    pub tool_name: Option<String>,
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

/// The tools loopward judges, and everything else.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaudeTool {
    /// `Write {file_path, content}`.
    Write {
        /// The path written.
        file_path: String,
    },
    /// `Edit {file_path, old_string, new_string}`.
    Edit {
        /// The path edited.
        file_path: String,
    },
    /// `MultiEdit {file_path, edits}`.
    MultiEdit {
        /// The path edited.
        file_path: String,
    },
    /// `NotebookEdit {notebook_path, …}`.
    NotebookEdit {
        /// The notebook edited.
        notebook_path: String,
    },
    /// `Bash {command}`: an unconstrained writer, judged by what it changes on disk.
    Bash {
        /// The command.
        command: String,
    },
    /// A tool that reads files by path in Claude Code's own process, outside loopward's
    /// sandbox: judged by where its target lies (its arguments are read from the call's input).
    Reads(ReadTool),
    /// Codex's `apply_patch {command}`: a patch body that adds, updates, moves and deletes
    /// files ([`crate::codex::patch_paths`]).
    Patch {
        /// The patch body.
        patch: String,
    },
    /// A tool of the host's known to change nothing the hook judges ([`QUIET_TOOLS`]:
    /// `Task`, `TodoWrite`, `WebFetch`, …) or loopward's own MCP relay (`mcp__loopward__*`, whose
    /// calls the loop's gates judge): allowed and recorded.
    Other(String),
    /// A tool the hook does not know (another MCP server's, one that acts outside the hook's
    /// sight such as `EnterWorktree` or `CronCreate`, one of a newer client): what it would
    /// change cannot be judged, so it is denied unless a person accepted it unjudged
    /// (`[hooks] allow_tools`).
    Unknown(String),
    /// Another host's tool reaching this host's hook (a Codex `apply_patch` at the Claude Code
    /// hook): the hook was installed in the wrong host's settings, so it is denied whatever
    /// `allow_tools` says.
    Foreign {
        /// The tool.
        name: String,
        /// The host whose tool it is.
        host: Host,
    },
}

/// Claude Code's tools that change nothing the hook judges (no file, no command), as of the
/// pinned client ([`CLAUDE_CODE_VERSION`](loopward_runner::cli_agent::CLAUDE_CODE_VERSION)):
/// allowed without a decision. Tools that act where the hook cannot see (`EnterWorktree`,
/// `ExitWorktree`, `Workflow`, `Cron*`, `ScheduleWakeup`, `RemoteTrigger`, `Artifact`,
/// `Projects`, `PushNotification`) are deliberately absent: they are denied unless a person
/// lists them in `[hooks] allow_tools`.
pub const QUIET_TOOLS: &[&str] = &[
    "Task",
    "Agent",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "BashOutput",
    "KillShell",
    "KillBash",
    "TaskStop",
    "ExitPlanMode",
    "EnterPlanMode",
    "Skill",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "AskUserQuestion",
    "TaskCreate",
    "TaskGet",
    "TaskUpdate",
    "TaskList",
    "ToolSearch",
    // Offered to headless sessions of the pinned client: they list and report, nothing more.
    "ListAgents",
    "ReportFindings",
];

impl ClaudeTool {
    /// The tool's name as Claude Code spells it.
    pub fn name(&self) -> &str {
        match self {
            Self::Write { .. } => "Write",
            Self::Edit { .. } => "Edit",
            Self::MultiEdit { .. } => "MultiEdit",
            Self::NotebookEdit { .. } => "NotebookEdit",
            Self::Bash { .. } => "Bash",
            Self::Reads(tool) => tool.name(),
            Self::Patch { .. } => "apply_patch",
            Self::Other(name) | Self::Unknown(name) | Self::Foreign { name, .. } => name,
        }
    }

    /// The path a file-writing tool writes, as given.
    pub fn write_path(&self) -> Option<&str> {
        match self {
            Self::Write { file_path }
            | Self::Edit { file_path }
            | Self::MultiEdit { file_path } => Some(file_path),
            Self::NotebookEdit { notebook_path } => Some(notebook_path),
            Self::Bash { .. }
            | Self::Reads(_)
            | Self::Patch { .. }
            | Self::Other(_)
            | Self::Unknown(_)
            | Self::Foreign { .. } => None,
        }
    }
}

/// The client-side tools that read files by path, each with the arguments that name what it
/// reads: `Read {file_path}`, `NotebookRead {notebook_path}`, `LS {path}` (older clients),
/// `Grep {pattern, path?, glob?}` and `Glob {pattern, path?}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadTool {
    /// `Read {file_path}`: one file's bytes.
    Read,
    /// `NotebookRead {notebook_path}`: one notebook's cells.
    NotebookRead,
    /// `LS {path}`: one folder's entries.
    Ls,
    /// `Grep {pattern, path?, glob?}`: the lines of every file under `path` that match.
    Grep,
    /// `Glob {pattern, path?}`: the names of the files under `path` that match.
    Glob,
}

impl ReadTool {
    /// Every read tool, as matched by the hook's installed matcher.
    pub const ALL: [Self; 5] = [
        Self::Read,
        Self::NotebookRead,
        Self::Ls,
        Self::Grep,
        Self::Glob,
    ];

    /// The tool's name as Claude Code spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Read => "Read",
            Self::NotebookRead => "NotebookRead",
            Self::Ls => "LS",
            Self::Grep => "Grep",
            Self::Glob => "Glob",
        }
    }

    /// The read tool called `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
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
                    .as_deref()
                    .filter(|n| !n.is_empty())
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
                let tool = match (host, name) {
                    // loopward's own tools, relayed to the loop over MCP, whose gates judge each
                    // call there (each host names them its own way).
                    (_, other) if host.relayed_tool(other).is_some() => {
                        ClaudeTool::Other(other.to_string())
                    }
                    (Host::Codex, "Bash") => ClaudeTool::Bash {
                        command: string("command", "tool_input.command")?,
                    },
                    (Host::Codex, "apply_patch") => ClaudeTool::Patch {
                        patch: string("command", "tool_input.command")?,
                    },
                    (Host::Codex, other) => ClaudeTool::Unknown(other.to_string()),
                    (Host::GeminiCli, "write_file") => ClaudeTool::Write {
                        file_path: string("file_path", "tool_input.file_path")?,
                    },
                    (Host::GeminiCli, "replace") => ClaudeTool::Edit {
                        file_path: string("file_path", "tool_input.file_path")?,
                    },
                    (Host::GeminiCli, "run_shell_command") => ClaudeTool::Bash {
                        command: string("command", "tool_input.command")?,
                    },
                    (Host::GeminiCli, other) => ClaudeTool::Unknown(other.to_string()),
                    // Another host's writing tools reaching this hook (it was installed in that
                    // host's settings): never let through, not even by `allow_tools`.
                    (_, "apply_patch") => ClaudeTool::Foreign {
                        name: name.to_string(),
                        host: Host::Codex,
                    },
                    (_, "write_file" | "replace" | "run_shell_command") => ClaudeTool::Foreign {
                        name: name.to_string(),
                        host: Host::GeminiCli,
                    },
                    (_, "Write") => ClaudeTool::Write {
                        file_path: string("file_path", "tool_input.file_path")?,
                    },
                    (_, "Edit") => ClaudeTool::Edit {
                        file_path: string("file_path", "tool_input.file_path")?,
                    },
                    (_, "MultiEdit") => ClaudeTool::MultiEdit {
                        file_path: string("file_path", "tool_input.file_path")?,
                    },
                    (_, "NotebookEdit") => ClaudeTool::NotebookEdit {
                        notebook_path: string("notebook_path", "tool_input.notebook_path")?,
                    },
                    (_, "Bash") => ClaudeTool::Bash {
                        command: string("command", "tool_input.command")?,
                    },
                    (_, other) => match ReadTool::from_name(other) {
                        Some(tool) => ClaudeTool::Reads(tool),
                        None if QUIET_TOOLS.contains(&other) => {
                            ClaudeTool::Other(other.to_string())
                        }
                        None => ClaudeTool::Unknown(other.to_string()),
                    },
                };
                let input = Value::Object(input.clone());
                let id = match host {
                    // Gemini CLI gives no call id: the call is known by what it is.
                    Host::GeminiCli => self
                        .tool_use_id
                        .clone()
                        .or_else(|| Some(crate::gemini::call_id(name, &input))),
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

    fn tool(name: &str) -> ClaudeTool {
        match parse(json!({"session_id":"s","hook_event_name":"PreToolUse",
            "tool_name": name,"tool_input":{}}))
        {
            Ok(Event::PreToolUse(call)) => call.tool,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn each_tool_name_falls_in_one_class() {
        assert_eq!(tool("Read"), ClaudeTool::Reads(ReadTool::Read));
        // The client's tools that change nothing the hook judges, and loopward's own relay.
        for quiet in [
            "Task",
            "Agent",
            "TodoWrite",
            "WebFetch",
            "ToolSearch",
            "mcp__loopward__handoff",
        ] {
            assert_eq!(tool(quiet), ClaudeTool::Other(quiet.into()), "{quiet}");
        }
        // Tools that act outside the hook's sight, other MCP servers' tools, names no client
        // had, and a relay-looking name that is not loopward's.
        for unknown in [
            "EnterWorktree",
            "CronCreate",
            "Workflow",
            "PushNotification",
            "mcp__github__create_issue",
            "mcp__loopwardx__handoff",
            "mcp__loopward__",
            "WriteEverything",
        ] {
            assert_eq!(
                tool(unknown),
                ClaudeTool::Unknown(unknown.into()),
                "{unknown}"
            );
        }
        // Another host's writing tools: the hook is in the wrong host's settings.
        assert_eq!(
            tool("apply_patch"),
            ClaudeTool::Foreign {
                name: "apply_patch".into(),
                host: Host::Codex
            }
        );
        assert_eq!(
            tool("write_file"),
            ClaudeTool::Foreign {
                name: "write_file".into(),
                host: Host::GeminiCli
            }
        );
        let e = parse(json!({"session_id":"s","hook_event_name":"Stop"}));
        assert_eq!(e.unwrap(), Event::Other("Stop".into()));
    }

    #[test]
    fn each_host_lets_loopwards_relayed_tools_through_by_its_own_naming_only() {
        let tool_at = |host: Host, event: &str, name: &str| {
            let raw = json!({"session_id":"s","hook_event_name":event,
                "tool_name": name,"tool_input":{}});
            match HookInput::parse(&raw.to_string()).unwrap().event_for(host) {
                Ok(Event::PreToolUse(call)) => call.tool,
                other => panic!("{name}: {other:?}"),
            }
        };
        for (host, event, ours, other) in [
            (
                Host::Codex,
                "PreToolUse",
                "mcp__loopward__handoff",
                "mcp_loopward_handoff",
            ),
            (
                Host::GeminiCli,
                "BeforeTool",
                "mcp_loopward_handoff",
                "mcp__loopward__handoff",
            ),
            // `say` as each host names it (the loop's gates judge it where it is relayed).
            (
                Host::ClaudeCode,
                "PreToolUse",
                "mcp__loopward__say",
                "mcp_loopward_say",
            ),
            (
                Host::Codex,
                "PreToolUse",
                "mcp__loopward__say",
                "mcp_loopward_say",
            ),
            (
                Host::GeminiCli,
                "BeforeTool",
                "mcp_loopward_say",
                "mcp__loopward__say",
            ),
        ] {
            assert_eq!(
                tool_at(host, event, ours),
                ClaudeTool::Other(ours.into()),
                "{host:?}"
            );
            assert_eq!(
                tool_at(host, event, other),
                ClaudeTool::Unknown(other.into()),
                "{host:?}"
            );
        }
    }

    #[test]
    fn no_acting_tool_is_on_the_quiet_list() {
        for acting in [
            "EnterWorktree",
            "ExitWorktree",
            "Workflow",
            "CronCreate",
            "CronDelete",
            "CronList",
            "ScheduleWakeup",
            "RemoteTrigger",
            "Artifact",
            "Projects",
            "PushNotification",
        ] {
            assert!(!QUIET_TOOLS.contains(&acting), "{acting}");
        }
        for judged in ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"] {
            assert!(!QUIET_TOOLS.contains(&judged), "{judged}");
        }
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
