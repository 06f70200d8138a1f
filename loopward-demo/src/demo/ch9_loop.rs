//! Chapter 9: a loop over a coding agent. The builder is a Claude Code session (the stand-in
//! client, [`super::stand_in`]), run session after session by loopward: done means verified,
//! the session's own tool calls meet the territories through the hook (judged by the loop and
//! recorded in its one ledger), and sessions that change nothing stop the loop.

use super::cli_loop::StandIns;
use super::{Act, Played, Stage, DEMO_EPOCH_MILLIS};
use anyhow::Result;
use loopward_core::{AuditEvent, CallId, Decision, LayerId, LayerVerdict, RunStatus};
use loopward_runner::model::fake::Script;
use loopward_runner::ManualClock;
use loopward_term::render::Tone;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

pub(super) const TITLE: &str = "A loop over a coding agent";
pub(super) const LESSON: &str = "\
Hand-written loops (`while :; do claude -p \"$(cat PROMPT.md)\"; done`) end when the agent says
it is done, and otherwise run on. Here the builder is a Claude Code session — a scripted
stand-in speaking the client's stream-json and hook protocol — looped by loopward: only the
verifier ends the loop, each tool call inside a session meets the same territories through
loopward's hook (which asks the loop, and the loop's ledger records the decision under the
session's turn), and sessions that change nothing are stopped by evidence, not by their words.";

/// The verifier: the work is done when the parser exists.
const VERIFY: &str = "grep -q 'pub fn parse' src/parser.rs";

/// The loop's team: the builder is a `claude-code` agent; plan.md is still the planner's.
fn config() -> String {
    format!(
        r#"[run]
first = "builder"

[[agent]]
name = "planner"
role = "You write plan.md."
tools = ["read_file", "write_file", "handoff"]

[[agent]]
name = "builder"
kind = "claude-code"
verify = "{VERIFY}"

[[territory]]
paths = ["plan.md", "plans/**"]
owner = "planner"

[[territory]]
paths = ["src/**"]
owner = "builder"

[limits]
turns_per_run = 12
"#
    )
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let Some(exe) = stage.opts.stand_in.clone() else {
        stage.say(
            Tone::Warn,
            "  skipped: this chapter runs the demo binary as its stand-in coding agent, and its path was not given (Options::stand_in); run it with `cargo run -p loopward-demo -- --chapter 9`",
        );
        return Ok(());
    };
    let runs = super::loop_runs_dir(&stage.scratch);
    let config = config();
    let cap = loopward::config::Config::parse("demo.toml", &config)?
        .limits
        .turns_per_run;

    let played = session_loop(
        stage,
        &exe,
        &runs,
        "ch9-loop",
        "progress",
        "Make the parser test pass.",
    )
    .await?;
    let inside = sessions(stage, &played, true);
    let claims = verdicts(&played, LayerVerdict::Refused, true);
    let refusals: usize = inside.iter().map(|s| s.refused.len()).sum();
    let written: usize = inside.iter().map(|s| s.written.len()).sum();
    stage.say(
        Tone::Ok,
        format!(
            "  {}; {} refused by the verifier; inside the sessions the hook refused {} and let {written} through; the loop ended {} only when `verify` passed (reported cost ${:.3})",
            count(inside.len(), "session"),
            count(claims, "completion claim"),
            count(refusals, "write"),
            status(&played),
            cost(&played),
        ),
    );

    stage.blank();
    let played = session_loop(
        stage,
        &exe,
        &runs,
        "ch9-backstop",
        "stuck",
        "Make the parser test pass.",
    )
    .await?;
    let n = sessions(stage, &played, false).len();
    let claims = verdicts(&played, LayerVerdict::Refused, true);
    let repeats = played
        .events
        .iter()
        .filter(|(_, e)| matches!(e, AuditEvent::LayerDecision { layer, .. } if *layer == LayerId::Repeat))
        .count();
    stage.say(
        Tone::Ok,
        format!(
            "  {n} sessions, {claims} of them claiming done; {repeats} counted as repeats by evidence (no file changed, the same verdict); the loop ended {} after {n} sessions, not \"finished naturally\" (and never past its cap of {cap})",
            status(&played)
        ),
    );
    let (_, key_file) = stage.key_file();
    stage.say(
        Tone::Dim,
        format!(
            "  the loops' ledgers, the hook's decisions in them: loopward report {} --key {}",
            runs.display(),
            key_file.display()
        ),
    );
    Ok(())
}

/// Plays one loop of the stand-in running `script`, in a workspace whose parser is not written.
async fn session_loop<W: Write + Send + 'static>(
    stage: &Stage<W>,
    exe: &Path,
    runs: &Path,
    run: &str,
    script: &str,
    task: &str,
) -> Result<Played> {
    let workspace = stage.workspace(run);
    std::fs::create_dir_all(workspace.join("src"))?;
    std::fs::write(workspace.join("src/parser.rs"), "// The parser: to do.\n")?;
    let state = stage.scratch.join("loop").join("stand-in").join(run);
    std::fs::create_dir_all(&state)?;
    std::fs::write(state.join("script"), script)?;
    std::fs::create_dir_all(runs)?;
    let cli = StandIns {
        exe: exe.to_path_buf(),
        state,
        config: stage.config_path(run),
        workspace: workspace.canonicalize()?,
        custody: stage.custody.clone(),
        clock: Arc::new(ManualClock::new(DEMO_EPOCH_MILLIS)),
    };
    stage
        .act_in(
            Act::new(run, task, "builder", Script::default()).with_config(config()),
            runs,
            Some(Arc::new(cli)),
        )
        .await
}

/// What one session did inside, from the hook's decisions in the loop's ledger.
#[derive(Default)]
struct Inside {
    /// The hook's decisions (one per hook event the session's client sent).
    decisions: usize,
    /// The refusals among their records, by tool call: (call id, gate, reason).
    refused: Vec<(CallId, String, String)>,
    /// Paths written with the hook's leave, by tool call: (call id, path).
    written: Vec<(CallId, String)>,
}

/// Each session of a loop (one turn each): what the hook decided inside it, read from the
/// loop's own ledger, where each decision is a `layer_decision` `hook` counting the records
/// that follow it. With `told`, printed with what the agent said and called (the loop's ledger
/// records each of the session's model calls).
fn sessions<W: Write + Send + 'static>(
    stage: &Stage<W>,
    played: &Played,
    told: bool,
) -> Vec<Inside> {
    let turn_of = |scope: &loopward_core::Scope| scope.turn.map_or(0, |t| t.0);
    // The client names files by absolute path, in the workspace as the process sees it.
    let ws = played
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| played.workspace.clone());
    let mut out: BTreeMap<u32, Inside> = BTreeMap::new();
    // Records of the current hook decision still to come.
    let mut framed = 0;
    for (scope, e) in &played.events {
        let n = turn_of(scope);
        if framed > 0 {
            framed -= 1;
            let inside = out.entry(n).or_default();
            match e {
                AuditEvent::GateDecision {
                    call_id: Some(id),
                    gate,
                    decision: Decision::Deny(r),
                    ..
                } => inside
                    .refused
                    .push((id.clone(), gate.to_string(), r.reason.clone())),
                AuditEvent::ToolFinished {
                    call_id,
                    is_error: false,
                    effects,
                    ..
                } => inside.written.extend(
                    effects
                        .iter()
                        .map(|e| (call_id.clone(), e.path.to_string())),
                ),
                _ => {}
            }
            continue;
        }
        match e {
            AuditEvent::TurnStarted { .. } => {
                out.entry(n).or_default();
            }
            AuditEvent::LayerDecision {
                layer: LayerId::Hook,
                detail,
                ..
            } => {
                framed = detail.as_hook().map_or(0, |h| h.records);
                out.entry(n).or_default().decisions += 1;
            }
            _ => {}
        }
    }
    if told {
        for (&n, inside) in &out {
            stage.say(
                Tone::Dim,
                format!(
                    "    session {n}, inside (its model calls and {}, from the loop's ledger):",
                    count(inside.decisions, "hook decision")
                ),
            );
            for (scope, e) in &played.events {
                let AuditEvent::ModelReply {
                    text, tool_calls, ..
                } = e
                else {
                    continue;
                };
                if turn_of(scope) != n {
                    continue;
                }
                if !text.is_empty() {
                    stage.say(Tone::Dim, format!("      builder: “{text}”"));
                }
                for call in tool_calls {
                    let path = call.arguments["file_path"].as_str().unwrap_or_default();
                    let path = Path::new(path)
                        .strip_prefix(&ws)
                        .map_or_else(|_| path.to_string(), |p| p.display().to_string());
                    let refused = inside.refused.iter().find(|(id, ..)| *id == call.id);
                    let written = inside.written.iter().any(|(id, _)| *id == call.id);
                    let (tone, what) = match (refused, written) {
                        (Some((_, gate, why)), _) => {
                            (Tone::Refusal, format!("✗ refused by {gate}: {why}"))
                        }
                        (None, true) => (Tone::Ok, "✓ allowed; written".to_string()),
                        (None, false) => (Tone::Dim, "no decision recorded".to_string()),
                    };
                    stage.say(tone, format!("      · {} {path} → {what}", call.name));
                }
            }
        }
    }
    out.into_values().collect()
}

/// `verify` decisions of `verdict` where the session claimed done (`claimed`).
fn verdicts(played: &Played, verdict: LayerVerdict, claimed: bool) -> usize {
    played
        .events
        .iter()
        .filter(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } => {
                *layer == LayerId::Verify
                    && *decision == verdict
                    && detail
                        .as_verify()
                        .is_some_and(|v| v.claimed_done == claimed)
            }
            _ => false,
        })
        .count()
}

/// `n thing(s)`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The cost the sessions reported, in dollars.
fn cost(played: &Played) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let micros = played.figures.cost_micros.unwrap_or_default() as f64;
    micros / 1e6
}

fn status(played: &Played) -> String {
    match &played.figures.status {
        Some(RunStatus::CapReached { cap }) => format!("cap_reached ({cap})"),
        Some(s) => s.label().to_string(),
        None => "unfinished".into(),
    }
}
