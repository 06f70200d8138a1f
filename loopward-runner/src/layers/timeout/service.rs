//! The timeout services.

use crate::context::TurnContext;
use crate::layers::record;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use futures::future::BoxFuture;
use loopward_core::{LayerVerdict, RunStatus};
use serde_json::json;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Service, ServiceExt};

macro_rules! timeout_service {
    ($name:ident, $limit:ty) => {
        /// See the layer of the same name.
        #[derive(Clone, Debug)]
        pub struct $name<S> {
            inner: S,
            limit: Option<$limit>,
        }

        impl<S> $name<S> {
            pub(super) fn new(inner: S, limit: Option<$limit>) -> Self {
                Self { inner, limit }
            }

            fn take(&mut self) -> S
            where
                S: Clone,
            {
                let clone = self.inner.clone();
                std::mem::replace(&mut self.inner, clone)
            }
        }
    };
}

timeout_service!(ModelTimeout, Duration);
timeout_service!(ToolTimeout, Duration);
timeout_service!(TurnTimeout, Duration);

impl<S> Service<ChatRequest> for ModelTimeout<S>
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
        let limit = self.limit;
        let inner = self.take();
        Box::pin(async move {
            let Some(limit) = limit else {
                return inner.oneshot(req).await;
            };
            let agent = req.agent.clone();
            let turn = TurnContext::of(&req).cloned();
            match tokio::time::timeout(limit, inner.oneshot(req)).await {
                Ok(r) => r,
                Err(_) => {
                    // A call that carries no turn times out the same, unrecorded: no ledger.
                    if let Some(turn) = turn {
                        record::decision(
                            &turn,
                            "timeout",
                            LayerVerdict::ModelCallTimedOut,
                            json!({"agent": agent, "limit_ms": limit.as_millis()}),
                        )
                        .map_err(ModelError::Audit)?;
                    }
                    Err(ModelError::Timeout(limit))
                }
            }
        })
    }
}

impl<S> Service<ToolInvocation> for ToolTimeout<S>
where
    S: Service<ToolInvocation, Response = ToolOutput, Error = ToolError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, inv: ToolInvocation) -> Self::Future {
        let limit = self.limit;
        let inner = self.take();
        Box::pin(async move {
            let Some(limit) = limit else {
                return inner.oneshot(inv).await;
            };
            let turn = inv.turn.clone();
            let detail = json!({"call_id": inv.call.id, "tool": inv.call.name, "limit_ms": limit.as_millis()});
            match tokio::time::timeout(limit, inner.oneshot(inv)).await {
                Ok(r) => r,
                Err(_) => {
                    record::decision(&turn, "timeout", LayerVerdict::ToolCallTimedOut, detail)
                        .map_err(ToolError::Audit)?;
                    Err(ToolError::Timeout {
                        secs: limit.as_secs(),
                    })
                }
            }
        })
    }
}

impl<S> Service<TurnRequest> for TurnTimeout<S>
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
        let limit = self.limit;
        let inner = self.take();
        Box::pin(async move {
            let Some(limit) = limit else {
                return inner.oneshot(req).await;
            };
            let turn = req.turn.clone();
            match tokio::time::timeout(limit, inner.oneshot(req)).await {
                Ok(r) => r,
                Err(_) => {
                    record::decision(
                        &turn,
                        "timeout",
                        LayerVerdict::TurnTimedOut,
                        json!({"limit_ms": limit.as_millis()}),
                    )?;
                    Err(TurnError::Stop(RunStatus::CapReached {
                        cap: format!("timeout.turn ({})", crate::duration::format(limit)),
                    }))
                }
            }
        })
    }
}
