//! The gates compiled from a config: what decides, and the config and the list read back from
//! them (a change at run time edits that config and compiles it again).

use super::*;

#[derive(Clone, Debug, Default)]
pub(in crate::gates) struct Gates {
    pub(in crate::gates) territories: Vec<Territory>,
    /// All territories' globs in one set: a path is matched once.
    pub(in crate::gates) index: TerritoryIndex,
    pub(in crate::gates) sprawl: Option<SprawlGate>,
    pub(in crate::gates) reviews: Vec<ReviewGate>,
    /// `[hooks] allow_tools`: what a host's hook lets run unjudged.
    pub(in crate::gates) allowed_tools: crate::gates::AllowedTools,
    /// The version of the policy they were compiled from ([`PolicyConfig::version`]).
    pub(in crate::gates) version: Arc<str>,
}

impl Gates {
    pub(super) fn specs(&self) -> Vec<GateInfo> {
        let mut out = vec![GateInfo {
            name: CONTROL_GATE.into(),
            mode: GateMode::Enforce,
            spec: None,
        }];
        for t in &self.territories {
            out.push(GateInfo {
                name: t.name().into(),
                mode: t.mode(),
                spec: Some(GateSpec::Territory(t.config().clone())),
            });
        }
        if let Some(s) = &self.sprawl {
            out.push(GateInfo {
                name: "sprawl".into(),
                mode: s.config().mode,
                spec: Some(GateSpec::Sprawl(s.config().clone())),
            });
        }
        for r in &self.reviews {
            out.push(GateInfo {
                name: r.name().into(),
                mode: r.mode(),
                spec: Some(GateSpec::Review(r.config().clone())),
            });
        }
        out
    }

    pub(super) fn to_config(&self) -> PolicyConfig {
        let mut cfg = PolicyConfig {
            territory: self
                .territories
                .iter()
                .map(|t| t.config().clone())
                .collect(),
            hooks: self.allowed_tools.config().clone(),
            ..PolicyConfig::default()
        };
        cfg.gates.review = self.reviews.iter().map(|r| r.config().clone()).collect();
        cfg.gates.sprawl = match &self.sprawl {
            Some(s) => s.config().clone(),
            None => SprawlConfig {
                enabled: false,
                ..SprawlConfig::default()
            },
        };
        cfg
    }

    /// The gates of `cfg`, compiled once per process for the same config: a config that is
    /// checked when it loads and then made a policy (every hook call) compiles its glob sets
    /// once. Keyed by the SHA-256 of the whole config and where each rule is written; the
    /// gates are immutable and shared.
    pub(in crate::gates) fn shared(cfg: &PolicyConfig) -> Result<Arc<Self>, ConfigError> {
        use sha2::Digest;
        static LAST: std::sync::Mutex<Option<([u8; 32], Arc<Gates>)>> = std::sync::Mutex::new(None);
        let mut cfg_mut = cfg.clone();
        let mut h = sha2::Sha256::new();
        h.update(serde_json::to_vec(cfg).unwrap_or_default());
        for s in cfg_mut.sources_mut() {
            h.update(s.as_str().unwrap_or("-"));
            h.update(b"\n");
        }
        let key: [u8; 32] = h.finalize().into();
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, gates)) = last.as_ref() {
            if *k == key {
                return Ok(Arc::clone(gates));
            }
        }
        let gates = Arc::new(Self::compile(cfg)?);
        *last = Some((key, Arc::clone(&gates)));
        Ok(gates)
    }

    pub(super) fn compile(cfg: &PolicyConfig) -> Result<Self, ConfigError> {
        // Validated in full: the overlaps with the index below, not a set of their own.
        cfg.validate_but_overlaps()?;
        let mut territories = Vec::new();
        let mut names = BTreeSet::new();
        for t in &cfg.territory {
            let mut t = t.clone();
            let base = t.gate_name();
            let mut name = base.clone();
            let mut n = 2;
            while names.contains(&name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            t.name = Some(name.clone());
            names.insert(name);
            territories.push(Territory::from_config(&t)?);
        }
        let mut reviews = Vec::new();
        for r in &cfg.gates.review {
            let g = ReviewGate::from_config(r)?;
            if !names.insert(g.name().to_string()) {
                return Err(ConfigError::Invalid {
                    section: "gates.review".into(),
                    why: format!("two gates are named {:?}", g.name()),
                });
            }
            reviews.push(g);
        }
        let sprawl = if cfg.gates.sprawl.enabled {
            Some(SprawlGate::from_config(&cfg.gates.sprawl)?)
        } else {
            None
        };
        let index = TerritoryIndex::new(&territories)?;
        crate::gates::overlap::overlaps_with(&cfg.territory, &index)?;
        Ok(Self {
            index,
            territories,
            sprawl,
            reviews,
            allowed_tools: cfg.hooks.compile()?,
            version: cfg.version().into(),
        })
    }
}
