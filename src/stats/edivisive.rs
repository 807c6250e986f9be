//! E-divisive means with a Student t significance test, the rule of Apache Otava (formerly
//! DataStax Hunter; Fleming et al. 2023, after Matteson & James 2014), for comparison in
//! `perfgate calibrate --nightly`: the newest `window` nights are segmented offline by
//! recursive bisection, each split at the largest energy statistic and kept when Welch's t
//! test of the two sides has p < `max_p`. Re-run each night, so a change point reported once
//! can move or vanish. Pure.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The rule's parameters (Otava's defaults: window 50, max p 0.001).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OtavaRule {
    pub window: usize,
    pub max_p: f64,
    /// Fewest values on each side of a split.
    pub min_size: usize,
}

impl Default for OtavaRule {
    fn default() -> Self {
        OtavaRule {
            window: 50,
            max_p: 0.001,
            min_size: 3,
        }
    }
}

/// The change points (indexes of a segment's first value) of `x` segmented offline, ascending.
pub fn segment(x: &[f64], rule: &OtavaRule) -> Vec<usize> {
    let mut out = Vec::new();
    let mut todo = vec![(0usize, x.len())];
    while let Some((a, b)) = todo.pop() {
        let Some(k) = best_split(&x[a..b], rule.min_size) else {
            continue;
        };
        let (l, r) = (&x[a..a + k], &x[a + k..b]);
        if welch_p(l, r).is_some_and(|p| p < rule.max_p) {
            out.push(a + k);
            todo.push((a, a + k));
            todo.push((a + k, b));
        }
    }
    out.sort_unstable();
    out
}

/// The split k (min_size..=len - min_size) with the largest E-divisive statistic (alpha 1):
/// mn/(m+n) x (2/(mn) sum|x - y| - sum|x - x'|/C(m,2) - sum|y - y'|/C(n,2)).
fn best_split(x: &[f64], min_size: usize) -> Option<usize> {
    let n = x.len();
    if n < 2 * min_size.max(2) {
        return None;
    }
    // prefix sums of the distance matrix: s[i][j] = sum over p < i, q < j of |x_p - x_q|
    let mut s = vec![vec![0.0; n + 1]; n + 1];
    for i in 0..n {
        for j in 0..n {
            s[i + 1][j + 1] = s[i][j + 1] + s[i + 1][j] - s[i][j] + (x[i] - x[j]).abs();
        }
    }
    let block =
        |i0: usize, i1: usize, j0: usize, j1: usize| s[i1][j1] - s[i0][j1] - s[i1][j0] + s[i0][j0];
    let mut best: Option<(f64, usize)> = None;
    for k in min_size.max(2)..=n - min_size.max(2) {
        let (m, r) = (k as f64, (n - k) as f64);
        let between = block(0, k, k, n) * 2.0 / (m * r);
        let within_l = block(0, k, 0, k) / (m * (m - 1.0));
        let within_r = block(k, n, k, n) / (r * (r - 1.0));
        let q = m * r / (m + r) * (between - within_l - within_r);
        if best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Two-sided Welch t test p-value of `a` against `b`; `None` when a side has fewer than 2
/// values or both are constant.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let mv = |x: &[f64]| {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        (
            m,
            x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0),
            n,
        )
    };
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, va, na), (mb, vb, nb)) = (mv(a), mv(b));
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 <= 0.0 {
        return None;
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    let d = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
    Some((2.0 * d.sf(t.abs())).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_step_is_split_where_it_is_and_noise_is_not() {
        // 10 values alternating 100 +- 1, then 10 at 120 +- 1: the energy statistic peaks at the
        // step (k = 10); Welch t = 20 / sqrt(1.111/10 * 2) = 42.4, p ~ 1e-19 < 0.001
        let x: Vec<f64> = (0..20)
            .map(|i| if i < 10 { 100.0 } else { 120.0 } + if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert_eq!(segment(&x, &OtavaRule::default()), vec![10]);
        assert!(segment(&x[..10], &OtavaRule::default()).is_empty());
        // Welch by hand: [1, 3] vs [5, 7]: means 2 and 6, variances 2 and 2, se = sqrt(2/2 + 2/2)
        // = sqrt 2, t = -2.828, df = 4 / (1/1 + 1/1) = 2: p = 2 x 0.0528 = 0.1056
        let p = welch_p(&[1.0, 3.0], &[5.0, 7.0]).unwrap();
        assert!((p - 0.10557).abs() < 1e-4, "{p}");
    }
}
