//! The coding CLIs a [`CliAgent`](super::CliAgent) can run: each one's session config, command
//! line, stream parser and hook ledger, behind one type.

use super::claude_code::ClaudeCode;
use super::codex::{Codex, CodexParser};
use super::gemini::{Gemini, GeminiParser};
use super::pin::Pin;
use super::process::CommandLine;
use super::relay::LoopServer;
use super::stream::{Parse, StreamParser};
use super::CliAgentError;
use crate::gates::Host;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A session's own config, written: where it is, and the arguments the client needs to read
/// all of it (Claude Code's MCP config is a file of its own, named on its command line).
pub(super) struct Prepared {
    /// The settings file (Claude Code) or the config home (Codex, Gemini CLI).
    pub(super) path: PathBuf,
    /// Arguments added to the session's command line (only Claude Code takes any).
    pub(super) args: Vec<OsString>,
}

/// Links the person's sign-in `files` from their own client folder `theirs` into the session's
/// `dir`, each one they have and the session lacks: the session signs in as they do, and
/// nothing else of theirs is read.
pub(super) fn link_sign_in(
    theirs: Option<&Path>,
    dir: &Path,
    files: &[&str],
) -> std::io::Result<()> {
    for file in files {
        let (src, dst) = (theirs.map(|d| d.join(file)), dir.join(file));
        if let Some(src) = src.filter(|p| p.is_file()) {
            if std::fs::symlink_metadata(&dst).is_err() {
                std::os::unix::fs::symlink(src, &dst)?;
            }
        }
    }
    Ok(())
}

/// A coding CLI, configured.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Client {
    /// Claude Code (`claude -p … --output-format stream-json`).
    ClaudeCode(ClaudeCode),
    /// Codex (`codex exec --json`).
    Codex(Codex),
    /// Gemini CLI (`gemini -p … --output-format stream-json`).
    Gemini(Gemini),
}

impl From<ClaudeCode> for Client {
    fn from(c: ClaudeCode) -> Self {
        Self::ClaudeCode(c)
    }
}

impl From<Codex> for Client {
    fn from(c: Codex) -> Self {
        Self::Codex(c)
    }
}

impl From<Gemini> for Client {
    fn from(c: Gemini) -> Self {
        Self::Gemini(c)
    }
}

/// The tool names sessions are recorded under, one per client.
pub(super) const TOOLS: [&str; 3] = ["claude_code", "codex", "gemini"];

impl Client {
    /// The binary.
    pub fn program(&self) -> &Path {
        match self {
            Self::ClaudeCode(c) => &c.program,
            Self::Codex(c) => &c.program,
            Self::Gemini(c) => &c.program,
        }
    }

    /// The client's pin (its name and tested version).
    pub fn pin(&self) -> &'static Pin {
        match self {
            Self::ClaudeCode(_) => &super::claude_code::PIN,
            Self::Codex(_) => &super::codex::PIN,
            Self::Gemini(_) => &super::gemini::PIN,
        }
    }

    /// Checks that the binary runs and is the tested version.
    pub fn check_version(&self) -> Result<(), CliAgentError> {
        match self {
            Self::ClaudeCode(c) => c.check_version(),
            Self::Codex(c) => c.check_version(),
            Self::Gemini(c) => c.check_version(),
        }
    }

    /// The tool name a session is recorded under.
    pub fn tool(&self) -> &'static str {
        match self {
            Self::ClaudeCode(_) => TOOLS[0],
            Self::Codex(_) => TOOLS[1],
            Self::Gemini(_) => TOOLS[2],
        }
    }

    /// Where this client's tool calls are judged: the host its hook runs for, and whose naming
    /// of loopward's own MCP tools it uses ([`Host::relayed_name`]).
    pub fn host(&self) -> Host {
        match self {
            Self::ClaudeCode(_) => Host::ClaudeCode,
            Self::Codex(_) => Host::Codex,
            Self::Gemini(_) => Host::GeminiCli,
        }
    }

    /// Writes the session's own config in `scratch` (Claude Code's settings file, Codex's
    /// `CODEX_HOME`, Gemini CLI's home), with loopward's MCP server `mcp` in it when the agent
    /// has loop tools, each in the client's own format.
    pub(super) fn prepare(
        &self,
        scratch: &Path,
        session: &str,
        mcp: Option<&LoopServer<'_>>,
    ) -> std::io::Result<Prepared> {
        let (path, args) = match self {
            Self::ClaudeCode(c) => return c.prepare(scratch, session, mcp),
            Self::Codex(c) => (c.prepare(scratch, session, mcp)?, vec![]),
            Self::Gemini(c) => (c.prepare(scratch, session, mcp)?, vec![]),
        };
        Ok(Prepared { path, args })
    }

    /// The session's command line, its config as `prepared`.
    pub(super) fn command(
        &self,
        cwd: &Path,
        prompt: &str,
        session: &str,
        prepared: &Prepared,
    ) -> CommandLine {
        match self {
            Self::ClaudeCode(c) => {
                let mut cmd = c.command(cwd, prompt, session, &prepared.path);
                cmd.args.extend(prepared.args.iter().cloned());
                cmd
            }
            Self::Codex(c) => c.command(cwd, prompt, &prepared.path),
            Self::Gemini(c) => c.command(cwd, prompt, session, &prepared.path),
        }
    }

    /// A parser for one session's stream.
    pub(super) fn parser(&self) -> Box<dyn Parse> {
        match self {
            Self::ClaudeCode(_) => Box::new(StreamParser::new()),
            Self::Codex(c) => Box::new(CodexParser::new(c.model.as_deref().unwrap_or_default())),
            Self::Gemini(_) => Box::new(GeminiParser::new()),
        }
    }

    /// The session id the hook names its ledger by (`runs/<prefix>-<id>`): the loop's for
    /// Claude Code and Gemini CLI, which take it on their command line; for Codex, the
    /// thread id its stream reported (`None` until it did).
    pub(super) fn hook_session(&self, ours: &str, reported: Option<&str>) -> Option<String> {
        let (prefix, id) = match self {
            Self::ClaudeCode(_) => ("claude-code", Some(ours)),
            Self::Codex(_) => ("codex", reported),
            Self::Gemini(_) => ("gemini", Some(ours)),
        };
        id.map(|id| format!("{prefix}-{id}"))
    }

    /// Whether the hook hears every prompt (so a session it recorded nothing for was not
    /// governed even when it made no tool call). Not Codex's: see [`Codex::hooks`].
    pub(super) fn hooks_prompt(&self) -> bool {
        !matches!(self, Self::Codex(_))
    }
}
