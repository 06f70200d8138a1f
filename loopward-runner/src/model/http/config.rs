//! What the two HTTP backends' configs share: validation errors, durations, key sources.

use super::keys::{ApiKey, KeyError, KeySource};
use super::retry::RetryPolicy;
use super::transport::{Transport, TransportConfig};
use std::path::PathBuf;
use std::time::Duration;

/// A backend config that cannot be used, or a backend that could not be built from it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A field has a value that cannot work.
    #[error("{backend} config: {field} {why}")]
    Invalid {
        /// `openai` or `anthropic`.
        backend: &'static str,
        /// The field.
        field: &'static str,
        /// What is wrong and what to do.
        why: String,
    },
    /// The API key could not be read.
    // Quoted, not returned as `source()`: anyhow's `{:#}` would print it twice.
    #[error("{backend} config: {why}")]
    Key {
        /// `openai` or `anthropic`.
        backend: &'static str,
        /// Why.
        why: KeyError,
    },
    /// The HTTP client could not be built (TLS setup).
    #[error("{backend}: could not build the HTTP client: {why}")]
    Client {
        /// `openai` or `anthropic`.
        backend: &'static str,
        /// Why.
        why: String,
    },
}

// The defaults both backends' configs share.
pub(crate) fn yes() -> bool {
    true
}
pub(crate) fn default_connect_timeout() -> Duration {
    Duration::from_secs(10)
}
pub(crate) fn default_read_timeout() -> Duration {
    Duration::from_secs(120)
}

/// The fields both backends validate the same way.
pub(crate) struct Common<'a> {
    pub(crate) backend: &'static str,
    pub(crate) base_url: &'a str,
    pub(crate) model: &'a str,
    pub(crate) key_env: Option<&'a str>,
    pub(crate) key_file: Option<&'a PathBuf>,
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) retry: &'a RetryPolicy,
}

impl Common<'_> {
    fn invalid(&self, field: &'static str, why: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            backend: self.backend,
            field,
            why: why.into(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let url = reqwest::Url::parse(self.base_url).map_err(|e| {
            self.invalid(
                "base_url",
                format!(
                    "{:?} is not a URL ({e}); write it like \"https://host/v1\"",
                    self.base_url
                ),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(self.invalid(
                "base_url",
                format!("{:?} must start with http:// or https://", self.base_url),
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(self.invalid("base_url", "must not carry a query or fragment"));
        }
        if self.model.trim().is_empty() {
            return Err(self.invalid("model", "is empty; name the model the server serves"));
        }
        if let Some(name) = self.key_env {
            let ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                return Err(self.invalid(
                    "key_env",
                    format!("{name:?} is not an environment variable name (it names the variable holding the key, e.g. \"OPENAI_API_KEY\", not the key)"),
                ));
            }
        }
        if self.key_env.is_some() && self.key_file.is_some() {
            return Err(self.invalid("key_env", "and key_file are both set; keep one"));
        }
        for (field, d) in [
            ("connect_timeout", self.connect_timeout),
            ("read_timeout", self.read_timeout),
        ] {
            if d.is_zero() {
                return Err(self.invalid(field, "is zero; give a duration such as \"30s\""));
            }
        }
        if self.retry.max_attempts == 0 {
            return Err(self.invalid(
                "retry.max_attempts",
                "is 0; it counts the first try, so use at least 1",
            ));
        }
        if self.retry.initial_backoff > self.retry.max_backoff {
            return Err(self.invalid("retry.initial_backoff", "is longer than retry.max_backoff"));
        }
        Ok(())
    }

    /// The key `key_env` or `key_file` names, read through `env`; `None` where neither is set.
    pub(crate) fn key(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ApiKey>, ConfigError> {
        let source = match (self.key_env, self.key_file) {
            (Some(name), _) => KeySource::Env(name.to_owned()),
            (None, Some(path)) => KeySource::File(path.clone()),
            (None, None) => return Ok(None),
        };
        let key = source.resolve(env).map_err(|why| ConfigError::Key {
            backend: self.backend,
            why,
        })?;
        Ok(Some(key))
    }

    /// The transport to `path` under `base_url`, with the config's timeouts and retries.
    pub(crate) fn transport(
        &self,
        path: &str,
        key_header: Option<(&'static str, String)>,
        extra_headers: &[(&'static str, &str)],
    ) -> Result<Transport, ConfigError> {
        Transport::new(TransportConfig {
            backend: self.backend,
            url: endpoint(self.base_url, path),
            key_header,
            extra_headers,
            connect_timeout: self.connect_timeout,
            read_timeout: self.read_timeout,
            retry: self.retry.clone(),
        })
    }
}

/// The URL of `path` under `base_url` (which may or may not end in `/`).
fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}/{path}", base_url.trim_end_matches('/'))
}
