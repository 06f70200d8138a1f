//! The model-call service boundary: a chat request in, the model's reply out.
//!
//! Backends implement `tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>`.
//! The scripted [`fake`] backend is always built; heavier backends sit behind features.

mod error;
pub mod fake;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "llama")]
pub mod llama;

pub use error::ModelError;

use loopward_core::{AgentId, Message, ToolCall, ToolSpec, Usage};

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
}

/// The type-erased model-call service that stacks are built from.
pub type BoxModelService = tower::util::BoxCloneSyncService<ChatRequest, ChatResponse, ModelError>;

/// A rough, deterministic token estimate (about four bytes a token) for backends that do not
/// count tokens themselves.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}
