//! A scripted stand-in for the OpenAI Responses API on 127.0.0.1, for driving the real Codex CLI
//! offline (a custom provider whose `base_url` is this server, `wire_api = "responses"`): the
//! script decides which tool calls the "model" makes.
//!
//! What it answers: `POST …/responses` — the next scripted [`Step`] as SSE
//! (`response.created`, one `response.output_item.done` per item, `response.completed`); once the
//! script is spent, the text `done`. Anything else: `404 {}`. Each request is logged.

#![allow(dead_code, unreachable_pub)]

use serde_json::{json, Value};

/// One scripted model turn.
#[derive(Clone, Debug)]
pub enum Step {
    /// The freeform `apply_patch` tool, with this patch body.
    Patch(String),
    /// The `exec_command` tool, running this command line.
    Exec(String),
    /// The `exec_command` tool, running this command line and waiting up to this many
    /// milliseconds before the client hands the model what it printed so far.
    ExecWaiting(String, u64),
    /// A call of an MCP server's tool, once a [`Step::ToolSearch`] offered it: its namespace
    /// as Codex names it to the model (`mcp__loopward`), the tool (`handoff`), its arguments.
    McpCall(String, String, Value),
    /// A `tool_search` for this query (Codex offers an MCP server's tools only once the model
    /// searched for them).
    ToolSearch(String),
    /// A text answer (ends the turn).
    Text(String),
}

impl Step {
    /// An `apply_patch` replacing the line `old` of the file at `path` with `new`.
    pub fn update(path: &str, old: &str, new: &str) -> Self {
        Self::Patch(format!(
            "*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"
        ))
    }
}

/// The server; stops when dropped.
pub use super::http::Scripted as Server;

impl Server {
    /// What the client sent back for each tool call, by call id, in order: the output text.
    pub fn outputs(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for r in self.requests() {
            for item in r["input"].as_array().into_iter().flatten() {
                let kind = item["type"].as_str().unwrap_or("");
                if !kind.ends_with("_call_output") {
                    continue;
                }
                let id = item["call_id"].as_str().unwrap_or("").to_string();
                if out.iter().any(|(i, _)| *i == id) {
                    continue;
                }
                let text = match &item["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push((id, text));
            }
        }
        out
    }
}

/// Starts the server on a free port of 127.0.0.1: `(port, server)`.
pub fn start(script: Vec<Step>) -> (u16, Server) {
    let done = Step::Text("done".into());
    super::http::scripted(script, done, |method, path, body, steps| {
        if method != "POST" || !path.split('?').next().unwrap_or("").ends_with("/responses") {
            return ("404 Not Found", "application/json", b"{}".to_vec());
        }
        let (n, step) = steps.next(body);
        ("200 OK", "text/event-stream", sse(&step, n).into_bytes())
    })
}

fn exec(n: usize, arguments: &Value) -> Value {
    call(n, "exec_command", arguments)
}

fn call(n: usize, name: &str, arguments: &Value) -> Value {
    json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
        "name": name, "arguments": arguments.to_string()})
}

fn sse(step: &Step, n: usize) -> String {
    let item = match step {
        Step::Patch(patch) => json!({"type": "custom_tool_call", "id": format!("ct_{n}"),
            "call_id": format!("call_{n}"), "name": "apply_patch", "input": patch}),
        Step::Exec(cmd) => exec(n, &json!({ "cmd": cmd })),
        Step::ExecWaiting(cmd, ms) => exec(n, &json!({ "cmd": cmd, "yield_time_ms": ms })),
        Step::McpCall(namespace, name, arguments) => {
            let mut item = call(n, name, arguments);
            item["namespace"] = json!(namespace);
            item
        }
        Step::ToolSearch(query) => json!({"type": "tool_search_call", "id": format!("ts_{n}"),
            "call_id": format!("call_{n}"), "execution": "client",
            "arguments": {"query": query, "limit": 4}}),
        Step::Text(text) => json!({"type": "message", "id": format!("msg_{n}"),
            "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
    };
    let id = format!("resp_{n}");
    let events = [
        ("response.created", json!({"response": {"id": id}})),
        ("response.output_item.done", json!({ "item": item })),
        (
            "response.completed",
            json!({"response": {"id": id, "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}),
        ),
    ];
    events
        .into_iter()
        .map(|(t, mut d)| {
            d["type"] = json!(t);
            format!("event: {t}\ndata: {d}\n\n")
        })
        .collect()
}
