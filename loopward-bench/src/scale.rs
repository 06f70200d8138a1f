//! Part 4: many concurrent runs of a scripted team in one process.
//!
//! For each N, N runs of the [`TeamModel`] team (planner and builder, `2 × TEAM_ROUNDS` turns,
//! a `noop` call in every turn) start at once on one multi-threaded runtime, through the same
//! recommended stack as part 2, auditing to a sink that keeps nothing. Every run waits at a
//! [`Hold`] before its first model call; when all N are waiting, memory is read (the idle
//! figure), the hold is released and the time until all have finished gives turns per second.

use crate::harness::Effort;
use crate::machine::proc_status_bytes;
use crate::report::{fmt_kib, fmt_rate, fmt_ratio, thousands, Section, Target};
use crate::support::{team_runner, CountingSink, Hold, TeamModel, TEAM_ROUNDS};
use anyhow::{Context as _, Result};
use loopward_core::{Person, RunStatus};
use loopward_runner::RunSpec;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The target: heap per idle concurrent run.
pub const TARGET_IDLE_BYTES: f64 = 16.0 * 1024.0;

/// Reads the process's heap figures; the scale binary implements it over its counting global
/// allocator.
pub trait MemProbe {
    /// Bytes allocated now.
    fn current(&self) -> usize;
    /// The most bytes allocated at once since the last reset.
    fn peak(&self) -> usize;
    /// Starts a new peak from the current figure.
    fn reset_peak(&self);
}

/// One N's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// Concurrent runs.
    pub runs: usize,
    /// Turns taken by all of them.
    pub turns: u64,
    /// Seconds from release to the last run's end.
    pub seconds: f64,
    /// Turns per second.
    pub turns_per_sec: f64,
    /// Heap bytes per run while all were waiting.
    pub idle_heap_per_run: f64,
    /// Peak heap bytes per run (above the figure before the runs started).
    pub peak_heap_per_run: f64,
    /// `VmRSS` growth per run while all were waiting.
    pub idle_rss_per_run: f64,
    /// How many times this N was run (the median rate is kept, the largest memory figures).
    pub repetitions: usize,
}

/// Runs part 4.
pub fn run(effort: Effort, mem: &dyn MemProbe) -> Result<Section> {
    let sizes: &[usize] = effort.pick(&[1, 100, 1_000, 10_000], &[1, 10, 100]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ws_dir = tempfile::tempdir()?;
    let mut points = vec![];
    // A first pass warms up allocator pools and lazy statics, so N=1 is not charged for them.
    rt.block_on(point(1, ws_dir.path(), mem))?;
    for &n in sizes {
        // Small N finish in well under a millisecond: repeat them and keep the median rate.
        let reps = effort.pick((1_000 / n).clamp(1, 25), 1);
        let mut runs = (0..reps)
            .map(|_| rt.block_on(point(n, ws_dir.path(), mem)))
            .collect::<Result<Vec<_>>>()?;
        runs.sort_by(|a, b| a.turns_per_sec.total_cmp(&b.turns_per_sec));
        let mut p = runs[runs.len() / 2].clone();
        // Memory: the largest figure of the repetitions.
        p.idle_heap_per_run = runs.iter().map(|r| r.idle_heap_per_run).fold(0.0, f64::max);
        p.peak_heap_per_run = runs.iter().map(|r| r.peak_heap_per_run).fold(0.0, f64::max);
        p.idle_rss_per_run = runs.iter().map(|r| r.idle_rss_per_run).fold(0.0, f64::max);
        p.repetitions = reps;
        points.push(p);
    }
    Ok(section(&points))
}

async fn point(n: usize, ws: &std::path::Path, mem: &dyn MemProbe) -> Result<Point> {
    let hold = Arc::new(Hold::default());
    let (runner, planner) = team_runner(ws, TeamModel::held(hold.clone()))?;
    let runner = Arc::new(runner);
    let sink = Arc::new(CountingSink::default());

    let heap0 = mem.current();
    let rss0 = proc_status_bytes("VmRSS").unwrap_or(0);
    mem.reset_peak();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (runner, sink, first) = (runner.clone(), sink.clone(), planner.clone());
        let id = crate::support::run_id(format!("scale-{n}-{i}"))?;
        tasks.push(tokio::spawn(async move {
            runner
                .run(RunSpec::new(
                    id,
                    Person::at_the_keyboard().says("build it"),
                    first,
                    sink,
                ))
                .await
        }));
    }
    let waiting_since = Instant::now();
    while hold.arrived() < n {
        anyhow::ensure!(
            waiting_since.elapsed() < Duration::from_secs(60),
            "runs did not reach the hold"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let idle_heap = mem.current().saturating_sub(heap0);
    let idle_rss = proc_status_bytes("VmRSS").unwrap_or(0).saturating_sub(rss0);
    let start = Instant::now();
    hold.release();
    let mut turns = 0u64;
    for t in tasks {
        let report = t.await.context("a run panicked")?;
        anyhow::ensure!(
            report.status == RunStatus::Completed,
            "a run ended {:?}",
            report.status
        );
        turns += u64::from(report.turns);
    }
    let seconds = start.elapsed().as_secs_f64();
    let peak = mem.peak().saturating_sub(heap0);
    anyhow::ensure!(
        turns == (n * 2 * TEAM_ROUNDS) as u64,
        "expected {} turns, got {turns}",
        n * 2 * TEAM_ROUNDS
    );
    Ok(Point {
        runs: n,
        turns,
        seconds,
        turns_per_sec: turns as f64 / seconds,
        idle_heap_per_run: idle_heap as f64 / n as f64,
        peak_heap_per_run: peak as f64 / n as f64,
        idle_rss_per_run: idle_rss as f64 / n as f64,
        repetitions: 1,
    })
}

fn section(points: &[Point]) -> Section {
    let base = points.first().map_or(1.0, |p| p.turns_per_sec);
    let rows = points
        .iter()
        .map(|p| {
            vec![
                thousands(p.runs as u64),
                thousands(p.turns),
                fmt_rate(p.turns_per_sec),
                fmt_ratio(p.turns_per_sec / base),
                fmt_kib(p.idle_heap_per_run),
                fmt_kib(p.peak_heap_per_run),
                fmt_kib(p.idle_rss_per_run),
            ]
        })
        .collect();
    let largest = points.iter().max_by_key(|p| p.runs);
    let idle = largest.map_or(0.0, |p| p.idle_heap_per_run);
    Section {
        part: 4,
        title: "Scale: concurrent runs in one process".into(),
        method: format!(
            "N runs of a scripted two-agent team (planner ⇄ builder, {} turns a run, a `noop` \
             tool call and a handoff in each turn) start at once on a multi-threaded tokio runtime \
             (one worker per core), each agent behind the same stack as part 2, audit to a sink \
             that keeps nothing (ledger costs are part 3's). Every run is held before its first \
             model call until all N are in flight: the heap then, over N, is the **idle** figure. \
             Heap is counted by a counting global allocator in the bench binary (`peak_alloc`: \
             bytes currently allocated and the peak since a reset); the `VmRSS` growth from \
             `/proc/self/status` is shown beside it. Throughput is turns per second from release \
             to the last run's end, the median of up to 25 repetitions for small N (memory: \
             the largest of them); × is against one run.",
            2 * TEAM_ROUNDS
        ),
        columns: [
            "runs",
            "turns",
            "turns/s",
            "× 1 run",
            "idle heap/run",
            "peak heap/run",
            "idle RSS/run",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        targets: vec![Target::at_most(
            format!(
                "heap per idle concurrent run ({} runs)",
                largest.map_or(0, |p| p.runs)
            ),
            idle,
            TARGET_IDLE_BYTES,
            fmt_kib,
        )
        .or_missed(|| "missed: see the note below".to_string())],
        notes: vec![],
        data: json!({ "points": points }),
    }
}
