//! The Mann-Whitney U test (Mann & Whitney 1947, Ann. Math. Statist. 18:50): exact null distribution by the
//! Mann-Whitney recursion when there are no ties and n_c n_b <= [`EXACT_MAX_PAIRS`], else the normal
//! approximation with tie and continuity corrections (Hollander & Wolfe, "Nonparametric Statistical
//! Methods", ch. 4; docs/gate.md). Also the critical count k behind the Moses interval.
//!
//! U_c = #{(i, j): c_i > b_j} + 0.5 #{(i, j): c_i = b_j}. The test is rank-based, so it gives the same
//! answer on latencies and on ln(latency). NaN samples are dropped; +inf (censored) samples are ranked
//! above every finite one and tie with each other.

use super::normal::{normal_quantile, normal_sf};
use super::quantile::sorted;

/// The exact null distribution is used when there are no ties in the pooled sample and n_c * n_b is at
/// most this (n = 50 per side); at that size the normal approximation is within about 1e-3 (absolute) of the
/// exact p-value.
/// The exact computation costs O((n_c n_b)^2 / 4) flops (about 1.6e6 at the limit).
pub const EXACT_MAX_PAIRS: usize = 2500;

/// Whether the Mann-Whitney p-value and the Moses interval use the exact null distribution: no ties in the
/// pooled sample and `n_c * n_b <= EXACT_MAX_PAIRS` (both sizes at least 1).
pub fn mann_whitney_exact_applies(n_c: usize, n_b: usize, has_ties: bool) -> bool {
    !has_ties && n_c > 0 && n_b > 0 && n_c.saturating_mul(n_b) <= EXACT_MAX_PAIRS
}

/// What the test needs from the two samples.
struct Ranked {
    m: usize,
    n: usize,
    /// U_c, a multiple of 0.5.
    u: f64,
    /// Any equal values in the pooled sample.
    ties: bool,
    /// sum over tie groups of (t^3 - t), for the variance correction.
    tie_term: f64,
}

fn analyse(c: &[f64], b: &[f64]) -> Option<Ranked> {
    let cs = sorted(c);
    let bs = sorted(b);
    let (m, n) = (cs.len(), bs.len());
    if m == 0 || n == 0 {
        return None;
    }
    // U_c by a merge: for each c (ascending), count the b strictly below and equal to it.
    let mut u = 0.0;
    let (mut below, mut upto) = (0usize, 0usize);
    for &x in &cs {
        while below < n && bs[below] < x {
            below += 1;
        }
        upto = upto.max(below);
        while upto < n && bs[upto] <= x {
            upto += 1;
        }
        u += below as f64 + 0.5 * (upto - below) as f64;
    }
    // Tie groups of the pooled sample.
    let mut pooled = Vec::with_capacity(m + n);
    pooled.extend_from_slice(&cs);
    pooled.extend_from_slice(&bs);
    pooled.sort_unstable_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut ties = false;
    let mut start = 0;
    for i in 1..=pooled.len() {
        if i == pooled.len() || pooled[i] != pooled[start] {
            let t = (i - start) as f64;
            if t > 1.0 {
                ties = true;
                tie_term += t * t * t - t;
            }
            start = i;
        }
    }
    Some(Ranked {
        m,
        n,
        u,
        ties,
        tie_term,
    })
}

/// The Mann-Whitney statistic U_c = #{(i, j): c_i > b_j} + 0.5 #{c_i = b_j}, in [0, n_c n_b], after
/// dropping NaN. `None` when either sample is empty. O((n_c + n_b) log(n_c + n_b)).
pub fn mann_whitney_u(c: &[f64], b: &[f64]) -> Option<f64> {
    analyse(c, b).map(|r| r.u)
}

/// One-sided Mann-Whitney p-value for H1 "c is stochastically greater than b" (e.g. the candidate is
/// slower): P(U >= U_c) under H0 of exchangeable samples
/// (`scipy.stats.mannwhitneyu(c, b, alternative="greater")`).
///
/// Exact (Mann-Whitney recursion) when [`mann_whitney_exact_applies`]; otherwise the normal approximation
/// z = (U_c - n_c n_b / 2 - 0.5) / sigma with sigma^2 = n_c n_b / 12 ((N + 1) - sum(t^3 - t) / (N (N - 1))),
/// N = n_c + n_b, as scipy's `method="asymptotic"` (continuity correction on). NaN samples are dropped;
/// returns `None` when either sample is then empty. When every value is tied (sigma = 0) the p-value is 1.
/// The result is in [0, 1].
pub fn mann_whitney_greater(c: &[f64], b: &[f64]) -> Option<f64> {
    let r = analyse(c, b)?;
    let p = if mann_whitney_exact_applies(r.m, r.n, r.ties) {
        let pmf = u_null_pmf(r.m, r.n);
        // No ties: U is an integer.
        let u = r.u.round() as usize;
        pmf.get(u..).map_or(0.0, |tail| tail.iter().sum())
    } else {
        let (m, n) = (r.m as f64, r.n as f64);
        let big_n = m + n;
        let var = m * n / 12.0 * ((big_n + 1.0) - r.tie_term / (big_n * (big_n - 1.0)));
        if var.is_nan() || var <= 0.0 {
            return Some(1.0);
        }
        normal_sf((r.u - m * n / 2.0 - 0.5) / var.sqrt())
    };
    Some(p.clamp(0.0, 1.0))
}

/// One-sided Mann-Whitney p-value for H1 "c is stochastically less than b" (e.g. the candidate is faster):
/// the mirror of [`mann_whitney_greater`], equal to `mann_whitney_greater(b, c)`
/// (`scipy.stats.mannwhitneyu(c, b, alternative="less")`). Same conventions.
pub fn mann_whitney_less(c: &[f64], b: &[f64]) -> Option<f64> {
    mann_whitney_greater(b, c)
}

/// One-sided exact Mann-Whitney p-value for "c is stochastically greater than b" with ties
/// counted against the alternative: U = the number of pairs with c strictly above b, and
/// p = P0(U' >= U) under the exact no-ties null distribution. Conservative (never below the
/// tie-corrected p-value), and unlike [`mann_whitney_greater`] it stays exact when values tie:
/// a tie between two `b` values (rounded nightly medians tie often) changes nothing, where the
/// normal approximation that ties switch to costs a small sample most of its power (4 nights all
/// above 20: exact 1/10626, approximate 0.001). Falls back to [`mann_whitney_greater`] above
/// [`EXACT_MAX_PAIRS`] pairs. NaN values are dropped; `None` when a side is then empty.
pub fn mann_whitney_greater_exact_ties_against(c: &[f64], b: &[f64]) -> Option<f64> {
    let c: Vec<f64> = c.iter().copied().filter(|x| !x.is_nan()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| !x.is_nan()).collect();
    if c.is_empty() || b.is_empty() {
        return None;
    }
    if c.len().saturating_mul(b.len()) > EXACT_MAX_PAIRS {
        return mann_whitney_greater(&c, &b);
    }
    let u = c
        .iter()
        .map(|x| b.iter().filter(|y| x > y).count())
        .sum::<usize>();
    let pmf = u_null_pmf(c.len(), b.len());
    Some(
        pmf.get(u..)
            .map_or(0.0, |t| t.iter().sum::<f64>())
            .clamp(0.0, 1.0),
    )
}

/// The mirror of [`mann_whitney_greater_exact_ties_against`]: "c is stochastically less than b".
pub fn mann_whitney_less_exact_ties_against(c: &[f64], b: &[f64]) -> Option<f64> {
    mann_whitney_greater_exact_ties_against(b, c)
}

/// The Moses critical count k for a one-sided (1 - `alpha_one_sided`) bound on the shift between samples of
/// sizes `n_c` and `n_b` (Hollander & Wolfe ch. 4; docs/gate.md): with the N = n_c n_b pairwise
/// differences sorted, D_(k+1) is the lower bound and D_(N-k) the upper bound.
///
/// - `exact = true`: the largest k with P0(U <= k) <= alpha under the exact null distribution (valid when
///   [`mann_whitney_exact_applies`]); then "lower bound > 0" is equivalent to the exact one-sided p-value
///   being <= alpha. A relative slack of 1e-12 absorbs rounding when P0(U <= k) equals alpha exactly.
///   Honoured only up to n_c n_b = [`EXACT_MAX_PAIRS`] (the cost grows as N^2); above it the approximation
///   below is used.
/// - `exact = false`: k = floor(N/2 - z_{1-alpha} sqrt(N (n_c + n_b + 1) / 12)).
///
/// k is capped at floor((N - 1) / 2), so D_(k+1) <= median <= D_(N-k). Returns `None` when no bound exists at
/// this size and level (e.g. 2 vs 2 at alpha = 0.05, where even P0(U = 0) = 1/6 > alpha; or a negative
/// approximate k), when a size is 0 or N overflows, or when `alpha_one_sided` is not in (0, 0.5].
pub fn moses_critical_k(
    n_c: usize,
    n_b: usize,
    alpha_one_sided: f64,
    exact: bool,
) -> Option<usize> {
    let alpha = alpha_one_sided;
    if n_c == 0 || n_b == 0 || !(alpha > 0.0 && alpha <= 0.5) {
        return None;
    }
    let big_n = n_c.checked_mul(n_b)?;
    let max_k = (big_n - 1) / 2;
    let k = if exact && big_n <= EXACT_MAX_PAIRS {
        let pmf = u_null_pmf(n_c, n_b);
        let limit = alpha * (1.0 + 1e-12);
        let mut cum = 0.0;
        let mut k = None;
        for (u, &q) in pmf.iter().enumerate() {
            cum += q;
            if cum > limit {
                break;
            }
            k = Some(u);
        }
        k?
    } else {
        let (m, n, nn) = (n_c as f64, n_b as f64, big_n as f64);
        let v = nn / 2.0 - normal_quantile(1.0 - alpha) * (nn * (m + n + 1.0) / 12.0).sqrt();
        if v.is_nan() || v < 0.0 {
            return None;
        }
        v.floor() as usize
    };
    Some(k.min(max_k))
}

/// The exact null distribution of U for sample sizes (m, n), as probabilities indexed by u = 0..=m n, from
/// the Mann-Whitney (1947) recursion on the largest pooled observation:
/// P_{i,j}(u) = i/(i+j) P_{i-1,j}(u - j) + j/(i+j) P_{i,j-1}(u). Only additions of positive terms, so the
/// tails keep their relative precision. O(m^2 n^2 / 4) time, O(max(m,n) min(m,n)^2) memory.
fn u_null_pmf(m: usize, n: usize) -> Vec<f64> {
    // The law is the same for (m, n) and (n, m); recurse over the larger so the stored rows stay short.
    let (big, small) = if m >= n { (m, n) } else { (n, m) };
    // prev[j] = law for (i - 1, j); initially i = 0: U = 0 surely.
    let mut prev: Vec<Vec<f64>> = vec![vec![1.0]; small + 1];
    for i in 1..=big {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(small + 1);
        cur.push(vec![1.0]);
        for j in 1..=small {
            let mut v = vec![0.0; i * j + 1];
            let w_i = i as f64 / (i + j) as f64;
            let w_j = j as f64 / (i + j) as f64;
            // The largest observation is from the i-group: it beats all j others.
            for (u, &q) in prev[j].iter().enumerate() {
                v[u + j] += w_i * q;
            }
            for (u, &q) in cur[j - 1].iter().enumerate() {
                v[u] += w_j * q;
            }
            cur.push(v);
        }
        prev = cur;
    }
    prev.swap_remove(small)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    /// The integer samples of the Python reference script (no ties within or across: c odd, b even):
    /// `gc(m, shift) = [((i*7919) % 1009)*2 + 1 + shift for i in range(1, m+1)]`,
    /// `gb(n) = [((j*104729) % 1009)*2 for j in range(1, n+1)]`.
    pub(crate) fn gc(m: usize, shift: usize) -> Vec<f64> {
        (1..=m)
            .map(|i| ((i * 7919 % 1009) * 2 + 1 + shift) as f64)
            .collect()
    }
    pub(crate) fn gb(n: usize) -> Vec<f64> {
        (1..=n).map(|j| ((j * 104729 % 1009) * 2) as f64).collect()
    }

    /// Reference: scipy 1.17.1 `stats.mannwhitneyu(c, b, alternative=alt, method=meth).pvalue`
    /// (`repr(float(...))`), c = [1.1, 2.3, 3.7, 4.2, 5.9], b = [0.5, 1.0, 2.0, 3.0]:
    /// exact greater 0.05555555555555555, exact less 0.9682539682539683 (ours: exact, no ties, N = 20).
    #[test]
    fn small_exact_matches_scipy() {
        let c = [1.1, 2.3, 3.7, 4.2, 5.9];
        let b = [0.5, 1.0, 2.0, 3.0];
        assert_eq!(mann_whitney_u(&c, &b), Some(17.0));
        assert!(close(
            mann_whitney_greater(&c, &b).unwrap(),
            0.05555555555555555,
            1e-13
        ));
        assert!(close(
            mann_whitney_less(&c, &b).unwrap(),
            0.9682539682539683,
            1e-13
        ));
    }

    /// Reference: scipy 1.17.1 `stats.mannwhitneyu(gc(m, shift), gb(n), alternative="greater"|"less",
    /// method="exact")`.
    #[test]
    fn exact_matches_scipy() {
        let cases = [
            (20, 200, 20, 0.2472617482483517, 0.7611547383177697),
            (20, 0, 20, 0.670601071128227, 0.33915310170086005),
            (50, 100, 50, 0.27398433937522715, 0.7283003843199228),
            (12, 300, 30, 0.0852143374449742, 0.9190995248955267),
        ];
        for (m, shift, n, greater, less) in cases {
            let (c, b) = (gc(m, shift), gb(n));
            assert!(mann_whitney_exact_applies(m, n, false));
            let g = mann_whitney_greater(&c, &b).unwrap();
            let l = mann_whitney_less(&c, &b).unwrap();
            assert!(
                close(g, greater, 1e-11),
                "{m}/{shift}/{n}: {g} vs {greater}"
            );
            assert!(close(l, less, 1e-11), "{m}/{shift}/{n}: {l} vs {less}");
        }
    }

    /// Reference: scipy 1.17.1 `stats.mannwhitneyu(gc(m, shift), gb(n), alternative=..., method="asymptotic")`
    /// for sizes beyond the exact limit (m n > 2500), and for a tied sample
    /// ct = [10, 12, 12, 15, 15, 15, 20, 22, 30, 31], bt = [9, 10, 12, 14, 15, 18, 18, 19].
    #[test]
    fn asymptotic_matches_scipy() {
        let cases = [
            (60, 100, 50, 0.2955410107919093, 0.7065286281689453),
            (300, 40, 200, 0.3447150091113298, 0.6555176779625249),
        ];
        for (m, shift, n, greater, less) in cases {
            let (c, b) = (gc(m, shift), gb(n));
            assert!(!mann_whitney_exact_applies(m, n, false));
            let g = mann_whitney_greater(&c, &b).unwrap();
            let l = mann_whitney_less(&c, &b).unwrap();
            assert!(
                close(g, greater, 1e-12),
                "{m}/{shift}/{n}: {g} vs {greater}"
            );
            assert!(close(l, less, 1e-12), "{m}/{shift}/{n}: {l} vs {less}");
        }
        let ct = [10.0, 12.0, 12.0, 15.0, 15.0, 15.0, 20.0, 22.0, 30.0, 31.0];
        let bt = [9.0, 10.0, 12.0, 14.0, 15.0, 18.0, 18.0, 19.0];
        assert!(close(
            mann_whitney_greater(&ct, &bt).unwrap(),
            0.1514243528218917,
            1e-12
        ));
        assert!(close(
            mann_whitney_less(&ct, &bt).unwrap(),
            0.8686300728183995,
            1e-12
        ));
    }

    /// Exact k: the largest k with P0(U <= k) <= alpha, from scipy 1.17.1's exact null distribution
    /// (`scipy.stats._mannwhitneyu._MWU(m, n).cdf(k)`, scanning k upward): (10,10,.05) -> 27 (also the
    /// textbook one-tailed 5 % critical U), (20,20,.05) -> 138, (12,30,.01) -> 96, (50,50,.05) -> 1010,
    /// (3,3,.05) -> 0 (P0(U = 0) = 1/20 exactly), (2,2,.05) -> none.
    /// Approximate k: `math.floor(N/2 - stats.norm.ppf(1-a)*math.sqrt(N*(m+n+1)/12))`: (60,50,.05) -> 1225,
    /// (1000,1000,.05) -> 478759.
    #[test]
    fn moses_k_matches_reference() {
        assert_eq!(moses_critical_k(10, 10, 0.05, true), Some(27));
        assert_eq!(moses_critical_k(20, 20, 0.05, true), Some(138));
        assert_eq!(moses_critical_k(12, 30, 0.01, true), Some(96));
        assert_eq!(moses_critical_k(30, 12, 0.01, true), Some(96));
        assert_eq!(moses_critical_k(50, 50, 0.05, true), Some(1010));
        assert_eq!(moses_critical_k(3, 3, 0.05, true), Some(0));
        assert_eq!(moses_critical_k(2, 2, 0.05, true), None);
        assert_eq!(moses_critical_k(60, 50, 0.05, false), Some(1225));
        assert_eq!(moses_critical_k(1000, 1000, 0.05, false), Some(478759));
        // Too large for the exact distribution: the approximation is used either way.
        assert_eq!(moses_critical_k(1000, 1000, 0.05, true), Some(478759));
        assert_eq!(moses_critical_k(0, 5, 0.05, false), None);
        assert_eq!(moses_critical_k(5, 5, 0.0, true), None);
        assert_eq!(moses_critical_k(5, 5, 0.7, true), None);
        assert_eq!(moses_critical_k(5, 5, f64::NAN, false), None);
        // alpha = 0.5 caps k at the median: D_(k+1) <= median <= D_(N-k).
        assert_eq!(moses_critical_k(1, 1, 0.5, true), Some(0));
        assert_eq!(moses_critical_k(4, 4, 0.5, false), Some(7));
    }

    #[test]
    fn null_pmf_is_a_symmetric_distribution() {
        for (m, n) in [(1, 1), (1, 7), (3, 5), (8, 8), (13, 4)] {
            let pmf = u_null_pmf(m, n);
            assert_eq!(pmf.len(), m * n + 1);
            assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            for u in 0..pmf.len() {
                assert!((pmf[u] - pmf[m * n - u]).abs() < 1e-15);
            }
        }
        // P(U = 0) = 1 / C(m + n, m): C(8, 3) = 56.
        assert!(close(u_null_pmf(3, 5)[0], 1.0 / 56.0, 1e-14));
    }

    #[test]
    fn empty_nan_and_all_tied() {
        assert_eq!(mann_whitney_greater(&[], &[1.0]), None);
        assert_eq!(mann_whitney_greater(&[f64::NAN], &[1.0]), None);
        assert_eq!(mann_whitney_less(&[1.0], &[]), None);
        assert_eq!(mann_whitney_greater(&[2.0; 5], &[2.0; 7]), Some(1.0));
        assert_eq!(mann_whitney_u(&[1.0, f64::NAN, 3.0], &[2.0]), Some(1.0));
        // Censored (+inf) candidate samples count as the slowest.
        let c = [f64::INFINITY; 10];
        let b: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(mann_whitney_u(&c, &b), Some(100.0));
        assert!(mann_whitney_greater(&c, &b).unwrap() < 1e-4);
    }

    fn sample() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(
            prop_oneof![
                0.1f64..1e3,
                (1u32..6).prop_map(f64::from),
                Just(f64::NAN),
                Just(f64::INFINITY)
            ],
            0..70,
        )
    }

    proptest! {
        #[test]
        fn p_values_in_unit_interval(c in sample(), b in sample()) {
            let g = mann_whitney_greater(&c, &b);
            let l = mann_whitney_less(&c, &b);
            let nonempty = |x: &[f64]| x.iter().any(|v| !v.is_nan());
            prop_assert_eq!(g.is_some(), nonempty(&c) && nonempty(&b));
            if let (Some(g), Some(l)) = (g, l) {
                prop_assert!((0.0..=1.0).contains(&g) && (0.0..=1.0).contains(&l));
                // The two one-sided p-values cover everything: g + l >= 1 (up to rounding).
                prop_assert!(g + l >= 1.0 - 1e-9, "g={} l={}", g, l);
            }
        }
    }
}
