//! The policy sections: `[[territory]]`, `[gates]` and `[limits]`.
//!
//! These mirror the gate and layer crates' own config types; the checks that tie them to the
//! team (owners exist, globs compile, no overlapping territories) are in `validate`.

use loopward_core::{AgentId, GateMode};
use serde::{Deserialize, Serialize};

/// `[[territory]]`: paths only their owners may write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerritoryConfig {
    /// Globs, workspace-relative (`plan.md`, `plans/**`); `*` never crosses `/`.
    pub paths: Vec<String>,
    /// The one owner (or use `owners`).
    #[serde(default)]
    pub owner: Option<AgentId>,
    /// Several owners.
    #[serde(default)]
    pub owners: Vec<AgentId>,
    /// `enforce` (default) or `advisory` (warns, allows, and logs the would-be denial).
    #[serde(default)]
    pub mode: GateMode,
}

impl TerritoryConfig {
    /// Every owner, `owner` and `owners` together.
    pub fn all_owners(&self) -> Vec<AgentId> {
        let mut v: Vec<AgentId> = self.owner.iter().cloned().collect();
        v.extend(self.owners.iter().cloned());
        v.sort();
        v.dedup();
        v
    }
}

/// `[gates]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesConfig {
    /// `[gates.sprawl]`.
    #[serde(default)]
    pub sprawl: SprawlConfig,
    /// `[[gates.review]]`.
    #[serde(default)]
    pub review: Vec<ReviewGateConfig>,
}

/// `[gates.sprawl]`: refuse a third unit of work in one turn until a plan is on disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SprawlConfig {
    /// On by default.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The unit of work that trips the gate (default 3).
    #[serde(default = "three")]
    pub threshold: u32,
    /// The plan file (default `plan.md`).
    #[serde(default = "plan_md")]
    pub plan_path: String,
    /// What the plan's first line must carry (default `# Plan`).
    #[serde(default = "plan_marker")]
    pub marker: String,
    /// `enforce` or `advisory`.
    #[serde(default)]
    pub mode: GateMode,
}

fn yes() -> bool {
    true
}
fn three() -> u32 {
    3
}
fn plan_md() -> String {
    "plan.md".into()
}
fn plan_marker() -> String {
    "# Plan".into()
}

impl Default for SprawlConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 3,
            plan_path: plan_md(),
            marker: plan_marker(),
            mode: GateMode::Enforce,
        }
    }
}

/// `[[gates.review]]`: after `from` touches `when`, its handoff must go to `via`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewGateConfig {
    /// The agent whose handoffs are gated.
    pub from: AgentId,
    /// The agent they must go to while armed.
    pub via: AgentId,
    /// Globs that arm it (empty: every handoff).
    #[serde(default)]
    pub when: Vec<String>,
    /// `enforce` or `advisory`.
    #[serde(default)]
    pub mode: GateMode,
}

/// `[limits]`: caps that bound every run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Turns per run (default 32).
    #[serde(default)]
    pub turns_per_run: Option<u32>,
}
