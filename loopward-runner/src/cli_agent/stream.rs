//! Claude Code's `--output-format stream-json --verbose` stream, one JSON object a line, read
//! into [`SessionEvent`]s: the session's start, each model call (its usage, text and tool
//! calls), each tool result, and the session's end (its status, usage and reported cost).
//!
//! The format is the client's, not a published schema: the parser knows the pinned version's
//! line types and refuses any other, so a client that changed its stream stops the loop with a
//! clear error instead of being half-understood.

use super::pin::Pin;
use loopward_core::{CallId, ToolCall, Usage};
use serde_json::Value;

/// One thing a session's stream said, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// The session started (`system`/`init`).
    Started {
        /// The session id the client uses.
        session: String,
        /// The model it talks to.
        model: String,
    },
    /// One model call: one API message, which the client may split over several lines.
    ModelCall {
        /// The API message id.
        id: String,
        /// The model that answered.
        model: String,
        /// Its text blocks, joined.
        text: String,
        /// Its tool calls.
        tool_calls: Vec<ToolCall>,
        /// Its tokens.
        usage: Usage,
    },
    /// A tool call's result as the client gave it back to the model.
    ToolResult {
        /// The tool call's id.
        call_id: CallId,
        /// Whether the client marked it an error (a hook's refusal is one).
        is_error: bool,
        /// Its text.
        content: String,
    },
    /// The session ended (`result`).
    Ended(SessionEnd),
}

/// How a session ended, as its `result` line reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionEnd {
    /// `success`, `error_max_turns`, `error_during_execution`…
    pub subtype: String,
    /// Whether the client counts it an error.
    pub is_error: bool,
    /// The agent's final answer.
    pub text: String,
    /// The session's tokens, as reported.
    pub usage: Usage,
    /// The session's cost, as reported, in micro-dollars.
    pub cost_micros: Option<u64>,
    /// Model turns the client counted.
    pub turns: u64,
}

/// A line the parser does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the session's stream is not what {client} {version} writes ({why}); the installed client may not be the tested version: check `{program} --version`")]
pub struct StreamError {
    /// The line number (from 1).
    pub line: usize,
    /// What was wrong.
    pub why: String,
    /// The client (`Claude Code`, `Codex`, `Gemini CLI`).
    pub client: &'static str,
    /// Its binary's usual name.
    pub program: &'static str,
    /// The version the parser knows.
    pub version: &'static str,
}

/// Reads one client's stream line by line into [`SessionEvent`]s.
pub trait Parse: Send {
    /// Reads one line; returns the events it completes.
    fn line(&mut self, text: &str) -> Result<Vec<SessionEvent>, StreamError>;
    /// The stream ended: what was still being assembled, if anything.
    fn finish(&mut self) -> Option<SessionEvent>;
}

impl Parse for StreamParser {
    fn line(&mut self, text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        StreamParser::line(self, text)
    }
    fn finish(&mut self) -> Option<SessionEvent> {
        StreamParser::finish(self)
    }
}

/// Reads a stream line by line; keeps what spans lines (an API message split over several).
#[derive(Debug, Default)]
pub struct StreamParser {
    line: usize,
    /// The model call being assembled: its lines share one message id.
    open: Option<SessionEvent>,
}

/// Line types that carry nothing the ledger needs.
const QUIET: [&str; 4] = [
    "rate_limit_event",
    "stream_event",
    "prompt_suggestion",
    "keep_alive",
];

impl StreamParser {
    /// A parser for a new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one line; returns the events it completes (a model call is complete when a line
    /// of another message follows it, or at [`StreamParser::finish`]).
    pub fn line(&mut self, text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        let Some((v, bad)) = json_line(&super::claude_code::PIN, &mut self.line, text)? else {
            return Ok(vec![]);
        };
        let kind = v["type"].as_str().unwrap_or_default();
        let mut out = vec![];
        match kind {
            "system" => {
                if v["subtype"] == "init" {
                    out.extend(self.open.take());
                    out.push(SessionEvent::Started {
                        session: str_of(&v["session_id"]),
                        model: str_of(&v["model"]),
                    });
                }
            }
            "assistant" => {
                // A subagent's messages (`parent_tool_use_id` set) are the subagent's calls;
                // they are still model calls of this session.
                let m = &v["message"];
                let id = m["id"]
                    .as_str()
                    .ok_or_else(|| bad("an assistant message without an id".into()))?;
                let content = m["content"]
                    .as_array()
                    .ok_or_else(|| bad("an assistant message without content".into()))?;
                let same = matches!(&self.open, Some(SessionEvent::ModelCall { id: open, .. }) if open == id);
                if !same {
                    out.extend(self.open.take());
                    self.open = Some(SessionEvent::ModelCall {
                        id: id.to_string(),
                        model: str_of(&m["model"]),
                        text: String::new(),
                        tool_calls: vec![],
                        usage: usage(&m["usage"]),
                    });
                }
                let Some(SessionEvent::ModelCall {
                    text, tool_calls, ..
                }) = &mut self.open
                else {
                    unreachable!("just opened")
                };
                for block in content {
                    match block["type"].as_str().unwrap_or_default() {
                        "text" => {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(block["text"].as_str().unwrap_or_default());
                        }
                        "tool_use" => tool_calls.push(ToolCall {
                            id: str_of(&block["id"]).into(),
                            name: str_of(&block["name"]).into(),
                            arguments: block["input"].clone(),
                        }),
                        "thinking" | "redacted_thinking" => {}
                        other => return Err(bad(format!("an assistant block of type {other:?}"))),
                    }
                }
            }
            "user" => {
                out.extend(self.open.take());
                let content = &v["message"]["content"];
                for block in content.as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        out.push(SessionEvent::ToolResult {
                            call_id: str_of(&block["tool_use_id"]).into(),
                            is_error: block["is_error"] == true,
                            content: result_text(&block["content"]),
                        });
                    }
                }
            }
            "result" => {
                out.extend(self.open.take());
                let cost = v["total_cost_usd"]
                    .as_f64()
                    .filter(|c| c.is_finite() && *c >= 0.0);
                out.push(SessionEvent::Ended(SessionEnd {
                    subtype: str_of(&v["subtype"]),
                    is_error: v["is_error"] == true,
                    text: v["result"].as_str().unwrap_or_default().to_string(),
                    usage: usage(&v["usage"]),
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    cost_micros: cost.map(|c| (c * 1_000_000.0).round() as u64),
                    turns: v["num_turns"].as_u64().unwrap_or_default(),
                }));
            }
            k if QUIET.contains(&k) => {}
            other => return Err(bad(format!("a line of type {other:?}"))),
        }
        Ok(out)
    }

    /// The stream ended: the model call still being assembled, if any.
    pub fn finish(&mut self) -> Option<SessionEvent> {
        self.open.take()
    }
}

/// Reads line number `*line + 1` of `pin`'s stream as JSON (`None`: a blank line), with the
/// error to give for a line the parser does not know (`why` it does not).
pub(super) fn json_line(
    pin: &'static Pin,
    line: &mut usize,
    text: &str,
) -> Result<Option<(Value, impl Fn(String) -> StreamError + Copy)>, StreamError> {
    *line += 1;
    let at = *line;
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let v =
        serde_json::from_str(text).map_err(|e| pin.stream_error(at, format!("not JSON: {e}")))?;
    Ok(Some((v, move |why| pin.stream_error(at, why))))
}

/// Every event of a whole stream (the tests' reading of a captured one).
#[cfg(test)]
pub(super) fn parse_all(p: &mut dyn Parse, text: &str) -> Result<Vec<SessionEvent>, StreamError> {
    let mut out = vec![];
    for l in text.lines() {
        out.extend(p.line(l)?);
    }
    out.extend(p.finish());
    Ok(out)
}

/// A model call's model, text, tool calls and usage (the tests' reading of an event); panics
/// on any other event.
#[cfg(test)]
pub(super) fn model_call(e: &SessionEvent) -> (&str, &str, &[ToolCall], Usage) {
    let SessionEvent::ModelCall {
        model,
        text,
        tool_calls,
        usage,
        ..
    } = e
    else {
        panic!("not a model call: {e:?}")
    };
    (model, text, tool_calls, *usage)
}

/// A session's end (the tests' reading of an event); panics on any other event.
#[cfg(test)]
pub(super) fn ended(e: &SessionEvent) -> &SessionEnd {
    let SessionEvent::Ended(end) = e else {
        panic!("not a session's end: {e:?}")
    };
    end
}

pub(super) fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// An API usage object (`input_tokens`, `output_tokens`, cache reads) as loopward's.
fn usage(v: &Value) -> Usage {
    let n = |k: &str| v[k].as_u64().unwrap_or_default();
    Usage {
        cached_tokens: n("cache_read_input_tokens"),
        calls: 1,
        input_tokens: n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
    }
}

fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the pinned client wrote for one `Bash` call and a text answer (trimmed of the
    /// fields the parser does not read).
    const STREAM: &str = r#"{"type":"system","subtype":"init","cwd":"/p","session_id":"s-1","tools":["Bash"],"model":"claude-opus-5-5","permissionMode":"bypassPermissions"}
{"type":"assistant","message":{"id":"msg_1","model":"claude-opus-5-5","content":[{"type":"text","text":"Writing."}],"usage":{"input_tokens":1000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_1","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi > a.txt"}}],"usage":{"input_tokens":1000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"denied by loopward","is_error":true}]},"session_id":"s-1"}
{"type":"assistant","message":{"id":"msg_2","model":"claude-opus-5-5","content":[{"type":"text","text":"All done."}],"usage":{"input_tokens":1000,"output_tokens":1}},"session_id":"s-1"}
{"type":"result","subtype":"success","is_error":false,"result":"All done.","num_turns":2,"total_cost_usd":0.01,"usage":{"input_tokens":2000,"output_tokens":100}}"#;

    fn parse(text: &str) -> Result<Vec<SessionEvent>, StreamError> {
        parse_all(&mut StreamParser::new(), text)
    }

    #[test]
    fn one_api_message_split_over_lines_is_one_model_call_and_the_end_carries_the_cost() {
        let events = parse(STREAM).unwrap();
        assert_eq!(events.len(), 5, "{events:#?}");
        let (_, text, tool_calls, usage) = model_call(&events[1]);
        assert_eq!(text, "Writing.");
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].name, "Bash");
        assert_eq!(usage.input_tokens, 1000);
        assert!(
            matches!(&events[2], SessionEvent::ToolResult { is_error: true, content, .. } if content == "denied by loopward")
        );
        let end = ended(&events[4]);
        assert_eq!(end.cost_micros, Some(10_000));
        assert_eq!(end.text, "All done.");
        assert!(!end.is_error);
    }

    #[test]
    fn a_line_of_an_unknown_type_or_not_json_is_refused_naming_the_line() {
        let e = parse("{\"type\":\"system\",\"subtype\":\"init\"}\n{\"type\":\"telepathy\"}")
            .unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("telepathy"), "{e}");
        let e = parse("garbage").unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
    }
}
