//! Planning a confinement: which paths of the workspace a command may write.

use super::{Network, Reach, SandboxError};
use crate::gates::{ControlFiles, Territory};
use crate::workspace::Workspace;
use loopward_core::{AgentId, GateMode};
use std::path::{Path, PathBuf};

/// The most grants one plan may hold before it fails closed (a mixed directory with this many
/// entries is not worth a sandbox of this shape; list it under a territory or move files).
pub const MAX_GRANTS: usize = 20_000;

/// What a command may not write: the control files and other agents' enforced territories.
#[derive(Clone, Debug)]
pub struct Protected {
    control: ControlFiles,
    foreign: Vec<Territory>,
    own_dirs: Vec<String>,
}

impl Protected {
    /// Protects `control` and every territory in `read_only`.
    pub fn new(control: ControlFiles, read_only: Vec<Territory>) -> Self {
        Self {
            control,
            foreign: read_only,
            own_dirs: vec![],
        }
    }

    /// What `agent` may not write: the control files and the enforced territories it does not
    /// own. The folders its own territories name (`src` for `src/**`) are created before a
    /// plan, so a command can write in them even when their parent is mixed.
    pub fn for_agent(control: ControlFiles, territories: &[Territory], agent: &AgentId) -> Self {
        let foreign = territories
            .iter()
            .filter(|t| !t.owned_by(agent) && t.mode() == GateMode::Enforce)
            .cloned()
            .collect();
        let own_dirs = territories
            .iter()
            .filter(|t| t.owned_by(agent))
            .flat_map(|t| t.config().paths.clone())
            .filter_map(|p| {
                let lit = crate::gates::territory_literal_prefix(&p);
                let whole = p.trim_end_matches('/').split('/').count();
                // Only a folder the pattern reaches into (`src/**`, `docs/*.md`), never a file
                // it names exactly.
                (!lit.is_empty() && lit.len() < whole).then(|| lit.join("/"))
            })
            .collect();
        Self {
            control,
            foreign,
            own_dirs,
        }
    }

    /// What `agent` may not write under the territories of a `loopward.toml` policy.
    pub fn from_policy(
        control: ControlFiles,
        policy: &crate::gates::PolicyConfig,
        agent: &AgentId,
    ) -> Result<Self, crate::gates::ConfigError> {
        let territories = policy
            .territory
            .iter()
            .map(Territory::from_config)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::for_agent(control, &territories, agent))
    }

    /// Whether the canonical workspace-relative `rel` is itself protected (a control path or
    /// below one, or in a read-only territory).
    pub fn holds(&self, rel: &str) -> bool {
        self.control.paths().iter().any(|c| {
            rel == c
                || rel
                    .strip_prefix(c.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        }) || self.foreign.iter().any(|t| t.covers(rel))
    }

    /// Whether some path at or below the directory `dir` is (or, once created, would be)
    /// protected.
    pub fn may_hold_below(&self, dir: &str) -> bool {
        dir.is_empty()
            || self.control.covers(dir)
            || self.foreign.iter().any(|t| t.may_hold_below(dir))
    }
}

/// One path a confined command may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Workspace-relative (`""` never: the root is always mixed).
    pub rel: String,
    /// A directory granted with everything below it; otherwise one regular file.
    pub tree: bool,
}

/// The planned sandbox of one command: the workspace paths it may write, and paths outside the
/// workspace it may also write (a scratch folder, `/dev/null`). It may read only the workspace
/// and what its [`Reach`] allows, never the [unreadable](Confinement::with_unreadable) folders
/// (loopward's state), and it starts with the reach's environment only.
#[derive(Clone, Debug)]
pub struct Confinement {
    root: PathBuf,
    grants: Vec<Grant>,
    outside: Vec<PathBuf>,
    unreadable: Vec<PathBuf>,
    reach: Reach,
    network: Network,
    proxy_env: Vec<(String, String)>,
}

impl Confinement {
    /// Plans the confinement of a command in `ws` that may not write what `protected` holds.
    /// Creates the folders of the agent's own territories first (see [`Protected::for_agent`]).
    pub fn plan(ws: &Workspace, protected: &Protected) -> Result<Self, SandboxError> {
        let root = ws.root().to_path_buf();
        for dir in &protected.own_dirs {
            if !protected.holds(dir) {
                create_real_dirs(&root, dir)?;
            }
        }
        let mut grants = Vec::new();
        walk(&root, "", protected, &mut grants)?;
        Ok(Self {
            root,
            grants,
            outside: ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"]
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            unreadable: vec![],
            reach: Reach::default(),
            network: Network::default(),
            proxy_env: vec![],
        })
    }

    /// Also sets `name` to `template` with `{proxy}` replaced by the egress proxy's URL in the
    /// command's network (`http://127.0.0.1:<port>`): a model API's base URL served by the
    /// proxy's gateway. Only with an isolated network.
    pub fn with_proxy_env(mut self, name: &str, template: &str) -> Self {
        self.proxy_env.push((name.into(), template.into()));
        self
    }

    /// The variables [`with_proxy_env`](Self::with_proxy_env) set.
    pub fn proxy_env(&self) -> &[(String, String)] {
        &self.proxy_env
    }

    /// Sets how the command reaches the network (default [`Network::Isolated`]).
    pub fn with_network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// How the command reaches the network.
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Sets what the command may read besides what it may write, and the environment it starts
    /// with (default [`Reach::default`]: the workspace and the system folders; `PATH` only).
    pub fn with_reach(mut self, reach: Reach) -> Self {
        self.network = reach.network_mode().clone();
        self.reach = reach;
        self
    }

    /// What the command may read and the environment it starts with.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Gives `cmd` exactly the planned environment: everything its caller's environment held
    /// is dropped first. Set variables of the call's own (`TMPDIR`, `HOME`) afterwards.
    pub fn apply_env(&self, cmd: &mut std::process::Command) {
        cmd.env_clear();
        cmd.envs(self.reach.environment().iter().map(|(k, v)| (k, v)));
    }

    /// Also keeps the command from reading anything at or below `path` (absolute; it need not
    /// exist yet): loopward's ledger keys. Its names can still be listed; its files cannot be
    /// opened, run or mapped.
    pub fn with_unreadable(mut self, path: PathBuf) -> Self {
        self.unreadable.push(path);
        self
    }

    /// The folders the command may not read.
    pub fn unreadable(&self) -> &[PathBuf] {
        &self.unreadable
    }

    /// Also lets the command write `path` (outside the workspace: a scratch folder).
    pub fn with_outside(mut self, path: PathBuf) -> Self {
        self.outside.push(path);
        self
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace grants.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// Paths outside the workspace the command may write.
    pub fn outside(&self) -> &[PathBuf] {
        &self.outside
    }

    /// The writable workspace paths, folders with a trailing `/`, for messages.
    pub fn writable_rel(&self) -> Vec<String> {
        self.grants
            .iter()
            .map(|g| {
                if g.tree {
                    format!("{}/", g.rel)
                } else {
                    g.rel.clone()
                }
            })
            .collect()
    }

    /// A short account of the sandbox for the model: where the command could write.
    pub fn describe(&self) -> String {
        let all = self.writable_rel();
        let shown: Vec<&str> = all.iter().take(12).map(String::as_str).collect();
        let more = all.len().saturating_sub(shown.len());
        let list = if shown.is_empty() {
            "nothing in the workspace".to_string()
        } else if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        };
        format!(
            "sandbox: this command could write only {list} (plus $TMPDIR); other agents' territories and loopward's files are read-only to it, and so is creating new entries directly in a folder that holds them.\nWhat to do: make new files there with the file tools; hand changes to another agent's files to their owner with the handoff tool"
        )
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `root/rel` folder by folder, refusing to pass through a link or a non-folder.
fn create_real_dirs(root: &Path, rel: &str) -> Result<(), SandboxError> {
    let mut at = root.to_path_buf();
    for c in rel.split('/') {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            // A link or a file where the folder would be: leave it; it is simply not granted.
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
                Err(e) => return Err(io(&at)(e)),
            },
            Err(e) => return Err(io(&at)(e)),
        }
    }
    Ok(())
}

fn walk(
    root: &Path,
    dir: &str,
    protected: &Protected,
    grants: &mut Vec<Grant>,
) -> Result<(), SandboxError> {
    let abs = if dir.is_empty() {
        root.to_path_buf()
    } else {
        root.join(dir)
    };
    let mut entries = std::fs::read_dir(&abs)
        .map_err(io(&abs))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(&abs))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        // A name that is not UTF-8 cannot be judged by the territories: it stays read-only.
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let rel = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        if protected.holds(&rel) {
            continue;
        }
        let ft = e.file_type().map_err(io(&e.path()))?;
        if ft.is_dir() {
            if protected.may_hold_below(&rel) {
                walk(root, &rel, protected, grants)?;
                continue;
            }
            grants.push(Grant { rel, tree: true });
        } else if ft.is_file() {
            grants.push(Grant { rel, tree: false });
        }
        // Links and special files are not granted: a write through a link is checked by the
        // kernel where it lands.
        if grants.len() > MAX_GRANTS {
            return Err(SandboxError::Io {
                path: abs,
                source: std::io::Error::other(format!(
                    "more than {MAX_GRANTS} separate writable paths next to protected ones; give the big folder to a territory or move the protected files out of it"
                )),
            });
        }
    }
    Ok(())
}
