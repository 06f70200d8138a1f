//! A host's hook command: loopward's binary by absolute path and its arguments, written into
//! the host's settings in the form that host runs best.
//!
//! Claude Code runs a hook given as `command` + `args` directly ("exec form": no shell starts
//! on every tool call, and no path is ever parsed by one), and `onFailure: "block"` makes a
//! hook that cannot start, times out or answers nonsense block the call instead of letting it
//! go ahead. Codex and Gemini CLI take one shell command line.

use serde_json::{json, Value};
use std::path::PathBuf;

/// loopward's hook as a host starts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookCommand {
    /// The binary, by absolute path (a host that cannot find it would go ahead).
    pub program: PathBuf,
    /// Its arguments: `hook <host> --config <file> --main-agent <agent>`.
    pub args: Vec<String>,
}

impl HookCommand {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// The command as one POSIX shell line, every word single-quoted but the flags (for the
    /// hosts that run hooks through a shell, and for messages).
    pub fn shell_line(&self) -> String {
        let mut line = quote(&self.program.to_string_lossy());
        for a in &self.args {
            line.push(' ');
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
            {
                line.push_str(a);
            } else {
                line.push_str(&quote(a));
            }
        }
        line
    }

    /// Claude Code's hook entry: exec form, `timeout` in seconds, and a failure that blocks.
    pub fn claude_code_hook(&self, timeout_secs: u64) -> Value {
        json!({
            "type": "command",
            "command": self.program,
            "args": self.args,
            "timeout": timeout_secs,
            "onFailure": "block",
        })
    }

    /// Reads back one hook of a host's settings (exec form or a shell line) as loopward's hook
    /// for `sub` (`claude-code`, `codex`, `gemini`): the command as a shell line, or `None`
    /// when the hook is not loopward's.
    pub fn installed(hook: &Value, sub: &str) -> Option<String> {
        let command = hook["command"].as_str()?;
        match hook["args"].as_array() {
            Some(args) => {
                let args: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
                (args.len() >= 2 && args[0] == "hook" && args[1] == sub)
                    .then(|| Self::new(command, args).shell_line())
            }
            None => command
                .contains(&format!(" hook {sub}"))
                .then(|| command.to_string()),
        }
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> HookCommand {
        HookCommand::new(
            "/opt/it's/loopward",
            [
                "hook",
                "claude-code",
                "--config",
                "/p/loopward.toml",
                "--main-agent",
                "planner",
            ],
        )
    }

    #[test]
    fn the_shell_line_quotes_paths_and_keeps_flags_plain() {
        assert_eq!(
            ours().shell_line(),
            "'/opt/it'\\''s/loopward' hook claude-code --config '/p/loopward.toml' --main-agent planner"
        );
    }

    #[test]
    fn claude_codes_entry_is_exec_form_and_blocks_on_failure_and_reads_back_as_the_same_line() {
        let hook = ours().claude_code_hook(60);
        assert_eq!(hook["command"], "/opt/it's/loopward");
        assert_eq!(hook["args"][1], "claude-code");
        assert_eq!(hook["onFailure"], "block");
        assert_eq!(
            HookCommand::installed(&hook, "claude-code"),
            Some(ours().shell_line())
        );
        assert_eq!(HookCommand::installed(&hook, "codex"), None);
        let shell = json!({"type": "command", "command": "'/bin/loopward' hook codex --config x"});
        assert_eq!(
            HookCommand::installed(&shell, "codex").as_deref(),
            Some("'/bin/loopward' hook codex --config x")
        );
        assert_eq!(
            HookCommand::installed(&json!({"command": "echo hi"}), "codex"),
            None
        );
    }
}
