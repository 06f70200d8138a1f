//! loopward's state directory and the evidence kept there: where the ledger keys, the sealed
//! approvals and overrides, the index head and the Claude Code hook's sessions live, outside the
//! workspace, where no agent writes.
//!
//! The library reads no environment: the binary looks up `$XDG_STATE_HOME` / `$HOME` and passes
//! the base it found ([`state_base`]); a config may name its state directory explicitly
//! (`[state] dir`). [`Custody`] is what a run, `verify`, `approve` and `override` share: the
//! state directory, the key ring, and how ledgers are chained.
//!
//! ```
//! use loopward::config::Config;
//! use loopward::state::{state_base, Custody};
//! let home = tempfile::tempdir().unwrap();
//! let ws = tempfile::tempdir().unwrap();
//! let config = ws.path().join("loopward.toml");
//! let cfg = Config::parse(&config, "[run]\nfirst = \"a\"\n[[agent]]\nname = \"a\"\ntools = []\n").unwrap();
//! // `$XDG_STATE_HOME` unset: `~/.local/state`.
//! let home_str = home.path().to_str().unwrap().to_string();
//! let base = state_base(|k| (k == "HOME").then(|| home_str.clone())).unwrap();
//! assert_eq!(base, home.path().join(".local/state"));
//! // The first use creates the ledger key (0600), outside the workspace.
//! let custody = Custody::open(&cfg, &config, Some(&base)).unwrap();
//! let key = custody.keys().current().unwrap().id().clone();
//! assert!(custody.state().root().starts_with(&base));
//! assert!(!custody.state().root().starts_with(ws.path()));
//! // The same workspace finds the same key again.
//! assert_eq!(Custody::open(&cfg, &config, Some(&base)).unwrap().keys().current().unwrap().id(), &key);
//! ```

use crate::config::{ChainKind, Config};
use anyhow::{bail, Context, Result};
use loopward_runner::audit::{KeyRing, LedgerKey, LedgerOptions, VerifyOptions};
use loopward_runner::gates::OverrideStore;
use loopward_runner::inbox::HumanInbox;
use loopward_runner::layers::stopgate::ApprovalStore;
use loopward_runner::stop::StopRequests;
use loopward_runner::{Clock, StateDir};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The base folder of loopward's state from the environment `env` gives: `$XDG_STATE_HOME`
/// when set to an absolute path, else `$HOME/.local/state`; `None` when neither is usable.
/// Pass `|k| std::env::var(k).ok()` from a binary.
pub fn state_base(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |v: String| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    env("XDG_STATE_HOME").and_then(absolute).or_else(|| {
        env("HOME")
            .and_then(absolute)
            .map(|h| h.join(".local/state"))
    })
}

/// The state directory of the workspace of the config at `config_path`: the config's
/// `[state] dir` when it names one, else `<base>/loopward/<workspace id>/`. A state directory
/// inside the workspace is refused: agents can write there.
pub fn state_dir(cfg: &Config, config_path: &Path, base: Option<&Path>) -> Result<StateDir> {
    let workspace = cfg.workspace_dir(config_path);
    let state = match (&cfg.state.dir, base) {
        (Some(dir), _) => {
            let dir = Config::resolve(config_path, dir);
            StateDir::at(&dir).with_context(|| {
                format!(
                    "{}: [state] dir = {}",
                    config_path.display(),
                    dir.display()
                )
            })?
        }
        (None, Some(base)) => StateDir::for_workspace(base, &workspace)?,
        (None, None) => bail!(
            "cannot find loopward's state directory (where the ledger key is kept): neither $XDG_STATE_HOME nor $HOME is set to an absolute path; set one, or name a folder outside the workspace in {} as [state] dir = \"/path\"",
            config_path.display()
        ),
    };
    outside_workspace(
        config_path,
        &workspace,
        state.root(),
        "the state directory",
        "set [state] dir to a folder outside it",
    )?;
    Ok(state)
}

/// What no agent-driven process may read, for a workspace whose state directory is `state`:
/// `<base>/loopward/` (the state of every project in the default layout) when the base is
/// known, and `state` itself when it lies elsewhere (`[state] dir`). A `[state] dir` of another
/// project outside the base is not known here: keep such folders under one base, or list them.
pub fn unreadable(state: &Path, base: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = base.map(|b| b.join("loopward")).into_iter().collect();
    if !dirs.iter().any(|d| state.starts_with(d)) {
        dirs.push(state.to_path_buf());
    }
    dirs
}

/// Refuses `path` (a host path loopward itself writes: the state directory, the witness) when
/// it lies inside `workspace`, where agents can write. Links are resolved as far as they exist.
fn outside_workspace(
    config_path: &Path,
    workspace: &Path,
    path: &Path,
    what: &str,
    fix: &str,
) -> Result<()> {
    let real = |p: &Path| {
        p.canonicalize().unwrap_or_else(|_| {
            match (
                p.parent().and_then(|d| d.canonicalize().ok()),
                p.file_name(),
            ) {
                (Some(dir), Some(name)) => dir.join(name),
                _ => p.to_path_buf(),
            }
        })
    };
    let ws = real(workspace);
    if real(path).starts_with(&ws) {
        bail!(
            "{}: {what} {} lies inside the workspace {}, where agents can write; {fix}",
            config_path.display(),
            path.display(),
            ws.display()
        );
    }
    Ok(())
}

/// What a workspace's evidence is kept under: its state directory, its key ring, how its
/// ledgers are chained, and its external witness.
#[derive(Clone, Debug)]
pub struct Custody {
    state: StateDir,
    keys: KeyRing,
    chain: ChainKind,
    witness: Option<PathBuf>,
    unreadable: Vec<PathBuf>,
}

impl Custody {
    /// Opens the custody of the config at `config_path` for writing evidence: the state
    /// directory ([`state_dir`]) and its key ring, creating the first key (0600) when there is
    /// none and the config keeps ledgers keyed (what `loopward init` and `loopward run` do).
    pub fn open(cfg: &Config, config_path: &Path, base: Option<&Path>) -> Result<Self> {
        let state = state_dir(cfg, config_path, base)?;
        let dir = state.sub("keys")?;
        let keys = match cfg.ledger.chain {
            ChainKind::HmacSha256 => KeyRing::load_or_create(&dir),
            ChainKind::Sha256 => KeyRing::load(&dir),
        }
        .with_context(|| format!("cannot open the ledger keys in {}", dir.display()))?;
        Self::with(state, keys, cfg, config_path, base)
    }

    /// Opens the custody for checking evidence only: the key ring as it is (no key is created).
    pub fn for_checking(cfg: &Config, config_path: &Path, base: Option<&Path>) -> Result<Self> {
        let state = state_dir(cfg, config_path, base)?;
        let dir = state.root().join("keys");
        let keys = KeyRing::load(&dir)
            .with_context(|| format!("cannot read the ledger keys in {}", dir.display()))?;
        Self::with(state, keys, cfg, config_path, base)
    }

    /// Custody in `state` with `keys`, chained as `chain` (for embedders and tests).
    pub fn new(state: StateDir, keys: KeyRing, chain: ChainKind) -> Self {
        let unreadable = vec![state.root().to_path_buf()];
        Self {
            state,
            keys,
            chain,
            witness: None,
            unreadable,
        }
    }

    /// A witness inside the workspace is refused: an agent could rewrite it with the ledger.
    fn with(
        state: StateDir,
        keys: KeyRing,
        cfg: &Config,
        config_path: &Path,
        base: Option<&Path>,
    ) -> Result<Self> {
        let witness = cfg
            .ledger
            .witness
            .as_ref()
            .map(|w| Config::resolve(config_path, w));
        if let Some(w) = &witness {
            outside_workspace(
                config_path,
                &cfg.workspace_dir(config_path),
                w,
                "the witness",
                "set [ledger] witness to an append-only file outside it (another disk, a mounted log)",
            )?;
        }
        let unreadable = unreadable(state.root(), base);
        Ok(Self {
            state,
            keys,
            chain: cfg.ledger.chain,
            witness,
            unreadable,
        })
    }

    /// Adds an external witness file (`[ledger] witness`).
    pub fn witness(mut self, witness: impl Into<PathBuf>) -> Self {
        self.witness = Some(witness.into());
        self
    }

    /// The state directory.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// The folders no agent-driven process may read: every project's state under the state
    /// base (`<base>/loopward/`, where the default layout keeps each workspace's keys, sessions
    /// and sealed stores), and this workspace's own state directory when `[state] dir` puts it
    /// elsewhere. A sandboxed command gets these as its unreadable folders, so one project's
    /// agent cannot take another project's ledger key.
    pub fn unreadable(&self) -> &[PathBuf] {
        &self.unreadable
    }

    /// The key ring.
    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// How ledgers are chained.
    pub fn chain(&self) -> ChainKind {
        self.chain
    }

    /// The external witness, if any.
    pub fn witness_file(&self) -> Option<&Path> {
        self.witness.as_deref()
    }

    /// The file keeping the last line of `runs_dir`'s index (see [`StateDir::index_head`]).
    pub fn index_head(&self, runs_dir: &Path) -> Result<PathBuf> {
        Ok(self.state.index_head(runs_dir)?)
    }

    /// The workspace's inbox for a person's messages (`loopward say`), sealed under the current
    /// ledger key so that only a holder of the key can speak into a run (keyless: unsealed).
    pub fn inbox(&self, workspace: &Path) -> Result<HumanInbox> {
        let inbox = HumanInbox::for_workspace(workspace);
        Ok(match self.ledger_key()? {
            Some(_) => inbox.keyed(self.keys.clone()),
            None => inbox,
        })
    }

    /// The key new ledgers are chained under (`None`: keyless, the config's opt-out).
    pub fn ledger_key(&self) -> Result<Option<LedgerKey>> {
        match self.chain {
            ChainKind::Sha256 => Ok(None),
            ChainKind::HmacSha256 => match self.keys.current() {
                Some(k) => Ok(Some(k.clone())),
                None => bail!(
                    "no current ledger key in {}: run `loopward init` to create one",
                    self.state.root().join("keys").display()
                ),
            },
        }
    }

    /// Options for a new ledger under `runs_dir`: chained under the current key, anchored into
    /// the index with its head kept here, copied to the witness, stamped by `clock`, writing
    /// `audit.html` when it finishes ([`loopward_pages::pages`]).
    pub fn ledger_options(&self, runs_dir: &Path, clock: Arc<dyn Clock>) -> Result<LedgerOptions> {
        Ok(LedgerOptions {
            key: self.ledger_key()?,
            index_head: Some(self.index_head(runs_dir)?),
            witness: self.witness.clone(),
            clock,
            pages: loopward_pages::pages(),
            ..LedgerOptions::default()
        })
    }

    /// Options to reopen the ledger in `run_dir` (to resume it): chained under the key its
    /// first record names (an old key after a rotation), or keyless when it is keyless.
    pub fn reopen_options(&self, run_dir: &Path, clock: Arc<dyn Clock>) -> Result<LedgerOptions> {
        let runs_dir = run_dir.parent().unwrap_or(Path::new("."));
        let mut opts = self.ledger_options(runs_dir, clock)?;
        let path = run_dir.join(loopward_runner::audit::EVENTS_FILE);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let Ok((record, _)) = loopward_runner::audit::Record::parse_line(first) else {
            return Ok(opts); // empty or torn: nothing recorded under any key yet
        };
        opts.key = match record.ledger.and_then(|h| h.key) {
            None => None,
            Some(id) => Some(self.keys.get(&id).cloned().with_context(|| {
                format!(
                    "{} is chained under key {id}, which {} does not hold; put that key file back in the folder to resume the run",
                    path.display(),
                    self.state.root().join("keys").display()
                )
            })?),
        };
        Ok(opts)
    }

    /// Strict verification of the runs under `runs_dir` with this ring, the index head and the
    /// witness (no keyless chains, no unfinished runs; loosen with [`VerifyOptions`]'s fields).
    /// A keyless config accepts keyless chains.
    pub fn verify_options(&self, runs_dir: &Path) -> Result<VerifyOptions> {
        let mut opts = VerifyOptions::keyed(self.keys.clone()).head(self.index_head(runs_dir)?);
        opts.allow_keyless = self.chain == ChainKind::Sha256;
        opts.witness.clone_from(&self.witness);
        Ok(opts)
    }

    /// The override store: sealed grants in `<state>/overrides/`.
    pub fn overrides(&self) -> Result<OverrideStore> {
        let store = OverrideStore::new(self.state.sub("overrides")?);
        Ok(match self.chain {
            ChainKind::HmacSha256 => store.keyed(self.sealing_keys()?),
            ChainKind::Sha256 => store,
        })
    }

    /// The stop-gate approvals: sealed records in `<state>/pending/`.
    pub fn approvals(&self) -> Result<ApprovalStore> {
        let store = ApprovalStore::new(self.state.sub("pending")?);
        Ok(match self.chain {
            ChainKind::HmacSha256 => store.keyed(self.sealing_keys()?),
            ChainKind::Sha256 => store,
        })
    }

    /// A person's requests to stop runs (the console's kill switch): sealed records in
    /// `<state>/stops/`, taken by each run at its next turn boundary.
    pub fn stops(&self) -> Result<StopRequests> {
        let store = StopRequests::folder(self.state.sub("stops")?);
        Ok(match self.chain {
            ChainKind::HmacSha256 => store.keyed(self.sealing_keys()?),
            ChainKind::Sha256 => store,
        })
    }

    fn sealing_keys(&self) -> Result<KeyRing> {
        self.ledger_key()?;
        Ok(self.keys.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Config {
        Config::parse(
            "t.toml",
            &format!("[run]\nfirst = \"a\"\n[[agent]]\nname = \"a\"\ntools = []\n{extra}"),
        )
        .unwrap()
    }

    #[test]
    fn xdg_state_home_wins_over_home_and_relative_paths_are_ignored() {
        let env = |k: &str| match k {
            "XDG_STATE_HOME" => Some("/x/state".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(state_base(env), Some(PathBuf::from("/x/state")));
        let env = |k: &str| match k {
            "XDG_STATE_HOME" => Some("relative".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(state_base(env), Some(PathBuf::from("/home/u/.local/state")));
        assert_eq!(state_base(|_| None), None);
    }

    #[test]
    fn a_state_dir_inside_the_workspace_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let config = ws.path().join("loopward.toml");
        let err = state_dir(&cfg("[state]\ndir = \"st\"\n"), &config, None).unwrap_err();
        assert!(
            format!("{err:#}").contains("inside the workspace"),
            "{err:#}"
        );
    }

    #[test]
    fn a_witness_inside_the_workspace_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let st = tempfile::tempdir().unwrap();
        let config = ws.path().join("loopward.toml");
        let state = format!(
            "[state]\ndir = {:?}\n",
            st.path().join("s").display().to_string()
        );
        let inside = cfg(&format!(
            "{state}[ledger]\nwitness = \"logs/anchors.jsonl\"\n"
        ));
        let err = Custody::open(&inside, &config, None).unwrap_err();
        assert!(
            format!("{err:#}").contains("the witness")
                && format!("{err:#}").contains("inside the workspace"),
            "{err:#}"
        );
        let elsewhere = st.path().join("w.jsonl");
        let outside = cfg(&format!(
            "{state}[ledger]\nwitness = {:?}\n",
            elsewhere.display().to_string()
        ));
        let c = Custody::open(&outside, &config, None).unwrap();
        assert_eq!(c.witness_file(), Some(elsewhere.as_path()));
    }

    #[test]
    fn no_base_and_no_config_dir_says_what_to_set() {
        let ws = tempfile::tempdir().unwrap();
        let err = state_dir(&cfg(""), &ws.path().join("loopward.toml"), None).unwrap_err();
        assert!(format!("{err}").contains("[state] dir"), "{err}");
    }

    #[test]
    fn a_named_state_dir_is_used_as_is_and_keyless_creates_no_key() {
        let ws = tempfile::tempdir().unwrap();
        let st = tempfile::tempdir().unwrap();
        let text = format!(
            "[state]\ndir = {:?}\n[ledger]\nchain = \"sha256\"\n",
            st.path().join("s").display().to_string()
        );
        let c = Custody::open(&cfg(&text), &ws.path().join("loopward.toml"), None).unwrap();
        assert_eq!(c.state().root(), st.path().join("s"));
        assert!(c.keys().current().is_none());
        assert!(c.ledger_key().unwrap().is_none());
        assert!(c.verify_options(ws.path()).unwrap().allow_keyless);
    }
}
