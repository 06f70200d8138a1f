//! The nine chapters of `loopward-demo`: a scripted team acting out each lesson loopward is
//! built on, in a scratch workspace, on the offline fake backend.
//!
//! Every run writes a ledger under the scratch folder's `runs/`; every figure a chapter prints
//! is computed from those ledgers after the run, by the same code as `loopward report`.
//! The fake agents are scripted to behave as agents were observed to behave: a warning did not
//! stop them.

mod ch1_advisory;
mod ch2_override;
mod ch3_sprawl;
mod ch4_review;
mod ch5_one_handoff;
mod ch6_shell;
mod ch7_anti_loop;
mod ch8_stop_gate;
mod ch9_loop;
pub mod cli_loop;
pub mod stand_in;
mod team;

use anyhow::{Context, Result};
use loopward::config::Config;
use loopward::ledger::{self, RunFigures};
use loopward::state::Custody;
use loopward_core::{AgentId, AuditEvent, LayerId, Person, RunId};
use loopward_runner::audit::{KeyRing, LedgerKey};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::{ManualClock, RunSpec};
use loopward_term::render::{Printer, Tone};
use loopward_term::timeline::{LiveSink, SharedPrinter, Timeline};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// When every demo run's clock starts: 2026-01-01T00:00:00Z, so ledgers are byte-identical
/// from one demo to the next.
pub const DEMO_EPOCH_MILLIS: u64 = 1_767_225_600_000;

/// How the stop-gate of chapter 8 gets its answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GateAnswer {
    /// Approve automatically, and log that it did.
    #[default]
    Auto,
    /// Ask on the terminal.
    Interactive,
}

/// Which model plays the team.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DemoBackend {
    /// Each chapter's script, on the fake backend.
    #[default]
    Fake,
    /// A real local model (GGUF), through the llama backend.
    Llama {
        /// The model file.
        model: PathBuf,
        /// Layers to offload to the GPU (`None`: the backend's default).
        gpu_layers: Option<u32>,
    },
}

/// What `loopward-demo` was asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Where the scratch workspace goes (default: a new temporary folder, kept afterwards).
    pub dir: Option<PathBuf>,
    /// Chapter 8's stop-gate.
    pub gate: GateAnswer,
    /// The model.
    pub backend: DemoBackend,
    /// Only these chapters (1–9); empty: all.
    pub chapters: Vec<u8>,
    /// The demo binary, which chapter 9 runs as its stand-in coding agent and its hook
    /// (`None`: chapter 9 says it is skipped, and why).
    pub stand_in: Option<PathBuf>,
}

/// Where the demo left its files.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The scratch folder.
    pub scratch: PathBuf,
    /// Its runs folder, one ledger per run.
    pub runs_dir: PathBuf,
}

/// What chapters share: the printer, the scratch folder, the model choice.
pub(crate) struct Stage<W: Write + Send + 'static> {
    out: SharedPrinter<W>,
    /// The real model every run shares (loaded once), when not on the fake backend.
    real: Option<BoxModelService>,
    scratch: PathBuf,
    runs_dir: PathBuf,
    opts: Options,
    /// The demo's state directory and its fixed ledger key.
    pub(crate) custody: Custody,
}

/// One scripted run of a chapter.
pub(crate) struct Act<'a> {
    /// The fixed run id.
    pub run: &'a str,
    /// The workspace folder's name under `work/` (default: the run id); runs that share one
    /// see each other's files.
    pub workspace: Option<&'a str>,
    /// The task the person gives.
    pub task: &'a str,
    /// The first agent.
    pub first: &'a str,
    /// The team's config (`loopward.toml` text).
    pub config: String,
    /// What the fake agents do.
    pub script: Script,
}

impl<'a> Act<'a> {
    /// Run `run` of the demo team (`team::config("")`) in a workspace of its own: the person
    /// gives `first` the `task`, and the agents do what `script` says.
    pub(crate) fn new(run: &'a str, task: &'a str, first: &'a str, script: Script) -> Self {
        Self {
            run,
            workspace: None,
            task,
            first,
            config: team::config(""),
            script,
        }
    }

    /// The same run in the workspace `work/<name>`, which other runs may share.
    pub(crate) fn in_workspace(self, name: &'a str) -> Self {
        Self {
            workspace: Some(name),
            ..self
        }
    }

    /// The same run with `config` for the team's `loopward.toml`.
    pub(crate) fn with_config(self, config: String) -> Self {
        Self { config, ..self }
    }
}

/// A run as the ledger tells it.
pub(crate) struct Played {
    /// Its figures.
    pub figures: RunFigures,
    /// Its events, read back from the ledger.
    pub events: Vec<(loopward_core::Scope, loopward_core::AuditEvent)>,
    /// Its workspace.
    pub workspace: PathBuf,
}

impl Played {
    /// The decisions `layer` recorded in the run, in order (`retry`, `auto_approved`, …).
    pub(crate) fn layer_decisions(&self, layer: &LayerId) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|(_, e)| match e {
                AuditEvent::LayerDecision {
                    layer: l, decision, ..
                } if l == layer => Some(decision.to_string()),
                _ => None,
            })
            .collect()
    }
}

pub(crate) fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap_or_else(|e| unreachable!("demo agent names are valid: {e}"))
}

impl<W: Write + Send + 'static> Stage<W> {
    pub(crate) fn say(&self, tone: Tone, text: impl AsRef<str>) {
        self.out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .line(tone, text);
    }

    pub(crate) fn blank(&self) {
        self.out.lock().unwrap_or_else(|p| p.into_inner()).blank();
    }

    fn chapter(&self, n: u8, title: &str, lesson: &str) {
        let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
        o.blank();
        o.title(&format!("Chapter {n} · {title}"));
        for l in lesson.lines() {
            o.line(Tone::Dim, l);
        }
    }

    /// The demo key's id and its file (what `loopward verify --key` takes).
    pub(crate) fn key_file(&self) -> (String, PathBuf) {
        let key = self
            .custody
            .keys()
            .current()
            .map(|k| k.id().to_string())
            .unwrap_or_default();
        let file = self
            .custody
            .state()
            .root()
            .join("keys")
            .join(format!("{key}.key"));
        (key, file)
    }

    /// The workspace of a run: a fresh folder under the scratch folder.
    pub(crate) fn workspace(&self, run: &str) -> PathBuf {
        self.scratch.join("work").join(run)
    }

    /// Where a run's config file is written.
    pub(crate) fn config_path(&self, run: &str) -> PathBuf {
        self.scratch.join("config").join(format!("{run}.toml"))
    }

    /// Plays one run and reads its figures back from its ledger.
    pub(crate) async fn act(&self, act: Act<'_>) -> Result<Played> {
        self.act_in(act, &self.runs_dir, None).await
    }

    /// Plays one run with its ledger in `runs_dir`, its `kind = "claude-code"` agents built by
    /// `cli` (then shown as [`cli_loop::LoopView`] shows a loop).
    pub(crate) async fn act_in(
        &self,
        act: Act<'_>,
        runs_dir: &Path,
        cli: Option<Arc<cli_loop::StandIns>>,
    ) -> Result<Played> {
        let run = RunId::new(act.run).context("demo run ids are valid")?;
        let workspace = self.workspace(act.workspace.unwrap_or(act.run));
        std::fs::create_dir_all(&workspace)
            .with_context(|| format!("cannot create {}", workspace.display()))?;
        let config_path = self.config_path(act.run);
        if let Some(parent) = config_path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&config_path, &act.config)?;
        let cfg = Config::parse(&config_path, &act.config)?;
        let model = match &self.real {
            None => BoxModelService::new(FakeModel::new(act.script)),
            Some(m) => m.clone(),
        };
        let clock = Arc::new(ManualClock::new(DEMO_EPOCH_MILLIS));
        let runner = loopward::team::build(
            &cfg,
            &workspace,
            model,
            loopward::team::Options {
                clock: clock.clone(),
                config_file: String::new(),
                approver: match self.opts.gate {
                    GateAnswer::Interactive => {
                        Some(Arc::new(loopward_term::approver::TerminalApprover))
                    }
                    GateAnswer::Auto => None,
                },
                model_name: match &self.opts.backend {
                    DemoBackend::Fake => "fake".into(),
                    DemoBackend::Llama { model, .. } => model
                        .file_stem()
                        .map_or_else(|| "llama".into(), |s| s.to_string_lossy().into_owned()),
                },
                executor: None,
                durable: None,
                custody: Some(self.custody.clone()),
                host_files: Vec::new(),
                inbox: None,
                stops: None,
                cli_agents: cli.clone().map(|c| c as Arc<dyn loopward::team::CliAgents>),
                reach: None,
            },
        )?;
        let ledger = ledger::create(
            runs_dir,
            &run,
            self.custody.ledger_options(runs_dir, clock)?,
        )?;
        // As `loopward run` does, so `loopward replay <run-dir>` finds the config.
        std::fs::write(
            ledger.run_dir().join(loopward::config::CONFIG_FILE),
            &act.config,
        )?;
        let sink: Arc<dyn loopward_core::AuditSink> = match cli {
            None => Arc::new(LiveSink::new(ledger.clone(), self.out.clone())),
            Some(_) => Arc::new(cli_loop::LoopView {
                ledger: ledger.clone(),
                view: Mutex::new(Timeline::in_workspace(runner.workspace().root())),
                out: self.out.clone(),
            }),
        };
        self.say(Tone::Dim, format!("  ▸ run {run}: “{}”", act.task));
        let out = self.out.clone();
        // The demo plays the person who gives each run its task.
        let task = Person::at_the_keyboard().says(act.task);
        runner
            .run_observed(
                RunSpec::new(run.clone(), task, agent(act.first), sink)
                    .with_audit_location(ledger::run_dir(runs_dir, &run)),
                // What the agent said at the end of its turn (not a figure: the model's words).
                move |ev| {
                    if let Ok(o) = ev.outcome {
                        if let Some(line) = o.text.lines().find(|l| !l.trim().is_empty()) {
                            let mut said: String = line.trim().chars().take(100).collect();
                            if said.len() < line.trim().len() {
                                said.push('…');
                            }
                            out.lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .line(Tone::Dim, format!("    {}: “{said}”", ev.agent));
                        }
                    }
                },
            )
            .await;
        ledger
            .finish()
            .with_context(|| format!("cannot finish the ledger of {run}"))?;
        let figures = ledger::run_figures(&ledger.run_dir())?;
        let events = ledger::events(&ledger.run_dir())?;
        Ok(Played {
            figures,
            events,
            workspace,
        })
    }
}

/// Plays, in order, each listed chapter whose number `wants`: its heading and lesson, then the
/// chapter itself.
macro_rules! play_chapters {
    ($stage:expr, $wants:expr, [$($n:literal => $chapter:ident),+ $(,)?]) => {
        $(
            if $wants($n) {
                $stage.chapter($n, $chapter::TITLE, $chapter::LESSON);
                $chapter::play($stage).await?;
            }
        )+
    };
}

/// Plays the demo, printing into `out`.
pub async fn run<W: Write + Send + 'static>(
    opts: Options,
    out: SharedPrinter<W>,
) -> Result<Summary> {
    let scratch = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => tempfile::Builder::new()
            .prefix("loopward-demo-")
            .tempdir()
            .context("cannot create a scratch folder")?
            .keep(),
    };
    let runs_dir = scratch.join("runs");
    let real = match &opts.backend {
        DemoBackend::Fake => None,
        DemoBackend::Llama { model, gpu_layers } => {
            let mut cfg = Config::parse("demo.toml", &team::config(""))?;
            cfg.backend.gpu_layers = *gpu_layers;
            // A small local model answers without acting unless steered to one call, then text.
            cfg.backend.tool_choice = loopward::config::ToolChoice::CallThenAnswer;
            cfg.backend.max_tokens = Some(512);
            // …and its answer to a tool's result ends within one line, before the token budget,
            // instead of running on until it is cut off.
            cfg.backend.answer_chars = Some(160);
            // Short arguments (a handoff note, a file's content) keep each call a few dozen
            // tokens, and one cache slot per agent keeps each agent's conversation prefilled
            // from one turn to its next.
            cfg.backend.argument_chars = Some(64);
            cfg.backend.parallel = Some(team::AGENTS);
            Some(loopward::backend::llama(&cfg, model)?)
        }
    };
    let custody = demo_custody(&scratch)?;
    let stage = Stage {
        out,
        real,
        scratch: scratch.clone(),
        runs_dir: runs_dir.clone(),
        opts,
        custody,
    };
    intro(&stage);
    let wants = |n: u8| stage.opts.chapters.is_empty() || stage.opts.chapters.contains(&n);
    play_chapters!(&stage, wants, [
        1 => ch1_advisory,
        2 => ch2_override,
        3 => ch3_sprawl,
        4 => ch4_review,
        5 => ch5_one_handoff,
        6 => ch6_shell,
        7 => ch7_anti_loop,
        8 => ch8_stop_gate,
        9 => ch9_loop,
    ]);
    outro(&stage)?;
    Ok(Summary { scratch, runs_dir })
}

/// The demo's key: fixed, so its ledgers are byte-identical from one demo to the next. It is no
/// secret (it is in this file); real runs use the random key `loopward init` creates.
const DEMO_KEY: &[u8; 32] = b"loopward demo key: not a secret!";

/// How the demo's runs in `scratch` verify: under the demo key, with the index head kept in
/// `<scratch>/state` (what `loopward verify --key` does from the command line).
pub fn verify_options(scratch: &Path) -> Result<loopward_runner::audit::VerifyOptions> {
    keyed_check(scratch, &runs_dir(scratch))
}

/// How the runs in `runs` verify: under the demo key, with their index head in
/// `<scratch>/state`.
fn keyed_check(scratch: &Path, runs: &Path) -> Result<loopward_runner::audit::VerifyOptions> {
    let key = LedgerKey::from_bytes(DEMO_KEY.to_vec()).context("the demo key is 32 bytes")?;
    let state = loopward_runner::StateDir::at(scratch.join("state"))?;
    Ok(
        loopward_runner::audit::VerifyOptions::keyed(KeyRing::single(key))
            .head(state.index_head(runs)?),
    )
}

/// The demo's state directory (`<scratch>/state`, beside the workspaces, never in one) holding
/// the demo key as a file, so `loopward verify --key` can check the demo's runs.
pub(crate) fn demo_custody(scratch: &Path) -> Result<Custody> {
    use std::os::unix::fs::PermissionsExt;
    let state = loopward_runner::StateDir::at(scratch.join("state"))?;
    let key = LedgerKey::from_bytes(DEMO_KEY.to_vec()).context("the demo key is 32 bytes")?;
    let file = state.sub("keys")?.join(format!("{}.key", key.id()));
    std::fs::write(&file, DEMO_KEY).with_context(|| format!("cannot write {}", file.display()))?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
    Ok(Custody::new(
        state,
        KeyRing::single(key),
        loopward::config::ChainKind::HmacSha256,
    ))
}

fn intro<W: Write + Send + 'static>(stage: &Stage<W>) {
    let mut o = stage.out.lock().unwrap_or_else(|p| p.into_inner());
    o.title("loopward demo — the lessons, acted out by a scripted team");
    let backend = match &stage.opts.backend {
        DemoBackend::Fake => "the offline fake backend (no keys, no network)".to_string(),
        DemoBackend::Llama { model, .. } => format!("a local model, {}", model.display()),
    };
    o.line(
        Tone::Plain,
        format!(
            "Team: root (coordinator), planner, builder, auditor, tester, scribe — on {backend}."
        ),
    );
    if let DemoBackend::Llama { .. } = stage.opts.backend {
        o.line(
            Tone::Plain,
            "The chapters' texts describe the scripted team; here a real model decides what to do,",
        );
        o.line(
            Tone::Plain,
            "and the same gates and layers decide what it may do.",
        );
    }
    if stage.opts.backend == DemoBackend::Fake {
        o.line(
            Tone::Plain,
            "The fake agents are scripted to behave as agents were observed to behave: a warning",
        );
        o.line(
            Tone::Plain,
            "did not stop them. What the rules do about it is not scripted: the gates decide.",
        );
    }
    o.line(
        Tone::Plain,
        "Every figure below is computed from the runs' ledgers, not written into the script.",
    );
}

fn outro<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let check = stage.custody.verify_options(&stage.runs_dir)?;
    let table = ledger::report(&stage.runs_dir, &check)?.to_table();
    let index = ledger::write_index_html(&stage.runs_dir, &check)?;
    let calibration = calibration(&stage.runs_dir, &check)?;
    let mut o = stage.out.lock().unwrap_or_else(|p| p.into_inner());
    o.blank();
    o.title("Compliance, computed from the ledgers (the same code as `loopward report`)");
    o.block(Tone::Plain, &table);
    o.blank();
    if let Some(calibration) = calibration {
        o.blank();
        o.title("Calibration: a stricter sprawl gate, tried on these runs first");
        o.block(Tone::Plain, &calibration);
    }
    o.blank();
    o.line(
        Tone::Plain,
        format!("Audit files: {}", stage.runs_dir.display()),
    );
    o.line(
        Tone::Dim,
        "  each run: events.jsonl (the ledger, HMAC-chained), audit.md (its timeline), audit.html (its page), audit.json",
    );
    let (key, key_file) = stage.key_file();
    o.line(
        Tone::Dim,
        format!("  chained under the demo's fixed key {key} (no secret: real runs use the random key `loopward init` makes)"),
    );
    o.line(
        Tone::Dim,
        format!("  all runs at a glance: {}", index.display()),
    );
    o.line(
        Tone::Dim,
        format!(
            "  verify them: loopward verify {} --key {}",
            stage.runs_dir.display(),
            key_file.display()
        ),
    );
    o.line(
        Tone::Dim,
        format!(
            "  figures again: loopward report {} --key {}",
            stage.runs_dir.display(),
            key_file.display()
        ),
    );
    o.flush();
    Ok(())
}

/// `loopward calibrate` on the demo's runs, in shadow mode (nothing executed): how often the
/// sprawl gate would fire at the demo's threshold and at a stricter one.
/// `None` when the sprawl chapter was not played.
fn calibration(
    runs_dir: &Path,
    check: &loopward_runner::audit::VerifyOptions,
) -> Result<Option<String>> {
    let config = runs_dir.join("ch3-sprawl").join("loopward.toml");
    if !config.is_file() {
        return Ok(None);
    }
    let current = Config::load(&config)?.policy();
    let fired = |threshold: u32| -> Result<(u64, u64, u64)> {
        let mut candidate = current.clone();
        candidate.gates.sprawl.threshold = threshold;
        let mut cal = loopward_calibrate::Calibrator::new(&candidate, None, "root")?
            .with_verify(check.clone());
        cal.add_path(runs_dir)?;
        let r = cal.finish();
        let n = r.gates.get("sprawl").map_or(0, |g| g.turns_fired);
        Ok((n, r.turns, r.writes))
    };
    let now = current.gates.sprawl.threshold;
    let (n3, turns, writes) = fired(now)?;
    let (n2, _, _) = fired(now - 1)?;
    Ok(Some(format!(
        "{writes} recorded writes in {turns} turns re-judged, nothing executed:\n\
         sprawl at threshold {now} would have fired in {n3} of {turns} turns; at threshold {} in {n2} of {turns}\n\
         (loopward calibrate --config candidate.toml runs: per gate, with example refusals and a false-positive estimate)",
        now - 1
    )))
}

/// Chapter 9's runs folder under a scratch folder: its loops' ledgers (each with its sessions'
/// hook decisions), as `loopward loop` keeps them in a project's `runs/`.
pub fn loop_runs_dir(scratch: &Path) -> PathBuf {
    scratch.join("loop").join("runs")
}

/// How chapter 9's runs in `scratch` verify (see [`verify_options`]).
pub fn loop_verify_options(scratch: &Path) -> Result<loopward_runner::audit::VerifyOptions> {
    keyed_check(scratch, &loop_runs_dir(scratch))
}

/// The demo's own runs folder under a scratch folder.
pub fn runs_dir(scratch: &Path) -> PathBuf {
    scratch.join("runs")
}

/// A printer shared with the live timeline.
pub fn shared<W: Write + Send>(p: Printer<W>) -> SharedPrinter<W> {
    Arc::new(Mutex::new(p))
}
