//! Absolute objectives on shares: is the share of requests over a threshold (or failed) above
//! or below what an objective allows? The exact binomial test behind `gate.slo`
//! (docs: "SLO checks"), and the exact Clopper-Pearson interval for a share (goodput).
//!
//! An objective "the q-quantile of X is at most T" holds exactly when P(X > T) <= 1 - q, so
//! with `over` of `n` requests above T (failed requests counted as above), the objective is
//! shown **missed** when P(Bin(n, 1 - q) >= over) <= alpha and shown **met** when
//! P(Bin(n, 1 - q) <= over) <= alpha. This is the order-statistic confidence bound of the
//! quantile read the other way (stats::quantile): the lower bound is above T exactly when the
//! first test rejects. With the true quantile exactly at T, a false "missed" has probability at
//! most alpha (the test is exact, conservative for discrete counts).

use super::tests_exact::{binomial_cdf, binomial_sf};

/// The outcome of one share test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareTest {
    /// Requests counted.
    pub n: u64,
    /// Requests over the threshold (or failed).
    pub over: u64,
    /// The share the objective allows over the threshold (1 - q for a quantile objective).
    pub allowed: f64,
    /// P(Bin(n, allowed) >= over): small when the data show the objective missed.
    pub p_missed: f64,
    /// P(Bin(n, allowed) <= over): small when the data show the objective met.
    pub p_met: f64,
}

/// What the data show about an objective at level alpha.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Shown missed: P(Bin(n, allowed) >= over) <= alpha.
    Missed,
    /// Shown met: P(Bin(n, allowed) <= over) <= alpha.
    Met,
    /// Neither at this n.
    Undecided,
}

impl ShareTest {
    /// The decision at `alpha` (for "missed", the caller passes its multiplicity-adjusted level).
    pub fn decide(&self, alpha: f64) -> Decision {
        if self.p_missed <= alpha {
            Decision::Missed
        } else if self.p_met <= alpha {
            Decision::Met
        } else {
            Decision::Undecided
        }
    }
}

/// The exact one-sided tests of `over` of `n` against an allowed share in [0, 1]. An allowed
/// share of 0 (an error-rate objective of 0 %) is missed by a single request over and met by
/// none (p-values 0 and 1 at the extremes of the binomial).
pub fn share_test(over: u64, n: u64, allowed: f64) -> ShareTest {
    let allowed = if allowed.is_nan() {
        0.0
    } else {
        allowed.clamp(0.0, 1.0)
    };
    let over = over.min(n);
    let (p_missed, p_met) = if n == 0 {
        (1.0, 1.0)
    } else if allowed == 0.0 {
        (
            if over > 0 { 0.0 } else { 1.0 },
            if over == 0 { 0.0 } else { 1.0 },
        )
    } else {
        (
            binomial_sf(over, n, allowed),
            binomial_cdf(over, n, allowed),
        )
    };
    ShareTest {
        n,
        over,
        allowed,
        p_missed,
        p_met,
    }
}

/// The two-sided exact (Clopper-Pearson) `conf` interval of a share `k / n`: the bounds p at
/// which P(Bin(n, p) >= k) = (1 - conf) / 2 and P(Bin(n, p) <= k) = (1 - conf) / 2, found by
/// bisection (60 steps, to ~1e-18). `None` when n = 0 or `conf` is not in (0, 1).
pub fn clopper_pearson(k: u64, n: u64, conf: f64) -> Option<(f64, f64)> {
    if n == 0 || !(conf > 0.0 && conf < 1.0) {
        return None;
    }
    let k = k.min(n);
    let tail = (1.0 - conf) / 2.0;
    // P(Bin(n, p) >= k) rises with p: the lower bound is where it reaches `tail`.
    let lower = if k == 0 {
        0.0
    } else {
        bisect(|p| binomial_sf(k, n, p) < tail)
    };
    // P(Bin(n, p) <= k) falls with p: the upper bound is where it drops to `tail`.
    let upper = if k == n {
        1.0
    } else {
        bisect(|p| binomial_cdf(k, n, p) > tail)
    };
    Some((lower, upper))
}

/// The p in [0, 1] where `below(p)` turns from true to false (`below` is monotone).
fn bisect(below: impl Fn(f64) -> bool) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if below(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Requests per side needed, at the share observed now, for the test to decide either way at
/// `alpha`: the smallest n' >= n (at most `cap`) with the same share over the threshold that is
/// shown missed or met. `None` when even `cap` would not decide (the share sits at or very
/// near what the objective allows).
pub fn samples_to_decide(over: u64, n: u64, allowed: f64, alpha: f64, cap: u64) -> Option<u64> {
    if n == 0 || cap < n {
        return None;
    }
    let share = over.min(n) as f64 / n as f64;
    let decides = |m: u64| {
        let k = (share * m as f64).round() as u64;
        let t = share_test(k, m, allowed);
        t.p_missed <= alpha || t.p_met <= alpha
    };
    if decides(n) {
        return Some(n);
    }
    if !decides(cap) {
        return None;
    }
    // Not monotone to the request (rounding), but close: the first decisive n' by bisection.
    let (mut lo, mut hi) = (n, cap); // !decides(lo), decides(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if decides(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_test_matches_hand_computed_binomial_tails() {
        // 5 of 20 over a P90 threshold (allowed 10 %): P(Bin(20, 0.1) >= 5) = 0.043174 (scipy
        // binom.sf(4, 20, 0.1)); P(Bin(20, 0.1) <= 5) = 0.988747 (binom.cdf(5, 20, 0.1)).
        let t = share_test(5, 20, 0.1);
        assert!((t.p_missed - 0.043_174_5).abs() < 1e-6, "{t:?}");
        assert!((t.p_met - 0.988_747).abs() < 1e-6, "{t:?}");
        // 0 of 50 over a P90 threshold: P(Bin(50, 0.1) <= 0) = 0.9^50 = 0.005154.
        let t = share_test(0, 50, 0.1);
        assert!((t.p_met - 0.9f64.powi(50)).abs() < 1e-12, "{t:?}");
        assert_eq!(t.p_missed, 1.0);
    }

    #[test]
    fn a_zero_allowance_is_missed_by_one_and_met_by_none() {
        assert_eq!(share_test(1, 100, 0.0).p_missed, 0.0);
        assert_eq!(share_test(0, 100, 0.0).p_met, 0.0);
        assert_eq!(share_test(0, 0, 0.1).p_missed, 1.0);
    }

    #[test]
    fn clopper_pearson_matches_known_intervals() {
        // 95 % for 7 of 20: [0.153909, 0.592189] (scipy binomtest(7, 20).proportion_ci()).
        let (lo, hi) = clopper_pearson(7, 20, 0.95).unwrap();
        assert!(
            (lo - 0.153_909).abs() < 1e-5 && (hi - 0.592_189).abs() < 1e-5,
            "{lo} {hi}"
        );
        // 0 of 20: [0, 1 - 0.025^(1/20)] = [0, 0.168433]; 20 of 20 mirrors it.
        let (lo, hi) = clopper_pearson(0, 20, 0.95).unwrap();
        assert_eq!(lo, 0.0);
        assert!(
            (hi - (1.0 - 0.025f64.powf(1.0 / 20.0))).abs() < 1e-9,
            "{hi}"
        );
        let (lo, hi) = clopper_pearson(20, 20, 0.95).unwrap();
        assert!(
            (lo - 0.025f64.powf(1.0 / 20.0)).abs() < 1e-9 && hi == 1.0,
            "{lo}"
        );
        assert_eq!(clopper_pearson(1, 0, 0.95), None);
    }

    #[test]
    fn samples_to_decide_grows_as_the_share_nears_the_allowance() {
        // 4 of 20 over a P90 threshold: p_missed = P(Bin(20, .1) >= 4) = 0.133 (undecided at
        // 0.05); at 20 % over, 40 requests give P(Bin(40, .1) >= 8) = 0.0419.
        assert!(share_test(4, 20, 0.1).p_missed > 0.05);
        let n = samples_to_decide(4, 20, 0.1, 0.05, 5000).unwrap();
        assert!(share_test((0.2 * n as f64).round() as u64, n, 0.1).p_missed <= 0.05);
        assert!(share_test((0.2 * (n - 1) as f64).round() as u64, n - 1, 0.1).p_missed > 0.05);
        assert!((30..=45).contains(&n), "{n}");
        // 11 % over a 10 % allowance needs far more; exactly 10 % never decides.
        let far = samples_to_decide(11, 100, 0.1, 0.05, 100_000).unwrap();
        assert!(far > 1000, "{far}");
        assert_eq!(samples_to_decide(10, 100, 0.1, 0.05, 100_000), None);
        // Already decided: n itself.
        assert_eq!(samples_to_decide(10, 20, 0.1, 0.05, 5000), Some(20));
    }
}
