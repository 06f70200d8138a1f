//! The turn layer that ends a run whose subtask ran out of strategies.

use super::tracker::{exhausted, ClassJump};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use loopward_core::RunStatus;
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

/// Ends the run `Exhausted` after the turn in which a subtask ran out of strategies (and
/// refuses later turns of the run).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassJumpLayer;

impl ClassJump {
    /// The turn layer that ends the run when a subtask is exhausted.
    pub fn layer(&self) -> ClassJumpLayer {
        ClassJumpLayer
    }
}

impl<S> tower::Layer<S> for ClassJumpLayer {
    type Service = ClassJumpService<S>;
    fn layer(&self, inner: S) -> ClassJumpService<S> {
        ClassJumpService { inner }
    }
}

/// See [`ClassJumpLayer`].
#[derive(Clone, Debug)]
pub struct ClassJumpService<S> {
    inner: S,
}

impl<S> Service<TurnRequest> for ClassJumpService<S>
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
        Box::pin(async move {
            let run = req.turn.run().clone();
            if exhausted(&run).is_some() {
                return Err(TurnError::Stop(RunStatus::Exhausted));
            }
            let turn = req.turn.clone();
            let result = inner.oneshot(req).await;
            // Exhausted in this turn: the runner records the turn (its words, its tokens) and
            // ends the run from the turn state. Exhausted some other way: end it here.
            if exhausted(&run).is_some() && turn.state().run_ends.is_none() {
                return Err(TurnError::Stop(RunStatus::Exhausted));
            }
            result
        })
    }
}
