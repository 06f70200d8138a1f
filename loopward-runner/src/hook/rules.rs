//! The rules the hook applies to one write: control files, territories with one-shot overrides,
//! and the sprawl gate. This is the seam between the hook engine and the policy gates.
//!
//! INTERIM: until the policy gates land, this holds a small local version of them (territories
//! as globs with owners, control paths, sprawl units by file stem) so the engine can be built
//! and tested; it is replaced by calls into `crate::gates` when they do.

use super::session::AgentTurn;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use loopward_core::{AgentId, AuditEvent, Decision, GateMode, Refusal};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy: {0}")]
pub struct RulesError(pub String);

/// The gate sections; other sections of a whole `loopward.toml` are left to its loader.
#[derive(Debug, Deserialize)]
struct PolicyToml {
    #[serde(default)]
    territory: Vec<TerritoryToml>,
    #[serde(default)]
    gates: GatesToml,
}

#[derive(Debug, Default, Deserialize)]
struct GatesToml {
    #[serde(default)]
    sprawl: Option<SprawlToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TerritoryToml {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    owners: Vec<String>,
    #[serde(default)]
    mode: GateMode,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SprawlToml {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    mode: GateMode,
    #[serde(default = "three")]
    threshold: u32,
    #[serde(default = "plan_md")]
    plan_path: String,
    #[serde(default = "plan_marker")]
    marker: String,
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

#[derive(Clone, Debug)]
struct TerritoryRule {
    name: String,
    owners: Vec<AgentId>,
    globs: GlobSet,
    mode: GateMode,
}

impl TerritoryRule {
    fn covers(&self, rel: &str) -> bool {
        !rel.is_empty() && self.globs.is_match(rel)
    }

    fn owner_list(&self) -> String {
        self.owners
            .iter()
            .map(AgentId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Clone, Debug)]
struct SprawlRule {
    mode: GateMode,
    threshold: u32,
    plan_path: String,
    marker: String,
}

/// The compiled rules.
#[derive(Clone, Debug)]
pub(crate) struct Rules {
    territories: Vec<TerritoryRule>,
    control: Vec<String>,
    sprawl: Option<SprawlRule>,
}

/// One write to judge.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteAsk<'a> {
    pub(crate) caller: &'a AgentId,
    pub(crate) call_id: Option<&'a str>,
    /// `tool:Write`, …
    pub(crate) action: &'a str,
    /// The path as the model wrote it.
    pub(crate) raw: &'a str,
    /// The canonical workspace-relative path.
    pub(crate) rel: &'a str,
    /// The unit keys of the call (see [`Rules::unit_keys`]).
    pub(crate) keys: &'a BTreeSet<String>,
}

/// What the rules say about one write, with the events to record before it runs, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WriteVerdict {
    pub(crate) events: Vec<AuditEvent>,
    pub(crate) denial: Option<Refusal>,
    pub(crate) warnings: Vec<Refusal>,
    /// The sprawl gate fired (refused once) on this call.
    pub(crate) sprawl_fired: bool,
}

impl Rules {
    /// Builds the rules from the gate sections of a `loopward.toml`.
    pub(crate) fn from_toml(text: &str, config_file: &str) -> Result<Self, RulesError> {
        let t: PolicyToml = toml::from_str(text).map_err(|e| RulesError(e.to_string()))?;
        let mut territories = Vec::new();
        for (i, terr) in t.territory.iter().enumerate() {
            let mut owners = Vec::new();
            for o in terr.owner.iter().chain(terr.owners.iter()) {
                owners.push(AgentId::new(o.clone()).map_err(|e| RulesError(e.to_string()))?);
            }
            if owners.is_empty() {
                return Err(RulesError(format!("territory {} has no owner", i + 1)));
            }
            let mut set = GlobSetBuilder::new();
            for p in &terr.paths {
                for g in [
                    p.trim_end_matches('/').to_string(),
                    format!("{}/**", p.trim_end_matches('/')),
                ] {
                    let glob = GlobBuilder::new(&g)
                        .literal_separator(true)
                        .build()
                        .map_err(|e| RulesError(format!("territory glob {p:?}: {e}")))?;
                    set.add(glob);
                }
            }
            let rule = TerritoryRule {
                name: terr.name.clone().unwrap_or_default(),
                owners,
                globs: set.build().map_err(|e| RulesError(e.to_string()))?,
                mode: terr.mode,
            };
            let name = if rule.name.is_empty() {
                format!("territory:{}", rule.owner_list())
            } else {
                rule.name.clone()
            };
            territories.push(TerritoryRule { name, ..rule });
        }
        let sprawl = match t.gates.sprawl {
            None => Some(SprawlRule {
                mode: GateMode::Enforce,
                threshold: 3,
                plan_path: plan_md(),
                marker: plan_marker(),
            }),
            Some(s) if !s.enabled => None,
            Some(s) => Some(SprawlRule {
                mode: s.mode,
                threshold: s.threshold,
                plan_path: s.plan_path,
                marker: s.marker,
            }),
        };
        Ok(Self {
            territories,
            control: vec![".loopward".into(), config_file.into(), "runs".into()],
            sprawl,
        })
    }

    fn is_control(&self, rel: &str) -> bool {
        rel.is_empty()
            || self.control.iter().any(|c| {
                rel == c
                    || rel
                        .strip_prefix(c.as_str())
                        .is_some_and(|r| r.starts_with('/'))
                    || c.strip_prefix(rel).is_some_and(|r| r.starts_with('/'))
            })
    }

    /// The unit of work a path belongs to.
    pub(crate) fn unit_key(&self, rel: &str) -> String {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        let stem = file.split('.').next().unwrap_or(file);
        for dir in ["src/", "tests/", "docs/"] {
            if rel.starts_with(dir) {
                return format!("stem:{stem}");
            }
        }
        format!("file:{rel}")
    }

    /// The unit keys of a write to `rel`; `replacements` are an edit's (old, new) pairs, so one
    /// replacement repeated across files (a mechanical rename) is one unit of work.
    pub(crate) fn unit_keys(&self, rel: &str, replacements: &[(&str, &str)]) -> BTreeSet<String> {
        let mut keys = BTreeSet::from([self.unit_key(rel)]);
        for (old, new) in replacements {
            let digest = Sha256::digest(format!("{old}\0{new}").as_bytes());
            keys.insert(format!("replace:{}", hex::encode(&digest[..8])));
        }
        keys
    }

    /// Whether `rel` is the plan file and `content` a plan.
    pub(crate) fn is_plan(&self, rel: &str, content: &str) -> bool {
        self.sprawl.as_ref().is_some_and(|s| {
            rel == s.plan_path
                && content
                    .lines()
                    .next()
                    .is_some_and(|l| l.starts_with(&s.marker))
        })
    }

    /// Whether a shell change to `rel` by `caller` breaks a rule, and which.
    pub(crate) fn guarded(&self, caller: &AgentId, rel: &str) -> Option<String> {
        if self.is_control(rel) {
            return Some(format!(
                "{rel} is a loopward control file; no agent may change it"
            ));
        }
        self.territories
            .iter()
            .find(|t| t.covers(rel) && t.mode == GateMode::Enforce && !t.owners.contains(caller))
            .map(|t| {
                format!(
                    "{rel} is in territory {}, owned by {}; {caller} does not own it",
                    t.name,
                    t.owner_list()
                )
            })
    }

    /// Whether `rel` is watched closely around shell calls (its content kept for a revert).
    pub(crate) fn watched(&self, rel: &str) -> bool {
        self.is_control(rel) || self.territories.iter().any(|t| t.covers(rel))
    }

    /// Judges one write by `caller` to `rel` (`raw` as the model wrote it).
    pub(crate) fn judge_write(
        &self,
        ask: &WriteAsk<'_>,
        turn: &AgentTurn,
        plan_fresh: bool,
    ) -> WriteVerdict {
        let WriteAsk {
            caller,
            call_id,
            action,
            raw,
            rel,
            keys,
        } = *ask;
        let mut v = WriteVerdict {
            events: Vec::new(),
            denial: None,
            warnings: Vec::new(),
            sprawl_fired: false,
        };
        let decide = |v: &mut WriteVerdict, gate: &str, mode: GateMode, decision: Decision| {
            v.events.push(AuditEvent::GateDecision {
                call_id: call_id.map(str::to_string),
                gate: gate.to_string(),
                mode,
                action: action.to_string(),
                path_raw: Some(raw.to_string()),
                path: Some(rel.to_string()),
                decision: decision.clone(),
            });
            match decision {
                Decision::Deny(r) => {
                    if v.denial.is_none() {
                        v.denial = Some(r);
                    }
                }
                Decision::Warn(r) => v.warnings.push(r),
                Decision::Allow | Decision::Override { .. } => {}
            }
        };
        if self.is_control(rel) {
            decide(
                &mut v,
                "control",
                GateMode::Enforce,
                Decision::Deny(Refusal::new(
                    "control",
                    format!("{rel} is a loopward control file; no agent may write it, with or without an override"),
                    "leave it as it is; loopward's configuration and state are changed by a person",
                )),
            );
            return v;
        }
        match self.territories.iter().find(|t| t.covers(rel)) {
            Some(t) if !t.owners.contains(caller) => {
                let refusal = Refusal::new(
                    t.name.clone(),
                    format!("{rel} is in territory {}, owned by {}; {caller} does not own it", t.name, t.owner_list()),
                    format!(
                        "leave {rel} to {owners}: say in your reply what should change and let {owners} make the change; if you believe the rule is wrong here, say so, and a person can grant a one-shot override (loopward override grant --agent {caller} --path {rel} --reason \"…\")",
                        owners = t.owner_list()
                    ),
                );
                let d = match t.mode {
                    GateMode::Enforce => Decision::Deny(refusal),
                    GateMode::Advisory => Decision::Warn(refusal),
                };
                decide(&mut v, &t.name, t.mode, d);
            }
            Some(t) => decide(&mut v, &t.name, t.mode, Decision::Allow),
            None => decide(&mut v, "territory", GateMode::Enforce, Decision::Allow),
        }
        if v.denial.is_some() {
            return v;
        }
        if let Some(s) = &self.sprawl {
            let n = turn.units.len() + 1;
            let is_plan = rel == s.plan_path;
            if !turn.joins(keys)
                && !is_plan
                && !plan_fresh
                && !turn.sprawl_fired
                && n >= s.threshold as usize
            {
                let touched = turn.files();
                let refusal = Refusal::new(
                    "sprawl",
                    format!(
                        "{rel} would start unit of work number {n} this turn with no plan since the last message from a person; touched so far: {}",
                        touched.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                    format!(
                        "write your plan to {} (its first line starting with {:?}) naming the units of work and their order, then go on; this gate refuses once per turn",
                        s.plan_path, s.marker
                    ),
                );
                v.sprawl_fired = true;
                let d = match s.mode {
                    GateMode::Enforce => Decision::Deny(refusal),
                    GateMode::Advisory => Decision::Warn(refusal),
                };
                decide(&mut v, "sprawl", s.mode, d);
            } else {
                decide(&mut v, "sprawl", s.mode, Decision::Allow);
            }
        }
        v
    }
}
