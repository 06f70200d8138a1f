//! Shadow-mode calibration: how often a candidate config's gates would have fired on recorded
//! history, and whether those firings look right, before anyone switches them to enforce.
//!
//! Sources are loopward ledgers (a `runs/` folder or one run's folder; each ledger is read once,
//! through the verifier, and one that does not verify is left out and listed) and Claude Code
//! transcripts (the JSONL session files under `~/.claude/projects/<project>/`). Every recorded
//! file write, command change and handoff is re-judged by the policy engine with no override
//! store; a ledger's agent turns and tool calls are also re-judged by the runner's layers (caps,
//! repeat limit, stop-gates, class-jump) with their own decision code. Nothing is executed,
//! nothing on disk is read but the sources, and nothing is written. Sources are read one session
//! at a time.
//!
//! Per gate the [`Calibration`] says how many actions it judged, in how many turns and sessions
//! it would have fired (and the rate over all turns), example refusals, and a false-positive
//! estimate: each firing gets an [`Assessment`] from what the history shows came next (refused
//! anyway, reverted, a plan followed, reworked later: right; it stood and the history went on
//! well: likely false; the history ends there: unclear), and the estimate is the likely false
//! over the clear ones, with the range the unclear ones allow. Given the current config too, it
//! says what would change.
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
mod layers;
mod shadow;
mod source;
#[cfg(test)]
mod tests;

use crate::audit::verify::{verify_records, EVENTS_FILE};
use crate::audit::VerifyOptions;
use crate::gates::Policy;
use crate::gates::{ConfigError, PolicyConfig};
use crate::layers::stack::LayersConfig;
use layers::{judge_layers, Layers};
use loopward_core::Decision;
use serde::Serialize;
use shadow::{judge_session, Judged};
use source::{ledger_session, transcript_sessions, Outcome, Session, Step};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The candidate or current config's layer tables are invalid.
    #[error("the {which} config's layer tables are invalid: {source}")]
    Layers {
        /// `candidate` or `current`.
        which: &'static str,
        /// Why.
        source: crate::layers::ConfigError,
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

/// What the history shows of one firing, and so whether it looks right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Assessment {
    /// The action was refused or failed when it was recorded, or the recorded config flagged it
    /// (a warning, an override a person granted), or the recorded run did not complete anyway
    /// (for a firing that would have stopped it): right.
    Agreed,
    /// The write was reverted: right.
    Reverted,
    /// A plan was written later in the same turn: right (the sprawl gate asks for one).
    PlanFollowed,
    /// The same file was written again later by another agent or in a later turn: right (the
    /// work was not done yet).
    Reworked,
    /// The action stood and the history went on well without the firing (the run completed; a
    /// person's next message came; a repeat came after the workspace changed): a false positive.
    LikelyFalse,
    /// The action stood, but the history ends before it shows whether that was well.
    Unclear,
    /// The history does not say what became of the action.
    Unknown,
}

impl Assessment {
    /// Says it for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Agreed => "right: refused, failed or flagged anyway",
            Self::Reverted => "right: reverted",
            Self::PlanFollowed => "right: a plan followed",
            Self::Reworked => "right: reworked later",
            Self::LikelyFalse => "likely false positive: it stood and the history went on well",
            Self::Unclear => "unclear: it stood, the history ends there",
            Self::Unknown => "unknown",
        }
    }
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
    /// What the history shows of it.
    pub assessment: Assessment,
}

/// What came of the actions a gate fired on, as the history shows it: each firing assessed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Aftermath {
    /// [`Assessment::Agreed`].
    pub agreed: u64,
    /// [`Assessment::Reverted`].
    pub reverted: u64,
    /// [`Assessment::PlanFollowed`].
    pub plan_followed: u64,
    /// [`Assessment::Reworked`].
    pub reworked: u64,
    /// [`Assessment::LikelyFalse`].
    pub likely_false: u64,
    /// [`Assessment::Unclear`].
    pub unclear: u64,
    /// [`Assessment::Unknown`].
    pub unknown: u64,
}

impl Aftermath {
    fn add(&mut self, a: Assessment) {
        let n = match a {
            Assessment::Agreed => &mut self.agreed,
            Assessment::Reverted => &mut self.reverted,
            Assessment::PlanFollowed => &mut self.plan_followed,
            Assessment::Reworked => &mut self.reworked,
            Assessment::LikelyFalse => &mut self.likely_false,
            Assessment::Unclear => &mut self.unclear,
            Assessment::Unknown => &mut self.unknown,
        };
        *n += 1;
    }

    /// Says it for a person.
    pub fn describe(&self) -> String {
        format!(
            "{} refused, failed or flagged anyway, {} reverted, {} followed by a plan, {} reworked later; {} likely false positives; {} unclear, {} unknown",
            self.agreed, self.reverted, self.plan_followed, self.reworked, self.likely_false, self.unclear, self.unknown
        )
    }

    /// Firings the history shows were right.
    pub fn right(&self) -> u64 {
        self.agreed + self.reverted + self.plan_followed + self.reworked
    }

    /// The false-positive estimate: likely false positives over the firings whose outcome is
    /// clear (right or likely false), and the range it lies in whichever way the unclear ones
    /// went. `None` when no firing's outcome is known.
    pub fn false_positives(&self) -> Option<(f64, (f64, f64))> {
        let clear = self.right() + self.likely_false;
        let known = clear + self.unclear;
        if known == 0 {
            return None;
        }
        let point = if clear == 0 {
            (self.likely_false + self.unclear) as f64 / known as f64
        } else {
            self.likely_false as f64 / clear as f64
        };
        let lo = self.likely_false as f64 / known as f64;
        let hi = (self.likely_false + self.unclear) as f64 / known as f64;
        Some((point, (lo, hi)))
    }
}

/// One gate's figures under the candidate config.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateCalibration {
    /// Actions it decided on.
    pub actions: u64,
    /// Denials (enforce) it would have given, or stops it would have made.
    pub denied: u64,
    /// Warnings (advisory) it would have given.
    pub warned: u64,
    /// Turns it would have fired in.
    pub turns_fired: u64,
    /// Sessions (runs) it would have fired in.
    pub sessions_fired: u64,
    /// `turns_fired` over all turns.
    pub turn_rate: f64,
    /// What came of the actions it fired on, firing by firing.
    pub aftermath: Aftermath,
    /// Likely false positives over the firings whose outcome is clear (`None`: none clear).
    pub false_positive_estimate: Option<f64>,
    /// The range the false-positive rate lies in, whichever way the unclear firings went.
    pub false_positive_range: Option<(f64, f64)>,
    /// The first few firings.
    pub examples: Vec<Firing>,
    /// Under the current config: turns it fired in (`None`: no current config given).
    pub current_turns_fired: Option<u64>,
    /// Refusals, stops and forced jumps by this gate recorded in the ledgers (what actually
    /// happened under the recorded config).
    pub recorded_refusals: u64,
}

/// The calibration report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// Sessions (runs and Claude Code sessions) read.
    pub sessions: u64,
    /// Turns (a person's message starts one).
    pub turns: u64,
    /// Recorded actions re-judged: file writes (all sources), and every other tool call and
    /// agent turn of a ledger.
    pub actions: u64,
    /// Recorded file writes re-judged (a part of `actions`).
    pub writes: u64,
    /// Records (ledger records, transcript lines) read, for the throughput.
    pub records: u64,
    /// Writes left out: outside the workspace or by an agent name loopward cannot use.
    pub unjudged: u64,
    /// Per gate, under the candidate.
    pub gates: BTreeMap<String, GateCalibration>,
    /// Actions whose verdict differs between the current config and the candidate (`None`: no
    /// current config given).
    pub changed: Option<u64>,
    /// The first few of them: (firing under the candidate, or the action it stops firing on).
    pub changed_examples: Vec<Firing>,
    /// Ledgers read, by what verified them (`key k…`, `keyless (sha256)`).
    pub verified_by: BTreeMap<String, u64>,
    /// Ledgers left out because they did not verify, with the reason.
    pub left_out: Vec<(String, String)>,
}

/// One config, compiled for shadow judging.
struct Rules {
    policy: Policy,
    layers: Layers,
}

impl Rules {
    fn new(
        policy: &PolicyConfig,
        layers: &LayersConfig,
        which: &'static str,
    ) -> Result<Self, CalibrateError> {
        Ok(Self {
            policy: Policy::shadow(policy)
                .map_err(|source| CalibrateError::Config { which, source })?,
            layers: Layers::new(layers)
                .map_err(|source| CalibrateError::Layers { which, source })?,
        })
    }

    /// Every judged action of a session, in step order, and the session's turns.
    fn judge(&self, session: &Session) -> (Vec<Judged>, u64) {
        let (mut judged, turns) = judge_session(&self.policy, session);
        judged.extend(judge_layers(&self.layers, session));
        judged.sort_by_key(|j| j.step);
        (judged, turns)
    }
}

/// Reads sources and re-judges them; [`finish`](Self::finish) gives the report.
pub struct Calibrator {
    candidate: Rules,
    current: Option<Rules>,
    main_agent: String,
    verify: VerifyOptions,
    report: Calibration,
    fired_turns: BTreeMap<String, u64>,
}

impl std::fmt::Debug for Calibrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibrator")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl Calibrator {
    /// A calibrator for the gates of `candidate`, compared with `current` when given, with the
    /// default layer tables (see [`with_layers`](Self::with_layers)). `main_agent` names Claude
    /// Code's main agent (as `loopward hook claude-code --main-agent` does). Ledgers must verify
    /// keyless or unfinished (see [`with_verify`](Self::with_verify)).
    pub fn new(
        candidate: &PolicyConfig,
        current: Option<&PolicyConfig>,
        main_agent: &str,
    ) -> Result<Self, CalibrateError> {
        let layers = LayersConfig::default();
        Ok(Self {
            candidate: Rules::new(candidate, &layers, "candidate")?,
            current: current
                .map(|c| Rules::new(c, &layers, "current"))
                .transpose()?,
            main_agent: main_agent.to_string(),
            verify: VerifyOptions::keyless().unfinished(true),
            report: Calibration {
                changed: current.map(|_| 0),
                ..Calibration::default()
            },
            fired_turns: BTreeMap::new(),
        })
    }

    /// The layer tables (caps, repeat, stop-gates, class-jump) of the candidate and of the
    /// current config, judged on ledgers.
    pub fn with_layers(
        mut self,
        candidate: &LayersConfig,
        current: Option<&LayersConfig>,
    ) -> Result<Self, CalibrateError> {
        let layers =
            |c, which| Layers::new(c).map_err(|source| CalibrateError::Layers { which, source });
        self.candidate.layers = layers(candidate, "candidate")?;
        if let (Some(rules), Some(c)) = (self.current.as_mut(), current) {
            rules.layers = layers(c, "current")?;
        }
        Ok(self)
    }

    /// What a ledger must verify under (default: keyless and unfinished ledgers accepted,
    /// tampered ones not). A ledger that does not verify is left out and listed.
    pub fn with_verify(mut self, opts: VerifyOptions) -> Self {
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
            let (sessions, lines) =
                transcript_sessions(std::io::BufReader::new(file), &self.main_agent, &name)
                    .map_err(io)?;
            self.report.records += lines;
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
            // One read: the records come out of the verifier, checked.
            match verify_records(path, &self.verify) {
                Ok((ok, records)) => {
                    *self.report.verified_by.entry(ok.verified_by()).or_default() += 1;
                    self.report.records += records.len() as u64;
                    let session = ledger_session(&name, &records);
                    drop(records);
                    self.add_session(&session);
                }
                Err(e) => self.report.left_out.push((name, e.to_string())),
            }
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
        let (judged, turns) = self.candidate.judge(session);
        let current = self.current.as_ref().map(|rules| rules.judge(session).0);
        let history = History::of(session, turns);
        let r = &mut self.report;
        r.sessions += 1;
        r.turns += turns;
        let (mut writes, mut judged_writes, mut other) = (0u64, 0u64, 0u64);
        for s in &session.steps {
            match s {
                Step::Write(w) => {
                    writes += 1;
                    judged_writes += u64::from(
                        w.rel.is_some() && loopward_core::AgentId::new(w.agent.clone()).is_ok(),
                    );
                }
                Step::Call(_) | Step::Turn(..) => other += 1,
                Step::Human => {}
            }
        }
        r.actions += judged_writes + other;
        r.writes += judged_writes;
        r.unjudged += writes - judged_writes;
        let mut fired_in_session: BTreeSet<String> = BTreeSet::new();
        let mut fired_turn: BTreeSet<(String, u64)> = BTreeSet::new();
        for j in &judged {
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
                let assessment = j.fixed(gate).unwrap_or_else(|| history.assess(j));
                g.aftermath.add(assessment);
                if g.examples.len() < EXAMPLES {
                    g.examples.push(firing(session, j, text, assessment));
                }
            }
        }
        if let (Some(cur), Some(changed)) = (&current, r.changed.as_mut()) {
            let mut before: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
            for c in cur {
                before.entry(c.step).or_default().extend(c.verdict.fired());
            }
            let mut after: BTreeMap<usize, (BTreeSet<&str>, &Judged)> = BTreeMap::new();
            for j in &judged {
                after
                    .entry(j.step)
                    .or_insert_with(|| (BTreeSet::new(), j))
                    .0
                    .extend(j.verdict.fired());
            }
            let steps: BTreeSet<usize> = before.keys().chain(after.keys()).copied().collect();
            let empty = BTreeSet::new();
            for step in steps {
                let was = before.get(&step).unwrap_or(&empty);
                let now = after.get(&step).map_or(&empty, |(s, _)| s);
                if was == now {
                    continue;
                }
                *changed += 1;
                let Some(j) = after
                    .get(&step)
                    .map(|(_, j)| *j)
                    .or_else(|| cur.iter().find(|c| c.step == step))
                else {
                    continue;
                };
                if r.changed_examples.len() < EXAMPLES {
                    let was: Vec<&str> = was.iter().copied().collect();
                    let now: Vec<&str> = now.iter().copied().collect();
                    let text = format!("fired: [{}] → [{}]", was.join(", "), now.join(", "));
                    let a = history.assess(j);
                    r.changed_examples.push(firing(session, j, text, a));
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
        for gate in &session.recorded {
            r.gates.entry(gate.clone()).or_default().recorded_refusals += 1;
        }
    }

    /// The report.
    pub fn finish(mut self) -> Calibration {
        let turns = self.report.turns.max(1) as f64;
        let has_current = self.current.is_some();
        for (name, g) in &mut self.report.gates {
            g.turn_rate = g.turns_fired as f64 / turns;
            if let Some((point, range)) = g.aftermath.false_positives() {
                g.false_positive_estimate = Some(point);
                g.false_positive_range = Some(range);
            }
            if has_current {
                g.current_turns_fired = Some(self.fired_turns.get(name).copied().unwrap_or(0));
            }
        }
        self.report
    }
}

/// What the rest of a session shows about an action: later writes of each file, and whether
/// the session went on well.
struct History {
    /// Per file: (step, turn, agent) of each write that stood.
    writes: HashMap<String, Vec<(usize, u64, String)>>,
    /// Turns in the session.
    turns: u64,
    /// The recorded run completed (`None`: a transcript, or the run did not end).
    completed: Option<bool>,
    transcript: bool,
}

impl History {
    fn of(session: &Session, turns: u64) -> Self {
        let mut writes: HashMap<String, Vec<(usize, u64, String)>> = HashMap::new();
        let mut turn = 0u64;
        for (i, s) in session.steps.iter().enumerate() {
            match s {
                Step::Human => turn += 1,
                Step::Write(w) if matches!(w.outcome, Outcome::Kept) => {
                    if let Some(rel) = &w.rel {
                        writes.entry(rel.clone()).or_default().push((
                            i,
                            turn.max(1),
                            w.agent.clone(),
                        ));
                    }
                }
                _ => {}
            }
        }
        Self {
            writes,
            turns,
            completed: layers::completed(session),
            transcript: session.kind != "ledger",
        }
    }

    /// One firing's assessment from the action's own outcome and what came after it.
    fn assess(&self, j: &Judged) -> Assessment {
        match j.act.outcome {
            Outcome::Refused => return Assessment::Agreed,
            _ if j.act.flagged => return Assessment::Agreed,
            Outcome::Reverted => return Assessment::Reverted,
            Outcome::Unknown => return Assessment::Unknown,
            Outcome::Kept => {}
        }
        if j.plan_followed {
            return Assessment::PlanFollowed;
        }
        let reworked = j
            .act
            .file
            .as_ref()
            .and_then(|f| self.writes.get(f))
            .is_some_and(|ws| {
                ws.iter().any(|(step, turn, agent)| {
                    *step > j.step && (*turn > j.turn || *agent != j.act.agent)
                })
            });
        if reworked {
            return Assessment::Reworked;
        }
        let went_on_well = if self.transcript {
            Some(j.turn < self.turns)
        } else {
            self.completed
        };
        match went_on_well {
            Some(true) => Assessment::LikelyFalse,
            _ => Assessment::Unclear,
        }
    }
}

/// The false-positive estimate and its range, for a table cell.
pub(crate) fn fp_text(g: &GateCalibration) -> String {
    match (g.false_positive_estimate, g.false_positive_range) {
        (Some(p), Some((lo, hi))) if (hi - lo).abs() < 1e-9 => format!("{:.0}%", 100.0 * p),
        (Some(p), Some((lo, hi))) => {
            format!("{:.0}% ({:.0}–{:.0}%)", 100.0 * p, 100.0 * lo, 100.0 * hi)
        }
        _ => "-".into(),
    }
}

fn firing(session: &Session, j: &Judged, text: String, assessment: Assessment) -> Firing {
    Firing {
        session: format!("{} {}", session.kind, session.id),
        turn: j.turn,
        agent: j.act.agent.clone(),
        action: j.act.action.clone(),
        text,
        assessment,
    }
}

impl Calibration {
    /// Stable, pretty JSON.
    pub fn to_json(&self) -> String {
        crate::audit::report::pretty_json(self)
    }

    /// A plain-text table for a terminal.
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{} session(s), {} turn(s), {} recorded action(s) re-judged from {} record(s) ({} write(s) left unjudged: outside the workspace or unnamed agent)",
            self.sessions, self.turns, self.actions, self.records, self.unjudged
        );
        let _ = writeln!(
            o,
            "\n{:<28} {:>7} {:>7} {:>7} {:>12} {:>9} {:>7} {:>9} {:>9}  FP estimate (range)",
            "gate",
            "actions",
            "denied",
            "warned",
            "turns fired",
            "sessions",
            "rate",
            "current",
            "recorded",
        );
        for (name, g) in &self.gates {
            let _ = writeln!(
                o,
                "{:<28} {:>7} {:>7} {:>7} {:>12} {:>9} {:>6.1}% {:>9} {:>9}  {}",
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
                fp_text(g),
            );
        }
        for (name, g) in &self.gates {
            if g.examples.is_empty() {
                continue;
            }
            let a = g.aftermath;
            let _ = writeln!(o, "\n{name}: afterwards {}", a.describe());
            for e in &g.examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {} [{}]",
                    e.session,
                    e.turn,
                    e.agent,
                    e.action,
                    e.text,
                    e.assessment.describe()
                );
            }
        }
        if let Some(n) = self.changed {
            let _ = writeln!(
                o,
                "\nagainst the current config: {n} action(s) would be judged differently"
            );
            for e in &self.changed_examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {}",
                    e.session, e.turn, e.agent, e.action, e.text
                );
            }
        }
        let _ = writeln!(
            o,
            "\nFP estimate: each firing is assessed from what the history shows came next; the estimate is the likely false positives (the action stood and the history went on well: the run completed, the person's next message came, a repeat followed a change) over the firings whose outcome is clear; the range counts the unclear ones (the history ends there) as right, then as false."
        );
        for (by, n) in &self.verified_by {
            let _ = writeln!(o, "ledgers verified by {by}: {n}");
        }
        for (run, why) in &self.left_out {
            let _ = writeln!(o, "LEFT OUT {run}: {why}");
        }
        o
    }
}
