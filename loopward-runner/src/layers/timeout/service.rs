//! The timeout policy.

use crate::context::TurnContext;
use crate::layers::from_fn::{layer_fn, FromFn, NextModel, NextTool, NextTurn};
use crate::layers::record;
use crate::model::{ChatRequest, ChatResponse, ModelError};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::LayerId;
use loopward_core::{LayerDetail, LayerVerdict, RunStatus, TimeoutDetail};
use std::time::Duration;

/// A limit in whole milliseconds, as its detail records it.
fn millis(limit: Duration) -> u64 {
    u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)
}

/// A time limit (`None`: none), the policy of the three timeout layers: past it, the call is
/// dropped, the decision recorded on its turn, and the caller told.
#[derive(Clone, Copy, Debug)]
pub struct TimeoutPolicy {
    pub(super) limit: Option<Duration>,
}

/// See [`ModelTimeoutLayer`](super::ModelTimeoutLayer).
pub type ModelTimeout<S> = FromFn<TimeoutPolicy, S>;
/// See [`ToolTimeoutLayer`](super::ToolTimeoutLayer).
pub type ToolTimeout<S> = FromFn<TimeoutPolicy, S>;
/// See [`TurnTimeoutLayer`](super::TurnTimeoutLayer).
pub type TurnTimeout<S> = FromFn<TimeoutPolicy, S>;

layer_fn!(TimeoutPolicy, model_call(ChatRequest) -> Result<ChatResponse, ModelError>);

impl TimeoutPolicy {
    async fn model_call(
        self,
        req: ChatRequest,
        next: NextModel,
    ) -> Result<ChatResponse, ModelError> {
        let Some(limit) = self.limit else {
            return next.run(req).await;
        };
        let agent = req.agent.clone();
        let turn = TurnContext::of(&req).cloned();
        match tokio::time::timeout(limit, next.run(req)).await {
            Ok(r) => r,
            Err(_) => {
                // A call that carries no turn times out the same, unrecorded: no ledger.
                if let Some(turn) = turn {
                    record::decision(
                        &turn,
                        LayerId::Timeout,
                        LayerVerdict::ModelCallTimedOut,
                        LayerDetail::Timeout(TimeoutDetail {
                            agent: Some(agent),
                            call_id: None,
                            limit_ms: millis(limit),
                            tool: None,
                        }),
                    )
                    .map_err(ModelError::Audit)?;
                }
                Err(ModelError::Timeout(limit))
            }
        }
    }
}

layer_fn!(TimeoutPolicy, tool_call(ToolInvocation) -> Result<ToolOutput, ToolError>);

impl TimeoutPolicy {
    async fn tool_call(self, inv: ToolInvocation, next: NextTool) -> Result<ToolOutput, ToolError> {
        let Some(limit) = self.limit else {
            return next.run(inv).await;
        };
        let turn = inv.turn.clone();
        let detail = LayerDetail::Timeout(TimeoutDetail {
            agent: None,
            call_id: Some(inv.call.id.clone()),
            limit_ms: millis(limit),
            tool: Some(inv.call.name.clone()),
        });
        match tokio::time::timeout(limit, next.run(inv)).await {
            Ok(r) => r,
            Err(_) => {
                record::decision(
                    &turn,
                    LayerId::Timeout,
                    LayerVerdict::ToolCallTimedOut,
                    detail,
                )
                .map_err(ToolError::Audit)?;
                Err(ToolError::Timeout {
                    secs: limit.as_secs(),
                })
            }
        }
    }
}

layer_fn!(TimeoutPolicy, turn(TurnRequest) -> Result<TurnOutcome, TurnError>);

impl TimeoutPolicy {
    async fn turn(self, req: TurnRequest, next: NextTurn) -> Result<TurnOutcome, TurnError> {
        let Some(limit) = self.limit else {
            return next.run(req).await;
        };
        let turn = req.turn.clone();
        match tokio::time::timeout(limit, next.run(req)).await {
            Ok(r) => r,
            Err(_) => {
                record::decision(
                    &turn,
                    LayerId::Timeout,
                    LayerVerdict::TurnTimedOut,
                    LayerDetail::Timeout(TimeoutDetail {
                        agent: None,
                        call_id: None,
                        limit_ms: millis(limit),
                        tool: None,
                    }),
                )?;
                Err(TurnError::Stop(RunStatus::CapReached {
                    cap: format!("timeout.turn ({})", crate::duration::format(limit)),
                }))
            }
        }
    }
}
