//! Territories: paths only their owners may write. Deny by default for everyone else.
//!
//! A territory's globs are matched against canonical workspace-relative paths (see
//! [`Workspace::resolve`](crate::Workspace::resolve)); `*` never crosses `/`, and each glob also
//! covers what lies below it, so `src` covers `src` and `src/**`, while `srcevil/x` is outside.
//!
//! ```
//! use loopward_core::AgentId;
//! use loopward_runner::gates::{Territory, TerritoryConfig};
//! let t = Territory::from_config(&TerritoryConfig {
//!     paths: vec!["src".into(), "plans/*.md".into()],
//!     owner: Some("builder".into()),
//!     ..Default::default()
//! }).unwrap();
//! assert!(t.covers("src") && t.covers("src/a/b.rs"));
//! assert!(!t.covers("srcevil/x.rs"));
//! assert!(t.covers("plans/a.md") && !t.covers("plans/deep/a.md"));
//! assert!(t.owned_by(&AgentId::new("builder").unwrap()));
//! ```

use super::config::{ConfigError, TerritoryConfig};
use globset::GlobSet;
use loopward_core::{AgentId, GateId, GateKind, GateMode};
use std::sync::{Arc, OnceLock};

/// A compiled territory.
#[derive(Clone, Debug)]
pub struct Territory {
    /// Shared with every decision the territory takes.
    name: Arc<str>,
    config: TerritoryConfig,
    owners: Vec<AgentId>,
    /// Its own glob set, compiled when first asked (a decision matches every territory at once
    /// through the policy's index; a hook call that only decides never compiles these). `None`:
    /// it could not be compiled, and the territory covers every path (fails closed).
    globs: OnceLock<Option<GlobSet>>,
}

impl Territory {
    /// Compiles and validates one `[[territory]]`.
    pub fn from_config(config: &TerritoryConfig) -> Result<Self, ConfigError> {
        let name = config.gate_name();
        let section = format!("territory {name}");
        let owners = config.owner_ids(&section)?;
        if config.paths.is_empty() {
            return Err(ConfigError::Invalid {
                section,
                why: "paths is empty".into(),
            });
        }
        // Checked now (a bad glob is refused here), compiled when first needed.
        super::config::check_territory_globs(&config.paths, &section)?;
        Ok(Self {
            name: name.into(),
            config: config.clone(),
            owners,
            globs: OnceLock::new(),
        })
    }

    /// The gate's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The gate's identity: kind [`GateKind::Territory`] and its name (shared, not copied).
    pub fn id(&self) -> GateId {
        GateId::new(GateKind::Territory, Arc::clone(&self.name))
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &TerritoryConfig {
        &self.config
    }

    /// Its mode.
    pub fn mode(&self) -> GateMode {
        self.config.mode
    }

    /// The owning agents.
    pub fn owners(&self) -> &[AgentId] {
        &self.owners
    }

    /// Whether `agent` owns it.
    pub fn owned_by(&self, agent: &AgentId) -> bool {
        self.owners.contains(agent)
    }

    /// Whether the canonical workspace-relative `path` lies in the territory. A name that is
    /// not text (written as `U+FFFD` and hex, see the watch's snapshots) is matched by its
    /// bytes, as the globs would match the name on disk.
    pub fn covers(&self, path: &str) -> bool {
        let globs = self
            .globs
            .get_or_init(|| self.config.compile(&self.name).ok());
        !path.is_empty()
            && globs
                .as_ref()
                .is_none_or(|g| g.is_match(&*crate::path_text::path(path)))
    }

    /// Whether some path at or below the canonical workspace-relative directory `dir` (`""`:
    /// the root) could lie in the territory, existing or not. Conservative: a glob component
    /// (`*`, `?`, `[`, `{`, a backslash) is taken to match anything below it.
    ///
    /// ```
    /// use loopward_runner::gates::{Territory, TerritoryConfig};
    /// let t = Territory::from_config(&TerritoryConfig {
    ///     paths: vec!["docs/api/**".into()],
    ///     owner: Some("writer".into()),
    ///     ..Default::default()
    /// }).unwrap();
    /// assert!(t.may_hold_below("") && t.may_hold_below("docs") && t.may_hold_below("docs/api/v1"));
    /// assert!(!t.may_hold_below("src") && !t.may_hold_below("docs/guide"));
    /// ```
    pub fn may_hold_below(&self, dir: &str) -> bool {
        let dir: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
        self.config.paths.iter().any(|p| {
            let literal = literal_prefix(p);
            // `dir` is at or above the pattern's literal part, or inside it (what lies below a
            // match is covered too, and a wild part may match anything deeper).
            dir.iter().zip(&literal).all(|(a, b)| a == b)
        })
    }

    /// The owners, comma-separated, for messages.
    pub fn owner_list(&self) -> String {
        self.owners
            .iter()
            .map(AgentId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The leading components of a glob that contain no glob syntax.
pub(crate) fn literal_prefix(pattern: &str) -> Vec<&str> {
    pattern
        .trim_end_matches('/')
        .split('/')
        .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
        .filter(|c| !c.is_empty())
        .collect()
}
