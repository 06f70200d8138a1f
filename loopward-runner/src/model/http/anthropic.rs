//! The Anthropic Messages API backend (`POST {base_url}/v1/messages`).
//!
//! System messages join into the top-level `system`; human → `user` text; model → `assistant`
//! text and `tool_use` blocks; a tool result → a `tool_result` block (with `is_error`) in a
//! `user` message; a notice → `user` text starting `[notice] `. Consecutive messages of one role
//! merge into one message, so all results of one assistant turn travel together as the API
//! requires. Usage: input counts `input_tokens` plus both cache fields; cached is
//! `cache_read_input_tokens`.

use super::config::{default_connect_timeout, default_read_timeout, yes, Common, ConfigError};
use super::keys::ApiKey;
use super::reply::{self, model_of};
use super::retry::RetryPolicy;
use super::sse::SseEvent;
use super::transport::{self, cut_short, event_json, Protocol, StreamReply};
use super::Backend;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use loopward_core::{ChatMessage, ChatRole, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const BACKEND: &str = "anthropic";
/// The `stop_reason` of a reply cut off by its token limit; every other reason (`end_turn`,
/// `stop_sequence`, `tool_use`, …) is the model ending the reply.
const CUT_OFF: &str = "max_tokens";

/// Settings of the Anthropic backend, as written in `loopward.toml`.
///
/// ```
/// use loopward_runner::model::http::AnthropicConfig;
/// let c = AnthropicConfig::new("claude-sonnet-4-5", "ANTHROPIC_API_KEY");
/// assert!(c.validate().is_ok());
/// let err = AnthropicConfig { key_env: None, ..c }.validate().unwrap_err();
/// assert!(err.to_string().contains("needs a key"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    /// The API root (default `https://api.anthropic.com`); requests go to `/v1/messages`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding the key (e.g. `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub key_env: Option<String>,
    /// A file holding only the key.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The most tokens a reply may have (required by the API; a request's own, smaller limit
    /// wins).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// The `anthropic-version` header.
    #[serde(default = "default_version")]
    pub anthropic_version: String,
    /// Stream replies (server-sent events) instead of waiting for the whole body.
    #[serde(default = "yes")]
    pub stream: bool,
    /// How long to wait for a connection.
    #[serde(
        default = "default_connect_timeout",
        with = "crate::duration::required"
    )]
    pub connect_timeout: Duration,
    /// How long to wait for each read.
    #[serde(default = "default_read_timeout", with = "crate::duration::required")]
    pub read_timeout: Duration,
    /// Retries of failed calls.
    #[serde(default)]
    pub retry: RetryPolicy,
}

fn default_base_url() -> String {
    "https://api.anthropic.com".into()
}
fn default_max_tokens() -> u32 {
    4096
}
fn default_version() -> String {
    "2023-06-01".into()
}

impl AnthropicConfig {
    /// A config for `model` with its key in the environment variable `key_env`.
    pub fn new(model: impl Into<String>, key_env: impl Into<String>) -> Self {
        Self {
            base_url: default_base_url(),
            model: model.into(),
            key_env: Some(key_env.into()),
            key_file: None,
            max_tokens: default_max_tokens(),
            anthropic_version: default_version(),
            stream: true,
            connect_timeout: default_connect_timeout(),
            read_timeout: default_read_timeout(),
            retry: RetryPolicy::default(),
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
        let invalid = |field, why: &str| ConfigError::Invalid {
            backend: BACKEND,
            field,
            why: why.into(),
        };
        self.common().validate()?;
        if self.key_env.is_none() && self.key_file.is_none() {
            return Err(invalid(
                "key_env",
                "is missing: the Messages API needs a key; set key_env = \"ANTHROPIC_API_KEY\" or key_file",
            ));
        }
        if self.max_tokens == 0 {
            return Err(invalid(
                "max_tokens",
                "is 0; the API needs a positive limit",
            ));
        }
        if self.anthropic_version.trim().is_empty() {
            return Err(invalid(
                "anthropic_version",
                "is empty; leave it out for \"2023-06-01\"",
            ));
        }
        Ok(())
    }
}

/// The Anthropic backend: a `tower::Service<ChatRequest>`; clones share one client.
#[derive(Clone)]
pub struct AnthropicModel {
    inner: Arc<Backend<Anthropic, AnthropicConfig>>,
}

impl AnthropicModel {
    /// A backend for `config` sending `key`.
    pub fn new(config: AnthropicConfig, key: ApiKey) -> Result<Self, ConfigError> {
        config.validate()?;
        let transport = config.common().transport(
            "v1/messages",
            transport::key_header(Some(&key), "x-api-key", ""),
            &[("anthropic-version", &config.anthropic_version)],
        )?;
        Ok(Self {
            inner: Arc::new(Backend {
                protocol: Anthropic {
                    model: config.model.clone(),
                },
                keyed: true,
                config,
                transport,
            }),
        })
    }

    /// A backend for `config`, reading the key its `key_env` or `key_file` names; `env` looks
    /// variables up (the CLI passes `|n| std::env::var(n).ok()`).
    pub fn from_config(
        config: AnthropicConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let key = config.common().key(env)?.ok_or(ConfigError::Invalid {
            backend: BACKEND,
            field: "key_env",
            why: "is missing".into(),
        })?;
        Self::new(config, key)
    }
}

super::impl_http_model!(AnthropicModel, "AnthropicModel", "anthropic", request_body);

/// The JSON body of a Messages request.
fn request_body(config: &AnthropicConfig, req: &ChatRequest, stream: bool) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let (role, blocks) = match m.as_chat() {
            ChatMessage::Text {
                role: ChatRole::System,
                text,
            } => {
                system.push(text);
                continue;
            }
            ChatMessage::Text {
                role: ChatRole::User,
                text,
            } => ("user", text_block(&text)),
            ChatMessage::Model {
                content,
                tool_calls,
            } => {
                let mut blocks = text_block(content);
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
                }));
                ("assistant", blocks)
            }
            ChatMessage::Tool(r) => {
                let mut block = json!({"type": "tool_result", "tool_use_id": r.call_id});
                if !r.content.is_empty() {
                    block["content"] = json!(r.content);
                }
                if r.is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let max_tokens =
        super::min_limit(Some(config.max_tokens), req.max_tokens).unwrap_or(config.max_tokens);
    let mut body = json!({
        "model": config.model,
        "max_tokens": max_tokens,
        "messages": messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect::<Vec<_>>(),
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// A text block, or none for empty text (the API refuses empty text blocks).
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        vec![]
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// How Messages replies read.
#[derive(Clone)]
struct Anthropic {
    model: String,
}

/// Reads a `usage` object; fields it lacks keep their values in `into`.
fn read_usage(v: &Value, into: &mut [u64; 4]) {
    for (i, field) in [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    ]
    .iter()
    .enumerate()
    {
        if let Some(n) = v.get(field).and_then(Value::as_u64) {
            into[i] = n;
        }
    }
}

fn to_usage([input, created, read, output]: [u64; 4]) -> Usage {
    Usage {
        input_tokens: input + created + read,
        output_tokens: output,
        cached_tokens: read,
        calls: 1,
    }
}

impl Protocol for Anthropic {
    type Stream = AnthropicStream;

    fn parse_full(&self, v: Value) -> Result<ChatResponse, ModelError> {
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| ModelError::InvalidResponse("the reply has no content array".into()))?;
        let mut content = String::new();
        let mut tool_calls = Vec::new();
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    content.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""))
                }
                Some("tool_use") => {
                    let field = |k| b.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let (id, name) = (field("id"), field("name"));
                    if id.is_empty() || name.is_empty() {
                        return Err(ModelError::InvalidResponse(
                            "a tool_use block has no id or name".into(),
                        ));
                    }
                    tool_calls.push(ToolCall::new(
                        id,
                        name,
                        b.get("input").cloned().unwrap_or(json!({})),
                    ));
                }
                _ => {}
            }
        }
        let stop = reply::stop_reason(v.get("stop_reason").and_then(Value::as_str), CUT_OFF);
        if stop.is_cut_off() && !tool_calls.is_empty() {
            return Err(reply::truncated_call(CUT_OFF));
        }
        let mut usage = [0; 4];
        if let Some(u) = v.get("usage") {
            read_usage(u, &mut usage);
        }
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: to_usage(usage),
            model: model_of(&v, &self.model),
            stop,
        })
    }

    fn new_stream(&self) -> AnthropicStream {
        AnthropicStream {
            model: self.model.clone(),
            ..AnthropicStream::default()
        }
    }
}

enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// A streamed Messages reply being put together.
#[derive(Default)]
pub(crate) struct AnthropicStream {
    model: String,
    blocks: BTreeMap<u64, (Block, bool)>,
    stop_reason: Option<String>,
    usage: [u64; 4],
    done: bool,
}

impl StreamReply for AnthropicStream {
    fn event(&mut self, ev: SseEvent) -> Result<(), ModelError> {
        let v = event_json(&ev)?;
        let kind = ev
            .event
            .clone()
            .or_else(|| v.get("type").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind.as_str() {
            "error" => {
                let api = super::error::ApiError::from_json(&v).unwrap_or_default();
                return Err(api.into_model_error());
            }
            "message_start" => {
                if let Some(m) = v.pointer("/message/model").and_then(Value::as_str) {
                    self.model = m.to_owned();
                }
                if let Some(id) = v.pointer("/message/id").and_then(Value::as_str) {
                    crate::telemetry::record_response_id(id);
                }
                if let Some(u) = v.pointer("/message/usage") {
                    read_usage(u, &mut self.usage);
                }
            }
            "content_block_start" => {
                let b = v.get("content_block").cloned().unwrap_or_default();
                let field = |k| b.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                let block = match b.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(field("text")),
                    Some("tool_use") => Block::ToolUse {
                        id: field("id"),
                        name: field("name"),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, (block, false));
            }
            "content_block_delta" => {
                let Some((block, _)) = self.blocks.get_mut(&index) else {
                    return Err(ModelError::InvalidResponse(format!(
                        "a delta for content block {index}, which never started"
                    )));
                };
                let delta = |k| v.pointer(k).and_then(Value::as_str).unwrap_or("");
                match block {
                    Block::Text(t) => t.push_str(delta("/delta/text")),
                    Block::ToolUse { json, .. } => json.push_str(delta("/delta/partial_json")),
                    Block::Other => {}
                }
            }
            "content_block_stop" => {
                if let Some((_, stopped)) = self.blocks.get_mut(&index) {
                    *stopped = true;
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(u) = v.get("usage") {
                    read_usage(u, &mut self.usage);
                }
            }
            "message_stop" => self.done = true,
            _ => {} // ping and event types added later
        }
        Ok(())
    }

    fn finish(self) -> Result<ChatResponse, ModelError> {
        let open_tool = self
            .blocks
            .values()
            .any(|(b, stopped)| matches!(b, Block::ToolUse { .. }) && !stopped);
        if !self.done || open_tool {
            return Err(cut_short(if open_tool {
                "cut inside a tool call"
            } else {
                "no message_stop"
            }));
        }
        let has_tool = self
            .blocks
            .values()
            .any(|(b, _)| matches!(b, Block::ToolUse { .. }));
        let stop = reply::stop_reason(self.stop_reason.as_deref(), CUT_OFF);
        if stop.is_cut_off() && has_tool {
            return Err(reply::truncated_call(CUT_OFF));
        }
        let mut content = String::new();
        let mut tool_calls = Vec::new();
        for (index, (block, _)) in self.blocks {
            match block {
                Block::Text(t) => content.push_str(&t),
                Block::ToolUse { id, name, json } => {
                    if id.is_empty() || name.is_empty() {
                        return Err(ModelError::InvalidResponse(format!(
                            "streamed tool_use block {index} has no id or name"
                        )));
                    }
                    tool_calls.push(ToolCall::new(id, name, reply::arguments(&json)));
                }
                Block::Other => {}
            }
        }
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: to_usage(self.usage),
            model: self.model,
            stop,
        })
    }
}
