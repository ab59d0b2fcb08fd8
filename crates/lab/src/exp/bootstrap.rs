//! The run-to-run spread of a percentile difference: a percentile bootstrap of the increase of
//! one sample's p50/p75/p90 over another's (both resampled with replacement, independently), so
//! a table can say whether a difference is larger than what repeating the run would move it; and
//! the same for a median alone.

use crate::measure::percentile;
use crate::report::pct_increase;
use rand::{Rng, SeedableRng};

/// Resamples per interval.
const ROUNDS: usize = 1000;

/// 95 % intervals `[lo, hi]` of the increase (%) of `b`'s p50/p75/p90 over `a`'s; NaN when either
/// sample is empty. Deterministic (fixed seed), so re-rendering a report gives the same numbers.
pub fn increase_ci(a: &[f64], b: &[f64]) -> [[f64; 2]; 3] {
    if a.is_empty() || b.is_empty() {
        return [[f64::NAN; 2]; 3];
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7e57);
    let mut incs: [Vec<f64>; 3] = Default::default();
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..ROUNDS {
        for x in ra.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        for (i, p) in [50.0, 75.0, 90.0].into_iter().enumerate() {
            incs[i].push(pct_increase(percentile(&ra, p), percentile(&rb, p)));
        }
    }
    incs.map(|v| [percentile(&v, 2.5), percentile(&v, 97.5)])
}

/// 95 % interval `[lo, hi]` of the median of `v` (percentile bootstrap, resampled with
/// replacement); NaN for an empty sample. Deterministic like [`increase_ci`].
pub fn median_ci(v: &[f64]) -> [f64; 2] {
    if v.is_empty() {
        return [f64::NAN; 2];
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7e57);
    let mut r = vec![0.0; v.len()];
    let meds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            for x in r.iter_mut() {
                *x = v[rng.random_range(0..v.len())];
            }
            percentile(&r, 50.0)
        })
        .collect();
    [percentile(&meds, 2.5), percentile(&meds, 97.5)]
}

/// True when the interval excludes zero (the difference is outside the run-to-run spread).
pub fn significant(ci: [f64; 2]) -> bool {
    ci[0] > 0.0 || ci[1] < 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shift_is_found_and_noise_is_not() {
        let a: Vec<f64> = (0..200).map(|i| 100.0 + (i % 50) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.3).collect();
        let ci = increase_ci(&a, &b);
        for c in ci {
            assert!(significant(c), "{c:?}");
            assert!(c[0] <= 30.0 + 1e-9 && c[1] >= 30.0 - 1e-9, "{c:?}");
        }
        let same = increase_ci(&a, &a);
        assert!(!significant(same[0]), "{same:?}");
        assert!(increase_ci(&[], &a)[0][0].is_nan());
    }

    #[test]
    fn a_median_interval_holds_the_median() {
        let a: Vec<f64> = (0..101).map(f64::from).collect();
        let [lo, hi] = median_ci(&a);
        assert!(lo < 50.0 && hi > 50.0 && lo > 30.0 && hi < 70.0, "{lo} {hi}");
        assert_eq!(median_ci(&[7.0; 5]), [7.0, 7.0]);
        assert!(median_ci(&[])[0].is_nan());
    }
}
