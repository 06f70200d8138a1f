//! The `LoopwardQuota` virtual object: one per provider, its state in Restate.

use super::{admit, debit, SharedQuota, Tats};
use loopward_runner::{Clock, SystemClock};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The object's name as Restate knows it: a provider's quota is `LoopwardQuota/<provider>`.
pub const QUOTA_OBJECT: &str = "LoopwardQuota";

/// The provider quotas of every worker: bind it on each worker's endpoint next to
/// [`LoopwardRunService`](crate::LoopwardRunService). Keyed by provider; Restate runs one
/// `acquire` or `debit` at a time per provider, whichever worker serves it, so the quota holds
/// for all of them together. The rate travels with each request ([`SharedQuota`]): give every
/// worker the same.
///
/// ```
/// use loopward_restate::ProviderQuota;
/// let endpoint = restate_sdk::endpoint::Endpoint::builder().bind(ProviderQuota::default()).build();
/// # let _ = endpoint;
/// ```
#[derive(Clone)]
pub struct ProviderQuota {
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ProviderQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderQuota").finish_non_exhaustive()
    }
}

impl Default for ProviderQuota {
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

impl ProviderQuota {
    /// The object, reading time from `clock` (each reading is journaled, so a retried handler
    /// decides as the first attempt did).
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { clock }
    }
}

/// What `acquire` answers: start now (`wait_ms` 0), or ask again after `wait_ms`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Grant {
    pub(crate) wait_ms: u64,
}

/// A reply's tokens, debited from the quota.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Debit {
    pub(crate) quota: SharedQuota,
    pub(crate) tokens: u64,
}

const REQUESTS: &str = "requests_tat";
const TOKENS: &str = "tokens_tat";

#[restate_sdk::object(name = "LoopwardQuota")]
impl ProviderQuota {
    /// A permit for one model call, or how long to wait before asking again.
    #[handler]
    async fn acquire(
        &self,
        ctx: ObjectContext<'_>,
        quota: Json<SharedQuota>,
    ) -> Result<Json<Grant>, HandlerError> {
        let quota = quota.into_inner();
        let (now, tats) = self.read(&ctx).await?;
        match admit(&quota, now, tats) {
            Ok(next) => {
                ctx.set(REQUESTS, next.requests);
                Ok(Json(Grant { wait_ms: 0 }))
            }
            Err(wait_ms) => Ok(Json(Grant { wait_ms })),
        }
    }

    /// Debits a reply's tokens.
    #[handler]
    async fn debit(&self, ctx: ObjectContext<'_>, d: Json<Debit>) -> Result<(), HandlerError> {
        let d = d.into_inner();
        let (now, tats) = self.read(&ctx).await?;
        ctx.set(TOKENS, debit(&d.quota, now, tats, d.tokens).tokens);
        Ok(())
    }
}

impl ProviderQuota {
    async fn read(&self, ctx: &ObjectContext<'_>) -> Result<(u64, Tats), HandlerError> {
        let clock = self.clock.clone();
        let now = ctx
            .run(|| async move { Ok(clock.now_millis()) })
            .name("now")
            .await?;
        let tats = Tats {
            requests: ctx.get::<u64>(REQUESTS).await?.unwrap_or(0),
            tokens: ctx.get::<u64>(TOKENS).await?.unwrap_or(0),
        };
        Ok((now, tats))
    }
}
