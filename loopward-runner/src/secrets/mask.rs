//! Replacing secret values in text and in events.

use aho_corasick::{AhoCorasick, MatchKind};
use loopward_core::{AuditError, AuditEvent};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// The shortest secret value that can be masked: a shorter one would match ordinary text and
/// mask half the ledger, so it is refused when the masker is made.
pub const MIN_SECRET_BYTES: usize = 8;

/// A secret that cannot be masked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretError {
    /// The name is not a variable-like name.
    #[error("secret name {name:?} is not a name: use capital letters, digits and `_` (like `OPENAI_API_KEY`)")]
    BadName {
        /// The name given.
        name: String,
    },
    /// The value is too short to mask without masking ordinary text.
    #[error("secret {name}: its value is {len} bytes; a value shorter than {MIN_SECRET_BYTES} bytes would match ordinary text and cannot be masked. Use a longer credential, or leave it out of [secrets]")]
    TooShort {
        /// The secret's name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// The value holds a line break: it would be masked only where printed whole.
    #[error("secret {name}: its value holds a line break or NUL; only single-line values are masked (a file source is read up to its first line)")]
    Multiline {
        /// The secret's name.
        name: String,
    },
}

/// Replaces every configured secret value with `[secret:NAME]`. Cloning shares the patterns;
/// an empty masker (the default) changes nothing and costs nothing.
#[derive(Clone, Default)]
pub struct Masker {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    /// The replacement of each pattern, by pattern index.
    replacements: Vec<String>,
    finder: AhoCorasick,
}

impl std::fmt::Debug for Masker {
    // Never the values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self
            .inner
            .as_ref()
            .map(|i| i.replacements.clone())
            .unwrap_or_default();
        f.debug_struct("Masker").field("masks", &names).finish()
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Masker {
    /// A masker for these `(name, value)` pairs. Refuses a bad name or a value too short or
    /// multi-line to mask.
    pub fn new<N, V>(secrets: impl IntoIterator<Item = (N, V)>) -> Result<Self, SecretError>
    where
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let mut replacements = Vec::new();
        let mut patterns = Vec::new();
        for (name, value) in secrets {
            let (name, value) = (name.as_ref(), value.as_ref());
            if !valid_name(name) {
                return Err(SecretError::BadName { name: name.into() });
            }
            if value.len() < MIN_SECRET_BYTES {
                return Err(SecretError::TooShort {
                    name: name.into(),
                    len: value.len(),
                });
            }
            if value.contains(['\n', '\r', '\0']) {
                return Err(SecretError::Multiline { name: name.into() });
            }
            replacements.push(format!("[secret:{name}]"));
            patterns.push(value.to_string());
        }
        if patterns.is_empty() {
            return Ok(Self::default());
        }
        // Leftmost-longest: a secret that contains another is masked whole, under its own name.
        let finder = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .map_err(|e| SecretError::BadName {
                name: format!("(the secrets could not be compiled: {e})"),
            })?;
        Ok(Self {
            inner: Some(Arc::new(Inner {
                replacements,
                finder,
            })),
        })
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// The names of the masked secrets, as they appear in masked text (`[secret:NAME]`).
    pub fn masks(&self) -> Vec<String> {
        self.inner
            .as_ref()
            .map(|i| i.replacements.clone())
            .unwrap_or_default()
    }

    /// `text` with every secret value replaced (borrowed when there was none).
    pub fn mask_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(inner) = &self.inner else {
            return Cow::Borrowed(text);
        };
        if !inner.finder.is_match(text) {
            return Cow::Borrowed(text);
        }
        Cow::Owned(inner.finder.replace_all(text, &inner.replacements))
    }

    /// Masks every string (and every object key) in `value`; says whether anything changed.
    pub fn mask_value(&self, value: &mut Value) -> bool {
        if self.inner.is_none() {
            return false;
        }
        match value {
            Value::String(s) => match self.mask_str(s) {
                Cow::Owned(m) => {
                    *s = m;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.mask_value(v) | changed),
            Value::Object(map) => {
                let mut changed = false;
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let Some(mut v) = map.remove(&k) else {
                        continue;
                    };
                    changed |= self.mask_value(&mut v);
                    let key = match self.mask_str(&k) {
                        Cow::Owned(m) => {
                            changed = true;
                            m
                        }
                        Cow::Borrowed(_) => k,
                    };
                    map.insert(key, v);
                }
                changed
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    /// `event` with every secret value in its text replaced; `None` when it held none (then
    /// record the event as it is). An event that cannot be masked is an audit failure: it is
    /// never recorded unmasked.
    pub fn mask_event(&self, event: &AuditEvent) -> Result<Option<AuditEvent>, AuditError> {
        if self.inner.is_none() {
            return Ok(None);
        }
        let mut value = serde_json::to_value(event).map_err(|e| {
            AuditError(format!(
                "cannot mask secrets in a {} event: {e}",
                event.kind()
            ))
        })?;
        if !self.mask_value(&mut value) {
            return Ok(None);
        }
        serde_json::from_value(value).map(Some).map_err(|e| {
            AuditError(format!(
                "a {} event with a secret in it could not be masked ({e}); it was not recorded",
                event.kind()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_is_masked_and_the_longest_secret_wins() {
        let m = Masker::new([("SHORT", "abcdefgh"), ("LONG", "abcdefgh-and-more")]).unwrap();
        assert_eq!(
            m.mask_str("x abcdefgh-and-more y abcdefgh z"),
            "x [secret:LONG] y [secret:SHORT] z"
        );
        assert!(matches!(m.mask_str("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_multiline_and_badly_named_secrets_are_refused() {
        assert!(matches!(
            Masker::new([("T", "short")]),
            Err(SecretError::TooShort { len: 5, .. })
        ));
        assert!(matches!(
            Masker::new([("T", "line one\nline two")]),
            Err(SecretError::Multiline { .. })
        ));
        assert!(matches!(
            Masker::new([("lower", "long enough value")]),
            Err(SecretError::BadName { .. })
        ));
    }

    #[test]
    fn keys_and_nested_strings_of_an_event_are_masked_and_it_reads_back() {
        let m = Masker::new([("TOKEN", "tok\"en-with\\quotes")]).unwrap();
        let event = AuditEvent::ToolRequested {
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: serde_json::json!({"command": "echo tok\"en-with\\quotes", "tok\"en-with\\quotes": [1, "tok\"en-with\\quotes"]}),
        };
        let masked = m.mask_event(&event).unwrap().unwrap();
        let text = serde_json::to_string(&masked).unwrap();
        assert!(!text.contains("en-with"), "{text}");
        assert_eq!(text.matches("[secret:TOKEN]").count(), 3, "{text}");
        let plain = AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says("hello")).into(),
        };
        assert_eq!(m.mask_event(&plain).unwrap(), None);
    }

    #[test]
    fn debug_output_names_secrets_never_their_values() {
        let m = Masker::new([("TOKEN", "the-value-itself")]).unwrap();
        let shown = format!("{m:?}");
        assert!(shown.contains("TOKEN") && !shown.contains("the-value-itself"));
    }
}
