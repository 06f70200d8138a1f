//! Review gates: after `from` changes files matching `when` in a turn, its handoff must go to
//! `via`. Armed only by evidence: this turn's successful effects by `from`.
//!
//! ```
//! use loopward_core::{AgentId, Effect, EffectKind};
//! use loopward_runner::gates::{ReviewConfig, ReviewGate};
//! let g = ReviewGate::from_config(&ReviewConfig {
//!     name: None, from: "builder".into(), via: "auditor".into(),
//!     when: vec!["src/**".into()], mode: Default::default(),
//! }).unwrap();
//! let builder = AgentId::new("builder").unwrap();
//! let effects = [Effect::ok("src/lib.rs", EffectKind::Modify)];
//! assert_eq!(g.armed_by(&builder, &effects), vec!["src/lib.rs".to_string()]);
//! assert!(g.armed_by(&builder, &[Effect::ok("README.md", EffectKind::Modify)]).is_empty());
//! ```

use super::config::{glob, ConfigError, ReviewConfig};
use globset::{GlobSet, GlobSetBuilder};
use loopward_core::{AgentId, Effect, EffectKind, EffectStatus, GateMode, Refusal};

/// The appeal every review refusal carries.
pub const APPEAL: &str =
    "if you believe this gate is wrong here, say so in your reply; a person can change the room's gates";

/// A compiled `[[gates.review]]`.
#[derive(Clone, Debug)]
pub struct ReviewGate {
    name: String,
    config: ReviewConfig,
    from: AgentId,
    via: AgentId,
    when: GlobSet,
}

impl ReviewGate {
    /// Compiles one review gate.
    pub fn from_config(config: &ReviewConfig) -> Result<Self, ConfigError> {
        let name = config.gate_name();
        let section = format!("review gate {name}");
        let invalid = |why: String| ConfigError::Invalid {
            section: section.clone(),
            why,
        };
        let from = AgentId::new(config.from.clone()).map_err(|e| invalid(e.to_string()))?;
        let via = AgentId::new(config.via.clone()).map_err(|e| invalid(e.to_string()))?;
        if from == via {
            return Err(invalid("from and via are the same agent".into()));
        }
        let mut b = GlobSetBuilder::new();
        for w in &config.when {
            b.add(glob(w, &section)?);
        }
        let when = b.build().map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            name,
            config: config.clone(),
            from,
            via,
            when,
        })
    }

    /// The gate's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn config(&self) -> &ReviewConfig {
        &self.config
    }

    /// Its mode.
    pub fn mode(&self) -> GateMode {
        self.config.mode
    }

    /// The agent whose work needs review.
    pub fn from(&self) -> &AgentId {
        &self.from
    }

    /// The reviewer.
    pub fn via(&self) -> &AgentId {
        &self.via
    }

    /// The files among `effects` (this turn's, by `agent`) that arm the gate; with an empty
    /// `when`, any handoff by `from` arms it (the result then names every file changed, or a
    /// placeholder when none).
    pub fn armed_by(&self, agent: &AgentId, effects: &[Effect]) -> Vec<String> {
        if *agent != self.from {
            return vec![];
        }
        let mut files: Vec<String> = effects
            .iter()
            .filter(|e| e.status == EffectStatus::Ok)
            .flat_map(|e| {
                let mut v = vec![e.path.clone()];
                if let EffectKind::Rename { from } = &e.kind {
                    v.push(from.clone());
                }
                v
            })
            .filter(|p| self.config.when.is_empty() || self.when.is_match(p))
            .collect();
        files.sort();
        files.dedup();
        if files.is_empty() && self.config.when.is_empty() {
            files.push("(any handoff by this agent)".into());
        }
        files
    }

    /// The refusal for a handoff to `to` while armed by `files`.
    pub fn refusal(&self, to: &str, files: &[String]) -> Refusal {
        Refusal::new(
            self.name.clone(),
            format!(
                "this turn you changed {}, which {} must review before anyone else takes over; you handed off to {to}",
                files.join(", "),
                self.via
            ),
            format!(
                "hand off to {} instead (handoff with to = \"{}\"), saying what changed; {APPEAL}",
                self.via, self.via
            ),
        )
    }
}
