//! A provider quota shared by every worker: a Restate virtual object keyed by provider hands
//! out the permits (and takes the token debits) of all the runs that call that provider,
//! wherever they execute.
//!
//! A `governor` limiter (the runner's `[rate]` layer) counts only the calls of its own worker:
//! N workers at its rate make N times the rate. [`ProviderQuota`] (`LoopwardQuota/<provider>`)
//! keeps the quota's state in Restate instead, and Restate runs one of its exclusive handlers
//! at a time per key, so every worker's run asks the same counter. [`SharedQuotaLayer`] asks
//! it before each live model call: the answer (and any wait, a durable Restate timer) is in the
//! run's journal, so a replay after a worker's death asks nothing again.
//!
//! The rule is a GCRA (the generic cell rate algorithm `governor` also uses): a call may start
//! when the quota's theoretical arrival time is at most `burst − 1` intervals ahead of now;
//! each start moves it one interval on. Tokens, when limited, work the same way with each
//! reply's tokens debited after it: a call waits while more than a minute's tokens are owed.

mod layer;
pub(crate) mod object;

pub use layer::{SharedQuotaLayer, SharedQuotaService};
pub use object::{ProviderQuota, QUOTA_OBJECT};

use serde::{Deserialize, Serialize};

/// A provider's quota, shared by every worker that names the same provider.
///
/// ```
/// use loopward_restate::SharedQuota;
/// let quota = SharedQuota::new("openai", 60).unwrap().burst(5).unwrap().tokens_per_minute(90_000);
/// assert_eq!(quota.provider(), "openai");
/// assert!(SharedQuota::new("", 60).is_err());
/// assert!(SharedQuota::new("openai", 0).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedQuota {
    provider: String,
    requests_per_minute: u32,
    burst: u32,
    tokens_per_minute: u64,
}

/// A quota that cannot be enforced as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shared quota: {field} {why}")]
pub struct QuotaError {
    /// The field.
    pub field: &'static str,
    /// What is wrong with it, and what it takes.
    pub why: String,
}

impl SharedQuota {
    /// `requests_per_minute` model calls a minute (1 to 1,000,000) to `provider` (the virtual
    /// object's key: 1 to 100 letters, digits, `-`, `_`, `.`), one at a time (burst 1) and
    /// without a token limit.
    pub fn new(provider: &str, requests_per_minute: u32) -> Result<Self, QuotaError> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if provider.is_empty() || provider.len() > 100 || !provider.chars().all(ok) {
            return Err(QuotaError {
                field: "provider",
                why: format!("{provider:?} is not a provider key: use 1 to 100 letters, digits, '-', '_' or '.'"),
            });
        }
        if !(1..=1_000_000).contains(&requests_per_minute) {
            return Err(QuotaError {
                field: "requests_per_minute",
                why: format!("{requests_per_minute} is out of range: use 1 to 1000000"),
            });
        }
        Ok(Self {
            provider: provider.to_string(),
            requests_per_minute,
            burst: 1,
            tokens_per_minute: 0,
        })
    }

    /// Calls that may start together after a quiet spell (1 to 10,000).
    pub fn burst(mut self, burst: u32) -> Result<Self, QuotaError> {
        if !(1..=10_000).contains(&burst) {
            return Err(QuotaError {
                field: "burst",
                why: format!("{burst} is out of range: use 1 to 10000"),
            });
        }
        self.burst = burst;
        Ok(self)
    }

    /// Tokens a minute (input and output), debited after each reply; `0`: not limited.
    pub fn tokens_per_minute(mut self, tokens: u64) -> Self {
        self.tokens_per_minute = tokens;
        self
    }

    /// The provider: the key of its `LoopwardQuota` object.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Milliseconds between two calls at the configured rate.
    fn interval_ms(&self) -> u64 {
        (60_000 / u64::from(self.requests_per_minute.max(1))).max(1)
    }
}

/// The quota's state, as its object keeps it: theoretical arrival times, in clock milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tats {
    pub(crate) requests: u64,
    pub(crate) tokens: u64,
}

/// Whether a call may start at `now`: `Ok(state after it starts)` or `Err(milliseconds to
/// wait before asking again)`.
pub(crate) fn admit(q: &SharedQuota, now: u64, tats: Tats) -> Result<Tats, u64> {
    if q.tokens_per_minute > 0 && tats.tokens > now + 60_000 {
        return Err(tats.tokens - now - 60_000);
    }
    let interval = q.interval_ms();
    let tolerance = interval * u64::from(q.burst.saturating_sub(1));
    let tat = tats.requests.max(now);
    if tat > now + tolerance {
        return Err(tat - now - tolerance);
    }
    Ok(Tats {
        requests: tat + interval,
        tokens: tats.tokens,
    })
}

/// The token state after a reply of `tokens` at `now`.
pub(crate) fn debit(q: &SharedQuota, now: u64, tats: Tats, tokens: u64) -> Tats {
    if q.tokens_per_minute == 0 {
        return tats;
    }
    let owed = tokens.saturating_mul(60_000) / q.tokens_per_minute;
    Tats {
        requests: tats.requests,
        tokens: tats.tokens.max(now).saturating_add(owed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers asking as fast as they can: how many starts `admit` lets through by `until`.
    fn starts(q: &SharedQuota, callers: u64, until: u64) -> u64 {
        let mut tats = Tats::default();
        let mut next = vec![0u64; callers as usize];
        let mut n = 0;
        loop {
            let (i, at) = next
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|(_, t)| *t)
                .unwrap();
            if at > until {
                return n;
            }
            match admit(q, at, tats) {
                Ok(t) => {
                    tats = t;
                    n += 1;
                    next[i] = at;
                }
                Err(wait) => next[i] = at + wait,
            }
        }
    }

    #[test]
    fn any_number_of_callers_together_hold_the_rate() {
        let q = SharedQuota::new("p", 60).unwrap();
        for callers in [1, 2, 7] {
            // One a second: at 0, 1000, …, 10000.
            assert_eq!(starts(&q, callers, 10_000), 11, "{callers} callers");
        }
        let bursty = q.burst(3).unwrap();
        assert_eq!(
            starts(&bursty, 4, 10_000),
            13,
            "three at once, then the rate"
        );
    }

    #[test]
    fn a_call_waits_while_more_than_a_minute_of_tokens_is_owed() {
        let q = SharedQuota::new("p", 1_000_000)
            .unwrap()
            .tokens_per_minute(1_000);
        let t = admit(&q, 0, Tats::default()).unwrap();
        // 3,000 tokens owed at 1,000 a minute: three minutes, so two minutes to wait.
        let t = debit(&q, 0, t, 3_000);
        assert_eq!(admit(&q, 0, t), Err(120_000));
        assert!(admit(&q, 120_000, t).is_ok());
    }
}
