//! The llama backend on a real model: SmolLM2-135M-Instruct (`cargo xtask fetch-model`).

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, Message, Person, RunId, RunStatus, ToolSpec};
use loopward_llama::{LlamaConfig, LlamaModel, LlamaService, ToolChoice};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::{
    BoxModelService, ChatRequest, ChatResponse, ModelError, StopReason, TurnSlot,
};
use loopward_runner::tool::{Access, Tool, ToolError, ToolInvocation, ToolOutput, ToolSet};
use loopward_runner::{BoxTurnService, LlmAgent, RunSpec, Runner, TurnContext, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower::ServiceExt;

mod batch;
mod errors;
mod property;
mod sampling;
mod tool_calls;

fn model_path() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.exists(),
        "the test model {} is missing: run `cargo xtask fetch-model` first",
        path.display()
    );
    path
}

fn load(config: LlamaConfig) -> LlamaService {
    LlamaModel::load(config).expect("the SmolLM2 model loads")
}

fn ask(messages: Vec<Message>, tools: Vec<ToolSpec>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        agent: AgentId::new("asker").expect("a valid agent id"),
        messages,
        tools,
        max_tokens: Some(max_tokens),
        turn: TurnSlot::empty(),
    }
}

/// A request of one message: the person at the keyboard `says`.
fn ask_person(says: impl Into<String>, tools: Vec<ToolSpec>, max_tokens: u32) -> ChatRequest {
    ask(
        vec![Message::human(Person::at_the_keyboard().says(says))],
        tools,
        max_tokens,
    )
}

/// A tool that reports the weather of a city.
struct Weather;

impl Tool for Weather {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Returns today's weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 40}},
                "required": ["city"]
            }),
        }
    }

    fn accesses(&self, _: &serde_json::Value, _: &TurnContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let city = inv.call.arguments["city"].as_str().unwrap_or("").to_owned();
        Box::pin(async move { Ok(ToolOutput::text(format!("{city}: sunny, 21 degrees."))) })
    }
}
