//! `loopward loop`: runs a coding agent (Claude Code, Codex, Gemini CLI) session after session under the
//! runner's laws, until a verifier passes, a cap, a budget or a person stops it. The same
//! timeline, `--json`, summary, exit statuses and `--resume` as `loopward run`.

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward::ledger;
use loopward_core::{AgentId, RunId};
use loopward_runner::cli_agent::{CliAgent, RecordedSessions, Verifier};
use loopward_runner::layers::budget::{BudgetConfig, BudgetLayer};
use loopward_runner::layers::stack::Stack;
use loopward_runner::sandbox::Protected;
use loopward_runner::{BoxTurnService, Clock, Runner, SystemClock, Workspace};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// Loop a coding agent over a task until a verifier passes.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Example:
  loopward loop --agent claude-code --prompt PROMPT.md --verify \"cargo test\" --max-iterations 30

Each iteration is one headless session (`claude -p`, `codex exec`, `gemini -p`) with loopward's
hook installed for that session only, then the verifier, in the sandbox. The loop completes only when the
verifier passes; an agent that says it is done while the verifier fails is recorded as a refused
claim and gets another session. Sessions that change nothing and leave the verifier where it was
are repeats; --no-progress of them in a row stop the loop.

Exit status: as `loopward run` (0 verified · 3 a cap (iterations, wall time, no progress) · 4
strategies exhausted ([class_jump]) · 5 budget spent · 6 stopped by a stop-gate · 8 the ledger
could not be written · 9 failed (a stream it does not know, a session its hook never saw) · 1
could not start: no config, a prompt file, verifier or client it cannot use). See docs/loop.md.")]
pub struct Args {
    /// The config file (the policy the sessions run under); its folder is the project root.
    #[arg(long, default_value = loopward::config::CONFIG_FILE)]
    pub config: PathBuf,
    /// The coding agent.
    #[arg(long, value_parser = ["claude-code", "codex", "gemini"], default_value = "claude-code")]
    pub agent: String,
    /// The name the agent goes by in territories (default: the config's `run.first`).
    #[arg(long = "as")]
    pub name: Option<String>,
    /// The task, in a file (read once, when the loop starts; kept in the ledger).
    #[arg(long, required_unless_present = "resume")]
    pub prompt: Option<PathBuf>,
    /// The command that says the work is done (run by `sh -c` in the project root, in the
    /// sandbox, after each session).
    #[arg(long, required_unless_present = "resume")]
    pub verify: Option<String>,
    /// Sessions at most.
    #[arg(long, default_value_t = 30)]
    pub max_iterations: u32,
    /// One session's time at most; then its process group is ended.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub session_timeout: Duration,
    /// One verification's time at most.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub verify_timeout: Duration,
    /// The whole loop's wall time at most.
    #[arg(long, default_value = "8h", value_parser = humantime::parse_duration)]
    pub wall_time: Duration,
    /// Sessions in a row that change nothing before the loop stops.
    #[arg(long, default_value_t = loopward_runner::cli_agent::DEFAULT_NO_PROGRESS)]
    pub no_progress: u32,
    /// Dollars the sessions may spend, as they report it.
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// The `claude` binary (default: `claude` on PATH).
    #[arg(long, default_value = "claude")]
    pub claude: PathBuf,
    /// The `codex` binary (default: `codex` on PATH).
    #[arg(long)]
    pub codex: Option<PathBuf>,
    /// The `gemini` binary (default: `gemini` on PATH).
    #[arg(long)]
    pub gemini: Option<PathBuf>,
    /// The API base the client talks to (Claude Code: `ANTHROPIC_BASE_URL`; Codex: a Responses
    /// API `…/v1`, key in `OPENAI_API_KEY`; Gemini CLI: `GOOGLE_GEMINI_BASE_URL`).
    #[arg(long)]
    pub base_url: Option<String>,
    /// The model the client uses (default: its own).
    #[arg(long)]
    pub model: Option<String>,
    /// The run id (default: derived from the time).
    #[arg(long, conflicts_with = "resume")]
    pub id: Option<String>,
    /// Resume a loop from its ledger: finished sessions are not repeated; one that was
    /// running is recorded as interrupted. Its settings come from its folder.
    #[arg(long, conflicts_with_all = ["prompt", "verify", "id"])]
    pub resume: Option<String>,
    /// One JSON object per line instead of the timeline (as `loopward run --json`).
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Only the outcome.
    #[arg(long, short)]
    pub quiet: bool,
    /// Arguments for every session (after `--`; default: Claude Code `--permission-mode
    /// acceptEdits`, Codex `--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check`,
    /// Gemini CLI `--approval-mode yolo`).
    #[arg(last = true)]
    pub session_args: Vec<String>,
}

/// Where a loop's settings are kept in its run folder, for `--resume`.
const SETTINGS_FILE: &str = "loop.json";

pub(super) async fn run(mut args: Args) -> Result<ExitCode> {
    let cfg = Config::load(&args.config)
        .with_context(|| "`loopward loop` runs the sessions under a loopward.toml's policy; write one with `loopward init`")?;
    let workspace = cfg
        .workspace_dir(&args.config)
        .canonicalize()
        .with_context(|| format!("cannot find the workspace of {}", args.config.display()))?;
    let config = args
        .config
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", args.config.display()))?;
    let runs_dir = workspace.join(&cfg.run.runs_dir);
    let resume = args
        .resume
        .as_deref()
        .map(|r| RunId::new(r).with_context(|| format!("--resume {r:?} is not a run id")))
        .transpose()?;
    let task = match &resume {
        Some(id) => {
            let dir = ledger::run_dir(&runs_dir, id);
            let path = dir.join(SETTINGS_FILE);
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!("{} is not a loop's run folder (no {SETTINGS_FILE}); resume runs of `loopward run` with `loopward run --resume`", dir.display())
            })?;
            let kept: Kept = serde_json::from_str(&text)
                .with_context(|| format!("{} is not what `loopward loop` wrote", path.display()))?;
            kept.apply(&mut args)?;
            None
        }
        None => {
            let path = args.prompt.clone().context("--prompt is required")?;
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "cannot read the prompt file {}: name a file that holds the task",
                    path.display()
                )
            })?;
            if text.trim().is_empty() {
                bail!(
                    "the prompt file {} is empty: write the task in it",
                    path.display()
                );
            }
            Some(text)
        }
    };
    let verify = args.verify.clone().context("--verify is required")?;
    let name = match &args.name {
        Some(n) => {
            AgentId::new(n.clone()).with_context(|| format!("--as {n:?} is not an agent name"))?
        }
        None => cfg.run.first.clone(),
    };
    // What can be known before the first session is checked before the first record.
    verifier_exists(&verify, &workspace)?;
    let kind = super::loop_client::kind(&args.agent)?;
    let host = super::loop_client::client(&super::loop_client::Want {
        kind,
        program: match kind {
            loopward::config::AgentKind::Codex => args.codex.as_deref(),
            loopward::config::AgentKind::Gemini => args.gemini.as_deref(),
            _ => Some(&args.claude),
        },
        config: &config,
        agent: name.as_str(),
        base_url: args.base_url.as_deref(),
        model: args.model.as_deref(),
        args: &args.session_args,
        workspace: &workspace,
    })?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let custody = super::state::open(&cfg, &config)?;
    // Secrets are resolved before anything starts and masked in every record and printed line.
    let masker = loopward::contain::masker(&cfg, &config, Some(|k| std::env::var(k).ok()))?;
    let ws = Workspace::new(&workspace)
        .with_context(|| format!("cannot use {} as the workspace", workspace.display()))?;
    let control = loopward_runner::gates::ControlFiles::new(
        &config
            .strip_prefix(&workspace)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        &cfg.run.runs_dir.to_string_lossy(),
    )
    .resolved(&ws);
    let protected = Protected::from_policy(control, &cfg.policy(), &name)?;
    let verifier = Verifier::new(verify.clone(), args.verify_timeout, protected)
        .reach(loopward::contain::reach(
            &cfg,
            Some(|k| std::env::var(k).ok()),
        ))
        .unreadable(custody.unreadable().to_vec());
    let agent = CliAgent::builder(
        name.clone(),
        host,
        verifier,
        custody.state().root().join("loop-sessions"),
    )
    .session_timeout(args.session_timeout)
    .no_progress(args.no_progress)
    // Each session's hook asks the loop, which records its decisions in the run's ledger.
    .hook_judge(super::loop_hooks::LoopJudge::new(
        config.clone(),
        name.as_str(),
    ));
    // `loopward say <run> "…"` reaches the next session's prompt, as the person's words.
    let inbox = custody.inbox(&workspace)?;
    let runner = runner(
        &cfg,
        &args,
        ws,
        name.clone(),
        agent,
        clock.clone(),
        Some(inbox),
    )?;
    // A new loop keeps its settings in its folder before its first record, for `--resume`.
    let id = match (&resume, &args.id) {
        (Some(_), _) => None,
        (None, given) => {
            let id = match given {
                Some(s) => RunId::new(s).with_context(|| {
                    format!("--id {s:?} is not a run id: use letters, digits, '-' and '_'")
                })?,
                None => super::run::new_run_id(&*clock),
            };
            let dir = ledger::run_dir(&runs_dir, &id);
            // A run that began keeps its settings: its id is not reused.
            if dir.join(ledger::EVENTS_FILE).exists() && ledger::started(&dir).is_ok() {
                bail!(
                    "run {id} already began (its ledger is {}); run ids are not reused: resume it with `loopward loop --resume {id}`, or pick another id",
                    dir.join(ledger::EVENTS_FILE).display()
                );
            }
            Kept::of(&args).keep(&dir)?;
            Some(id.to_string())
        }
    };
    super::run::drive(super::run::Drive {
        runner,
        runs_dir,
        custody,
        clock,
        resume,
        id,
        task,
        first: name,
        config,
        script: None,
        json: args.json,
        quiet: args.quiet,
        label: args.agent.clone(),
        masker,
    })
    .await
}

/// The loop's runner: `agent` inside the config's turn layers, with the loop's own caps (its
/// iterations and wall time), class-jump on failed verifications, and a budget on the cost the
/// sessions report.
fn runner(
    cfg: &Config,
    args: &Args,
    ws: Workspace,
    name: AgentId,
    mut agent: loopward_runner::cli_agent::CliAgentBuilder,
    clock: Arc<dyn Clock>,
    inbox: Option<loopward_runner::inbox::HumanInbox>,
) -> Result<Runner> {
    let mut layers = cfg.layers();
    layers.limits.turns_per_run = args.max_iterations;
    layers.limits.wall_time = Some(args.wall_time);
    let budget = match (args.max_cost_usd, layers.budget.take()) {
        (Some(usd), b) => Some(BudgetConfig {
            max_cost_usd: Some(usd),
            ..b.unwrap_or_default()
        }),
        (None, b) => b,
    };
    let stack = Stack::new(&layers)?;
    if let Some(cj) = stack.class_jump() {
        agent = agent.class_jump(cj.clone());
    }
    let mut service = stack.turn(BoxTurnService::new(agent.build()));
    if let Some(b) = budget {
        service = BoxTurnService::new(BudgetLayer::reported(b)?.layer(service));
    }
    let mut runner = Runner::builder(ws)
        .clock(clock)
        .max_turns(args.max_iterations.saturating_add(1));
    if let Some(inbox) = inbox {
        runner = runner.inbox(inbox);
    }
    Ok(runner.agent(name, service)?.build()?)
}

/// The settings of the loop recorded in `run_dir`, if it is a loop's.
pub(super) fn recorded_loop(run_dir: &Path) -> Result<Option<Args>> {
    let path = run_dir.join(SETTINGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let kept: Kept = serde_json::from_str(&text)
        .with_context(|| format!("{} is not what `loopward loop` wrote", path.display()))?;
    let mut args = Args {
        config: PathBuf::new(),
        agent: String::new(),
        name: None,
        prompt: None,
        verify: None,
        max_iterations: 1,
        session_timeout: Duration::ZERO,
        verify_timeout: Duration::ZERO,
        wall_time: Duration::ZERO,
        no_progress: 1,
        max_cost_usd: None,
        claude: PathBuf::new(),
        codex: None,
        gemini: None,
        base_url: None,
        model: None,
        id: None,
        resume: None,
        json: false,
        quiet: false,
        session_args: vec![],
    };
    kept.apply(&mut args)?;
    Ok(Some(args))
}

/// The runner `loopward replay` re-judges one part of a loop with: the loop's agent and layers
/// over `part`'s recorded sessions, in the scratch workspace `ws`; no client, no verifier runs.
pub(super) fn replay_runner(
    cfg: &Config,
    args: &Args,
    ws: &Path,
    clock: Arc<dyn Clock>,
    part: &[(loopward_core::Scope, loopward_core::AuditEvent)],
    inbox: loopward_runner::inbox::HumanInbox,
) -> Result<Runner> {
    let ws = Workspace::new(ws).context("the scratch workspace")?;
    let name = match &args.name {
        Some(n) => {
            AgentId::new(n.clone()).with_context(|| format!("{n:?} is not an agent name"))?
        }
        None => cfg.run.first.clone(),
    };
    let host = super::loop_client::recorded(super::loop_client::kind(&args.agent)?);
    let protected = Protected::new(loopward_runner::gates::ControlFiles::default(), vec![]);
    let verifier = Verifier::new(
        args.verify.clone().unwrap_or_default(),
        args.verify_timeout,
        protected,
    )
    .reach(loopward::contain::reach(
        cfg,
        Some(|k| std::env::var(k).ok()),
    ));
    let agent = CliAgent::builder(name.clone(), host, verifier, ws.root().join(".replay"))
        .no_progress(args.no_progress)
        .recorded(Arc::new(RecordedSessions::from_records(part)));
    runner(cfg, args, ws, name, agent, clock, Some(inbox))
}

/// The coding-CLI agents of a team `loopward run` runs: each as `loopward loop`
/// makes its one agent, with the loop's default backstops (its session and verification
/// timeouts, its no-progress count), checked before the first record.
pub(super) struct TeamCliAgents {
    pub(super) config: PathBuf,
    pub(super) workspace: PathBuf,
    pub(super) custody: loopward::state::Custody,
    pub(super) policy: loopward_runner::gates::PolicyConfig,
    pub(super) config_rel: String,
    pub(super) runs_rel: String,
}

impl loopward::team::CliAgents for TeamCliAgents {
    fn agent(
        &self,
        a: &loopward::config::AgentConfig,
    ) -> Result<loopward_runner::cli_agent::CliAgentBuilder> {
        let verify = a.verify.clone().unwrap_or_default();
        verifier_exists(&verify, &self.workspace)?;
        let host = super::loop_client::client(&super::loop_client::Want {
            kind: a.kind,
            program: None,
            config: &self.config,
            agent: a.name.as_str(),
            base_url: a.base_url.as_deref(),
            model: a.model.as_deref(),
            args: &[],
            workspace: &self.workspace,
        })?;
        let ws = Workspace::new(&self.workspace).context("the workspace")?;
        let control = loopward_runner::gates::ControlFiles::new(&self.config_rel, &self.runs_rel)
            .resolved(&ws);
        let protected = Protected::from_policy(control, &self.policy, &a.name)?;
        let verifier = Verifier::new(verify, Duration::from_secs(600), protected)
            .reach(loopward::contain::reach(
                &loopward::config::Config::load(&self.config)?,
                Some(|k| std::env::var(k).ok()),
            ))
            .unreadable(self.custody.unreadable().to_vec());
        Ok(CliAgent::builder(
            a.name.clone(),
            host,
            verifier,
            self.custody.state().root().join("loop-sessions"),
        )
        .hook_judge(super::loop_hooks::LoopJudge::new(
            self.config.clone(),
            a.name.as_str(),
        )))
    }
}

/// The coding-CLI agents of a team `loopward replay` re-judges: over one part's
/// recorded sessions; no client and no verifier runs.
pub(super) struct RecordedCliAgents(pub(super) Arc<RecordedSessions>);

impl loopward::team::CliAgents for RecordedCliAgents {
    fn agent(
        &self,
        a: &loopward::config::AgentConfig,
    ) -> Result<loopward_runner::cli_agent::CliAgentBuilder> {
        let host = super::loop_client::recorded(a.kind);
        let protected = Protected::new(loopward_runner::gates::ControlFiles::default(), vec![]);
        let verifier = Verifier::new(
            a.verify.clone().unwrap_or_default(),
            Duration::from_secs(600),
            protected,
        );
        Ok(
            CliAgent::builder(a.name.clone(), host, verifier, PathBuf::from(".replay"))
                .recorded(self.0.clone()),
        )
    }
}

/// A loop's settings, kept in its run folder for `--resume`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Kept {
    agent: String,
    name: Option<String>,
    verify: String,
    max_iterations: u32,
    session_timeout: String,
    verify_timeout: String,
    wall_time: String,
    no_progress: u32,
    max_cost_usd: Option<f64>,
    claude: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    codex: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gemini: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    session_args: Vec<String>,
}

impl Kept {
    fn of(a: &Args) -> Self {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        Self {
            agent: a.agent.clone(),
            name: a.name.clone(),
            verify: a.verify.clone().unwrap_or_default(),
            max_iterations: a.max_iterations,
            session_timeout: d(a.session_timeout),
            verify_timeout: d(a.verify_timeout),
            wall_time: d(a.wall_time),
            no_progress: a.no_progress,
            max_cost_usd: a.max_cost_usd,
            claude: std::path::absolute(&a.claude).unwrap_or_else(|_| a.claude.clone()),
            codex: a
                .codex
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            gemini: a
                .gemini
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            base_url: a.base_url.clone(),
            model: a.model.clone(),
            session_args: a.session_args.clone(),
        }
    }

    fn apply(self, a: &mut Args) -> Result<()> {
        let d = |s: &str| {
            humantime::parse_duration(s)
                .with_context(|| format!("{s:?} in {SETTINGS_FILE} is not a duration"))
        };
        a.agent = self.agent;
        a.name = self.name;
        a.verify = Some(self.verify);
        a.max_iterations = self.max_iterations;
        a.session_timeout = d(&self.session_timeout)?;
        a.verify_timeout = d(&self.verify_timeout)?;
        a.wall_time = d(&self.wall_time)?;
        a.no_progress = self.no_progress;
        a.max_cost_usd = self.max_cost_usd;
        a.claude = self.claude;
        (a.codex, a.gemini) = (self.codex, self.gemini);
        (a.base_url, a.model) = (self.base_url, self.model);
        a.session_args = self.session_args;
        Ok(())
    }

    /// Kept in `dir` (the run's folder, made now) before the run's first record.
    fn keep(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(SETTINGS_FILE);
        let text =
            serde_json::to_string_pretty(self).context("cannot encode the loop's settings")?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// The verifier's program can be found (`sh -c 'command -v …'` in the project root).
fn verifier_exists(verify: &str, root: &Path) -> Result<()> {
    // The program is the first word that is not a variable assignment (`RUST_LOG=1 cargo test`).
    let Some(first) = verify.split_whitespace().find(|w| {
        !w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    }) else {
        bail!("--verify is empty: give the command that says the work is done, such as \"cargo test\"");
    };
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg("command -v \"$1\" >/dev/null")
        .arg("loopward-verify-check")
        .arg(first)
        .current_dir(root)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!(
            "the verifier `{verify}` cannot run: `{first}` is not a command here (not on PATH, not a file in {}); fix --verify before the loop starts",
            root.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::verifier_exists;

    #[test]
    fn a_verifier_is_found_past_its_variable_assignments_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert!(verifier_exists("RUST_LOG=1 true", dir.path()).is_ok());
        assert!(verifier_exists("true && false", dir.path()).is_ok());
        let e = verifier_exists("X=1 no-such-verifier --all", dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("`no-such-verifier` is not a command"),
            "{e}"
        );
        assert!(verifier_exists("   ", dir.path()).is_err());
    }
}
