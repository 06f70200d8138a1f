//! The budget policies.

use super::layer::Limits;
use crate::context::{RunContext, TurnContext};
use crate::journal::Resumed;
use crate::layers::from_fn::{layer_fn, FromFn, NextModel, NextTurn};
use crate::layers::record;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::LayerId;
use loopward_core::{
    BudgetExceededDetail, LayerDetail, LayerVerdict, Refusal, ReportedCostDetail, RunStatus, Usage,
};
use std::sync::{Arc, Mutex};

/// What a run has spent, in its extensions.
struct Spent(Mutex<Totals>);

#[derive(Default, Clone)]
struct Totals {
    usage: Usage,
    cost_micros: u64,
    unpriced: Option<String>,
}

impl Totals {
    /// The budget that is spent, if one is: its label and figures.
    fn over(&self, limits: &Limits) -> Option<(String, LayerDetail)> {
        let figures = |budget: &str, limit: u64, used: u64| {
            LayerDetail::BudgetExceeded(BudgetExceededDetail {
                budget: budget.into(),
                cost_micros: self.cost_micros,
                limit,
                usage: self.usage,
                used,
            })
        };
        if let Some(max) = limits.max_tokens {
            if self.usage.total() >= max {
                let label = format!("tokens (used {} of {max})", self.usage.total());
                return Some((label, figures("tokens", max, self.usage.total())));
            }
        }
        if let Some(max) = limits.max_cost_micros {
            if let Some(model) = &self.unpriced {
                let label = format!("cost (model {model:?} has no price)");
                return Some((label, figures("cost", max, self.cost_micros)));
            }
            if self.cost_micros >= max {
                let label = format!("cost (used {} of {max} micro-dollars)", self.cost_micros);
                return Some((label, figures("cost", max, self.cost_micros)));
            }
        }
        None
    }
}

impl Totals {
    /// Counts one model call's reply.
    fn add(&mut self, limits: &Limits, model: &str, usage: &Usage) {
        self.usage += *usage;
        match limits.prices.get(model) {
            Some(price) => {
                self.cost_micros = self.cost_micros.saturating_add(price.cost_micros(usage));
            }
            None if limits.max_cost_micros.is_some() && !limits.reported => {
                self.unpriced.get_or_insert_with(|| model.to_string());
            }
            None => {}
        }
    }
}

/// What the run has spent: for a resumed run, from every model call its journal holds first.
fn spent(run: &RunContext, limits: &Limits) -> Arc<Spent> {
    let resumed = Resumed::of(run);
    run.extensions().get_or_insert_with(|| {
        let mut t = Totals::default();
        for (model, usage) in resumed.as_deref().map_or(&[][..], Resumed::model_calls) {
            t.add(limits, model, usage);
        }
        Spent(Mutex::new(t))
    })
}

/// Cost a run's work reported itself (a CLI agent's sessions), in micro-dollars: for a resumed
/// run, from every reported cost its journal holds first.
struct Reported(Mutex<u64>);

fn reported(run: &RunContext) -> Arc<Reported> {
    let resumed = Resumed::of(run);
    run.extensions().get_or_insert_with(|| {
        let settled = resumed.as_deref().map_or(0, |r| {
            r.decisions(&LayerId::Budget)
                .filter_map(|d| d.decision.detail.as_reported_cost())
                .map(|r| r.reported_cost_micros)
                .fold(0u64, u64::saturating_add)
        });
        Reported(Mutex::new(settled))
    })
}

/// Charges `cost_micros` that work of `turn` reported itself (a coding CLI's session reports
/// what it cost) to the run's cost budget, and records it (`layer_decision` `budget`,
/// `observed`): the turn layer ends the run after the turn once the budget is spent. Reported
/// cost needs no `[budget.prices]`.
pub fn charge_reported(
    turn: &TurnContext,
    cost_micros: u64,
) -> Result<(), loopward_core::AuditError> {
    let r = reported(turn.run());
    let total = {
        let mut n = r.0.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_add(cost_micros);
        *n
    };
    record::decision(
        turn,
        LayerId::Budget,
        LayerVerdict::Observed,
        LayerDetail::ReportedCost(ReportedCostDetail {
            reported_cost_micros: cost_micros,
            reported_total_micros: total,
        }),
    )
}

fn totals(run: &RunContext, limits: &Limits) -> Totals {
    let spent = spent(run, limits);
    let mut t = spent.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let extra = *reported(run).0.lock().unwrap_or_else(|p| p.into_inner());
    t.cost_micros = t.cost_micros.saturating_add(extra);
    t
}

/// See [`BudgetLayer`](super::BudgetLayer).
pub type BudgetService<S> = FromFn<BudgetPolicy, S>;

/// See [`BudgetMeterLayer`](super::BudgetMeterLayer).
pub type BudgetMeter<S> = FromFn<BudgetPolicy, S>;

/// The budget's policy: at a turn, no turn once the run's budget is spent (and the run ends
/// after the turn that spent it); at a model call, charge the call's reply to the run of the
/// turn the request carries, and refuse a call once the budget is spent.
#[derive(Clone, Debug)]
pub struct BudgetPolicy {
    pub(super) limits: Arc<Limits>,
}

fn exceeded(turn: &TurnContext, limits: &Limits) -> Result<(), TurnError> {
    if let Some((label, detail)) = totals(turn.run(), limits).over(limits) {
        record::decision(turn, LayerId::Budget, LayerVerdict::BudgetExceeded, detail)?;
        return Err(TurnError::Stop(RunStatus::BudgetExceeded { budget: label }));
    }
    Ok(())
}

layer_fn!(BudgetPolicy, turn(TurnRequest) -> Result<TurnOutcome, TurnError>);

impl BudgetPolicy {
    async fn turn(self, req: TurnRequest, next: NextTurn) -> Result<TurnOutcome, TurnError> {
        let Self { limits } = self;
        let turn = req.turn.clone();
        exceeded(&turn, &limits)?;
        let result = next.run(req).await;
        // A budget spent mid-turn shows as the meter's refusal; either way the run ends here.
        exceeded(&turn, &limits)?;
        result
    }
}

layer_fn!(BudgetPolicy, model_call(ChatRequest) -> Result<ChatResponse, ModelError>);

impl BudgetPolicy {
    async fn model_call(
        self,
        req: ChatRequest,
        next: NextModel,
    ) -> Result<ChatResponse, ModelError> {
        let Self { limits } = self;
        let Some(turn) = TurnContext::of(&req).cloned() else {
            // A call that carries no turn has no run to charge: fail closed.
            return Err(ModelError::Refused(Refusal::new(
                &LayerId::Budget,
                "this model call carries no turn (ChatRequest::turn is empty), so there is no run to charge it to",
                "make model calls through an LlmAgent, or set the request's turn with TurnContext::slot",
            )));
        };
        if let Some((label, _)) = totals(turn.run(), &limits).over(&limits) {
            return Err(ModelError::Refused(Refusal::new(
                &LayerId::Budget,
                format!("the run's budget is spent: {label}"),
                "",
            )));
        }
        let reply = next.run(req).await?;
        let spent = spent(turn.run(), &limits);
        spent
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&limits, &reply.model, &reply.usage);
        Ok(reply)
    }
}
