//! The Anthropic Messages backend against a canned server on 127.0.0.1.

use super::support::{
    assert_cut_off_then_finished, assert_invalid_response, assert_quota_exhausted,
    assert_transport, event, hello_call, http, json, sse, write_file_result, write_hello,
    MockServer, RecordingSleeper, Reply, Served,
};
use loopward_core::{Message, ToolCall};
use loopward_runner::model::http::{AnthropicConfig, AnthropicModel, ApiKey, RetryPolicy};
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError};
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

fn config(server: &MockServer, stream: bool) -> AnthropicConfig {
    AnthropicConfig {
        base_url: server.url.clone(),
        stream,
        max_tokens: 1024,
        read_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        },
        ..AnthropicConfig::new("claude-test", "ANTHROPIC_API_KEY")
    }
}

fn model(server: &MockServer, stream: bool) -> (AnthropicModel, RecordingSleeper) {
    tuned(server, stream, |_| {})
}

/// The model over a config changed by `tune`, with no jitter and a sleeper that records.
fn tuned(
    server: &MockServer,
    stream: bool,
    tune: impl FnOnce(&mut AnthropicConfig),
) -> (AnthropicModel, RecordingSleeper) {
    let mut c = config(server, stream);
    tune(&mut c);
    let sleeper = RecordingSleeper::default();
    let m = AnthropicModel::new(c, ApiKey::new("sk-ant-secret").unwrap())
        .unwrap()
        .with_jitter(|| 0.0)
        .with_sleeper(sleeper.clone());
    (m, sleeper)
}

fn request() -> ChatRequest {
    write_hello(json!({"type": "object"}), None)
}

/// Serves `replies` to one call of `request()`, streamed or not.
async fn served(replies: Vec<Reply>, stream: bool) -> Served {
    Served::run(replies, |server| model(server, stream), request()).await
}

/// The waits before a call that got `first`, then a reply saying ok, ends with that reply.
async fn waits_before_ok(first: Reply, stream: bool) -> Vec<Duration> {
    let served = served(vec![first, json(200, &full_reply("ok"))], stream).await;
    assert_eq!(served.content(), "ok");
    served.waits
}

async fn call(m: AnthropicModel) -> Result<ChatResponse, ModelError> {
    m.oneshot(request()).await
}

fn message_start() -> String {
    event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-test-20250101",
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 200, "output_tokens": 1}}}),
    )
}

fn tool_start(index: u64) -> String {
    event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}),
    )
}

fn json_delta(index: u64, part: &str) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
    )
}

fn block_stop(index: u64) -> String {
    event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_end(stop_reason: &str) -> [String; 2] {
    [
        event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 25}}),
        ),
        event("message_stop", &json!({"type": "message_stop"})),
    ]
}

fn full_reply(text: &str) -> Value {
    json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test-20250101",
           "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 5, "output_tokens": 2}})
}

#[tokio::test]
async fn request_maps_system_merged_tool_results_notices_and_headers() {
    let mut req = request();
    req.max_tokens = Some(64);
    req.messages.extend([
        Message::model(
            "Writing both.",
            vec![
                ToolCall::new("t1", "write_file", json!({"path": "a"})),
                ToolCall::new("t2", "write_file", json!({"path": "b"})),
            ],
        ),
        write_file_result("t1", "ok", false),
        write_file_result("t2", "territory owned by planner", true),
        Message::notice("2 steps left"),
    ]);
    let sent = Served::sent(
        json(200, &full_reply("ok")),
        |server| model(server, false),
        req,
    )
    .await;
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-secret"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 64,
            "system": "be brief",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "write hello.txt"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Writing both."},
                    {"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "write_file", "input": {"path": "b"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "territory owned by planner", "is_error": true},
                    {"type": "text", "text": "[notice] 2 steps left"}]},
            ],
            "tools": [{"name": "write_file", "description": "Writes a file.", "input_schema": {"type": "object"}}],
        })
    );
}

#[tokio::test]
async fn streamed_text_and_tool_use_with_split_json_deltas_and_cache_usage() {
    let [delta, stop] = message_end("tool_use");
    let served = served(vec![sse(&[
        message_start(),
        event("ping", &json!({"type": "ping"})),
        event("content_block_start", &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        event("content_block_delta", &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On "}})),
        event("content_block_delta", &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "it."}})),
        block_stop(0),
        tool_start(1),
        json_delta(1, "{\"path\""),
        json_delta(1, ": \"hello"),
        json_delta(1, ".txt\"}"),
        block_stop(1),
        delta,
        stop,
    ], true)], true).await;
    let reply = served.result.as_ref().unwrap();
    assert_eq!(reply.content, "On it.");
    assert_eq!(reply.tool_calls, vec![hello_call("toolu_1")]);
    assert_eq!(reply.model, "claude-test-20250101");
    // input = 12 fresh + 30 written to the cache + 200 read from it.
    assert_eq!(
        (
            reply.usage.input_tokens,
            reply.usage.output_tokens,
            reply.usage.cached_tokens
        ),
        (242, 25, 200)
    );
    assert_eq!(served.first_sent().json()["stream"], json!(true));
}

#[tokio::test]
async fn non_streamed_tool_use_maps_back() {
    let reply = served(vec![json(200, &json!({
        "id": "msg_3", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "Writing."}, {"type": "tool_use", "id": "toolu_9", "name": "write_file", "input": {"path": "x"}}],
        "usage": {"input_tokens": 40, "output_tokens": 9, "cache_read_input_tokens": 8}
    }))], false).await.result.unwrap();
    assert_eq!(reply.content, "Writing.");
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall::new("toolu_9", "write_file", json!({"path": "x"}))]
    );
    assert_eq!(
        (reply.usage.input_tokens, reply.usage.cached_tokens),
        (48, 8)
    );
}

#[tokio::test]
async fn a_stream_cut_inside_tool_use_returns_no_call() {
    let cut = sse(
        &[
            message_start(),
            tool_start(0),
            json_delta(0, "{\"path\": \"/etc"),
        ],
        false,
    );
    let clean_eof = Reply::Raw(
        [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                .to_vec(),
            message_start().into_bytes(),
            tool_start(0).into_bytes(),
            json_delta(0, "{\"path\": \"/etc").into_bytes(),
        ]
        .concat(),
    );
    let server = MockServer::start(vec![cut, clean_eof]).await;
    let (m, _) = tuned(&server, true, |c| c.retry.max_attempts = 1);
    let broken = m.clone().oneshot(request()).await.unwrap_err();
    assert_transport(&broken, "stream broke");
    let ended = m.oneshot(request()).await.unwrap_err();
    assert_transport(&ended, "cut inside a tool call");
}

#[tokio::test]
async fn an_overloaded_error_event_after_200_is_retried_then_succeeds() {
    let overloaded = event(
        "error",
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let waits = waits_before_ok(sse(&[message_start(), overloaded], true), true).await;
    assert_eq!(waits, vec![Duration::from_millis(250)]);
}

#[tokio::test]
async fn status_529_overloaded_is_retried_within_the_budget_and_then_reported() {
    let overloaded = || {
        json(
            529,
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    };
    let served = served(vec![overloaded(), overloaded(), overloaded()], false).await;
    assert_eq!(
        served.err(),
        &ModelError::Server {
            status: 529,
            body: "overloaded_error: Overloaded".into()
        }
    );
    assert_eq!(
        served.waits,
        vec![Duration::from_millis(250), Duration::from_millis(500)]
    );
    assert_eq!(served.server.requests().len(), 3);
}

#[tokio::test]
async fn a_wait_budget_smaller_than_the_backoff_stops_retrying() {
    let oops = json(
        500,
        &json!({"type": "error", "error": {"type": "api_error", "message": "oops"}}),
    );
    let budget = |c: &mut AnthropicConfig| c.retry.max_total_wait = Duration::from_millis(100);
    let served = Served::run(vec![oops], |server| tuned(server, false, budget), request()).await;
    assert!(matches!(
        served.err(),
        ModelError::Server { status: 500, .. }
    ));
    assert!(served.waits.is_empty());
}

#[tokio::test]
async fn billing_errors_are_quota_exhausted_and_not_retried() {
    let served = served(vec![
        json(400, &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API."}})),
        json(200, &full_reply("never")),
    ], false).await;
    assert_quota_exhausted(served.err(), "credit balance");
    assert_eq!(served.server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_error_429_honours_retry_after() {
    let limited = Reply::Raw(http(429, "application/json", &[("retry-after", "3")],
            &json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}).to_string()));
    let waits = waits_before_ok(limited, false).await;
    assert_eq!(waits, vec![Duration::from_secs(3)]);
}

#[tokio::test]
async fn empty_and_html_and_unparseable_replies_are_invalid_responses() {
    let server = MockServer::start(vec![
        sse(&[], true),
        Reply::Raw(http(
            200,
            "text/html",
            &[],
            "<html><title>Captive portal</title></html>",
        )),
        sse(
            &["event: content_block_delta\ndata: {oops\n\n".into()],
            true,
        ),
    ])
    .await;
    for want in [
        "empty event stream",
        "HTML page: Captive portal",
        "not valid JSON",
    ] {
        let err = call(model(&server, true).0).await.unwrap_err();
        assert_invalid_response(&err, want);
    }
}

#[tokio::test]
async fn hitting_max_tokens_inside_tool_use_is_refused() {
    let [_, stop] = message_end("max_tokens");
    let served = served(
        vec![sse(
            &[
                message_start(),
                tool_start(0),
                json_delta(0, "{\"path\": \"a\"}"),
                block_stop(0),
                event(
                    "message_delta",
                    &json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
                ),
                stop,
            ],
            true,
        )],
        true,
    )
    .await;
    assert_invalid_response(served.err(), "max_tokens");
}

#[test]
fn from_config_reads_the_key_from_a_key_file_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anthropic.key");
    std::fs::write(&path, "sk-ant-from-file\n").unwrap();
    let c = AnthropicConfig {
        key_env: None,
        key_file: Some(path),
        ..AnthropicConfig::new("claude-test", "X")
    };
    let m = AnthropicModel::from_config(c, |_| panic!("no env lookup for a key file")).unwrap();
    assert!(format!("{m:?}").contains("<redacted>"));
    let err = toml::from_str::<AnthropicConfig>(
        "model = \"m\"\nkey_env = \"K\"\nretry = { attempts = 2 }",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown field `attempts`"),
        "{err}"
    );
}

#[test]
fn an_unset_key_variable_is_said_once_when_an_embedder_prints_the_chain() {
    let c = AnthropicConfig::new("claude-test", "LOOPWARD_TEST_KEY");
    let err = AnthropicModel::from_config(c, |_| None).unwrap_err();
    let text = format!("{:#}", anyhow::Error::new(err));
    assert_eq!(
        text.matches("LOOPWARD_TEST_KEY is not set").count(),
        1,
        "{text}"
    );
    // The top-level message alone still says what to do.
    assert!(
        text.starts_with(
            "anthropic config: the environment variable LOOPWARD_TEST_KEY is not set; export it"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_text_reply_stopped_at_max_tokens_is_marked_cut_off_streamed_or_whole() {
    let [delta, stop] = message_end("max_tokens");
    let text = |t: &str| {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        )
    };
    let mut cut_whole = full_reply("The plan has three");
    cut_whole["stop_reason"] = json!("max_tokens");
    let server = MockServer::start(vec![
        sse(
            &[
                message_start(),
                event("content_block_start", &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
                text("The plan has "),
                text("three"),
                block_stop(0),
                delta,
                stop,
            ],
            true,
        ),
        json(200, &cut_whole),
        json(200, &full_reply("Done.")),
    ])
    .await;
    assert_cut_off_then_finished([
        call(model(&server, true).0).await,
        call(model(&server, false).0).await,
        call(model(&server, false).0).await,
    ]);
}
