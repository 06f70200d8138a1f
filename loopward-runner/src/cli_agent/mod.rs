//! Coding agents as subroutines: an agent whose turn is one headless session of a coding CLI
//! (Claude Code first), run under the runner's laws.
//!
//! [`CliAgent`] is a `Service<TurnRequest>` like [`LlmAgent`](crate::LlmAgent), so the turn
//! layers apply per session (caps, stop-gates, budgets, timeouts). One turn:
//!
//! 1. **The session** (`tool_requested`/`tool_started` `claude_code`, call `session`): the client
//!    runs in the workspace with loopward's hook installed for that session only (its own
//!    `--settings` file in loopward's state directory, never the user's settings), in a
//!    process group of its own whose recorded PID is the only thing ever ended. Its stream is
//!    parsed into the run's ledger as it arrives: each model call (`model_call` with usage,
//!    `model_reply` with its text and tool calls), then how it ended (`tool_finished`: exit
//!    status, the client's result, the answer).
//! 2. **The hook's ledger, linked**: each tool call inside the session is judged by the same
//!    engine through the hook, which records in `runs/claude-code-<session>`; when the session
//!    is over, that ledger is closed and anchored, and its record count and last hash are
//!    recorded in the run's ledger (`layer_decision` `session_ledger`), so editing either breaks
//!    `loopward verify`.
//! 3. **Verification** (call `verify`): the verifier command runs in the kernel sandbox; only a
//!    pass ends the loop. A session that said it was done while the verifier failed is a
//!    refused claim (`layer_decision` `verify`, `refused`), and the turn ends
//!    [`FinishReason::Unverified`](loopward_core::FinishReason::Unverified): the runner gives
//!    the same agent another session, with the verifier's output in its prompt.
//! 4. **Progress by evidence**: a session that left the workspace's fingerprint and the
//!    verifier's result as they were is a repeat (`layer_decision` `repeat`); so many in a row
//!    end the run (`cap_reached`).
//!
//! Full process containment (network, secrets) wraps the session's command line through
//! [`Wrap`]: the seam `loopward contain` plugs into.

mod agent;
mod claude_code;
mod process;
mod recorded;
mod relay;
mod session;
mod stream;
mod verify;

pub use agent::{CliAgent, CliAgentBuilder, SessionLedgers, SessionLink, DEFAULT_NO_PROGRESS};
pub use claude_code::{session_id, ClaudeCode, CLAUDE_CODE_VERSION};
pub use process::{CommandLine, NoWrap, Wrap, SESSION_MARK};
pub use recorded::RecordedSessions;
pub use relay::{ask, McpServer, RelayReply, RelayRequest, MCP_SERVER, RELAY_ENV};
pub use stream::{SessionEnd, SessionEvent, StreamError, StreamParser};
pub use verify::{Verdict, Verifier};

use std::path::PathBuf;

/// A CLI agent cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CliAgentError {
    /// The client does not run.
    #[error("cannot run {program}: {why}; install Claude Code {CLAUDE_CODE_VERSION} (`npm install -g @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}`) or name the binary with --claude")]
    NotInstalled {
        /// The program.
        program: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The client is another version than the tested one.
    #[error("{program} is Claude Code {found}, but loopward is tested with {tested} only (its stream format and hook protocol change between versions); install {tested} (`npm install -g @anthropic-ai/claude-code@{tested}`) or name that binary with --claude")]
    UntestedVersion {
        /// The program.
        program: PathBuf,
        /// What `--version` said.
        found: String,
        /// The tested version.
        tested: &'static str,
    },
}
