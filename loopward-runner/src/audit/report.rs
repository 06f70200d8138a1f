//! The governance report over many runs, recomputed from their ledgers alone.
//!
//! Every ledger is verified first; one that does not verify contributes no figures and is listed
//! under `invalid` with the reason. The figures are defined in [`RunFigures`].
//!
//! ```
//! use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
//! use loopward_runner::audit::{report, KeyRing, Ledger, LedgerKey, LedgerOptions, VerifyOptions};
//! let runs = tempfile::tempdir().unwrap();
//! let run = RunId::new("r1").unwrap();
//! let key = LedgerKey::generate().unwrap();
//! let ledger = Ledger::create(runs.path(), &run, LedgerOptions::keyed(key.clone())).unwrap();
//! let scope = Scope { run, turn: None, agent: None };
//! ledger.record(&scope, &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("hi")).into() }).unwrap();
//! ledger.finish().unwrap();
//! let r = report(runs.path(), &VerifyOptions::keyed(KeyRing::single(key.clone()))).unwrap();
//! assert_eq!(r.runs, 1);
//! assert_eq!(r.per_run[0].verified_by, format!("key {}", key.id()));
//! assert!(r.to_table().contains("unauthorised writes"));
//! ```

use super::figures::{
    AdvisoryCompliance, GateFigures, LayerFigures, OverrideUse, RunFigures, UnauthorisedWrite,
};
use super::record::Record;
use super::render::cost_text;
use super::verify::{each_run, verify_records, VerifyError, VerifyOk, VerifyOptions};
use loopward_core::Usage;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One run's line in the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRow {
    /// The run.
    pub run: String,
    /// How it ended (`unfinished` when the ledger has no `run_ended`).
    pub status: String,
    /// Turns.
    pub turns: u64,
    /// Handoffs.
    pub handoffs: u64,
    /// Input plus output tokens.
    pub tokens: u64,
    /// Cost in micro-dollars, when known.
    pub cost_micros: Option<u64>,
    /// What verified its ledger: `key k…` or `keyless (sha256)`.
    pub verified_by: String,
    /// Whether its last record is anchored (false only for unfinished runs, when accepted).
    pub anchored: bool,
}

/// A run whose ledger did not verify (its figures are left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InvalidRun {
    /// The run directory's name.
    pub run: String,
    /// What `verify` said.
    pub error: String,
}

/// Unauthorised writes: the total and its two sources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnauthorisedWrites {
    /// All of them (must be 0 under enforcement).
    pub total: u64,
    /// Standing writes let through by an advisory territory gate.
    pub advisory_warned: u64,
    /// Violations that were not reverted.
    pub unreverted_violations: u64,
    /// Each one.
    pub items: Vec<UnauthorisedWrite>,
}

/// Governance figures over all runs in a runs directory. Serialises to stable JSON (fixed field
/// order, maps sorted by key).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Runs whose ledgers verified.
    pub runs: u64,
    /// How many ended each way.
    pub statuses: BTreeMap<String, u64>,
    /// Decisions per gate.
    pub gates: BTreeMap<String, GateFigures>,
    /// Decisions per layer (stop-gates, caps, repeats, rate limits, …).
    pub layers: BTreeMap<String, LayerFigures>,
    /// Advisory compliance.
    pub advisory: AdvisoryCompliance,
    /// Unauthorised writes.
    pub unauthorised_writes: UnauthorisedWrites,
    /// Violations recorded (reverted or not).
    pub violations: u64,
    /// Consumed overrides with their reasons.
    pub overrides: Vec<OverrideUse>,
    /// Turns.
    pub turns: u64,
    /// Handoffs.
    pub handoffs: u64,
    /// Tokens.
    pub usage: Usage,
    /// Cost in micro-dollars over the runs whose cost is known.
    pub cost_micros: u64,
    /// Runs without a known cost.
    pub runs_without_cost: u64,
    /// Ledgers reopened after a crash.
    pub recoveries: u64,
    /// The egress proxy's decisions and bytes over all runs (left out of JSON when none).
    #[serde(skip_serializing_if = "super::figures::EgressFigures::is_empty")]
    pub egress: super::figures::EgressFigures,
    /// Each run.
    pub per_run: Vec<RunRow>,
    /// Runs left out because their ledgers did not verify.
    pub invalid: Vec<InvalidRun>,
    /// Runs that verified as keyless chains (accepted only when asked to).
    pub keyless: u64,
}

/// The runs directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the runs directory {path}: {source}")]
pub struct ReportError {
    /// The directory.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// Recomputes the report over every run under `runs_dir`, in run-name order. Each ledger is
/// verified with `opts` first; a run that does not verify (including one the index anchors whose
/// folder is gone) contributes no figures and is listed under `invalid`.
pub fn report(runs_dir: &Path, opts: &VerifyOptions) -> Result<Report, ReportError> {
    let mut rep = Report::default();
    scan_runs(runs_dir, opts, |run| match run.outcome {
        Ok((records, ok)) => rep.add(RunFigures::from_records(&records), &ok),
        Err(error) => rep.invalid.push(InvalidRun {
            run: run.name,
            error,
        }),
    })?;
    Ok(rep)
}

/// One run folder as the report sees it: its verified records, or why it did not verify.
#[derive(Debug)]
pub struct ScannedRun {
    /// The run folder's name.
    pub name: String,
    /// The records and what `verify` said, or the reason it did not verify.
    pub outcome: Result<(Vec<Record>, VerifyOk), String>,
}

/// Verifies and reads every run under `runs_dir` (and names anchored runs whose folder is
/// gone), in run-name order, one run at a time.
pub fn scan_runs(
    runs_dir: &Path,
    opts: &VerifyOptions,
    mut each: impl FnMut(ScannedRun),
) -> Result<(), ReportError> {
    let runs = each_run(runs_dir, opts, verify_records).map_err(|e| ReportError {
        path: runs_dir.to_path_buf(),
        source: match e {
            VerifyError::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        },
    })?;
    for (name, result) in runs {
        let outcome = match result {
            Ok((ok, records)) => Ok((records, ok)),
            // The path is implied by the run's name; keep the report free of machine paths.
            Err(VerifyError::Breach { seq, breach, .. }) => Err(format!("seq {seq}: {breach}")),
            Err(VerifyError::FolderGone { line, .. }) => Err(format!(
                "anchored in index.jsonl (line {line}) but its folder is gone"
            )),
            Err(e) => Err(e.to_string()),
        };
        each(ScannedRun { name, outcome });
    }
    Ok(())
}

impl Report {
    /// Adds one verified run's figures.
    pub fn add(&mut self, f: RunFigures, ok: &VerifyOk) {
        self.runs += 1;
        if ok.key.is_none() {
            self.keyless += 1;
        }
        let status = f
            .status
            .as_ref()
            .map_or("unfinished", |s| s.label())
            .to_string();
        *self.statuses.entry(status.clone()).or_default() += 1;
        for (g, n) in &f.gates {
            *self.gates.entry(g.clone()).or_default() += *n;
        }
        for (l, n) in &f.layers {
            *self.layers.entry(l.clone()).or_default() += *n;
        }
        self.advisory += f.advisory;
        for w in &f.unauthorised_writes {
            match w.via {
                "violation" => self.unauthorised_writes.unreverted_violations += 1,
                _ => self.unauthorised_writes.advisory_warned += 1,
            }
            self.unauthorised_writes.total += 1;
        }
        self.unauthorised_writes
            .items
            .extend(f.unauthorised_writes.iter().cloned());
        self.violations += f.violations;
        self.overrides.extend(f.overrides.iter().cloned());
        self.turns += f.turns;
        self.handoffs += f.handoffs.len() as u64;
        self.usage += f.usage;
        match f.cost_micros {
            Some(c) => self.cost_micros += c,
            None => self.runs_without_cost += 1,
        }
        self.recoveries += f.recoveries;
        self.egress.add(&f.egress);
        self.per_run.push(RunRow {
            run: f.run.clone(),
            status,
            turns: f.turns,
            handoffs: f.handoffs.len() as u64,
            tokens: f.usage.total(),
            cost_micros: f.cost_micros,
            verified_by: ok.verified_by(),
            anchored: ok.anchored,
        });
    }

    /// The report as pretty, stable JSON.
    pub fn to_json(&self) -> String {
        pretty_json(self)
    }

    /// The report as a plain-text table for a terminal.
    pub fn to_table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "runs: {} ({} left out: ledger did not verify)",
            self.runs,
            self.invalid.len()
        );
        if self.keyless > 0 {
            let _ = writeln!(
                o,
                "  KEYLESS: {} run(s) verified as keyless sha256 chains (they prove nothing against whoever can write the files)",
                self.keyless
            );
        }
        for (s, n) in &self.statuses {
            let _ = writeln!(o, "  {s:<18} {n}");
        }
        // The gate column is as wide as the longest name, so long review-gate names align.
        let w = self
            .gates
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(0)
            .max(20);
        // One table shape for gates and layers: a name, then four counts.
        let table = |o: &mut String, head: [&str; 5], rows: Vec<(&String, [u64; 4])>| {
            let [name, a, b, c, d] = head;
            let _ = writeln!(o, "\n{name:<w$} {a:>8} {b:>8} {c:>10} {d:>8}");
            for (n, [a, b, c, d]) in rows {
                let _ = writeln!(o, "{n:<w$} {a:>8} {b:>8} {c:>10} {d:>8}");
            }
        };
        table(
            &mut o,
            ["gate", "allowed", "denied", "overridden", "warned"],
            self.gates
                .iter()
                .map(|(g, f)| (g, [f.allowed, f.denied, f.overridden, f.warned]))
                .collect(),
        );
        if self.gates.is_empty() && self.layers.is_empty() {
            let _ = writeln!(o, "(no gate or layer decisions)");
        }
        if !self.layers.is_empty() {
            table(
                &mut o,
                ["layer", "allowed", "refused", "stopped", "noted"],
                self.layers
                    .iter()
                    .map(|(l, f)| (l, [f.allowed, f.refused, f.stopped, f.noted]))
                    .collect(),
            );
        }
        let a = &self.advisory;
        let _ = writeln!(
            o,
            "\nadvisory compliance: {} of {} warned calls heeded, {} went ahead",
            a.heeded, a.warned_calls, a.ignored
        );
        let u = &self.unauthorised_writes;
        let _ = writeln!(o, "unauthorised writes: {} ({} let through by advisory territory gates, {} unreverted violations)", u.total, u.advisory_warned, u.unreverted_violations);
        for w in &u.items {
            let _ = writeln!(
                o,
                "  {} seq {}: {} by {} ({})",
                w.run,
                w.seq,
                w.path,
                w.agent.as_deref().unwrap_or("?"),
                w.via
            );
        }
        let _ = writeln!(o, "violations recorded: {}", self.violations);
        if !self.egress.is_empty() {
            let e = &self.egress;
            let _ = writeln!(
                o,
                "egress: {} connections allowed, {} refused; {} bytes out, {} in",
                e.allowed, e.refused, e.bytes_out, e.bytes_in
            );
        }
        let _ = writeln!(o, "overrides consumed: {}", self.overrides.len());
        for ov in &self.overrides {
            let _ = writeln!(
                o,
                "  {} seq {}: {} for {} on {} — {}",
                ov.run, ov.seq, ov.id, ov.agent, ov.path, ov.reason
            );
        }
        let _ = writeln!(
            o,
            "\nturns: {}  handoffs: {}  tokens: {} in / {} out ({} calls)  cost: {}{}",
            self.turns,
            self.handoffs,
            self.usage.input_tokens,
            self.usage.output_tokens,
            self.usage.calls,
            // No run with prices: the cost is unknown, not $0.
            cost_text(
                (self.runs == 0 || self.runs_without_cost < self.runs).then_some(self.cost_micros)
            ),
            if self.runs_without_cost > 0 && self.runs_without_cost < self.runs {
                format!(" ({} run(s) without prices)", self.runs_without_cost)
            } else {
                String::new()
            }
        );
        if !self.per_run.is_empty() {
            let w = self
                .per_run
                .iter()
                .map(|r| r.run.len())
                .max()
                .unwrap_or(0)
                .max(24);
            let _ = writeln!(
                o,
                "\n{:<w$} {:<18} {:>6} {:>9} {:>9}  {:<9} verified by",
                "run", "status", "turns", "handoffs", "tokens", "cost"
            );
            for r in &self.per_run {
                let cost = r
                    .cost_micros
                    .map_or_else(|| "-".into(), |c| cost_text(Some(c)));
                let unanchored = if r.anchored {
                    ""
                } else {
                    " (unfinished: not anchored)"
                };
                let _ = writeln!(
                    o,
                    "{:<w$} {:<18} {:>6} {:>9} {:>9}  {cost:<9} {}{unanchored}",
                    r.run, r.status, r.turns, r.handoffs, r.tokens, r.verified_by
                );
            }
        }
        for inv in &self.invalid {
            let _ = writeln!(o, "LEFT OUT {}: {}", inv.run, inv.error);
        }
        o
    }
}

/// `value` as pretty, stable JSON (the reports' `--json`); a value that cannot be serialised
/// becomes `{"error": …}` rather than no output.
pub(crate) fn pretty_json(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}
