//! Sample quantiles and distribution-free order-statistic bounds: Hyndman & Fan (1996) type 7 (numpy's
//! default "linear"), Harrell & Davis (1982, Biometrika 69:635), and exact binomial bounds for X_(k)
//! (David & Nagaraja, "Order Statistics", s7.1; docs/gate.md).
//!
//! Quantile functions take a slice that is already sorted ascending and free of NaN (use [`sorted`]);
//! probabilities `p` are in [0, 1]; results are in the unit of the samples.

use statrs::function::beta::checked_beta_reg;

use super::tests_exact::{binomial_cdf, binomial_sf};

/// A copy of `xs` without NaN, sorted ascending (IEEE total order, so -inf first and +inf last).
///
/// Infinities are kept: perfgate counts failed requests as +inf latency (censored above every success).
/// O(n log n).
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// The type-7 sample quantile (Hyndman & Fan 1996; numpy's default `method="linear"`, R's default):
/// with h = (n - 1) p, returns x_(floor h) + (h - floor h) (x_(floor h + 1) - x_(floor h)) (0-based).
///
/// `sorted` must be ascending and NaN-free (see [`sorted`]). Returns `None` when `sorted` is empty or
/// `p` is NaN or outside [0, 1]. The interpolation is evaluated exactly as numpy 2.x `_lerp` does (from
/// the upper neighbour when the fraction is >= 0.5), so results agree with `numpy.quantile` to the ulp.
/// Between an infinite and a finite neighbour the infinite one wins (no NaN from inf - inf). O(1).
pub fn quantile_type7(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let h = (n - 1) as f64 * p;
    let lo = (h.floor() as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let t = h - lo as f64;
    Some(lerp(sorted[lo], sorted[hi], t))
}

/// numpy's `_lerp`: a + (b - a) t, or b - (b - a)(1 - t) when t >= 0.5; guarded for equal or infinite ends.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    if a == b || t <= 0.0 {
        return a;
    }
    if t >= 1.0 {
        return b;
    }
    match (a.is_finite(), b.is_finite()) {
        (true, true) => {
            let d = b - a;
            if t >= 0.5 {
                b - d * (1.0 - t)
            } else {
                a + d * t
            }
        }
        // Exactly one end (or both, -inf and +inf) is infinite: the nearer infinite end dominates.
        (false, true) => a,
        (true, false) => b,
        (false, false) => {
            if t < 0.5 {
                a
            } else {
                b
            }
        }
    }
}

/// The Harrell-Davis quantile estimate (Harrell & Davis 1982): sum_i w_i x_(i) with
/// w_i = I_{i/n}(a, b) - I_{(i-1)/n}(a, b), a = (n + 1) p, b = (n + 1)(1 - p), where I is the regularised
/// incomplete beta function (`statrs::function::beta::beta_reg`).
///
/// Evaluated in the equivalent summation-by-parts form x_(1) + sum_{i=1}^{n-1} (x_(i+1) - x_(i)) (1 - I_{i/n}(a, b)),
/// which stays inside [min, max] and loses no precision when the values are large and close; the result is
/// clamped to [x_(1), x_(n)] against rounding. `sorted` must be ascending and NaN-free (see [`sorted`]).
/// p = 0 gives the minimum and p = 1 the maximum (as `scipy.stats.mstats.hdquantiles`). Returns `None` when
/// `sorted` is empty, `p` is NaN or outside [0, 1], or statrs rejects an argument. Gaps with a negligible
/// weight are skipped, so +inf samples only propagate when they carry weight. O(n) incomplete-beta evaluations;
/// agrees with scipy to ~1e-15 relative for n up to 3 * 10^4 (tested).
pub fn harrell_davis(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let (first, last) = (sorted[0], sorted[n - 1]);
    if n == 1 || p == 0.0 {
        return Some(first);
    }
    if p == 1.0 {
        return Some(last);
    }
    let a = (n as f64 + 1.0) * p;
    let b = (n as f64 + 1.0) * (1.0 - p);
    let mut acc = first;
    for i in 1..n {
        let (lo, hi) = (sorted[i - 1], sorted[i]);
        if hi == lo {
            continue;
        }
        let upper_weight = 1.0 - checked_beta_reg(a, b, i as f64 / n as f64).ok()?;
        if upper_weight <= 0.0 {
            continue;
        }
        acc += (hi - lo) * upper_weight;
    }
    Some(acc.clamp(first, last))
}

/// The largest 1-based k such that X_(k) is a one-sided `conf` lower confidence bound for the
/// population p-quantile q_p, from the exact, distribution-free identity P(X_(k) <= q_p) = P(Bin(n, p) >= k)
/// (continuous distributions; David & Nagaraja s7.1; docs/gate.md).
///
/// Example: n = 100, p = 0.99, conf = 0.95 gives Some(97) (coverage 98.2 %; k = 98 covers only 92.1 %).
/// Returns `None` when even k = 1 fails (1 - (1 - p)^n < conf), when n = 0, or when `p` or `conf` is not
/// in (0, 1). O(n log n) (binary search over k, O(n) per binomial tail).
pub fn order_stat_lower_bound(n: usize, p: f64, conf: f64) -> Option<usize> {
    if n == 0 || !open_unit(p) || !open_unit(conf) {
        return None;
    }
    let n64 = n as u64;
    let covers = |k: usize| binomial_sf(k as u64, n64, p) >= conf;
    if !covers(1) {
        return None;
    }
    // P(Bin >= k) is non-increasing in k: find the last k in [1, n] that still covers.
    let (mut lo, mut hi) = (1usize, n); // covers(lo) holds; answer in [lo, hi]
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if covers(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// The smallest 1-based k such that X_(k) is a one-sided `conf` upper confidence bound for the
/// population p-quantile q_p: P(X_(k) >= q_p) = P(Bin(n, p) <= k - 1) >= conf (exact, distribution-free;
/// David & Nagaraja s7.1; docs/gate.md).
///
/// Returns `None` when even k = n fails, i.e. 1 - p^n < conf: P99 at 95 % needs n >= 299 (n = 299 gives
/// Some(299), n = 298 None) and P90 needs n >= 29 (see [`min_n_for_upper_bound`]); also `None` when n = 0 or
/// `p` or `conf` is not in (0, 1). O(n log n).
pub fn order_stat_upper_bound(n: usize, p: f64, conf: f64) -> Option<usize> {
    if n == 0 || !open_unit(p) || !open_unit(conf) {
        return None;
    }
    // Existence is decided with the same closed form as `min_n_for_upper_bound` so the two agree exactly.
    if !max_bounds_quantile(n, p, conf) {
        return None;
    }
    let n64 = n as u64;
    let covers = |k: usize| binomial_cdf(k as u64 - 1, n64, p) >= conf;
    // P(Bin <= k - 1) is non-decreasing in k: find the first k in [1, n] that covers (k = n does).
    let (mut lo, mut hi) = (1usize, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if covers(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// The smallest n for which a one-sided `conf` upper bound for the p-quantile exists, i.e. for which the
/// sample maximum X_(n) covers: 1 - p^n >= conf (docs/gate.md). P90 at 95 %: 29; P99 at 95 %: 299.
///
/// Returns 1 when p <= 0 or conf <= 0 (any single sample bounds it), and `usize::MAX` when no n suffices
/// (p >= 1, conf >= 1, or a NaN argument).
pub fn min_n_for_upper_bound(p: f64, conf: f64) -> usize {
    if p.is_nan() || conf.is_nan() || p >= 1.0 || conf >= 1.0 {
        return usize::MAX;
    }
    if p <= 0.0 || conf <= 0.0 {
        return 1;
    }
    // n >= ln(1 - conf) / ln(p); start just below the closed form and step to the exact boundary.
    let guess = ((1.0 - conf).ln() / p.ln()).ceil();
    if !guess.is_finite() || guess >= usize::MAX as f64 / 2.0 {
        return usize::MAX;
    }
    let mut n = (guess as usize).saturating_sub(2).max(1);
    while !max_bounds_quantile(n, p, conf) {
        n += 1;
    }
    n
}

/// 1 - p^n >= conf: the sample maximum is a one-sided `conf` upper bound for the p-quantile.
fn max_bounds_quantile(n: usize, p: f64, conf: f64) -> bool {
    // exp(n ln p) with n as f64 avoids powi's i32 limit.
    1.0 - (n as f64 * p.ln()).exp() >= conf
}

fn open_unit(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// A plain description of one sample: the count and the mean, extremes and type-7 quantiles, all in the
/// unit of the samples (perfgate: milliseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of samples used (NaN dropped).
    pub n: usize,
    /// Arithmetic mean (+inf if any sample is +inf).
    pub mean: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Type-7 median.
    pub p50: f64,
    /// Type-7 90th percentile.
    pub p90: f64,
    /// Type-7 99th percentile.
    pub p99: f64,
}

/// Summarise `xs` (any order; NaN dropped): count, mean, min, max and type-7 P50/P90/P99
/// (see [`quantile_type7`]). Returns `None` when no non-NaN sample remains. O(n log n).
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let s = sorted(xs);
    let n = s.len();
    if n == 0 {
        return None;
    }
    let mean = s.iter().sum::<f64>() / n as f64;
    Some(Summary {
        n,
        mean,
        min: s[0],
        max: s[n - 1],
        p50: quantile_type7(&s, 0.5)?,
        p90: quantile_type7(&s, 0.9)?,
        p99: quantile_type7(&s, 0.99)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    /// The same integer-valued sample generated in the Python reference script:
    /// `gb(n) = [((j*104729) % 1009)*2 for j in range(1, n+1)]`.
    fn gb(n: usize) -> Vec<f64> {
        (1..=n).map(|j| ((j * 104729 % 1009) * 2) as f64).collect()
    }

    const XS: [f64; 10] = [12.5, 3.0, 7.25, 100.0, 45.5, 8.0, 9.75, 15.0, 3.0, 60.125];
    const PS: [f64; 7] = [0.0, 0.1, 0.25, 0.5, 0.9, 0.99, 1.0];

    /// Reference: numpy 2.4.6, `[repr(float(np.quantile(XS, p))) for p in PS]`.
    #[test]
    fn type7_matches_numpy() {
        let want = [
            3.0,
            3.0,
            7.4375,
            11.125,
            64.11249999999998,
            96.41125000000001,
            100.0,
        ];
        let s = sorted(&XS);
        for (p, w) in PS.iter().zip(want) {
            assert_eq!(quantile_type7(&s, *p), Some(w), "p={p}");
        }
        // Reference: numpy 2.4.6, `[repr(float(np.quantile(gb(n), p))) for p in (0.5, 0.9, 0.99)]`.
        for (n, want) in [
            (20, [1112.0, 1867.2, 1956.12]),
            (300, [1029.0, 1848.2, 2010.02]),
            (1000, [1011.0, 1816.2, 1996.02]),
        ] {
            let s = sorted(&gb(n));
            for (p, w) in [0.5, 0.9, 0.99].iter().zip(want) {
                let got = quantile_type7(&s, *p).unwrap();
                assert!(close(got, w, 1e-14), "n={n} p={p}: {got} vs {w}");
            }
        }
    }

    /// Reference: scipy 1.17.1, `[repr(float(v)) for v in scipy.stats.mstats.hdquantiles(XS, prob=PS)]`
    /// and `scipy.stats.mstats.hdquantiles(gb(n), prob=[0.5, 0.9, 0.99])`.
    #[test]
    fn harrell_davis_matches_scipy() {
        let want = [
            3.0,
            3.5877939366293017,
            6.200575030329789,
            14.106906896948749,
            81.38042793467632,
            99.0078064007787,
            100.0,
        ];
        let s = sorted(&XS);
        for (p, w) in PS.iter().zip(want) {
            let got = harrell_davis(&s, *p).unwrap();
            assert!(close(got, w, 1e-12), "p={p}: {got} vs {w}");
        }
        for (n, want) in [
            (
                20,
                [1111.935681142385, 1875.6515458275505, 1962.4402687764778],
            ),
            (
                300,
                [1033.4921500916385, 1835.4933537286515, 2009.9687971297287],
            ),
            (
                1000,
                [1010.9999636391028, 1816.9999999999989, 1996.999999994482],
            ),
        ] {
            let s = sorted(&gb(n));
            for (p, w) in [0.5, 0.9, 0.99].iter().zip(want) {
                let got = harrell_davis(&s, *p).unwrap();
                assert!(close(got, w, 1e-11), "n={n} p={p}: {got} vs {w}");
            }
        }
        // Large n (statrs' incomplete beta stays accurate): scipy 1.17.1
        // `mstats.hdquantiles([(j*104729 % 100003) for j in range(1, n+1)], prob=[0.5, 0.9, 0.99])`.
        for (n, want) in [
            (
                10_000usize,
                [49971.32120375207, 89990.67498438463, 99005.57441932628],
            ),
            (
                30_000,
                [49996.276082953205, 89998.33846761228, 99004.44768838363],
            ),
        ] {
            let s = sorted(
                &(1..=n)
                    .map(|j| (j * 104729 % 100003) as f64)
                    .collect::<Vec<_>>(),
            );
            for (p, w) in [0.5, 0.9, 0.99].iter().zip(want) {
                let got = harrell_davis(&s, *p).unwrap();
                assert!(close(got, w, 1e-13), "n={n} p={p}: {got} vs {w}");
            }
        }
    }

    #[test]
    fn empty_nan_and_bad_p() {
        assert_eq!(sorted(&[f64::NAN, 2.0, f64::NAN, 1.0]), vec![1.0, 2.0]);
        assert_eq!(quantile_type7(&[], 0.5), None);
        assert_eq!(harrell_davis(&[], 0.5), None);
        assert_eq!(quantile_type7(&[1.0], f64::NAN), None);
        assert_eq!(harrell_davis(&[1.0, 2.0], 1.5), None);
        assert_eq!(quantile_type7(&[1.0], -0.1), None);
        assert_eq!(quantile_type7(&[7.0], 0.99), Some(7.0));
        assert_eq!(harrell_davis(&[7.0], 0.99), Some(7.0));
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[f64::NAN]), None);
    }

    #[test]
    fn infinite_samples_do_not_make_nan() {
        let s = sorted(&[1.0, 2.0, 3.0, f64::INFINITY]);
        assert_eq!(quantile_type7(&s, 1.0), Some(f64::INFINITY));
        assert_eq!(quantile_type7(&s, 0.9), Some(f64::INFINITY));
        assert_eq!(quantile_type7(&s, 0.5), Some(2.5));
        assert_eq!(harrell_davis(&s, 0.99), Some(f64::INFINITY));
        let s = sorted(&[f64::INFINITY, f64::INFINITY]);
        assert_eq!(quantile_type7(&s, 0.3), Some(f64::INFINITY));
        assert_eq!(harrell_davis(&s, 0.3), Some(f64::INFINITY));
    }

    #[test]
    fn summary_of_known_sample() {
        let s = summarize(&[4.0, f64::NAN, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!(s.mean, 2.5);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert_eq!(s.p50, 2.5);
        assert!(close(s.p90, 3.7, 1e-15));
        assert!(close(s.p99, 3.97, 1e-15));
    }

    /// The smallest n that bounds each tail quantile (docs/gate.md, "Checks"), checked against
    /// the exact binomial coverage.
    /// Coverage values: scipy 1.17.1 `stats.binom.sf(k-1, n, p)` (P(Bin(n,p) >= k)):
    /// n=100,p=.99: k=97 -> 0.9816259635553503, k=98 -> 0.9206267977478195;
    /// n=20: k=19 -> 0.9831406623643482, k=20 -> 0.8179069375972308.
    #[test]
    fn order_stat_table_2_1() {
        // "n = 100 ... P99, one-sided 95% lower bound: X(97) (98.1%)": the largest covering k is 97.
        assert_eq!(order_stat_lower_bound(100, 0.99, 0.95), Some(97));
        // The rest of that column: n = 20 -> X(19), 50 -> X(48), 300 -> X(294), 500 -> X(491).
        assert_eq!(order_stat_lower_bound(20, 0.99, 0.95), Some(19));
        assert_eq!(order_stat_lower_bound(50, 0.99, 0.95), Some(48));
        assert_eq!(order_stat_lower_bound(300, 0.99, 0.95), Some(294));
        assert_eq!(order_stat_lower_bound(500, 0.99, 0.95), Some(491));
        // P99 upper bound: none below n = 299, the max at n = 299 and n = 300.
        assert_eq!(order_stat_upper_bound(20, 0.99, 0.95), None);
        assert_eq!(order_stat_upper_bound(100, 0.99, 0.95), None);
        assert_eq!(order_stat_upper_bound(298, 0.99, 0.95), None);
        assert_eq!(order_stat_upper_bound(299, 0.99, 0.95), Some(299));
        assert_eq!(order_stat_upper_bound(300, 0.99, 0.95), Some(300));
        // P90: no upper bound at n = 20 ("X(15), inf"), one from n = 29.
        assert_eq!(order_stat_upper_bound(20, 0.9, 0.95), None);
        assert_eq!(order_stat_upper_bound(28, 0.9, 0.95), None);
        assert_eq!(order_stat_upper_bound(29, 0.9, 0.95), Some(29));
        assert_eq!(min_n_for_upper_bound(0.9, 0.95), 29);
        assert_eq!(min_n_for_upper_bound(0.99, 0.95), 299);
        // "368 at 97.5%".
        assert_eq!(min_n_for_upper_bound(0.99, 0.975), 368);
        // Lower bounds that do not exist: P1 from 5 samples at 95 % (1 - 0.99^5 = 0.049).
        assert_eq!(order_stat_lower_bound(5, 0.01, 0.95), None);
        assert_eq!(order_stat_lower_bound(0, 0.5, 0.95), None);
        assert_eq!(order_stat_upper_bound(0, 0.5, 0.95), None);
        assert_eq!(order_stat_upper_bound(10, f64::NAN, 0.95), None);
        assert_eq!(min_n_for_upper_bound(1.0, 0.95), usize::MAX);
        assert_eq!(min_n_for_upper_bound(f64::NAN, 0.95), usize::MAX);
        assert_eq!(min_n_for_upper_bound(0.0, 0.95), 1);
    }

    /// The returned k is the boundary: k covers and k+1 (lower) / k-1 (upper) does not.
    #[test]
    fn order_stat_bounds_are_extremal() {
        for n in [1usize, 2, 5, 20, 29, 50, 100, 299, 500] {
            for p in [0.5, 0.9, 0.99] {
                for conf in [0.9, 0.95, 0.975] {
                    let n64 = n as u64;
                    if let Some(k) = order_stat_lower_bound(n, p, conf) {
                        assert!(binomial_sf(k as u64, n64, p) >= conf);
                        assert!(k == n || binomial_sf(k as u64 + 1, n64, p) < conf);
                    } else {
                        assert!(binomial_sf(1, n64, p) < conf);
                    }
                    if let Some(k) = order_stat_upper_bound(n, p, conf) {
                        assert!(binomial_cdf(k as u64 - 1, n64, p) >= conf);
                        assert!(k == 1 || binomial_cdf(k as u64 - 2, n64, p) < conf);
                        assert!(n >= min_n_for_upper_bound(p, conf));
                    } else {
                        assert!(n < min_n_for_upper_bound(p, conf));
                    }
                }
            }
        }
    }

    fn sample() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(
            prop_oneof![1e-3f64..1e4, (1u32..50).prop_map(f64::from), Just(f64::NAN)],
            1..60,
        )
    }

    proptest! {
        #[test]
        fn quantiles_within_range_and_monotone(xs in sample(), p1 in 0.0f64..=1.0, p2 in 0.0f64..=1.0) {
            let s = sorted(&xs);
            prop_assume!(!s.is_empty());
            let (lo_p, hi_p) = if p1 <= p2 { (p1, p2) } else { (p2, p1) };
            let (min, max) = (s[0], s[s.len() - 1]);
            let q7 = (quantile_type7(&s, lo_p).unwrap(), quantile_type7(&s, hi_p).unwrap());
            let hd = (harrell_davis(&s, lo_p).unwrap(), harrell_davis(&s, hi_p).unwrap());
            for q in [q7.0, q7.1, hd.0, hd.1] {
                prop_assert!(min <= q && q <= max, "{q} outside [{min}, {max}]");
            }
            prop_assert!(q7.0 <= q7.1, "type 7 not monotone: {q7:?}");
            // HD is monotone in p mathematically; allow a few ulps of incomplete-beta rounding.
            prop_assert!(hd.0 <= hd.1 + 1e-12 * max.abs(), "HD not monotone: {hd:?}");
        }

        #[test]
        fn summary_is_ordered(xs in sample()) {
            if let Some(s) = summarize(&xs) {
                prop_assert!(s.min <= s.p50 && s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.max);
                prop_assert!(s.min <= s.mean * (1.0 + 1e-12) && s.mean <= s.max * (1.0 + 1e-12));
            } else {
                prop_assert!(xs.iter().all(|x| x.is_nan()));
            }
        }
    }
}
