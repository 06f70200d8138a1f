//! Part 3: ledger throughput under each durability mode, on the real disk.
//!
//! The events are a tool call's worth, repeated: `model_call`, `tool_requested`,
//! `gate_decision` (a decision: fsynced under the default durability), `tool_finished`. Each
//! mode appends for a fixed time, three times, interleaved with the others; the median rate
//! counts.

use crate::harness::{runtime, Effort};
use crate::machine::{fs_type, write_syscalls};
use crate::report::{fmt_ns, fmt_rate, fmt_ratio, Section, Target};
use crate::support::agent;
use crate::team_run::{team_run, TeamRun};
use anyhow::{Context as _, Result};
use loopward_core::{AuditEvent, AuditSink, Decision, GateMode, RunId, Scope, TurnNumber, Usage};
use loopward_runner::audit::{Durability, Ledger, LedgerOptions};
use serde_json::json;
use std::io::Write;
use std::num::NonZeroU32;
use std::path::Path;
use std::time::{Duration, Instant};

/// The group size of the group-commit mode.
pub const GROUP: u32 = 64;

/// A tool call's worth of events, as part 3 records them.
pub fn events() -> Vec<AuditEvent> {
    vec![
        AuditEvent::ModelCall {
            model: "fake".into(),
            usage: Usage {
                input_tokens: 812,
                output_tokens: 40,
                cached_tokens: 0,
                calls: 1,
            },
            cost_micros: None,
            tool_calls: 1,
        },
        AuditEvent::ToolRequested {
            call_id: "call-1".into(),
            tool: "write_file".into(),
            arguments: json!({"path": "src/lib.rs", "content": "pub fn answer() -> u32 { 42 }\n"}),
        },
        AuditEvent::GateDecision {
            call_id: Some("call-1".into()),
            gate: loopward_core::GateId::new(
                loopward_core::GateKind::Territory,
                "territory:builder",
            ),
            mode: GateMode::Enforce,
            action: loopward_core::Action::tool("write_file"),
            path_raw: Some("src/lib.rs".into()),
            source: None,
            path: Some("src/lib.rs".into()),
            decision: Decision::Allow,
        },
        AuditEvent::ToolFinished {
            call_id: "call-1".into(),
            tool: "write_file".into(),
            is_error: false,
            effects: vec![],
            summary: "wrote 30 bytes to src/lib.rs".into(),
            output: None,
        },
    ]
}

#[derive(Clone, Copy)]
enum Mode {
    Ledger(Durability),
    /// The same events as JSON lines, appended as the ledger appends them, no chain.
    Raw(Floor),
}

/// How the floor rows make their lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Floor {
    /// Through a `serde_json::Value`, as the ledger did before it wrote events straight.
    ViaValue,
    /// Serialised straight from the event.
    Direct,
    /// Serialised once beforehand: the `write(2)` alone.
    WriteOnly,
}

#[derive(serde::Serialize)]
struct Line<'a> {
    scope: &'a Scope,
    event: &'a AuditEvent,
}

struct Row {
    name: &'static str,
    mode: Mode,
    rates: Vec<f64>,
    syncs_per_event: &'static str,
    /// `write(2)` calls per event, over all repetitions.
    writes: Option<(u64, u64)>,
}

/// What a profile of the record loop found (`examples/ledger_loop.rs` under `perf record`, by
/// hand: a bench run does not profile).
const PROFILE: &str = "Profiled at 7ccffa8 with `examples/ledger_loop.rs` (this stream into a \
     ledger without fsync in a loop, 1.2 µs a record there; `perf record --call-graph dwarf`): \
     35% of a record is its share of the `write(2)`s (two for four records, 0.8 KB each; one \
     `write` to ext4 here costs about 0.8 µs, most of it the page cache's write path), 23% the \
     SHA-256 of its line (SHA-NI; about 400 bytes, seven blocks, 40 ns a block), 21% serialising \
     the event's data, 6% the head's strings (written by hand since 7ccffa8, which took 5% off), \
     the rest the hex, copies, the clock and the lock; no heap allocation. So the writes and the \
     hash alone take about 0.7 µs of a record, leaving 0.3 µs to serialise 400 bytes of JSON: \
     under 1 µs would take fewer `write`s — holding what records a finished action (a tool's \
     end, a model's reply) until the next commit, which a kill would then lose, and which the \
     ledger refuses (docs/durability.md) — or a cheaper chain than SHA-256 over each line (a new \
     format; not changed).";

/// The target: a record without fsync.
pub const TARGET_RECORD_NS: f64 = 1_000.0;

/// Runs part 3.
pub fn run(effort: Effort) -> Result<Section> {
    let slice = Duration::from_millis(effort.pick(700, 100));
    let reps = effort.pick(3, 1);
    let dir = tempfile::tempdir().context("a temporary directory")?;
    let group = NonZeroU32::new(GROUP).context("group size")?;
    let mut rows = vec![
        Row {
            name: "fsync at the commit before each action (default)",
            mode: Mode::Ledger(Durability::Decisions),
            rates: vec![],
            writes: None,
            syncs_per_event: "1 in 4",
        },
        Row {
            name: "fsync every event",
            mode: Mode::Ledger(Durability::EveryEvent),
            rates: vec![],
            writes: None,
            syncs_per_event: "1",
        },
        Row {
            name: "group commit (64 events)",
            mode: Mode::Ledger(Durability::GroupCommit(group)),
            rates: vec![],
            writes: None,
            syncs_per_event: "1 in 64",
        },
        Row {
            name: "no fsync (baseline)",
            mode: Mode::Ledger(Durability::NoSync),
            rates: vec![],
            writes: None,
            syncs_per_event: "0",
        },
        Row {
            name: "JSON lines through serde_json::Value, no chain, no fsync",
            mode: Mode::Raw(Floor::ViaValue),
            rates: vec![],
            writes: None,
            syncs_per_event: "0",
        },
        Row {
            name: "JSON lines serialised straight from the event, no chain, no fsync",
            mode: Mode::Raw(Floor::Direct),
            rates: vec![],
            writes: None,
            syncs_per_event: "0",
        },
        Row {
            name: "pre-serialised lines: write(2) alone",
            mode: Mode::Raw(Floor::WriteOnly),
            rates: vec![],
            writes: None,
            syncs_per_event: "0",
        },
    ];
    let evs = events();
    for rep in 0..reps {
        for (i, row) in rows.iter_mut().enumerate() {
            let id = crate::support::run_id(format!("m{i}-{rep}"))?;
            let before = write_syscalls();
            let (rate, n) = match row.mode {
                Mode::Ledger(d) => ledger_rate(dir.path(), &id, d, &evs, slice)?,
                Mode::Raw(floor) => raw_rate(dir.path(), &id, &evs, slice, floor)?,
            };
            row.rates.push(rate);
            if let (Some(a), Some(b)) = (before, write_syscalls()) {
                let (w, e) = row.writes.unwrap_or_default();
                row.writes = Some((w + b.saturating_sub(a), e + n));
            }
        }
    }
    let team = team_runs(dir.path(), reps)?;
    Ok(section(&mut rows, dir.path(), slice, &team))
}

/// The scripted team run into a ledger `reps` times under each durability, interleaved; the
/// median run of each.
fn team_runs(dir: &Path, reps: usize) -> Result<[TeamRun; 2]> {
    let rt = runtime()?;
    let (mut synced, mut unsynced) = (vec![], vec![]);
    for rep in 0..reps.max(3) {
        synced.push(rt.block_on(team_run(
            dir,
            &format!("team-d-{rep}"),
            Durability::Decisions,
        ))?);
        unsynced.push(rt.block_on(team_run(dir, &format!("team-n-{rep}"), Durability::NoSync))?);
    }
    let mid = |mut v: Vec<TeamRun>| {
        v.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        v[v.len() / 2]
    };
    Ok([mid(synced), mid(unsynced)])
}

fn scope(run: &RunId) -> Scope {
    Scope {
        run: run.clone(),
        turn: Some(TurnNumber(1)),
        agent: Some(agent("builder")),
    }
}

fn ledger_rate(
    dir: &Path,
    id: &RunId,
    d: Durability,
    evs: &[AuditEvent],
    slice: Duration,
) -> Result<(f64, u64)> {
    let ledger = Ledger::create(
        dir,
        id,
        LedgerOptions {
            durability: d,
            ..LedgerOptions::default()
        },
    )?;
    let scope = scope(id);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < slice {
        for e in evs {
            ledger.record(&scope, e)?;
            if e.is_decision() {
                // The commit point before the action the decision authorises (the tool runs).
                ledger.commit()?;
            }
        }
        n += evs.len() as u64;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    drop(ledger); // writes nothing more: the stream ends with a record written at once
    Ok((rate, n))
}

fn raw_rate(
    dir: &Path,
    id: &RunId,
    evs: &[AuditEvent],
    slice: Duration,
    floor: Floor,
) -> Result<(f64, u64)> {
    let path = dir.join(format!("{id}.jsonl"));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create_new(true)
        .open(&path)?;
    let scope = scope(id);
    let line = |e: &AuditEvent| -> Result<Vec<u8>> {
        let mut line = if floor == Floor::Direct {
            serde_json::to_vec(&Line {
                scope: &scope,
                event: e,
            })?
        } else {
            serde_json::to_vec(&json!({"scope": &scope, "event": e}))?
        };
        line.push(b'\n');
        Ok(line)
    };
    let ready: Vec<Vec<u8>> = evs.iter().map(line).collect::<Result<_>>()?;
    // Grouped as the ledger writes them: what may wait for the commit goes out with the commit
    // (after a decision, here) or with the next record written at once.
    let mut held = Vec::with_capacity(4096);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < slice {
        for (e, ready) in evs.iter().zip(&ready) {
            if floor == Floor::WriteOnly {
                held.extend_from_slice(ready);
            } else {
                held.extend_from_slice(&line(e)?);
            }
            if !e.may_wait_for_commit() || e.is_decision() {
                file.write_all(&held)?;
                held.clear();
            }
        }
        n += evs.len() as u64;
    }
    Ok((n as f64 / start.elapsed().as_secs_f64(), n))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn section(rows: &mut [Row], dir: &Path, slice: Duration, team: &[TeamRun; 2]) -> Section {
    let rates: Vec<f64> = rows.iter_mut().map(|r| median(&mut r.rates)).collect();
    let base = rates[3];
    let per_record = if base > 0.0 { 1e9 / base } else { f64::NAN };
    let [synced, unsynced] = team;
    let table = rows
        .iter()
        .zip(&rates)
        .map(|(r, rate)| {
            vec![
                r.name.to_string(),
                fmt_rate(*rate),
                r.syncs_per_event.to_string(),
                r.writes.filter(|(_, e)| *e > 0).map_or_else(
                    || "—".to_string(),
                    |(w, e)| format!("{:.2}", w as f64 / e as f64),
                ),
                fmt_ratio(rate / base),
            ]
        })
        .collect();
    let fs = fs_type(dir).unwrap_or_else(|| "unknown".into());
    Section {
        part: 3,
        title: "Ledger throughput".into(),
        method: format!(
            "`audit::Ledger::record` of a repeating tool call's worth of events (`model_call`, \
             `tool_requested`, `gate_decision`, `tool_finished`; one in four is a decision, and \
             the ledger is committed after it, where the tool would run) into \
             a fresh ledger in a temporary directory on the real disk ({fs}). Each mode appends \
             for {} ms, three times, interleaved with the others; the median rate is shown. \
             The ledger holds the records on the way to an action (`model_call`, \
             `tool_requested`, the allowing `gate_decision`) until the commit and writes them \
             with one `write(2)`, and writes `tool_finished` when it is recorded: {} `write(2)`s \
             an event without fsync, counted (`syscw` in `/proc/self/io`). The last three rows \
             are floors: the same events as JSON lines appended in the same groups, without the \
             hash chain — serialised through a `serde_json::Value` (as the ledger did before), \
             straight from the event (as the ledger does), or beforehand (the `write(2)`s \
             alone).",
            slice.as_millis(),
            rows[3]
                .writes
                .filter(|(_, e)| *e > 0)
                .map_or_else(|| "(not counted)".to_string(), |(w, e)| format!("{:.2}", w as f64 / e as f64)),
        ),
        columns: [
            "durability",
            "events/s",
            "fsyncs per event",
            "`write(2)`s per event",
            "× no fsync",
        ]
            .map(String::from)
            .to_vec(),
        rows: table,
        targets: vec![Target::at_most(
            "ledger record without fsync (median rate, as time per record)",
            per_record,
            TARGET_RECORD_NS,
            fmt_ns,
        )
        .or_missed(|| "missed: see the per-event breakdown below".to_string())],
        notes: vec![
            format!(
                "Syncs per run, the scripted team of part 4 ({} records, {} of them decisions) \
                 into a real ledger: {} `fdatasync`s with the default durability — one at the \
                 commit before each action the decisions authorise (a model call, a tool call) \
                 and one at finish — where syncing each decision as it was recorded made {} \
                 (one per decision and one at finish). Whole run, ledger finished: {} with the \
                 default durability, {} without fsync ({} as long).",
                synced.records,
                synced.decisions,
                synced.ledger_syncs,
                synced.decisions + 1,
                fmt_ns(synced.seconds * 1e9),
                fmt_ns(unsynced.seconds * 1e9),
                fmt_ratio(synced.seconds / unsynced.seconds),
            ),
            format!(
                "With a sync at each action's commit (one decision per action in this stream) \
             the ledger is bound by the disk's fsync latency (about {} fsyncs/s here); group commit recovers {} of the no-fsync rate at the price \
             of losing up to {GROUP} events, decisions included, on a power loss.",
                fmt_rate(rates[0] / 4.0).trim_end_matches("/s"),
                fmt_ratio(rates[2] / base),
            ),
            {
                let per = |r: f64| if r > 0.0 { 1e9 / r } else { 0.0 };
                let (ledger, json, direct, write) =
                    (per(rates[3]), per(rates[4]), per(rates[5]), per(rates[6]));
                format!(
                    "Per event without fsync: {} in all — its share of the `write(2)`s alone {}, \
                     serialising straight from the event, as the ledger does, {} more (through \
                     a `serde_json::Value`, as it did before: {} more), and the rest of a sealed \
                     record {}. {PROFILE}",
                    fmt_ns(ledger),
                    fmt_ns(write),
                    fmt_ns(direct - write),
                    fmt_ns(json - write),
                    if ledger >= direct {
                        format!(
                            "(the hash chain: SHA-256 of the line and its hex; the record's head; \
                             the clock; the lock) {} more",
                            fmt_ns(ledger - direct)
                        )
                    } else {
                        "lost in this run's noise (the straight floor measured slower than the \
                         ledger itself)"
                            .to_string()
                    },
                )
            },
        ],
        data: json!({
            "team_run_default": synced,
            "team_run_no_fsync": unsynced,
            "fs_type": fs,
            "modes": rows.iter().zip(&rates).map(|(r, rate)| json!({"name": r.name, "events_per_sec": rate, "reps": r.rates, "writes_events": r.writes})).collect::<Vec<_>>(),
        }),
    }
}
