//! `loopward override grant|list|revoke`: one-shot, logged exceptions to a territory.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward_runner::{SystemClock, Workspace};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
    /// The config file (its state directory holds the sealed overrides).
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
        /// The agent is a Claude Code subagent, acting under its own name (not an `[[agent]]`
        /// of the config).
        #[arg(long)]
        subagent: bool,
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
    Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?;
    let custody = super::state::open(&cfg, &args.config)?;
    let store = custody.overrides()?.max_ttl(cfg.overrides.max_ttl);
    let mut out = Printer::stdout();
    match args.action {
        Action::Grant {
            agent,
            path,
            reason,
            ttl,
            subagent,
        } => {
            loopward::team::check_grantee(&cfg, &args.config, &agent, subagent)?;
            let limit = store.ttl_limit();
            if Duration::from(ttl) > limit {
                bail!(
                    "--ttl {ttl} is longer than the longest override allowed here ({}); nothing was granted. Ask for less, or raise [overrides] max_ttl in {} (at most 24h)",
                    humantime::format_duration(limit),
                    args.config.display()
                );
            }
            let id = loopward::team::grant_override(
                &dir,
                Some(&custody),
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
            let used = store.list_consumed();
            if listed.is_empty() && used.is_empty() {
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
            for s in used {
                out.line(
                    Tone::Dim,
                    format!("{}  {} → {}  used  ({})", s.id, s.agent, s.path, s.reason),
                );
            }
        }
        Action::Revoke { id } => {
            let waiting = store
                .list(&SystemClock)
                .into_iter()
                .any(|l| l.file == format!("{id}.json"));
            if !waiting {
                let used = store.list_consumed().into_iter().any(|s| s.id == id);
                bail!(
                    "{}; see `loopward override list`",
                    if used {
                        format!("override {id} was already used; a used override cannot be revoked")
                    } else {
                        format!("there is no override {id} in {}", store.dir().display())
                    }
                );
            }
            store.revoke(&id)?;
            out.line(Tone::Ok, format!("revoked {id}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}
