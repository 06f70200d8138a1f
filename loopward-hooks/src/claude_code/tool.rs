//! The tools a hook event names: what loopward judges of each (`ClaudeTool`, `ReadTool`), the
//! host tools that change nothing judged (`QUIET_TOOLS`), and how each host's tool name and
//! arguments map to them.

use super::ProtocolError;
use loopward_core::ToolName;
use loopward_runner::gates::Host;

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
    Other(ToolName),
    /// A tool the hook does not know (another MCP server's, one that acts outside the hook's
    /// sight such as `EnterWorktree` or `CronCreate`, one of a newer client): what it would
    /// change cannot be judged, so it is denied unless a person accepted it unjudged
    /// (`[hooks] allow_tools`).
    Unknown(ToolName),
    /// Another host's tool reaching this host's hook (a Codex `apply_patch` at the Claude Code
    /// hook): the hook was installed in the wrong host's settings, so it is denied whatever
    /// `allow_tools` says.
    Foreign {
        /// The tool.
        name: ToolName,
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
            Self::Other(name) | Self::Unknown(name) | Self::Foreign { name, .. } => name.as_str(),
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

impl ClaudeTool {
    /// The tool `host` calls `name`, its arguments read by `string` (a string field of the
    /// call's `tool_input`, or the error naming the field). A tool known only by its name keeps
    /// the event's `name`, shared.
    pub(super) fn parse(
        host: Host,
        name: &ToolName,
        string: impl Fn(&'static str, &'static str) -> Result<String, ProtocolError>,
    ) -> Result<Self, ProtocolError> {
        Ok(match (host, name.as_str()) {
            // loopward's own tools, relayed to the loop over MCP, whose gates judge each
            // call there (each host names them its own way).
            (_, other) if host.relayed_tool(other).is_some() => ClaudeTool::Other(name.clone()),
            (Host::Codex, "Bash") => ClaudeTool::Bash {
                command: string("command", "tool_input.command")?,
            },
            (Host::Codex, "apply_patch") => ClaudeTool::Patch {
                patch: string("command", "tool_input.command")?,
            },
            (Host::Codex, _) => ClaudeTool::Unknown(name.clone()),
            (Host::GeminiCli, "write_file") => ClaudeTool::Write {
                file_path: string("file_path", "tool_input.file_path")?,
            },
            (Host::GeminiCli, "replace") => ClaudeTool::Edit {
                file_path: string("file_path", "tool_input.file_path")?,
            },
            (Host::GeminiCli, "run_shell_command") => ClaudeTool::Bash {
                command: string("command", "tool_input.command")?,
            },
            (Host::GeminiCli, _) => ClaudeTool::Unknown(name.clone()),
            // Another host's writing tools reaching this hook (it was installed in that
            // host's settings): never let through, not even by `allow_tools`.
            (_, "apply_patch") => ClaudeTool::Foreign {
                name: name.clone(),
                host: Host::Codex,
            },
            (_, "write_file" | "replace" | "run_shell_command") => ClaudeTool::Foreign {
                name: name.clone(),
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
                None if QUIET_TOOLS.contains(&other) => ClaudeTool::Other(name.clone()),
                None => ClaudeTool::Unknown(name.clone()),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_code::{Event, HookInput};
    use serde_json::{json, Value};

    fn parse(v: Value) -> Result<Event, ProtocolError> {
        HookInput::parse(&v.to_string())?.event()
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
}
