//! `loopward override grant|list|revoke`: one-shot, logged exceptions to a territory.

use anyhow::{Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_core::AgentId;
use loopward_runner::gates::OverrideStore;
use loopward_runner::{SystemClock, Workspace};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Grant, list or revoke one-shot overrides.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward override grant --agent builder --path plan.md --reason \"fix a typo the planner approved\" --ttl 10m
  loopward override list
  loopward override revoke <id>")]
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
    let dir = cfg.workspace_dir(&args.config);
    let ws = Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?;
    let store = OverrideStore::for_workspace(&ws).max_ttl(cfg.overrides.max_ttl);
    let mut out = Printer::stdout();
    match args.action {
        Action::Grant {
            agent,
            path,
            reason,
            ttl,
        } => {
            // Claude Code subagents are judged by their own names, which need not be in the
            // team, and refusals tell them to ask for exactly this grant. A grant for a name no
            // one acts under authorises nothing, so an unknown name is a note, not an error.
            if !cfg.team().iter().any(|a| a.as_str() == agent) {
                out.line(
                    Tone::Dim,
                    format!(
                        "note: {agent} is not an [[agent]] in {} (the team: {}); the grant is usable only by an agent acting under that name, such as a Claude Code subagent",
                        args.config.display(),
                        cfg.team()
                            .iter()
                            .map(AgentId::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            let id = loopward::team::grant_override(
                &dir,
                &agent,
                &path,
                &reason,
                ttl.into(),
                cfg.overrides.max_ttl,
                &SystemClock,
            )?;
            out.line(
                Tone::Ok,
                format!("granted {id}: one write by {agent} to {path}, for the next {ttl}"),
            );
            out.line(
                Tone::Dim,
                "it is consumed by that one write (logged with its reason) and cannot be used again",
            );
        }
        Action::List => {
            let listed = store.list(&SystemClock);
            if listed.is_empty() {
                out.line(
                    Tone::Dim,
                    format!("no overrides in {}", store.dir().display()),
                );
            }
            for l in listed {
                match (&l.sentinel, &l.problem) {
                    (Some(s), None) => out.line(
                        Tone::Ok,
                        format!("{}  {} → {}  usable  ({})", s.id, s.agent, s.path, s.reason),
                    ),
                    (Some(s), Some(p)) => out.line(
                        Tone::Warn,
                        format!("{}  {} → {}  not usable: {p}", s.id, s.agent, s.path),
                    ),
                    (None, p) => out.line(
                        Tone::Refusal,
                        format!("{}  unreadable: {}", l.file, p.as_deref().unwrap_or("?")),
                    ),
                }
            }
        }
        Action::Revoke { id } => {
            store.revoke(&id)?;
            out.line(Tone::Ok, format!("revoked {id}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
