//! The error every layer's constructor returns when its settings are invalid.

/// A layer's settings are invalid. Names the field (as written in `loopward.toml`) and what is
/// wrong with it, so the message can be acted on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting `{field}`: {why}")]
pub struct ConfigError {
    /// The field, as a `loopward.toml` path (`limits.turns_per_run`, `stopgate[2].point`, …).
    pub field: String,
    /// What is wrong and what is accepted.
    pub why: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            why: why.into(),
        }
    }
}

/// Checks that `value` lies in `1..=max`, naming `field` if not.
pub(crate) fn in_range(field: &str, value: u64, max: u64) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(ConfigError::new(field, "must be at least 1 (0 would stop everything; remove the setting to turn the limit off)"));
    }
    if value > max {
        return Err(ConfigError::new(
            field,
            format!("{value} is absurdly large; the most accepted is {max}"),
        ));
    }
    Ok(())
}
