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
//! use loopward_calibrate::Calibrator;
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

mod history;
mod html;
mod layers;
mod report;
mod shadow;
mod source;
#[cfg(test)]
mod tests;

use layers::{judge_layers, Layers};
use loopward_core::Decision;
use loopward_runner::audit::VerifyOptions;
use loopward_runner::audit::{verify_records, EVENTS_FILE};
use loopward_runner::gates::Policy;
use loopward_runner::gates::{ConfigError, PolicyConfig};
use loopward_runner::layers::stack::LayersConfig;
use shadow::{judge_session, Judged};
use source::{ledger_session, transcript_sessions, Session, Step};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use history::{firing, History};
pub use html::render_index_with_calibration;
pub(crate) use report::fp_text;
pub use report::{Aftermath, Assessment, Calibration, Firing, GateCalibration};

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
        source: loopward_runner::layers::ConfigError,
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
                        w.rel.is_some()
                            && loopward_core::AgentId::new(w.call.agent.clone()).is_ok(),
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
