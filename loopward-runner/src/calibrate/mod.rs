//! Shadow-mode calibration: how often a candidate config's gates would have fired on recorded
//! history, and whether those firings look right, before anyone switches them to enforce.
//!
//! Sources are loopward ledgers (a `runs/` folder or one run's folder; each ledger is verified
//! first, and one that does not verify is left out and listed) and Claude Code transcripts (the
//! JSONL session files under `~/.claude/projects/<project>/`). Every recorded file write is
//! re-judged by the engine the Claude Code hook uses (control files, territories, sprawl), with
//! no override store: nothing is executed, nothing on disk is read but the sources, and nothing
//! is written. Sources are read one session at a time.
//!
//! Per gate the [`Calibration`] says how many writes it judged, in how many turns and sessions
//! it would have fired (and the rate over all turns), example refusals, and — where the history
//! shows what came next — an estimate of false positives: a firing on a write that was refused
//! anyway agrees with history; one on a write that was reverted, or followed by a plan in the
//! same turn, was right; one on a write that stood with no plan after it is a possible false
//! positive. Given the current config too, it says what would change.
//!
//! ```
//! use loopward_runner::calibrate::Calibrator;
//! use loopward_runner::gates::PolicyConfig;
//! let candidate: PolicyConfig = toml::from_str(r#"
//!     [gates.sprawl]
//!     threshold = 2
//! "#).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let prompt = r#"{"type":"user","sessionId":"s1","cwd":"/p","message":{"role":"user","content":"go"}}"#;
//! let writes = r#"{"type":"assistant","sessionId":"s1","cwd":"/p","message":{"content":[
//!     {"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/p/a.rs","content":"a"}},
//!     {"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/p/b.rs","content":"b"}}]}}"#;
//! std::fs::write(dir.path().join("s1.jsonl"), format!("{prompt}\n{}\n", writes.replace('\n', ""))).unwrap();
//! let mut cal = Calibrator::new(&candidate, None, "root").unwrap();
//! cal.add_path(dir.path()).unwrap();
//! let report = cal.finish();
//! assert_eq!(report.actions, 2);
//! assert_eq!(report.gates["sprawl"].turns_fired, 1);
//! ```

mod html;
mod shadow;
mod source;

use crate::audit::verify::{verify, EVENTS_FILE};
use crate::gates::Policy;
use crate::gates::{ConfigError, PolicyConfig};
use loopward_core::Decision;
use serde::Serialize;
use shadow::judge_session;
use source::{ledger_session, transcript_sessions, Outcome, Session};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use html::render_index_with_calibration;

/// How many example firings a gate keeps.
const EXAMPLES: usize = 3;

/// A source could not be read, or a config not compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// The candidate or current config does not compile.
    #[error("the {which} config does not compile: {source}")]
    Config {
        /// `candidate` or `current`.
        which: &'static str,
        /// Why.
        source: ConfigError,
    },
    /// A source could not be read.
    #[error("cannot read {path}: {source}; pass a runs/ folder, a run's folder or Claude Code transcripts (*.jsonl)")]
    Io {
        /// The source.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One example firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Firing {
    /// `ledger` or `claude-code`, and the run or session id.
    pub session: String,
    /// The turn (from 1) in the session.
    pub turn: u64,
    /// The agent.
    pub agent: String,
    /// The tool and the path.
    pub action: String,
    /// The refusal (or warning) the agent would have read.
    pub text: String,
}

/// What came of the writes a gate fired on, as the history shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Aftermath {
    /// The write was refused or failed when it was recorded, or the recorded config flagged it
    /// (warned, or a person granted an override): the firing agrees with history.
    pub agreed: u64,
    /// The write was reverted: the firing was right.
    pub reverted: u64,
    /// A plan was written later in the same turn: the firing was right (it asks for one).
    pub plan_followed: u64,
    /// The write stood and no plan followed: a possible false positive.
    pub stood: u64,
    /// The history does not say.
    pub unknown: u64,
}

/// One gate's figures under the candidate config.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateCalibration {
    /// Writes it decided on.
    pub actions: u64,
    /// Denials (enforce) it would have given.
    pub denied: u64,
    /// Warnings (advisory) it would have given.
    pub warned: u64,
    /// Turns it would have fired in.
    pub turns_fired: u64,
    /// Sessions (runs) it would have fired in.
    pub sessions_fired: u64,
    /// `turns_fired` over all turns.
    pub turn_rate: f64,
    /// What came of the writes it fired on.
    pub aftermath: Aftermath,
    /// Possible false positives over the firings whose aftermath is known (`None`: none known).
    pub false_positive_estimate: Option<f64>,
    /// The first few firings.
    pub examples: Vec<Firing>,
    /// Under the current config: turns it fired in (`None`: no current config given).
    pub current_turns_fired: Option<u64>,
    /// Refusals by this gate recorded in the ledgers (what actually happened).
    pub recorded_refusals: u64,
}

/// The calibration report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// Sessions (runs and Claude Code sessions) read.
    pub sessions: u64,
    /// Turns (a person's message starts one).
    pub turns: u64,
    /// Recorded file writes re-judged.
    pub actions: u64,
    /// Writes left out: outside the workspace or by an agent name loopward cannot use.
    pub unjudged: u64,
    /// Per gate, under the candidate.
    pub gates: BTreeMap<String, GateCalibration>,
    /// Writes whose verdict differs between the current config and the candidate (`None`: no
    /// current config given).
    pub changed: Option<u64>,
    /// The first few of them: (firing under the candidate, or the action it stops firing on).
    pub changed_examples: Vec<Firing>,
    /// Ledgers left out because they did not verify, with the reason.
    pub left_out: Vec<(String, String)>,
}

/// Reads sources and re-judges them; [`finish`](Self::finish) gives the report.
pub struct Calibrator {
    candidate: Policy,
    current: Option<Policy>,
    main_agent: String,
    report: Calibration,
    fired_turns: BTreeMap<String, u64>,
    verify: crate::audit::VerifyOptions,
}

impl std::fmt::Debug for Calibrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibrator")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl Calibrator {
    /// A calibrator for `candidate`, compared with `current` when given. `main_agent` names
    /// Claude Code's main agent (as `loopward hook claude-code --main-agent` does).
    pub fn new(
        candidate: &PolicyConfig,
        current: Option<&PolicyConfig>,
        main_agent: &str,
    ) -> Result<Self, CalibrateError> {
        let rules = |cfg: &PolicyConfig, which| {
            Policy::shadow(cfg).map_err(|source| CalibrateError::Config { which, source })
        };
        Ok(Self {
            candidate: rules(candidate, "candidate")?,
            current: current.map(|c| rules(c, "current")).transpose()?,
            main_agent: main_agent.to_string(),
            report: Calibration {
                changed: current.map(|_| 0),
                ..Calibration::default()
            },
            fired_turns: BTreeMap::new(),
            // History as it was recorded: keyless and unfinished ledgers count, tampered ones not.
            verify: crate::audit::VerifyOptions::keyless().unfinished(true),
        })
    }

    /// How each run's ledger is checked before it counts (default: keyless chains and
    /// unfinished runs accepted). Pass the key ring of loopward's state directory so keyed
    /// ledgers are read: they are left out, with the reason, under keys not held.
    pub fn verify_options(mut self, opts: crate::audit::VerifyOptions) -> Self {
        self.verify = opts;
        self
    }

    /// Reads a source: a runs folder, a run's folder, a folder of transcripts (searched two
    /// levels down, as `~/.claude/projects` is laid out), or one file.
    pub fn add_path(&mut self, path: &Path) -> Result<(), CalibrateError> {
        self.add_depth(path, 0)
    }

    fn add_depth(&mut self, path: &Path, depth: u8) -> Result<(), CalibrateError> {
        let io = |source| CalibrateError::Io {
            path: path.to_path_buf(),
            source,
        };
        if path.is_file() {
            if path.file_name().is_some_and(|n| n == EVENTS_FILE) {
                return self.add_path(path.parent().unwrap_or(path));
            }
            let file = std::fs::File::open(path).map_err(io)?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let sessions =
                transcript_sessions(std::io::BufReader::new(file), &self.main_agent, &name)
                    .map_err(io)?;
            for s in sessions {
                self.add_session(&s);
            }
            return Ok(());
        }
        if path.join(EVENTS_FILE).is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Err(e) = verify(path, &self.verify) {
                self.report.left_out.push((name, e.to_string()));
                return Ok(());
            }
            let bytes = std::fs::read(path.join(EVENTS_FILE)).map_err(io)?;
            let session = ledger_session(&name, &bytes);
            self.add_session(&session);
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if (p.is_dir() && depth < 2) || (p.is_file() && source::is_transcript(&p)) {
                self.add_depth(&p, depth + 1)?;
            }
        }
        Ok(())
    }

    fn add_session(&mut self, session: &Session) {
        let (judged, turns) = judge_session(&self.candidate, session);
        let current = self
            .current
            .as_ref()
            .map(|rules| judge_session(rules, session).0);
        let r = &mut self.report;
        r.sessions += 1;
        r.turns += turns;
        let judged_writes = judged.len() as u64;
        let all_writes = session
            .steps
            .iter()
            .filter(|s| matches!(s, source::Step::Write(_)))
            .count() as u64;
        r.actions += judged_writes;
        r.unjudged += all_writes - judged_writes;
        let mut fired_in_session: BTreeSet<String> = BTreeSet::new();
        let mut fired_turn: BTreeSet<(String, u64)> = BTreeSet::new();
        for (i, j) in judged.iter().enumerate() {
            for (gate, d) in &j.verdict.decisions {
                let g = r.gates.entry(gate.clone()).or_default();
                g.actions += 1;
                let text = match d {
                    Decision::Deny(rf) => {
                        g.denied += 1;
                        format!("{}; what to do: {}", rf.reason, rf.hint)
                    }
                    Decision::Warn(rf) => {
                        g.warned += 1;
                        rf.reason.clone()
                    }
                    _ => continue,
                };
                fired_in_session.insert(gate.clone());
                if fired_turn.insert((gate.clone(), j.turn)) {
                    g.turns_fired += 1;
                }
                let a = &mut g.aftermath;
                match (j.write.outcome, j.plan_followed) {
                    (Outcome::Refused, _) => a.agreed += 1,
                    (_, _) if j.write.flagged => a.agreed += 1,
                    (Outcome::Reverted, _) => a.reverted += 1,
                    (Outcome::Kept, true) => a.plan_followed += 1,
                    (Outcome::Kept, false) => a.stood += 1,
                    (Outcome::Unknown, _) => a.unknown += 1,
                }
                if g.examples.len() < EXAMPLES {
                    g.examples.push(firing(session, j, text));
                }
            }
            if let (Some(cur), Some(changed)) = (&current, r.changed.as_mut()) {
                let before = cur.get(i).map(|c| c.verdict.fired()).unwrap_or_default();
                if before != j.verdict.fired() {
                    *changed += 1;
                    if r.changed_examples.len() < EXAMPLES {
                        let now: Vec<&str> = j.verdict.fired().into_iter().collect();
                        let was: Vec<&str> = before.into_iter().collect();
                        r.changed_examples.push(firing(
                            session,
                            j,
                            format!("fired: [{}] → [{}]", was.join(", "), now.join(", ")),
                        ));
                    }
                }
            }
        }
        for g in &fired_in_session {
            if let Some(g) = r.gates.get_mut(g) {
                g.sessions_fired += 1;
            }
        }
        if let Some(cur) = &current {
            let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
            for j in cur {
                for g in j.verdict.fired() {
                    if seen.insert((g.to_string(), j.turn)) {
                        *self.fired_turns.entry(g.to_string()).or_default() += 1;
                    }
                }
            }
        }
        for step in &session.steps {
            if let source::Step::Write(w) = step {
                if let Some(gate) = &w.refused_by {
                    if session.kind == "ledger" {
                        r.gates.entry(gate.clone()).or_default().recorded_refusals += 1;
                    }
                }
            }
        }
    }

    /// The report.
    pub fn finish(mut self) -> Calibration {
        let turns = self.report.turns.max(1) as f64;
        let has_current = self.current.is_some();
        for (name, g) in &mut self.report.gates {
            g.turn_rate = g.turns_fired as f64 / turns;
            let a = g.aftermath;
            let known = a.agreed + a.reverted + a.plan_followed + a.stood;
            g.false_positive_estimate = (known > 0).then(|| a.stood as f64 / known as f64);
            if has_current {
                g.current_turns_fired = Some(self.fired_turns.get(name).copied().unwrap_or(0));
            }
        }
        self.report
    }
}

fn firing(session: &Session, j: &shadow::Judged<'_>, text: String) -> Firing {
    Firing {
        session: format!("{} {}", session.kind, session.id),
        turn: j.turn,
        agent: j.write.agent.clone(),
        action: format!(
            "{} {}",
            j.write.tool,
            j.write.rel.as_deref().unwrap_or(&j.write.raw)
        ),
        text,
    }
}

impl Calibration {
    /// Stable, pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
    }

    /// A plain-text table for a terminal.
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{} session(s), {} turn(s), {} recorded write(s) re-judged ({} left unjudged: outside the workspace or unnamed agent)",
            self.sessions, self.turns, self.actions, self.unjudged
        );
        let _ = writeln!(
            o,
            "\n{:<24} {:>7} {:>7} {:>7} {:>12} {:>9} {:>7} {:>9} {:>9} {:>9}",
            "gate",
            "writes",
            "denied",
            "warned",
            "turns fired",
            "sessions",
            "rate",
            "current",
            "recorded",
            "FP est."
        );
        for (name, g) in &self.gates {
            let _ = writeln!(
                o,
                "{:<24} {:>7} {:>7} {:>7} {:>12} {:>9} {:>6.1}% {:>9} {:>9} {:>9}",
                name,
                g.actions,
                g.denied,
                g.warned,
                format!("{} of {}", g.turns_fired, self.turns),
                g.sessions_fired,
                100.0 * g.turn_rate,
                g.current_turns_fired
                    .map_or_else(|| "-".into(), |n| format!("{n} turns")),
                g.recorded_refusals,
                g.false_positive_estimate
                    .map_or_else(|| "-".into(), |f| format!("{:.0}%", 100.0 * f)),
            );
        }
        for (name, g) in &self.gates {
            if g.examples.is_empty() {
                continue;
            }
            let a = g.aftermath;
            let _ = writeln!(
                o,
                "\n{name}: afterwards {} refused anyway, {} reverted, {} followed by a plan, {} stood (possible false positives), {} unknown",
                a.agreed, a.reverted, a.plan_followed, a.stood, a.unknown
            );
            for e in &g.examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {}",
                    e.session, e.turn, e.agent, e.action, e.text
                );
            }
        }
        if let Some(n) = self.changed {
            let _ = writeln!(
                o,
                "\nagainst the current config: {n} write(s) would be judged differently"
            );
            for e in &self.changed_examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {}",
                    e.session, e.turn, e.agent, e.action, e.text
                );
            }
        }
        for (run, why) in &self.left_out {
            let _ = writeln!(o, "LEFT OUT {run}: {why}");
        }
        o
    }
}
