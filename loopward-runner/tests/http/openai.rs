//! The OpenAI-compatible backend against a canned server on 127.0.0.1.

use super::support::{
    assert_cut_off_then_finished, assert_invalid_response, assert_quota_exhausted,
    assert_transport, data, hello_call, http, json, json_with, sse, write_file_result, write_hello,
    MockServer, RecordingSleeper, Reply, Served,
};
use loopward_core::{Message, ToolCall};
use loopward_runner::model::http::{ApiKey, OpenAiConfig, OpenAiModel, RetryPolicy, ToolChoice};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward_runner::ManualClock;
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

mod replies;
mod request;
mod retries;

fn config(server: &MockServer, stream: bool) -> OpenAiConfig {
    OpenAiConfig {
        stream,
        read_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        },
        ..OpenAiConfig::new(format!("{}/v1", server.url), "gpt-test")
    }
}

fn model(server: &MockServer, stream: bool) -> (OpenAiModel, RecordingSleeper) {
    keyed(config(server, stream))
}

/// The model over `c` with the test key, a fixed jitter and a sleeper that records.
fn keyed(c: OpenAiConfig) -> (OpenAiModel, RecordingSleeper) {
    let sleeper = RecordingSleeper::default();
    let m = OpenAiModel::new(c, Some(ApiKey::new("sk-test-secret").unwrap()))
        .unwrap()
        .with_jitter(|| 0.5)
        .with_sleeper(sleeper.clone());
    (m, sleeper)
}

fn request() -> ChatRequest {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    write_hello(schema, Some(256))
}

/// One try, no retries, over a config changed by `tune`: the error it ends with.
async fn fails_once(
    server: &MockServer,
    stream: bool,
    tune: impl FnOnce(&mut OpenAiConfig),
) -> ModelError {
    let mut c = config(server, stream);
    c.retry.max_attempts = 1;
    tune(&mut c);
    let m = OpenAiModel::new(c, None).unwrap();
    m.oneshot(request()).await.unwrap_err()
}

async fn call(m: OpenAiModel) -> Result<ChatResponse, ModelError> {
    m.oneshot(request()).await
}

/// Serves `replies` to one call of `request()`, streamed or not.
async fn served(replies: Vec<Reply>, stream: bool) -> Served {
    Served::run(replies, |server| model(server, stream), request()).await
}

/// The waits before a call that got `first`, then a reply saying ok, ends with that reply.
async fn waits_before_ok(first: Reply) -> Vec<Duration> {
    let served = served(vec![first, json(200, &full_reply("ok"))], false).await;
    assert_eq!(served.content(), "ok");
    served.waits
}

fn text_chunk(text: &str) -> String {
    data(
        &json!({"model": "gpt-test-0613", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
    )
}

fn finish_chunk(reason: &str) -> String {
    data(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

fn args_chunk(args: &str) -> String {
    data(
        &json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args}}]}}]}),
    )
}

fn call_start_chunk() -> String {
    data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": ""}}]}}]}))
}

fn full_reply(content: &str) -> Value {
    json!({"model": "gpt-test-0613", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
}
