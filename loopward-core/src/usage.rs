//! Token usage and cost.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Tokens used by one or more model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    // Fields in sorted order of their names: the ledger writes them as declared (see `AuditEvent`).
    /// Prompt tokens served from a cache (KV reuse locally, prompt caching remotely).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Number of model calls this covers.
    #[serde(default)]
    pub calls: u64,
    /// Prompt tokens the model read (reused + prefilled for local backends).
    pub input_tokens: u64,
    /// Tokens the model generated.
    pub output_tokens: u64,
}

impl Usage {
    /// Total tokens, input and output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, o: Self) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_tokens += o.cached_tokens;
        self.calls += o.calls;
    }
}

/// Prices of one model, in micro-dollars per million tokens, so costs add up exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Micro-dollars per million input tokens.
    pub input_per_mtok_micros: u64,
    /// Micro-dollars per million output tokens.
    pub output_per_mtok_micros: u64,
}

impl Price {
    /// The cost of `usage` in micro-dollars (rounded down).
    ///
    /// ```
    /// use loopward_core::{Price, Usage};
    /// let p = Price { input_per_mtok_micros: 3_000_000, output_per_mtok_micros: 15_000_000 };
    /// let u = Usage { input_tokens: 1_000_000, output_tokens: 100_000, ..Usage::default() };
    /// assert_eq!(p.cost_micros(&u), 4_500_000); // $4.50
    /// ```
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let i = u128::from(usage.input_tokens) * u128::from(self.input_per_mtok_micros);
        let o = u128::from(usage.output_tokens) * u128::from(self.output_per_mtok_micros);
        u64::try_from((i + o) / 1_000_000).unwrap_or(u64::MAX)
    }
}
