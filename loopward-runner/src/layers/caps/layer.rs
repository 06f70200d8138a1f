//! Caps settings and the layer.

use super::service::CapsPolicy;
use crate::layers::config::{in_range, ConfigError};
use crate::layers::from_fn::{from_fn, FromFnLayer};
use serde::Deserialize;
use std::time::Duration;

/// What happens when a cap is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCap {
    /// Stop the run with [`RunStatus::CapReached`](loopward_core::RunStatus::CapReached).
    #[default]
    Stop,
    /// Grant one final turn with tools disabled (the agent can only answer in text), then stop
    /// with `CapReached`.
    WrapUp,
}

/// The `[limits]` table of `loopward.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapsConfig {
    /// Turns in one run (1..=10000).
    pub turns_per_run: u32,
    /// Turns one agent may take in a run (1..=10000), if limited.
    pub turns_per_agent: Option<u32>,
    /// Handoffs followed in one run (1..=10000), if limited.
    pub handoff_hops: Option<u32>,
    /// Tool calls in one turn (1..=1000); give it to the agent's `max_steps`.
    pub steps_per_turn: u32,
    /// Wall time of a run, measured on the run's clock (`"1s"` to `"7days"`), if limited.
    #[serde(with = "crate::duration::optional")]
    pub wall_time: Option<Duration>,
    /// What happens at a cap.
    pub on_cap: OnCap,
}

impl Default for CapsConfig {
    fn default() -> Self {
        Self {
            turns_per_run: crate::DEFAULT_MAX_TURNS,
            turns_per_agent: None,
            handoff_hops: None,
            steps_per_turn: crate::DEFAULT_MAX_STEPS,
            wall_time: None,
            on_cap: OnCap::Stop,
        }
    }
}

impl CapsConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        in_range("limits.turns_per_run", self.turns_per_run.into(), 10_000)?;
        if let Some(n) = self.turns_per_agent {
            in_range("limits.turns_per_agent", n.into(), 10_000)?;
        }
        if let Some(n) = self.handoff_hops {
            in_range("limits.handoff_hops", n.into(), 10_000)?;
        }
        in_range("limits.steps_per_turn", self.steps_per_turn.into(), 1_000)?;
        if let Some(d) = self.wall_time {
            crate::duration::in_range(
                "limits.wall_time",
                d,
                Duration::from_secs(1),
                Duration::from_secs(7 * 24 * 3600),
            )?;
        }
        Ok(())
    }
}

/// Wraps a turn service with the caps. Clones share the configuration; the counts live in the
/// run's extensions, so they are per run. The layer is its policy (see
/// [`from_fn`](crate::layers::from_fn)).
pub type CapsLayer = FromFnLayer<CapsPolicy>;

impl CapsLayer {
    /// A caps layer; fails naming the field when a cap is zero or absurd.
    pub fn new(config: CapsConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(from_fn(CapsPolicy { config }))
    }

    /// The settings.
    pub fn config(&self) -> &CapsConfig {
        &self.policy().config
    }
}
