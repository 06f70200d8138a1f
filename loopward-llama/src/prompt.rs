//! Renders a loopward conversation into the model's own chat template.
//!
//! The template is the GGUF's Jinja source, rendered with minijinja the way Hugging Face renders
//! it (`trim_blocks`, `lstrip_blocks`, Python string methods), so tool definitions, tool calls
//! and tool results reach templates that know about them. Templates that do not mention tools
//! get the tool list appended to the system prompt, tool calls as the JSON the model produced,
//! and tool results as user messages marked `[tool result …]`. A model without a template gets
//! ChatML.

use loopward_core::model::ModelError;
use loopward_core::{CallId, ChatMessage, Message, ToolSpec};
use minijinja::{Environment, ErrorKind};
use serde_json::{json, Value};
use std::collections::HashMap;

const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n\
{{ message.content }}<|im_end|>\n{% endfor %}\
{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const TEMPLATE_NAME: &str = "chat";

/// A compiled chat template.
pub(crate) struct PromptTemplate {
    env: Environment<'static>,
    native_tools: bool,
    bos: String,
    eos: String,
}

impl PromptTemplate {
    /// Compiles `source` (the model's template), or ChatML when the model has none.
    pub(crate) fn new(
        source: Option<String>,
        bos: String,
        eos: String,
    ) -> Result<Self, ModelError> {
        let source = source.unwrap_or_else(|| CHATML.to_owned());
        let native_tools = source.contains("tools");
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
        // Templates that print today's date get a fixed one: rendering stays deterministic and
        // the engine reads no clock.
        env.add_function("strftime_now", |_fmt: String| "26 Jul 2024".to_owned());
        env.add_template_owned(TEMPLATE_NAME, source).map_err(|e| {
            ModelError::Local(format!("the model's chat template does not compile: {e}"))
        })?;
        Ok(Self {
            env,
            native_tools,
            bos,
            eos,
        })
    }

    /// Renders the conversation with the assistant's turn opened. `raw_calls` maps call ids to
    /// the exact text the model produced for them, so the prompt repeats it token for token.
    pub(crate) fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        raw_calls: &HashMap<CallId, String>,
    ) -> Result<String, ModelError> {
        let mut rendered: Vec<Value> = messages
            .iter()
            .map(|m| self.message(m, raw_calls))
            .collect();
        if !tools.is_empty() && !self.native_tools {
            let help = tool_instructions(tools);
            match rendered.first_mut() {
                Some(first) if first["role"] == "system" => {
                    let content = first["content"].as_str().unwrap_or_default();
                    first["content"] = Value::String(format!("{content}\n\n{help}"));
                }
                _ => rendered.insert(0, json!({"role": "system", "content": help})),
            }
        }
        let tools_value = (!tools.is_empty()).then(|| {
            tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect::<Vec<_>>()
        });
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| ModelError::Local(format!("chat template: {e}")))?;
        template
            .render(minijinja::context! {
                messages => rendered,
                tools => tools_value,
                add_generation_prompt => true,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .map_err(|e| {
                ModelError::Local(format!(
                    "the model's chat template failed to render this conversation: {e}"
                ))
            })
    }

    fn message(&self, m: &Message, raw_calls: &HashMap<CallId, String>) -> Value {
        match m.as_chat() {
            ChatMessage::Text { role, text } => json!({"role": role, "content": text}),
            ChatMessage::Model {
                content,
                tool_calls,
            } if self.native_tools && !tool_calls.is_empty() => {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
            ChatMessage::Model {
                content,
                tool_calls,
            } => {
                let mut text = content.to_string();
                for call in tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    match raw_calls.get(&call.id) {
                        Some(raw) => text.push_str(raw),
                        None => text.push_str(
                            &json!({"name": call.name, "arguments": call.arguments}).to_string(),
                        ),
                    }
                }
                json!({"role": "assistant", "content": text})
            }
            ChatMessage::Tool(r) if self.native_tools => json!({
                "role": "tool", "content": r.content, "tool_call_id": r.call_id, "name": r.name
            }),
            ChatMessage::Tool(r) => {
                let status = if r.is_error { ", error" } else { "" };
                json!({"role": "user", "content":
                    format!("[tool result: {} (call {}{status})]\n{}", r.name, r.call_id, r.content)})
            }
        }
    }
}

/// The tool list for templates that do not render tools themselves.
fn tool_instructions(tools: &[ToolSpec]) -> String {
    let mut s = String::from(
        "You can call tools. To call one, reply with only a JSON object \
         {\"name\": <tool name>, \"arguments\": {...}} and nothing else. \
         To answer without a tool, reply in plain text.\nTools:",
    );
    for t in tools {
        s.push_str(&format!(
            "\n- {}: {} Arguments (JSON schema): {}",
            t.name, t.description, t.parameters
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_core::{Person, ToolCall, ToolResult};

    fn chatml() -> PromptTemplate {
        PromptTemplate::new(None, String::new(), String::new()).unwrap()
    }

    /// The tool the tests call: `add`.
    fn add_tool() -> ToolSpec {
        ToolSpec {
            name: "add".into(),
            description: "Adds.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    /// The result of the model's call `c1` of `add`: 2.
    fn add_result() -> Message {
        Message::Tool(ToolResult {
            call_id: "c1".into(),
            name: "add".into(),
            content: "2".into(),
            is_error: false,
        })
    }

    #[test]
    fn chatml_fallback_marks_notices_and_tool_results() {
        let messages = vec![
            Message::system("Be brief."),
            Message::human(Person::at_the_keyboard().says("hi")),
            Message::model("", vec![ToolCall::new("c1", "add", json!({"a": 1}))]),
            add_result(),
            Message::notice("user: skip the plan"),
        ];
        let raw = HashMap::from([(
            "c1".into(),
            "{\"name\":\"add\",\"arguments\":{\"a\":1}}".to_owned(),
        )]);
        let text = chatml().render(&messages, &[], &raw).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
             <|im_start|>assistant\n{\"name\":\"add\",\"arguments\":{\"a\":1}}<|im_end|>\n\
             <|im_start|>user\n[tool result: add (call c1)]\n2<|im_end|>\n\
             <|im_start|>user\n[notice] user: skip the plan<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn tools_are_listed_in_the_system_prompt_when_the_template_has_no_tool_support() {
        let text = chatml()
            .render(
                &[Message::human(Person::at_the_keyboard().says("hi"))],
                &[add_tool()],
                &HashMap::new(),
            )
            .unwrap();
        assert!(
            text.starts_with("<|im_start|>system\nYou can call tools."),
            "{text}"
        );
        assert!(text.contains("- add: Adds. Arguments (JSON schema): {\"type\":\"object\"}"));
    }

    #[test]
    fn native_tool_templates_receive_tools_calls_and_results() {
        let source = "{% for t in tools %}[{{ t.function.name }}]{% endfor %}\
            {% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}\
            {% else %}{{ m.content }}{% endif %};{% endfor %}";
        let t = PromptTemplate::new(Some(source.into()), String::new(), String::new()).unwrap();
        assert!(t.native_tools);
        let messages = vec![
            Message::model("", vec![ToolCall::new("c1", "add", json!({"a": 1}))]),
            add_result(),
        ];
        let text = t.render(&messages, &[add_tool()], &HashMap::new()).unwrap();
        assert_eq!(text, "[add]assistant:{\"a\":1};tool:2;");
    }

    #[test]
    fn raise_exception_in_a_template_is_an_error_not_a_panic() {
        let t = PromptTemplate::new(
            Some("{{ raise_exception('roles must alternate') }}".into()),
            String::new(),
            String::new(),
        )
        .unwrap();
        let err = t.render(&[], &[], &HashMap::new()).unwrap_err();
        assert!(err.to_string().contains("roles must alternate"), "{err}");
    }
}
