//! Rate settings, the shared limiters, and the layer.

use super::clock::TokioClock;
use super::service::RateLimitPolicy;
use crate::layers::config::{in_range, ConfigError};
use crate::layers::from_fn::{from_fn, FromFnLayer};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use loopward_core::AgentId;
use serde::Deserialize;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// One quota: requests and/or tokens per interval `per`. The whole amount is also the
/// burst: a quota of 20 requests per second admits 20 at once, then one every 50 ms.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Requests per interval (1..=1000000).
    #[serde(default)]
    pub requests: Option<u32>,
    /// Tokens per interval (1..=1000000000).
    #[serde(default)]
    pub tokens: Option<u32>,
    /// The interval (`"1s"` to `"24h"`, default `"1s"`).
    #[serde(default = "one_second", with = "crate::duration::required")]
    pub per: Duration,
}

fn one_second() -> Duration {
    Duration::from_secs(1)
}

/// The `[rate]` table of `loopward.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateConfig {
    /// The quota of the backend, shared by every agent.
    pub backend: Option<QuotaConfig>,
    /// The quota each agent gets for itself.
    pub per_agent: Option<QuotaConfig>,
}

/// A validated quota: its limiters.
pub(super) struct Quotas {
    pub(super) requests: Option<Limiter>,
    pub(super) tokens: Option<Limiter>,
    pub(super) clock: TokioClock,
}

fn limiter(
    field: &str,
    n: u32,
    max: u64,
    per: Duration,
    clock: TokioClock,
) -> Result<Limiter, ConfigError> {
    in_range(field, n.into(), max)?;
    let burst = NonZeroU32::new(n).ok_or_else(|| ConfigError::new(field, "must be at least 1"))?;
    let quota = Quota::with_period(per / n)
        .ok_or_else(|| ConfigError::new(field, "the interval is too short for this amount"))?
        .allow_burst(burst);
    Ok(RateLimiter::direct_with_clock(quota, clock))
}

impl QuotaConfig {
    fn validate(&self, at: &str) -> Result<(), ConfigError> {
        crate::duration::in_range(
            &format!("{at}.per"),
            self.per,
            Duration::from_secs(1),
            Duration::from_secs(86_400),
        )?;
        if self.requests.is_none() && self.tokens.is_none() {
            return Err(ConfigError::new(at, "set `requests`, `tokens` or both"));
        }
        if let Some(n) = self.requests {
            in_range(&format!("{at}.requests"), n.into(), 1_000_000)?;
        }
        if let Some(n) = self.tokens {
            in_range(&format!("{at}.tokens"), n.into(), 1_000_000_000)?;
        }
        Ok(())
    }

    fn build(&self, at: &str) -> Result<Quotas, ConfigError> {
        let clock = TokioClock::new();
        let requests = self
            .requests
            .map(|n| limiter(&format!("{at}.requests"), n, 1_000_000, self.per, clock))
            .transpose()?;
        let tokens = self
            .tokens
            .map(|n| limiter(&format!("{at}.tokens"), n, 1_000_000_000, self.per, clock))
            .transpose()?;
        Ok(Quotas {
            requests,
            tokens,
            clock,
        })
    }
}

/// The limiters every clone shares.
pub(super) struct Shared {
    pub(super) backend: Option<Quotas>,
    per_agent: Option<QuotaConfig>,
    agents: Mutex<HashMap<AgentId, Arc<Quotas>>>,
}

impl Shared {
    /// The quotas of `agent`, made the first time it calls.
    pub(super) fn agent(&self, agent: &AgentId) -> Option<Arc<Quotas>> {
        let config = self.per_agent.as_ref()?;
        let mut map = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = map.get(agent) {
            return Some(q.clone());
        }
        // Validated when the layer was built, so building cannot fail here.
        let q = Arc::new(config.build("rate.per_agent").ok()?);
        map.insert(agent.clone(), q.clone());
        Some(q)
    }
}

/// Rate-limits a model service. Clones share the limiters. Build it inside the tokio runtime
/// whose clock it should follow. The layer is its policy (see
/// [`from_fn`](crate::layers::from_fn)).
pub type RateLimitLayer = FromFnLayer<RateLimitPolicy>;

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("backend", &self.backend.is_some())
            .field("per_agent", &self.per_agent)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A rate-limit layer; fails naming the field when a quota is 0, absurd or empty.
    pub fn new(config: RateConfig) -> Result<Self, ConfigError> {
        if let Some(q) = &config.backend {
            q.validate("rate.backend")?;
        }
        if let Some(q) = &config.per_agent {
            q.validate("rate.per_agent")?;
        }
        let backend = config
            .backend
            .as_ref()
            .map(|q| q.build("rate.backend"))
            .transpose()?;
        Ok(from_fn(RateLimitPolicy {
            shared: Arc::new(Shared {
                backend,
                per_agent: config.per_agent,
                agents: Mutex::default(),
            }),
        }))
    }
}
