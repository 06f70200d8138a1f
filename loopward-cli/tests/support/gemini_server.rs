//! A scripted stand-in for the Gemini API on 127.0.0.1, for driving the real Gemini CLI offline
//! (`GOOGLE_GEMINI_BASE_URL` pointing here): the script decides which tool calls the "model"
//! makes.
//!
//! What it answers: `POST …:streamGenerateContent` / `…:generateContent` whose body offers
//! `tools` (the agent loop) — the next scripted [`Call`] as one SSE chunk (or one JSON answer);
//! once the script is spent, the text `done`. Other generation requests (the client's own
//! checks) get a text part that says the user speaks next; `…:countTokens` gets a count;
//! anything else `404 {}`. Each agent-loop request is logged.

#![allow(dead_code, unreachable_pub)]

use serde_json::{json, Value};

/// One scripted model turn.
#[derive(Clone, Debug)]
pub enum Call {
    /// A function call: the tool's name and its arguments.
    Tool(String, Value),
    /// A text answer (ends the turn).
    Text(String),
}

impl Call {
    /// A function call of `name` with `args`.
    pub fn tool(name: &str, args: Value) -> Self {
        Self::Tool(name.into(), args)
    }

    /// Gemini CLI's `write_file` of `content` at `file_path`.
    pub fn write(file_path: impl Into<Value>, content: &str) -> Self {
        let file_path = file_path.into();
        Self::tool(
            "write_file",
            json!({"file_path": file_path, "content": content}),
        )
    }

    /// Gemini CLI's `run_shell_command` running `command`.
    pub fn shell(command: &str) -> Self {
        Self::tool("run_shell_command", json!({ "command": command }))
    }
}

/// The server; stops when dropped.
pub use super::http::Scripted as Server;

impl Server {
    /// What the client sent back for each function call, in order: `(tool, response)`.
    pub fn responses(&self) -> Vec<(String, String)> {
        let last = self.requests().pop().unwrap_or(Value::Null);
        let mut out = Vec::new();
        for c in last["contents"].as_array().into_iter().flatten() {
            for p in c["parts"].as_array().into_iter().flatten() {
                let r = &p["functionResponse"];
                if r.is_object() {
                    out.push((
                        r["name"].as_str().unwrap_or("").to_string(),
                        r["response"].to_string(),
                    ));
                }
            }
        }
        out
    }

    /// The first part, in any request the client sent, that answers a call of `tool`
    /// (`{"functionResponse": …}`).
    pub fn answer_to(&self, tool: &str) -> Option<Value> {
        self.requests()
            .iter()
            .flat_map(|r| r["contents"].as_array().cloned().unwrap_or_default())
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .find(|p| p["functionResponse"]["name"] == tool)
    }
}

/// Starts the server on a free port of 127.0.0.1: `(port, server)`.
pub fn start(script: Vec<Call>) -> (u16, Server) {
    let done = Call::Text("done".into());
    super::http::scripted(script, done, |method, path, body, steps| {
        if method != "POST" {
            return ("404 Not Found", "application/json", b"{}".to_vec());
        }
        if path.contains(":countTokens") {
            return (
                "200 OK",
                "application/json",
                json!({"totalTokens": 1}).to_string().into_bytes(),
            );
        }
        let parts = if body.get("tools").is_some() {
            match steps.next(body).1 {
                Call::Tool(name, args) => {
                    json!([{"functionCall": {"name": name, "args": args}}])
                }
                Call::Text(text) => json!([{ "text": text }]),
            }
        } else {
            json!([{"text": "{\"reasoning\": \"the model answered\", \"next_speaker\": \"user\"}"}])
        };
        let chunk = json!({
            "candidates": [{"content": {"role": "model", "parts": parts},
                "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        });
        if path.contains("alt=sse") {
            (
                "200 OK",
                "text/event-stream",
                format!("data: {chunk}\r\n\r\n").into_bytes(),
            )
        } else {
            ("200 OK", "application/json", chunk.to_string().into_bytes())
        }
    })
}
