//! Retries and timeouts: rate limits (seconds or an HTTP date), quota, server errors, closed or
//! silent connections, an unreachable server.

use super::*;

#[tokio::test]
async fn rate_limit_with_retry_after_seconds_waits_that_long_then_succeeds() {
    let limited = json_with(
        429,
        &[("retry-after", "2")],
        &json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}),
    );
    assert_eq!(waits_before_ok(limited).await, vec![Duration::from_secs(2)]);
}

#[tokio::test]
async fn rate_limit_with_retry_after_http_date_is_measured_against_the_injected_clock() {
    let now_ms = 1_800_000_000_000;
    let date =
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_millis(now_ms + 5_000));
    let replies = vec![
        json_with(
            429,
            &[("retry-after", &date)],
            &json!({"error": {"message": "slow down"}}),
        ),
        json(200, &full_reply("ok")),
    ];
    let clocked = |server: &MockServer| {
        let (m, sleeper) = model(server, false);
        (m.with_clock(ManualClock::new(now_ms)), sleeper)
    };
    let served = Served::run(replies, clocked, request()).await;
    assert_eq!(served.content(), "ok");
    assert_eq!(served.waits, vec![Duration::from_secs(5)]);
}

#[tokio::test]
async fn insufficient_quota_429_is_not_retried() {
    let served = served(vec![
        json_with(429, &[("retry-after", "1")], &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}})),
        json(200, &full_reply("never")),
    ], false).await;
    assert_quota_exhausted(served.err(), "insufficient_quota");
    assert_eq!(served.server.requests().len(), 1);
    assert!(served.waits.is_empty());
}

#[tokio::test]
async fn server_error_then_success_is_retried_with_jittered_backoff() {
    let served = served(
        vec![
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
        ],
        false,
    )
    .await;
    assert_eq!(served.content(), "ok");
    assert_eq!(
        served.waits,
        vec![Duration::from_millis(375), Duration::from_millis(750)]
    );
}

#[tokio::test]
async fn retries_stop_at_max_attempts_with_the_last_error() {
    let served = served(
        vec![
            json(503, &json!({"error": "busy"})),
            json(503, &json!({"error": "busy"})),
            json(503, &json!({"error": "still busy"})),
            json(200, &full_reply("too late")),
        ],
        false,
    )
    .await;
    assert_eq!(
        served.err(),
        &ModelError::Server {
            status: 503,
            body: "still busy".into()
        }
    );
    assert_eq!(served.server.requests().len(), 3);
}

#[tokio::test]
async fn a_connection_closed_before_the_reply_is_retried() {
    assert_eq!(waits_before_ok(Reply::Close).await.len(), 1);
}

#[tokio::test]
async fn a_connection_that_keeps_closing_or_resetting_is_a_transport_error() {
    let served = served(vec![Reply::Close, Reply::Reset, Reply::Reset], false).await;
    assert_transport(served.err(), "");
}

/// One try against `server` with a 50 ms read timeout ends in that timeout.
async fn assert_times_out(server: &MockServer, stream: bool) {
    let read_timeout = Duration::from_millis(50);
    let err = fails_once(server, stream, |c| c.read_timeout = read_timeout).await;
    assert_eq!(err, ModelError::Timeout(read_timeout));
}

#[tokio::test]
async fn a_silent_server_times_out_after_the_read_timeout() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    assert_times_out(&server, false).await;
}

#[tokio::test]
async fn a_stream_that_stalls_after_its_headers_times_out_after_the_read_timeout() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let server = MockServer::start(vec![Reply::RawThenHang(
        [&head[..], call_start_chunk().as_bytes()].concat(),
    )])
    .await;
    assert_times_out(&server, true).await;
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
    assert_transport(&err, "127.0.0.1");
    assert_eq!(sleeper.waits().len(), 3, "4 tries by default");
}
