//! `loopward hook claude-code|codex|gemini`: answers one hook event of that agent host with the
//! loopward.toml policy; `hook install|doctor --host …` put the hook in place and check it.
//!
//! A thin wrapper: reads the event on stdin, loads the config, and hands both to
//! [`loopward_hooks::handle`], which decides. Whatever goes wrong here (an unreadable
//! config, stdin that is not UTF-8) also blocks: exit status 2 with the reason on stderr, which
//! Claude Code treats as "do not run the tool". See docs/claude-code.md.

use anyhow::{Context, Result};
use loopward::config::Config;
use loopward_core::AgentId;
use loopward_hooks::{handle, FileLedgers, HookAnswer, HookContext, LedgerOpener, SandboxExec};
use loopward_runner::gates::Host;
use loopward_runner::secrets::{Masker, MaskingSink};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Answer one Claude Code hook event (read on stdin) with the loopward.toml policy.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example (`loopward hook install` makes .claude/settings.json run this for all four events the
policy needs: PreToolUse, PostToolUse, PostToolUseFailure and UserPromptSubmit):
  echo '{\"session_id\":\"s1\",\"cwd\":\"'$PWD'\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Write\",\"tool_use_id\":\"t1\",\"tool_input\":{\"file_path\":\"plan.md\",\"content\":\"x\"}}' \\
    | loopward hook claude-code --config loopward.toml

Exit status: 0 with a JSON answer (or nothing) on stdout; 2 when the event cannot be judged,
with the reason on stderr (Claude Code then blocks the tool call). See docs/claude-code.md.")]
pub struct Args {
    /// Which agent tool's hooks to answer.
    #[command(subcommand)]
    pub target: Target,
}

/// The agent tools whose hooks loopward answers.
#[derive(Debug, clap::Subcommand)]
pub enum Target {
    /// Claude Code (PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit; other events
    /// are recorded).
    #[command(after_help = "\
Example (what .claude/settings.json runs for each of PreToolUse, PostToolUse,
PostToolUseFailure and UserPromptSubmit, with the event on stdin):
  loopward hook claude-code --config \"$CLAUDE_PROJECT_DIR\"/loopward.toml

Exit status: 0 with a JSON answer (or nothing) on stdout; 2 when the event cannot be judged,
with the reason on stderr (Claude Code then blocks the tool call). See docs/claude-code.md.")]
    ClaudeCode {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The name Claude Code's main agent goes by in territories (subagents go by their
        /// `agent_type`).
        #[arg(long, default_value = "root")]
        main_agent: String,
        /// When loopward allows a file write, answer nothing rather than `allow`, so Claude
        /// Code's own permission prompt still decides (denials are answered either way).
        #[arg(long)]
        defer_allows: bool,
    },
    /// OpenAI Codex CLI (PreToolUse and PostToolUse for `Bash` and `apply_patch`,
    /// UserPromptSubmit; other tools are denied, other events recorded).
    #[command(after_help = "\
Example (what .codex/hooks.json runs, with the event on stdin):
  loopward hook codex --config /abs/path/loopward.toml

Exit status: 0 with a JSON answer (or nothing) on stdout; 2 when the event cannot be judged,
with the reason on stderr (Codex then blocks the tool call). See docs/hosts.md.")]
    Codex {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The name Codex's main agent goes by in territories (subagents go by their
        /// `agent_type`).
        #[arg(long, default_value = "root")]
        main_agent: String,
    },
    /// Google Gemini CLI (BeforeTool and AfterTool for `write_file`, `replace` and
    /// `run_shell_command`, BeforeAgent; other tools are denied, other events recorded).
    #[command(after_help = "\
Example (what .gemini/settings.json runs, with the event on stdin):
  loopward hook gemini --config /abs/path/loopward.toml

Exit status: 0 with a JSON answer (or nothing) on stdout; 2 when the event cannot be judged,
with the reason on stderr (Gemini CLI then blocks the tool call). See docs/hosts.md.")]
    Gemini {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The name Gemini CLI's agent goes by in territories.
        #[arg(long, default_value = "root")]
        main_agent: String,
    },
    /// Write a host's hook into its settings (.claude/settings.json, .codex/hooks.json,
    /// .gemini/settings.json): the absolute path of this binary, checked to run first (a hook
    /// that cannot start lets the host go ahead).
    #[command(
        after_help = "Example:\n  loopward hook install --config loopward.toml --host codex && loopward hook doctor --host codex"
    )]
    Install {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The name the host's main agent goes by in territories.
        #[arg(long, default_value = "root")]
        main_agent: String,
        /// The agent host whose hook to install.
        #[arg(long, value_enum, default_value = "claude-code")]
        host: HostArg,
    },
    /// Tell whether the installed hook would fail open on this machine, and which sandbox Bash
    /// commands get (exit 1 when it would fail open).
    #[command(after_help = "Example:\n  loopward hook doctor --config loopward.toml")]
    Doctor {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The agent host whose installed hook to check.
        #[arg(long, value_enum, default_value = "claude-code")]
        host: HostArg,
    },
}

/// An agent host loopward has a hook for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HostArg {
    /// Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
}

impl HostArg {
    /// The host this names.
    pub(super) fn host(self) -> Host {
        match self {
            Self::ClaudeCode => Host::ClaudeCode,
            Self::Codex => Host::Codex,
            Self::Gemini => Host::GeminiCli,
        }
    }
}

impl Target {
    /// Whether this target answers a hook event (and so must answer before anything else).
    pub fn answers_an_event(&self) -> bool {
        matches!(
            self,
            Self::ClaudeCode { .. } | Self::Codex { .. } | Self::Gemini { .. }
        )
    }
}

/// `loopward hook …` parsed alone: what an agent host runs on every tool call, without building
/// every other command's parser first.
#[derive(Debug, clap::Parser)]
#[command(name = "loopward")]
pub struct HookOnly {
    /// Only `hook`.
    #[command(subcommand)]
    pub command: HookCommand,
}

/// The one command [`HookOnly`] parses.
#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// As `loopward hook`.
    Hook(Args),
}

/// A hook event's command line (`loopward hook claude-code|codex|gemini …`, nothing before
/// `hook`), parsed alone; `None` for anything else, a request for help included, which the
/// whole command line's parser answers.
pub fn event_command(args: &[std::ffi::OsString]) -> Option<Args> {
    use clap::Parser as _;
    if args.get(1).is_none_or(|a| a != "hook") {
        return None;
    }
    match HookOnly::try_parse_from(args) {
        Ok(HookOnly {
            command: HookCommand::Hook(a),
        }) if a.target.answers_an_event() => Some(a),
        _ => None,
    }
}

/// Runs the command: never fails in a way Claude Code would read as "go ahead".
pub fn run(args: &Args) -> Result<ExitCode> {
    let (config, main_agent, defer_allows, host) = match &args.target {
        Target::ClaudeCode {
            config,
            main_agent,
            defer_allows,
        } => (config, main_agent, *defer_allows, Host::ClaudeCode),
        Target::Codex { config, main_agent } => (config, main_agent, false, Host::Codex),
        Target::Gemini { config, main_agent } => (config, main_agent, false, Host::GeminiCli),
        Target::Install {
            config,
            main_agent,
            host,
        } => return super::hook_install::install(config, main_agent, host.host()),
        Target::Doctor { config, host } => return super::hook_install::doctor(config, host.host()),
    };
    let answer = match answer(config, main_agent, defer_allows, host) {
        Ok(a) => a,
        Err(e) => HookAnswer::block(crate::error_text(&e)),
    };
    // A hook whose answer cannot be written must still block: exit 2 whatever happens.
    Ok(answer.print())
}

fn answer(config: &Path, main_agent: &str, defer_allows: bool, host: Host) -> Result<HookAnswer> {
    let input = super::supervisor::read_event()?;
    // Inside `loopward contain` (reached here only when `main` did not relay already): the
    // supervisor outside judges and records.
    if let Some(socket) = std::env::var_os(super::supervisor::SUPERVISOR_ENV) {
        let token = std::env::var(loopward_runner::cli_agent::TOKEN_ENV).ok();
        return super::supervisor::forward(Path::new(&socket), token.as_deref(), host, &input);
    }
    Ok(answer_event(config, main_agent, defer_allows, host, &input))
}

/// Judges one hook event with `config`'s policy (what `loopward contain`'s supervisor runs for
/// a contained program's hooks); a context that cannot be made blocks.
fn answer_event(
    config: &Path,
    main_agent: &str,
    defer_allows: bool,
    host: Host,
    input: &str,
) -> HookAnswer {
    match judge(config, main_agent, defer_allows, host, input) {
        Ok(a) => a,
        Err(e) => HookAnswer::block(crate::error_text(&e)),
    }
}

fn judge(
    config: &Path,
    main_agent: &str,
    defer_allows: bool,
    host: Host,
    input: &str,
) -> Result<HookAnswer> {
    let (ctx, masker) = context(config, main_agent, defer_allows, host)?;
    Ok(judge_with(&ctx, &masker, input))
}

/// Judges one hook event in `ctx`, masking what the host is told with `masker`.
pub(super) fn judge_with(ctx: &HookContext, masker: &Masker, input: &str) -> HookAnswer {
    masked(handle(input, ctx), masker)
}

/// `answer` as the client is told it: masked as the ledger is.
pub(super) fn masked(mut answer: HookAnswer, masker: &Masker) -> HookAnswer {
    // What the client is told is masked as the ledger is; but a wrapped command
    // (`updatedInput`) is the agent's own input given back, and masking it would change what
    // runs.
    if !answer.stdout.contains("\"updatedInput\"") {
        answer.stdout = masker.mask_str(&answer.stdout).into_owned();
    }
    answer.stderr = masker.mask_str(&answer.stderr).into_owned();
    answer
}

/// Session ledgers whose every record is masked ([`MaskingSink`]) before it is hashed.
struct MaskedLedgers {
    inner: FileLedgers,
    masker: Masker,
}

impl LedgerOpener for MaskedLedgers {
    fn open(
        &self,
        runs_dir: &Path,
        run: &loopward_core::RunId,
        clock: std::sync::Arc<dyn loopward_runner::Clock>,
    ) -> Result<std::sync::Arc<dyn loopward_core::AuditSink>, loopward_core::AuditError> {
        let ledger = self.inner.open(runs_dir, run, clock)?;
        if self.masker.is_empty() {
            return Ok(ledger);
        }
        Ok(std::sync::Arc::new(MaskingSink::new(
            ledger,
            self.masker.clone(),
        )))
    }
}

pub(super) fn context(
    config: &Path,
    main_agent: &str,
    defer_allows: bool,
    host: Host,
) -> Result<(HookContext, Masker)> {
    // Set by `loopward loop` on the client it starts (and so on its hooks): that session's
    // prompts are the loop's, not a person's; and a session it served loopward's tools over
    // MCP: a refusal names the session's `handoff` only where it has one.
    let session = LoopSession {
        mark: std::env::var(loopward_runner::cli_agent::SESSION_MARK).ok(),
        handoff: std::env::var(loopward_runner::cli_agent::TOOLS_ENV)
            .is_ok_and(|l| loopward_runner::cli_agent::served(&l).any(|t| t == "handoff")),
    };
    context_for(config, main_agent, defer_allows, host, &session)
}

/// The loop session a hook context judges for ([`HookContextBuilder::loop_session`],
/// [`HookContextBuilder::handoff`]).
///
/// [`HookContextBuilder::loop_session`]: loopward_hooks::HookContextBuilder::loop_session
/// [`HookContextBuilder::handoff`]: loopward_hooks::HookContextBuilder::handoff
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct LoopSession {
    /// The loop's id of the session, if a loop started it.
    pub(super) mark: Option<String>,
    /// Whether the session is served loopward's `handoff`.
    pub(super) handoff: bool,
}

/// [`context`] for the loop session `session`.
pub(super) fn context_for(
    config: &Path,
    main_agent: &str,
    defer_allows: bool,
    host: Host,
    session: &LoopSession,
) -> Result<(HookContext, Masker)> {
    let cfg = Config::load(config)?;
    // A secret whose source is missing blocks the call (exit 2), naming it.
    let masker = loopward::contain::masker(&cfg, config, Some(|k| std::env::var(k).ok()))?;
    let root = cfg
        .workspace_dir(config)
        .canonicalize()
        .with_context(|| format!("finding the workspace of {}", config.display()))?;
    let main = AgentId::new(main_agent.to_string()).context("--main-agent")?;
    // The config file is a control file when it lies inside the workspace.
    let config_rel = config
        .canonicalize()
        .ok()
        .and_then(|c| {
            c.strip_prefix(&root)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let exe = super::binaries::loopward(
        &std::env::current_exe()
            .context("finding the loopward binary (to wrap Bash commands in its sandbox)")?,
    )?;
    let abs_config = config
        .canonicalize()
        .with_context(|| format!("resolving {}", config.display()))?;
    // The session ledgers are chained under the ledger key, and overrides come from the
    // sealed store, both in loopward's state directory.
    let custody = super::state::open(&cfg, config)?;
    let ledgers = match custody.ledger_key()? {
        Some(key) => FileLedgers::keyed(key),
        None => FileLedgers::default(),
    };
    let ledgers = MaskedLedgers {
        inner: ledgers,
        masker: masker.clone(),
    };
    // What no agent may read, by any tool: one list for the sandbox around `Bash` and for the
    // hook's judgement of the client's own read tools (`Read`, `Grep`, …).
    let unreadable = custody.unreadable().to_vec();
    let ctx = HookContext::builder(&cfg.policy())
        .ledgers(std::sync::Arc::new(ledgers))
        .overrides(custody.overrides()?.max_ttl(cfg.overrides.max_ttl))
        .team(cfg.team())
        .root(root)
        // Session state, snapshots and saved contents live in the state directory, outside the
        // workspace, which the wrapped Bash command may neither read nor write.
        .state_dir(custody.state())
        .sandbox_exec(SandboxExec {
            exe,
            config: abs_config,
            unreadable: unreadable.clone(),
        })
        .unreadable(unreadable)
        .config_file(config_rel)
        .runs_dir(cfg.run.runs_dir.to_string_lossy().into_owned())
        .main_agent(main)
        .defer_allows(defer_allows)
        .network_open(!cfg.net.isolate)
        .host(host)
        .loop_session(session.mark.clone())
        .handoff(session.handoff)
        .build()
        .with_context(|| format!("{}", config.display()))?;
    Ok((ctx, masker))
}

#[cfg(test)]
mod event_command_tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(std::ffi::OsString::from).collect()
    }

    #[test]
    fn only_a_hook_events_command_line_is_parsed_alone() {
        let a = event_command(&args(&[
            "loopward",
            "hook",
            "claude-code",
            "--config",
            "team/a.toml",
            "--main-agent",
            "lead",
        ]))
        .expect("a hook event's command line");
        assert!(matches!(
            &a.target,
            Target::ClaudeCode { config, main_agent, .. }
                if config == Path::new("team/a.toml") && main_agent == "lead"
        ));
        assert!(event_command(&args(&["loopward", "hook", "codex"])).is_some());
        // Not an event, help, a flag before `hook`, another command: the whole parser's.
        for other in [
            &["loopward", "hook", "install"][..],
            &["loopward", "hook", "gemini", "--help"],
            &["loopward", "--config", "a.toml", "hook", "claude-code"],
            &["loopward", "run"],
            &["loopward"],
        ] {
            assert!(event_command(&args(other)).is_none(), "{other:?}");
        }
    }
}
