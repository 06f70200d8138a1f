//! `loopward gates list|add|rm`: the gates declared in loopward.toml.

use crate::config::{Config, CONFIG_FILE};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// List, add or remove gates.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
    /// The config file.
    #[arg(long, global = true, default_value = CONFIG_FILE)]
    pub config: PathBuf,
}

/// `gates` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List every gate with its mode.
    #[command(after_help = "Example:\n  loopward gates list")]
    List,
    /// Add a territory or a review gate.
    #[command(
        after_help = "Examples:\n  loopward gates add territory --paths 'docs/**' --owner scribe\n  loopward gates add review --from builder --via auditor --when 'src/**'"
    )]
    Add {
        /// `territory` or `review`.
        #[arg(value_parser = ["territory", "review"])]
        kind: String,
        /// territory: globs.
        #[arg(long, num_args = 1..)]
        paths: Vec<String>,
        /// territory: the owner.
        #[arg(long)]
        owner: Option<String>,
        /// review: the gated agent.
        #[arg(long)]
        from: Option<String>,
        /// review: the reviewer.
        #[arg(long)]
        via: Option<String>,
        /// review: globs that arm it.
        #[arg(long, num_args = 1..)]
        when: Vec<String>,
        /// `enforce` (default) or `advisory`.
        #[arg(long, default_value = "enforce", value_parser = ["enforce", "advisory"])]
        mode: String,
    },
    /// Remove a gate by the name `gates list` shows.
    #[command(after_help = "Example:\n  loopward gates rm territory:planner")]
    Rm {
        /// The gate's name.
        name: String,
    },
}

pub(super) fn run(args: Args) -> Result<ExitCode> {
    let _cfg = Config::load(&args.config)?;
    bail!("gates editing arrives with the gates module")
}
