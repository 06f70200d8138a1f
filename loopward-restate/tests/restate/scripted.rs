//! The scripted models the workers serve: a reply that depends only on the request (the agent
//! and how many replies it already has), so any worker gives the same reply at the same point.

use loopward_core::{CallId, Message, ToolCall, Usage};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use std::future::Future;

/// A model whose reply to a request is `reply`'s text and tool calls, reported with `usage`.
pub(crate) fn scripted<F, Fut>(reply: F, usage: Usage) -> BoxModelService
where
    F: Fn(ChatRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = (String, Vec<ToolCall>)> + Send + 'static,
{
    BoxModelService::new(tower::service_fn(move |req| {
        let reply = reply(req);
        async move {
            let (content, tool_calls) = reply.await;
            Ok::<_, ModelError>(ChatResponse {
                content,
                tool_calls,
                usage,
                model: "scripted".into(),
                ..Default::default()
            })
        }
    }))
}

/// Which reply of its agent this request asks for: 1 for the first.
pub(crate) fn step(req: &ChatRequest) -> usize {
    1 + req
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Model { .. }))
        .count()
}

/// One tool call, as a scripted reply makes it.
pub(crate) fn call(id: impl Into<CallId>, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}
