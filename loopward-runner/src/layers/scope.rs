//! The turn a model or tool call belongs to, for layers below the turn that want to record
//! their decisions (model calls do not carry their turn).

use crate::context::TurnContext;
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

tokio::task_local! {
    static CURRENT_TURN: TurnContext;
}

/// The turn being run by the current task, when a [`TurnScopeLayer`] wraps the agent.
pub fn current_turn() -> Option<TurnContext> {
    CURRENT_TURN.try_with(Clone::clone).ok()
}

/// Makes the turn visible to model layers ([`current_turn`]) while the agent runs it.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnScopeLayer;

impl<S> tower::Layer<S> for TurnScopeLayer {
    type Service = TurnScope<S>;
    fn layer(&self, inner: S) -> TurnScope<S> {
        TurnScope { inner }
    }
}

/// See [`TurnScopeLayer`].
#[derive(Clone, Debug)]
pub struct TurnScope<S> {
    inner: S,
}

impl<S> Service<TurnRequest> for TurnScope<S>
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
        let turn = req.turn.clone();
        Box::pin(CURRENT_TURN.scope(turn, inner.oneshot(req)))
    }
}
