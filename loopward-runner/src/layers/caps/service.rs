//! The caps policy.

use super::layer::{CapsConfig, OnCap};
use crate::journal::Resumed;
use crate::layers::from_fn::{layer_fn, FromFn, NextTurn};
use crate::layers::record;
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::LayerId;
use loopward_core::{
    AgentId, CapReachedDetail, CapsAllowDetail, FinishReason, LayerDetail, LayerVerdict, RunStatus,
    WallTimeDetail, WrappedUpDetail,
};
use std::collections::HashMap;
use std::sync::Mutex;

/// A turn service that ends the run at the configured caps.
pub type CapsService<S> = FromFn<CapsPolicy, S>;

/// The caps layer's policy: count the run's turns, hops and time; at a cap, stop the run (or
/// give one wrap-up turn with tools disabled first).
#[derive(Clone, Debug)]
pub struct CapsPolicy {
    pub(super) config: CapsConfig,
}

/// Per-run counts, kept in the run's extensions.
#[derive(Default)]
struct CapsState(Mutex<Counts>);

impl CapsState {
    /// The counts of a resumed run's finished turns (the unfinished one is counted when it runs
    /// again); zero for a new run. The wall-time cap counts from the resume.
    fn rebuilt(resumed: Option<&Resumed>) -> Self {
        let mut counts = Counts::default();
        for t in resumed.map_or(&[][..], Resumed::finished_turns) {
            counts.turns += 1;
            *counts.per_agent.entry(t.agent.clone()).or_insert(0) += 1;
            counts.hops += u32::from(t.handed_off);
        }
        Self(Mutex::new(counts))
    }
}

/// A run's counts so far (also replayed from a recorded run by `loopward-calibrate`).
#[derive(Default)]
pub struct Counts {
    /// Turns started.
    pub turns: u32,
    /// Turns started, per agent.
    pub per_agent: HashMap<AgentId, u32>,
    /// Handoffs that stood.
    pub hops: u32,
    /// When the first turn started (ms on the run's clock).
    pub started_ms: Option<u64>,
    wrapped_up: bool,
}

/// A cap that was hit: its label (`turns_per_run (3)`) and the figures.
pub struct Hit {
    /// The cap and its limit as configured: `turns_per_run (3)`, `wall_time (25s)`.
    pub cap: String,
    detail: LayerDetail,
}

impl Counts {
    /// The cap a turn of `agent` starting at `now_ms` would hit, if any.
    pub fn check(&self, c: &CapsConfig, agent: &AgentId, now_ms: u64) -> Option<Hit> {
        let hit = |name: &str, limit: u64, value: u64| Hit {
            cap: format!("{name} ({limit})"),
            detail: LayerDetail::CapReached(CapReachedDetail {
                cap: name.into(),
                limit,
                value,
            }),
        };
        if self.turns >= c.turns_per_run {
            return Some(hit(
                "turns_per_run",
                c.turns_per_run.into(),
                self.turns.into(),
            ));
        }
        if let Some(max) = c.turns_per_agent {
            let n = self.per_agent.get(agent).copied().unwrap_or(0);
            if n >= max {
                return Some(hit("turns_per_agent", max.into(), n.into()));
            }
        }
        if let Some(max) = c.handoff_hops {
            if self.hops > max {
                return Some(hit("handoff_hops", max.into(), self.hops.into()));
            }
        }
        if let (Some(limit), Some(start)) = (c.wall_time, self.started_ms) {
            let elapsed = now_ms.saturating_sub(start);
            let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
            if elapsed >= limit_ms {
                // The label names the key as written (`wall_time (25s)`); the figures are in ms.
                return Some(Hit {
                    cap: format!("wall_time ({})", crate::duration::format(limit)),
                    detail: LayerDetail::WallTime(WallTimeDetail {
                        limit_ms,
                        value_ms: elapsed,
                    }),
                });
            }
        }
        None
    }
}

layer_fn!(CapsPolicy, turn(TurnRequest) -> Result<TurnOutcome, TurnError>);

impl CapsPolicy {
    async fn turn(self, req: TurnRequest, next: NextTurn) -> Result<TurnOutcome, TurnError> {
        let Self { config } = self;
        let turn = req.turn.clone();
        let run = turn.run().clone();
        // Made once per run: after that, one lookup (the journal is not asked again).
        let state = match run.extensions().get::<CapsState>() {
            Some(state) => state,
            None => {
                let resumed = Resumed::of(&run);
                run.extensions()
                    .get_or_insert_with(|| CapsState::rebuilt(resumed.as_deref()))
            }
        };
        let now = run.clock().now_millis();
        let (hit, wrapped) = {
            let mut counts = state.0.lock().unwrap_or_else(|p| p.into_inner());
            counts.started_ms.get_or_insert(now);
            let hit = counts.check(&config, turn.agent(), now);
            if hit.is_none() || (config.on_cap == OnCap::WrapUp && !counts.wrapped_up) {
                counts.turns += 1;
                *counts.per_agent.entry(turn.agent().clone()).or_insert(0) += 1;
            }
            (hit, counts.wrapped_up)
        };
        match hit {
            None => {
                let detail = {
                    let counts = state.0.lock().unwrap_or_else(|p| p.into_inner());
                    LayerDetail::CapsAllow(CapsAllowDetail {
                        hops: counts.hops,
                        turn: counts.turns,
                        turns_per_run: config.turns_per_run,
                    })
                };
                record::decision(&turn, LayerId::Caps, LayerVerdict::Allow, detail)?;
            }
            Some(hit) if config.on_cap == OnCap::WrapUp && !wrapped => {
                record::decision(&turn, LayerId::Caps, LayerVerdict::WrapUp, hit.detail)?;
                state.0.lock().unwrap_or_else(|p| p.into_inner()).wrapped_up = true;
                turn.state().tools_disabled = true;
                let outcome = next.run(req).await?;
                record::decision(
                    &turn,
                    LayerId::Caps,
                    LayerVerdict::CapReached,
                    LayerDetail::WrappedUp(WrappedUpDetail {
                        cap: hit.cap.clone(),
                        text: outcome.text,
                    }),
                )?;
                return Err(TurnError::Stop(RunStatus::CapReached { cap: hit.cap }));
            }
            Some(hit) => {
                record::decision(&turn, LayerId::Caps, LayerVerdict::CapReached, hit.detail)?;
                return Err(TurnError::Stop(RunStatus::CapReached { cap: hit.cap }));
            }
        }
        let outcome = next.run(req).await?;
        if outcome.finish == FinishReason::StepCap {
            // The agent's own cap may be lower than the run's: name the one reached.
            let (limit, steps) = {
                let state = turn.state();
                (
                    state.step_limit.unwrap_or(config.steps_per_turn),
                    state.steps,
                )
            };
            let cap = format!("steps_per_turn ({limit})");
            record::decision(
                &turn,
                LayerId::Caps,
                LayerVerdict::CapReached,
                LayerDetail::CapReached(CapReachedDetail {
                    cap: "steps_per_turn".into(),
                    limit: limit.into(),
                    value: steps.into(),
                }),
            )?;
            return Err(TurnError::Stop(RunStatus::CapReached { cap }));
        }
        if outcome.handoff.is_some() {
            state.0.lock().unwrap_or_else(|p| p.into_inner()).hops += 1;
        }
        Ok(outcome)
    }
}
