//! Where runs are recorded: one folder per run under the runs directory, one event a line in
//! `events.jsonl`. This module is the application's one seam to the ledger; everything it shows
//! is read back from these files.

use loopward_core::{AuditError, AuditEvent, AuditSink, RunId, Scope};
use loopward_runner::Clock;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The ledger file of a run folder.
pub const EVENTS_FILE: &str = "events.jsonl";

/// One line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// 1-based sequence number.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time: u64,
    /// Where in the run.
    pub scope: Scope,
    /// What happened.
    pub event: AuditEvent,
}

/// Why a ledger could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// IO on the ledger file or folder failed.
    #[error("{}: {why}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        why: String,
    },
    /// A line is not a ledger record.
    #[error("{}: line {line} is not a ledger record: {why}", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        why: String,
    },
}

/// Appends records to one run's `events.jsonl`, flushing decision events before returning.
pub struct FileLedger {
    path: PathBuf,
    clock: Arc<dyn Clock>,
    state: Mutex<(std::fs::File, u64)>,
}

impl std::fmt::Debug for FileLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLedger")
            .field("path", &self.path)
            .finish()
    }
}

/// The folder of `run` under `runs_dir`.
pub fn run_dir(runs_dir: &Path, run: &RunId) -> PathBuf {
    runs_dir.join(run.as_str())
}

impl FileLedger {
    /// Creates `runs_dir/<run>/events.jsonl` (the run must be new).
    pub fn create(
        runs_dir: &Path,
        run: &RunId,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, LedgerError> {
        let dir = run_dir(runs_dir, run);
        let io = |path: &Path, e: std::io::Error| LedgerError::Io {
            path: path.to_path_buf(),
            why: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let path = dir.join(EVENTS_FILE);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        Ok(Self {
            path,
            clock,
            state: Mutex::new((file, 0)),
        })
    }
}

impl AuditSink for FileLedger {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let rec = Record {
            seq: st.1 + 1,
            time: self.clock.now_millis(),
            scope: scope.clone(),
            event: event.clone(),
        };
        let mut line = serde_json::to_string(&rec).map_err(|e| AuditError(e.to_string()))?;
        line.push('\n');
        st.0.write_all(line.as_bytes())
            .map_err(|e| AuditError(e.to_string()))?;
        if event.is_decision() {
            st.0.sync_data().map_err(|e| AuditError(e.to_string()))?;
        }
        st.1 += 1;
        Ok(())
    }
}

/// Reads a run folder's events, in order.
pub fn read(run_dir: &Path) -> Result<Vec<Record>, LedgerError> {
    let path = run_dir.join(EVENTS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| LedgerError::Io {
        path: path.clone(),
        why: e.to_string(),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| LedgerError::Corrupt {
                path: path.clone(),
                line: i + 1,
                why: e.to_string(),
            })
        })
        .collect()
}

/// The run folders under `runs_dir` (those holding an `events.jsonl`), sorted by name.
pub fn run_dirs(runs_dir: &Path) -> Result<Vec<PathBuf>, LedgerError> {
    let rd = std::fs::read_dir(runs_dir).map_err(|e| LedgerError::Io {
        path: runs_dir.to_path_buf(),
        why: e.to_string(),
    })?;
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(EVENTS_FILE).is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// `loopward verify`: checks sequence numbers run 1, 2, 3 … (stand-in until the hash chain).
pub fn verify_command(run_dir: &Path) -> anyhow::Result<std::process::ExitCode> {
    let records = read(run_dir)?;
    for (i, r) in records.iter().enumerate() {
        let want = i as u64 + 1;
        if r.seq != want {
            anyhow::bail!(
                "{}: record {want} has sequence number {}",
                run_dir.display(),
                r.seq
            );
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `loopward report`: a table (or JSON) of figures over all runs (stand-in).
pub fn report(runs_dir: &Path, json: bool) -> anyhow::Result<String> {
    let mut rows = Vec::new();
    for dir in run_dirs(runs_dir)? {
        let recs = read(&dir)?;
        let mut denied = 0;
        let mut warned = 0;
        let mut turns = 0;
        let mut status = String::from("unfinished");
        for r in &recs {
            match &r.event {
                AuditEvent::TurnStarted { .. } => turns += 1,
                AuditEvent::GateDecision { decision, .. } => match decision {
                    loopward_core::Decision::Deny(_) => denied += 1,
                    loopward_core::Decision::Warn(_) => warned += 1,
                    _ => {}
                },
                AuditEvent::RunEnded { status: s, .. } => status = s.label().into(),
                _ => {}
            }
        }
        let run = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        rows.push(serde_json::json!({"run": run, "status": status, "turns": turns, "denied": denied, "warned": warned}));
    }
    if json {
        return Ok(serde_json::to_string_pretty(&rows)?);
    }
    Ok(rows
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Decisions of one gate (stand-in for the audit module's figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GateFigures {
    /// Allowed.
    pub allowed: u64,
    /// Denied.
    pub denied: u64,
    /// Allowed because an override was consumed.
    pub overridden: u64,
    /// Advisory would-be denials.
    pub warned: u64,
}

/// Whether agents went ahead with warned actions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdvisoryCompliance {
    /// Calls warned.
    pub warned_calls: u64,
    /// Calls not gone ahead with.
    pub heeded: u64,
    /// Calls gone ahead with.
    pub ignored: u64,
}

/// One run's figures, from its ledger alone (stand-in).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunFigures {
    /// The run.
    pub run: String,
    /// How it ended.
    pub status: Option<loopward_core::RunStatus>,
    /// Turns started.
    pub turns: u64,
    /// Handoffs registered.
    pub handoffs: Vec<loopward_core::Handoff>,
    /// Per gate.
    pub gates: std::collections::BTreeMap<String, GateFigures>,
    /// Advisory compliance.
    pub advisory: AdvisoryCompliance,
    /// Consumed overrides (id, reason).
    pub overrides: Vec<(String, String)>,
    /// Writes inside a territory by a non-owner that stand (path).
    pub unauthorised_writes: Vec<String>,
    /// Violations recorded.
    pub violations: u64,
}

/// Folds a run folder's ledger into its figures.
pub fn run_figures(run_dir: &Path) -> Result<RunFigures, LedgerError> {
    use loopward_core::{Decision, EffectStatus};
    let recs = read(run_dir)?;
    let mut f = RunFigures {
        run: recs
            .first()
            .map(|r| r.scope.run.to_string())
            .unwrap_or_default(),
        ..RunFigures::default()
    };
    let mut warned = Vec::new();
    for r in &recs {
        match &r.event {
            AuditEvent::TurnStarted { .. } => f.turns += 1,
            AuditEvent::GateDecision {
                call_id,
                gate,
                decision,
                ..
            } => {
                let g = f.gates.entry(gate.clone()).or_default();
                match decision {
                    Decision::Allow => g.allowed += 1,
                    Decision::Deny(_) => g.denied += 1,
                    Decision::Override { .. } => g.overridden += 1,
                    Decision::Warn(_) => {
                        g.warned += 1;
                        warned.extend(call_id.clone());
                    }
                }
            }
            AuditEvent::OverrideConsumed { id, reason, .. } => {
                f.overrides.push((id.clone(), reason.clone()))
            }
            AuditEvent::ToolFinished {
                call_id,
                is_error,
                effects,
                ..
            } if warned.contains(call_id) => {
                f.advisory.warned_calls += 1;
                let ok: Vec<_> = effects
                    .iter()
                    .filter(|e| e.status == EffectStatus::Ok)
                    .collect();
                if !*is_error && !ok.is_empty() {
                    f.advisory.ignored += 1;
                    f.unauthorised_writes
                        .extend(ok.iter().map(|e| e.path.clone()));
                } else {
                    f.advisory.heeded += 1;
                }
            }
            AuditEvent::Violation { .. } => f.violations += 1,
            AuditEvent::HandoffRegistered(h) => f.handoffs.push(h.clone()),
            AuditEvent::RunEnded { status, .. } => f.status = Some(status.clone()),
            _ => {}
        }
    }
    Ok(f)
}
