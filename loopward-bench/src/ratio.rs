//! A ratio and how sure we are of it: the geometric mean of paired ratios, with a percentile
//! bootstrap interval.
//!
//! Part 5 compares loopward's decode rate with a direct loop's on a shared machine, where single
//! requests vary by tens of percent as other work comes and goes. The two sides run the same
//! request back to back, so each pair saw about the same machine and the pair's ratio cancels
//! what both shared. The estimate is the geometric mean of the pairs' ratios (the mean of their
//! logarithms: a pair twice as fast and one twice as slow weigh alike, and it uses every pair,
//! so it is tighter than their median for the same number of pairs). A target such as "≥ 0.97"
//! is only shown when the whole interval of plausible values lies above it; an estimate above it
//! whose interval reaches below is not shown, and one below it missed. The interval comes
//! from resampling the pairs with replacement and taking the geometric mean of every resample;
//! the 2.5th and 97.5th percentiles bound it. The generator is seeded, so the same samples give
//! the same interval.
//!
//! ```
//! use loopward_bench::ratio::{median, paired_ratio};
//! assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
//! // The machine got slower half-way: both sides felt it, the ratio did not.
//! let theirs = [50.0, 50.0, 50.0, 30.0, 30.0, 30.0];
//! let ours = [49.5, 50.0, 50.5, 29.7, 30.0, 30.3];
//! let r = paired_ratio(&ours, &theirs);
//! assert!((r.point - 1.0).abs() < 1e-3);
//! assert!(r.low >= 0.99 && r.high <= 1.01);
//! ```

use crate::report::Verdict;
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

/// A ratio with its 95% bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RatioInterval {
    /// The geometric mean of the pairs' ratios.
    pub point: f64,
    /// The interval's low end (2.5th percentile of the resampled geometric means).
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

    /// Against a target of at least `target`: met by the whole interval, met by the estimate
    /// alone (not shown), or missed by the estimate.
    pub fn verdict(&self, target: f64) -> Verdict {
        if self.above(target) {
            Verdict::Met
        } else if self.point >= target {
            Verdict::NotShown
        } else {
            Verdict::Missed
        }
    }
}

/// The geometric mean of the ratios `ours[i] / theirs[i]` of pairs measured together, with a
/// percentile-bootstrap 95% interval. Pairs beyond the shorter side are ignored, and so are pairs
/// with a side that is not positive (no rate was measured); with no pair left, all three are 0.
pub fn paired_ratio(ours: &[f64], theirs: &[f64]) -> RatioInterval {
    let logs: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .filter(|(&a, &b)| a > 0.0 && b > 0.0)
        .map(|(&a, &b)| (a / b).ln())
        .collect();
    if logs.is_empty() {
        return RatioInterval {
            point: 0.0,
            low: 0.0,
            high: 0.0,
        };
    }
    let geo_mean = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).exp();
    let mut rng = SplitMix64(0x6c6f_6f70_7761_7264); // "loopward"
    let mut sample = vec![0.0; logs.len()];
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            rng.resample(&logs, &mut sample);
            geo_mean(&sample)
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    RatioInterval {
        point: geo_mean(&logs),
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
        let r = paired_ratio(&a, &a);
        assert!((r.point - 1.0).abs() < 1e-12);
        assert!(r.low > 0.99 && r.high < 1.01, "{r:?}");
        assert!(r.above(0.97) && !r.below(0.97));
    }

    #[test]
    fn drift_both_sides_share_cancels_in_the_pairs() {
        // The machine's speed wanders by a factor of two; loopward is steadily 1% slower.
        let theirs: Vec<f64> = (0..24).map(|i| 30.0 + (i * 7 % 24) as f64 * 1.25).collect();
        let ours: Vec<f64> = theirs.iter().map(|t| t * 0.99).collect();
        let r = paired_ratio(&ours, &theirs);
        assert!(
            (r.point - 0.99).abs() < 1e-9 && r.high - r.low < 1e-9,
            "{r:?}"
        );
        assert!(r.above(0.97));
    }

    #[test]
    fn noise_within_pairs_widens_the_interval_so_a_target_near_the_ratio_is_not_shown() {
        let theirs: Vec<f64> = (0..12).map(|i| 48.0 + (i % 4) as f64).collect();
        let ours: Vec<f64> = (0..12).map(|i| 30.0 + (i * 7 % 12) as f64 * 2.5).collect();
        let r = paired_ratio(&ours, &theirs);
        assert!(r.high - r.low > 0.1, "{r:?}");
        assert!(!r.above(0.97));
    }

    #[test]
    fn a_clearly_slower_side_is_shown_to_miss() {
        let theirs = vec![50.0; 10];
        let ours: Vec<f64> = (0..10).map(|i| 40.0 + (i % 2) as f64).collect();
        let r = paired_ratio(&ours, &theirs);
        assert!(r.below(0.97), "{r:?}");
    }

    #[test]
    fn an_estimate_that_meets_the_target_with_an_interval_that_does_not_is_not_shown() {
        let r = |point, low, high| RatioInterval { point, low, high };
        // Part 5's decode in bench/results.md at a778b1f: 0.984 [0.963–1.007] against ≥ 0.97.
        assert_eq!(r(0.984, 0.963, 1.007).verdict(0.97), Verdict::NotShown);
        assert_eq!(r(0.984, 0.975, 1.007).verdict(0.97), Verdict::Met);
        assert_eq!(r(0.97, 0.97, 0.97).verdict(0.97), Verdict::Met);
        // Below the target: missed, whether or not the interval reaches above it.
        assert_eq!(r(0.965, 0.95, 0.98).verdict(0.97), Verdict::Missed);
        assert_eq!(r(0.90, 0.88, 0.92).verdict(0.97), Verdict::Missed);
    }

    #[test]
    fn the_same_samples_give_the_same_interval() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(paired_ratio(&a, &b), paired_ratio(&a, &b));
    }

    #[test]
    fn empty_sides_do_not_panic() {
        let r = paired_ratio(&[], &[1.0]);
        assert_eq!((r.point, r.low, r.high), (0.0, 0.0, 0.0));
        let r = paired_ratio(&[1.0], &[0.0]);
        assert_eq!((r.point, r.low, r.high), (0.0, 0.0, 0.0));
    }
}
