//! A layer that is its policy and nothing else: [`from_fn`] turns an async function of the
//! request and the [`Next`] service into a `tower::Layer`, for any of the three boundaries
//! (turn, model call, tool call). axum's `middleware::from_fn` is the precedent.
//!
//! A closure is the policy of a one-off layer. A built-in layer, whose service type must have a
//! name, is a struct that implements [`LayerFn`] (closures implement it too), so
//! `RepeatService<S>` is `FromFn<RepeatPolicy, S>` and `RepeatLayer` is
//! `FromFnLayer<RepeatPolicy>`: the layer is its policy, `FromFnLayer` the only `Layer` impl
//! and `FromFn` the only `Service` impl around it.
//!
//! **The readiness idiom** (one for every layer, `from_fn` or not). `poll_ready` polls the
//! inner service; `call` takes *that* service (the one polled ready) and leaves a clone in its
//! place, and [`Next::run`] calls it without polling again — as tower's own middleware does. A
//! layer is therefore exactly as ready as what it wraps: it never waits itself in `poll_ready`
//! (a layer that waits — the rate limit — waits inside the call, where a dropped call gives its
//! place back). The agents, the tool executor and the model backends are leaves, always ready
//! ([`leaf_service!`](crate::leaf_service)), so a whole stack (`layers::stack`, a `Box*Service`)
//! is ready at once and callers may use `oneshot`.
//!
//! **State across a resume.** A layer that counts per run keeps its count on the run
//! (`req.turn.run().extensions()`), records every decision under its own name, and on
//! `run --resume` starts from what it had settled, as the built-in layers do: its first
//! `get_or_insert_with` builds the state from
//! [`journal::settled_decisions`](crate::journal::settled_decisions) (`examples/custom_layer.rs`).
//!
//! ```
//! use loopward_core::{AuditEvent, LayerVerdict, RunStatus};
//! use loopward_runner::layers::from_fn::{from_fn, NextTurn};
//! use loopward_runner::{TurnError, TurnOutcome, TurnRequest};
//! use serde_json::json;
//!
//! // Stop any turn of the agent "intern": record the decision first, then refuse.
//! let no_interns = from_fn(|req: TurnRequest, next: NextTurn| async move {
//!     if req.turn.agent().as_str() == "intern" {
//!         req.turn.record_owned(AuditEvent::LayerDecision {
//!             layer: "no_interns".into(),
//!             decision: LayerVerdict::Stopped,
//!             detail: json!({}).into(),
//!         })?;
//!         return Err(TurnError::Stop(RunStatus::Stopped { reason: "interns do not act".into() }));
//!     }
//!     next.run(req).await
//! });
//! // Stack it like any layer: `tower::Layer::layer(&no_interns, agent)`.
//! # let _ = tower::Layer::layer(&no_interns, tower::service_fn(|_: TurnRequest| async {
//! #     Err::<TurnOutcome, TurnError>(TurnError::Stop(RunStatus::Stopped { reason: "x".into() }))
//! # }));
//! ```

use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use std::future::Future;
use std::task::{Context, Poll};
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service};

/// A layer from an async function `f(request, next)`; see the [module docs](self).
pub fn from_fn<F>(f: F) -> FromFnLayer<F> {
    FromFnLayer { f }
}

/// The layer [`from_fn`] makes.
#[derive(Clone, Copy, Debug, Default)]
pub struct FromFnLayer<F> {
    f: F,
}

impl<F> FromFnLayer<F> {
    /// The policy each service this layer makes gets a clone of.
    pub fn policy(&self) -> &F {
        &self.f
    }
}

impl<S, F: Clone> Layer<S> for FromFnLayer<F> {
    type Service = FromFn<F, S>;

    fn layer(&self, inner: S) -> FromFn<F, S> {
        FromFn {
            f: self.f.clone(),
            inner,
        }
    }
}

/// The service [`FromFnLayer`] wraps around `S`.
#[derive(Clone, Copy, Debug)]
pub struct FromFn<F, S> {
    f: F,
    inner: S,
}

/// The rest of the stack, already polled ready: call it once with [`Next::run`], or drop it to
/// refuse the request. [`NextTurn`], [`NextModel`] and [`NextTool`] name it per boundary.
pub struct Next<R, T, E> {
    inner: BoxCloneSyncService<R, T, E>,
}

impl<R, T, E> std::fmt::Debug for Next<R, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next").finish_non_exhaustive()
    }
}

impl<R, T, E> Next<R, T, E> {
    /// Passes `req` on to the inner service (the one that was polled ready).
    pub fn run(mut self, req: R) -> impl Future<Output = Result<T, E>> {
        self.inner.call(req)
    }
}

/// The rest of a turn stack.
pub type NextTurn = Next<TurnRequest, TurnOutcome, TurnError>;
/// The rest of a model-call stack.
pub type NextModel = Next<ChatRequest, ChatResponse, ModelError>;
/// The rest of a tool-call stack.
pub type NextTool = Next<ToolInvocation, ToolOutput, ToolError>;

/// A layer's policy: what it does with one request, given the rest of the stack. Implemented
/// by every `FnMut(R, Next) -> impl Future` closure, and by the built-in layers' policy structs
/// (so their services have names).
pub trait LayerFn<R, T, E> {
    /// The future of one call.
    type Future: Future<Output = Result<T, E>>;

    /// Decides on `req`: pass it on with [`Next::run`], or answer without calling `next`.
    fn call(&mut self, req: R, next: Next<R, T, E>) -> Self::Future;
}

impl<F, R, T, E, Fut> LayerFn<R, T, E> for F
where
    F: FnMut(R, Next<R, T, E>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Future = Fut;

    fn call(&mut self, req: R, next: Next<R, T, E>) -> Fut {
        self(req, next)
    }
}

/// Implements [`LayerFn`] for a built-in policy at one boundary: each call runs the policy's
/// `async fn $method(self, req, next)` on a clone of it (a policy is cheap to clone; what it
/// counts lives on the run). Its future is boxed, so the service's type has a name.
macro_rules! layer_fn {
    ($policy:ty, $method:ident($req:ty) -> Result<$res:ty, $err:ty>) => {
        impl $crate::layers::from_fn::LayerFn<$req, $res, $err> for $policy {
            type Future = futures::future::BoxFuture<'static, Result<$res, $err>>;

            fn call(
                &mut self,
                req: $req,
                next: $crate::layers::from_fn::Next<$req, $res, $err>,
            ) -> Self::Future {
                Box::pin(self.clone().$method(req, next))
            }
        }
    };
}
pub(crate) use layer_fn;

impl<F, S, R> Service<R> for FromFn<F, S>
where
    S: Service<R> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    F: LayerFn<R, S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = F::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> F::Future {
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let inner = BoxCloneSyncService::new(ready);
        self.f.call(req, Next { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tower::ServiceExt;

    #[tokio::test]
    async fn the_policy_runs_around_the_inner_service_and_can_refuse() {
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let inner = tower::service_fn(move |n: u32| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<u32, String>(n * 2) }
        });
        let layer = from_fn(|n: u32, next: Next<u32, u32, String>| async move {
            if n > 10 {
                return Err(format!("{n} is too big"));
            }
            next.run(n).await.map(|m| m + 1)
        });
        let svc = layer.layer(inner);
        assert_eq!(svc.clone().oneshot(4).await, Ok(9));
        assert_eq!(svc.oneshot(11).await, Err("11 is too big".into()));
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1,
            "a refused request never reaches the inner service"
        );
    }

    #[test]
    fn the_built_in_tool_layers_are_exactly_as_ready_as_what_they_wrap() {
        use crate::gates::{Policy, PolicyConfig, PolicyLayer};
        use crate::layers::{repeat, stopgate, timeout};
        // A tool service that is never ready: a layer that answers ready over it would call a
        // service that did not say it could take the call.
        #[derive(Clone)]
        struct NeverReady;
        impl Service<ToolInvocation> for NeverReady {
            type Response = ToolOutput;
            type Error = ToolError;
            type Future = std::future::Pending<Result<ToolOutput, ToolError>>;
            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
                Poll::Pending
            }
            fn call(&mut self, _: ToolInvocation) -> Self::Future {
                std::future::pending()
            }
        }
        fn pending<S: Service<ToolInvocation>>(mut s: S) -> bool {
            let waker = futures::task::noop_waker();
            s.poll_ready(&mut Context::from_waker(&waker)).is_pending()
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = crate::Workspace::new(dir.path()).unwrap();
        let policy = Policy::from_config(&PolicyConfig::default(), ws).unwrap();
        let repeat = repeat::RepeatLayer::new(repeat::RepeatConfig::default()).unwrap();
        let gates = stopgate::StopGates::new(&[]).unwrap();
        let timeouts = timeout::Timeouts::new(timeout::TimeoutConfig::default()).unwrap();
        assert!(pending(PolicyLayer::new(policy).layer(NeverReady)));
        assert!(pending(repeat.layer(NeverReady)));
        assert!(pending(gates.tool_layer().layer(NeverReady)));
        assert!(pending(timeouts.tool_layer().layer(NeverReady)));
    }

    #[tokio::test]
    async fn next_calls_the_service_that_was_polled_ready() {
        // A service that is ready once: polling it a second time would never finish.
        #[derive(Clone)]
        struct ReadyOnce(bool);
        impl Service<()> for ReadyOnce {
            type Response = ();
            type Error = ();
            type Future = std::future::Ready<Result<(), ()>>;
            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
                if std::mem::replace(&mut self.0, false) {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            }
            fn call(&mut self, _: ()) -> Self::Future {
                std::future::ready(Ok(()))
            }
        }
        let svc = from_fn(|r: (), next: Next<(), (), ()>| next.run(r)).layer(ReadyOnce(true));
        let done = tokio::time::timeout(std::time::Duration::from_secs(5), svc.oneshot(())).await;
        assert_eq!(done.expect("no second poll"), Ok(()));
    }
}
