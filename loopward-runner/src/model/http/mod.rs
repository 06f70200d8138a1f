//! HTTP model backends (feature `http`): [`OpenAiModel`] for OpenAI-compatible chat completions
//! (OpenAI, vLLM, the llama.cpp server, Ollama) and [`AnthropicModel`] for the Anthropic
//! Messages API.
//!
//! Each backend is a `tower::Service<ChatRequest, Response = ChatResponse, Error = ModelError>`
//! that is `Clone + Send + Sync`, so it boxes into a
//! [`BoxModelService`](crate::model::BoxModelService). A call:
//! - maps loopward's messages and tool specs to the API, streams the reply (server-sent events)
//!   or reads it whole, and maps text, tool calls, usage (cached prompt tokens included) and the
//!   model's name back;
//! - returns nothing until the reply is complete: a stream cut short, an error event after
//!   HTTP 200, invalid JSON, an HTML error page or an empty body is a typed [`ModelError`](crate::model::ModelError), and no
//!   half-received tool call ever leaves the backend;
//! - retries inside the service ([`RetryPolicy`]: bounded tries, jittered backoff, `retry-after`
//!   honoured, a total wait budget), so transport retries never use up an agent's caps; spent
//!   quotas (`insufficient_quota`, billing errors) fail at once as
//!   [`ModelError::QuotaExhausted`](crate::model::ModelError::QuotaExhausted).
//!
//! Keys come only from a named environment variable or a key file ([`KeySource`]); an
//! [`ApiKey`] never prints and travels in a header marked sensitive. Cost is not computed here:
//! the budget layer prices the reported usage and model name.
//!
//! ```
//! use loopward_runner::model::{http::{AnthropicConfig, AnthropicModel}, BoxModelService};
//! let config: AnthropicConfig = toml::from_str(r#"
//!     model = "claude-sonnet-4-5"
//!     key_env = "ANTHROPIC_API_KEY"
//!     max_tokens = 2048
//!     connect_timeout = "5s"
//!     retry = { max_attempts = 3, max_total_wait = "30s" }
//! "#).unwrap();
//! config.validate().unwrap();
//! // The CLI passes `|name| std::env::var(name).ok()`; the runner never reads the environment.
//! let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant-example".to_string());
//! let model = AnthropicModel::from_config(config.clone(), env).unwrap();
//! assert!(!format!("{model:?}").contains("sk-ant-example"));
//! let _boxed = BoxModelService::new(model);
//! // A missing key is a precise error, not a request without auth.
//! let err = AnthropicModel::from_config(config, |_| None).unwrap_err();
//! assert!(err.to_string().contains("ANTHROPIC_API_KEY is not set"));
//! ```

mod anthropic;
mod config;
mod error;
mod keys;
mod openai;
mod reply;
mod retry;
mod schema;
pub mod sse;
mod transport;

pub use anthropic::{AnthropicConfig, AnthropicModel};
pub use config::ConfigError;
pub use keys::{ApiKey, KeyError, KeySource};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiModel};
pub use retry::{Jitter, RandomJitter, RetryPolicy, Sleeper, TokioSleeper};
pub use schema::ToolChoice;

/// The smaller of the config's and the request's token limits.
fn min_limit(config: Option<u32>, request: Option<u32>) -> Option<u32> {
    match (config, request) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What one backend holds: how its replies read, its config and its transport.
#[derive(Clone)]
struct Backend<P, C> {
    protocol: P,
    config: C,
    transport: transport::Transport,
    /// Whether a key is sent (shown, redacted, by `Debug`).
    keyed: bool,
}

/// The call, service impl, test seams and redacted `Debug` both backends share: `$body` writes
/// the JSON request from the config, the request and whether to stream; `$provider` names the
/// API in telemetry.
macro_rules! impl_http_model {
    ($ty:ident, $name:literal, $provider:literal, $body:path) => {
        impl $ty {
            async fn chat(
                self,
                req: $crate::model::ChatRequest,
            ) -> Result<$crate::model::ChatResponse, $crate::model::ModelError> {
                $crate::telemetry::record_provider(&req, $provider);
                let inner = &self.inner;
                let body = $body(&inner.config, &req, inner.config.stream);
                let bytes = serde_json::to_vec(&body).map_err(|e| {
                    $crate::model::ModelError::InvalidResponse(format!(
                        "could not encode the request: {e}"
                    ))
                })?;
                inner
                    .transport
                    .call(&inner.protocol, bytes, inner.config.stream)
                    .await
            }

            /// This backend's own transport, to change a seam of (clones keep theirs).
            fn transport_mut(&mut self) -> &mut super::transport::Transport {
                &mut std::sync::Arc::make_mut(&mut self.inner).transport
            }

            /// Uses `jitter` for retry backoff (tests pass a fixed one, e.g. `|| 0.5`).
            pub fn with_jitter(mut self, jitter: impl $crate::model::http::Jitter) -> Self {
                self.transport_mut().retrier.jitter = std::sync::Arc::new(jitter);
                self
            }

            /// Waits between retries with `sleeper` (tests record the waits instead).
            pub fn with_sleeper(mut self, sleeper: impl $crate::model::http::Sleeper) -> Self {
                self.transport_mut().retrier.sleeper = std::sync::Arc::new(sleeper);
                self
            }

            /// Reads "now" from `clock` (for `retry-after` given as an HTTP date).
            pub fn with_clock(mut self, clock: impl $crate::Clock) -> Self {
                self.transport_mut().clock = std::sync::Arc::new(clock);
                self
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($name)
                    .field("url", &self.inner.transport.url)
                    .field("model", &self.inner.config.model)
                    .field(
                        "key",
                        &if self.inner.keyed {
                            "<redacted>"
                        } else {
                            "<none>"
                        },
                    )
                    .finish()
            }
        }

        $crate::leaf_service!($ty: $crate::model::ChatRequest
            => Result<$crate::model::ChatResponse, $crate::model::ModelError>,
            |model, req| Box::pin(model.clone().chat(req)));
    };
}
use impl_http_model;
