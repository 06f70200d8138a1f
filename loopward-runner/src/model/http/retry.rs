//! Bounded, jittered retries of one model call, inside the backend service.
//!
//! A call is tried at most `max_attempts` times. Between tries the backend waits what the
//! server asked for (`retry-after`) or an exponential backoff with "equal jitter" (half fixed,
//! half random), and gives up — returning the last error — once the next wait would take the
//! total past `max_total_wait`. Only [`ModelError::is_retryable`] errors are retried, so a spent
//! quota ([`ModelError::QuotaExhausted`]) or a rejected request fails at once. These retries are
//! invisible to the agent: they never count against its step or iteration caps.

use crate::model::ModelError;
use futures::future::BoxFuture;
use serde::Deserialize;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How often and how long to retry a failed call.
///
/// ```
/// use loopward_runner::model::http::RetryPolicy;
/// use std::time::Duration;
/// let p: RetryPolicy = toml::from_str("max_attempts = 3\ninitial_backoff = \"200ms\"").unwrap();
/// assert_eq!(p.max_attempts, 3);
/// assert_eq!(p.initial_backoff, Duration::from_millis(200));
/// assert_eq!(p.max_total_wait, RetryPolicy::default().max_total_wait);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Tries in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// The backoff before the first retry; it doubles each retry.
    #[serde(with = "crate::duration::required")]
    pub initial_backoff: Duration,
    /// The longest backoff between two tries (a server's `retry-after` may ask for more).
    #[serde(with = "crate::duration::required")]
    pub max_backoff: Duration,
    /// The most time spent waiting between tries of one call, all waits together.
    #[serde(with = "crate::duration::required")]
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_total_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The backoff after failed try `attempt` (1-based), given a jitter sample in `[0, 1)`.
    ///
    /// ```
    /// use loopward_runner::model::http::RetryPolicy;
    /// use std::time::Duration;
    /// let p = RetryPolicy::default(); // 500ms initial, doubling
    /// assert_eq!(p.backoff(1, 0.0), Duration::from_millis(250));
    /// assert_eq!(p.backoff(2, 0.5), Duration::from_millis(750));
    /// ```
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        let half = base / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// A source of jitter samples in `[0, 1)`. Closures `Fn() -> f64` are jitter sources, so tests
/// can pass `|| 0.5`.
pub trait Jitter: Send + Sync + 'static {
    /// One sample in `[0, 1)`.
    fn sample(&self) -> f64;
}

impl<F: Fn() -> f64 + Send + Sync + 'static> Jitter for F {
    fn sample(&self) -> f64 {
        self()
    }
}

/// Random jitter (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomJitter;

impl Jitter for RandomJitter {
    fn sample(&self) -> f64 {
        fastrand::f64()
    }
}

/// How the backend waits between tries; tests inject one that records and returns at once.
pub trait Sleeper: Send + Sync + 'static {
    /// Waits `duration`.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Waits with `tokio::time::sleep` (the default; obeys tokio's paused time).
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A failed try: the error and how long the server asked us to wait, if it did.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: ModelError,
    pub(crate) retry_after: Option<Duration>,
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        let retry_after = match &error {
            ModelError::RateLimited { retry_after } => *retry_after,
            _ => None,
        };
        Self { error, retry_after }
    }
}

/// The retry loop with its injected jitter and sleeper.
#[derive(Clone)]
pub(crate) struct Retrier {
    pub(crate) policy: RetryPolicy,
    pub(crate) jitter: Arc<dyn Jitter>,
    pub(crate) sleeper: Arc<dyn Sleeper>,
}

impl Retrier {
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            jitter: Arc::new(RandomJitter),
            sleeper: Arc::new(TokioSleeper),
        }
    }

    /// Runs `attempt` (given the 1-based try number) until it succeeds, fails for good, or the
    /// budget is spent; returns the last error then.
    pub(crate) async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ModelError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut waited = Duration::ZERO;
        let mut n = 1;
        loop {
            let failure = match attempt(n).await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            if !failure.error.is_retryable() || n >= self.policy.max_attempts {
                return Err(failure.error);
            }
            let wait = failure
                .retry_after
                .unwrap_or_else(|| self.policy.backoff(n, self.jitter.sample()));
            if waited + wait > self.policy.max_total_wait {
                tracing::debug!(?wait, ?waited, "model call: retry budget spent");
                return Err(failure.error);
            }
            tracing::debug!(attempt = n, ?wait, error = %failure.error, "model call: retrying");
            self.sleeper.sleep(wait).await;
            waited += wait;
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn retrier(policy: RetryPolicy) -> Retrier {
        Retrier {
            jitter: Arc::new(|| 0.5),
            ..Retrier::new(policy)
        }
    }

    fn server_error() -> Failure {
        ModelError::Server {
            status: 503,
            body: "busy".into(),
        }
        .into()
    }

    #[tokio::test(start_paused = true)]
    async fn retries_server_errors_with_jittered_doubling_backoff_until_success() {
        let start = tokio::time::Instant::now();
        let tries = AtomicU32::new(0);
        let out = retrier(RetryPolicy::default())
            .run(|n| {
                tries.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n < 3 {
                        Err(server_error())
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(out, Ok(3));
        // 500ms base → 375ms; 1s base → 750ms (jitter 0.5).
        assert_eq!(start.elapsed(), Duration::from_millis(375 + 750));
        assert_eq!(tries.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_with_the_last_error() {
        let tries = AtomicU32::new(0);
        let out: Result<(), _> = retrier(RetryPolicy {
            max_attempts: 2,
            ..RetryPolicy::default()
        })
        .run(|_| {
            tries.fetch_add(1, Ordering::SeqCst);
            async { Err(server_error()) }
        })
        .await;
        assert!(matches!(out, Err(ModelError::Server { status: 503, .. })));
        assert_eq!(tries.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_beyond_the_wait_budget_is_not_slept() {
        let start = tokio::time::Instant::now();
        let out: Result<(), _> = retrier(RetryPolicy::default())
            .run(|_| async {
                Err(ModelError::RateLimited {
                    retry_after: Some(Duration::from_secs(3600)),
                }
                .into())
            })
            .await;
        assert!(matches!(out, Err(ModelError::RateLimited { .. })));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn quota_exhaustion_is_never_retried() {
        let tries = AtomicU32::new(0);
        let out: Result<(), _> = retrier(RetryPolicy::default())
            .run(|_| {
                tries.fetch_add(1, Ordering::SeqCst);
                async { Err(ModelError::QuotaExhausted("insufficient_quota".into()).into()) }
            })
            .await;
        assert!(matches!(out, Err(ModelError::QuotaExhausted(_))));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn backoff_is_capped_by_max_backoff() {
        let p = RetryPolicy::default();
        assert!(p.backoff(40, 1.0) <= p.max_backoff);
        assert!(p.backoff(40, 0.0) >= p.max_backoff / 2);
    }
}
