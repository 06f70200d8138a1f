//! The tool layer that counts failed tool results toward class-jump, reported or not.

use super::tracker::ClassJump;
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

/// Counts each failed result (an error result, a failure, a timeout) of a counted tool as a
/// failed attempt of the caller's current strategy, and tells the model the verdict in the
/// same result. Refusals by gates are not attempts and are not counted.
#[derive(Clone, Debug)]
pub struct EvidenceLayer {
    tracker: ClassJump,
}

impl ClassJump {
    /// The tool layer that counts failed results of the configured tools
    /// (`count_failed_tools`).
    pub fn evidence_layer(&self) -> EvidenceLayer {
        EvidenceLayer {
            tracker: self.clone(),
        }
    }
}

impl<S> tower::Layer<S> for EvidenceLayer {
    type Service = EvidenceService<S>;
    fn layer(&self, inner: S) -> EvidenceService<S> {
        EvidenceService {
            inner,
            tracker: self.tracker.clone(),
        }
    }
}

/// See [`EvidenceLayer`].
#[derive(Clone, Debug)]
pub struct EvidenceService<S> {
    inner: S,
    tracker: ClassJump,
}

impl<S> Service<ToolInvocation> for EvidenceService<S>
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
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let tracker = self.tracker.clone();
        Box::pin(async move {
            let turn = inv.turn.clone();
            let tool = inv.call.name.clone();
            let result = inner.oneshot(inv).await;
            if !tracker.counts(&tool) {
                return result;
            }
            let failed = match &result {
                Ok(out) => out.is_error,
                Err(ToolError::Failed(_) | ToolError::Timeout { .. }) => true,
                Err(_) => false,
            };
            if !failed {
                return result;
            }
            let verdict = tracker
                .observe_failure(&turn, &tool)
                .map_err(ToolError::Audit)?;
            let note = format!(
                "\n[class-jump, counted from this failed result] {}",
                verdict.message()
            );
            match result {
                Ok(mut out) => {
                    out.content.push_str(&note);
                    Ok(out)
                }
                Err(e) => Err(ToolError::Failed(format!("{e}{note}"))),
            }
        })
    }
}
