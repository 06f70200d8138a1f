//! One HTTP model call: send, read the status, read a JSON body or an event stream, retry.

use super::config::ConfigError;
use super::error::{self, ApiError};
use super::keys::ApiKey;
use super::retry::{Failure, Retrier, RetryPolicy};
use super::sse::{SseEvent, SseParser};
use crate::model::{ChatResponse, ModelError};
use crate::{Clock, SystemClock};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use std::sync::Arc;
use std::time::Duration;

/// The most bytes a reply body or stream may hold.
const MAX_BODY_BYTES: usize = 32 << 20;
/// The most bytes of an error body read (the rest is dropped).
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// How one API turns replies into a [`ChatResponse`].
pub(crate) trait Protocol: Send + Sync + 'static {
    /// The accumulator of one streamed reply.
    type Stream: StreamReply + Send;
    /// Reads a whole (non-streamed) JSON reply.
    fn parse_full(&self, v: serde_json::Value) -> Result<ChatResponse, ModelError>;
    /// Starts reading a streamed reply.
    fn new_stream(&self) -> Self::Stream;
}

/// A streamed reply being put together. Nothing in it leaves before [`StreamReply::finish`]
/// has checked the stream completed.
pub(crate) trait StreamReply {
    /// Takes one event; an error event or unreadable data fails the reply.
    fn event(&mut self, ev: SseEvent) -> Result<(), ModelError>;
    /// The reply, only if the stream said it was complete.
    fn finish(self) -> Result<ChatResponse, ModelError>;
}

/// The client, endpoint, headers, timeouts and retry loop one backend uses.
#[derive(Clone)]
pub(crate) struct Transport {
    client: reqwest::Client,
    pub(crate) url: String,
    headers: HeaderMap,
    connect_timeout: Duration,
    read_timeout: Duration,
    pub(crate) retrier: Retrier,
    pub(crate) clock: Arc<dyn Clock>,
}

pub(crate) struct TransportConfig<'a> {
    pub(crate) backend: &'static str,
    pub(crate) url: String,
    pub(crate) key_header: Option<(&'static str, String)>,
    pub(crate) extra_headers: &'a [(&'static str, &'a str)],
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

impl Transport {
    pub(crate) fn new(c: TransportConfig<'_>) -> Result<Self, ConfigError> {
        let client_err = |why: String| ConfigError::Client {
            backend: c.backend,
            why,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(c.connect_timeout)
            .read_timeout(c.read_timeout)
            .build()
            .map_err(|e| client_err(e.to_string()))?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in c.extra_headers {
            let value = HeaderValue::from_str(value)
                .map_err(|_| client_err(format!("header {name} has an invalid value")))?;
            headers.insert(HeaderName::from_static(name), value);
        }
        if let Some((name, value)) = c.key_header {
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| client_err("the API key is not a valid header value".into()))?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), value);
        }
        Ok(Self {
            client,
            url: c.url,
            headers,
            connect_timeout: c.connect_timeout,
            read_timeout: c.read_timeout,
            retrier: Retrier::new(c.retry),
            clock: Arc::new(SystemClock),
        })
    }

    /// Sends `body` and reads the reply, retrying within the policy.
    pub(crate) async fn call<P: Protocol>(
        &self,
        proto: &P,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<ChatResponse, ModelError> {
        if let Ok(url) = reqwest::Url::parse(&self.url) {
            let span = tracing::Span::current();
            if let Some(host) = url.host_str() {
                span.record(crate::telemetry::attr::SERVER_ADDRESS, host);
            }
            if let Some(port) = url.port_or_known_default() {
                span.record(crate::telemetry::attr::SERVER_PORT, port);
            }
        }
        self.retrier
            .run(|_| self.attempt(proto, body.clone(), stream))
            .await
    }

    fn net(&self, e: &reqwest::Error) -> ModelError {
        error::from_reqwest(e, self.connect_timeout, self.read_timeout)
    }

    async fn attempt<P: Protocol>(
        &self,
        proto: &P,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<ChatResponse, Failure> {
        let mut resp = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|e| self.net(&e))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let headers = resp.headers().clone();
            // An error body cut short still tells more than none.
            let body = self
                .read_body(&mut resp, MAX_ERROR_BODY_BYTES, true)
                .await
                .unwrap_or_default();
            let now = error::system_time(self.clock.now_millis());
            return Err(error::from_status(status, &headers, &body, now));
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if stream && is_sse {
            return Ok(self.read_stream(proto, resp).await?);
        }
        let body = self.read_body(&mut resp, MAX_BODY_BYTES, false).await?;
        Ok(parse_body(proto, &body)?)
    }

    async fn read_body(
        &self,
        resp: &mut reqwest::Response,
        limit: usize,
        truncate: bool,
    ) -> Result<Vec<u8>, ModelError> {
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.net(&e))? {
            if body.len() + chunk.len() > limit {
                if truncate {
                    body.extend_from_slice(&chunk[..limit - body.len()]);
                    break;
                }
                return Err(ModelError::InvalidResponse(format!(
                    "the reply is larger than {limit} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    async fn read_stream<P: Protocol>(
        &self,
        proto: &P,
        mut resp: reqwest::Response,
    ) -> Result<ChatResponse, ModelError> {
        let mut parser = SseParser::default();
        let mut reply = proto.new_stream();
        let mut bytes = 0usize;
        let mut events = 0usize;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    return Err(match self.net(&e) {
                        ModelError::Transport(why) => ModelError::Transport(format!(
                            "the stream broke before the reply was complete: {why}"
                        )),
                        other => other,
                    })
                }
            };
            bytes += chunk.len();
            if bytes > MAX_BODY_BYTES {
                return Err(ModelError::InvalidResponse(format!(
                    "the stream is larger than {MAX_BODY_BYTES} bytes"
                )));
            }
            for ev in parser.push(&chunk)? {
                events += 1;
                reply.event(ev)?;
                crate::telemetry::record_progress(events as u64);
            }
        }
        if let Some(ev) = parser.finish()? {
            events += 1;
            reply.event(ev)?;
        }
        if events == 0 {
            return Err(ModelError::InvalidResponse(
                "the backend answered 200 with an empty event stream".into(),
            ));
        }
        reply.finish()
    }
}

/// Reads a whole JSON reply, refusing empty bodies, HTML pages and invalid JSON.
fn parse_body<P: Protocol>(proto: &P, body: &[u8]) -> Result<ChatResponse, ModelError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ModelError::InvalidResponse(
            "the backend answered 200 with an empty body".into(),
        ));
    }
    if error::looks_like_html(body) {
        return Err(ModelError::InvalidResponse(format!(
            "expected JSON, got {}",
            error::excerpt(body)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        ModelError::InvalidResponse(format!(
            "the reply is not valid JSON ({e}): {}",
            error::excerpt(body)
        ))
    })?;
    if let Some(api) = ApiError::from_json(&v) {
        return Err(api.into_model_error());
    }
    if let Some(id) = v.get("id").and_then(serde_json::Value::as_str) {
        crate::telemetry::record_response_id(id);
    }
    proto.parse_full(v)
}

/// The `(header, value)` that carries a key, if there is one.
pub(crate) fn key_header(
    key: Option<&ApiKey>,
    name: &'static str,
    prefix: &str,
) -> Option<(&'static str, String)> {
    key.map(|k| (name, format!("{prefix}{}", k.expose())))
}

/// Parses one event's JSON data.
pub(crate) fn event_json(ev: &SseEvent) -> Result<serde_json::Value, ModelError> {
    serde_json::from_str(&ev.data).map_err(|e| {
        ModelError::InvalidResponse(format!(
            "a stream event is not valid JSON ({e}): {}",
            error::excerpt(ev.data.as_bytes())
        ))
    })
}

/// A message for a stream that ended without its closing marker.
pub(crate) fn cut_short(what: &str) -> ModelError {
    ModelError::Transport(format!(
        "the stream ended before the reply was complete ({what}); nothing of it was used"
    ))
}
