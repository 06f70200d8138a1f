//! The policy sections: `[[territory]]`, `[gates]`, `[overrides]` and `[hooks]` are the gates module's own
//! types (see `loopward_runner::gates`), and `[limits]`, `[repeat]`, `[[stopgate]]`, `[rate]`,
//! `[budget]`, `[timeout]` and `[class_jump]` the layers' (`loopward_runner::layers`), embedded
//! field by field so the whole file refuses unknown keys.

pub use loopward_runner::gates::{
    GatesConfig, HooksConfig, OverridesConfig, PolicyConfig, ReviewConfig, ShellWatchConfig,
    SprawlConfig, TerritoryConfig,
};

pub use loopward_runner::layers::budget::BudgetConfig;
pub use loopward_runner::layers::caps::CapsConfig;
pub use loopward_runner::layers::classjump::ClassJumpConfig;
pub use loopward_runner::layers::ratelimit::RateConfig;
pub use loopward_runner::layers::repeat::RepeatConfig;
pub use loopward_runner::layers::stack::LayersConfig;
pub use loopward_runner::layers::stopgate::StopGateConfig;
pub use loopward_runner::layers::timeout::TimeoutConfig;
