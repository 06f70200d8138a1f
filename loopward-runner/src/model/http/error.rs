//! Turning HTTP statuses, API error bodies, stream error events and transport failures into
//! [`ModelError`]s.

use super::retry::Failure;
use crate::model::ModelError;
use reqwest::header::HeaderMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest excerpt of a body an error carries.
const EXCERPT_CHARS: usize = 300;

/// Error codes and types that mean "out of money or quota": retrying cannot help.
const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",
    "billing_hard_limit_reached",
    "billing_not_active",
    "billing_error",
    "quota_exceeded",
];

/// Message phrases that mean the same when no code says so.
const QUOTA_PHRASES: &[&str] = &[
    "exceeded your current quota",
    "credit balance is too low",
    "spend limit",
    "spending limit",
    "usage limits",
];

/// An error an API reported, from an error body or a stream's error event.
#[derive(Debug, Default)]
pub(crate) struct ApiError {
    pub(crate) kind: String,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl ApiError {
    /// Reads `{"error": {...}}` (OpenAI, Anthropic, llama.cpp) or `{"error": "text"}` (Ollama).
    pub(crate) fn from_json(v: &serde_json::Value) -> Option<Self> {
        let e = v.get("error")?;
        if let Some(text) = e.as_str() {
            return Some(Self {
                message: text.to_owned(),
                ..Self::default()
            });
        }
        let field = |k: &str| match e.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        Some(Self {
            kind: field("type"),
            code: field("code"),
            message: field("message"),
        })
    }

    fn is_quota(&self) -> bool {
        let lower = self.message.to_lowercase();
        QUOTA_CODES.contains(&self.kind.as_str())
            || QUOTA_CODES.contains(&self.code.as_str())
            || QUOTA_PHRASES.iter().any(|p| lower.contains(p))
    }

    fn summary(&self) -> String {
        let label = [self.kind.as_str(), self.code.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        let text = if label.is_empty() {
            self.message.clone()
        } else {
            format!("{label}: {}", self.message)
        };
        truncate(&text)
    }

    /// The error an API reported inside a successful (200) response or stream.
    pub(crate) fn into_model_error(self) -> ModelError {
        if self.is_quota() {
            return ModelError::QuotaExhausted(self.summary());
        }
        let status = match (self.kind.as_str(), self.code.as_str()) {
            ("overloaded_error", _) => 529,
            ("rate_limit_error" | "rate_limit_exceeded", _)
            | (_, "rate_limit_exceeded" | "429") => {
                return ModelError::RateLimited { retry_after: None }
            }
            ("api_error" | "server_error" | "internal_server_error", _) => 500,
            (_, code) => match code.parse::<u16>() {
                Ok(n) if (500..600).contains(&n) => n,
                Ok(n) if (400..500).contains(&n) => {
                    return ModelError::Rejected {
                        status: n,
                        body: self.summary(),
                    }
                }
                _ => {
                    return ModelError::InvalidResponse(format!(
                        "the reply reported an error: {}",
                        self.summary()
                    ))
                }
            },
        };
        ModelError::Server {
            status,
            body: self.summary(),
        }
    }
}

/// The error for a non-2xx response.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> Failure {
    let api = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| ApiError::from_json(&v));
    let text = match &api {
        Some(a) => a.summary(),
        None => excerpt(body),
    };
    let retry_after = retry_after(headers, now);
    let error = if status == 402 || api.as_ref().is_some_and(ApiError::is_quota) {
        ModelError::QuotaExhausted(text)
    } else if status == 429 {
        ModelError::RateLimited { retry_after }
    } else if status == 408 || status >= 500 {
        ModelError::Server { status, body: text }
    } else if status == 401 || status == 403 {
        ModelError::Rejected {
            status,
            body: format!("{text} (check the API key named in the config)"),
        }
    } else {
        ModelError::Rejected { status, body: text }
    };
    Failure { error, retry_after }
}

/// How long the server asked us to wait: `retry-after-ms`, or `retry-after` as seconds or an
/// HTTP date (measured against `now`).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The error for a failed send or body read.
pub(crate) fn from_reqwest(e: &reqwest::Error, connect: Duration, read: Duration) -> ModelError {
    if e.is_timeout() {
        return ModelError::Timeout(if e.is_connect() { connect } else { read });
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    // hyper reports a read timeout inside a body as an io error of kind TimedOut.
    if text.contains("timed out") || text.contains("TimedOut") {
        return ModelError::Timeout(read);
    }
    ModelError::Transport(text)
}

/// Whether a body is an HTML page (a proxy's or load balancer's error page).
pub(crate) fn looks_like_html(body: &[u8]) -> bool {
    let start = String::from_utf8_lossy(&body[..body.len().min(256)])
        .trim_start()
        .to_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

/// A short, single-line excerpt of a body; an HTML page is named by its title.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if looks_like_html(body) {
        let lower = text.to_lowercase();
        let title = lower.find("<title>").and_then(|s| {
            lower[s + 7..]
                .find("</title>")
                .map(|e| text[s + 7..s + 7 + e].trim().to_owned())
        });
        return truncate(&format!(
            "an HTML page: {}",
            title.unwrap_or_else(|| "(no title)".into())
        ));
    }
    if text.trim().is_empty() {
        return "(empty body)".into();
    }
    truncate(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn truncate(text: &str) -> String {
    if text.chars().count() <= EXCERPT_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(EXCERPT_CHARS).collect();
    format!("{cut}…")
}

/// A point in time from the runner's clock (milliseconds since the epoch).
pub(crate) fn system_time(millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_http_dates() {
        let now = system_time(1_700_000_000_000);
        assert_eq!(
            retry_after(&headers("retry-after", "7"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers("retry-after-ms", "250"), now),
            Some(Duration::from_millis(250))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers("retry-after", &later), now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers("retry-after", &past), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers("retry-after", "soon"), now), None);
    }

    #[test]
    fn openai_insufficient_quota_429_is_quota_exhausted_not_rate_limited() {
        let body = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let f = from_status(429, &HeaderMap::new(), body, system_time(0));
        assert!(
            matches!(f.error, ModelError::QuotaExhausted(m) if m.contains("insufficient_quota"))
        );
    }

    #[test]
    fn html_error_pages_are_named_by_their_title() {
        let body = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
        let f = from_status(502, &HeaderMap::new(), body, system_time(0));
        assert_eq!(
            f.error,
            ModelError::Server {
                status: 502,
                body: "an HTML page: 502 Bad Gateway".into()
            }
        );
    }

    #[test]
    fn anthropic_overloaded_event_is_a_retryable_server_error() {
        let v = serde_json::json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        let e = ApiError::from_json(&v).unwrap().into_model_error();
        assert!(matches!(e, ModelError::Server { status: 529, .. }));
        assert!(e.is_retryable());
    }
}
