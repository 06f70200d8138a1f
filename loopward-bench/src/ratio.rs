//! A ratio of two medians and how sure we are of it: a percentile bootstrap.
//!
//! Part 5 compares loopward's decode rate with a direct loop's on a shared machine, where single
//! requests vary by tens of percent. One pooled ratio hides that; a target such as "≥ 0.97" is
//! only shown when the whole interval of plausible ratios lies above it. The interval comes from
//! resampling each side's per-request rates with replacement (each side on its own: the two sides
//! run in different processes, so their requests are not paired) and taking the median ratio of
//! every resample; the 2.5th and 97.5th percentiles bound it. The generator is seeded, so the same
//! samples give the same interval.
//!
//! ```
//! use loopward_bench::ratio::{median, median_ratio};
//! assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
//! let ours = [49.0, 50.0, 51.0, 50.0, 49.5, 50.5];
//! let theirs = [50.0, 50.0, 50.0, 50.0, 50.0, 50.0];
//! let r = median_ratio(&ours, &theirs);
//! assert_eq!(r.median, 1.0);
//! assert!(r.low <= 1.0 && r.high >= 1.0 && r.high - r.low < 0.05);
//! ```

use serde::Serialize;

/// Resamples drawn for an interval.
pub const RESAMPLES: usize = 4_000;

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `median(ours) / median(theirs)` with its 95% bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RatioInterval {
    /// The ratio of the two medians.
    pub median: f64,
    /// The interval's low end (2.5th percentile of the resampled ratios).
    pub low: f64,
    /// Its high end (97.5th percentile).
    pub high: f64,
}

impl RatioInterval {
    /// Whether the whole interval is at or above `target` (the ratio is shown to meet it).
    pub fn above(&self, target: f64) -> bool {
        self.low >= target
    }

    /// Whether the whole interval is below `target` (shown to miss it).
    pub fn below(&self, target: f64) -> bool {
        self.high < target
    }
}

/// The ratio of the medians of `ours` and `theirs`, with a percentile-bootstrap 95% interval.
pub fn median_ratio(ours: &[f64], theirs: &[f64]) -> RatioInterval {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let point = ratio(median(ours), median(theirs));
    if ours.is_empty() || theirs.is_empty() {
        return RatioInterval {
            median: point,
            low: point,
            high: point,
        };
    }
    let mut rng = SplitMix64(0x6c6f_6f70_7761_7264); // "loopward"
    let (mut a, mut b) = (vec![0.0; ours.len()], vec![0.0; theirs.len()]);
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            rng.resample(ours, &mut a);
            rng.resample(theirs, &mut b);
            ratio(median(&a), median(&b))
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    RatioInterval {
        median: point,
        low: at(0.025),
        high: at(0.975),
    }
}

/// A small seeded generator (SplitMix64): resampling needs no cryptographic randomness.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn resample(&mut self, from: &[f64], into: &mut [f64]) {
        for slot in into.iter_mut() {
            *slot = from[(self.next() % from.len() as u64) as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_steady_sides_give_a_tight_interval_around_one() {
        let a: Vec<f64> = (0..24).map(|i| 50.0 + (i % 3) as f64 * 0.1).collect();
        let r = median_ratio(&a, &a);
        assert!((r.median - 1.0).abs() < 1e-12);
        assert!(r.low > 0.99 && r.high < 1.01, "{r:?}");
        assert!(r.above(0.97) && !r.below(0.97));
    }

    #[test]
    fn a_noisy_side_widens_the_interval_so_a_target_near_the_ratio_is_not_shown() {
        let theirs: Vec<f64> = (0..12).map(|i| 48.0 + (i % 4) as f64).collect();
        let ours: Vec<f64> = (0..12).map(|i| 30.0 + (i * 7 % 12) as f64 * 2.5).collect();
        let r = median_ratio(&ours, &theirs);
        assert!(r.high - r.low > 0.1, "{r:?}");
        assert!(!r.above(0.97));
    }

    #[test]
    fn a_clearly_slower_side_is_shown_to_miss() {
        let theirs = vec![50.0; 10];
        let ours: Vec<f64> = (0..10).map(|i| 40.0 + (i % 2) as f64).collect();
        let r = median_ratio(&ours, &theirs);
        assert!(r.below(0.97), "{r:?}");
    }

    #[test]
    fn the_same_samples_give_the_same_interval() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(median_ratio(&a, &b), median_ratio(&a, &b));
    }

    #[test]
    fn empty_sides_do_not_panic() {
        let r = median_ratio(&[], &[1.0]);
        assert_eq!((r.median, r.low, r.high), (0.0, 0.0, 0.0));
    }
}
