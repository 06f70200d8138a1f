//! Part 11: a run's fixed cost on disk. A whole scripted run — the team of part 4, at the size
//! of the demo's small runs (one round: two turns) and at part 4's (three rounds) — into a
//! keyed ledger with the index head in a state folder, as `loopward run` writes it, under the
//! default durability and without fsync, against the same run into a [`MemorySink`](loopward_runner::audit::MemorySink). The
//! three run interleaved, round by round; the medians count. Syncs and new files per run are
//! counted through the ledger's fault hook, which sees every one before it happens.

use crate::harness::{runtime, Effort};
use crate::report::{fmt_ns, fmt_ratio, Section, Target, Verdict};
use crate::team_run::{team_run_in_memory, team_run_on_disk, Disk, TeamRun};
use anyhow::Result;
use loopward_runner::audit::{Durability, LedgerKey};
use serde_json::json;

/// The target: a whole run on disk, default durability ÷ the same run in memory (medians).
pub const TARGET_RATIO: f64 = 2.0;

/// One run size's figures: the median run of each side.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Sized {
    /// Rounds of the team (two turns each).
    pub rounds: usize,
    /// One `fdatasync` on this disk, measured between the runs (median, ns).
    pub fsync_ns: u64,
    /// In memory.
    pub memory: TeamRun,
    /// On disk without fsync.
    pub no_fsync: TeamRun,
    /// On disk, default durability.
    pub default: TeamRun,
}

impl Sized {
    /// Default durability on disk ÷ in memory.
    pub fn ratio(&self) -> f64 {
        self.default.seconds / self.memory.seconds
    }
}

/// One `fdatasync` of a line appended to a file in `dir`, in nanoseconds: the floor each of a
/// run's syncs costs on this disk now.
fn fsync_ns(dir: &std::path::Path) -> Result<u64> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("floor.jsonl"))?;
    f.write_all(b"{\"floor\":1}\n")?;
    let start = std::time::Instant::now();
    f.sync_data()?;
    Ok(crate::harness::elapsed_ns(start))
}

/// Runs part 11.
pub fn run(effort: Effort) -> Result<Section> {
    let rt = runtime()?;
    let dir = tempfile::tempdir()?;
    let key = LedgerKey::generate()?;
    let disk = |durability| Disk {
        runs_dir: dir.path().join("runs"),
        durability,
        key: Some(key.clone()),
        index_head: Some(dir.path().join("state").join("index-head.json")),
    };
    let reps = effort.pick(41, 5);
    let mut sizes = vec![];
    for rounds in [1, crate::support::TEAM_ROUNDS] {
        let (mut memory, mut no_fsync, mut default) = (vec![], vec![], vec![]);
        let mut floor = vec![];
        // One warm-up of each side, then the interleaved rounds.
        for rep in 0..=reps {
            let id = |side: &str| format!("r{rounds}-{side}-{rep}");
            let m = rt.block_on(team_run_in_memory(&id("m"), rounds))?;
            let n = rt.block_on(team_run_on_disk(
                &disk(Durability::NoSync),
                &id("n"),
                rounds,
            ))?;
            let d = rt.block_on(team_run_on_disk(
                &disk(Durability::Decisions),
                &id("d"),
                rounds,
            ))?;
            let f = (0..3)
                .map(|_| fsync_ns(dir.path()))
                .collect::<Result<Vec<_>>>()?;
            if rep > 0 {
                floor.extend(f);
                memory.push(m);
                no_fsync.push(n);
                default.push(d);
            }
        }
        floor.sort_unstable();
        sizes.push(Sized {
            rounds,
            fsync_ns: floor[floor.len() / 2],
            memory: median(memory),
            no_fsync: median(no_fsync),
            default: median(default),
        });
    }
    Ok(section(&sizes, reps, crate::machine::fs_type(dir.path())))
}

fn median(mut runs: Vec<TeamRun>) -> TeamRun {
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    runs[runs.len() / 2]
}

fn section(sizes: &[Sized], reps: usize, fs: Option<String>) -> Section {
    let rows = sizes
        .iter()
        .map(|s| {
            vec![
                format!("{} turns, {} records", 2 * s.rounds, s.default.records),
                fmt_ns(s.memory.seconds * 1e9),
                fmt_ns(s.no_fsync.seconds * 1e9),
                fmt_ns(s.default.seconds * 1e9),
                fmt_ns(s.fsync_ns as f64),
                fmt_ratio(s.no_fsync.seconds / s.memory.seconds),
                fmt_ratio(s.ratio()),
                s.default.syncs.to_string(),
                s.default.files.to_string(),
            ]
        })
        .collect();
    let small = &sizes[0];
    Section {
        part: 11,
        title: "A run's fixed cost on disk".into(),
        method: format!(
            "A whole scripted run of part 4's team (planner ⇄ builder, a `noop` call and a \
             handoff each turn, behind part 2's stack, the fake model) into a keyed ledger with \
             the index head in a state folder, as `loopward run` writes it — the run's folder, \
             `events.jsonl`, `audit.json`, `audit.md`, `audit.html`, the anchor and the head — \
             timed from the ledger's creation to its finish; against the same run into a \
             `MemorySink`. Default durability, no fsync and memory run interleaved, {reps} \
             rounds after one warm-up, median of each{}. Syncs and new files per run are \
             counted by the ledger's fault hook.",
            fs.map(|f| format!(", on {f}")).unwrap_or_default()
        ),
        columns: [
            "run",
            "in memory",
            "on disk, no fsync",
            "on disk, default",
            "one fdatasync",
            "no fsync × memory",
            "default × memory",
            "syncs/run",
            "new files/run",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        targets: vec![Target {
            what: format!(
                "a whole run on disk, default durability ÷ the same run in memory ({} turns, \
                 median)",
                2 * small.rounds
            ),
            target: format!("≤ {}", fmt_ratio(TARGET_RATIO)),
            measured: fmt_ratio(small.ratio()),
            verdict: Verdict::met_if(small.ratio() <= TARGET_RATIO),
            reason: (small.ratio() > TARGET_RATIO).then(|| {
                format!(
                    "missed, and out of reach on this disk with any sync: one `fdatasync` alone \
                     is {} the whole run in memory here, and the run makes {} — {} of them the \
                     ledger's (one per commit before an action its decisions authorise, one at \
                     finish), which the default durability keeps",
                    fmt_ratio(small.fsync_ns as f64 / (small.memory.seconds * 1e9)),
                    small.default.syncs,
                    small.default.ledger_syncs,
                )
            }),
        }],
        notes: sizes
            .iter()
            .map(|s| {
                let others = s.default.syncs.saturating_sub(s.default.ledger_syncs);
                let syncs_ns = s.default.syncs as f64 * s.fsync_ns as f64;
                let rest = (s.default.seconds - s.memory.seconds) * 1e9 - syncs_ns;
                let rest = if rest > 0.0 {
                    format!("{} over memory", fmt_ns(rest))
                } else {
                    "within the floor's noise".into()
                };
                format!(
                    "{} turns: {} records, {} decisions; {} syncs with the default durability \
                     ({} of the ledger: its commits and its finish; {others} besides: its two \
                     folders, with its first sync, the anchor and the index head), {} without \
                     fsync; {} new files and folders. One `fdatasync` costs {} on this disk now \
                     (median, measured between the runs): the syncs alone come to {}, {} the \
                     run in memory; the rest of the run on disk, default durability, is {rest}.",
                    2 * s.rounds,
                    s.default.records,
                    s.default.decisions,
                    s.default.syncs,
                    s.default.ledger_syncs,
                    s.no_fsync.syncs,
                    s.default.files,
                    fmt_ns(s.fsync_ns as f64),
                    fmt_ns(syncs_ns),
                    fmt_ratio(syncs_ns / (s.memory.seconds * 1e9)),
                )
            })
            .chain([
                "Cut on the way here: the pages and summaries (`audit.json`, `audit.md`, \
                 `audit.html`) are written whole by rename and never synced — they are \
                 regenerated from the ledger (`loopward report --html`); the run's folders are \
                 synced with the ledger's first sync instead of at create; the index head is a \
                 log that takes one synced line per anchor instead of a file replaced by rename \
                 (two syncs and a new file); without fsync nothing at all is synced."
                    .to_string(),
            ])
            .collect(),
        data: json!({ "sizes": sizes, "reps": reps, "target_ratio": TARGET_RATIO }),
    }
}
