//! An agent turn over the HTTP backends: the model calls a tool, the tool runs, the model
//! finishes; a transient server error on the way is retried inside the backend; an answer cut off
//! by the token limit fails the run.

use super::one_agent::{one_agent, run_as};
use super::support::{data, json, sse, MockServer, RecordingSleeper};
use loopward_core::{AgentId, AuditEvent, RunStatus};
use loopward_runner::model::http::{
    AnthropicConfig, AnthropicModel, ApiKey, OpenAiConfig, OpenAiModel,
};
use loopward_runner::model::{BoxModelService, StopReason};
use loopward_runner::{tools, BoxTurnService, LlmAgent};
use serde_json::json;

#[tokio::test]
async fn an_agent_writes_a_file_through_a_streamed_tool_call_and_retries_do_not_use_its_steps() {
    let call = json!({"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "write_file", "arguments": "{\"path\": \"hello.txt\", \"content\": \"hi\"}"}});
    let server = MockServer::start(vec![
        json(503, &json!({"error": {"message": "warming up", "type": "server_error"}})),
        sse(&[
            data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})),
            data(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            "data: [DONE]\n\n".into(),
        ], true),
        sse(&[
            data(&json!({"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]})),
            "data: [DONE]\n\n".into(),
        ], true),
    ])
    .await;
    let sleeper = RecordingSleeper::default();
    let model = OpenAiModel::new(
        OpenAiConfig::new(format!("{}/v1", server.url), "local"),
        None,
    )
    .unwrap()
    .with_jitter(|| 0.0)
    .with_sleeper(sleeper.clone());
    let dir = tempfile::tempdir().unwrap();
    let builder = AgentId::new("builder").unwrap();
    let agent = LlmAgent::builder(builder.clone(), BoxModelService::new(model))
        .tools(tools::builtin(std::slice::from_ref(&builder)))
        .max_steps(2)
        .build();
    let runner = one_agent(dir.path(), &builder, BoxTurnService::new(agent));
    let (report, _) = run_as(&runner, "http-run", &builder, "write hello.txt").await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hi"
    );
    assert_eq!(
        sleeper.waits().len(),
        1,
        "the 503 was retried once, inside the backend"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].json();
    let messages = last["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result went back");
    assert_eq!(result["tool_call_id"], "call_1");
}

/// A one-agent run through `model` (max_tokens 16): how it ended and what the ledger holds.
async fn run_one(model: BoxModelService) -> (RunStatus, Vec<AuditEvent>) {
    let dir = tempfile::tempdir().unwrap();
    let builder = AgentId::new("builder").unwrap();
    let agent = LlmAgent::builder(builder.clone(), model)
        .max_tokens(16)
        .build();
    let runner = one_agent(dir.path(), &builder, BoxTurnService::new(agent));
    let (report, sink) = run_as(&runner, "cut-run", &builder, "explain the plan").await;
    (
        report.status,
        sink.events().into_iter().map(|(_, e)| e).collect(),
    )
}

fn assert_cut_off(status: &RunStatus, events: &[AuditEvent]) {
    assert!(
        matches!(status, RunStatus::Failed { error } if error.contains("cut off at its token limit") && error.contains("16 tokens") && error.contains("Raise max_tokens")),
        "{status:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, AuditEvent::ModelReply { text, stop: StopReason::TokenLimit, .. } if text == "The plan has three")),
        "the cut-off reply is in the ledger, marked: {events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(
            e,
            AuditEvent::RunEnded {
                status: RunStatus::Failed { .. },
                ..
            }
        )),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_openai_answer_cut_off_by_finish_reason_length_fails_the_run_not_completes_it() {
    let server = MockServer::start(vec![sse(
        &[
            data(&json!({"choices": [{"index": 0, "delta": {"content": "The plan has three"}}]})),
            data(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})),
            "data: [DONE]\n\n".into(),
        ],
        true,
    )])
    .await;
    let model = OpenAiModel::new(
        OpenAiConfig::new(format!("{}/v1", server.url), "local"),
        None,
    )
    .unwrap();
    let (status, events) = run_one(BoxModelService::new(model)).await;
    assert_cut_off(&status, &events);
    assert_eq!(server.requests()[0].json()["max_tokens"], 16);
}

#[tokio::test]
async fn an_anthropic_answer_stopped_at_max_tokens_fails_the_run_not_completes_it() {
    let server = MockServer::start(vec![json(
        200,
        &json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "The plan has three"}], "stop_reason": "max_tokens",
            "usage": {"input_tokens": 5, "output_tokens": 16}}),
    )])
    .await;
    let config = AnthropicConfig {
        base_url: server.url.clone(),
        stream: false,
        ..AnthropicConfig::new("claude-test", "ANTHROPIC_API_KEY")
    };
    let model = AnthropicModel::new(config, ApiKey::new("sk-ant-test").unwrap()).unwrap();
    let (status, events) = run_one(BoxModelService::new(model)).await;
    assert_cut_off(&status, &events);
}
