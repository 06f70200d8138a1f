//! The grammar that keeps a small model's tool calls well-formed, and the parser of its replies.
//!
//! With tools offered, a reply is either a tool call — one compact JSON object
//! `{"name": <one of the tool names>, "arguments": <that tool's argument schema>}`, optionally
//! wrapped in `<tool_call>…</tool_call>` for templates trained that way — or plain text that
//! does not start with `{` or `<`. The object's grammar comes from llama.cpp's JSON-schema
//! converter over a `oneOf` of one schema per tool, with insignificant whitespace removed so the
//! model cannot wander in blank space.

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

/// Builds the GBNF for `tools` (root rule `root`) allowing replies of `shape`.
pub(crate) fn tool_grammar(tools: &[ToolSpec], shape: Shape) -> Result<String, ModelError> {
    const FREE_TEXT: &str = "free-text ::= [^{<] .*\n";
    if shape == Shape::Text {
        return Ok(format!("root ::= free-text\n{FREE_TEXT}"));
    }
    let alternatives: Vec<Value> = tools.iter().map(call_schema).collect();
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
        out.push_str(FREE_TEXT);
    }
    Ok(out)
}

/// The schema of a call to one tool: its name as a constant, its arguments as declared
/// (closed to undeclared properties unless the tool says otherwise).
fn call_schema(tool: &ToolSpec) -> Value {
    let mut args = tool.parameters.clone();
    if let Value::Object(map) = &mut args {
        if map.get("type") == Some(&Value::String("object".into())) {
            map.entry("additionalProperties")
                .or_insert(Value::Bool(false));
        }
    }
    json!({
        "type": "object",
        "properties": { "name": { "const": tool.name }, "arguments": args },
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
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

    #[test]
    fn grammar_offers_a_call_or_text_and_has_no_free_whitespace() {
        let g = tool_grammar(&[add()], Shape::CallOrText).unwrap();
        assert!(g.contains("root ::= tool-call | free-text"), "{g}");
        assert!(g.contains("space ::= \"\""), "{g}");
        assert!(g.contains("\\\"add\\\""), "{g}");
        let g = tool_grammar(&[add()], Shape::Call).unwrap();
        assert!(g.contains("root ::= tool-call\n"), "{g}");
        assert!(!g.contains("free-text"), "{g}");
        let g = tool_grammar(&[add()], Shape::Text).unwrap();
        assert_eq!(g, "root ::= free-text\nfree-text ::= [^{<] .*\n");
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
