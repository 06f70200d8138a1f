//! Review gates: after `from` changes files matching `when` in a turn, its handoff must go to
//! `via`. Armed only by evidence: this turn's successful effects by `from`.
//!
//! Several gates on one `from` are judged together ([`judge_handoff`]): when more than one is armed, a
//! handoff to the `via` of any armed gate satisfies them all (the reviewers are alternatives,
//! as in pipeline-moe), unless a gate says `exclusive = true` (only its own `via` will do).
//! Two exclusive enforcing gates on one `from` with different `via`s would refuse every handoff
//! once both are armed; [`check_deadlocks`] refuses such a config when it loads.
//!
//! ```
//! use loopward_core::{AgentId, Effect, EffectKind};
//! use loopward_runner::gates::{ReviewConfig, ReviewGate};
//! let g = ReviewGate::from_config(&ReviewConfig {
//!     name: None, from: "builder".into(), via: "auditor".into(),
//!     when: vec!["src/**".into()], mode: Default::default(), exclusive: false,
//!     source: Default::default(),
//! }).unwrap();
//! let builder = AgentId::new("builder").unwrap();
//! let effects = [Effect::ok("src/lib.rs", EffectKind::Modify)];
//! assert_eq!(g.armed_by(&builder, &effects), vec!["src/lib.rs".to_string()]);
//! assert!(g.armed_by(&builder, &[Effect::ok("README.md", EffectKind::Modify)]).is_empty());
//! ```

use super::config::{glob, ConfigError, ReviewConfig};
use globset::{GlobSet, GlobSetBuilder};
use loopward_core::{
    AgentId, Decision, Effect, EffectKind, EffectStatus, GateId, GateKind, GateMode, Refusal,
};
use std::sync::Arc;

/// The appeal every review refusal carries.
pub const APPEAL: &str =
    "if you believe this gate is wrong here, say so in your reply; a person can change the room's gates";

/// A compiled `[[gates.review]]`.
#[derive(Clone, Debug)]
pub struct ReviewGate {
    /// Shared with every decision the gate takes.
    name: Arc<str>,
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
            name: name.into(),
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

    /// The gate's identity: kind [`GateKind::Review`] and its name (shared, not copied).
    pub fn id(&self) -> GateId {
        GateId::new(GateKind::Review, Arc::clone(&self.name))
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
            files.push(EVERY_HANDOFF.into());
        }
        files
    }

    /// Whether only a handoff to this gate's own `via` satisfies it.
    pub fn exclusive(&self) -> bool {
        self.config.exclusive
    }

    /// The refusal for a handoff to `to` while armed by `files`; `also` names the other
    /// reviewers whose review would satisfy the gate too.
    pub fn refusal(&self, to: &str, files: &[String], also: &[&AgentId]) -> Refusal {
        let what = if files == [EVERY_HANDOFF] {
            format!(
                "every handoff by {} goes to {} for review",
                self.from, self.via
            )
        } else {
            format!(
                "this turn you changed {}, which {} must review before anyone else takes over",
                files.join(", "),
                self.via
            )
        };
        let others: Vec<&str> = also
            .iter()
            .filter(|a| ***a != self.via)
            .map(|a| a.as_str())
            .collect();
        let instead = if others.is_empty() {
            format!(
                "hand off to {} instead (handoff with to = \"{}\")",
                self.via, self.via
            )
        } else {
            format!(
                "hand off to {} or {} instead (handoff with to = \"{}\")",
                self.via,
                others.join(" or "),
                self.via
            )
        };
        Refusal::new(
            &self.id(),
            format!("{what}; you handed off to {to}"),
            format!("{instead}, saying what changed; {APPEAL}"),
        )
    }
}

/// What `armed_by` names when a gate without `when` is armed by the handoff itself.
const EVERY_HANDOFF: &str = "(every handoff)";

/// One review gate's decision on a handoff.
#[derive(Clone, Debug)]
pub struct ReviewVerdict<'a> {
    /// The gate.
    pub gate: &'a ReviewGate,
    /// Its decision.
    pub decision: Decision,
}

/// Judges a handoff by `agent` to `to` (`None`: the target could not be read) against every
/// review gate, given this turn's `effects`. Returns one verdict per gate whose `from` is
/// `agent`, in name order.
///
/// An armed gate allows a handoff to its own `via`; unless it is exclusive, it also allows a
/// handoff to the `via` of any other armed enforcing gate (the reviewers are alternatives). An
/// unarmed gate allows.
///
/// ```
/// use loopward_core::{AgentId, Effect, EffectKind};
/// use loopward_runner::gates::{judge_handoff, ReviewConfig, ReviewGate};
/// let gate = |via: &str| ReviewGate::from_config(&ReviewConfig {
///     name: None, from: "builder".into(), via: via.into(),
///     when: vec!["src/**".into()], mode: Default::default(), exclusive: false,
///     source: Default::default(),
/// }).unwrap();
/// let gates = [gate("auditor"), gate("tester")];
/// let builder = AgentId::new("builder").unwrap();
/// let effects = [Effect::ok("src/lib.rs", EffectKind::Modify)];
/// let allows = |to| judge_handoff(&gates, &builder, &effects, Some(to))
///     .iter().all(|v| v.decision.permits());
/// assert!(allows("auditor") && allows("tester"));
/// assert!(!allows("scribe"));
/// ```
pub fn judge_handoff<'a>(
    gates: &'a [ReviewGate],
    agent: &AgentId,
    effects: &[Effect],
    to: Option<&str>,
) -> Vec<ReviewVerdict<'a>> {
    let armed: Vec<(&ReviewGate, Vec<String>)> = gates
        .iter()
        .filter(|g| g.from() == agent)
        .map(|g| (g, g.armed_by(agent, effects)))
        .collect();
    let reviewers: Vec<&AgentId> = armed
        .iter()
        .filter(|(g, files)| !files.is_empty() && g.mode() == GateMode::Enforce)
        .map(|(g, _)| g.via())
        .collect();
    let mut verdicts: Vec<ReviewVerdict<'a>> = armed
        .iter()
        .map(|(g, files)| {
            let also: &[&AgentId] = if g.exclusive() { &[] } else { &reviewers };
            let decision = if files.is_empty() {
                Decision::Allow
            } else {
                match to {
                    Some(to) if to == g.via().as_str() => Decision::Allow,
                    Some(to) if also.iter().any(|a| a.as_str() == to) => Decision::Allow,
                    Some(to) => match g.mode() {
                        GateMode::Enforce => Decision::Deny(g.refusal(to, files, also)),
                        GateMode::Advisory => Decision::Warn(g.refusal(to, files, also)),
                    },
                    None => Decision::Deny(Refusal::new(
                        &g.id(),
                        "could not read the handoff target (`to`), so the review gate cannot allow it",
                        format!("call handoff with to = \"{}\"", g.via()),
                    )),
                }
            };
            ReviewVerdict { gate: g, decision }
        })
        .collect();
    verdicts.sort_by(|a, b| a.gate.name().cmp(b.gate.name()));
    verdicts
}

/// Refuses review gates that can deadlock: two exclusive enforcing gates on the same `from`
/// with different `via`s. Once both are armed, no handoff satisfies both, and every handoff
/// would be refused.
pub fn check_deadlocks(reviews: &[ReviewConfig]) -> Result<(), ConfigError> {
    let strict: Vec<(usize, &ReviewConfig)> = reviews
        .iter()
        .enumerate()
        .filter(|(_, r)| r.exclusive && r.mode == GateMode::Enforce)
        .collect();
    for (n, (i, a)) in strict.iter().enumerate() {
        for (j, b) in &strict[n + 1..] {
            if a.from == b.from && a.via != b.via {
                return Err(ConfigError::Invalid {
                    section: format!("gates.review[{i}] and gates.review[{j}]"),
                    why: format!(
                        "{} and {} are both exclusive review gates on {} with different reviewers ({} and {}); once both are armed every handoff by {} is refused. Drop `exclusive` from one of them (then a handoff to either reviewer satisfies both), or make one advisory",
                        a.gate_name(), b.gate_name(), a.from, a.via, b.via, a.from
                    ),
                });
            }
        }
    }
    Ok(())
}
