//! The model-call service boundary: a chat request in, the model's reply out.
//!
//! Backends implement `tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>`.
//! The scripted [`fake`] backend is always built; the HTTP backends sit behind the `http` feature;
//! local GGUF models are the `loopward-llama` crate (it compiles llama.cpp). The request and reply types are
//! `loopward_core::model`'s, re-exported here.

pub mod fake;
#[cfg(feature = "http")]
pub mod http;

pub use loopward_core::model::{
    estimate_tokens, ChatRequest, ChatResponse, ModelError, StopReason, TurnSlot,
};

/// The type-erased model-call service that stacks are built from.
pub type BoxModelService = tower::util::BoxCloneSyncService<ChatRequest, ChatResponse, ModelError>;
