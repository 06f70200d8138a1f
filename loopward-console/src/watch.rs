//! The console's one view of the workspace, kept current by one task: every run's ledger
//! followed from where it was last read (only the bytes appended since are parsed), the sealed
//! stop-gate records that wait for a person, and the stop requests not yet taken. Every page and
//! every live stream reads this snapshot; however many browsers follow, the disk is read once
//! per tick. Nothing here is kept but what the ledgers and the sealed stores say.

use loopward_core::{AuditEvent, RunStatus};
use loopward_runner::audit::{AgentSaid, Record, Sayings};
use loopward_runner::layers::stopgate::{ApprovalStore, PendingApproval, PendingState};
use loopward_runner::stop::StopRequests;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A stop-gate waiting for a person, and the exact action it would allow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// The sealed record's id.
    pub id: String,
    /// The gate's name.
    pub gate: String,
    /// The agent that asked.
    pub agent: String,
    /// What a person reads before deciding.
    pub summary: String,
    /// The exact action (`tool:deploy:<digest>`, `turn:builder`, `phase:release`).
    pub action: String,
    /// When it was asked (RFC 3339; empty for a wait elsewhere, whose source does not say).
    pub requested_at: String,
    /// Where it waits, when not in this workspace's state directory (`Restate at http://…`).
    pub on: Option<String>,
    /// Already answered from this console (`approved by ana (console)`): the answer waits to be
    /// taken by the run (on Restate, by the next worker).
    pub answered: Option<String>,
}

impl Waiting {
    fn of(p: &PendingApproval) -> Self {
        Self {
            id: p.id.clone(),
            gate: p.gate.clone(),
            agent: p.agent.to_string(),
            summary: p.summary.clone(),
            action: p.action.key(),
            requested_at: rfc3339(p.requested_at_ms),
            on: None,
            answered: None,
        }
    }
}

/// One run as its ledger says so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunRow {
    /// The run's id (its folder's name).
    pub run: String,
    /// The task, from `run_started`.
    pub task: String,
    /// `running`, `awaiting_approval`, or how it ended (`completed`, `stopped`, …); `running`
    /// means only that the ledger has no `run_ended` yet.
    pub status: String,
    /// Why it ended, when the ending has a reason.
    pub reason: Option<String>,
    /// Records so far.
    pub records: u64,
    /// Turns started.
    pub turns: u64,
    /// The agent of the latest turn.
    pub agent: Option<String>,
    /// When the latest record was written (RFC 3339).
    pub last_at: String,
    /// Stop-gates of this run waiting for a person.
    pub waiting: Vec<Waiting>,
    /// A person asked this run to stop; it has not reached a turn boundary since.
    pub stop_requested: bool,
    /// A record the console could not read (the ledger is damaged here; `loopward verify`).
    pub problem: Option<String>,
    /// The run waits elsewhere (`Restate at http://…`) and its ledger is not in this workspace.
    pub elsewhere: Option<String>,
}

impl RunRow {
    /// Whether the ledger has no `run_ended` yet (the run goes on, or its process died).
    pub fn is_open(&self) -> bool {
        self.status == "running"
    }
}

/// What the console knows, at one tick.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Every run, newest first.
    pub runs: Vec<RunRow>,
    /// Files in the sealed stores that were refused (forged, damaged), with the reason.
    pub refused: Vec<String>,
    /// Why the waits elsewhere (Restate) could not be listed, when they could not.
    pub remote_problem: Option<String>,
    /// Counts up whenever anything above changed.
    pub version: u64,
}

impl Snapshot {
    /// The run `id`, if the workspace has it.
    pub fn run(&self, id: &str) -> Option<&RunRow> {
        self.runs.iter().find(|r| r.run == id)
    }
}

/// The waits elsewhere, as last listed: by run, and why they could not be listed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Remote {
    pub(crate) waiting: Vec<(String, Waiting)>,
    pub(crate) problem: Option<String>,
    /// Listed at least once (the waits of the first listing were waiting before the console
    /// looked: shown, not noticed).
    pub(crate) listed: bool,
}

/// A run's ledger, followed.
#[derive(Default)]
struct Tail {
    offset: u64,
    partial: Vec<u8>,
    row: RunRow,
    /// The run's `say` calls, paired from request to end.
    sayings: Sayings,
    /// What its agents said since the last tick, by record.
    said: Vec<(u64, AgentSaid)>,
    /// The last record whose words were taken (kept when the ledger is read again).
    said_upto: u64,
}

/// What an agent of `run` said to the people watching it, at record `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spoken {
    pub(crate) run: String,
    pub(crate) seq: u64,
    pub(crate) said: AgentSaid,
}

/// What started since the last tick: the stop-gates now waiting, the words agents said.
#[derive(Debug, Default)]
pub(crate) struct Fresh {
    pub(crate) waiting: Vec<Waiting>,
    pub(crate) said: Vec<Spoken>,
}

/// Follows the workspace; [`Watcher::tick`] reads what changed.
pub(crate) struct Watcher {
    runs_dir: PathBuf,
    approvals: ApprovalStore,
    stops: StopRequests,
    tails: BTreeMap<String, Tail>,
    known_waiting: BTreeSet<String>,
    remote_listed: bool,
    last: Arc<Snapshot>,
}

impl Watcher {
    pub(crate) fn new(runs_dir: PathBuf, approvals: ApprovalStore, stops: StopRequests) -> Self {
        Self {
            runs_dir,
            approvals,
            stops,
            tails: BTreeMap::new(),
            known_waiting: BTreeSet::new(),
            remote_listed: false,
            last: Arc::new(Snapshot::default()),
        }
    }

    /// Reads what changed since the last tick, with the waits elsewhere `remote` (by run) as
    /// last listed: the new snapshot (the same `Arc` when nothing changed) and what started
    /// since the last tick: stop-gates waiting, words said (none at the first: what was there
    /// before the console looked is shown, not noticed).
    pub(crate) fn tick(&mut self, remote: &Remote) -> (Arc<Snapshot>, Fresh) {
        let mut seen = BTreeSet::new();
        if let Ok(entries) = std::fs::read_dir(&self.runs_dir) {
            for e in entries.filter_map(Result::ok) {
                let name = e.file_name().to_string_lossy().into_owned();
                // Only run folders: a name that is not a run id is nobody's ledger.
                if loopward_core::RunId::new(&name).is_none() {
                    continue;
                }
                let events = e.path().join(loopward_runner::audit::EVENTS_FILE);
                if !events.is_file() {
                    continue;
                }
                let tail = self.tails.entry(name.clone()).or_default();
                follow(tail, &name, &events);
                seen.insert(name);
            }
        }
        self.tails.retain(|k, _| seen.contains(k));
        let scan = self.approvals.scan();
        let mut waiting: BTreeMap<String, Vec<Waiting>> = BTreeMap::new();
        for p in scan
            .records
            .iter()
            .filter(|p| p.state == PendingState::Pending)
        {
            waiting
                .entry(p.run.to_string())
                .or_default()
                .push(Waiting::of(p));
        }
        for (run, w) in &remote.waiting {
            waiting.entry(run.clone()).or_default().push(w.clone());
        }
        // A run waiting elsewhere whose ledger is not here still shows, with its gate.
        let mut elsewhere: BTreeMap<String, RunRow> = BTreeMap::new();
        for (run, w) in &remote.waiting {
            if !self.tails.contains_key(run) {
                elsewhere.entry(run.clone()).or_insert_with(|| RunRow {
                    run: run.clone(),
                    status: "running".into(),
                    elsewhere: w.on.clone(),
                    ..RunRow::default()
                });
            }
        }
        let mut runs: Vec<RunRow> = self
            .tails
            .iter()
            .map(|(name, t)| (name, &t.row))
            .chain(elsewhere.iter())
            .map(|(name, row)| {
                let mut row = row.clone();
                row.waiting = waiting.remove(name).unwrap_or_default();
                row.stop_requested =
                    loopward_core::RunId::new(name).is_some_and(|id| self.stops.is_requested(&id));
                if row.status == "running" && !row.waiting.is_empty() {
                    row.status = "awaiting_approval".into();
                }
                row
            })
            .collect();
        runs.sort_by(|a, b| (&b.last_at, &b.run).cmp(&(&a.last_at, &a.run)));
        let refused: Vec<String> = scan
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.file, s.why))
            .collect();
        let now_waiting: BTreeSet<String> = runs
            .iter()
            .flat_map(|r| r.waiting.iter().map(|w| w.id.clone()))
            .collect();
        let first = self.last.version == 0;
        let fresh: Vec<Waiting> = runs
            .iter()
            .flat_map(|r| r.waiting.iter())
            .filter(|w| !first && !self.known_waiting.contains(&w.id))
            .filter(|w| w.on.is_none() || self.remote_listed)
            .cloned()
            .collect();
        let said: Vec<Spoken> = self
            .tails
            .iter_mut()
            .flat_map(|(run, t)| {
                std::mem::take(&mut t.said)
                    .into_iter()
                    .map(|(seq, said)| Spoken {
                        run: run.clone(),
                        seq,
                        said,
                    })
            })
            .filter(|_| !first)
            .collect();
        self.known_waiting = now_waiting;
        self.remote_listed |= remote.listed;
        if first
            || runs != self.last.runs
            || refused != self.last.refused
            || remote.problem != self.last.remote_problem
        {
            self.last = Arc::new(Snapshot {
                runs,
                refused,
                remote_problem: remote.problem.clone(),
                version: self.last.version + 1,
            });
        }
        (
            self.last.clone(),
            Fresh {
                waiting: fresh,
                said,
            },
        )
    }
}

/// Reads what `events` gained since `tail` last read it, folding whole lines into the row.
fn follow(tail: &mut Tail, name: &str, events: &Path) {
    let Ok(mut file) = std::fs::File::open(events) else {
        return;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < tail.offset {
        // Shorter than what was read: cut (a torn line) or replaced. Read it again (what was
        // said before is not said again).
        *tail = Tail {
            said_upto: tail.said_upto,
            ..Tail::default()
        };
    }
    tail.row.run = name.to_string();
    if tail.row.status.is_empty() {
        tail.row.status = "running".into();
    }
    if len == tail.offset || file.seek(SeekFrom::Start(tail.offset)).is_err() {
        return;
    }
    let mut fresh = Vec::new();
    if file
        .take(len - tail.offset)
        .read_to_end(&mut fresh)
        .is_err()
    {
        return;
    }
    tail.offset += fresh.len() as u64;
    tail.partial.extend_from_slice(&fresh);
    let Some(end) = tail.partial.iter().rposition(|b| *b == b'\n') else {
        return;
    };
    let whole: Vec<u8> = tail.partial.drain(..=end).collect();
    for line in whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match Record::parse_line(line) {
            Ok((r, _)) => {
                fold(&mut tail.row, &r);
                let said = Sayings::concerns(&r.kind)
                    .then(|| r.event().ok())
                    .flatten()
                    .and_then(|e| tail.sayings.fold(r.agent.as_ref(), &e));
                if let Some(said) = said.filter(|_| r.seq > tail.said_upto) {
                    tail.said_upto = r.seq;
                    tail.said.push((r.seq, said));
                }
            }
            Err(e) => tail.row.problem = Some(format!("record {}: {}", tail.row.records + 1, e.0)),
        }
    }
}

fn fold(row: &mut RunRow, r: &Record) {
    row.records = r.seq;
    row.last_at.clone_from(&r.time);
    match r.kind.as_str() {
        "run_started" => {
            if let Ok(AuditEvent::RunStarted { task, .. }) = r.event() {
                row.task = task;
            }
        }
        "turn_started" => {
            row.turns += 1;
            row.agent = r.agent.as_ref().map(ToString::to_string);
        }
        "run_ended" => {
            if let Ok(AuditEvent::RunEnded { status, .. }) = r.event() {
                row.status = status.label().to_string();
                row.reason = match status {
                    RunStatus::Stopped { reason } => Some(reason),
                    RunStatus::Failed { error } => Some(error),
                    RunStatus::AwaitingApproval { pending } => Some(format!("waits on {pending}")),
                    RunStatus::CapReached { cap } => Some(cap),
                    _ => None,
                };
            }
        }
        // Resumed: the ledger goes on after a run_ended(awaiting_approval).
        _ if row.status == "awaiting_approval" => {
            row.status = "running".into();
            row.reason = None;
        }
        _ => {}
    }
}

/// RFC 3339 (UTC, milliseconds) of `ms` since the epoch.
pub(crate) fn rfc3339(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}
