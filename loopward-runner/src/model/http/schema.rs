//! Tool schemas as an OpenAI-compatible request carries them: [`ToolChoice`] and the bound on
//! argument strings that servers which constrain output to the schema (llama.cpp's
//! `llama-server`, vLLM with guided decoding) turn into a grammar.

use serde::Deserialize;
use serde_json::Value;

/// Whether a reply must call a tool (the request's `tool_choice`, sent only with tools).
///
/// ```
/// use loopward_runner::model::http::ToolChoice;
/// #[derive(serde::Deserialize)]
/// struct T { c: ToolChoice }
/// let t: T = toml::from_str(r#"c = "required""#).unwrap();
/// assert_eq!(t.c, ToolChoice::Required);
/// assert_eq!(ToolChoice::default(), ToolChoice::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model chooses between text and tool calls (the servers' default; not sent).
    #[default]
    Auto,
    /// Every reply is a tool call. A server that constrains output (llama.cpp's, with a chat
    /// template that renders tools) then holds even a small model to a well-formed call.
    Required,
    /// No tool calls: text only, though tools are described.
    None,
}

impl ToolChoice {
    /// The value sent, or `None` for [`ToolChoice::Auto`] (left to the server).
    pub(crate) fn wire(self) -> Option<&'static str> {
        match self {
            Self::Auto => None,
            Self::Required => Some("required"),
            Self::None => Some("none"),
        }
    }
}

/// `schema` with `maxLength: chars` on every string schema that sets no `maxLength`, `pattern`,
/// `enum` or `const`, through `properties`, `items`, `additionalProperties`, `$defs`,
/// `definitions` and the `anyOf`/`oneOf`/`allOf`/`prefixItems` branches.
pub(crate) fn bound_strings(schema: &Value, chars: u32) -> Value {
    let mut out = schema.clone();
    bound(&mut out, chars);
    out
}

fn bound(schema: &mut Value, chars: u32) {
    let Value::Object(map) = schema else { return };
    let is_string = match map.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    };
    let fixed = ["pattern", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k));
    if is_string && !fixed {
        map.entry("maxLength").or_insert(Value::from(chars));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(|c| bound(c, chars));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            bound(child, chars);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(|c| bound(c, chars));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_unbounded_string_gets_the_bound_and_nothing_else_changes() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "id": {"type": "string", "pattern": "^[a-z]+$"},
            "short": {"type": "string", "maxLength": 8},
            "lines": {"type": "array", "items": {"type": ["string", "null"]}},
            "n": {"type": "integer"},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "map": {"type": "object", "additionalProperties": {"type": "string"}}
        }, "$defs": {"s": {"type": "string"}}});
        let out = bound_strings(&schema, 64);
        assert_eq!(
            out,
            json!({"type": "object", "properties": {
                "path": {"type": "string", "maxLength": 64},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "id": {"type": "string", "pattern": "^[a-z]+$"},
                "short": {"type": "string", "maxLength": 8},
                "lines": {"type": "array", "items": {"type": ["string", "null"], "maxLength": 64}},
                "n": {"type": "integer"},
                "either": {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "integer"}]},
                "map": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 64}}
            }, "$defs": {"s": {"type": "string", "maxLength": 64}}})
        );
        // The input is left as it was.
        assert!(schema.pointer("/properties/path/maxLength").is_none());
    }

    #[test]
    fn tool_choice_auto_is_left_to_the_server() {
        assert_eq!(ToolChoice::Auto.wire(), None);
        assert_eq!(ToolChoice::Required.wire(), Some("required"));
        assert_eq!(ToolChoice::None.wire(), Some("none"));
    }
}
