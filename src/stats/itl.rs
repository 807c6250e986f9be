//! Bounded inter-token latency (ITL) per request, and pooled quantiles over such summaries.
//!
//! A request keeps its gaps exactly while it has at most [`ITL_KEEP`] of them (every short
//! stream, so results and baselines of short streams are unchanged). A longer request keeps
//! [`ITL_KEEP`] points: its gaps at the evenly spaced ranks `round(j (n - 1) / (K - 1))`,
//! `j = 0..K` (so the smallest and largest gap are exact), and the number `n` of gaps they
//! stand for. Memory and results size per request are then bounded by `K`, whatever the
//! number of tokens.
//!
//! Error bound: each point stands for `n / K` gaps; the points are order statistics at most
//! `(n - 1) / (2 (K - 1))` ranks away from any rank they stand for, so a quantile of one request's
//! points, or of several requests pooled with each point weighted `n / K`, is an exact
//! quantile of the true gaps at a probability within `1 / (K - 1)` (0.79 percentage points for
//! K = 128) of the one asked: the reported ITL P99 lies between the true P98.2 and P99.8, and
//! the maximum is exact (`pooled_matches_exact_within_the_bound`).

use super::quantile::Summary;

/// Points kept per request (see the module docs for the error bound).
pub const ITL_KEEP: usize = 128;

/// Gaps given as `(gap_ms, count)` (a gap over an event carrying k tokens counted as k gaps of
/// gap/k), in arrival order. Returns the points to keep and, when they are a summary rather
/// than every gap, the number of gaps they stand for. Memory: the input, never the count.
pub fn compress(gaps: &[(f64, u64)]) -> (Vec<f64>, Option<u64>) {
    let total: u64 = gaps.iter().fold(0u64, |a, g| a.saturating_add(g.1));
    if total <= ITL_KEEP as u64 {
        let mut out = Vec::with_capacity(total as usize);
        for &(g, k) in gaps {
            out.extend(std::iter::repeat_n(g, k as usize));
        }
        return (out, None);
    }
    let mut sorted: Vec<(f64, u64)> = gaps
        .iter()
        .copied()
        .filter(|g| !g.0.is_nan() && g.1 > 0)
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let k = ITL_KEEP as u64;
    let mut out = Vec::with_capacity(ITL_KEEP);
    let (mut idx, mut below) = (0usize, 0u64); // `below`: gaps in sorted[..idx]
    for j in 0..k {
        // rank (0-based) of the j-th point among the `total` gaps
        let rank = ((j as f64) * ((total - 1) as f64) / ((k - 1) as f64)).round() as u64;
        while idx < sorted.len() && below + sorted[idx].1 <= rank {
            below += sorted[idx].1;
            idx += 1;
        }
        match sorted.get(idx).or(sorted.last()) {
            Some(g) => out.push(g.0),
            None => break,
        }
    }
    (out, Some(total))
}

/// Count, mean, min, max and type-7 P50/P90/P99 over every request's ITL, each request given
/// as its points and, when they are a summary, the number of gaps they stand for (weight
/// `count / points` each). With no summary among them this is exactly
/// [`super::quantile::summarize`] of all gaps; otherwise within the bound in the module docs.
pub fn pooled_summary<'a>(
    requests: impl Iterator<Item = (&'a [f64], Option<u64>)>,
) -> Option<Summary> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for (p, count) in requests {
        let p: Vec<f64> = p.iter().copied().filter(|x| !x.is_nan()).collect();
        if p.is_empty() {
            continue;
        }
        let w = match count {
            Some(c) if c as f64 > p.len() as f64 => c as f64 / p.len() as f64,
            _ => 1.0,
        };
        pts.extend(p.into_iter().map(|x| (x, w)));
    }
    if pts.is_empty() {
        return None;
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pts.iter().map(|p| p.1).sum();
    let mean = pts.iter().map(|p| p.0 * p.1).sum::<f64>() / total;
    // cumulative weight after each point: the point covers expanded positions [c - w, c)
    let mut cum = Vec::with_capacity(pts.len());
    let mut c = 0.0;
    for p in &pts {
        c += p.1;
        cum.push(c);
    }
    let at = |pos: f64| -> f64 {
        let i = cum.partition_point(|&c| c <= pos);
        pts[i.min(pts.len() - 1)].0
    };
    let q = |p: f64| -> f64 {
        let h = p * (total - 1.0).max(0.0);
        let (lo, hi) = (h.floor(), h.ceil());
        let (a, b) = (at(lo), at(hi));
        a + (h - lo) * (b - a)
    };
    Some(Summary {
        n: total.round() as usize,
        mean,
        min: pts[0].0,
        max: pts[pts.len() - 1].0,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::quantile::{quantile_type7, sorted, summarize};
    use proptest::prelude::*;

    #[test]
    fn short_streams_are_kept_exactly_in_order() {
        let (p, c) = compress(&[(20.0, 1), (10.0, 3), (5.0, 1)]);
        assert_eq!(p, vec![20.0, 10.0, 10.0, 10.0, 5.0]);
        assert_eq!(c, None);
    }

    /// Cumulative usage 1, 2, 2^40 once asked for 2^40 gaps (an 8 TB allocation, exit 134):
    /// the summary has ITL_KEEP points whatever the count.
    #[test]
    fn a_huge_count_keeps_bounded_points() {
        let (p, c) = compress(&[(10.0, 1), (1e-9, 1 << 40)]);
        assert_eq!(p.len(), ITL_KEEP);
        assert_eq!(c, Some((1 << 40) + 1));
        assert_eq!(p[ITL_KEEP - 1], 10.0); // the largest gap is exact
        assert_eq!(p[0], 1e-9);
    }

    #[test]
    fn exact_when_no_summary() {
        let a = [3.0, 1.0, 2.0];
        let b = [10.0, 7.5];
        let got = pooled_summary([(&a[..], None), (&b[..], None)].into_iter()).unwrap();
        let want = summarize(&[3.0, 1.0, 2.0, 10.0, 7.5]).unwrap();
        assert_eq!(got, want);
    }

    proptest! {
        /// The documented bound: the pooled quantile of summaries is an exact quantile of all
        /// gaps at a probability within 1/(K-1) of the one asked; min and max are exact.
        #[test]
        fn pooled_matches_exact_within_the_bound(
            reqs in proptest::collection::vec(
                proptest::collection::vec(0.1f64..500.0, 1..1200), 1..5),
        ) {
            let mut all = Vec::new();
            let mut kept = Vec::new();
            for r in &reqs {
                all.extend_from_slice(r);
                let g: Vec<(f64, u64)> = r.iter().map(|&x| (x, 1)).collect();
                kept.push(compress(&g));
            }
            let got = pooled_summary(kept.iter().map(|(p, c)| (&p[..], *c))).unwrap();
            let s = sorted(&all);
            prop_assert_eq!(got.n, s.len());
            prop_assert_eq!(got.min, s[0]);
            prop_assert_eq!(got.max, s[s.len() - 1]);
            let eps = 1.0 / (ITL_KEEP as f64 - 1.0) + 1.0 / s.len() as f64;
            for (p, v) in [(0.5, got.p50), (0.9, got.p90), (0.99, got.p99)] {
                let lo = quantile_type7(&s, (p - eps).max(0.0)).unwrap();
                let hi = quantile_type7(&s, (p + eps).min(1.0)).unwrap();
                prop_assert!(lo <= v && v <= hi, "p{} = {} not in [{}, {}]", p, v, lo, hi);
            }
        }
    }
}
