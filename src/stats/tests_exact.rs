//! Exact tests on counts: binomial tails and the one-sided Fisher exact test (Fisher 1935; hypergeometric
//! tail given both margins, as in Agresti, "Categorical Data Analysis", s3.5), used for error rates and the
//! tail-exceedance check (docs/gate.md).
//!
//! Tails are summed from their largest term outward (the smaller tail directly, the larger one as a
//! complement), with each term from the previous by the exact pmf ratio, so small p-values keep their
//! relative precision. All results are probabilities in [0, 1].

use statrs::function::factorial::ln_binomial;

/// P(Bin(n, p) >= k): the binomial survival function at k - 1 (`scipy.stats.binom.sf(k - 1, n, p)`).
///
/// 1 for k = 0, 0 for k > n. `p` is clamped to [0, 1]; a NaN `p` returns NaN. O(n - k) or O(k).
pub fn binomial_sf(k: u64, n: u64, p: f64) -> f64 {
    if p.is_nan() {
        return f64::NAN;
    }
    let p = p.clamp(0.0, 1.0);
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    if p == 0.0 {
        return 0.0;
    }
    if p == 1.0 {
        return 1.0;
    }
    if k as f64 > n as f64 * p {
        binom_upper(k, n, p)
    } else {
        1.0 - binom_lower(k - 1, n, p)
    }
    .clamp(0.0, 1.0)
}

/// P(Bin(n, p) <= k): the binomial CDF (`scipy.stats.binom.cdf(k, n, p)`).
///
/// 1 for k >= n. `p` is clamped to [0, 1]; a NaN `p` returns NaN. O(n - k) or O(k).
pub fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if p.is_nan() {
        return f64::NAN;
    }
    let p = p.clamp(0.0, 1.0);
    if k >= n || p == 0.0 {
        return 1.0;
    }
    if p == 1.0 {
        return 0.0;
    }
    if (k as f64) < n as f64 * p {
        binom_lower(k, n, p)
    } else {
        1.0 - binom_upper(k + 1, n, p)
    }
    .clamp(0.0, 1.0)
}

fn binom_ln_pmf(j: u64, n: u64, p: f64) -> f64 {
    ln_binomial(n, j) + j as f64 * p.ln() + (n - j) as f64 * (-p).ln_1p()
}

/// sum_{j=k}^{n} pmf(j) for 0 < p < 1 and k > n p - 1 (so terms decrease from j = k on).
fn binom_upper(k: u64, n: u64, p: f64) -> f64 {
    let odds = p / (1.0 - p);
    let mut term = binom_ln_pmf(k, n, p).exp();
    let mut sum = 0.0;
    let mut j = k;
    loop {
        sum += term;
        if j == n || term == 0.0 {
            return sum;
        }
        term *= (n - j) as f64 / (j + 1) as f64 * odds;
        j += 1;
    }
}

/// sum_{j=0}^{k} pmf(j) for 0 < p < 1 and k < n p (so terms decrease from j = k down).
fn binom_lower(k: u64, n: u64, p: f64) -> f64 {
    let inv_odds = (1.0 - p) / p;
    let mut term = binom_ln_pmf(k, n, p).exp();
    let mut sum = 0.0;
    let mut j = k;
    loop {
        sum += term;
        if j == 0 || term == 0.0 {
            return sum;
        }
        term *= j as f64 / (n - j + 1) as f64 * inv_odds;
        j -= 1;
    }
}

/// One-sided Fisher exact p-value for H1 "the candidate's proportion x_c/n_c exceeds the baseline's
/// x_b/n_b" (odds ratio > 1): P(X >= x_c) where X ~ Hypergeometric(total n_c + n_b, successes x_c + x_b,
/// draws n_c), i.e. `scipy.stats.fisher_exact([[x_c, n_c - x_c], [x_b, n_b - x_b]], alternative="greater")`.
///
/// Exact under H0 "same proportion" whatever the common rate. Returns 1 (no evidence) for an impossible
/// table (x_c > n_c or x_b > n_b) and for empty groups. O(min(x_c + x_b, n_c)).
pub fn fisher_greater(x_c: u64, n_c: u64, x_b: u64, n_b: u64) -> f64 {
    if x_c > n_c || x_b > n_b {
        return 1.0;
    }
    let total = n_c + n_b;
    let succ = x_c + x_b;
    let lo = succ.saturating_sub(n_b); // smallest possible X
    let hi = succ.min(n_c); // largest possible X
    if x_c <= lo || total == 0 {
        return 1.0;
    }
    let mean = n_c as f64 * succ as f64 / total as f64;
    let h = Hyper {
        total,
        succ,
        draws: n_c,
    };
    if x_c as f64 > mean {
        h.upper(x_c, hi)
    } else {
        1.0 - h.lower(lo, x_c - 1)
    }
    .clamp(0.0, 1.0)
}

/// One-sided Fisher exact p-value for H1 "the candidate's proportion x_c/n_c is below the baseline's"
/// (`fisher_exact(..., alternative="less")`), the mirror of [`fisher_greater`]: P(X <= x_c) under the same
/// hypergeometric law, computed as `fisher_greater(x_b, n_b, x_c, n_c)`. Same conventions and errors.
pub fn fisher_less(x_c: u64, n_c: u64, x_b: u64, n_b: u64) -> f64 {
    fisher_greater(x_b, n_b, x_c, n_c)
}

/// Hypergeometric law of the number of successes among `draws` taken from `total` items, `succ` of them
/// successes.
struct Hyper {
    total: u64,
    succ: u64,
    draws: u64,
}

impl Hyper {
    fn ln_pmf(&self, x: u64) -> f64 {
        ln_binomial(self.succ, x) + ln_binomial(self.total - self.succ, self.draws - x)
            - ln_binomial(self.total, self.draws)
    }

    /// pmf(x + 1) / pmf(x).
    fn ratio_up(&self, x: u64) -> f64 {
        let (t, s, d, x) = (
            self.total as f64,
            self.succ as f64,
            self.draws as f64,
            x as f64,
        );
        (s - x) * (d - x) / ((x + 1.0) * (t - s - d + x + 1.0))
    }

    /// sum_{x=from}^{to} pmf(x), with `from` at or above the mode (terms decrease upward).
    fn upper(&self, from: u64, to: u64) -> f64 {
        let mut term = self.ln_pmf(from).exp();
        let mut sum = 0.0;
        let mut x = from;
        loop {
            sum += term;
            if x >= to || term == 0.0 {
                return sum;
            }
            term *= self.ratio_up(x);
            x += 1;
        }
    }

    /// sum_{x=from}^{to} pmf(x), with `to` at or below the mode (terms decrease downward).
    fn lower(&self, from: u64, to: u64) -> f64 {
        let mut term = self.ln_pmf(to).exp();
        let mut sum = 0.0;
        let mut x = to;
        loop {
            sum += term;
            if x <= from || term == 0.0 {
                return sum;
            }
            term /= self.ratio_up(x - 1);
            x -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    /// Reference: scipy 1.17.1, `repr(float(stats.binom.sf(k - 1, n, p)))`.
    #[test]
    fn binomial_sf_matches_scipy() {
        let cases = [
            (97, 100, 0.99, 0.9816259635553503),
            (98, 100, 0.99, 0.9206267977478195),
            (19, 20, 0.99, 0.9831406623643482),
            (20, 20, 0.99, 0.8179069375972308),
            (1, 20, 0.01, 0.18209306240276915),
            (30, 1000, 0.02, 0.02069651867323949),
            (5, 10, 0.5, 0.623046875),
            (0, 10, 0.3, 1.0),
            (11, 10, 0.3, 0.0),
            (299, 299, 0.99, 0.04953625663766233),
            (7, 50, 0.01, 6.85283841310547e-07),
        ];
        for (k, n, p, want) in cases {
            let got = binomial_sf(k, n, p);
            assert!(
                close(got, want, 1e-12),
                "sf({k},{n},{p}) = {got}, want {want}"
            );
            if k >= 1 {
                let cdf = binomial_cdf(k - 1, n, p);
                assert!(
                    (cdf + got - 1.0).abs() < 1e-14,
                    "cdf + sf != 1 at {k},{n},{p}"
                );
            }
        }
    }

    #[test]
    fn binomial_edges() {
        assert_eq!(binomial_sf(3, 10, 0.0), 0.0);
        assert_eq!(binomial_sf(10, 10, 1.0), 1.0);
        assert_eq!(binomial_sf(0, 0, 0.5), 1.0);
        assert_eq!(binomial_sf(1, 0, 0.5), 0.0);
        assert!(binomial_sf(1, 10, f64::NAN).is_nan());
        assert_eq!(binomial_sf(1, 10, 2.0), 1.0); // clamped to p = 1
        assert_eq!(binomial_cdf(10, 10, 0.3), 1.0);
        assert_eq!(binomial_cdf(0, 10, 1.0), 0.0);
        assert_eq!(binomial_cdf(0, 10, 0.0), 1.0);
        // A far tail stays relatively precise: P(Bin(1000, 0.001) >= 20) is about 2.0e-19 (not 0 or 1e-16 noise).
        let tiny = binomial_sf(20, 1000, 0.001);
        assert!(tiny > 1e-20 && tiny < 1e-18, "{tiny}");
    }

    /// Reference: scipy 1.17.1,
    /// `stats.fisher_exact([[x_c, n_c - x_c], [x_b, n_b - x_b]], alternative="greater").pvalue` and
    /// `alternative="less"`, printed with `repr(float(...))`.
    #[test]
    fn fisher_matches_scipy() {
        let cases = [
            ((5, 20, 1, 20), 0.09088209088209087, 0.9899019899019899),
            ((3, 100, 0, 100), 0.12311557788944724, 1.0),
            ((30, 300, 12, 300), 0.0029635197549266897, 0.998987603476341),
            ((0, 20, 0, 20), 1.0, 1.0),
            ((10, 20, 2, 20), 0.006907073925983827, 0.9993761837477076),
            ((1, 20, 5, 20), 0.9899019899019899, 0.0908820908820909),
            ((20, 20, 0, 20), 7.254444551924844e-12, 1.0),
            (
                (45, 1000, 20, 1000),
                0.0011156365094368206,
                0.9995488911096911,
            ),
        ];
        for ((xc, nc, xb, nb), greater, less) in cases {
            let g = fisher_greater(xc, nc, xb, nb);
            let l = fisher_less(xc, nc, xb, nb);
            assert!(
                close(g, greater, 1e-10),
                "greater {xc}/{nc} vs {xb}/{nb}: {g} want {greater}"
            );
            assert!(
                close(l, less, 1e-10),
                "less {xc}/{nc} vs {xb}/{nb}: {l} want {less}"
            );
        }
    }

    #[test]
    fn fisher_edges() {
        assert_eq!(fisher_greater(0, 0, 0, 0), 1.0);
        assert_eq!(fisher_greater(5, 4, 0, 10), 1.0); // impossible table
        assert_eq!(fisher_greater(1, 1, 0, 0), 1.0); // no baseline: X is fixed
        assert_eq!(fisher_greater(0, 10, 5, 10), 1.0);
    }

    proptest! {
        #[test]
        fn probabilities_in_unit_interval(n in 0u64..400, k in 0u64..420, p in 0.0f64..=1.0) {
            let sf = binomial_sf(k, n, p);
            prop_assert!((0.0..=1.0).contains(&sf));
            prop_assert!(binomial_sf(k + 1, n, p) <= sf + 1e-15);
            let cdf = binomial_cdf(k, n, p);
            prop_assert!((0.0..=1.0).contains(&cdf));
            prop_assert!((cdf + binomial_sf(k + 1, n, p) - 1.0).abs() < 1e-12);
        }

        #[test]
        fn fisher_in_unit_interval_and_monotone(nc in 0u64..200, nb in 0u64..200, a in 0u64..200, b in 0u64..200) {
            let (xc, xb) = (a.min(nc), b.min(nb));
            let g = fisher_greater(xc, nc, xb, nb);
            prop_assert!((0.0..=1.0).contains(&g));
            // One more candidate event is stronger evidence of "greater".
            if xc < nc {
                prop_assert!(fisher_greater(xc + 1, nc, xb, nb) <= g + 1e-12);
            }
            // The two one-sided p-values overlap at the observed table: they sum to 1 + P(X = x_c) >= 1.
            prop_assert!(g + fisher_less(xc, nc, xb, nb) >= 1.0 - 1e-12);
        }
    }
}
