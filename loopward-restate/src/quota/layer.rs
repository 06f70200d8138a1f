//! The model layer that takes a permit from the provider's shared quota before each call.

use super::SharedQuota;
use crate::journal;
use futures::future::BoxFuture;
use loopward_runner::layers::from_fn::{from_fn, FromFn, LayerFn, NextModel};
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError};
use std::sync::Arc;

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
        tower::Layer::layer(
            &from_fn(SharedQuotaPolicy {
                quota: self.quota.clone(),
            }),
            inner,
        )
    }
}

/// The service [`SharedQuotaLayer`] builds: the layer kit's [`FromFn`] around its policy.
pub type SharedQuotaService<S> = FromFn<SharedQuotaPolicy, S>;

/// [`SharedQuotaLayer`]'s policy: a permit before the call, the reply's tokens debited after.
#[derive(Clone, Debug)]
pub struct SharedQuotaPolicy {
    quota: Arc<SharedQuota>,
}

impl LayerFn<ChatRequest, ChatResponse, ModelError> for SharedQuotaPolicy {
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn call(&mut self, req: ChatRequest, next: NextModel) -> Self::Future {
        let Some(journal) = journal::for_model_call(&req) else {
            return Box::pin(next.run(req));
        };
        let quota = self.quota.clone();
        Box::pin(async move {
            // Not a ledger failure: the run ends `failed` (resumable), not `audit_failed`.
            let unavailable = |why: String| ModelError::QuotaUnavailable {
                provider: quota.provider().to_string(),
                why,
            };
            journal
                .permit((*quota).clone())
                .await
                .map_err(|why| unavailable(format!("no permit: {why}")))?;
            let reply = next.run(req).await?;
            if quota.tokens_per_minute > 0 {
                journal
                    .debit((*quota).clone(), reply.usage.total())
                    .map_err(|why| {
                        unavailable(format!("the reply's tokens could not be debited: {why}"))
                    })?;
            }
            Ok(reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Ask, Journal};
    use crate::ledger::ReplayLedger;
    use loopward_core::{AgentId, RunId};
    use loopward_runner::audit::LedgerOptions;
    use loopward_runner::layers::testing;
    use loopward_runner::model::fake::{FakeModel, Script, ScriptedReply};
    use loopward_runner::TurnError;
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn a_quota_that_gives_no_permit_fails_the_call_retryably_not_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunId::new("r1").unwrap();
        let ledger = ReplayLedger::open(dir.path(), &run, LedgerOptions::default()).unwrap();
        let (journal, mut asks) = Journal::new(ledger);
        // The Restate side answers the permit with a failure (a terminal error from the quota
        // object, or the invocation ending).
        tokio::spawn(async move {
            while let Some(ask) = asks.recv().await {
                if let Ask::Permit { reply, .. } = ask {
                    let _ = reply.send(Err("the quota object failed: boom".into()));
                }
            }
        });
        let agent = AgentId::new("builder").unwrap();
        let mut script = Script::default();
        script.push(&agent, ScriptedReply::default());
        let model = FakeModel::new(script);
        let service = SharedQuotaLayer::new(SharedQuota::new("openai", 60).unwrap()).layer(model);
        // The run executes on Restate: its journal is on the run, where the workflow seeds it.
        let (ctx, _) = testing::run(dir.path(), "r1");
        ctx.extensions().get_or_insert_with(|| journal);
        let req = ChatRequest {
            agent,
            messages: vec![],
            tools: vec![],
            max_tokens: None,
            turn: testing::turn(&ctx, "builder", 1).slot(),
        };
        let err = service.oneshot(req).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::QuotaUnavailable { provider, why } if provider == "openai" && why.contains("boom")),
            "{err:?}"
        );
        assert!(err.is_retryable());
        assert!(err.to_string().starts_with("rate limited"), "{err}");
        // The run ends `failed` (which `--resume` takes up), not `audit_failed`.
        let status = TurnError::from(err).status();
        assert!(
            matches!(&status, loopward_core::RunStatus::Failed { error } if error.contains("openai")),
            "{status:?}"
        );
    }
}
