//! Changes to the gates at run time: `add`, `remove` and `set_mode`, each recorded as
//! `GateChanged` before it takes effect, with the gate in the ledger's words
//! ([`GateDefinition`], converted here from the configuration).

use super::*;
use loopward_core::{
    GateChange, GateDefinition, GateRules, ListedGate, ReviewRules, SprawlRules, TerritoryRules,
};

impl GateSpec {
    /// The gate's rules in the ledger's words: every field its configuration writes.
    pub fn rules(&self) -> GateRules {
        match self.clone() {
            Self::Territory(t) => GateRules::Territory(TerritoryRules {
                mode: t.mode,
                name: t.name,
                owner: t.owner,
                owners: t.owners,
                paths: t.paths,
            }),
            Self::Sprawl(s) => GateRules::Sprawl(SprawlRules {
                enabled: s.enabled,
                marker: s.marker,
                mode: s.mode,
                plan_path: s.plan_path,
                siblings: s.siblings,
                threshold: s.threshold,
            }),
            Self::Review(r) => GateRules::Review(ReviewRules {
                exclusive: r.exclusive,
                from: r.from,
                mode: r.mode,
                name: r.name,
                via: r.via,
                when: r.when,
            }),
        }
    }
}

impl GateInfo {
    /// The gate as a `gate_changed` record holds it.
    pub fn definition(&self) -> GateDefinition {
        GateDefinition::Listed(ListedGate {
            mode: self.mode,
            name: self.name.clone(),
            spec: self.spec.as_ref().map(GateSpec::rules),
        })
    }
}

impl Policy {
    fn change(
        &self,
        by: &str,
        change: GateChange,
        run: &RunContext,
        edit: impl FnOnce(&mut PolicyConfig) -> Result<(), PolicyError>,
        shown: impl FnOnce(&Gates) -> GateDefinition,
    ) -> Result<(), PolicyError> {
        let mut guard = self.inner.gates.write().unwrap_or_else(|p| p.into_inner());
        let mut cfg = guard.to_config();
        // The whole effective policy, so its version is the version of what now decides.
        cfg.gates.shell = self.inner.shell.clone();
        cfg.overrides.max_ttl = self.inner.overrides.ttl_limit();
        edit(&mut cfg)?;
        let compiled = Gates::compile(&cfg)?;
        run.record_owned(AuditEvent::GateChanged {
            by: by.into(),
            change,
            gate: shown(&compiled),
        })
        .map_err(PolicyError::Audit)?;
        *guard = Arc::new(compiled);
        Ok(())
    }

    /// Adds a gate; recorded as `GateChanged` (who, what) before it takes effect.
    pub fn add(&self, spec: GateSpec, by: &str, run: &RunContext) -> Result<(), PolicyError> {
        let existing: BTreeSet<String> = self.list().into_iter().map(|g| g.name).collect();
        let before = existing.clone();
        let is_sprawl = matches!(spec, GateSpec::Sprawl(_));
        self.change(
            by,
            GateChange::Add,
            run,
            |cfg| {
                match spec {
                    GateSpec::Territory(t) => {
                        if t.name.as_ref().is_some_and(|n| existing.contains(n)) {
                            return Err(PolicyError::Duplicate(t.gate_name()));
                        }
                        cfg.territory.push(t);
                    }
                    GateSpec::Review(r) => {
                        if existing.contains(&r.gate_name()) {
                            return Err(PolicyError::Duplicate(r.gate_name()));
                        }
                        cfg.gates.review.push(r);
                    }
                    GateSpec::Sprawl(s) => cfg.gates.sprawl = s,
                }
                Ok(())
            },
            |g| {
                let new = g.specs().into_iter().find(|i| {
                    if is_sprawl {
                        i.name == "sprawl"
                    } else {
                        !before.contains(&i.name)
                    }
                });
                new.map_or(GateDefinition::Unlisted, |g| g.definition())
            },
        )
    }

    /// Removes the gate called `name`; recorded as `GateChanged`.
    pub fn remove(&self, name: &str, by: &str, run: &RunContext) -> Result<(), PolicyError> {
        let info = self.find(name)?;
        let shown = info.definition();
        self.change(
            by,
            GateChange::Remove,
            run,
            |cfg| apply_to_named(cfg, name, |_| None),
            |_| shown,
        )
    }

    /// Sets the mode of the gate called `name`; recorded as `GateChanged`.
    pub fn set_mode(
        &self,
        name: &str,
        mode: GateMode,
        by: &str,
        run: &RunContext,
    ) -> Result<(), PolicyError> {
        let mut info = self.find(name)?;
        info.mode = mode;
        let shown = info.definition();
        self.change(
            by,
            GateChange::Mode,
            run,
            |cfg| {
                apply_to_named(cfg, name, |mut s| {
                    match &mut s {
                        GateSpec::Territory(t) => t.mode = mode,
                        GateSpec::Sprawl(c) => c.mode = mode,
                        GateSpec::Review(r) => r.mode = mode,
                    }
                    Some(s)
                })
            },
            |_| shown,
        )
    }

    fn find(&self, name: &str) -> Result<GateInfo, PolicyError> {
        if name == CONTROL_GATE {
            return Err(PolicyError::Permanent(name.into()));
        }
        self.list()
            .into_iter()
            .find(|g| g.name == name)
            .ok_or_else(|| PolicyError::NoSuchGate(name.into()))
    }
}

fn apply_to_named(
    cfg: &mut PolicyConfig,
    name: &str,
    f: impl FnOnce(GateSpec) -> Option<GateSpec>,
) -> Result<(), PolicyError> {
    let compiled = Gates::compile(cfg)?;
    if let Some(i) = compiled.territories.iter().position(|t| t.name() == name) {
        let mut t = cfg.territory.remove(i);
        t.name = Some(name.into());
        if let Some(GateSpec::Territory(t)) = f(GateSpec::Territory(t)) {
            cfg.territory.insert(i, t);
        }
        return Ok(());
    }
    if let Some(i) = compiled.reviews.iter().position(|r| r.name() == name) {
        let r = cfg.gates.review.remove(i);
        if let Some(GateSpec::Review(r)) = f(GateSpec::Review(r)) {
            cfg.gates.review.insert(i, r);
        }
        return Ok(());
    }
    if name == "sprawl" && cfg.gates.sprawl.enabled {
        match f(GateSpec::Sprawl(cfg.gates.sprawl.clone())) {
            Some(GateSpec::Sprawl(s)) => cfg.gates.sprawl = s,
            _ => cfg.gates.sprawl.enabled = false,
        }
        return Ok(());
    }
    Err(PolicyError::NoSuchGate(name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::config::{ReviewConfig, SprawlConfig, TerritoryConfig};

    /// What the ledger held before it was typed: the configuration's own serialisation.
    #[test]
    fn a_gates_definition_is_written_as_its_configuration_was() {
        let specs = [
            GateSpec::Territory(TerritoryConfig {
                paths: vec!["plans/**".into()],
                owner: Some("planner".into()),
                ..Default::default()
            }),
            GateSpec::Territory(TerritoryConfig {
                name: Some("shared".into()),
                paths: vec!["a/*".into(), "b".into()],
                owners: vec!["x".into(), "y".into()],
                mode: GateMode::Advisory,
                ..Default::default()
            }),
            GateSpec::Sprawl(SprawlConfig::default()),
            GateSpec::Review(ReviewConfig {
                name: None,
                from: "builder".into(),
                via: "auditor".into(),
                when: vec![],
                mode: GateMode::Enforce,
                exclusive: false,
                source: Default::default(),
            }),
            GateSpec::Review(ReviewConfig {
                name: Some("r".into()),
                from: "builder".into(),
                via: "auditor".into(),
                when: vec!["src/**".into()],
                mode: GateMode::Advisory,
                exclusive: true,
                source: Default::default(),
            }),
        ];
        for spec in specs {
            let info = GateInfo {
                name: "g".into(),
                mode: GateMode::Enforce,
                spec: Some(spec.clone()),
            };
            for (typed, before) in [
                (
                    serde_json::to_string(&spec.rules()),
                    serde_json::to_value(&spec),
                ),
                (
                    serde_json::to_string(&info.definition()),
                    serde_json::to_value(&info),
                ),
            ] {
                assert_eq!(typed.unwrap(), before.unwrap().to_string());
            }
        }
    }
}
