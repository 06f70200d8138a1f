//! The policy sections: `[[territory]]`, `[gates]` and `[overrides]` are the gates module's own
//! types (see `loopward_runner::gates`), embedded field by field; `[limits]` is the layers'.

pub use loopward_runner::gates::{
    GatesConfig, OverridesConfig, PolicyConfig, ReviewConfig, ShellWatchConfig, SprawlConfig,
    TerritoryConfig,
};

use serde::{Deserialize, Serialize};

/// `[limits]`: caps that bound every run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Turns per run (default 32).
    #[serde(default)]
    pub turns_per_run: Option<u32>,
}
