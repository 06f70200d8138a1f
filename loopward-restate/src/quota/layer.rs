//! The model layer that takes a permit from the provider's shared quota before each call.

use super::SharedQuota;
use crate::journal;
use futures::future::BoxFuture;
use loopward_core::AuditError;
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

/// Takes a permit from the provider's [`ProviderQuota`](crate::ProviderQuota) before each model
/// call of a run executing on Restate, waiting (a durable timer: no worker is busy) until the
/// quota allows it; debits the reply's tokens after it when the quota limits tokens. Put it
/// outside [`JournaledModelLayer`](crate::JournaledModelLayer): the permit and the wait are in
/// the run's journal, so a replayed call takes no second permit. Outside Restate it passes calls
/// through (the worker's own `[rate]` limit still applies).
///
/// ```
/// use loopward_restate::{JournaledModelLayer, SharedQuota, SharedQuotaLayer};
/// use loopward_runner::model::{fake::{FakeModel, Script}, BoxModelService};
/// use tower::Layer;
/// let quota = SharedQuotaLayer::new(SharedQuota::new("openai", 60).unwrap());
/// let model = BoxModelService::new(
///     quota.layer(JournaledModelLayer.layer(FakeModel::new(Script::default()))),
/// );
/// # let _ = model;
/// ```
#[derive(Clone, Debug)]
pub struct SharedQuotaLayer {
    quota: Arc<SharedQuota>,
}

impl SharedQuotaLayer {
    /// The layer for `quota`.
    pub fn new(quota: SharedQuota) -> Self {
        Self {
            quota: Arc::new(quota),
        }
    }
}

impl<S> tower::Layer<S> for SharedQuotaLayer {
    type Service = SharedQuotaService<S>;
    fn layer(&self, inner: S) -> SharedQuotaService<S> {
        SharedQuotaService {
            inner,
            quota: self.quota.clone(),
        }
    }
}

/// The service [`SharedQuotaLayer`] builds.
#[derive(Clone, Debug)]
pub struct SharedQuotaService<S> {
    inner: S,
    quota: Arc<SharedQuota>,
}

impl<S> Service<ChatRequest> for SharedQuotaService<S>
where
    S: Service<ChatRequest, Response = ChatResponse, Error = ModelError> + Clone + Send + 'static,
    S::Future: Send + 'static,
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
        let Some(journal) = journal::current().filter(|_| !journal::in_step()) else {
            return Box::pin(inner.oneshot(req));
        };
        let quota = self.quota.clone();
        Box::pin(async move {
            journal.permit((*quota).clone()).await.map_err(|why| {
                ModelError::Audit(AuditError(format!(
                    "no permit from the shared quota of provider {:?}: {why}",
                    quota.provider()
                )))
            })?;
            let reply = inner.oneshot(req).await?;
            if quota.tokens_per_minute > 0 {
                journal
                    .debit((*quota).clone(), reply.usage.total())
                    .map_err(|why| {
                        ModelError::Audit(AuditError(format!(
                            "the reply's tokens could not be debited from the shared quota of provider {:?}: {why}",
                            quota.provider()
                        )))
                    })?;
            }
            Ok(reply)
        })
    }
}
