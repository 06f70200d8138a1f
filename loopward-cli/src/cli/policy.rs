//! `loopward policy explain|lint`: which rule of loopward.toml decides an action and why, by the
//! same engine every enforcement point asks; and what in the config will not do what it seems
//! to.
//!
//! Each answer names the policy's version — the first 12 hex digits of the SHA-256 of the
//! effective policy (territories, gates, overrides) as the engine reads it — and, for each
//! rule, its source (`loopward.toml:<line>`), so an answer can be matched to the config it came
//! from.

mod lint;

use super::hook::HostArg;
use anyhow::{Context, Result};
use loopward::config::Config;
use loopward_core::{AgentId, AuditEvent, Decision};
use loopward_runner::gates::{Ask, GateSpec, Host, Policy, SprawlTracker};
use loopward_runner::sandbox::SandboxMode;
use loopward_runner::tool::Access;
use loopward_runner::{SystemClock, Workspace};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;

/// Explain a decision, or check the config for rules that will not do what they seem to.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  loopward policy explain --agent builder --write plans/roadmap.md --host codex\n  loopward policy lint"
)]
pub struct Args {
    /// The config file; its folder is the workspace.
    #[arg(long, default_value = "loopward.toml")]
    pub config: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `policy` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Which rule decides an agent's write or command, and why.
    #[command(
        after_help = "Examples:\n  loopward policy explain --agent builder --write plans/roadmap.md\n  loopward policy explain --agent builder --command \"make test\""
    )]
    Explain {
        /// The acting agent (a subagent's name on Claude Code and Codex).
        #[arg(long)]
        agent: String,
        /// A workspace-relative path the agent would write.
        #[arg(long, required_unless_present = "command", conflicts_with = "command")]
        write: Option<String>,
        /// A shell command the agent would run.
        #[arg(long)]
        command: Option<String>,
        /// The host whose remedies the refusal names (default: the runner's).
        #[arg(long, value_enum)]
        host: Option<HostArg>,
    },
    /// Rules that will not do what they seem to (exit 1 when any is found).
    #[command(after_help = "Example:\n  loopward policy lint --config loopward.toml")]
    Lint,
}

/// Where each gate is written: its rule's `loopward.toml:<line>` (the source every decision it
/// makes records), or why it has none.
struct Sources {
    file: String,
    text: String,
}

impl Sources {
    /// The line of the first line starting with `header` (a section with no rule of its own).
    fn header(&self, header: &str) -> Option<String> {
        self.text
            .lines()
            .position(|l| l.trim_start().starts_with(header))
            .map(|i| format!("{}:{}", self.file, i + 1))
    }

    /// The line of the `n`th (from 0) line starting with `header`: the `n`th table of an array
    /// (`[[stopgate]]`, `[[agent]]`), which keep no source of their own.
    fn nth(&self, header: &str, n: usize) -> Option<String> {
        self.text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with(header))
            .nth(n)
            .map(|(i, _)| format!("{}:{}", self.file, i + 1))
    }

    /// The source of the gate named `gate`.
    fn of(gate: &str, policy: &Policy) -> String {
        let spec = policy
            .list()
            .into_iter()
            .find(|g| g.name == gate)
            .and_then(|g| g.spec);
        let source = match &spec {
            Some(GateSpec::Territory(t)) => t.source.as_str(),
            Some(GateSpec::Review(r)) => r.source.as_str(),
            Some(GateSpec::Sprawl(s)) => {
                Some(s.source.as_str().unwrap_or("default [gates.sprawl]"))
            }
            _ => None,
        };
        source.unwrap_or("built in").to_string()
    }
}

pub(super) fn run(args: &Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)?;
    let dir = cfg.workspace_dir(&args.config);
    let ws = Workspace::new(&dir)
        .with_context(|| format!("cannot use {} as the workspace", dir.display()))?;
    let sources = Sources {
        file: args
            .config
            .file_name()
            .map_or("loopward.toml".into(), |n| n.to_string_lossy().into_owned()),
        text: std::fs::read_to_string(&args.config)
            .with_context(|| format!("reading {}", args.config.display()))?,
    };
    let policy_cfg = cfg.policy();
    let mut out = Printer::stdout();
    out.line(
        Tone::Dim,
        format!(
            "policy {} (SHA-256 of the effective territories, gates and overrides of {})",
            policy_cfg.version(),
            args.config.display()
        ),
    );
    match &args.action {
        Action::Explain {
            agent,
            write,
            command,
            host,
        } => {
            let agent = AgentId::new(agent.clone()).context("--agent")?;
            let host = host.map_or(Host::Runner, HostArg::host);
            // The overrides a person granted are in the sealed store of the state directory.
            let custody = super::state::open(&cfg, &args.config)?;
            let policy = Policy::from_config(&policy_cfg, ws)?
                .with_overrides(custody.overrides()?.max_ttl(cfg.overrides.max_ttl))
                .with_team(cfg.team())
                .with_host(host);
            match (write, command) {
                (Some(path), _) => explain_write(&mut out, &policy, &agent, path),
                (_, Some(cmd)) => {
                    explain_command(&mut out, &policy, &agent, cmd);
                    Ok(ExitCode::SUCCESS)
                }
                _ => unreachable!("clap requires --write or --command"),
            }
        }
        Action::Lint => lint::lint(&mut out, &cfg, &args.config, &sources, ws),
    }
}

fn explain_write<W: std::io::Write>(
    out: &mut Printer<W>,
    policy: &Policy,
    agent: &AgentId,
    raw: &str,
) -> Result<ExitCode> {
    let path = policy
        .workspace()
        .resolve(raw)
        .with_context(|| format!("{raw}: not a path loopward can judge"))?;
    let accesses = [Access::Write(path.clone())];
    let action = loopward_core::Action::tool("write_file");
    let ask = Ask {
        agent,
        call_id: None,
        action: &action,
        accesses: &accesses,
        effects: &[],
        handoff_stands: false,
        team: &[],
        clock: &SystemClock,
    };
    // Decided, not judged: nothing is consumed, nothing recorded.
    let judgement = policy.decide(&ask, &SprawlTracker::default());
    out.line(Tone::Plain, format!("{agent} writing {}:", path.rel()));
    for e in &judgement.events {
        let AuditEvent::GateDecision {
            gate,
            decision,
            source,
            ..
        } = e
        else {
            continue;
        };
        let name = gate.name.to_string();
        // The source the ledger would record, else why there is none.
        let source = source
            .as_deref()
            .map_or_else(|| Sources::of(&name, policy), str::to_string);
        let (tone, word) = match decision {
            Decision::Allow => (Tone::Ok, "allow"),
            Decision::Override { .. } => (Tone::Ok, "override"),
            Decision::Warn(_) => (Tone::Refusal, "warn"),
            Decision::Deny(_) => (Tone::Refusal, "deny"),
        };
        out.line(tone, format!("  {word:<8} {name:<24} {source}"));
        match decision {
            Decision::Deny(r) | Decision::Warn(r) => {
                out.line(Tone::Dim, format!("           {}", r.reason));
                out.line(Tone::Dim, format!("           what to do: {}", r.hint));
            }
            Decision::Override { id, reason } => out.line(
                Tone::Dim,
                format!("           one-shot override {id} (\"{reason}\") would be used up"),
            ),
            _ => {}
        }
    }
    Ok(match &judgement.denial {
        None => {
            out.line(Tone::Ok, "decision: allow");
            ExitCode::SUCCESS
        }
        Some(r) => {
            out.line(Tone::Refusal, format!("decision: deny ({})", r.gate));
            ExitCode::from(1)
        }
    })
}

fn explain_command<W: std::io::Write>(
    out: &mut Printer<W>,
    policy: &Policy,
    agent: &AgentId,
    cmd: &str,
) {
    out.line(
        Tone::Plain,
        format!("{agent} running `{cmd}`: judged by what it changes, not by its words"),
    );
    let sandbox = match policy.shell().sandbox {
        SandboxMode::WatchOnly => "no kernel sandbox (`sandbox = \"watch-only\"`): changes are only compared and put back afterwards",
        _ => "in the kernel sandbox (Landlock) of the agent: writes outside its grants fail",
    };
    out.line(Tone::Dim, format!("  runs {sandbox}"));
    let (mut own, mut others) = (vec![], vec![]);
    for g in policy.list() {
        let Some(GateSpec::Territory(t)) = &g.spec else {
            continue;
        };
        let owners: Vec<&str> = t
            .owner
            .iter()
            .chain(&t.owners)
            .map(String::as_str)
            .collect();
        let line = format!(
            "{} {} ({})",
            g.name,
            t.paths.join(", "),
            Sources::of(&g.name, policy)
        );
        if owners.contains(&agent.as_str()) {
            own.push(line);
        } else {
            others.push(line);
        }
    }
    out.line(
        Tone::Ok,
        format!(
            "  may write: unclaimed paths{}",
            own.iter().map(|l| format!("; {l}")).collect::<String>()
        ),
    );
    for l in &others {
        out.line(Tone::Refusal, format!("  read-only: {l}"));
    }
    out.line(
        Tone::Refusal,
        "  read-only: control files (.loopward/, .claude/, .codex/, .gemini/, the config, the runs folder; built in)",
    );
    out.line(
        Tone::Dim,
        format!(
            "  not compared afterwards: {}",
            policy.unwatched().join(", ")
        ),
    );
    out.line(
        Tone::Dim,
        "  a write it may not make is refused by the kernel, or put back and reported by the watch",
    );
}
