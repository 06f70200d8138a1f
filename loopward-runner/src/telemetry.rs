//! `tracing` spans for runs, turns, model calls and tool calls, with attribute names from the
//! OpenTelemetry GenAI semantic conventions, so any `tracing` subscriber (or the `otel` feature's
//! OTLP exporter) shows them as a GenAI trace.
//!
//! | span | `gen_ai.operation.name` | attributes |
//! |---|---|---|
//! | `loopward.run` | — | `gen_ai.conversation.id` (run id), `gen_ai.agent.name` (first agent), `loopward.run.status`, usage |
//! | `invoke_agent` | `invoke_agent` | `gen_ai.provider.name`, `gen_ai.agent.name`, `gen_ai.conversation.id`, `loopward.turn`, `loopward.turn.finish`, usage |
//! | `chat` | `chat` | `gen_ai.provider.name`, `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.response.id` (http backends), `gen_ai.request.max_tokens`, `gen_ai.response.finish_reasons`, usage, `server.address` and `server.port` (http backends), `error.type` |
//! | `execute_tool` | `execute_tool` | `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, `error.type` |
//!
//! Usage is `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens`. `otel.name` carries the
//! conventional span name (`chat`, `execute_tool {tool}`, `invoke_agent {agent}`). The backend
//! names its provider ([`record_provider`]: `openai`, `anthropic`, `llama.cpp`, `loopward.fake`)
//! from inside the call, so a model service used without loopward's agent names none; the
//! turn's `invoke_agent` span carries the provider its model call named. An http backend records
//! the reply's id ([`record_response_id`]: OpenAI's `id`, Anthropic's `message.id`).
//!
//! A streaming backend also emits an event per streamed delta on the target [`PROGRESS_TARGET`]
//! with the field `tokens_so_far` (one per delta, an estimate), so a front end can show a model
//! call moving before it ends.
//!
//! With the `otel` feature, `otel::otlp_layer` exports these spans over OTLP/HTTP.
//!
//! ```
//! assert_eq!(loopward_runner::telemetry::attr::TOOL_CALL_ID, "gen_ai.tool.call.id");
//! ```

#[cfg(feature = "otel")]
pub mod otel;

use crate::context::TurnContext;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::turn::{TurnError, TurnOutcome};
use loopward_core::{AgentId, RunId, RunStatus, ToolCall, ToolResult, TurnNumber, Usage};
use tracing::field::Empty;
use tracing::Span;

/// Attribute names used on loopward's spans.
pub mod attr {
    /// The operation: `invoke_agent`, `chat`, `execute_tool`.
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The agent's name.
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    /// The run id (a run is one conversation with a team).
    pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// The model asked for.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// The model that answered.
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// The cap on generated tokens.
    pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
    /// Prompt tokens.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Generated tokens.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// The tool's name.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    /// The tool call's id.
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// The tool's type (`function`).
    pub const TOOL_TYPE: &str = "gen_ai.tool.type";
    /// The error class, when the operation failed.
    pub const ERROR_TYPE: &str = "error.type";
    /// Who serves the model: `openai`, `anthropic`, `llama.cpp`, `loopward.fake`.
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The provider's id of the reply (`chatcmpl-…`, `msg_…`).
    pub const RESPONSE_ID: &str = "gen_ai.response.id";
    /// Why the model stopped: `["stop"]`, `["tool_calls"]` or `["length"]`.
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// The HTTP backend's host.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The HTTP backend's port.
    pub const SERVER_PORT: &str = "server.port";
}

/// The `tracing` target of streaming progress events (field `tokens_so_far`).
pub const PROGRESS_TARGET: &str = "loopward::progress";

/// Names the provider on the model call's span and on the span of the turn `req` belongs to; a
/// backend calls it from inside its call.
///
/// ```
/// use loopward_core::AgentId;
/// use loopward_runner::model::{ChatRequest, TurnSlot};
/// // Outside a model call's span, and for a call outside any turn, this records nothing, and
/// // never fails.
/// let req = ChatRequest { agent: AgentId::new("a").unwrap(), messages: vec![], tools: vec![],
///     max_tokens: None, turn: TurnSlot::empty() };
/// loopward_runner::telemetry::record_provider(&req, "openai");
/// ```
pub fn record_provider(req: &ChatRequest, provider: &str) {
    Span::current().record(attr::PROVIDER_NAME, provider);
    // The turn's span is the chat span's parent, which `tracing` cannot reach from here: the
    // name goes on the turn the request carries, and the agent records it on the turn's span.
    if let Some(turn) = TurnContext::of(req) {
        *turn
            .extensions()
            .get_or_default::<ProviderNamed>()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(provider.to_owned());
    }
}

/// Names the reply's id on the model call's span (`gen_ai.response.id`); a backend calls it
/// from inside its call when the provider returns one.
///
/// ```
/// // Outside a model call's span this records nothing, and never fails.
/// loopward_runner::telemetry::record_response_id("chatcmpl-123");
/// ```
pub fn record_response_id(id: &str) {
    Span::current().record(attr::RESPONSE_ID, id);
}

/// The provider the turn's model call in progress named (see [`record_provider`]).
#[derive(Default)]
struct ProviderNamed(std::sync::Mutex<Option<String>>);

/// Runs a model call of `turn` and records the provider it named on `span` (the turn's span).
pub(crate) async fn naming_provider<F: std::future::Future>(
    turn: &TurnContext,
    span: &Span,
    call: F,
) -> F::Output {
    let out = call.await;
    let named = turn
        .extensions()
        .get::<ProviderNamed>()
        .and_then(|p| p.0.lock().unwrap_or_else(|p| p.into_inner()).take());
    if let Some(p) = named {
        span.record(attr::PROVIDER_NAME, p.as_str());
    }
    out
}

/// Reports a streaming model call's progress (see [`PROGRESS_TARGET`]).
pub fn record_progress(tokens_so_far: u64) {
    tracing::trace!(target: PROGRESS_TARGET, tokens_so_far);
}

/// The span of one run.
pub(crate) fn run_span(run: &RunId, first: &AgentId) -> Span {
    tracing::info_span!(
        "loopward.run",
        otel.name = %format!("run {run}"),
        gen_ai.conversation.id = %run,
        gen_ai.agent.name = %first,
        loopward.run.status = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
    )
}

/// Records how a run ended on its span.
pub(crate) fn record_run(span: &Span, status: &RunStatus, usage: &Usage) {
    span.record("loopward.run.status", status.label());
    record_usage(span, usage);
}

/// The span of one turn.
pub(crate) fn turn_span(run: &RunId, agent: &AgentId, turn: TurnNumber) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {agent}"),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = Empty,
        gen_ai.agent.name = %agent,
        gen_ai.conversation.id = %run,
        loopward.turn = turn.0,
        loopward.turn.finish = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        "error.type" = Empty,
    )
}

/// Records a turn's outcome on its span.
pub(crate) fn record_turn(span: &Span, outcome: Result<&TurnOutcome, &TurnError>) {
    match outcome {
        Ok(o) => {
            let finish = serde_json::to_value(&o.finish)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            span.record("loopward.turn.finish", finish.as_str());
            record_usage(span, &o.usage);
        }
        Err(e) => {
            span.record("error.type", e.status().label());
        }
    }
}

/// The span of one model call.
pub(crate) fn model_span(agent: &AgentId, max_tokens: Option<u32>) -> Span {
    // The span name is fixed when the span is entered, before the backend names its model, so
    // it is the bare operation (the convention's fallback); the model goes in the attributes.
    let span = tracing::info_span!(
        "chat",
        otel.name = "chat",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = Empty,
        gen_ai.agent.name = %agent,
        gen_ai.request.model = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        server.address = Empty,
        server.port = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        "error.type" = Empty,
    );
    if let Some(n) = max_tokens {
        span.record("gen_ai.request.max_tokens", n);
    }
    span
}

/// Records a model call's reply (or error) on its span.
pub(crate) fn record_model(span: &Span, reply: Result<&ChatResponse, &ModelError>) {
    match reply {
        Ok(r) => {
            // The backend reports the model it was configured with; that is the request model.
            span.record("gen_ai.request.model", r.model.as_str());
            span.record("gen_ai.response.model", r.model.as_str());
            let reason = if r.stop.is_cut_off() {
                "length"
            } else if r.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            span.record(attr::RESPONSE_FINISH_REASONS, format!("[\"{reason}\"]"));
            record_usage(span, &r.usage);
        }
        Err(e) => {
            span.record(
                "error.type",
                format!("{e:?}")
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or("error"),
            );
        }
    }
}

/// The span of one tool call.
pub(crate) fn tool_span(call: &ToolCall) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = "function",
        "error.type" = Empty,
    )
}

/// Records a tool call's result on its span.
pub(crate) fn record_tool(span: &Span, result: Result<&ToolResult, &TurnError>) {
    match result {
        Ok(r) if r.is_error => {
            span.record("error.type", "tool_error");
        }
        Ok(_) => {}
        Err(e) => {
            span.record("error.type", e.status().label());
        }
    }
}

fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
}
