//! API keys: read from a named environment variable or a key file, never logged.

use std::fmt;
use std::path::PathBuf;

/// A secret API key. It has no `Display`, its `Debug` is redacted, and it is sent in a header
/// marked sensitive.
///
/// ```
/// use loopward_runner::model::http::ApiKey;
/// let key = ApiKey::new("sk-secret").unwrap();
/// assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
/// assert!(ApiKey::new("  ").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; surrounding whitespace (a key file's trailing newline) is trimmed.
    pub fn new(key: impl Into<String>) -> Result<Self, KeyError> {
        let key = key.into();
        let trimmed = key.trim();
        if trimmed.is_empty() {
            return Err(KeyError::Invalid("the key is empty".into()));
        }
        if trimmed.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(KeyError::Invalid(
                "the key contains whitespace or control characters".into(),
            ));
        }
        Ok(Self(trimmed.to_owned()))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Where a key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// The environment variable with this name.
    Env(String),
    /// A file holding only the key.
    File(PathBuf),
}

impl KeySource {
    /// Reads the key. `env` looks a variable up (the CLI passes `|n| std::env::var(n).ok()`);
    /// the runner itself never reads the process environment.
    ///
    /// ```
    /// use loopward_runner::model::http::KeySource;
    /// let src = KeySource::Env("MY_KEY".into());
    /// assert!(src.resolve(|n| (n == "MY_KEY").then(|| "k-1".to_string())).is_ok());
    /// let err = src.resolve(|_| None).unwrap_err();
    /// assert!(err.to_string().contains("MY_KEY is not set"));
    /// ```
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<ApiKey, KeyError> {
        match self {
            Self::Env(name) => {
                let value = env(name).ok_or_else(|| KeyError::EnvUnset(name.clone()))?;
                ApiKey::new(value).map_err(|e| KeyError::Invalid(format!("${name}: {e}")))
            }
            Self::File(path) => {
                let value = std::fs::read_to_string(path).map_err(|e| KeyError::File {
                    path: path.clone(),
                    why: e.to_string(),
                })?;
                ApiKey::new(value).map_err(|e| KeyError::File {
                    path: path.clone(),
                    why: e.to_string(),
                })
            }
        }
    }
}

/// A key that could not be read. Never contains the key itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The named variable is not set.
    #[error("the environment variable {0} is not set; export it with the API key, or name a file holding the key instead (`api_key_file` under [backend] in loopward.toml; `key_file` in a backend config)")]
    EnvUnset(String),
    /// The key file could not be read or holds no usable key.
    #[error("the key file {} could not be used: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The key's text is not usable.
    #[error("invalid API key: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_file_is_trimmed_and_debug_never_shows_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "sk-abc123\n").unwrap();
        let key = KeySource::File(path).resolve(|_| None).unwrap();
        assert_eq!(key.expose(), "sk-abc123");
        assert!(!format!("{key:?}").contains("abc123"));
    }

    #[test]
    fn missing_key_file_names_the_path() {
        let err = KeySource::File("/nonexistent/loopward-key".into())
            .resolve(|_| None)
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/loopward-key"));
    }
}
