//! `Policy` (the gates, as data) and `PolicyLayer`, the tower layer that runs them in the tool
//! stack before anything executes.

mod changes;
mod compiled;

pub(super) use compiled::Gates;

use super::config::{
    ConfigError, PolicyConfig, ReviewConfig, ShellWatchConfig, SprawlConfig, TerritoryConfig,
};
use super::control::{ControlFiles, CONTROL_GATE};
use super::host::{Host, Passing};
use super::overrides::OverrideStore;
use super::plan_cache::PlanCache;
use super::review::ReviewGate;
use super::sprawl::SprawlGate;
use super::territory::Territory;
use super::territory_index::TerritoryIndex;
use crate::context::RunContext;
use crate::workspace::Workspace;
use loopward_core::{AgentId, AuditEvent, GateKind, GateMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The gate name for refusals that come from the policy layer itself failing closed.
pub const POLICY_GATE: &str = GateKind::Policy.as_str();
/// The gate name for the kernel sandbox every shell command runs in.
pub const SANDBOX_GATE: &str = GateKind::Sandbox.as_str();
/// The gate name for the workspace comparison around shell calls.
pub const SHELL_GATE: &str = GateKind::ShellWatch.as_str();
/// The most paths a directory delete, rename or link may affect before it is refused.
pub const MAX_AFFECTED_PATHS: usize = 10_000;

/// One gate, as data: what `loopward.toml` declares and the runtime API adds or removes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GateSpec {
    /// A `[[territory]]`.
    Territory(TerritoryConfig),
    /// `[gates.sprawl]`.
    Sprawl(SprawlConfig),
    /// A `[[gates.review]]`.
    Review(ReviewConfig),
}

/// A gate as listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateInfo {
    /// Its name (unique; used to remove it or change its mode).
    pub name: String,
    /// Its mode.
    pub mode: GateMode,
    /// Its definition (`None` for the built-in control gate).
    pub spec: Option<GateSpec>,
}

/// A runtime change to the gates was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The new gate set is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No gate has that name.
    #[error("there is no gate named {0:?}")]
    NoSuchGate(String),
    /// The gate cannot be changed (the control gate is permanent).
    #[error("gate {0:?} is permanent: control files are never writable by agents")]
    Permanent(String),
    /// A gate of that name exists.
    #[error("a gate named {0:?} already exists")]
    Duplicate(String),
    /// The change could not be recorded, so it was not made.
    #[error("not changed: {0}")]
    Audit(#[from] loopward_core::AuditError),
}

/// The gates of a room, built from `loopward.toml`, changeable at run time (each change an audit
/// event). Cheap to clone; clones share the gates.
///
/// ```
/// use loopward_runner::gates::{Policy, PolicyConfig};
/// use loopward_runner::Workspace;
/// let dir = tempfile::tempdir().unwrap();
/// let cfg = PolicyConfig::from_toml("[[territory]]\npaths = [\"plans/**\"]\nowner = \"planner\"").unwrap();
/// let policy = Policy::from_config(&cfg, Workspace::new(dir.path()).unwrap()).unwrap();
/// let names: Vec<String> = policy.list().into_iter().map(|g| g.name).collect();
/// assert_eq!(names, ["control", "territory:planner", "sprawl"]);
/// ```
#[derive(Clone)]
pub struct Policy {
    pub(super) inner: Arc<PolicyInner>,
}

pub(super) struct PolicyInner {
    pub(super) workspace: Workspace,
    pub(super) control: ControlFiles,
    pub(super) overrides: OverrideStore,
    pub(super) shell: ShellWatchConfig,
    /// Judging recorded actions: no override store, no disk (see [`Policy::shadow`]).
    pub(super) shadow: bool,
    /// Folders outside the workspace no shell command may even read (loopward's ledger keys).
    pub(super) unreadable: Vec<PathBuf>,
    /// What shell commands may read and the environment they start with.
    pub(super) reach: crate::sandbox::Reach,
    /// The agents `loopward override grant` takes without `--subagent` (see
    /// [`Policy::with_team`]); `None` when not known, and then no refusal suggests it.
    pub(super) team: Option<Vec<AgentId>>,
    /// Where refusals are shown: their remedies name moves that exist there.
    pub(super) host: Host,
    /// Whether the agent's session has loopward's `handoff` (see [`Policy::with_handoff`]).
    pub(super) handoff: bool,
    /// The adapter's own state folder in the workspace, which no watch compares.
    pub(super) own_state: Option<String>,
    // Shared, not cloned per call: a call holds the compiled gates it started with, and a change
    // swaps in a new set without touching calls in flight.
    gates: RwLock<Arc<Gates>>,
    /// Where the sprawl gate's plan lands, while links cannot have changed.
    pub(super) plan_cache: PlanCache,
}

impl PolicyInner {
    /// A policy's state before any `with_*` step: its shell watch from `cfg`, no team, the
    /// default host and reach, nothing unreadable.
    fn new(
        cfg: &PolicyConfig,
        workspace: Workspace,
        control: ControlFiles,
        overrides: OverrideStore,
        shadow: bool,
        gates: Arc<Gates>,
    ) -> Self {
        Self {
            workspace,
            control,
            overrides,
            shell: cfg.gates.shell.clone(),
            shadow,
            unreadable: vec![],
            reach: crate::sandbox::Reach::default(),
            team: None,
            host: Host::default(),
            handoff: false,
            own_state: None,
            plan_cache: PlanCache::default(),
            gates: RwLock::new(gates),
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("gates", &self.list())
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Builds the policy of `workspace` from its config, with the default control files
    /// (`.loopward/`, `loopward.toml`, `runs/`).
    pub fn from_config(cfg: &PolicyConfig, workspace: Workspace) -> Result<Self, ConfigError> {
        Self::with_control(cfg, workspace, ControlFiles::default())
    }

    /// Like [`Policy::from_config`], naming the control files.
    pub fn with_control(
        cfg: &PolicyConfig,
        workspace: Workspace,
        control: ControlFiles,
    ) -> Result<Self, ConfigError> {
        let gates = Gates::shared(cfg)?;
        let control = control.resolved(&workspace);
        if let Some(s) = cfg.gates.shell.skip.iter().find(|s| control.covers(s)) {
            return Err(ConfigError::Invalid {
                section: "gates.shell.skip".into(),
                why: format!("{s:?} holds control files; they must be watched"),
            });
        }
        let overrides = OverrideStore::for_workspace(&workspace).max_ttl(cfg.overrides.max_ttl);
        Ok(Self {
            inner: Arc::new(PolicyInner::new(
                cfg, workspace, control, overrides, false, gates,
            )),
        })
    }

    /// Consumes overrides from `store` (for example a keyed store in loopward's state directory)
    /// instead of the workspace's keyless default; the configured maximum TTL still applies.
    pub fn with_overrides(self, store: OverrideStore) -> Self {
        let ttl = self.inner.overrides.ttl_limit();
        self.derive(|next| next.overrides = store.max_ttl(ttl))
    }

    /// Keeps every shell command from reading anything below `dirs` (absolute; they need not
    /// exist yet): the ledger keys of loopward's state directory. The kernel enforces it with
    /// the command's sandbox (see [`Confinement::with_unreadable`](crate::sandbox::Confinement::with_unreadable)).
    pub fn with_unreadable(self, dirs: Vec<PathBuf>) -> Self {
        self.derive(|next| next.unreadable = dirs)
    }

    /// Sets what every shell command may read and the environment it starts with (default
    /// [`Reach::default`](crate::sandbox::Reach::default): the workspace and the system
    /// folders; `PATH` only).
    pub fn with_reach(self, reach: crate::sandbox::Reach) -> Self {
        self.derive(|next| next.reach = reach)
    }

    /// Names the config's `[[agent]]`s. Any other agent (a Claude Code subagent, acting under
    /// its own name) is told to ask for `loopward override grant --agent <it> --subagent …`,
    /// the form `override grant` takes for an agent outside the team.
    pub fn with_team(self, team: Vec<AgentId>) -> Self {
        self.derive(|next| next.team = Some(team))
    }

    /// Names a folder inside the workspace (relative, under `.loopward/`) where the adapter keeps
    /// its own state between calls (a hook's sessions, when it has no state directory): it
    /// changes while commands run, so no watch compares or restores it. It stays a control
    /// folder: no agent's tool or command may write it.
    pub fn with_own_state(self, rel: impl Into<String>) -> Self {
        let rel = rel.into();
        self.derive(|next| next.own_state = Some(rel))
    }

    /// Names the host refusals are shown on ([`Host`], default the runner), so a refusal's
    /// remedy names a move that exists there.
    pub fn with_host(self, host: Host) -> Self {
        self.derive(|next| next.host = host)
    }

    /// Says whether the agent's session has loopward's `handoff` tool (a loop's CLI session
    /// served it over MCP), so a territory refusal names that tool rather than the host's own
    /// way ([`Passing`]). Default: it has not.
    pub fn with_handoff(self, handoff: bool) -> Self {
        self.derive(|next| next.handoff = handoff)
    }

    /// How a refused agent passes a change on where the refusal is shown.
    pub(super) fn passing(&self) -> Passing {
        Passing::new(self.inner.host).with_handoff(self.inner.handoff)
    }

    /// A new policy with this one's settings and its current gates, changed by `edit` (the
    /// `with_*` builders).
    fn derive(&self, edit: impl FnOnce(&mut PolicyInner)) -> Self {
        let inner = &self.inner;
        let mut next = PolicyInner {
            workspace: inner.workspace.clone(),
            control: inner.control.clone(),
            overrides: inner.overrides.clone(),
            shell: inner.shell.clone(),
            shadow: inner.shadow,
            unreadable: inner.unreadable.clone(),
            reach: inner.reach.clone(),
            team: inner.team.clone(),
            host: inner.host,
            handoff: inner.handoff,
            own_state: inner.own_state.clone(),
            // A new policy resolves plan paths afresh.
            plan_cache: PlanCache::default(),
            gates: RwLock::new(self.gates()),
        };
        edit(&mut next);
        Self {
            inner: Arc::new(next),
        }
    }

    /// Whether `agent` is outside the team [`Policy::with_team`] named (false when none was).
    pub(super) fn outside_team(&self, agent: &AgentId) -> bool {
        self.inner.team.as_ref().is_some_and(|t| !t.contains(agent))
    }

    /// The folders no shell command may read.
    pub fn unreadable(&self) -> &[PathBuf] {
        &self.inner.unreadable
    }

    /// A policy for judging recorded actions ([`Policy::decide_recorded`]): the same gates, but
    /// nothing is read from or written to disk, and no override exists.
    pub fn shadow(cfg: &PolicyConfig) -> Result<Self, ConfigError> {
        let gates = Gates::compile(cfg)?;
        Ok(Self {
            inner: Arc::new(PolicyInner::new(
                cfg,
                Workspace::detached(),
                ControlFiles::default(),
                OverrideStore::new("/nonexistent/loopward-detached/overrides"),
                true,
                Arc::new(gates),
            )),
        })
    }

    /// Checks a config as [`Policy::from_config`] would, without a workspace (for adapters that
    /// meet their workspace only later, like the Claude Code hook).
    pub fn check(cfg: &PolicyConfig) -> Result<(), ConfigError> {
        Gates::shared(cfg).map(|_| ())
    }

    /// `[gates.shell]`: folders not watched around shell commands, and the snapshot size limit.
    pub fn shell(&self) -> &ShellWatchConfig {
        &self.inner.shell
    }

    /// The paths a shell watch neither compares nor restores: `.git/` (a commit's objects are
    /// the repository's bookkeeping, not units of work), the `[gates.shell] skip` folders, the
    /// runs directory, where loopward appends ledgers while commands run, and the adapter's own
    /// state folder ([`Policy::with_own_state`]).
    pub fn unwatched(&self) -> Vec<String> {
        let mut skip = self.inner.shell.skip.clone();
        skip.push(".git".into());
        skip.extend(self.inner.control.runs_dir().map(str::to_string));
        skip.extend(self.inner.own_state.iter().cloned());
        skip
    }

    /// Whether a shell change to `rel` could be refused (a control file, or in a territory), so
    /// a snapshot must keep its content to put it back.
    pub fn watched(&self, rel: &str) -> bool {
        self.inner.control.covers(rel) || self.gates().index.any(rel)
    }

    /// The workspace the policy judges.
    pub fn workspace(&self) -> &Workspace {
        &self.inner.workspace
    }

    /// The override store the policy consumes from.
    pub fn overrides(&self) -> &OverrideStore {
        &self.inner.overrides
    }

    /// The control files.
    pub fn control(&self) -> &ControlFiles {
        &self.inner.control
    }

    pub(super) fn gates(&self) -> Arc<Gates> {
        Arc::clone(&self.inner.gates.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Every gate, the permanent control gate first.
    pub fn list(&self) -> Vec<GateInfo> {
        self.gates().specs()
    }

    /// The `[hooks] allow_tools` entry that lets `tool` run unjudged through a host's hook, and
    /// where it is written; `None` when no entry names it (the hook then denies a tool it does
    /// not know).
    pub fn allowed_unjudged(&self, tool: &str) -> Option<super::AllowedTool> {
        self.gates().allowed_tools.allows(tool)
    }

    /// The version of the policy deciding now: [`PolicyConfig::version`] of the config it was
    /// built from, or of the effective policy after a change at run time.
    pub fn version(&self) -> Arc<str> {
        Arc::clone(&self.gates().version)
    }
}
