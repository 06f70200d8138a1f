//! A session recorded as one model call: Codex and Gemini CLI report their tokens once, for the
//! whole session, and no cost, so the session's text and tool calls travel in one model call
//! carrying those tokens, followed by the session's end.

use super::stream::{str_of, SessionEnd, SessionEvent};
use loopward_core::{ToolCall, Usage};
use serde_json::Value;

/// What a session said so far: its model, its text and the tool calls its client ran.
#[derive(Debug, Default)]
pub(super) struct OneCall {
    /// The model, as the client named it (or as configured, where it names none).
    pub(super) model: String,
    /// The text so far.
    pub(super) text: String,
    /// The tool calls so far.
    pub(super) calls: Vec<ToolCall>,
}

impl OneCall {
    /// The model call so far, carrying `usage`; what it held is taken.
    fn take(&mut self, usage: Usage) -> SessionEvent {
        SessionEvent::ModelCall {
            id: String::new(),
            model: self.model.clone(),
            text: std::mem::take(&mut self.text),
            tool_calls: std::mem::take(&mut self.calls),
            usage,
        }
    }

    /// The closing line `line`, which reported the session's `usage`: the model call, then the
    /// end, whose text is the error's message when it `failed`, else `answer`.
    pub(super) fn end(
        &mut self,
        line: &Value,
        usage: Usage,
        subtype: String,
        failed: bool,
        answer: String,
    ) -> [SessionEvent; 2] {
        let text = if failed {
            str_of(&line["error"]["message"])
        } else {
            answer
        };
        let end = SessionEnd {
            subtype,
            is_error: failed,
            text,
            usage,
            cost_micros: None,
            turns: 1,
        };
        [self.take(usage), SessionEvent::Ended(end)]
    }

    /// A stream that stopped without its closing line: what was said, with no tokens.
    pub(super) fn rest(&mut self) -> Option<SessionEvent> {
        if self.text.is_empty() && self.calls.is_empty() {
            return None;
        }
        Some(self.take(Usage::default()))
    }
}
