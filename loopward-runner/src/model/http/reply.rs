//! What both APIs' replies read the same way: the stop reason, tool-call arguments, the model's
//! name, and the error for a tool call cut off by the token limit.

use crate::model::{ModelError, StopReason};
use serde_json::{json, Value};

/// `cut_off` (the API's word for a reply that hit its token limit) is
/// [`StopReason::TokenLimit`]; every other reason is the model ending the reply.
pub(crate) fn stop_reason(reason: Option<&str>, cut_off: &str) -> StopReason {
    match reason {
        Some(r) if r == cut_off => StopReason::TokenLimit,
        _ => StopReason::Finished,
    }
}

/// A call's arguments: the JSON they hold, or the raw text when it is not JSON (the tool layer
/// then refuses it as a correctable error).
pub(crate) fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// The model the reply names, or `asked` when it names none.
pub(crate) fn model_of(v: &Value, asked: &str) -> String {
    v.get("model")
        .and_then(Value::as_str)
        .unwrap_or(asked)
        .to_owned()
}

/// A reply that hit `limit` inside a tool call: no half call leaves the backend.
pub(crate) fn truncated_call(limit: &str) -> ModelError {
    ModelError::InvalidResponse(format!(
        "the reply hit {limit} in the middle of a tool call; raise max_tokens"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_api_s_cut_off_word_is_a_token_limit() {
        assert_eq!(
            stop_reason(Some("length"), "length"),
            StopReason::TokenLimit
        );
        assert_eq!(
            stop_reason(Some("max_tokens"), "length"),
            StopReason::Finished
        );
        assert_eq!(stop_reason(None, "length"), StopReason::Finished);
    }

    #[test]
    fn arguments_that_are_not_json_stay_raw_text() {
        assert_eq!(arguments(" "), json!({}));
        assert_eq!(arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(arguments("{\"a\":"), json!("{\"a\":"));
    }
}
