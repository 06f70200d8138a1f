//! Claude Code as a host: its pinned version, the command line of one headless session, and
//! the session's own settings file, which installs loopward's hook for that session only.

use super::hook_command::HookCommand;
use super::host::Prepared;
use super::pin::{version_word, Pin};
use super::process::CommandLine;
use super::relay::{LoopServer, MCP_SERVER};
use super::CliAgentError;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The Claude Code version the stream parser and the hook protocol are tested against.
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";

pub(super) static PIN: Pin = Pin {
    client: "Claude Code",
    program: "claude",
    version: CLAUDE_CODE_VERSION,
    install: "npm install -g @anthropic-ai/claude-code@2.1.332",
    flag: "--claude",
};

/// The tools the hook judges after they ran (as `loopward hook install` writes them).
const MATCHER: &str = "Write|Edit|MultiEdit|NotebookEdit|Bash";

/// Every tool reaches the hook before it runs (Claude Code's "all tools" matcher): the writers
/// and the client's own read tools are judged, its tools known to change nothing are let
/// through, and any other (an MCP server's, a newer client's) is denied unless `[hooks]
/// allow_tools` names it. A narrower matcher would let every tool it leaves out run unjudged.
const PRE_MATCHER: &str = "*";

/// How to run Claude Code sessions.
#[derive(Clone, Debug)]
pub struct ClaudeCode {
    /// The `claude` binary.
    pub program: PathBuf,
    /// The hook command (`<loopward> hook claude-code --config <config> --main-agent
    /// <agent>`), written in exec form: the client starts it without a shell, and a hook that
    /// fails blocks the call.
    pub hook: HookCommand,
    /// Arguments added to every session (`--model`, `--permission-mode`…).
    pub args: Vec<OsString>,
    /// Variables set for every session.
    pub env: Vec<(OsString, OsString)>,
}

impl ClaudeCode {
    /// Checks that `program` runs and is the tested version; the error says which it is and
    /// what to do.
    pub fn check_version(&self) -> Result<(), CliAgentError> {
        PIN.check(&self.program, &self.env, |out| version_word(out, 0))
    }

    /// The session's settings: loopward's hook on the four events the policy needs, and
    /// `Bash` allowed — the session runs unattended, and the hook runs every command in the
    /// agent's kernel sandbox (the hook keeps the client's own decision, so without this a
    /// headless session could run no command at all). Written where the agent cannot write
    /// (loopward's state directory).
    pub fn settings(&self) -> serde_json::Value {
        let hook = json!([self.hook.claude_code_hook(60)]);
        json!({
            "permissions": {"allow": ["Bash"]},
            "hooks": {
                "PreToolUse": [{"matcher": PRE_MATCHER, "hooks": hook}],
                "PostToolUse": [{"matcher": MATCHER, "hooks": hook}],
                "PostToolUseFailure": [{"matcher": MATCHER, "hooks": hook}],
                "UserPromptSubmit": [{"hooks": hook}],
            }
        })
    }

    /// Writes the session's settings (`<scratch>/<session>.settings.json`) and, with loopward's
    /// MCP server `mcp`, its MCP config beside them (`<session>.mcp.json`), which the session
    /// reads alone (`--mcp-config <file> --strict-mcp-config`) and whose tools it may call
    /// unasked (`--allowedTools mcp__loopward`; the loop's gates judge each call).
    pub(super) fn prepare(
        &self,
        scratch: &Path,
        session: &str,
        mcp: Option<&LoopServer<'_>>,
    ) -> std::io::Result<Prepared> {
        std::fs::create_dir_all(scratch)?;
        let path = scratch.join(format!("{session}.settings.json"));
        std::fs::write(&path, self.settings().to_string())?;
        let mut args = vec![];
        if let Some(server) = mcp {
            let mut entry = server.json();
            entry["type"] = json!("stdio");
            let config = scratch.join(format!("{session}.mcp.json"));
            std::fs::write(
                &config,
                json!({"mcpServers": {MCP_SERVER: entry}}).to_string(),
            )?;
            args = vec![
                "--mcp-config".into(),
                config.into_os_string(),
                "--strict-mcp-config".into(),
                "--allowedTools".into(),
                format!("mcp__{MCP_SERVER}").into(),
            ];
        }
        Ok(Prepared { path, args })
    }

    /// The command line of one headless session: the prompt, the stream format the parser
    /// reads, the session id the hook's ledger is named by, and the session's own settings.
    /// Besides it, only the project's settings files are read (`--setting-sources
    /// project,local`: its subagents, `CLAUDE.md` and permissions, which no source at all would
    /// drop), never the user's, whose hooks are not this loop's. A loopward hook the project
    /// installed is the same command (the client runs it once) or is refused before the first
    /// session by the caller.
    pub fn command(&self, cwd: &Path, prompt: &str, session: &str, settings: &Path) -> CommandLine {
        let mut args: Vec<OsString> = vec![
            "-p".into(),
            prompt.into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--session-id".into(),
            session.into(),
            "--settings".into(),
            settings.as_os_str().to_owned(),
            "--setting-sources".into(),
            "project,local".into(),
        ];
        args.extend(self.args.iter().cloned());
        CommandLine {
            program: self.program.clone(),
            args,
            env: self.env.clone(),
            cwd: cwd.to_path_buf(),
        }
    }
}

/// A session id the client accepts (a UUID), derived from the workspace, the run and the
/// turn: the same session always has the same id, so its hook ledger
/// (`runs/claude-code-<id>`) can be named before it starts and a resumed loop finds what it
/// left running; two loops in two workspaces never share one (the id is the mark their
/// processes are ended by).
pub fn session_id(workspace: &std::path::Path, run: &str, turn: u32) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"loopward.session.v2\0");
    h.update(workspace.as_os_str().as_encoded_bytes());
    h.update(format!("\0{run}\0{turn}"));
    let h = h.finalize();
    let x = hex::encode(&h[..16]);
    // Version 4 layout (the variant and version nibbles set), as the client checks.
    format!(
        "{}-{}-4{}-8{}-{}",
        &x[0..8],
        &x[8..12],
        &x[13..16],
        &x[17..20],
        &x[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_a_uuid_fixed_by_workspace_run_and_turn() {
        let ws = Path::new("/p");
        let a = session_id(ws, "run-1", 1);
        assert_eq!(a, session_id(ws, "run-1", 1));
        assert_ne!(a, session_id(ws, "run-1", 2));
        assert_ne!(a, session_id(ws, "run-2", 1));
        assert_ne!(a, session_id(Path::new("/q"), "run-1", 1));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(
            parts[2].starts_with('4') && parts[3].starts_with('8'),
            "{a}"
        );
    }

    #[test]
    fn an_absent_or_other_client_is_refused_naming_the_tested_version() {
        let cc = |program: &str| ClaudeCode {
            program: program.into(),
            hook: HookCommand::new("true", [""; 0]),
            args: vec![],
            env: vec![],
        };
        let e = cc("/nonexistent/claude").check_version().unwrap_err();
        assert!(matches!(e, CliAgentError::NotInstalled { .. }), "{e}");
        // `echo --version` answers, but it is not the tested client.
        let e = cc("echo").check_version().unwrap_err();
        assert!(matches!(e, CliAgentError::UntestedVersion { .. }), "{e}");
        assert!(e.to_string().contains(CLAUDE_CODE_VERSION), "{e}");
    }
}
