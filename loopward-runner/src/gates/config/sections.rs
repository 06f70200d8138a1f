//! Each section's own checks and names: a territory's owners and globs, the sprawl gate's
//! settings, a review gate's agents.

use super::globs::{check_territory_globs, compile_territory_globs};
use super::*;

impl TerritoryConfig {
    /// The owners, from `owner` and `owners` together, validated.
    pub fn owner_ids(&self, section: &str) -> Result<Vec<AgentId>, ConfigError> {
        let names: Vec<&String> = self.owner.iter().chain(self.owners.iter()).collect();
        if names.is_empty() {
            return Err(ConfigError::Invalid {
                section: section.into(),
                why: "no owner; set owner = \"<agent>\" or owners = [...] (a territory nobody owns would deny every write)".into(),
            });
        }
        let mut out = Vec::new();
        for n in names {
            let id = AgentId::new(n.clone()).map_err(|e| ConfigError::Invalid {
                section: section.into(),
                why: e.to_string(),
            })?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out.sort();
        Ok(out)
    }

    pub(super) fn validate(&self, section: &str) -> Result<(), ConfigError> {
        self.owner_ids(section)?;
        if self.paths.is_empty() {
            return Err(ConfigError::Invalid {
                section: section.into(),
                why: "paths is empty; list the globs the territory covers".into(),
            });
        }
        // Each glob checked, not compiled: the policy's index compiles a glob only when a path
        // needs it (compiling is most of a hook call's own work).
        check_territory_globs(&self.paths, section)
    }

    /// Compiles the territory's globs, each widened to cover what lies below it.
    pub fn compile(&self, section: &str) -> Result<GlobSet, ConfigError> {
        compile_territory_globs(&self.paths, section)
    }

    /// The gate's name: its `name`, or `territory:<owners>` when it has none. Ledgers and reports
    /// tell a territory's decisions by their kind ([`GateKind::Territory`](loopward_core::GateKind)),
    /// never by the name.
    pub fn gate_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => {
                let mut owners: Vec<&str> = self
                    .owner
                    .iter()
                    .chain(self.owners.iter())
                    .map(String::as_str)
                    .collect();
                owners.sort_unstable();
                owners.dedup();
                format!("territory:{}", owners.join("+"))
            }
        }
    }
}

impl SprawlConfig {
    /// Checks the section.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, why: String| ConfigError::Invalid {
            section: format!("gates.sprawl.{key}"),
            why,
        };
        if self.threshold < 2 || self.threshold > MAX_SPRAWL_THRESHOLD {
            return Err(invalid(
                "threshold",
                format!(
                    "{} must be between 2 and {MAX_SPRAWL_THRESHOLD}",
                    self.threshold
                ),
            ));
        }
        if self.marker.trim().is_empty() || self.marker.contains('\n') {
            return Err(invalid("marker", "must be a non-empty single line".into()));
        }
        if self.plan_path.is_empty()
            || self.plan_path.starts_with('/')
            || self
                .plan_path
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty())
        {
            return Err(invalid(
                "plan_path",
                format!(
                    "{:?} must be a plain workspace-relative path",
                    self.plan_path
                ),
            ));
        }
        for (i, rule) in self.siblings.iter().enumerate() {
            if rule.is_empty() {
                return Err(invalid(
                    &format!("siblings[{i}]"),
                    "a sibling rule is empty".into(),
                ));
            }
            for t in rule {
                crate::gates::sprawl::SiblingTemplate::parse(
                    t,
                    &format!("gates.sprawl.siblings[{i}]"),
                )?;
            }
        }
        Ok(())
    }
}

impl ReviewConfig {
    pub(super) fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let from = AgentId::new(self.from.clone()).map_err(|e| ConfigError::Invalid {
            section: section.into(),
            why: format!("from: {e}"),
        })?;
        let via = AgentId::new(self.via.clone()).map_err(|e| ConfigError::Invalid {
            section: section.into(),
            why: format!("via: {e}"),
        })?;
        if from == via {
            return Err(ConfigError::Invalid {
                section: section.into(),
                why: format!("from and via are both {from}; an agent cannot review itself"),
            });
        }
        for w in &self.when {
            glob(w, section)?;
        }
        Ok(())
    }

    /// The gate's name.
    pub fn gate_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("review:{}->{}", self.from, self.via))
    }
}
