//! Rate limits on model calls with [governor]: requests and tokens per interval, for the whole
//! backend and for each agent. All clones of the layer and its services share one set of
//! limiters. A call waits (on tokio time, so tests run under paused time) until every quota
//! admits it; a waiting call takes nothing, so one that is dropped leaves the capacity to
//! others. A call that needs more than a quota's burst fails at once with
//! [`ModelError::Refused`](crate::model::ModelError::Refused) instead of waiting forever.
//!
//! Tokens are estimated before the call: the request's text (about four bytes a token) plus its
//! `max_tokens`.
//!
//! ```
//! use loopward_runner::layers::ratelimit::{QuotaConfig, RateConfig, RateLimitLayer};
//! use loopward_runner::model::{fake::{FakeModel, Script}, ChatRequest, TurnSlot};
//! use loopward_core::AgentId;
//! use std::time::Duration;
//! use tower::{Layer, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
//! let a = AgentId::new("a").unwrap();
//! let mut script = Script::default();
//! script.say(&a, "one").say(&a, "two");
//! let limit = RateLimitLayer::new(RateConfig {
//!     backend: Some(QuotaConfig { requests: Some(1), tokens: None, per: Duration::from_secs(10) }),
//!     ..RateConfig::default()
//! }).unwrap();
//! let model = limit.layer(FakeModel::new(script));
//! let req = ChatRequest { agent: a, messages: vec![], tools: vec![], max_tokens: None, turn: TurnSlot::empty() };
//! let start = tokio::time::Instant::now();
//! model.clone().oneshot(req.clone()).await.unwrap();
//! model.clone().oneshot(req).await.unwrap(); // waits for the next slot
//! assert_eq!(start.elapsed().as_secs(), 10);
//! # });
//! ```

mod clock;
mod layer;
mod service;

pub use clock::TokioClock;
pub use layer::{QuotaConfig, RateConfig, RateLimitLayer};
pub use service::{RateLimitPolicy, RateLimitService};
