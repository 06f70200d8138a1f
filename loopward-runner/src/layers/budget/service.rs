//! The budget services.

use super::layer::Limits;
use crate::context::{RunContext, TurnContext};
use crate::journal::Resumed;
use crate::layers::record;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use loopward_core::{LayerVerdict, Refusal, RunStatus, Usage};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

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

impl Totals {
    /// Counts one model call's reply.
    fn add(&mut self, limits: &Limits, model: &str, usage: &Usage) {
        self.usage += *usage;
        match limits.prices.get(model) {
            Some(price) => {
                self.cost_micros = self.cost_micros.saturating_add(price.cost_micros(usage));
            }
            None if limits.max_cost_micros.is_some() => {
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

fn totals(run: &RunContext, limits: &Limits) -> Totals {
    let spent = spent(run, limits);
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
    if let Some((label, detail)) = totals(turn.run(), limits).over(limits) {
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
            let result = inner.oneshot(req).await;
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
            let Some(turn) = TurnContext::of(&req).cloned() else {
                // A call that carries no turn has no run to charge: fail closed.
                return Err(ModelError::Refused(Refusal::new(
                    "budget",
                    "this model call carries no turn (ChatRequest::turn is empty), so there is no run to charge it to",
                    "make model calls through an LlmAgent, or set the request's turn with TurnContext::slot",
                )));
            };
            if let Some((label, _)) = totals(turn.run(), &limits).over(&limits) {
                return Err(ModelError::Refused(Refusal::new(
                    "budget",
                    format!("the run's budget is spent: {label}"),
                    "",
                )));
            }
            let reply = inner.oneshot(req).await?;
            let spent = spent(turn.run(), &limits);
            spent.0.lock().unwrap_or_else(|p| p.into_inner()).add(
                &limits,
                &reply.model,
                &reply.usage,
            );
            Ok(reply)
        })
    }
}
