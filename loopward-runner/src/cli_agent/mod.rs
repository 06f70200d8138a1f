//! Coding agents as subroutines: an agent whose turn is one headless session of a coding CLI
//! ([`Client`]: Claude Code, Codex or Gemini CLI, each at its pinned version), run under the
//! runner's laws.
//!
//! [`CliAgent`] is a `Service<TurnRequest>` like [`LlmAgent`](crate::LlmAgent), so the turn
//! layers apply per session (caps, stop-gates, budgets, timeouts). One turn:
//!
//! 1. **The session** (`tool_requested`/`tool_started` `claude_code`, `codex` or `gemini`, call
//!    `session`): the client runs in the workspace with loopward's hook installed for that
//!    session only (Claude Code's own `--settings` file, Codex's own `CODEX_HOME`, Gemini CLI's
//!    own `GEMINI_CLI_HOME`, all in loopward's state directory, never the user's), in a
//!    process group of its own whose recorded PID is the only thing ever ended. Its stream is
//!    parsed into the run's ledger as it arrives: each model call (`model_call` with usage,
//!    `model_reply` with its text and tool calls), then how it ended (`tool_finished`: exit
//!    status, the client's result, the answer).
//! 2. **The hook, answered by the loop**: each tool call inside the session is judged by the
//!    same engine through the session's hook, which relays the event over a socket of the
//!    session's own to the loop ([`HookJudge`], injected by the CLI); each decision is recorded
//!    in the run's ledger under the session's turn (`layer_decision` `hook`, then its records)
//!    before the hook is answered. A session that ran without its hook ever asking was not
//!    governed: the run fails, saying so. (Without a judge, the hook keeps a ledger of its own,
//!    `runs/<client>-<session>`, closed and linked by count and last hash — `session_ledger` —
//!    as loops before it did.)
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
mod changes;
mod claude_code;
mod codex;
mod gemini;
mod hook_command;
mod hooks;
mod host;
mod one_call;
mod pin;
mod process;
mod recorded;
mod relay;
mod session;
mod socket;
mod stream;
mod verify;

pub use agent::{CliAgent, CliAgentBuilder, SessionLedgers, SessionLink, DEFAULT_NO_PROGRESS};
pub use claude_code::{session_id, ClaudeCode, CLAUDE_CODE_VERSION};
pub use codex::{Codex, CodexParser, CODEX_VERSION};
pub use gemini::{Gemini, GeminiParser, GEMINI_VERSION};
pub use hook_command::HookCommand;
pub use hooks::{
    first_line, new_token, relay_event, sent_token, token_matches, EgressRecord, HookEvent,
    HookJudge, HookReply, Judged, EGRESS_WIRE, EXIT_BLOCK, HOOK_ENV, JUDGE_WAIT, RELAY_WAIT,
    TOKEN_ENV,
};
pub use host::Client;
pub use pin::Pin;
pub use process::{CommandLine, NoWrap, Wrap, SESSION_MARK};
pub use recorded::RecordedSessions;
pub use relay::{
    ask, served, McpServer, RelayReply, RelayRequest, MCP_SERVER, RELAY_ENV, RELAY_TOKEN_ENV,
    TOOLS_ENV,
};
pub use stream::{Parse, SessionEnd, SessionEvent, StreamError, StreamParser};
pub use verify::{Verdict, Verifier};

use std::path::PathBuf;

/// A CLI agent cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CliAgentError {
    /// The client does not run.
    #[error("cannot run {program}: {why}; install {} {} (`{}`) or name the binary with {}", .pin.client, .pin.version, .pin.install, .pin.flag)]
    NotInstalled {
        /// The program.
        program: PathBuf,
        /// What went wrong.
        why: String,
        /// The client it was meant to be.
        pin: &'static Pin,
    },
    /// The client is another version than the tested one.
    #[error("{program} is {} {found}, but loopward is tested with {} only (its stream format and hook protocol change between versions); install it (`{}`) or name that binary with {}", .pin.client, .pin.version, .pin.install, .pin.flag)]
    UntestedVersion {
        /// The program.
        program: PathBuf,
        /// What `--version` said.
        found: String,
        /// The tested version.
        pin: &'static Pin,
    },
}
