//! A tiny HTTP/1.1 server on 127.0.0.1 for the backend tests: it answers each connection with
//! the next canned reply (raw bytes, so replies can be malformed on purpose) and records every
//! request it read.

use futures::future::BoxFuture;
use loopward_core::{AgentId, Message, Person, ToolCall, ToolResult, ToolSpec};
use loopward_runner::model::http::Sleeper;
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError, StopReason, TurnSlot};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

/// What the server does with one connection.
pub(crate) enum Reply {
    /// Writes these bytes, then closes.
    Raw(Vec<u8>),
    /// Reads the request and closes without a word.
    Close,
    /// Reads the request and resets the connection (TCP RST).
    Reset,
    /// Reads the request and never answers.
    Hang,
    /// Writes these bytes, then goes silent with the connection open (a stalled stream).
    RawThenHang(Vec<u8>),
}

/// One request as the server read it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Recorded {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) struct MockServer {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl MockServer {
    /// Serves `replies` in order, one per connection; later connections get a 500.
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = queue.lock().unwrap().pop_front();
                let recorded = recorded.clone();
                tokio::spawn(serve(socket, reply, recorded));
            }
        });
        Self { url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut socket: TcpStream, reply: Option<Reply>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    recorded.lock().unwrap().push(Recorded {
        path,
        headers,
        body: buf[head_end..].to_vec(),
    });
    match reply {
        Some(Reply::Raw(bytes)) => {
            let _ = socket.write_all(&bytes).await;
            let _ = socket.shutdown().await;
        }
        Some(Reply::Close) => drop(socket),
        Some(Reply::Reset) => {
            // Linger 0 makes the close a reset (RST) instead of an orderly FIN.
            #[allow(deprecated)]
            let _ = socket.set_linger(Some(Duration::ZERO));
            drop(socket);
        }
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Some(Reply::RawThenHang(bytes)) => {
            let _ = socket.write_all(&bytes).await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        None => {
            let _ = socket
                .write_all(&http(500, "text/plain", &[], "no more canned replies"))
                .await;
        }
    }
}

/// One call over a canned server: the server (for what it read), what the call returned, and
/// the waits the model asked for between its tries.
pub(crate) struct Served {
    pub(crate) server: MockServer,
    pub(crate) result: Result<ChatResponse, ModelError>,
    pub(crate) waits: Vec<Duration>,
}

impl Served {
    /// Serves `replies` to `request`, sent once through the model `model` builds over the server.
    pub(crate) async fn run<M>(
        replies: Vec<Reply>,
        model: impl FnOnce(&MockServer) -> (M, RecordingSleeper),
        request: ChatRequest,
    ) -> Self
    where
        M: tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>,
    {
        let server = MockServer::start(replies).await;
        let (m, sleeper) = model(&server);
        let result = m.oneshot(request).await;
        let waits = sleeper.waits();
        Self {
            server,
            result,
            waits,
        }
    }

    /// The first request `request` made, sent once through the model `model` builds over a
    /// server that answers `reply`; fails the test if the call failed.
    pub(crate) async fn sent<M>(
        reply: Reply,
        model: impl FnOnce(&MockServer) -> (M, RecordingSleeper),
        request: ChatRequest,
    ) -> Recorded
    where
        M: tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>,
    {
        let served = Self::run(vec![reply], model, request).await;
        if let Err(e) = &served.result {
            panic!("expected a reply, got {e}");
        }
        served.first_sent()
    }

    /// The error the call ended with; fails the test if it succeeded.
    #[track_caller]
    pub(crate) fn err(&self) -> &ModelError {
        match &self.result {
            Err(e) => e,
            Ok(reply) => panic!("expected an error, got {reply:?}"),
        }
    }

    /// The first request the server read.
    pub(crate) fn first_sent(&self) -> Recorded {
        self.server.requests()[0].clone()
    }

    /// The reply's text; fails the test if the call failed.
    #[track_caller]
    pub(crate) fn content(&self) -> &str {
        match &self.result {
            Ok(reply) => &reply.content,
            Err(e) => panic!("expected a reply, got {e}"),
        }
    }
}

/// `err` is an invalid response whose text says `want`.
#[track_caller]
pub(crate) fn assert_invalid_response(err: &ModelError, want: &str) {
    assert!(
        matches!(err, ModelError::InvalidResponse(m) if m.contains(want)),
        "want an invalid response saying {want:?}: {err}"
    );
}

/// `err` is a transport error whose text says `want`.
#[track_caller]
pub(crate) fn assert_transport(err: &ModelError, want: &str) {
    assert!(
        matches!(err, ModelError::Transport(m) if m.contains(want)),
        "want a transport error saying {want:?}: {err}"
    );
}

/// `err` says the quota is spent, with `want` in its text.
#[track_caller]
pub(crate) fn assert_quota_exhausted(err: &ModelError, want: &str) {
    assert!(
        matches!(err, ModelError::QuotaExhausted(m) if m.contains(want)),
        "want an exhausted quota saying {want:?}: {err}"
    );
}

/// A complete response with a body and `Content-Length`.
pub(crate) fn http(status: u16, content_type: &str, extra: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    format!("{head}\r\n{body}").into_bytes()
}

pub(crate) fn json(status: u16, body: &Value) -> Reply {
    Reply::Raw(http(status, "application/json", &[], &body.to_string()))
}

pub(crate) fn json_with(status: u16, extra: &[(&str, &str)], body: &Value) -> Reply {
    Reply::Raw(http(status, "application/json", extra, &body.to_string()))
}

/// An event stream in HTTP chunked encoding, one chunk per event; `complete: false` drops the
/// connection without the final chunk (a stream cut by the network).
pub(crate) fn sse(events: &[String], complete: bool) -> Reply {
    let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for e in events {
        out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
    }
    if complete {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    Reply::Raw(out)
}

/// `data: <json>` as one event.
pub(crate) fn data(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// `event: <name>` with `data: <json>`.
pub(crate) fn event(name: &str, v: &Value) -> String {
    format!("event: {name}\ndata: {v}\n\n")
}

/// A sleeper that records what it was asked to wait and returns at once.
#[derive(Clone, Default)]
pub(crate) struct RecordingSleeper(pub Arc<Mutex<Vec<Duration>>>);

impl RecordingSleeper {
    pub(crate) fn waits(&self) -> Vec<Duration> {
        self.0.lock().unwrap().clone()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.0.lock().unwrap().push(d);
        Box::pin(async {})
    }
}

/// The request both backends' tests send: a system line, a person asking for hello.txt, and
/// `write_file` with `parameters` as its schema.
pub(crate) fn write_hello(parameters: Value, max_tokens: Option<u32>) -> ChatRequest {
    ChatRequest {
        agent: AgentId::new("builder").unwrap(),
        messages: vec![
            Message::system("be brief"),
            Message::human(Person::at_the_keyboard().says("write hello.txt")),
        ],
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Writes a file.".into(),
            parameters,
        }],
        max_tokens,
        turn: TurnSlot::empty(),
    }
}

/// The call a model answers [`write_hello`] with, `id` as its backend names it.
pub(crate) fn hello_call(id: &str) -> ToolCall {
    ToolCall::new(id, "write_file", serde_json::json!({"path": "hello.txt"}))
}

/// `write_file`'s result for the call `call_id`, as the runner hands it back.
pub(crate) fn write_file_result(call_id: &str, content: &str, is_error: bool) -> Message {
    Message::Tool(ToolResult {
        call_id: call_id.into(),
        name: "write_file".into(),
        content: content.into(),
        is_error,
    })
}

/// A text reply stopped by the token limit is marked cut off, streamed and whole, and the next
/// one, that ends of itself, finished: the same in every backend.
#[track_caller]
pub(crate) fn assert_cut_off_then_finished(
    [streamed, whole, finished]: [Result<ChatResponse, ModelError>; 3],
) {
    let streamed = streamed.unwrap();
    assert_eq!(streamed.content, "The plan has three");
    assert_eq!(streamed.stop, StopReason::TokenLimit);
    assert_eq!(whole.unwrap().stop, StopReason::TokenLimit);
    assert_eq!(finished.unwrap().stop, StopReason::Finished);
}
