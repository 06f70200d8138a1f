//! Timing: one sample per operation, medians and p99s, rounds that interleave a subject with its
//! baseline.

use serde::Serialize;
use std::time::Instant;

/// Summary of per-operation samples, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Samples.
    pub n: usize,
    /// Median.
    pub median_ns: f64,
    /// 99th percentile (nearest rank).
    pub p99_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// Fastest.
    pub min_ns: f64,
}

impl Stats {
    /// Summarises `samples` (sorted in place). Empty input gives zeros.
    pub fn from_samples(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1] as f64;
        let median = if n % 2 == 1 {
            samples[n / 2] as f64
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) as f64 / 2.0
        };
        Self {
            n,
            median_ns: median,
            p99_ns: rank(0.99),
            mean_ns: samples.iter().map(|&s| s as f64).sum::<f64>() / n as f64,
            min_ns: samples[0] as f64,
        }
    }
}

/// The runtime a part measures on: one thread (no scheduler between the samples), timers and
/// I/O on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs `op` `n` times, pushing one sample (ns) per run onto `out`.
pub async fn time_n(n: usize, out: &mut Vec<u64>, mut op: impl AsyncFnMut()) {
    for _ in 0..n {
        let start = Instant::now();
        op().await;
        out.push(elapsed_ns(start));
    }
}

/// Nanoseconds since `start`.
pub fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The median cost of reading the clock twice (what every sample includes), in ns.
pub fn timer_overhead_ns() -> f64 {
    let mut v: Vec<u64> = (0..10_000)
        .map(|_| {
            let s = Instant::now();
            elapsed_ns(std::hint::black_box(s))
        })
        .collect();
    Stats::from_samples(&mut v).median_ns
}

/// How many operations each part runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// The real run (`cargo xtask bench`).
    Full,
    /// A smoke run: every code path, few samples (`cargo xtask bench --quick`).
    Quick,
}

impl Effort {
    /// `full` in a full run, `quick` in a quick one.
    pub fn pick<T>(self, full: T, quick: T) -> T {
        match self {
            Self::Full => full,
            Self::Quick => quick,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_nearest_rank() {
        let mut v: Vec<u64> = (1..=200).collect();
        let s = Stats::from_samples(&mut v);
        assert_eq!(s.p99_ns, 198.0);
        assert_eq!(s.median_ns, 100.5);
        assert_eq!(s.min_ns, 1.0);
    }
}
