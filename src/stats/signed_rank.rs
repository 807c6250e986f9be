//! The Wilcoxon signed-rank test on paired log differences, with its Hodges-Lehmann estimate (the
//! median of the Walsh averages) and the distribution-free interval from the Walsh averages' order
//! statistics (Wilcoxon 1945, Biometrics Bulletin 1:80; Hodges & Lehmann 1963; Hollander & Wolfe,
//! "Nonparametric Statistical Methods", ch. 3; docs/gate.md "Paired requests").
//!
//! Input: one difference per matched request, d_i = ln(candidate_i) - ln(reference_i) (the caller
//! forms them; with k reference runs, the mean of the k logs). Under "no change" each d_i is
//! symmetric about 0; the Walsh averages (d_i + d_j) / 2, i <= j, M = n (n + 1) / 2 of them, are
//! never materialised: their order statistics are found by bisection on a two-pointer count,
//! O(n log n + 64 n) time and O(n) memory.
//!
//! T+ = the sum of the ranks of |d_i| over the positive d_i. Exact null distribution (every sign
//! equally likely) when there are no zeros and no ties among |d_i| and n <= [`EXACT_MAX_N`], else
//! the normal approximation with zeros dropped (Wilcoxon's convention), mid-ranks for ties, the tie
//! correction of the variance and a continuity correction of 1/2.

use super::normal::{normal_quantile, normal_sf};
use super::shift::Shift;

/// Up to this many pairs, with no zero and no tie, the p-values and the interval use the exact
/// null distribution of T+ (O(n^3 / 4) flops: ~2e6 at the limit).
pub const EXACT_MAX_N: usize = 200;

/// The paired shift of a candidate against its reference, on the ratio scale, and the one-sided
/// signed-rank p-values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedShift {
    /// exp(median of the Walsh averages) and its one-sided (1 - alpha) bounds exp(W_(k+1)) and
    /// exp(W_(M-k)); 0 and +inf when no bound exists at this n.
    pub shift: Shift,
    /// Pairs used (non-NaN differences).
    pub n: usize,
    /// One-sided p-value of "the candidate is slower" (T+ large).
    pub p_greater: f64,
    /// One-sided p-value of "the candidate is faster" (T+ small).
    pub p_less: f64,
}

/// The signed-rank analysis of log differences `d` at one-sided level `alpha_one_sided`: the
/// Hodges-Lehmann estimate exp(median of the Walsh averages), one-sided (1 - alpha) bounds
/// exp(W_(k+1)) and exp(W_(M-k)) with k from [`signed_rank_critical_k`], and the one-sided p-values.
/// In the exact case `lower > 1` exactly when `p_greater <= alpha`.
///
/// NaN and infinite differences are dropped. `None` when no difference is left or `alpha_one_sided`
/// is not in (0, 0.5].
pub fn signed_rank_log_shift(d: &[f64], alpha_one_sided: f64) -> Option<PairedShift> {
    if !(alpha_one_sided > 0.0 && alpha_one_sided <= 0.5) {
        return None;
    }
    let mut d: Vec<f64> = d.iter().copied().filter(|x| x.is_finite()).collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable_by(f64::total_cmp);
    let n = d.len();
    let m = n * (n + 1) / 2;
    let ranked = rank_abs(&d);
    let exact = ranked.exact && n <= EXACT_MAX_N;
    let theta = if m % 2 == 1 {
        walsh_select(&d, m / 2)
    } else {
        (walsh_select(&d, m / 2 - 1) + walsh_select(&d, m / 2)) / 2.0
    };
    let (lower, upper) = match signed_rank_critical_k(n, alpha_one_sided, exact) {
        Some(k) => (walsh_select(&d, k).exp(), walsh_select(&d, m - 1 - k).exp()),
        None => (0.0, f64::INFINITY),
    };
    let (p_greater, p_less) = if exact {
        let pmf = t_null_pmf(n);
        // T+ is an integer here (no ties): P(T+ >= t) and P(T+ <= t).
        let t = ranked.t_plus.round() as usize;
        let upper_tail: f64 = pmf[t..].iter().sum();
        let lower_tail: f64 = pmf[..=t].iter().sum();
        (upper_tail.min(1.0), lower_tail.min(1.0))
    } else {
        ranked.normal_p()
    };
    Some(PairedShift {
        shift: Shift {
            ratio: theta.exp(),
            lower,
            upper,
        },
        n,
        p_greater,
        p_less,
    })
}

/// The critical count k of the one-sided (1 - alpha) signed-rank interval for n pairs: with the
/// M = n (n + 1) / 2 Walsh averages sorted, W_(k+1) is the lower bound and W_(M-k) the upper.
///
/// - `exact = true` (honoured up to n = [`EXACT_MAX_N`]): the largest k with P0(T+ <= k) <= alpha
///   under the exact null distribution (relative slack 1e-12 for a tail equal to alpha).
/// - `exact = false`: k = floor(M/2 - z_{1-alpha} sqrt(n (n + 1) (2n + 1) / 24)).
///
/// Capped at floor((M - 1) / 2). `None` when no bound exists (e.g. n = 6 at alpha 0.01, where
/// P0(T+ = 0) = 1/64), n is 0, or alpha is not in (0, 0.5].
pub fn signed_rank_critical_k(n: usize, alpha_one_sided: f64, exact: bool) -> Option<usize> {
    let alpha = alpha_one_sided;
    if n == 0 || !(alpha > 0.0 && alpha <= 0.5) {
        return None;
    }
    let m = n.checked_mul(n + 1)? / 2;
    let max_k = (m - 1) / 2;
    let k = if exact && n <= EXACT_MAX_N {
        let limit = alpha * (1.0 + 1e-12);
        let mut cum = 0.0;
        let mut k = None;
        for (t, &q) in t_null_pmf(n).iter().enumerate() {
            cum += q;
            if cum > limit {
                break;
            }
            k = Some(t);
        }
        k?
    } else {
        let nf = n as f64;
        let v = m as f64 / 2.0
            - normal_quantile(1.0 - alpha) * (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        if v.is_nan() || v < 0.0 {
            return None;
        }
        v.floor() as usize
    };
    Some(k.min(max_k))
}

/// The exact null distribution of T+ for n pairs, P0(T+ = t) for t = 0..=n(n+1)/2: each rank r
/// enters with probability 1/2, p_r(t) = (p_{r-1}(t) + p_{r-1}(t - r)) / 2. Only halvings and sums of
/// positive terms, so the tails keep their relative precision.
fn t_null_pmf(n: usize) -> Vec<f64> {
    let m = n * (n + 1) / 2;
    let mut p = vec![0.0; m + 1];
    p[0] = 1.0;
    let mut top = 0;
    for r in 1..=n {
        top += r;
        for t in (0..=top).rev() {
            let with = if t >= r { p[t - r] } else { 0.0 };
            p[t] = (p[t] + with) / 2.0;
        }
    }
    p
}

/// What the p-values need from the differences.
struct RankedAbs {
    /// T+ with mid-ranks, over the non-zero differences.
    t_plus: f64,
    /// Non-zero differences.
    nonzero: usize,
    /// Sum over tie groups of |d| (zeros excluded) of t^3 - t.
    tie_term: f64,
    /// No zero and no tie: the exact distribution applies.
    exact: bool,
}

fn rank_abs(d: &[f64]) -> RankedAbs {
    let zeros = d.iter().filter(|&&x| x == 0.0).count();
    let mut abs: Vec<(f64, bool)> = d
        .iter()
        .filter(|&&x| x != 0.0)
        .map(|&x| (x.abs(), x > 0.0))
        .collect();
    abs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let (mut t_plus, mut tie_term, mut ties) = (0.0, 0.0, false);
    let mut start = 0;
    for i in 1..=abs.len() {
        if i == abs.len() || abs[i].0 != abs[start].0 {
            let t = (i - start) as f64;
            // Mid-rank of positions start..i (1-based ranks start+1..=i).
            let rank = (start + 1 + i) as f64 / 2.0;
            t_plus += rank * abs[start..i].iter().filter(|a| a.1).count() as f64;
            if t > 1.0 {
                ties = true;
                tie_term += t * t * t - t;
            }
            start = i;
        }
    }
    RankedAbs {
        t_plus,
        nonzero: abs.len(),
        tie_term,
        exact: zeros == 0 && !ties,
    }
}

impl RankedAbs {
    /// (P(T+ >= t), P(T+ <= t)) by the normal approximation with tie and continuity corrections;
    /// (1, 1) when every difference is zero.
    fn normal_p(&self) -> (f64, f64) {
        let n = self.nonzero as f64;
        let var = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - self.tie_term / 48.0;
        if self.nonzero == 0 || var <= 0.0 {
            return (1.0, 1.0);
        }
        let mu = n * (n + 1.0) / 4.0;
        let sd = var.sqrt();
        (
            normal_sf((self.t_plus - mu - 0.5) / sd).min(1.0),
            normal_sf((mu - self.t_plus - 0.5) / sd).min(1.0),
        )
    }
}

/// The `k`-th smallest (0-based, k < n(n+1)/2) Walsh average (d_i + d_j) / 2, i <= j, of `d` (sorted
/// ascending, finite, non-empty): bisection on the pair sum s with a two-pointer count of
/// #{i <= j: d_i + d_j <= s}, then the largest pair sum not above the bracket's top.
fn walsh_select(d: &[f64], k: usize) -> f64 {
    let n = d.len();
    // #{i <= j: d_i + d_j <= s}, and the largest such sum.
    let count = |s: f64| -> (usize, f64) {
        let (mut c, mut best) = (0usize, f64::NEG_INFINITY);
        let mut j = n; // exclusive: d_i + d_{j'} <= s for every j' < j, from the top
        for i in 0..n {
            while j > 0 && d[i] + d[j - 1] > s {
                j -= 1;
            }
            if j <= i {
                break;
            }
            c += j - i;
            best = best.max(d[i] + d[j - 1]);
        }
        (c, best)
    };
    let (mut lo, mut hi) = (2.0 * d[0], 2.0 * d[n - 1]);
    if count(lo).0 > k {
        return d[0];
    }
    // Invariant: count(lo) <= k < count(hi).
    for _ in 0..200 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if count(mid).0 > k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    count(hi).1 / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every Walsh average, sorted: the definition the selection must agree with.
    fn walsh_brute(d: &[f64]) -> Vec<f64> {
        let mut w = Vec::new();
        for i in 0..d.len() {
            for j in i..d.len() {
                w.push((d[i] + d[j]) / 2.0);
            }
        }
        w.sort_unstable_by(f64::total_cmp);
        w
    }

    #[test]
    fn walsh_averages_of_1_2_3_by_hand() {
        // (1,1)=1 (1,2)=1.5 (1,3)=2 (2,2)=2 (2,3)=2.5 (3,3)=3
        let d = [1.0, 2.0, 3.0];
        let got: Vec<f64> = (0..6).map(|k| walsh_select(&d, k)).collect();
        assert_eq!(got, vec![1.0, 1.5, 2.0, 2.0, 2.5, 3.0]);
    }

    #[test]
    fn walsh_selection_matches_brute_force() {
        let mut x = 12345u64;
        for n in [1usize, 2, 5, 17, 40] {
            let d: Vec<f64> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.4) * 3.0
                })
                .collect();
            let mut s = d.clone();
            s.sort_unstable_by(f64::total_cmp);
            let w = walsh_brute(&s);
            for (k, &want) in w.iter().enumerate() {
                assert_eq!(walsh_select(&s, k), want, "n {n} k {k}");
            }
        }
    }

    #[test]
    fn null_distribution_of_n3_by_hand() {
        // Subsets of {1,2,3} by sum: 0:{} 1:{1} 2:{2} 3:{3},{1,2} 4:{1,3} 5:{2,3} 6:{1,2,3}.
        let p = t_null_pmf(3);
        let want = [1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0].map(|c| c / 8.0);
        assert_eq!(p, want.to_vec());
    }

    #[test]
    fn exact_critical_k_matches_the_published_table() {
        // n = 8: P0(T+ <= t) = 1, 2, 3, 5, 7, 10, 14 / 256 for t = 0..6. At 0.01: 2/256 =
        // 0.0078 <= 0.01 < 3/256, k = 1; at 0.05: 10/256 = 0.039 <= 0.05 < 14/256, k = 5 (the
        // one-sided 5 % critical value of Wilcoxon's table for n = 8).
        assert_eq!(signed_rank_critical_k(8, 0.01, true), Some(1));
        assert_eq!(signed_rank_critical_k(8, 0.05, true), Some(5));
        // n = 6: P0(T+ = 0) = 1/64 > 0.01: no bound.
        assert_eq!(signed_rank_critical_k(6, 0.01, true), None);
        // n = 7: 1/128 = 0.0078 <= 0.01 < 2/128: k = 0.
        assert_eq!(signed_rank_critical_k(7, 0.01, true), Some(0));
    }

    #[test]
    fn approximate_critical_k_by_hand() {
        // n = 60: M = 1830, var = 60 * 61 * 121 / 24 = 18452.5, z_0.99 = 2.3263479:
        // 915 - 2.3263479 * 135.840 = 598.989, k = 598.
        assert_eq!(signed_rank_critical_k(60, 0.01, false), Some(598));
        assert_eq!(signed_rank_critical_k(0, 0.01, false), None);
        assert_eq!(signed_rank_critical_k(8, 0.0, true), None);
    }

    #[test]
    fn one_to_eight_by_hand() {
        // d = 1..8 (all positive, no ties): T+ = 36, P(T+ >= 36) = 1/256; P(T+ <= 36) = 1.
        // Walsh averages: symmetric about 4.5, so the estimate is 4.5; k = 1 at 0.01: the 2nd
        // smallest (1 + 2) / 2 = 1.5 and the 2nd largest (7 + 8) / 2 = 7.5.
        let d: Vec<f64> = (1..=8).map(f64::from).collect();
        let r = signed_rank_log_shift(&d, 0.01).unwrap();
        assert_eq!(r.n, 8);
        assert!((r.shift.ratio - 4.5f64.exp()).abs() < 1e-9);
        assert!((r.shift.lower - 1.5f64.exp()).abs() < 1e-12);
        assert!((r.shift.upper - 7.5f64.exp()).abs() < 1e-9);
        assert_eq!(r.p_greater, 1.0 / 256.0);
        assert_eq!(r.p_less, 1.0);
    }

    #[test]
    fn mixed_signs_by_hand() {
        // d = -0.5, 1, 2, -3, 4 (|d| ranks 1, 2, 3, 4, 5): T+ = 2 + 3 + 5 = 10 of 15.
        // n = 5 counts by sum t = 0..15: 1 1 1 2 2 3 3 3 3 3 3 2 2 1 1 1 (of 32).
        // P(T+ >= 10) = (3 + 2 + 2 + 1 + 1 + 1) / 32 = 10/32; P(T+ <= 10) = 25/32.
        let r = signed_rank_log_shift(&[-0.5, 1.0, 2.0, -3.0, 4.0], 0.05).unwrap();
        assert!((r.p_greater - 10.0 / 32.0).abs() < 1e-15);
        assert!((r.p_less - 25.0 / 32.0).abs() < 1e-15);
        // Walsh averages of (-3, -0.5, 1, 2, 4), 15 of them: -3 -1.75 -1 -0.5 -0.5 0.25 0.5 0.75
        // 1 1.5 1.75 2 2.5 3 4; the 8th is 0.75.
        assert!((r.shift.ratio - 0.75f64.exp()).abs() < 1e-12);
        // n = 5 at 0.05: P0(T+ = 0) = 1/32 = 0.031 <= 0.05 < 2/32: k = 0, the extremes.
        assert!((r.shift.lower - (-3.0f64).exp()).abs() < 1e-12);
        assert!((r.shift.upper - 4.0f64.exp()).abs() < 1e-9);
    }

    #[test]
    fn ties_and_zeros_use_the_normal_approximation_by_hand() {
        // d = 0, 1, 1, -2: the zero is dropped; |d| = 1, 1, 2 with mid-ranks 1.5, 1.5, 3:
        // T+ = 3, n = 3, mu = 3, var = 3 * 4 * 7 / 24 - (8 - 2) / 48 = 3.5 - 0.125 = 3.375.
        // P(T+ >= 3) = sf((3 - 3 - 0.5) / sqrt 3.375) = sf(-0.27217) = 0.60726.
        let r = signed_rank_log_shift(&[0.0, 1.0, 1.0, -2.0], 0.05).unwrap();
        assert!((r.p_greater - 0.607_26).abs() < 1e-4, "{}", r.p_greater);
        assert!((r.p_less - 0.607_26).abs() < 1e-4, "{}", r.p_less);
        assert_eq!(r.n, 4);
    }

    #[test]
    fn exact_lower_bound_above_zero_iff_significant() {
        let mut x = 99u64;
        for trial in 0..200 {
            let n = 7 + trial % 25;
            let shift = (trial % 7) as f64 * 0.15;
            let d: Vec<f64> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5 + shift
                })
                .collect();
            let r = signed_rank_log_shift(&d, 0.01).unwrap();
            assert_eq!(r.shift.lower > 1.0, r.p_greater <= 0.01, "trial {trial}");
            assert_eq!(r.shift.upper < 1.0, r.p_less <= 0.01, "trial {trial}");
            assert!(r.shift.lower <= r.shift.ratio && r.shift.ratio <= r.shift.upper);
        }
    }

    #[test]
    fn nothing_to_test() {
        assert_eq!(signed_rank_log_shift(&[], 0.01), None);
        assert_eq!(
            signed_rank_log_shift(&[f64::NAN, f64::INFINITY], 0.01),
            None
        );
        assert_eq!(signed_rank_log_shift(&[0.1], 0.0), None);
        // One pair: an estimate, no bound at 0.01.
        let r = signed_rank_log_shift(&[0.1], 0.01).unwrap();
        assert!((r.shift.ratio - 0.1f64.exp()).abs() < 1e-15);
        assert_eq!((r.shift.lower, r.shift.upper), (0.0, f64::INFINITY));
    }
}
