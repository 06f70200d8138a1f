//! The tracker: per-run state of each subtask and the verdicts it mints.

use crate::context::{RunContext, TurnContext};
use crate::journal::Resumed;
use crate::layers::{record, ConfigError};
use loopward_core::{
    AgentId, AuditError, ClassJumpDetail, ClassJumpRefusedDetail, LayerDetail, LayerVerdict,
};
use loopward_core::{LayerId, ToolName};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Failures allowed per strategy by default.
pub const DEFAULT_FAILURES_PER_STRATEGY: u32 = 3;

fn default_failures() -> u32 {
    DEFAULT_FAILURES_PER_STRATEGY
}

fn default_counted() -> Vec<ToolName> {
    vec!["shell".into()]
}

/// The `[class_jump]` table of `loopward.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassJumpConfig {
    /// Strategies in the order they are forced (at least one, unique, at most 32).
    pub strategies: Vec<String>,
    /// Failures a strategy may have before the next is forced (1..=100, default 3).
    #[serde(default = "default_failures")]
    pub failures_per_strategy: u32,
    /// Tools whose failed results (an error, a non-zero exit) count as failed attempts of the
    /// caller's current strategy, whether or not the agent reports them (default `["shell"]`;
    /// `[]` counts reports only). Counted per agent, under no subtask name, so neither silence
    /// nor a renamed subtask escapes the bound.
    #[serde(default = "default_counted")]
    pub count_failed_tools: Vec<ToolName>,
}

/// How an attempt went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attempt {
    /// It failed.
    Failed,
    /// It succeeded: the subtask is done.
    Succeeded,
}

/// What a verdict says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictKind {
    /// Try again with the same strategy.
    Retry,
    /// The strategy is spent: use [`Verdict::strategy`], the next one.
    Jump,
    /// Every strategy is spent; the run ends `Exhausted`.
    Exhausted,
    /// The subtask succeeded.
    Done,
}

/// The tracker's answer to a reported attempt. Only the tracker mints one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    kind: VerdictKind,
    subtask: Arc<str>,
    strategy: Option<Arc<str>>,
    failures: u32,
    allowed: u32,
}

impl Verdict {
    /// What it says.
    pub fn kind(&self) -> VerdictKind {
        self.kind
    }

    /// The subtask.
    pub fn subtask(&self) -> &str {
        &self.subtask
    }

    /// The strategy the next attempt must use (none when exhausted or done).
    pub fn strategy(&self) -> Option<&str> {
        self.strategy.as_deref()
    }

    /// Failures of the current strategy so far, and how many it is allowed.
    pub fn failures(&self) -> (u32, u32) {
        (self.failures, self.allowed)
    }

    /// The verdict on `subtask` after a failed attempt of `sub`'s current strategy: retry it
    /// while it has failures left, then the next strategy of `all`, then exhausted.
    fn after_failure(sub: &mut Sub, all: &[Arc<str>], allowed: u32, subtask: Arc<str>) -> Self {
        let current = all[sub.index].clone();
        let (kind, strategy, failures) = match sub.fail(all.len(), allowed) {
            VerdictKind::Retry => (VerdictKind::Retry, Some(current), sub.failures),
            VerdictKind::Jump => (VerdictKind::Jump, all.get(sub.index).cloned(), allowed),
            _ => (VerdictKind::Exhausted, None, allowed),
        };
        Self {
            kind,
            subtask,
            strategy,
            failures,
            allowed,
        }
    }

    /// Records the verdict on an attempt with `strategy`: reported by the agent, or counted
    /// from a failed result of `tool` (`source: "evidence"`).
    fn record(
        &self,
        turn: &TurnContext,
        strategy: Arc<str>,
        tool: Option<&ToolName>,
    ) -> Result<(), AuditError> {
        record::decision(
            turn,
            LayerId::ClassJump,
            self.layer_verdict(),
            LayerDetail::ClassJump(ClassJumpDetail {
                allowed: self.allowed,
                failures: self.failures,
                next: self.strategy.clone(),
                source: tool.map(|_| ClassJumpDetail::EVIDENCE),
                strategy,
                subtask: self.subtask.clone(),
                tool: tool.cloned(),
            }),
        )
    }

    /// The word the ledger records for it.
    fn layer_verdict(&self) -> LayerVerdict {
        match self.kind {
            VerdictKind::Retry => LayerVerdict::Retry,
            VerdictKind::Jump => LayerVerdict::ClassJump,
            VerdictKind::Exhausted => LayerVerdict::Exhausted,
            VerdictKind::Done => LayerVerdict::Succeeded,
        }
    }

    /// The sentence the agent reads.
    pub fn message(&self) -> String {
        let s = self.strategy.as_deref().unwrap_or("");
        match self.kind {
            VerdictKind::Retry => format!(
                "retry {} with strategy {s} ({} of {} failures used)",
                self.subtask, self.failures, self.allowed
            ),
            VerdictKind::Jump => format!(
                "class-jump: the previous strategy failed {} times on {}; it may not be retried. Use strategy {s} next",
                self.allowed, self.subtask
            ),
            VerdictKind::Exhausted => format!(
                "every strategy for {} is spent; the run ends now. Report what you tried in your reply",
                self.subtask
            ),
            VerdictKind::Done => format!("{} is done", self.subtask),
        }
    }
}

/// A reported attempt was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClassJumpError {
    /// The strategy is not in the configured list.
    #[error("{strategy:?} is not a configured strategy; the strategies are: {all}")]
    UnknownStrategy {
        /// The strategy given.
        strategy: String,
        /// The configured strategies.
        all: String,
    },
    /// The strategy is not the one the subtask must use now (spent, or not yet reached).
    #[error(
        "strategy {strategy} may not be used for {subtask} now; the current strategy is {current}"
    )]
    NotCurrent {
        /// The subtask.
        subtask: String,
        /// The strategy given.
        strategy: String,
        /// The strategy to use.
        current: String,
    },
    /// The subtask already ended (done or exhausted).
    #[error("{subtask} already ended ({how}); do not report more attempts for it")]
    Ended {
        /// The subtask.
        subtask: String,
        /// `done` or `exhausted`.
        how: &'static str,
    },
    /// The subtask name is empty or longer than 200 bytes.
    #[error("a subtask needs a name of 1 to 200 bytes")]
    BadSubtask,
    /// The ledger could not record the verdict; it was not given.
    #[error("{0}")]
    Audit(#[from] AuditError),
}

/// One subtask's (or one agent's counted tool failures') progress through the strategies
/// (also replayed from a recorded run by `loopward-calibrate`).
#[derive(Default)]
pub struct Sub {
    index: usize,
    /// Failed attempts under the current strategy.
    pub failures: u32,
    /// How it ended, if it did: `done` or `exhausted`.
    pub ended: Option<&'static str>,
}

impl Sub {
    /// Counts one failed attempt: retry while the strategy has failures left, then the next of
    /// `strategies`, then exhausted.
    pub fn fail(&mut self, strategies: usize, allowed: u32) -> VerdictKind {
        if self.failures + 1 < allowed {
            self.failures += 1;
            VerdictKind::Retry
        } else if self.index + 1 < strategies {
            self.index += 1;
            self.failures = 0;
            VerdictKind::Jump
        } else {
            self.ended = Some("exhausted");
            VerdictKind::Exhausted
        }
    }
}

/// Per-run state, in the run's extensions.
#[derive(Default)]
struct State {
    /// Keyed by the subtask's name, shared with the verdicts and records that name it.
    subtasks: Mutex<HashMap<Arc<str>, Sub>>,
    /// Failures counted from tool results, per agent; `None` until the first failure this
    /// process counts. It is rebuilt then, apart from the subtasks: the evidence is counted
    /// inside the tool stack, which a run executed on an engine that journals tool calls (see
    /// [`crate::journal::seed_tool_stack`]) reaches later than `report_attempt`'s replay.
    evidence: Mutex<Option<HashMap<AgentId, Sub>>>,
    exhausted: Mutex<Option<String>>,
}

impl State {
    /// Marks the run's `subtask` as out of strategies and ends the run after this turn: the
    /// rest of the reply that exhausted it does not run; the model may answer in text.
    fn exhaust(&self, turn: &TurnContext, subtask: &str) {
        *self.exhausted.lock().unwrap_or_else(|p| p.into_inner()) = Some(subtask.into());
        turn.end_run(loopward_core::RunStatus::Exhausted);
    }

    /// A resumed run's state, from the verdicts its journal settled (in order); empty for a
    /// new run. A verdict's detail names where the subtask went: `failures` on a retry, `next`
    /// on a jump.
    fn rebuilt(resumed: Option<&Resumed>, strategies: &[String]) -> Self {
        let state = Self::default();
        let mut subtasks = HashMap::new();
        let mut evidence = HashMap::new();
        let mut exhausted = None;
        for d in resumed
            .into_iter()
            .flat_map(|r| r.decisions(&LayerId::ClassJump))
        {
            let jump = d.decision.detail.as_class_jump();
            let refused = d.decision.detail.as_class_jump_refused();
            let (subtask, from_evidence): (&str, bool) = match (&jump, &refused) {
                (Some(j), _) => (&j.subtask, j.is_evidence()),
                (None, Some(r)) => (&r.subtask, false),
                (None, None) => continue,
            };
            let sub: &mut Sub = if from_evidence {
                evidence.entry(d.agent.clone()).or_default()
            } else {
                subtasks.entry(Arc::from(subtask)).or_default()
            };
            match d.decision.decision {
                LayerVerdict::Retry => {
                    sub.failures = jump.as_ref().map_or(sub.failures + 1, |j| j.failures);
                }
                LayerVerdict::ClassJump => {
                    let next = jump.as_ref().and_then(|j| j.next.as_deref());
                    sub.index = strategies
                        .iter()
                        .position(|s| Some(s.as_str()) == next)
                        .unwrap_or(sub.index + 1)
                        .min(strategies.len().saturating_sub(1));
                    sub.failures = 0;
                }
                LayerVerdict::Exhausted => {
                    sub.ended = Some("exhausted");
                    exhausted = Some(subtask.to_string());
                }
                LayerVerdict::Succeeded => sub.ended = Some("done"),
                _ => {}
            }
        }
        *state.subtasks.lock().unwrap_or_else(|p| p.into_inner()) = subtasks;
        if resumed.is_some() {
            *state.evidence.lock().unwrap_or_else(|p| p.into_inner()) = Some(evidence);
        }
        *state.exhausted.lock().unwrap_or_else(|p| p.into_inner()) = exhausted;
        state
    }
}

/// The class-jump tracker. Cheap to clone; its state is per run.
#[derive(Clone, Debug)]
pub struct ClassJump {
    config: Arc<ClassJumpConfig>,
    /// The strategies, shared with the verdicts and records that name them.
    strategies: Arc<[Arc<str>]>,
}

impl ClassJump {
    /// A tracker; fails naming the field for an empty or duplicate strategy list or a zero or
    /// absurd allowance.
    pub fn new(config: ClassJumpConfig) -> Result<Self, ConfigError> {
        crate::layers::config::in_range(
            "class_jump.failures_per_strategy",
            config.failures_per_strategy.into(),
            100,
        )?;
        if config.strategies.is_empty() || config.strategies.len() > 32 {
            return Err(ConfigError::new(
                "class_jump.strategies",
                "list between 1 and 32 strategies",
            ));
        }
        let mut seen = HashSet::new();
        for s in &config.strategies {
            if s.trim().is_empty() || !seen.insert(s) {
                return Err(ConfigError::new(
                    "class_jump.strategies",
                    format!("{s:?} is empty or listed twice"),
                ));
            }
        }
        Ok(Self {
            strategies: config
                .strategies
                .iter()
                .map(|s| Arc::from(s.as_str()))
                .collect(),
            config: Arc::new(config),
        })
    }

    /// The most failed attempts a subtask can have before the run ends.
    pub fn max_failures(&self) -> u32 {
        let n = u32::try_from(self.config.strategies.len()).unwrap_or(u32::MAX);
        n.saturating_mul(self.config.failures_per_strategy)
    }

    /// The configured strategies.
    pub fn strategies(&self) -> &[String] {
        &self.config.strategies
    }

    /// The settings.
    pub fn config(&self) -> &ClassJumpConfig {
        &self.config
    }

    /// Whether a subtask of this run ran out of strategies.
    pub fn is_exhausted(&self, run: &RunContext) -> bool {
        exhausted(run).is_some()
    }

    /// Reports one attempt of `subtask` with `strategy` and returns the verdict, recorded in the
    /// ledger before it is returned.
    pub fn report(
        &self,
        turn: &TurnContext,
        subtask: &str,
        strategy: &str,
        attempt: Attempt,
    ) -> Result<Verdict, ClassJumpError> {
        if subtask.is_empty() || subtask.len() > 200 {
            return Err(ClassJumpError::BadSubtask);
        }
        let all = &self.strategies;
        let allowed = self.config.failures_per_strategy;
        let refuse = |e: ClassJumpError| -> Result<Verdict, ClassJumpError> {
            record::decision(
                turn,
                LayerId::ClassJump,
                LayerVerdict::Refused,
                LayerDetail::ClassJumpRefused(ClassJumpRefusedDetail {
                    reason: e.to_string(),
                    strategy: strategy.into(),
                    subtask: subtask.into(),
                }),
            )?;
            Err(e)
        };
        let Some(position) = all.iter().position(|s| &**s == strategy) else {
            return refuse(ClassJumpError::UnknownStrategy {
                strategy: strategy.chars().take(80).collect(),
                all: self.config.strategies.join(", "),
            });
        };
        let state = self.state(turn.run());
        let mut subs = state.subtasks.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by `&str`: the name is copied only the first time the subtask is seen.
        let name = match subs.get_key_value(subtask) {
            Some((name, _)) => name.clone(),
            None => {
                let name = Arc::<str>::from(subtask);
                subs.insert(name.clone(), Sub::default());
                name
            }
        };
        let Some(sub) = subs.get_mut(subtask) else {
            unreachable!("inserted above")
        };
        if let Some(how) = sub.ended {
            return refuse(ClassJumpError::Ended {
                subtask: subtask.into(),
                how,
            });
        }
        if sub.index != position {
            return refuse(ClassJumpError::NotCurrent {
                subtask: subtask.into(),
                strategy: strategy.into(),
                current: all[sub.index].to_string(),
            });
        }
        let current = all[sub.index].clone();
        let v = match attempt {
            Attempt::Succeeded => {
                sub.ended = Some("done");
                Verdict {
                    kind: VerdictKind::Done,
                    subtask: name,
                    strategy: None,
                    failures: sub.failures,
                    allowed,
                }
            }
            Attempt::Failed => Verdict::after_failure(sub, all, allowed, name),
        };
        v.record(turn, current, None)?;
        drop(subs);
        if v.kind == VerdictKind::Exhausted {
            state.exhaust(turn, subtask);
        }
        Ok(v)
    }
}

impl ClassJump {
    /// The run's state: for a resumed run, first rebuilt from its journal.
    fn state(&self, run: &RunContext) -> Arc<State> {
        // Made once per run: after that, one lookup (the journal is not asked again).
        if let Some(state) = run.extensions().get::<State>() {
            return state;
        }
        let resumed = Resumed::of(run);
        run.extensions()
            .get_or_insert_with(|| State::rebuilt(resumed.as_deref(), &self.config.strategies))
    }

    /// Whether a failed result of `tool` counts as a failed attempt.
    pub fn counts(&self, tool: &ToolName) -> bool {
        self.config.count_failed_tools.contains(tool)
    }

    /// Counts a failed result of `tool` (one [`ClassJump::counts`]) against the calling agent's
    /// current strategy: the evidence the agent cannot leave unreported. The verdict is recorded
    /// (`source: "evidence"`) before it is returned; on exhaustion the rest of the reply does
    /// not run and the run ends `Exhausted` after the turn.
    pub fn observe_failure(
        &self,
        turn: &TurnContext,
        tool: &ToolName,
    ) -> Result<Verdict, AuditError> {
        let all = &self.strategies;
        let allowed = self.config.failures_per_strategy;
        let agent = turn.agent().clone();
        let subtask: Arc<str> = format!("{agent}'s failed {tool} calls").into();
        let state = self.state(turn.run());
        let mut guard = state.evidence.lock().unwrap_or_else(|p| p.into_inner());
        let ev = guard.get_or_insert_with(|| {
            // The first failure counted in this process: what the journal settled, if anything.
            let settled =
                State::rebuilt(Resumed::of(turn.run()).as_deref(), &self.config.strategies);
            let ev = settled
                .evidence
                .into_inner()
                .unwrap_or_else(|p| p.into_inner());
            ev.unwrap_or_default()
        });
        let sub = ev.entry(agent).or_default();
        let strategy = all[sub.index].clone();
        let v = if sub.ended.is_some() {
            Verdict {
                kind: VerdictKind::Exhausted,
                subtask: subtask.clone(),
                strategy: None,
                failures: allowed,
                allowed,
            }
        } else {
            Verdict::after_failure(sub, all, allowed, subtask.clone())
        };
        v.record(turn, strategy, Some(tool))?;
        drop(guard);
        if v.kind == VerdictKind::Exhausted {
            state.exhaust(turn, &subtask);
        }
        Ok(v)
    }
}

/// The subtask that ran out of strategies in `run`, if any.
pub(super) fn exhausted(run: &RunContext) -> Option<String> {
    match run.extensions().get::<State>() {
        Some(s) => s
            .exhausted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        // Not asked yet in this process: a resumed run's journal may hold the exhaustion.
        None => State::rebuilt(Resumed::of(run).as_deref(), &[])
            .exhausted
            .into_inner()
            .unwrap_or_else(|p| p.into_inner()),
    }
}
