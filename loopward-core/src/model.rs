//! The model-call vocabulary: a chat request in, the model's reply out, and the typed ways a call
//! fails. Backends (in `loopward-runner`, `loopward-llama`, …) implement
//! `tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>`.

use crate::{AgentId, Message, ToolCall, ToolSpec, Usage};
use serde::{Deserialize, Serialize};

pub use crate::slot::TurnSlot;

/// One call to a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The agent the call is made for (used by per-agent scripts, quotas and logs).
    pub agent: AgentId,
    /// The conversation so far, system prompt first.
    pub messages: Vec<Message>,
    /// Tools the model may call (empty: answer in text).
    pub tools: Vec<ToolSpec>,
    /// The most tokens to generate, if limited.
    pub max_tokens: Option<u32>,
    /// The turn this call belongs to, set by the runner's agent and read by the layers around
    /// the model; [`TurnSlot::empty`] for a call made outside a turn. Backends ignore it.
    pub turn: TurnSlot,
}

/// The model's reply.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ChatResponse {
    /// Visible text.
    pub content: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    pub usage: Usage,
    /// The model's name as the backend knows it.
    pub model: String,
    /// How the reply ended: finished, or cut off by the token limit (then its text is
    /// unfinished and the runner does not take it as an answer). Backends that cannot tell leave
    /// the default, [`StopReason::Finished`].
    pub stop: StopReason,
}

/// How a model's reply ended.
///
/// ```
/// use loopward_core::model::{ChatResponse, StopReason};
/// let reply = ChatResponse { content: "The plan is to".into(), stop: StopReason::TokenLimit, ..ChatResponse::default() };
/// assert!(reply.stop.is_cut_off());
/// assert_eq!(ChatResponse::default().stop, StopReason::Finished);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model ended its reply itself (end of turn, a stop sequence, tool calls).
    #[default]
    Finished,
    /// The model was cut off by its token limit mid-reply: OpenAI-compatible
    /// `finish_reason: "length"`, Anthropic `stop_reason: "max_tokens"`, a local model that
    /// generated `max_tokens` tokens without ending.
    TokenLimit,
}

impl StopReason {
    /// Whether the reply was cut off before the model ended it.
    pub fn is_cut_off(self) -> bool {
        matches!(self, Self::TokenLimit)
    }

    /// Whether the model ended the reply itself (for `skip_serializing_if`).
    pub fn is_finished(&self) -> bool {
        matches!(self, Self::Finished)
    }
}

/// A rough, deterministic token estimate (about four bytes a token) for backends that do not
/// count tokens themselves.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A fake script has no reply left for this agent.
    #[error("the fake script has no reply for agent {agent} at step {step} (it has {available}); add a reply to the script or shorten the run")]
    ScriptExhausted {
        /// The agent.
        agent: AgentId,
        /// The 1-based reply number that was asked for.
        step: usize,
        /// How many replies the script has for this agent.
        available: usize,
    },
    /// The backend asked us to slow down.
    #[error("rate limited by the backend{}", .retry_after.map(|d| format!(" (retry after {}s)", d.as_secs())).unwrap_or_default())]
    RateLimited {
        /// How long the backend asked us to wait.
        retry_after: Option<Duration>,
    },
    /// A spend or quota limit was hit; retrying will not help.
    #[error("the backend refused: spending or quota limit reached: {0}")]
    QuotaExhausted(String),
    /// The backend is overloaded or failed (5xx).
    #[error("the backend failed with status {status}: {body}")]
    Server {
        /// HTTP status (or 0 when not HTTP).
        status: u16,
        /// A short excerpt of the body.
        body: String,
    },
    /// The request was rejected (4xx other than rate limits).
    #[error("the backend rejected the request with status {status}: {body}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// A short excerpt of the body.
        body: String,
    },
    /// Connection failure or reset.
    #[error("could not reach the backend: {0}")]
    Transport(String),
    /// The call took too long.
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// The backend answered with something that is not a valid reply.
    #[error("the backend's reply could not be read: {0}")]
    InvalidResponse(String),
    /// A local model failed (file missing, not GGUF, context overflow, …).
    #[error("{0}")]
    Local(String),
    /// A layer refused the call (budget, rate quota larger than the burst, …).
    #[error("{0}")]
    Refused(crate::Refusal),
    /// A quota shared with other workers (kept outside this process, e.g. a provider quota
    /// every worker of a Restate deployment asks) gave this call no permit, or could not take
    /// its reply's tokens: the call did not go ahead (or its reply is not used). Retrying later
    /// may succeed.
    #[error("rate limited: the quota shared by the workers for provider {provider:?} is unavailable ({why}); the call was not made. Retry later, or check the service that keeps the quota")]
    QuotaUnavailable {
        /// The provider the quota is kept for.
        provider: String,
        /// Why no permit was given.
        why: String,
    },
    /// A layer's decision about this call could not be recorded in the audit ledger, so the call
    /// did not go ahead; the run ends `AuditFailed`.
    #[error("not run: the audit ledger could not record a decision on this model call ({})", .0.0)]
    Audit(crate::AuditError),
}

impl ModelError {
    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::QuotaUnavailable { .. }
                | Self::Server { .. }
                | Self::Transport(_)
                | Self::Timeout(_)
        )
    }
}
