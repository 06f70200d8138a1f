//! An incremental parser for server-sent events (the `text/event-stream` format both APIs
//! stream in).
//!
//! Bytes go in as they arrive, split anywhere (even inside a UTF-8 character); whole events come
//! out. Lines end in `\n` or `\r\n`; `:` lines are comments; `data` lines of one event are joined
//! with `\n`; `id` and `retry` are ignored (a model reply is never resumed).
//!
//! ```
//! use loopward_runner::model::http::sse::{SseEvent, SseParser};
//! let mut p = SseParser::default();
//! assert!(p.push(b"event: ping\nda").unwrap().is_empty());
//! let events = p.push(b"ta: {}\n\n: comment\ndata: [DONE]\n\n").unwrap();
//! assert_eq!(events, vec![
//!     SseEvent { event: Some("ping".into()), data: "{}".into() },
//!     SseEvent { event: None, data: "[DONE]".into() },
//! ]);
//! assert!(p.finish().unwrap().is_none());
//! ```

use crate::model::ModelError;

/// The most bytes one event may hold before the stream is refused.
const MAX_EVENT_BYTES: usize = 8 << 20;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ModelError> {
        let mut out = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                self.line.push(b);
                if self.line.len() + self.data.as_ref().map_or(0, String::len) > MAX_EVENT_BYTES {
                    return Err(ModelError::InvalidResponse(format!(
                        "a stream event is larger than {MAX_EVENT_BYTES} bytes"
                    )));
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line)
                .map_err(|_| ModelError::InvalidResponse("the stream is not valid UTF-8".into()))?;
            if let Some(event) = self.line_done(&line) {
                out.push(event);
            }
        }
        Ok(out)
    }

    /// Ends the stream: returns an event left without its closing blank line, if any.
    pub fn finish(mut self) -> Result<Option<SseEvent>, ModelError> {
        if !self.line.is_empty() {
            self.push(b"\n")?;
        }
        Ok(self.line_done(""))
    }

    fn line_done(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let data = self.data.take();
            let event = self.event.take();
            return match (event, data) {
                (None, None) => None,
                (event, data) => Some(SseEvent {
                    event,
                    data: data.unwrap_or_default(),
                }),
            };
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: message_start\r\ndata: {\"a\":\"é\"}\r\n\r\n: keep-alive\n\ndata: line1\ndata: line2\n\nevent: tail\ndata: x";

    fn parse_in_two(split: usize) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut events = p.push(&STREAM.as_bytes()[..split]).unwrap();
        events.extend(p.push(&STREAM.as_bytes()[split..]).unwrap());
        events.extend(p.finish().unwrap());
        events
    }

    #[test]
    fn every_split_point_yields_the_same_events() {
        let whole = parse_in_two(STREAM.len());
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].data, "{\"a\":\"é\"}");
        assert_eq!(whole[1].data, "line1\nline2");
        assert_eq!(whole[2].event.as_deref(), Some("tail"));
        for split in 0..STREAM.len() {
            assert_eq!(parse_in_two(split), whole, "split at byte {split}");
        }
    }

    #[test]
    fn invalid_utf8_is_an_invalid_response() {
        let mut p = SseParser::default();
        assert!(matches!(
            p.push(b"data: \xff\n\n"),
            Err(ModelError::InvalidResponse(_))
        ));
    }
}
