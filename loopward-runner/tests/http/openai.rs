//! The OpenAI-compatible backend against a canned server on 127.0.0.1.

use super::support::{data, http, json, json_with, sse, MockServer, RecordingSleeper, Reply};
use loopward_core::{AgentId, Message, Person, ToolCall, ToolResult, ToolSpec};
use loopward_runner::model::http::{ApiKey, OpenAiConfig, OpenAiModel, RetryPolicy, ToolChoice};
use loopward_runner::model::{
    BoxModelService, ChatRequest, ChatResponse, ModelError, StopReason, TurnSlot,
};
use loopward_runner::ManualClock;
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

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
    let sleeper = RecordingSleeper::default();
    let m = OpenAiModel::new(
        config(server, stream),
        Some(ApiKey::new("sk-test-secret").unwrap()),
    )
    .unwrap()
    .with_jitter(|| 0.5)
    .with_sleeper(sleeper.clone());
    (m, sleeper)
}

fn request() -> ChatRequest {
    ChatRequest {
        agent: AgentId::new("builder").unwrap(),
        messages: vec![
            Message::system("be brief"),
            Message::human(Person::at_the_keyboard().says("write hello.txt")),
        ],
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Writes a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_tokens: Some(256),
        turn: TurnSlot::empty(),
    }
}

async fn call(m: OpenAiModel) -> Result<ChatResponse, ModelError> {
    m.oneshot(request()).await
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

#[tokio::test]
async fn request_maps_every_message_kind_tools_and_the_bearer_key() {
    let server = MockServer::start(vec![json(200, &full_reply("ok"))]).await;
    let (m, _) = model(&server, false);
    let mut req = request();
    req.messages.extend([
        Message::model(
            "",
            vec![ToolCall::new("c1", "write_file", json!({"path": "a"}))],
        ),
        Message::Tool(ToolResult {
            call_id: "c1".into(),
            name: "write_file".into(),
            content: "denied".into(),
            is_error: true,
        }),
        Message::notice("handoff from planner"),
    ]);
    m.oneshot(req).await.unwrap();
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-secret"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-test",
            "max_tokens": 256,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "write hello.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"a\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "[error] denied"},
                {"role": "user", "content": "[notice] handoff from planner"},
            ],
            "tools": [{"type": "function", "function": {"name": "write_file", "description": "Writes a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        })
    );
}

#[tokio::test]
async fn tool_choice_and_the_argument_bound_travel_with_the_tools_only() {
    let server = MockServer::start(vec![
        json(200, &full_reply("ok")),
        json(200, &full_reply("ok")),
    ])
    .await;
    let c = OpenAiConfig {
        tool_choice: ToolChoice::Required,
        argument_chars: Some(64),
        ..config(&server, false)
    };
    let m = OpenAiModel::new(c, None).unwrap();
    m.clone().oneshot(request()).await.unwrap();
    let mut no_tools = request();
    no_tools.tools.clear();
    m.oneshot(no_tools).await.unwrap();
    let sent: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(sent[0]["tool_choice"], "required");
    assert_eq!(
        sent[0]["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {"path": {"type": "string", "maxLength": 64}}})
    );
    // Without tools there is nothing to choose: no `tool_choice` (servers refuse one alone).
    assert!(sent[1].get("tool_choice").is_none(), "{}", sent[1]);
    assert!(sent[1].get("tools").is_none(), "{}", sent[1]);
    // The default (`auto`) is the servers' own and is not sent: see the exact body above.
    let c: OpenAiConfig = toml::from_str("model = \"m\"\ntool_choice = \"none\"").unwrap();
    assert_eq!(c.tool_choice, ToolChoice::None);
    let err =
        toml::from_str::<OpenAiConfig>("model = \"m\"\ntool_choice = \"always\"").unwrap_err();
    assert!(err.to_string().contains("`auto`, `required`"), "{err}");
    let zero = OpenAiConfig {
        argument_chars: Some(0),
        ..OpenAiConfig::new("http://h", "m")
    };
    assert!(zero
        .validate()
        .unwrap_err()
        .to_string()
        .contains("argument_chars is 0"));
}

#[tokio::test]
async fn streamed_text_accumulates_and_reports_usage_with_cached_tokens() {
    let server = MockServer::start(vec![sse(
        &[
            text_chunk("Hel"),
            text_chunk("lo"),
            finish_chunk("stop"),
            data(
                &json!({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 100}}}),
            ),
            "data: [DONE]\n\n".into(),
        ],
        true,
    )])
    .await;
    let (m, _) = model(&server, true);
    let reply = call(m).await.unwrap();
    assert_eq!(reply.content, "Hello");
    assert_eq!(reply.model, "gpt-test-0613");
    assert_eq!(
        (
            reply.usage.input_tokens,
            reply.usage.output_tokens,
            reply.usage.cached_tokens,
            reply.usage.calls
        ),
        (120, 3, 100, 1)
    );
    let sent = server.requests()[0].json();
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streamed_tool_call_joins_argument_deltas_split_across_events() {
    let server = MockServer::start(vec![sse(
        &[
            call_start_chunk(),
            args_chunk("{\"pa"),
            args_chunk("th\": \"hel"),
            args_chunk("lo.txt\"}"),
            finish_chunk("tool_calls"),
            "data: [DONE]\n\n".into(),
        ],
        true,
    )])
    .await;
    let (m, _) = model(&server, true);
    let reply = call(m).await.unwrap();
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall::new(
            "call_1",
            "write_file",
            json!({"path": "hello.txt"})
        )]
    );
}

#[tokio::test]
async fn parallel_streamed_calls_keep_their_order_even_when_a_server_repeats_names() {
    let delta = |index: u64, id: &str, args: &str| {
        data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "function": {"name": "read_file", "arguments": args}}]}}]}))
    };
    let server = MockServer::start(vec![sse(
        &[
            delta(0, "a", "{\"path\":"),
            delta(1, "b", "{\"path\": \"b\"}"),
            delta(0, "a", " \"a\"}"),
            finish_chunk("tool_calls"),
        ],
        true,
    )])
    .await;
    let reply = call(model(&server, true).0).await.unwrap();
    assert_eq!(
        reply.tool_calls,
        vec![
            ToolCall::new("a", "read_file", json!({"path": "a"})),
            ToolCall::new("b", "read_file", json!({"path": "b"})),
        ]
    );
}

#[tokio::test]
async fn non_streamed_tool_calls_and_usage_map_back() {
    let server = MockServer::start(vec![json(200, &json!({
        "model": "gpt-test-0613",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"x\"}"}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 32}}
    }))]).await;
    let (m, _) = model(&server, false);
    let reply = BoxModelService::new(m).oneshot(request()).await.unwrap();
    assert_eq!(reply.content, "");
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall::new("call_9", "write_file", json!({"path": "x"}))]
    );
    assert_eq!(
        (
            reply.usage.input_tokens,
            reply.usage.output_tokens,
            reply.usage.cached_tokens
        ),
        (50, 7, 32)
    );
    assert!(server.requests()[0].json().get("stream").is_none());
}

#[tokio::test]
async fn the_token_limit_can_travel_as_max_completion_tokens() {
    let server = MockServer::start(vec![json(200, &full_reply("ok"))]).await;
    let c: OpenAiConfig = toml::from_str(&format!(
        "base_url = \"{}/v1\"\nmodel = \"o-test\"\nmax_tokens = 100\nmax_tokens_field = \"max_completion_tokens\"\nstream = false",
        server.url
    ))
    .unwrap();
    OpenAiModel::new(c, None)
        .unwrap()
        .oneshot(request())
        .await
        .unwrap();
    let sent = server.requests()[0].json();
    assert_eq!(
        sent["max_completion_tokens"],
        json!(100),
        "the request's 256 is above the config's 100"
    );
    assert!(sent.get("max_tokens").is_none());
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_returns_no_call_and_the_retry_gets_the_whole_reply() {
    let cut = sse(
        &[call_start_chunk(), args_chunk("{\"path\": \"rm -rf")],
        false,
    );
    let whole = sse(
        &[
            text_chunk("done"),
            finish_chunk("stop"),
            "data: [DONE]\n\n".into(),
        ],
        true,
    );
    let server = MockServer::start(vec![cut, whole]).await;
    let (m, sleeper) = model(&server, true);
    let reply = call(m).await.unwrap();
    assert_eq!(reply.content, "done");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(server.requests().len(), 2);
    assert_eq!(sleeper.waits(), vec![Duration::from_millis(375)]);
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_without_retries_is_a_transport_error() {
    // Ends cleanly at the HTTP level but without finish_reason or [DONE].
    let cut = Reply::Raw(
        [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                .to_vec(),
            call_start_chunk().into_bytes(),
            args_chunk("{\"path\": ").into_bytes(),
        ]
        .concat(),
    );
    let server = MockServer::start(vec![cut]).await;
    let mut c = config(&server, true);
    c.retry.max_attempts = 1;
    let err = OpenAiModel::new(c, None)
        .unwrap()
        .oneshot(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("cut inside a tool call")),
        "{err}"
    );
}

#[tokio::test]
async fn an_error_event_after_200_is_a_typed_error_not_a_reply() {
    let server = MockServer::start(vec![sse(&[
        text_chunk("partial"),
        data(&json!({"error": {"message": "model crashed", "type": "invalid_request_error", "code": "context_length_exceeded"}})),
    ], true)]).await;
    let (m, _) = model(&server, true);
    let err = call(m).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidResponse(m) if m.contains("context_length_exceeded")),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn invalid_json_in_a_stream_is_an_invalid_response() {
    let server = MockServer::start(vec![sse(&["data: {\"choices\": [\n\n".into()], true)]).await;
    let err = call(model(&server, true).0).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidResponse(m) if m.contains("not valid JSON")),
        "{err}"
    );
}

#[tokio::test]
async fn invalid_json_html_and_empty_bodies_after_200_are_invalid_responses() {
    let server = MockServer::start(vec![
        Reply::Raw(http(200, "application/json", &[], "{\"choices\": [")),
        Reply::Raw(http(
            200,
            "text/html",
            &[],
            "<!DOCTYPE html><html><head><title>Login required</title></head></html>",
        )),
        Reply::Raw(http(200, "application/json", &[], "")),
        sse(&[], true),
    ])
    .await;
    let expect = [
        "not valid JSON",
        "HTML page: Login required",
        "empty body",
        "empty event stream",
    ];
    for (i, want) in expect.iter().enumerate() {
        let err = call(model(&server, i == 3).0).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::InvalidResponse(m) if m.contains(want)),
            "{i}: {err}"
        );
    }
    assert_eq!(server.requests().len(), 4, "none of them was retried");
}

#[tokio::test]
async fn rate_limit_with_retry_after_seconds_waits_that_long_then_succeeds() {
    let server = MockServer::start(vec![
        json_with(429, &[("retry-after", "2")], &json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}})),
        json(200, &full_reply("ok")),
    ]).await;
    let (m, sleeper) = model(&server, false);
    assert_eq!(call(m).await.unwrap().content, "ok");
    assert_eq!(sleeper.waits(), vec![Duration::from_secs(2)]);
}

#[tokio::test]
async fn rate_limit_with_retry_after_http_date_is_measured_against_the_injected_clock() {
    let now_ms = 1_800_000_000_000;
    let date =
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_millis(now_ms + 5_000));
    let server = MockServer::start(vec![
        json_with(
            429,
            &[("retry-after", &date)],
            &json!({"error": {"message": "slow down"}}),
        ),
        json(200, &full_reply("ok")),
    ])
    .await;
    let (m, sleeper) = model(&server, false);
    let m = m.with_clock(ManualClock::new(now_ms));
    assert_eq!(call(m).await.unwrap().content, "ok");
    assert_eq!(sleeper.waits(), vec![Duration::from_secs(5)]);
}

#[tokio::test]
async fn insufficient_quota_429_is_not_retried() {
    let server = MockServer::start(vec![
        json_with(429, &[("retry-after", "1")], &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}})),
        json(200, &full_reply("never")),
    ]).await;
    let (m, sleeper) = model(&server, false);
    let err = call(m).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::QuotaExhausted(m) if m.contains("insufficient_quota")),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(sleeper.waits().is_empty());
}

#[tokio::test]
async fn server_error_then_success_is_retried_with_jittered_backoff() {
    let server = MockServer::start(vec![
        json(
            500,
            &json!({"error": {"message": "boom", "type": "server_error"}}),
        ),
        Reply::Raw(http(
            502,
            "text/html",
            &[],
            "<html><head><title>502 Bad Gateway</title></head></html>",
        )),
        json(200, &full_reply("ok")),
    ])
    .await;
    let (m, sleeper) = model(&server, false);
    assert_eq!(call(m).await.unwrap().content, "ok");
    assert_eq!(
        sleeper.waits(),
        vec![Duration::from_millis(375), Duration::from_millis(750)]
    );
}

#[tokio::test]
async fn retries_stop_at_max_attempts_with_the_last_error() {
    let server = MockServer::start(vec![
        json(503, &json!({"error": "busy"})),
        json(503, &json!({"error": "busy"})),
        json(503, &json!({"error": "still busy"})),
        json(200, &full_reply("too late")),
    ])
    .await;
    let err = call(model(&server, false).0).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Server {
            status: 503,
            body: "still busy".into()
        }
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_connection_closed_before_the_reply_is_retried() {
    let server = MockServer::start(vec![Reply::Close, json(200, &full_reply("ok"))]).await;
    let (m, sleeper) = model(&server, false);
    assert_eq!(call(m).await.unwrap().content, "ok");
    assert_eq!(sleeper.waits().len(), 1);
}

#[tokio::test]
async fn a_connection_that_keeps_closing_or_resetting_is_a_transport_error() {
    let server = MockServer::start(vec![Reply::Close, Reply::Reset, Reply::Reset]).await;
    let err = call(model(&server, false).0).await.unwrap_err();
    assert!(matches!(err, ModelError::Transport(_)), "{err}");
}

#[tokio::test]
async fn a_silent_server_times_out_after_the_read_timeout() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let mut c = config(&server, false);
    c.read_timeout = Duration::from_millis(50);
    c.retry.max_attempts = 1;
    let err = OpenAiModel::new(c, None)
        .unwrap()
        .oneshot(request())
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout(Duration::from_millis(50)));
}

#[tokio::test]
async fn a_stream_that_stalls_after_its_headers_times_out_after_the_read_timeout() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let server = MockServer::start(vec![Reply::RawThenHang(
        [&head[..], call_start_chunk().as_bytes()].concat(),
    )])
    .await;
    let mut c = config(&server, true);
    c.read_timeout = Duration::from_millis(50);
    c.retry.max_attempts = 1;
    let err = OpenAiModel::new(c, None)
        .unwrap()
        .oneshot(request())
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout(Duration::from_millis(50)));
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_after_the_retries() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sleeper = RecordingSleeper::default();
    let m = OpenAiModel::new(
        OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m"),
        None,
    )
    .unwrap()
    .with_jitter(|| 0.5)
    .with_sleeper(sleeper.clone());
    let err = call(m).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("127.0.0.1")),
        "{err}"
    );
    assert_eq!(sleeper.waits().len(), 3, "4 tries by default");
}

#[tokio::test]
async fn a_reply_cut_by_the_token_limit_inside_a_tool_call_is_refused() {
    let server = MockServer::start(vec![sse(
        &[
            call_start_chunk(),
            args_chunk("{\"pa"),
            finish_chunk("length"),
            "data: [DONE]\n\n".into(),
        ],
        true,
    )])
    .await;
    let err = call(model(&server, true).0).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidResponse(m) if m.contains("token limit")),
        "{err}"
    );
}

#[tokio::test]
async fn the_key_never_appears_in_debug_output_or_errors() {
    let server = MockServer::start(vec![json(401, &json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}))]).await;
    let (m, _) = model(&server, false);
    assert!(!format!("{m:?}").contains("sk-test-secret"));
    let err = call(m).await.unwrap_err();
    assert!(matches!(err, ModelError::Rejected { status: 401, .. }));
    assert!(!err.to_string().contains("sk-test-secret"));
    assert!(err.to_string().contains("check the API key"));
}

#[test]
fn config_rejects_bad_fields_with_precise_messages() {
    let err = toml::from_str::<OpenAiConfig>("model = \"m\"\napi_key = \"sk\"").unwrap_err();
    assert!(err.to_string().contains("unknown field `api_key`"), "{err}");
    let err = toml::from_str::<OpenAiConfig>("model = \"m\"\nread_timeout = \"soon\"").unwrap_err();
    assert!(
        err.to_string().contains("invalid duration \"soon\""),
        "{err}"
    );
    let base = OpenAiConfig::new("ftp://host", "m");
    assert!(base
        .validate()
        .unwrap_err()
        .to_string()
        .contains("base_url"));
    let both = OpenAiConfig {
        key_env: Some("K".into()),
        key_file: Some("k.txt".into()),
        ..OpenAiConfig::new("http://h", "m")
    };
    assert!(both
        .validate()
        .unwrap_err()
        .to_string()
        .contains("both set"));
    let zero = OpenAiConfig {
        retry: RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        },
        ..OpenAiConfig::new("http://h", "m")
    };
    assert!(zero
        .validate()
        .unwrap_err()
        .to_string()
        .contains("retry.max_attempts"));
}

#[tokio::test]
async fn a_text_reply_stopped_by_the_token_limit_is_marked_cut_off_streamed_or_whole() {
    let server = MockServer::start(vec![
        sse(
            &[
                text_chunk("The plan has three"),
                finish_chunk("length"),
                "data: [DONE]\n\n".into(),
            ],
            true,
        ),
        json(
            200,
            &json!({"model": "gpt-test", "choices": [{"index": 0, "message": {"role": "assistant",
                "content": "The plan has three"}, "finish_reason": "length"}]}),
        ),
        sse(
            &[
                text_chunk("Done."),
                finish_chunk("stop"),
                "data: [DONE]\n\n".into(),
            ],
            true,
        ),
    ])
    .await;
    let streamed = call(model(&server, true).0).await.unwrap();
    assert_eq!(streamed.content, "The plan has three");
    assert_eq!(streamed.stop, StopReason::TokenLimit);
    let whole = call(model(&server, false).0).await.unwrap();
    assert_eq!(whole.stop, StopReason::TokenLimit);
    let finished = call(model(&server, true).0).await.unwrap();
    assert_eq!(finished.stop, StopReason::Finished);
}
