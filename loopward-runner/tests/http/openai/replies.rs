//! What comes back, streamed or whole: text, tool calls and usage mapped back; cut, broken or
//! error replies refused.

use super::*;

#[tokio::test]
async fn streamed_text_accumulates_and_reports_usage_with_cached_tokens() {
    let served = served(
        vec![sse(
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
        )],
        true,
    )
    .await;
    let reply = served.result.as_ref().unwrap();
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
    let sent = served.first_sent().json();
    assert_eq!(sent["stream"], json!(true));
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streamed_tool_call_joins_argument_deltas_split_across_events() {
    let reply = served(
        vec![sse(
            &[
                call_start_chunk(),
                args_chunk("{\"pa"),
                args_chunk("th\": \"hel"),
                args_chunk("lo.txt\"}"),
                finish_chunk("tool_calls"),
                "data: [DONE]\n\n".into(),
            ],
            true,
        )],
        true,
    )
    .await
    .result
    .unwrap();
    assert_eq!(reply.tool_calls, vec![hello_call("call_1")]);
}

#[tokio::test]
async fn parallel_streamed_calls_keep_their_order_even_when_a_server_repeats_names() {
    let delta = |index: u64, id: &str, args: &str| {
        data(&json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "function": {"name": "read_file", "arguments": args}}]}}]}))
    };
    let calls = vec![sse(
        &[
            delta(0, "a", "{\"path\":"),
            delta(1, "b", "{\"path\": \"b\"}"),
            delta(0, "a", " \"a\"}"),
            finish_chunk("tool_calls"),
        ],
        true,
    )];
    let reply = served(calls, true).await.result.unwrap();
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
    let served = served(vec![cut, whole], true).await;
    assert_eq!(served.content(), "done");
    assert!(served.result.unwrap().tool_calls.is_empty());
    assert_eq!(served.server.requests().len(), 2);
    assert_eq!(served.waits, vec![Duration::from_millis(375)]);
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
    let err = fails_once(&server, true, |_| {}).await;
    assert_transport(&err, "cut inside a tool call");
}

#[tokio::test]
async fn an_error_event_after_200_is_a_typed_error_not_a_reply() {
    let served = served(vec![sse(&[
        text_chunk("partial"),
        data(&json!({"error": {"message": "model crashed", "type": "invalid_request_error", "code": "context_length_exceeded"}})),
    ], true)], true).await;
    assert_invalid_response(served.err(), "context_length_exceeded");
    assert_eq!(served.server.requests().len(), 1);
}

#[tokio::test]
async fn invalid_json_in_a_stream_is_an_invalid_response() {
    let served = served(vec![sse(&["data: {\"choices\": [\n\n".into()], true)], true).await;
    assert_invalid_response(served.err(), "not valid JSON");
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
        assert_invalid_response(&err, want);
    }
    assert_eq!(server.requests().len(), 4, "none of them was retried");
}

#[tokio::test]
async fn a_reply_cut_by_the_token_limit_inside_a_tool_call_is_refused() {
    let cut = vec![sse(
        &[
            call_start_chunk(),
            args_chunk("{\"pa"),
            finish_chunk("length"),
            "data: [DONE]\n\n".into(),
        ],
        true,
    )];
    assert_invalid_response(served(cut, true).await.err(), "token limit");
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
    assert_cut_off_then_finished([
        call(model(&server, true).0).await,
        call(model(&server, false).0).await,
        call(model(&server, true).0).await,
    ]);
}
