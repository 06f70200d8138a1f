//! The coding CLIs a [`CliAgent`](super::CliAgent) can run: each one's session config, command
//! line, stream parser and hook ledger, behind one type.

use super::claude_code::ClaudeCode;
use super::codex::{Codex, CodexParser};
use super::gemini::{Gemini, GeminiParser};
use super::pin::Pin;
use super::process::CommandLine;
use super::stream::{Parse, StreamParser};
use super::CliAgentError;
use std::path::{Path, PathBuf};

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

    /// Writes the session's own config in `scratch` (Claude Code's settings file, Codex's
    /// `CODEX_HOME`, Gemini CLI's home) and says where it is.
    pub(super) fn prepare(&self, scratch: &Path, session: &str) -> std::io::Result<PathBuf> {
        match self {
            Self::ClaudeCode(c) => {
                let path = scratch.join(format!("{session}.settings.json"));
                std::fs::create_dir_all(scratch)?;
                std::fs::write(&path, c.settings().to_string())?;
                Ok(path)
            }
            Self::Codex(c) => c.prepare(scratch, session),
            Self::Gemini(c) => c.prepare(scratch, session),
        }
    }

    /// The session's command line, its config at `prepared`.
    pub(super) fn command(
        &self,
        cwd: &Path,
        prompt: &str,
        session: &str,
        prepared: &Path,
    ) -> CommandLine {
        match self {
            Self::ClaudeCode(c) => c.command(cwd, prompt, session, prepared),
            Self::Codex(c) => c.command(cwd, prompt, prepared),
            Self::Gemini(c) => c.command(cwd, prompt, session, prepared),
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
