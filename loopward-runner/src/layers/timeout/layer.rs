//! Timeout settings and layers.

use super::service::TimeoutPolicy;
use crate::layers::config::ConfigError;
use crate::layers::from_fn::{from_fn, FromFnLayer};
use serde::Deserialize;
use std::time::Duration;

/// The `[timeout]` table of `loopward.toml` (durations such as `"30s"`; unset: no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutConfig {
    /// One model call (`"1s"` to `"24h"`).
    #[serde(with = "crate::duration::optional")]
    pub model: Option<Duration>,
    /// One tool call (`"1s"` to `"24h"`).
    #[serde(with = "crate::duration::optional")]
    pub tool: Option<Duration>,
    /// One turn (`"1s"` to `"24h"`).
    #[serde(with = "crate::duration::optional")]
    pub turn: Option<Duration>,
}

const ONE_SECOND: Duration = Duration::from_secs(1);
const ONE_DAY: Duration = Duration::from_secs(86_400);

/// Validated timeouts; hands out the three layers.
#[derive(Clone, Debug)]
pub struct Timeouts {
    config: TimeoutConfig,
}

impl Timeouts {
    /// Validates the settings; the error names the bad field.
    pub fn new(config: TimeoutConfig) -> Result<Self, ConfigError> {
        for (field, v) in [
            ("timeout.model", config.model),
            ("timeout.tool", config.tool),
            ("timeout.turn", config.turn),
        ] {
            if let Some(v) = v {
                crate::duration::in_range(field, v, ONE_SECOND, ONE_DAY)?;
            }
        }
        Ok(Self { config })
    }

    /// The model-call layer (no limit when `model` is unset).
    pub fn model_layer(&self) -> ModelTimeoutLayer {
        from_fn(TimeoutPolicy {
            limit: self.config.model,
        })
    }

    /// The tool-call layer.
    pub fn tool_layer(&self) -> ToolTimeoutLayer {
        from_fn(TimeoutPolicy {
            limit: self.config.tool,
        })
    }

    /// The turn layer.
    pub fn turn_layer(&self) -> TurnTimeoutLayer {
        from_fn(TimeoutPolicy {
            limit: self.config.turn,
        })
    }
}

/// Limits each model call. Each timeout layer is its policy, a time limit (see
/// [`from_fn`](crate::layers::from_fn)).
pub type ModelTimeoutLayer = FromFnLayer<TimeoutPolicy>;

/// Limits each tool call.
pub type ToolTimeoutLayer = FromFnLayer<TimeoutPolicy>;

/// Limits each turn.
pub type TurnTimeoutLayer = FromFnLayer<TimeoutPolicy>;
