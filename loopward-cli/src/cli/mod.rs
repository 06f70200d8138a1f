//! The `loopward` command line: parsed by clap into flag-for-flag arguments, one module per
//! command, each returning the process exit code.
//!
//! ```
//! use clap::Parser;
//! use loopward_cli::cli::{Cli, Command};
//! let cli = Cli::try_parse_from(["loopward", "verify", "runs/r1"]).unwrap();
//! assert!(matches!(cli.command, Command::Verify(_)));
//! assert!(Cli::try_parse_from(["loopward", "run", "--backend", "carrier-pigeon"]).is_err());
//! ```

pub mod approve;
mod binaries;
pub mod calibrate;
pub mod contain;
mod ending;
pub mod gates;
mod home;
pub mod hook;
mod hook_install;
pub mod init;
pub mod key;
mod loop_client;
pub mod loop_cmd;
mod loop_hooks;
pub mod mcp;
pub mod override_cmd;
pub mod policy;
mod recorded;
pub mod replay;
pub mod report;
#[cfg(feature = "restate")]
pub mod restate;
pub mod run;
pub mod sandbox;
pub mod say;
pub mod serve;
pub mod state;
mod supervisor;
pub mod verify;

pub use run::exit_code;
pub use supervisor::relay as relay_contained_hook;

use clap::{Parser, Subcommand};
use loopward::config::CONFIG_FILE;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// loopward: run LLM agent teams inside an outer loop that keeps them within their rules.
#[derive(Debug, Parser)]
#[command(
    name = "loopward",
    version,
    after_help = "Examples:\n  loopward init && loopward run\n  loopward --config team/loopward.toml run --task \"Add a hello file\"\n  loopward report runs\n  loopward verify runs/<run-id>\n\nEvery command has --help with an example."
)]
pub struct Cli {
    /// The config file, for whichever command follows (default: ./loopward.toml). The same as
    /// that command's own `--config`, which wins when both are given.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Hands the top-level `--config` to the command, where the command was given none of its
    /// own (a command's `--config` left at `loopward.toml` counts as none).
    ///
    /// ```
    /// use clap::Parser;
    /// use loopward_cli::cli::{Cli, Command};
    /// let cli = Cli::try_parse_from(["loopward", "--config", "team/a.toml", "run"]).unwrap();
    /// let Command::Run(run) = cli.with_config().command else { unreachable!() };
    /// assert_eq!(run.config, std::path::Path::new("team/a.toml"));
    /// ```
    #[must_use]
    pub fn with_config(mut self) -> Self {
        let Some(top) = self.config.clone() else {
            return self;
        };
        let set = |c: &mut PathBuf| {
            if c.as_path() == Path::new(CONFIG_FILE) {
                c.clone_from(&top);
            }
        };
        let set_opt = |c: &mut Option<PathBuf>| {
            if c.is_none() {
                *c = Some(top.clone());
            }
        };
        match &mut self.command {
            Command::Init(_) | Command::Mcp(_) => {}
            Command::Verify(a) => set(&mut a.config),
            Command::Key(a) => set(&mut a.config),
            Command::Run(a) => set(&mut a.config),
            Command::Loop(a) => set(&mut a.config),
            Command::Approve(a) | Command::Deny(a) => set(&mut a.config),
            Command::Override(a) => set(&mut a.config),
            Command::Gates(a) => set(&mut a.config),
            Command::Say(a) => set(&mut a.config),
            Command::Serve(a) => set(&mut a.config),
            Command::Policy(a) => set(&mut a.config),
            Command::Report(a) => set_opt(&mut a.config),
            Command::Calibrate(a) => set_opt(&mut a.config),
            Command::Replay(a) => set_opt(&mut a.config),
            Command::Hook(a) => match &mut a.target {
                hook::Target::ClaudeCode { config, .. }
                | hook::Target::Codex { config, .. }
                | hook::Target::Gemini { config, .. }
                | hook::Target::Install { config, .. }
                | hook::Target::Doctor { config, .. } => set(config),
            },
            Command::Contain(a) => set(&mut a.config),
            Command::Sandbox(a) => match &mut a.action {
                sandbox::Action::Exec { config, .. } => set(config),
            },
        }
        self
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented starter loopward.toml and a matching fake script.
    Init(init::Args),
    /// Run the configured team on a task.
    Run(run::Args),
    /// Loop a coding agent (Claude Code) over a task until a verifier passes.
    Loop(loop_cmd::Args),
    /// Approve a run's pending stop-gate, so the run can resume.
    Approve(approve::Args),
    /// Deny a run's pending stop-gate.
    Deny(approve::Args),
    /// Grant, list or revoke one-shot overrides of territories.
    Override(override_cmd::Args),
    /// List, add or remove gates in loopward.toml.
    Gates(gates::Args),
    /// Check that a run's ledger is intact, keyed and anchored.
    Verify(verify::Args),
    /// Show or rotate the ledger keys.
    Key(key::Args),
    /// Governance figures over all runs, computed from the ledgers.
    Report(report::Args),
    /// How often a candidate config's gates would have fired on recorded history.
    Calibrate(calibrate::Args),
    /// Re-run a recorded run offline and check every decision comes out the same.
    Replay(replay::Args),
    /// Answer agent hosts' hooks (Claude Code, Codex, Gemini CLI) with the loopward.toml policy.
    Hook(hook::Args),
    /// Run a command in the kernel sandbox of one agent.
    Sandbox(sandbox::Args),
    /// Which rule decides an action and why; rules that will not do what they seem to.
    Policy(policy::Args),
    /// Run a whole program (claude, codex, a script) inside one agent's sandbox, supervised.
    Contain(contain::Args),
    /// Say something to a running run (taken at its next turn boundary).
    Say(say::Args),
    /// Serve the console: live runs, approvals, overrides and a kill switch in a browser.
    Serve(serve::Args),
    /// Serve loopward's own tools (handoff, report_attempt, say) to a coding-agent session over MCP
    /// on stdio; the session's client starts it, relaying each call to its loop.
    #[command(hide = true)]
    Mcp(mcp::Args),
}

/// Runs a parsed command line; errors are printed by the binary.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Init(a) => init::run(&a),
        Command::Run(a) => run::run(a).await,
        Command::Loop(a) => loop_cmd::run(a).await,
        Command::Approve(a) => approve::run(&a, true).await,
        Command::Deny(a) => approve::run(&a, false).await,
        Command::Override(a) => override_cmd::run(a),
        Command::Gates(a) => gates::run(a),
        Command::Verify(a) => verify::run(&a),
        Command::Key(a) => key::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Calibrate(a) => calibrate::run(&a),
        Command::Replay(a) => replay::run(a).await,
        Command::Hook(a) => hook::run(&a),
        Command::Sandbox(a) => Ok(sandbox::exec(&a).await),
        Command::Contain(a) => contain::run(a).await,
        Command::Say(a) => say::run(&a),
        Command::Serve(a) => serve::run(&a).await,
        Command::Mcp(a) => mcp::run(a).await,
        Command::Policy(a) => policy::run(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every command and sub-command, by its path (`hook install`).
    fn all(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = format!("{path} {}", sub.get_name()).trim().to_string();
            out.push((p.clone(), sub.clone()));
            all(sub, &p, out);
        }
    }

    #[test]
    fn every_help_shows_an_example() {
        let mut cmds = vec![("loopward".to_string(), Cli::command())];
        all(&Cli::command(), "", &mut cmds);
        let missing: Vec<String> = cmds
            .into_iter()
            .filter_map(|(path, mut c)| {
                let help = c.render_long_help().to_string();
                (!help.contains("Example")).then_some(path)
            })
            .collect();
        assert!(missing.is_empty(), "--help without an example: {missing:?}");
    }

    #[test]
    fn config_is_taken_before_or_after_the_command() {
        use super::Command;
        use std::path::Path;
        let before = Cli::try_parse_from_for_test(&["--config", "a.toml", "gates", "list"]);
        let Command::Gates(g) = before.command else {
            unreachable!()
        };
        assert_eq!(g.config, Path::new("a.toml"));
        let both =
            Cli::try_parse_from_for_test(&["--config", "a.toml", "run", "--config", "b.toml"]);
        let Command::Run(r) = both.command else {
            unreachable!()
        };
        assert_eq!(r.config, Path::new("b.toml"), "the command's own wins");
        let replay = Cli::try_parse_from_for_test(&["--config", "a.toml", "replay", "runs/r1"]);
        let Command::Replay(r) = replay.command else {
            unreachable!()
        };
        assert_eq!(r.config.as_deref(), Some(Path::new("a.toml")));
        let hook = Cli::try_parse_from_for_test(&["--config", "a.toml", "hook", "claude-code"]);
        let Command::Hook(h) = hook.command else {
            unreachable!()
        };
        assert!(
            matches!(h.target, super::hook::Target::ClaudeCode { ref config, .. } if config == Path::new("a.toml"))
        );
    }

    impl Cli {
        fn try_parse_from_for_test(args: &[&str]) -> Self {
            use clap::Parser;
            Self::try_parse_from(std::iter::once("loopward").chain(args.iter().copied()))
                .unwrap()
                .with_config()
        }
    }
}
