//! The rate-limit policy.

use super::layer::{Limiter, Quotas, Shared};
use crate::context::TurnContext;
use crate::layers::from_fn::{layer_fn, FromFn, NextModel};
use crate::layers::record;
use crate::model::{estimate_tokens, ChatRequest, ChatResponse, ModelError};
use governor::clock::Clock;
use loopward_core::LayerId;
use loopward_core::{LayerDetail, LayerVerdict, RateLimitDetail, Refusal};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// A model service whose calls wait for their quotas.
pub type RateLimitService<S> = FromFn<RateLimitPolicy, S>;

/// The rate limit's policy: a call waits, inside the call (holding nothing), until the
/// backend's and its agent's quotas admit it; a call no quota could ever admit is refused.
#[derive(Clone, Debug)]
pub struct RateLimitPolicy {
    pub(super) shared: Arc<Shared>,
}

/// Waits until `limiter` admits `n` cells. Takes nothing while it waits.
async fn admit(
    limiter: &Limiter,
    quotas: &Quotas,
    n: u64,
    what: &str,
    whose: &str,
) -> Result<Duration, ModelError> {
    let Some(cells) = NonZeroU32::new(u32::try_from(n).unwrap_or(u32::MAX)) else {
        return Ok(Duration::ZERO);
    };
    let mut waited = Duration::ZERO;
    loop {
        match limiter.check_n(cells) {
            Ok(Ok(())) => return Ok(waited),
            Ok(Err(not_until)) => {
                let wait = not_until.wait_time_from(quotas.clock.now());
                waited += wait;
                tokio::time::sleep(wait).await;
            }
            Err(too_big) => {
                return Err(ModelError::Refused(Refusal::new(
                    &LayerId::RateLimit,
                    format!(
                        "this call needs {n} {what} but the {whose} quota admits at most {} at once, so it could never run",
                        too_big.0
                    ),
                    "shorten the conversation or lower max_tokens, or raise the quota",
                )))
            }
        }
    }
}

async fn admit_all(quotas: &Quotas, tokens: u64, whose: &str) -> Result<Duration, ModelError> {
    let mut waited = Duration::ZERO;
    if let Some(l) = &quotas.requests {
        waited += admit(l, quotas, 1, "requests", whose).await?;
    }
    if let Some(l) = &quotas.tokens {
        waited += admit(l, quotas, tokens, "tokens", whose).await?;
    }
    Ok(waited)
}

layer_fn!(RateLimitPolicy, model_call(ChatRequest) -> Result<ChatResponse, ModelError>);

impl RateLimitPolicy {
    async fn model_call(
        self,
        req: ChatRequest,
        next: NextModel,
    ) -> Result<ChatResponse, ModelError> {
        let Self { shared } = self;
        let tokens = req
            .messages
            .iter()
            .map(|m| estimate_tokens(m.text()))
            .sum::<u64>()
            + u64::from(req.max_tokens.unwrap_or(0));
        let mut waited = Duration::ZERO;
        let result = async {
            if let Some(q) = &shared.backend {
                waited += admit_all(q, tokens, "backend").await?;
            }
            if let Some(q) = shared.agent(&req.agent) {
                waited += admit_all(&q, tokens, "per-agent").await?;
            }
            Ok::<_, ModelError>(())
        }
        .await;
        // A call that carries no turn (a backend called directly) is limited the same; there
        // is no ledger to record the wait on.
        if let Some(turn) = TurnContext::of(&req) {
            let (decision, detail) = match &result {
                Ok(()) => (
                    LayerVerdict::Admitted,
                    RateLimitDetail {
                        agent: req.agent.clone(),
                        reason: None,
                        tokens,
                        waited_ms: Some(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX)),
                    },
                ),
                Err(e) => (
                    LayerVerdict::Refused,
                    RateLimitDetail {
                        agent: req.agent.clone(),
                        reason: Some(e.to_string()),
                        tokens,
                        waited_ms: None,
                    },
                ),
            };
            let detail = LayerDetail::RateLimit(detail);
            record::decision(turn, LayerId::RateLimit, decision, detail)
                .map_err(ModelError::Audit)?;
        }
        result?;
        next.run(req).await
    }
}
