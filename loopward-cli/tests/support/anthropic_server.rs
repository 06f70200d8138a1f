//! A scripted stand-in for the Anthropic Messages API on 127.0.0.1, for driving a real client
//! (Claude Code) offline: the script decides which tool calls the "model" makes.
//!
//! ```text
//! let (port, server) = anthropic_server::start(vec![
//!     Reply::tool("Write", json!({"file_path": "/p/a.txt", "content": "x"})),
//!     Reply::text("done"),
//! ]);
//! // ANTHROPIC_BASE_URL=http://127.0.0.1:{port} claude -p … ; then:
//! let seen = server.requests(); // every request the client made, in order
//! ```
//!
//! What it answers (everything a client was seen to ask, so none waits forever):
//! - `POST /v1/messages` whose body offers `tools` (the agent loop): the next scripted
//!   [`Reply`], as SSE when `"stream": true` (`message_start`, `content_block_start` / `_delta`
//!   (`text_delta`, `input_json_delta` in two pieces) / `_stop`, `message_delta` with the stop
//!   reason, `message_stop`) or as one JSON message; once the script is spent, the text `done`.
//! - any other `POST /v1/messages` (titles, summaries, quota probes with other models): the
//!   text `ok`, not taken from the script.
//! - `POST …/count_tokens`: `{"input_tokens": 1}`; `GET`/`HEAD` anything: `200 {}`; other
//!   requests: `404` with an Anthropic error body.
//!
//! Every response carries `content-length`; connections are kept alive until the client
//! closes them. Each request is logged ([`Server::requests`]).

#![allow(dead_code, unreachable_pub)]

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// One block of a scripted model reply.
#[derive(Clone, Debug)]
pub enum Block {
    /// Text.
    Text(String),
    /// A tool call: the tool's name and its input.
    ToolUse {
        /// The tool, as the client names it (`Write`, `Bash`…).
        name: String,
        /// Its input object.
        input: Value,
    },
}

/// One scripted model reply: its blocks, in order. Ends with `tool_use` when any block is a
/// tool call, else `end_turn`.
#[derive(Clone, Debug)]
pub struct Reply(pub Vec<Block>);

impl Reply {
    /// A reply that is only text.
    pub fn text(text: &str) -> Self {
        Self(vec![Block::Text(text.into())])
    }

    /// A reply that makes one tool call.
    pub fn tool(name: &str, input: Value) -> Self {
        Self(vec![Block::ToolUse {
            name: name.into(),
            input,
        }])
    }

    /// A reply that calls the client's `Bash` tool: `command`, described as `description`.
    pub fn bash(command: impl Into<Value>, description: &str) -> Self {
        Self::tool(
            "Bash",
            json!({"command": command.into(), "description": description}),
        )
    }

    /// A reply that calls the client's `Write` tool: `content` into `file_path`.
    pub fn write(file_path: impl Into<Value>, content: &str) -> Self {
        Self::tool(
            "Write",
            json!({"file_path": file_path.into(), "content": content}),
        )
    }
}

/// One request the client made.
#[derive(Clone, Debug)]
pub struct Request {
    /// `POST`, `GET`…
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// Which scripted reply answered it (`None`: not taken from the script).
    pub scripted: Option<usize>,
    /// The `x-api-key` it carried.
    pub api_key: Option<String>,
}

struct Shared {
    script: Vec<Reply>,
    next: usize,
    log: Vec<Request>,
    tool_ids: usize,
    /// Scripts of their own for conversations whose first user message holds the marker (a
    /// subagent's, whose prompt the main script wrote): marker, replies, next.
    lanes: Vec<(String, Vec<Reply>, usize)>,
    /// Lanes that asked for their first reply: none is answered until all have (so subagents
    /// act at the same time).
    arrived: usize,
}

/// The running server; stops when dropped.
pub struct Server {
    shared: Arc<Mutex<Shared>>,
    _listener: super::http::Listener,
}

impl Server {
    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().unwrap().log.clone()
    }

    /// How many scripted replies were served.
    pub fn served(&self) -> usize {
        self.shared.lock().unwrap().next
    }

    /// The tool results the client sent back, by tool-use id: `(is_error, text)`.
    pub fn tool_results(&self) -> Vec<(String, bool, String)> {
        let mut out: Vec<(String, bool, String)> = Vec::new();
        for r in self.requests() {
            for m in r.body["messages"].as_array().into_iter().flatten() {
                for c in m["content"].as_array().into_iter().flatten() {
                    if c["type"] != "tool_result" {
                        continue;
                    }
                    let id = c["tool_use_id"].as_str().unwrap_or("").to_string();
                    if out.iter().any(|(i, _, _)| *i == id) {
                        continue;
                    }
                    let text = text_of(&c["content"]).unwrap_or_else(|| c["content"].to_string());
                    out.push((id, c["is_error"] == true, text));
                }
            }
        }
        out
    }
}

/// Starts the server on a free port of 127.0.0.1: `(port, server)`.
pub fn start(script: Vec<Reply>) -> (u16, Server) {
    start_with_lanes(script, vec![])
}

/// [`start`], with a script per lane: a conversation whose first user message contains a
/// lane's marker (a subagent given that prompt) is answered from that lane's replies, and the
/// lanes' first replies wait until every lane asked (at most 20 s), so they run at once.
pub fn start_with_lanes(script: Vec<Reply>, lanes: Vec<(&str, Vec<Reply>)>) -> (u16, Server) {
    let shared = Arc::new(Mutex::new(Shared {
        script,
        next: 0,
        log: Vec::new(),
        tool_ids: 0,
        lanes: lanes
            .into_iter()
            .map(|(m, r)| (m.to_string(), r, 0))
            .collect(),
        arrived: 0,
    }));
    let listener = {
        let shared = shared.clone();
        super::http::listen(move |method, path, body, key| answer(&shared, method, path, body, key))
    };
    (
        listener.port,
        Server {
            shared,
            _listener: listener,
        },
    )
}

/// Decides the response to one request and logs the request.
fn answer(
    shared: &Mutex<Shared>,
    method: &str,
    path: &str,
    body: Value,
    api_key: Option<String>,
) -> (&'static str, &'static str, Vec<u8>) {
    let mut s = shared.lock().unwrap();
    let route = path.split('?').next().unwrap_or("");
    let lane = lane_of(&s, &body);
    if let Some(l) = lane {
        if s.lanes[l].2 == 0 && body["tools"].as_array().is_some_and(|t| !t.is_empty()) {
            s.arrived += 1;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while s.arrived < s.lanes.len() && std::time::Instant::now() < deadline {
                drop(s);
                std::thread::sleep(std::time::Duration::from_millis(20));
                s = shared.lock().unwrap();
            }
        }
    }
    let mut scripted = None;
    let response = if method == "GET" || method == "HEAD" {
        ("200 OK", "application/json", b"{}".to_vec())
    } else if method == "POST" && route.ends_with("/count_tokens") {
        (
            "200 OK",
            "application/json",
            br#"{"input_tokens":1}"#.to_vec(),
        )
    } else if method == "POST" && route == "/v1/messages" {
        let agent_loop = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let reply = if let (true, Some(l)) = (agent_loop, lane) {
            let (_, replies, next) = &mut s.lanes[l];
            *next += 1;
            replies
                .get(*next - 1)
                .cloned()
                .unwrap_or_else(|| Reply::text("done"))
        } else if agent_loop && s.next < s.script.len() {
            scripted = Some(s.next);
            s.next += 1;
            s.script[s.next - 1].clone()
        } else if agent_loop {
            Reply::text("done")
        } else {
            Reply::text("ok")
        };
        let model = body["model"].as_str().unwrap_or("claude-test").to_string();
        let first_id = s.tool_ids;
        s.tool_ids += reply.0.len();
        if body["stream"] == true {
            (
                "200 OK",
                "text/event-stream",
                sse(&reply, &model, first_id).into_bytes(),
            )
        } else {
            (
                "200 OK",
                "application/json",
                message(&reply, &model, first_id).to_string().into_bytes(),
            )
        }
    } else {
        (
            "404 Not Found",
            "application/json",
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("{method} {path}: not scripted")}})
                .to_string()
                .into_bytes(),
        )
    };
    s.log.push(Request {
        method: method.into(),
        path: path.into(),
        body,
        scripted,
        api_key,
    });
    response
}

/// The text of a message's `content`: a string, or its text parts joined by newlines.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// The lane whose marker is in the conversation's first user message.
fn lane_of(s: &Shared, body: &Value) -> Option<usize> {
    let text = text_of(&body["messages"][0]["content"])?;
    s.lanes
        .iter()
        .position(|(m, _, _)| text.contains(m.as_str()))
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.0.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn tool_id(n: usize) -> String {
    format!("toolu_{n:024}")
}

/// The reply as one (non-streamed) message.
fn message(reply: &Reply, model: &str, first_id: usize) -> Value {
    let content: Vec<Value> = reply
        .0
        .iter()
        .enumerate()
        .map(|(i, b)| match b {
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::ToolUse { name, input } => {
                json!({"type": "tool_use", "id": tool_id(first_id + i), "name": name, "input": input})
            }
        })
        .collect();
    json!({
        "id": format!("msg_{first_id:08}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(reply), "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    })
}

/// The reply as the Messages API's server-sent events.
fn sse(reply: &Reply, model: &str, first_id: usize) -> String {
    let mut events = vec![json!({
        "type": "message_start",
        "message": {"id": format!("msg_{first_id:08}"), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}},
    })];
    for (i, b) in reply.0.iter().enumerate() {
        match b {
            Block::Text(t) => {
                events.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}));
                events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}));
            }
            Block::ToolUse { name, input } => {
                events.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": tool_id(first_id + i), "name": name, "input": {}}}));
                let whole = input.to_string();
                let cut = whole
                    .char_indices()
                    .map(|(at, _)| at)
                    .nth(whole.chars().count() / 2)
                    .unwrap_or(0);
                for piece in [&whole[..cut], &whole[cut..]] {
                    events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": piece}}));
                }
            }
        }
        events.push(json!({"type": "content_block_stop", "index": i}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null}, "usage": {"output_tokens": 1}}));
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}
