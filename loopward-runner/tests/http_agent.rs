//! An agent turn over the OpenAI-compatible backend: the model calls a tool, the tool runs, the
//! model finishes; a transient server error on the way is retried inside the backend.
#![cfg(feature = "http")]

mod http_support;

use http_support::{data, json, sse, MockServer, RecordingSleeper};
use loopward_core::{AgentId, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::http::{OpenAiConfig, OpenAiModel};
use loopward_runner::model::BoxModelService;
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunSpec, Runner, Workspace};
use serde_json::json;
use std::sync::Arc;

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
    let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
        .agent(builder.clone(), BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap();
    let report = runner
        .run(RunSpec {
            id: RunId::new("http-run").unwrap(),
            task: "write hello.txt".into(),
            first: builder,
            audit: Arc::new(MemorySink::default()),
            audit_location: None,
        })
        .await;
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
