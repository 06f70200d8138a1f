//! The OpenAI-compatible chat-completions backend (`POST {base_url}/chat/completions`): OpenAI,
//! vLLM, the llama.cpp server, Ollama and others that speak the same API.
//!
//! Messages map as: system → `system`; human → `user`; model → `assistant` with `tool_calls`;
//! tool result → `tool` (an error result's text starts `[error] `); notice → `user` text starting
//! `[notice] `. Usage comes from `usage` (`prompt_tokens_details.cached_tokens` is the cached
//! part); a streamed call asks for it with `stream_options.include_usage`. With tools, a
//! [`ToolChoice`] other than `auto` travels as `tool_choice`, and `argument_chars` bounds every
//! argument string in the tools' schemas (`maxLength`).

use super::config::{default_connect_timeout, default_read_timeout, yes, Common, ConfigError};
use super::keys::ApiKey;
use super::reply::{self, arguments, model_of};
use super::retry::RetryPolicy;
use super::schema::{bound_strings, ToolChoice};
use super::sse::SseEvent;
use super::transport::{self, cut_short, event_json, Protocol, StreamReply};
use super::Backend;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use loopward_core::{ChatMessage, Message, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const BACKEND: &str = "openai";
/// The `finish_reason` of a reply cut off by its token limit; every other reason (`stop`,
/// `tool_calls`, …) is the model ending the reply.
const CUT_OFF: &str = "length";

/// Settings of an OpenAI-compatible backend, as written in `loopward.toml`.
///
/// ```
/// use loopward_runner::model::http::OpenAiConfig;
/// let c: OpenAiConfig = toml::from_str(r#"
///     base_url = "http://127.0.0.1:8080/v1"
///     model = "qwen2.5-7b-instruct"
///     read_timeout = "90s"
///     retry = { max_attempts = 2 }
/// "#).unwrap();
/// assert!(c.validate().is_ok());
/// assert!(c.stream); // streaming is the default
/// let bad = OpenAiConfig { key_env: Some("sk-live-123".into()), ..c };
/// assert!(bad.validate().unwrap_err().to_string().contains("key_env"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API root, up to and including `/v1` (default `https://api.openai.com/v1`).
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// The model name the server knows.
    pub model: String,
    /// The environment variable holding the key (e.g. `OPENAI_API_KEY`). With neither this nor
    /// `key_file`, no key is sent (local servers).
    #[serde(default)]
    pub key_env: Option<String>,
    /// A file holding only the key.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The most tokens a reply may have (a request's own, smaller limit wins).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// The request field the limit travels in: `max_tokens` (most servers) or
    /// `max_completion_tokens` (OpenAI's reasoning models refuse `max_tokens`).
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// Stream replies (server-sent events) instead of waiting for the whole body.
    #[serde(default = "yes")]
    pub stream: bool,
    /// How long to wait for a connection.
    #[serde(
        default = "default_connect_timeout",
        with = "crate::duration::required"
    )]
    pub connect_timeout: Duration,
    /// How long to wait for each read (so a stalled stream fails, a slow one does not).
    #[serde(default = "default_read_timeout", with = "crate::duration::required")]
    pub read_timeout: Duration,
    /// Retries of failed calls.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Whether a reply must call a tool: `auto` (the model chooses; not sent), `required`
    /// or `none`. Sent only with tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The longest a tool-call argument string may be, in characters: sent as `maxLength` on
    /// every string in the tools' schemas that sets none, so a server that constrains output to
    /// the schema (llama.cpp's) ends each argument within it. Unset: schemas go as they are.
    #[serde(default)]
    pub argument_chars: Option<u32>,
}

/// Which request field carries the token limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: vLLM, llama.cpp, Ollama, older OpenAI models.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's newer and reasoning models.
    MaxCompletionTokens,
}

impl MaxTokensField {
    fn name(self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

fn default_base_url() -> String {
    "https://api.openai.com/v1".into()
}

impl OpenAiConfig {
    /// A config for `model` at `base_url` with every other setting at its default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            key_env: None,
            key_file: None,
            max_tokens: None,
            max_tokens_field: MaxTokensField::default(),
            stream: true,
            connect_timeout: default_connect_timeout(),
            read_timeout: default_read_timeout(),
            retry: RetryPolicy::default(),
            tool_choice: ToolChoice::default(),
            argument_chars: None,
        }
    }

    fn common(&self) -> Common<'_> {
        Common {
            backend: BACKEND,
            base_url: &self.base_url,
            model: &self.model,
            key_env: self.key_env.as_deref(),
            key_file: self.key_file.as_ref(),
            connect_timeout: self.connect_timeout,
            read_timeout: self.read_timeout,
            retry: &self.retry,
        }
    }

    /// Checks every field; the error names the field and what to write instead.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.common().validate()?;
        if self.max_tokens == Some(0) {
            return Err(ConfigError::Invalid {
                backend: BACKEND,
                field: "max_tokens",
                why: "is 0; leave it out or give a positive limit".into(),
            });
        }
        if self.argument_chars == Some(0) {
            return Err(ConfigError::Invalid {
                backend: BACKEND,
                field: "argument_chars",
                why: "is 0; leave it out or give a positive length".into(),
            });
        }
        Ok(())
    }
}

/// The OpenAI-compatible backend: a `tower::Service<ChatRequest>`; clones share one client.
#[derive(Clone)]
pub struct OpenAiModel {
    inner: Arc<Backend<OpenAi, OpenAiConfig>>,
}

impl OpenAiModel {
    /// A backend for `config` sending `key` (none for servers without auth).
    pub fn new(config: OpenAiConfig, key: Option<ApiKey>) -> Result<Self, ConfigError> {
        config.validate()?;
        let transport = config.common().transport(
            "chat/completions",
            transport::key_header(key.as_ref(), "authorization", "Bearer "),
            &[],
        )?;
        Ok(Self {
            inner: Arc::new(Backend {
                protocol: OpenAi {
                    model: config.model.clone(),
                },
                keyed: key.is_some(),
                config,
                transport,
            }),
        })
    }

    /// A backend for `config`, reading the key its `key_env` or `key_file` names; `env` looks
    /// variables up (the CLI passes `|n| std::env::var(n).ok()`).
    pub fn from_config(
        config: OpenAiConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let key = config.common().key(env)?;
        Self::new(config, key)
    }
}

super::impl_http_model!(OpenAiModel, "OpenAiModel", "openai", request_body);

/// The JSON body of a chat-completions request.
fn request_body(config: &OpenAiConfig, req: &ChatRequest, stream: bool) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(message).collect();
    let mut body = json!({ "model": config.model, "messages": messages });
    if let Some(max) = super::min_limit(config.max_tokens, req.max_tokens) {
        body[config.max_tokens_field.name()] = json!(max);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                let parameters = match config.argument_chars {
                    Some(chars) => bound_strings(&t.parameters, chars),
                    None => t.parameters.clone(),
                };
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": parameters,
                }})
            })
            .collect();
        if let Some(choice) = config.tool_choice.wire() {
            body["tool_choice"] = json!(choice);
        }
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

fn message(m: &Message) -> Value {
    match m.as_chat() {
        ChatMessage::Text { role, text } => json!({"role": role, "content": text}),
        ChatMessage::Model {
            content,
            tool_calls,
        } => {
            let mut v = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                if content.is_empty() {
                    v["content"] = Value::Null;
                }
                v["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        let arguments = match &c.arguments {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": arguments}})
                    })
                    .collect();
            }
            v
        }
        ChatMessage::Tool(r) => {
            let content = if r.is_error {
                format!("[error] {}", r.content)
            } else {
                r.content.clone()
            };
            json!({"role": "tool", "tool_call_id": r.call_id, "content": content})
        }
    }
}

/// How chat-completions replies read.
#[derive(Clone)]
struct OpenAi {
    model: String,
}

fn usage(v: &Value) -> Usage {
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("/prompt_tokens"),
        output_tokens: n("/completion_tokens"),
        cached_tokens: n("/prompt_tokens_details/cached_tokens"),
        calls: 1,
    }
}

impl Protocol for OpenAi {
    type Stream = OpenAiStream;

    fn parse_full(&self, v: Value) -> Result<ChatResponse, ModelError> {
        let choice = v
            .pointer("/choices/0")
            .ok_or_else(|| ModelError::InvalidResponse("the reply has no choices".into()))?;
        let msg = choice.get("message").ok_or_else(|| {
            ModelError::InvalidResponse("the reply's choice has no message".into())
        })?;
        let mut tool_calls = Vec::new();
        for (i, c) in msg
            .get("tool_calls")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .enumerate()
        {
            let name = c
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() {
                return Err(ModelError::InvalidResponse(format!(
                    "tool call {i} has no name"
                )));
            }
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call-{i}"), str::to_owned);
            let args = match c.pointer("/function/arguments") {
                Some(Value::String(raw)) => arguments(raw),
                Some(Value::Object(o)) => Value::Object(o.clone()),
                _ => json!({}),
            };
            tool_calls.push(ToolCall::new(id, name, args));
        }
        let stop = reply::stop_reason(choice.get("finish_reason").and_then(Value::as_str), CUT_OFF);
        if stop.is_cut_off() && !tool_calls.is_empty() {
            return Err(reply::truncated_call("its token limit"));
        }
        Ok(ChatResponse {
            content: msg
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            tool_calls,
            usage: v.get("usage").map(usage).unwrap_or(Usage {
                calls: 1,
                ..Usage::default()
            }),
            model: model_of(&v, &self.model),
            stop,
        })
    }

    fn new_stream(&self) -> OpenAiStream {
        OpenAiStream {
            model: self.model.clone(),
            ..OpenAiStream::default()
        }
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// A streamed chat completion being put together.
#[derive(Default)]
pub(crate) struct OpenAiStream {
    model: String,
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    done: bool,
    usage: Option<Usage>,
}

impl StreamReply for OpenAiStream {
    fn event(&mut self, ev: SseEvent) -> Result<(), ModelError> {
        if ev.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v = event_json(&ev)?;
        if let Some(api) = super::error::ApiError::from_json(&v) {
            return Err(api.into_model_error());
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = m.to_owned();
        }
        if let Some(id) = v.get("id").and_then(Value::as_str) {
            crate::telemetry::record_response_id(id);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u));
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(());
        };
        if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        let deltas = choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array);
        for (pos, d) in deltas.map_or(&[][..], Vec::as_slice).iter().enumerate() {
            let index = d.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = d.get("id").and_then(Value::as_str) {
                call.id = id.to_owned();
            }
            if let Some(name) = d.pointer("/function/name").and_then(Value::as_str) {
                // Some servers repeat the whole name in every delta; others split it.
                if call.name != name {
                    call.name.push_str(name);
                }
            }
            if let Some(args) = d.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn finish(self) -> Result<ChatResponse, ModelError> {
        if !self.done && self.finish_reason.is_none() {
            let what = if self.calls.is_empty() {
                "no finish_reason"
            } else {
                "cut inside a tool call"
            };
            return Err(cut_short(what));
        }
        let stop = reply::stop_reason(self.finish_reason.as_deref(), CUT_OFF);
        if stop.is_cut_off() && !self.calls.is_empty() {
            return Err(reply::truncated_call("its token limit"));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, c) in self.calls {
            if c.name.is_empty() {
                return Err(ModelError::InvalidResponse(format!(
                    "streamed tool call {index} has no name"
                )));
            }
            let id = if c.id.is_empty() {
                format!("call-{index}")
            } else {
                c.id
            };
            tool_calls.push(ToolCall::new(id, c.name, arguments(&c.arguments)));
        }
        Ok(ChatResponse {
            content: self.content,
            tool_calls,
            usage: self.usage.unwrap_or(Usage {
                calls: 1,
                ..Usage::default()
            }),
            model: self.model,
            stop,
        })
    }
}
