//! Timeout settings and layers.

use super::service::{ModelTimeout, ToolTimeout, TurnTimeout};
use crate::layers::config::{in_range, ConfigError};
use serde::Deserialize;
use std::time::Duration;

/// The `[timeout]` table of `loopward.toml` (seconds; unset: no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutConfig {
    /// One model call (1..=86400).
    pub model_secs: Option<u64>,
    /// One tool call (1..=86400).
    pub tool_secs: Option<u64>,
    /// One turn (1..=86400).
    pub turn_secs: Option<u64>,
}

/// Validated timeouts; hands out the three layers.
#[derive(Clone, Debug)]
pub struct Timeouts {
    config: TimeoutConfig,
}

impl Timeouts {
    /// Validates the settings; the error names the bad field.
    pub fn new(config: TimeoutConfig) -> Result<Self, ConfigError> {
        for (field, v) in [
            ("timeout.model_secs", config.model_secs),
            ("timeout.tool_secs", config.tool_secs),
            ("timeout.turn_secs", config.turn_secs),
        ] {
            if let Some(v) = v {
                in_range(field, v, 86_400)?;
            }
        }
        Ok(Self { config })
    }

    /// The model-call layer (no limit when `model_secs` is unset).
    pub fn model_layer(&self) -> ModelTimeoutLayer {
        ModelTimeoutLayer(self.config.model_secs.map(Duration::from_secs))
    }

    /// The tool-call layer.
    pub fn tool_layer(&self) -> ToolTimeoutLayer {
        ToolTimeoutLayer(self.config.tool_secs)
    }

    /// The turn layer.
    pub fn turn_layer(&self) -> TurnTimeoutLayer {
        TurnTimeoutLayer(self.config.turn_secs)
    }
}

/// Limits each model call.
#[derive(Clone, Copy, Debug)]
pub struct ModelTimeoutLayer(Option<Duration>);

/// Limits each tool call (whole seconds).
#[derive(Clone, Copy, Debug)]
pub struct ToolTimeoutLayer(Option<u64>);

/// Limits each turn (whole seconds).
#[derive(Clone, Copy, Debug)]
pub struct TurnTimeoutLayer(Option<u64>);

impl<S> tower::Layer<S> for ModelTimeoutLayer {
    type Service = ModelTimeout<S>;
    fn layer(&self, inner: S) -> ModelTimeout<S> {
        ModelTimeout::new(inner, self.0)
    }
}

impl<S> tower::Layer<S> for ToolTimeoutLayer {
    type Service = ToolTimeout<S>;
    fn layer(&self, inner: S) -> ToolTimeout<S> {
        ToolTimeout::new(inner, self.0)
    }
}

impl<S> tower::Layer<S> for TurnTimeoutLayer {
    type Service = TurnTimeout<S>;
    fn layer(&self, inner: S) -> TurnTimeout<S> {
        TurnTimeout::new(inner, self.0)
    }
}
