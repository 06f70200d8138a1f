//! The scripted fake backend: deterministic replies per agent, with zero keys and no network.
//!
//! A script lists, per agent, the replies that agent's model gives, in order. Each reply has
//! optional text and tool calls. The n-th call made for an agent gets its n-th reply; when the
//! replies run out the call fails with [`ModelError::ScriptExhausted`]. A conversation that
//! already holds k replies of the model gets at least the (k+1)-th reply, so a run resumed from
//! its journal in a new process (its recorded replies fed back, not asked again) goes on with
//! the script where it stopped.
//!
//! Scripts load from JSON or TOML. In TOML:
//!
//! ```toml
//! [[agents.planner]]
//! text = "Writing the plan."
//! tool_calls = [{ name = "write_file", arguments = { path = "plan.md", content = "# Plan" } }]
//!
//! [[agents.planner]]
//! tool_calls = [{ name = "handoff", arguments = { to = "builder", message = "go" } }]
//!
//! [[agents.builder]]
//! text = "Done."
//!
//! [[agents.reviewer]]
//! text = "The review found three"
//! stop = "token_limit"          # cut off by the token limit, like finish_reason "length"
//! ```
//!
//! ```
//! use loopward_runner::model::{fake::{FakeModel, Script}, ChatRequest, TurnSlot};
//! use loopward_core::AgentId;
//! use tower::ServiceExt;
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let script = Script::from_toml(r#"
//!     [[agents.builder]]
//!     text = "hello"
//! "#).unwrap();
//! let model = FakeModel::new(script);
//! let req = ChatRequest { agent: AgentId::new("builder").unwrap(), messages: vec![], tools: vec![], max_tokens: None, turn: TurnSlot::empty() };
//! let reply = model.clone().oneshot(req.clone()).await.unwrap();
//! assert_eq!(reply.content, "hello");
//! assert!(model.oneshot(req).await.is_err()); // the script ran out
//! # });
//! ```

use super::{estimate_tokens, ChatRequest, ChatResponse, ModelError, StopReason};
use futures::future::{ready, Ready};
use loopward_core::{AgentId, CallId, Message, ToolCall, ToolName, Usage};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// One scripted reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    /// Visible text.
    #[serde(default)]
    pub text: String,
    /// Tool calls; ids are generated when omitted.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// How the reply ends (`stop = "token_limit"`: cut off by the token limit, as a real
    /// backend reports `finish_reason: "length"`); default finished.
    #[serde(default, skip_serializing_if = "StopReason::is_finished")]
    pub stop: StopReason,
}

/// One scripted tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// Call id (default: `call-<agent>-<reply>-<index>`).
    #[serde(default)]
    pub id: Option<CallId>,
    /// The tool's name.
    pub name: ToolName,
    /// Its arguments.
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// Replies per agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// For each agent, its replies in order.
    pub agents: BTreeMap<AgentId, Vec<ScriptedReply>>,
}

/// A script that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid fake script: {0}")]
pub struct ScriptError(String);

impl Script {
    /// Parses a TOML script.
    pub fn from_toml(text: &str) -> Result<Self, ScriptError> {
        toml::from_str(text).map_err(|e| ScriptError(e.to_string()))
    }

    /// Parses a JSON script.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        serde_json::from_str(text).map_err(|e| ScriptError(e.to_string()))
    }

    /// Appends a reply for `agent`.
    pub fn push(&mut self, agent: &AgentId, reply: ScriptedReply) -> &mut Self {
        self.agents.entry(agent.clone()).or_default().push(reply);
        self
    }

    /// Appends a reply that only says `text`.
    pub fn say(&mut self, agent: &AgentId, text: &str) -> &mut Self {
        self.push(
            agent,
            ScriptedReply {
                text: text.into(),
                tool_calls: vec![],
                stop: StopReason::Finished,
            },
        )
    }

    /// Appends a reply that makes one tool call.
    pub fn call(&mut self, agent: &AgentId, tool: &str, arguments: serde_json::Value) -> &mut Self {
        self.push(
            agent,
            ScriptedReply {
                text: String::new(),
                tool_calls: vec![ScriptedCall {
                    id: None,
                    name: tool.into(),
                    arguments,
                }],
                stop: StopReason::Finished,
            },
        )
    }
}

/// The scripted model. Clones share their position in the script.
#[derive(Clone, Debug)]
pub struct FakeModel {
    script: Arc<Script>,
    cursor: Arc<Mutex<HashMap<AgentId, usize>>>,
    call_log: Option<Arc<PathBuf>>,
    follow_conversation: bool,
}

impl FakeModel {
    /// A model that plays `script`.
    pub fn new(script: Script) -> Self {
        Self {
            script: Arc::new(script),
            cursor: Arc::default(),
            call_log: None,
            follow_conversation: true,
        }
    }

    /// Gives replies strictly in the order calls arrive, whatever the conversation already
    /// holds (for a replay that feeds each part of a resumed run only the replies made live in
    /// that part).
    pub fn ignoring_conversation(mut self) -> Self {
        self.follow_conversation = false;
        self
    }

    /// Appends one line, `<agent> <n>`, to `path` for every reply given (the n-th reply of that
    /// agent's script), with one write each: a count of model calls that survives the process,
    /// for tests that kill a run and resume it.
    pub fn with_call_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.call_log = Some(Arc::new(path.into()));
        self
    }

    fn log_call(&self, agent: &AgentId, step: usize) -> Result<(), ModelError> {
        let Some(path) = &self.call_log else {
            return Ok(());
        };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.as_path())
            .and_then(|mut f| f.write_all(format!("{agent} {step}\n").as_bytes()))
            .map_err(|e| {
                ModelError::Transport(format!(
                    "the fake backend cannot append to its call log {}: {e}",
                    path.display()
                ))
            })
    }

    fn reply(&self, req: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let mut cursor = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        let n = cursor.entry(req.agent.clone()).or_insert(0);
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Model { .. }))
            .count();
        if self.follow_conversation {
            *n = (*n).max(answered);
        }
        let replies = self
            .script
            .agents
            .get(&req.agent)
            .map_or(&[][..], Vec::as_slice);
        let Some(reply) = replies.get(*n) else {
            return Err(ModelError::ScriptExhausted {
                agent: req.agent.clone(),
                step: *n + 1,
                available: replies.len(),
            });
        };
        *n += 1;
        let step = *n;
        self.log_call(&req.agent, step)?;
        let tool_calls = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call-{}-{step}-{}", req.agent, i + 1).into()),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        let input: u64 = req.messages.iter().map(|m| estimate_tokens(m.text())).sum();
        let output = estimate_tokens(&reply.text)
            + reply
                .tool_calls
                .iter()
                .map(|c| estimate_tokens(&c.arguments.to_string()) + 1)
                .sum::<u64>();
        Ok(ChatResponse {
            content: reply.text.clone(),
            tool_calls,
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                cached_tokens: 0,
                calls: 1,
            },
            model: "fake".into(),
            stop: reply.stop,
        })
    }
}

impl tower::Service<ChatRequest> for FakeModel {
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = Ready<Result<ChatResponse, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ChatRequest) -> Self::Future {
        crate::telemetry::record_provider(&req, "loopward.fake");
        ready(self.reply(&req))
    }
}
