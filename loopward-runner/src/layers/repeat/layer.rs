//! Repeat settings and the layer.

use super::service::RepeatPolicy;
use crate::layers::config::{in_range, ConfigError};
use crate::layers::from_fn::{from_fn, FromFnLayer};
use serde::Deserialize;

/// How many times one identical call may run by default.
pub const DEFAULT_MAX_IDENTICAL: u32 = 3;

/// The `[repeat]` table of `loopward.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RepeatConfig {
    /// How many times the same call (tool + canonical arguments) may run in a run (1..=1000).
    pub max_identical: u32,
}

impl Default for RepeatConfig {
    fn default() -> Self {
        Self {
            max_identical: DEFAULT_MAX_IDENTICAL,
        }
    }
}

/// Wraps a tool service with repeat detection. Counts live in the run's extensions. The layer
/// is its policy (see [`from_fn`](crate::layers::from_fn)).
pub type RepeatLayer = FromFnLayer<RepeatPolicy>;

impl RepeatLayer {
    /// A repeat layer; fails naming the field when `max_identical` is 0 or absurd.
    pub fn new(config: RepeatConfig) -> Result<Self, ConfigError> {
        in_range("repeat.max_identical", config.max_identical.into(), 1_000)?;
        Ok(from_fn(RepeatPolicy {
            max: config.max_identical,
        }))
    }
}
