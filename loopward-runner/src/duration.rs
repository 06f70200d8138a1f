//! Durations as `loopward.toml` writes them: one format everywhere, a humantime string with a
//! unit (`"30s"`, `"15m"`, `"1h30m"`, `"500ms"`). A bare number is refused, because a number
//! without a unit is a guess about seconds.
//!
//! ```
//! use loopward_runner::layers::timeout::TimeoutConfig;
//! use std::time::Duration;
//! let t: TimeoutConfig = toml::from_str("model = \"90s\"\nturn = \"15m\"").unwrap();
//! assert_eq!(t.model, Some(Duration::from_secs(90)));
//! assert_eq!(t.turn, Some(Duration::from_secs(15 * 60)));
//! let err = toml::from_str::<TimeoutConfig>("model = 90").unwrap_err().to_string();
//! assert!(err.contains("a duration with a unit"), "{err}");
//! ```

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;
use std::time::Duration;

/// What a duration key expects, as serde's "expected …" says it.
const EXPECTED: &str = "a duration with a unit in quotes (e.g. \"30s\", \"15m\", \"1h\")";

/// A duration as written in `loopward.toml` (`"1h30m"`).
pub(crate) fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Checks that `d` lies in `min..=max`, naming `field` if not.
pub(crate) fn in_range(
    field: &str,
    d: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), crate::layers::ConfigError> {
    if d < min || d > max {
        return Err(crate::layers::ConfigError::new(
            field,
            format!(
                "{} is out of range: write a duration from \"{}\" to \"{}\" (remove the setting to turn the limit off)",
                format(d),
                format(min),
                format(max)
            ),
        ));
    }
    Ok(())
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        humantime::parse_duration(text.trim()).map_err(|e| {
            E::custom(format!(
                "invalid duration {text:?}: {e}; expected {EXPECTED}"
            ))
        })
    }
}

/// `#[serde(with = "crate::duration::required")]` for a `Duration` field.
pub(crate) mod required {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }
}

/// `#[serde(default, with = "crate::duration::optional")]` for an `Option<Duration>` field.
pub(crate) mod optional {
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        d.deserialize_any(DurationVisitor).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct One {
        #[serde(with = "required")]
        d: Duration,
    }

    fn parse(text: &str) -> Result<Duration, String> {
        toml::from_str::<One>(text)
            .map(|o| o.d)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn humantime_strings_parse() {
        assert_eq!(parse("d = \"30s\""), Ok(Duration::from_secs(30)));
        assert_eq!(parse("d = \"1h30m\""), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("d = \"250ms\""), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn bare_numbers_and_unitless_strings_are_refused_with_the_format() {
        for bad in [
            "d = 30",
            "d = 1.5",
            "d = \"30\"",
            "d = \"soon\"",
            "d = true",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("a duration with a unit"), "{bad}: {err}");
        }
    }

    #[test]
    fn out_of_range_names_the_field_and_the_bounds() {
        let err = in_range(
            "timeout.tool",
            Duration::from_millis(10),
            Duration::from_secs(1),
            Duration::from_secs(86_400),
        )
        .unwrap_err();
        assert_eq!(err.field, "timeout.tool");
        assert!(err.why.contains("\"1s\" to \"1day\""), "{}", err.why);
    }
}
