//! The grammar that keeps a small model's tool calls well-formed, and the parser of its replies.
//!
//! With tools offered, a reply is either a tool call — one compact JSON object
//! `{"name": <one of the tool names>, "arguments": <that tool's argument schema>}`, optionally
//! wrapped in `<tool_call>…</tool_call>` for templates trained that way — or plain text that
//! does not start with `{`, `<` or blank space. The object's grammar comes from llama.cpp's JSON-schema
//! converter over a `oneOf` of one schema per tool, with insignificant whitespace removed so the
//! model cannot wander in blank space.
//!
//! With [`Bounds::answer_chars`] set, plain text is *bounded*: one line of printable ASCII of at
//! most that many characters. Every token of such text holds at least one character, so an
//! answer of `n` characters ends within `n` tokens plus its end-of-generation token: a bound
//! below `max_tokens` means a text answer cannot be cut off.

use loopward_core::model::ModelError;
use loopward_core::ToolSpec;
use serde_json::{json, Map, Value};

const OBJECT_RULE: &str = "tool-call-object";

/// What a reply may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A tool call or text.
    CallOrText,
    /// Only a tool call.
    Call,
    /// Only text.
    Text,
}

/// How long the unbounded parts of a tool's argument schema may grow in the grammar, so that a
/// constrained call always ends within a known number of characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// `maxLength` given to every string schema that has none.
    pub(crate) string_chars: u32,
    /// `maxItems` given to every array schema that has none.
    pub(crate) array_items: u32,
    /// When set, text answers are one line of printable ASCII of at most this many characters.
    pub(crate) answer_chars: Option<u32>,
}

/// The rule for plain text: it starts with a visible character other than `{` and `<` (a reply
/// of blank space is no answer, and a call never reads as text); bounded, it is one line of
/// printable ASCII (`' '..='~'`) of at most `answer_chars` characters.
fn free_text(answer_chars: Option<u32>) -> String {
    match answer_chars {
        None => "free-text ::= [^{< \\t\\n\\r] .*\n".to_owned(),
        Some(n) => format!("free-text ::= [!-;=-z|-~] [ -~]{{0,{}}}\n", n.max(1) - 1),
    }
}

/// The bound on a text answer of a request with `max_tokens`, given the configured one: at most
/// `max_tokens - 1` characters (and at least 1), so the answer ends before the budget — each of
/// its tokens holds at least one of its characters, and the end-of-generation token needs one
/// more.
pub(crate) fn answer_bound(configured: Option<u32>, max_tokens: u32) -> Option<u32> {
    configured.map(|n| n.min(max_tokens.saturating_sub(1)).max(1))
}

/// Builds the GBNF for `tools` (root rule `root`) allowing replies of `shape`; every string and
/// array without a declared bound gets the one in `bounds`, and every object is closed to
/// undeclared properties unless it says otherwise.
pub(crate) fn tool_grammar(
    tools: &[ToolSpec],
    shape: Shape,
    bounds: Bounds,
) -> Result<String, ModelError> {
    let text = free_text(bounds.answer_chars);
    if shape == Shape::Text {
        return Ok(format!("root ::= free-text\n{text}"));
    }
    let alternatives: Vec<Value> = tools.iter().map(|t| call_schema(t, bounds)).collect();
    let schema = json!({ "oneOf": alternatives });
    let gbnf = llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| {
        ModelError::Local(format!(
            "could not turn the tools' argument schemas into a grammar: {e}"
        ))
    })?;
    let mut out = String::new();
    for line in gbnf.lines() {
        if let Some(rest) = line.strip_prefix("root ::=") {
            out.push_str(&format!("{OBJECT_RULE} ::={rest}\n"));
        } else if line.starts_with("space ::=") {
            out.push_str("space ::= \"\"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "tool-call ::= {OBJECT_RULE} | \"<tool_call>\" \"\\n\"? {OBJECT_RULE} \"\\n\"? \"</tool_call>\"\n"
    ));
    if shape == Shape::Call {
        out.push_str("root ::= tool-call\n");
    } else {
        out.push_str("root ::= tool-call | free-text\n");
        out.push_str(&text);
    }
    Ok(out)
}

/// The schema of a call to one tool: its name as a constant, its arguments as declared, bounded
/// by [`bound`].
fn call_schema(tool: &ToolSpec, bounds: Bounds) -> Value {
    let mut args = tool.parameters.clone();
    bound(&mut args, bounds);
    json!({
        "type": "object",
        "properties": { "name": { "const": tool.name }, "arguments": args },
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
}

/// Gives every string and array in `schema` (at any depth) a length bound unless it declares
/// one, and closes every object with declared properties to undeclared ones unless it says
/// otherwise. Strings with a `pattern`, `enum` or `const` are left as they are. (A value without
/// a type, or an array without `items`, stays unbounded: the token budget still ends it.)
fn bound(schema: &mut Value, bounds: Bounds) {
    let Value::Object(map) = schema else { return };
    let types: Vec<String> = match map.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => vec![],
    };
    let has = |t: &str| types.iter().any(|x| x == t);
    let fixed = ["pattern", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k));
    if has("string") && !fixed {
        map.entry("maxLength")
            .or_insert(Value::from(bounds.string_chars));
    }
    if has("array") {
        map.entry("maxItems")
            .or_insert(Value::from(bounds.array_items));
    }
    if has("object") && map.contains_key("properties") {
        map.entry("additionalProperties")
            .or_insert(Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(|c| bound(c, bounds));
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = map.get_mut(key) {
            bound(child, bounds);
        }
    }
    for key in ["oneOf", "anyOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(|c| bound(c, bounds));
        }
    }
}

/// What a reply says: text, or one tool call (name and arguments).
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// A plain-text answer.
    Text(String),
    /// A tool call.
    Call {
        /// The tool.
        name: String,
        /// Its arguments (a JSON object).
        arguments: Value,
    },
}

/// Reads a reply generated under [`tool_grammar`]. Anything that starts like a tool call must be
/// a complete, valid one.
pub(crate) fn parse_reply(text: &str, tools: &[ToolSpec]) -> Result<Reply, ModelError> {
    let trimmed = text.trim();
    if tools.is_empty() || !(trimmed.starts_with('{') || trimmed.starts_with("<tool_call>")) {
        return Ok(Reply::Text(text.to_owned()));
    }
    let body = trimmed
        .strip_prefix("<tool_call>")
        .and_then(|s| s.trim_end().strip_suffix("</tool_call>"))
        .unwrap_or(trimmed)
        .trim();
    let invalid = |why: String| ModelError::InvalidResponse(format!("tool call {body:?}: {why}"));
    let value: Value = serde_json::from_str(body).map_err(|e| invalid(e.to_string()))?;
    let Some(Value::String(name)) = value.get("name") else {
        return Err(invalid("it has no \"name\"".into()));
    };
    let Some(tool) = tools.iter().find(|t| &t.name == name) else {
        return Err(invalid(format!("no tool is called {name:?}")));
    };
    let arguments = value
        .get("arguments")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let Value::Object(args) = &arguments else {
        return Err(invalid("\"arguments\" is not an object".into()));
    };
    if let Some(Value::Array(required)) = tool.parameters.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !args.contains_key(key) {
                return Err(invalid(format!("the required argument {key:?} is missing")));
            }
        }
    }
    Ok(Reply::Call {
        name: name.clone(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add() -> ToolSpec {
        ToolSpec {
            name: "add".into(),
            description: "Adds two numbers.".into(),
            parameters: json!({"type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}),
        }
    }

    const BOUNDS: Bounds = Bounds {
        string_chars: 64,
        array_items: 4,
        answer_chars: None,
    };

    #[test]
    fn every_string_and_array_gets_a_bound_unless_it_has_one() {
        let mut schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "note": {"type": ["string", "null"], "maxLength": 9},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "nested": {"type": "object", "properties": {"x": {"type": "string"}}},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        }});
        bound(&mut schema, BOUNDS);
        let p = &schema["properties"];
        assert_eq!(p["path"]["maxLength"], 64);
        assert_eq!(p["note"]["maxLength"], 9);
        assert!(p["mode"].get("maxLength").is_none());
        assert_eq!(p["tags"]["maxItems"], 4);
        assert_eq!(p["tags"]["items"]["maxLength"], 64);
        assert_eq!(p["nested"]["additionalProperties"], false);
        assert_eq!(p["nested"]["properties"]["x"]["maxLength"], 64);
        assert_eq!(p["either"]["anyOf"][0]["maxLength"], 64);
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn the_grammar_bounds_argument_strings() {
        let echo = ToolSpec {
            name: "echo".into(),
            description: "Echoes.".into(),
            parameters: json!({"type": "object", "properties": {"s": {"type": "string"}},
                "required": ["s"]}),
        };
        let g = tool_grammar(&[echo], Shape::Call, BOUNDS).unwrap();
        assert!(g.contains("{0,64}"), "{g}");
    }

    #[test]
    fn grammar_offers_a_call_or_text_and_has_no_free_whitespace() {
        let g = tool_grammar(&[add()], Shape::CallOrText, BOUNDS).unwrap();
        assert!(g.contains("root ::= tool-call | free-text"), "{g}");
        assert!(g.contains("space ::= \"\""), "{g}");
        assert!(g.contains("\\\"add\\\""), "{g}");
        let g = tool_grammar(&[add()], Shape::Call, BOUNDS).unwrap();
        assert!(g.contains("root ::= tool-call\n"), "{g}");
        assert!(!g.contains("free-text"), "{g}");
        let g = tool_grammar(&[add()], Shape::Text, BOUNDS).unwrap();
        assert_eq!(g, "root ::= free-text\nfree-text ::= [^{< \\t\\n\\r] .*\n");
    }

    #[test]
    fn bounded_text_is_one_line_of_printable_ascii_of_at_most_n_characters() {
        let bounds = Bounds {
            answer_chars: Some(120),
            ..BOUNDS
        };
        let g = tool_grammar(&[add()], Shape::Text, bounds).unwrap();
        assert_eq!(
            g,
            "root ::= free-text\nfree-text ::= [!-;=-z|-~] [ -~]{0,119}\n"
        );
        let g = tool_grammar(&[add()], Shape::CallOrText, bounds).unwrap();
        assert!(g.contains("root ::= tool-call | free-text\n"), "{g}");
        assert!(
            g.ends_with("free-text ::= [!-;=-z|-~] [ -~]{0,119}\n"),
            "{g}"
        );
    }

    #[test]
    fn the_answer_bound_always_fits_the_token_budget() {
        assert_eq!(answer_bound(None, 512), None);
        assert_eq!(answer_bound(Some(200), 512), Some(200));
        assert_eq!(answer_bound(Some(200), 48), Some(47));
        assert_eq!(answer_bound(Some(200), 1), Some(1));
        assert_eq!(answer_bound(Some(0), 512), Some(1));
    }

    #[test]
    fn replies_parse_as_text_or_a_validated_call() {
        let tools = [add()];
        assert_eq!(
            parse_reply("Paris.", &tools).unwrap(),
            Reply::Text("Paris.".into())
        );
        assert_eq!(
            parse_reply(
                r#"<tool_call>{"name":"add","arguments":{"a":1,"b":2}}</tool_call>"#,
                &tools
            )
            .unwrap(),
            Reply::Call {
                name: "add".into(),
                arguments: json!({"a": 1, "b": 2})
            }
        );
        let cut = parse_reply(r#"{"name":"add","argu"#, &tools).unwrap_err();
        assert!(matches!(cut, ModelError::InvalidResponse(_)), "{cut}");
        let missing = parse_reply(r#"{"name":"add","arguments":{"a":1}}"#, &tools).unwrap_err();
        assert!(
            missing.to_string().contains("\"b\" is missing"),
            "{missing}"
        );
        let unknown = parse_reply(r#"{"name":"sub","arguments":{}}"#, &tools).unwrap_err();
        assert!(
            unknown.to_string().contains("no tool is called \"sub\""),
            "{unknown}"
        );
    }
}
