//! Where the CLI finds loopward's state directory: `$XDG_STATE_HOME`, else `~/.local/state`
//! (read here, in the binary; the libraries read no environment), or the config's `[state] dir`.
//! What `verify`, `report`, `approve`, `override`, `key` and `run` share.

use anyhow::{Context, Result};
use loopward::config::Config;
use loopward::state::{state_base, Custody};
use loopward_runner::audit::{KeyRing, LedgerKey, VerifyOptions};
use std::path::{Path, PathBuf};

/// The base folder of loopward's state, from this process's environment.
pub fn base() -> Option<PathBuf> {
    state_base(|k| std::env::var(k).ok())
}

/// The custody of the config at `config` for writing evidence (creates the key on first use).
pub fn open(cfg: &Config, config: &Path) -> Result<Custody> {
    Custody::open(cfg, config, base().as_deref())
}

/// What a verifier holds and accepts, from the flags every checking command shares.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct CheckArgs {
    /// Also accept runs that are not finished: no anchor yet, or records after the last anchor
    /// (every anchor a run has is still checked).
    #[arg(long)]
    pub unfinished: bool,
    /// Also accept keyless (sha256) ledgers; they prove only that nobody edited them carelessly.
    #[arg(long)]
    pub allow_keyless: bool,
    /// A ledger key file to verify with (a verifier on another machine, or a retired key);
    /// may be given more than once.
    #[arg(long = "key", value_name = "FILE")]
    pub keys: Vec<PathBuf>,
    /// An external witness file: every anchor of the run must be in it, and it may hold no
    /// other (default: the config's `[ledger] witness`).
    #[arg(long, value_name = "FILE")]
    pub witness: Option<PathBuf>,
}

/// The verify options for runs under `runs_dir`: the key ring and index head of the state
/// directory of the config at `config` (when it loads), else of the workspace holding
/// `runs_dir`; plus the keys and witness the flags name.
pub fn verify_options(config: &Path, runs_dir: &Path, args: &CheckArgs) -> Result<VerifyOptions> {
    let mut opts = match config.exists().then(|| Config::load(config)).transpose()? {
        Some(cfg) => {
            let custody = Custody::for_checking(&cfg, config, base().as_deref())?;
            custody.verify_options(runs_dir)?
        }
        None => fallback(runs_dir)?,
    };
    for file in &args.keys {
        let key = LedgerKey::from_file(file, None)
            .with_context(|| format!("--key {}", file.display()))?;
        opts.keys = opts.keys.with(key);
    }
    if let Some(w) = &args.witness {
        opts.witness = Some(w.clone());
    }
    opts.allow_keyless |= args.allow_keyless;
    opts.allow_unfinished |= args.unfinished;
    Ok(opts)
}

/// Without a config: the state directory of the workspace `runs_dir` lies in (its parent, as
/// in the starter layout), if there is one.
fn fallback(runs_dir: &Path) -> Result<VerifyOptions> {
    let workspace = runs_dir
        .canonicalize()
        .ok()
        .and_then(|r| r.parent().map(Path::to_path_buf));
    let (Some(base), Some(ws)) = (base(), workspace) else {
        return Ok(VerifyOptions::keyed(KeyRing::empty()));
    };
    let state = loopward_runner::StateDir::for_workspace(&base, &ws)?;
    let dir = state.root().join("keys");
    let keys = KeyRing::load(&dir)
        .with_context(|| format!("cannot read the ledger keys in {}", dir.display()))?;
    Ok(VerifyOptions::keyed(keys).head(state.index_head(runs_dir)?))
}

/// Verify options for reading recorded history (`calibrate`, `replay`): the keys of the state
/// directory of the config at `config` (or of the workspace holding `runs_dir`) and `keys`;
/// keyless and unfinished runs accepted, tampered ones not.
pub fn history_options(config: &Path, runs_dir: &Path, keys: &[PathBuf]) -> Result<VerifyOptions> {
    let check = CheckArgs {
        unfinished: true,
        allow_keyless: true,
        keys: keys.to_vec(),
        witness: None,
    };
    let mut opts = verify_options(config, runs_dir, &check)?;
    opts.witness = None;
    Ok(opts)
}
