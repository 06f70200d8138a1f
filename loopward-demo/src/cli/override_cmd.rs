//! `loopward override grant|list|revoke`: one-shot, logged exceptions to a territory.

use crate::config::{Config, CONFIG_FILE};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// Grant, list or revoke one-shot overrides.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The config file (its workspace holds .loopward/overrides/).
    #[arg(long, global = true, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

/// `override` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Let one agent write one path once, before the TTL runs out.
    #[command(
        after_help = "Example:\n  loopward override grant --agent builder --path plan.md --reason \"fix a typo the planner approved\" --ttl 10m"
    )]
    Grant {
        /// The agent that may write.
        #[arg(long)]
        agent: String,
        /// The one path it may write (workspace-relative).
        #[arg(long)]
        path: String,
        /// Why (required, recorded in the ledger when it is used).
        #[arg(long)]
        reason: String,
        /// How long it stays valid (`10m`, `1h`; at most the config's overrides.max_ttl).
        #[arg(long, default_value = "15m")]
        ttl: humantime::Duration,
    },
    /// List overrides waiting to be used, and the ones used.
    #[command(after_help = "Example:\n  loopward override list")]
    List,
    /// Revoke an unused override.
    #[command(after_help = "Example:\n  loopward override revoke ovr-1a2b3c")]
    Revoke {
        /// Its id (from `override list`).
        id: String,
    },
}

pub(super) fn run(args: Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let _workspace = cfg.workspace_dir(&args.config);
    bail!("overrides need the gates module, which this build does not have yet")
}
