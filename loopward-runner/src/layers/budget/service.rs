//! The budget services.

use super::layer::Limits;
use crate::context::{RunContext, TurnContext};
use crate::layers::{record, scope};
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use loopward_core::{LayerVerdict, Refusal, RunStatus, Usage};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

/// What a run has spent, in its extensions.
#[derive(Default)]
struct Spent(Mutex<Totals>);

#[derive(Default, Clone)]
struct Totals {
    usage: Usage,
    cost_micros: u64,
    unpriced: Option<String>,
}

impl Totals {
    /// The budget that is spent, if one is: its label and figures.
    fn over(&self, limits: &Limits) -> Option<(String, serde_json::Value)> {
        let figures = |budget: &str, limit: u64, used: u64| {
            json!({"budget": budget, "limit": limit, "used": used, "usage": self.usage,
                   "cost_micros": self.cost_micros})
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

fn totals(run: &RunContext) -> Totals {
    let spent = run.extensions().get_or_default::<Spent>();
    let t = spent.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    t
}

/// See [`BudgetLayer`](super::BudgetLayer).
#[derive(Clone, Debug)]
pub struct BudgetService<S> {
    inner: S,
    limits: Arc<Limits>,
}

impl<S> BudgetService<S> {
    pub(super) fn new(inner: S, limits: Arc<Limits>) -> Self {
        Self { inner, limits }
    }
}

fn exceeded(turn: &TurnContext, limits: &Limits) -> Result<(), TurnError> {
    if let Some((label, detail)) = totals(turn.run()).over(limits) {
        record::decision(turn, "budget", LayerVerdict::BudgetExceeded, detail)?;
        return Err(TurnError::Stop(RunStatus::BudgetExceeded { budget: label }));
    }
    Ok(())
}

impl<S> Service<TurnRequest> for BudgetService<S>
where
    S: Service<TurnRequest, Response = TurnOutcome, Error = TurnError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = TurnOutcome;
    type Error = TurnError;
    type Future = BoxFuture<'static, Result<TurnOutcome, TurnError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TurnError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: TurnRequest) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits.clone();
        Box::pin(async move {
            let turn = req.turn.clone();
            exceeded(&turn, &limits)?;
            let result = tower::Layer::layer(&scope::TurnScopeLayer, inner)
                .oneshot(req)
                .await;
            // A budget spent mid-turn shows as the meter's refusal; either way the run ends here.
            exceeded(&turn, &limits)?;
            result
        })
    }
}

/// See [`BudgetMeterLayer`](super::BudgetMeterLayer).
#[derive(Clone, Debug)]
pub struct BudgetMeter<S> {
    inner: S,
    limits: Arc<Limits>,
}

impl<S> BudgetMeter<S> {
    pub(super) fn new(inner: S, limits: Arc<Limits>) -> Self {
        Self { inner, limits }
    }
}

impl<S> Service<ChatRequest> for BudgetMeter<S>
where
    S: Service<ChatRequest, Response = ChatResponse, Error = ModelError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ChatRequest) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.limits.clone();
        Box::pin(async move {
            let Some(turn) = scope::current_turn() else {
                // Outside a budgeted turn there is no run to charge: fail closed.
                return Err(ModelError::Refused(Refusal::new(
                    "budget",
                    "this model call is not inside a budgeted turn",
                    "wrap the agent's turn service in the BudgetLayer that made this meter",
                )));
            };
            if let Some((label, _)) = totals(turn.run()).over(&limits) {
                return Err(ModelError::Refused(Refusal::new(
                    "budget",
                    format!("the run's budget is spent: {label}"),
                    "",
                )));
            }
            let reply = inner.oneshot(req).await?;
            let spent = turn.run().extensions().get_or_default::<Spent>();
            let mut t = spent.0.lock().unwrap_or_else(|p| p.into_inner());
            t.usage += reply.usage;
            match limits.prices.get(&reply.model) {
                Some(price) => {
                    t.cost_micros = t
                        .cost_micros
                        .saturating_add(price.cost_micros(&reply.usage));
                }
                None if limits.max_cost_micros.is_some() => {
                    t.unpriced.get_or_insert_with(|| reply.model.clone());
                }
                None => {}
            }
            Ok(reply)
        })
    }
}
