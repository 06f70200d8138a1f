//! Part 7: one governed iteration in memory — a class-jump verdict, an automatic stop-gate
//! decision and an audit record, into an in-memory sink.
//!
//! The subject reports a failed attempt to [`ClassJump::report`], clears a stop-gate in `auto`
//! mode before a phase ([`StopGates::before_phase`]) and records a `tool_finished`, all into a
//! [`MemorySink`]. The baseline records three events of the same kinds, made beforehand, into
//! the same kind of sink: what is left is the deciding. Heap allocations per iteration are
//! counted in a child process whose global allocator counts them (`loopward-bench-allocs`,
//! beside this binary), so the timing here is not slowed by counting.

use crate::harness::{runtime, time_n, Effort, Stats};
use crate::report::{fmt_ns, fmt_ratio, Section, Target, Verdict};
use crate::support::{agent, run_id};
use anyhow::{Context as _, Result};
use loopward_core::{
    AuditEvent, ClassJumpDetail, LayerDetail, LayerVerdict, StopGateDetail, TurnNumber,
};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::classjump::{Attempt, ClassJump, ClassJumpConfig, VerdictKind};
use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
use loopward_runner::{RunContext, SystemClock, TurnContext, Workspace};
use serde_json::json;
use std::sync::Arc;

/// The target: a governed iteration's median time.
pub const TARGET_NS: f64 = 800.0;
/// The target: heap allocations per governed iteration.
pub const TARGET_ALLOCS: f64 = 5.0;

/// A run with a class-jump tracker and an `auto` stop-gate, auditing into memory.
pub struct Fixture {
    turn: TurnContext,
    class_jump: ClassJump,
    gates: StopGates,
    finished: AuditEvent,
    subtasks: Vec<String>,
    strategy: String,
    strategies: Vec<String>,
    done: u64,
    // Kept alive beside the turn, which holds it too.
    _workspace: tempfile::TempDir,
}

/// The record an iteration makes: a shell call that failed.
fn failed_shell() -> AuditEvent {
    AuditEvent::ToolFinished {
        call_id: "c1".into(),
        tool: "shell".into(),
        is_error: true,
        effects: vec![],
        summary: "exit status 1".into(),
        output: None,
    }
}

/// Subtasks change every this many iterations, well before a subtask's strategies run out.
const PER_SUBTASK: u64 = 1_000;

impl Fixture {
    /// A fresh run.
    pub fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let ws = Workspace::new(dir.path())?;
        let builder = agent("builder");
        let run = RunContext::new(
            run_id("governed".into())?,
            vec![builder.clone()],
            ws,
            Arc::new(MemorySink::default()),
            Arc::new(SystemClock),
        );
        let turn = TurnContext::new(run, builder, TurnNumber(1));
        let strategies: Vec<String> = (0..32).map(|i| format!("strategy-{i}")).collect();
        let class_jump = ClassJump::new(ClassJumpConfig {
            strategies: strategies.clone(),
            failures_per_strategy: 100,
            count_failed_tools: vec![],
        })?;
        let gates = StopGates::new(&[StopGateConfig::phase("deploy", StopMode::Auto)])?;
        Ok(Self {
            turn,
            class_jump,
            gates,
            finished: failed_shell(),
            subtasks: (0..4096)
                .map(|i| format!("make the build pass #{i}"))
                .collect(),
            strategy: strategies[0].clone(),
            strategies,
            done: 0,
            _workspace: dir,
        })
    }

    /// One governed iteration.
    pub async fn iterate(&mut self) -> Result<()> {
        let sub = &self.subtasks[(self.done / PER_SUBTASK) as usize % self.subtasks.len()];
        if self.done.is_multiple_of(PER_SUBTASK) {
            self.strategy.clone_from(&self.strategies[0]);
        }
        self.done += 1;
        let v = self
            .class_jump
            .report(&self.turn, sub, &self.strategy, Attempt::Failed)?;
        match v.kind() {
            VerdictKind::Retry => {}
            VerdictKind::Jump => self.strategy = v.strategy().unwrap_or_default().to_string(),
            other => anyhow::bail!("subtask {sub} ended {other:?}; the fixture must not run out"),
        }
        let approvals = self
            .gates
            .before_phase(&self.turn, "deploy")
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        anyhow::ensure!(approvals.len() == 1, "the auto gate did not approve");
        self.turn.record(&self.finished)?;
        Ok(())
    }

    /// The baseline: the three events an iteration records, made beforehand.
    pub fn baseline_events() -> [AuditEvent; 3] {
        [
            AuditEvent::LayerDecision {
                layer: "class_jump".into(),
                decision: LayerVerdict::Retry,
                detail: LayerDetail::ClassJump(ClassJumpDetail {
                    allowed: 100,
                    failures: 1,
                    next: Some("strategy-0".into()),
                    source: None,
                    strategy: "strategy-0".into(),
                    subtask: "make the build pass #0".into(),
                    tool: None,
                }),
            },
            AuditEvent::LayerDecision {
                layer: "stopgate".into(),
                decision: LayerVerdict::AutoApproved,
                detail: LayerDetail::StopGate(StopGateDetail {
                    action: "phase:deploy".into(),
                    by: None,
                    dir: None,
                    gate: "phase:deploy".into(),
                    id: None,
                    mode: "auto",
                    reason: None,
                    summary: "enter phase deploy".into(),
                }),
            },
            failed_shell(),
        ]
    }

    /// Records the baseline's events.
    pub fn record_baseline(&self, events: &[AuditEvent; 3]) -> Result<()> {
        for e in events {
            self.turn.record(e)?;
        }
        Ok(())
    }
}

/// Allocations per governed iteration, from `loopward-bench-allocs` beside this binary
/// (`None`, with why, when it could not be run).
fn count_allocations(effort: Effort) -> Result<(f64, f64), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = exe.with_file_name("loopward-bench-allocs");
    let n = effort.pick(20_000, 2_000).to_string();
    let out = std::process::Command::new(&child)
        .args(["--iterations", &n])
        .output()
        .map_err(|e| format!("{}: {e}", child.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    Ok((
        v["subject_allocs"].as_f64().unwrap_or(f64::NAN),
        v["baseline_allocs"].as_f64().unwrap_or(f64::NAN),
    ))
}

/// Runs part 7.
pub fn run(effort: Effort) -> Result<Section> {
    let rounds = effort.pick(20, 3);
    let per_round = effort.pick(2_000, 200);
    let rt = runtime()?;
    let mut subject = Fixture::new()?;
    let base = Fixture::new()?;
    let events = Fixture::baseline_events();
    let (mut s_samples, mut b_samples) = (vec![], vec![]);
    rt.block_on(async {
        for round in 0..=rounds {
            let mut s = Vec::with_capacity(per_round);
            let mut failed = None;
            time_n(per_round, &mut s, async || {
                if let Err(e) = subject.iterate().await {
                    failed.get_or_insert(e);
                }
            })
            .await;
            if let Some(e) = failed {
                return Err(e);
            }
            let mut b = Vec::with_capacity(per_round);
            time_n(per_round, &mut b, async || {
                std::hint::black_box(base.record_baseline(&events).ok());
            })
            .await;
            if round > 0 {
                s_samples.extend(s);
                b_samples.extend(b);
            }
        }
        Ok(())
    })
    .context("a governed iteration failed")?;
    let s = Stats::from_samples(&mut s_samples);
    let b = Stats::from_samples(&mut b_samples);
    let allocs = count_allocations(effort);
    let (sub_allocs, base_allocs) = allocs.clone().unwrap_or((f64::NAN, f64::NAN));
    let fmt_allocs = |a: f64| {
        if a.is_nan() {
            "—".to_string()
        } else {
            format!("{a:.1}")
        }
    };
    let allocs_met = sub_allocs <= TARGET_ALLOCS;
    let mut notes = vec![format!(
        "The deciding alone (subject − baseline): {} a median iteration; the baseline's three \
         records into the in-memory sink cost {}.",
        fmt_ns(s.median_ns - b.median_ns),
        fmt_ns(b.median_ns)
    )];
    notes.push(
        "What the deciding no longer costs: a layer's decision carries a typed `LayerDetail` \
         (the class-jump and stop-gate figures as fields, names shared as `Arc<str>`), \
         serialised only if a sink writes it, to the bytes the `serde_json` map gave; the ids \
         in every scope are `Arc<str>`, so a scope is copied by reference counts; \
         `ClassJump::report` looks its subtask up by `&str` and its verdict shares the \
         subtask's and strategy's names; a phase gate's action, key and summary are made once \
         at configuration and every approval shares them; and decisions reach the sink by \
         value (`AuditSink::record_owned`), which `MemorySink` keeps without a copy."
            .to_string(),
    );
    notes.push(
        "What is left, read from `perf record` of `loopward-bench-allocs` and the code: of the \
         allocations per iteration, three are the copy `MemorySink::record` makes of the \
         `tool_finished` the fixture holds and records by reference (its call id, tool and \
         summary; a runner hands its own event over with `record_owned`), one is the `Vec` \
         `StopGates::before_phase` returns its approval in. The time left is the locks (the \
         run's extensions, the subtask map, the sink), hashing the subtask's name, and the \
         in-memory sink itself: it keeps every event, so its `Vec` grows and touches fresh \
         pages (page faults) as the iterations go on; the baseline pays that too."
            .to_string(),
    );
    if let Err(why) = &allocs {
        notes.push(format!("Allocations were not counted: {why}"));
    }
    Ok(Section {
        part: 7,
        title: "Governed iteration in memory".into(),
        method: format!(
            "One iteration = a failed attempt reported to `ClassJump::report` (its verdict \
             recorded), a stop-gate in `auto` mode cleared before a phase (its approval \
             recorded) and a `tool_finished` recorded, into a `MemorySink`; the subtask changes \
             every {PER_SUBTASK} iterations so no subtask runs out of strategies. The baseline \
             records the same three events, made beforehand, into the same kind of sink (by \
             reference, so the sink copies them). Subject and baseline alternate, {per_round} iterations each per round, on a \
             tokio current-thread runtime. Heap allocations are counted in a separate process \
             (`loopward-bench-allocs`, whose global allocator counts them: `stats_alloc`, as \
             `peak_alloc` in part 4 counts bytes but not allocations) over the same iterations."
        ),
        columns: ["iteration", "median", "p99", "× baseline", "allocations"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            vec![
                "baseline: three records, made beforehand".into(),
                fmt_ns(b.median_ns),
                fmt_ns(b.p99_ns),
                "1.00×".into(),
                fmt_allocs(base_allocs),
            ],
            vec![
                "class-jump verdict + auto stop-gate + record".into(),
                fmt_ns(s.median_ns),
                fmt_ns(s.p99_ns),
                fmt_ratio(s.median_ns / b.median_ns),
                fmt_allocs(sub_allocs),
            ],
        ],
        targets: vec![
            Target::at_most(
                "governed iteration in memory (median)",
                s.median_ns,
                TARGET_NS,
                fmt_ns,
            )
            .or_missed(|| "missed: see the notes below".to_string()),
            Target {
                what: "heap allocations per governed iteration".into(),
                target: format!("≤ {TARGET_ALLOCS:.0}"),
                measured: fmt_allocs(sub_allocs),
                verdict: if sub_allocs.is_nan() {
                    Verdict::NotMeasured
                } else {
                    Verdict::met_if(allocs_met)
                },
                reason: (!allocs_met).then(|| "missed: see the notes below".to_string()),
            },
        ],
        notes,
        data: json!({
            "subject": s, "baseline": b,
            "subject_allocs_per_iteration": sub_allocs,
            "baseline_allocs_per_iteration": base_allocs,
        }),
    })
}
