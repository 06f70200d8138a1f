//! The details the run itself writes at its boundaries: the inbox, resume, a person's stop, the
//! policy version, and the hook events a Claude Code session shows.

use crate::call::{CallId, ToolName};
use serde::{Deserialize, Serialize};

/// A file the inbox would not deliver: `{why}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxRefusedDetail {
    /// Why (a forged seal, a link …), naming the file.
    pub why: String,
}

/// A resumed run's verdict on a tool call that was interrupted: `{call_id, tool}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeDetail {
    /// The call.
    pub call_id: CallId,
    /// Its tool.
    pub tool: ToolName,
}

/// A stop request refused: `{turns, why}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRefusedDetail {
    /// The turns the run had taken when it read the request.
    pub turns: u32,
    /// Why it was not honoured.
    pub why: String,
}

/// A stop request honoured: `{by, reason, requested_at, turns}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedDetail {
    /// Who asked.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When it was asked (RFC 3339).
    pub requested_at: String,
    /// The turns the run had taken when it stopped.
    pub turns: u32,
}

/// The policy version the decisions that follow are judged under: `{version}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyVersionDetail {
    /// The version.
    pub version: String,
}

/// A hook event a Claude Code, Codex or Gemini CLI session showed, observed: `{event}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookEventDetail {
    /// The event (`SessionStart`, `UserPromptSubmit:loop-prompt` …).
    pub event: String,
}
