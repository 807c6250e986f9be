//! A tail quantile of pooled inter-token gaps, baseline vs candidate, when the gaps cluster
//! within requests (docs/gate.md "ITL P99").
//!
//! A run of 20 requests x 64 tokens holds ~1,260 gaps, so its pooled P99 is the 13th largest
//! gap: far better determined than the P99 of 20 per-request values. But the gaps of one
//! request share its speed (batch size, KV-cache length, the node it ran on), so they are not
//! 1,260 independent observations: a slow request puts many of its gaps in the tail at once.
//! A test that treats gaps as independent (binomial) under-states the variance by the design
//! effect (Kish 1965) and false-alarms (`perfgate calibrate` shows how often).
//!
//! The test: with `T` the baseline's pooled p-quantile, compare the share of candidate gaps
//! above `(1 + fail) T` (and above `T + md`) with the share of baseline gaps above `T` (about
//! 1 - p by construction). "The candidate's quantile is above (1 + fail) x the baseline's"
//! is the same event as "more than 1 - p of the candidate's gaps are above (1 + fail) x the
//! baseline's quantile", so the difference of the two shares is the test statistic. Its
//! variance is the sum of both sides' share variances at a fixed threshold (the baseline's
//! `T` is estimated; by the Bahadur representation its error enters the candidate's share
//! once more with the baseline's share variance, under a scale change at the boundary).
//!
//! Each share is a ratio estimator sum(x_i) / sum(n_i) over requests i (x_i gaps above the
//! threshold among n_i), with the cluster-robust (linearisation, CR1) variance
//! G / (G - 1) * sum (x_i - share n_i)^2 / N^2 (Cochran 1977, 6.4; Cameron & Miller 2015),
//! never taken below the binomial variance of independent gaps, so a perfectly regular pattern
//! (every request with the same count) cannot claim more information than independent gaps.
//! z = difference / sd; p-value from Student's t with G_c - 1 degrees of freedom (G_c the
//! candidate's requests) rather than the normal, as the cluster-robust literature recommends
//! for few clusters (Cameron & Miller 2015, section VI; Bell & McCaffrey 2002).
//!
//! Requests summarised by [`super::itl::compress`] (more than ITL_KEEP gaps) enter with each
//! point weighted `count / points`: a point stands for that many gaps at evenly spaced ranks.
//! Pure; no panics on empty input or NaN (NaN points are dropped).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// One request's inter-token gaps: every gap, or [`super::itl::ITL_KEEP`] points standing for
/// `count` gaps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GapCluster {
    /// Gaps (or summary points), ms, any order.
    pub points: Vec<f64>,
    /// The number of gaps `points` stand for, when a summary.
    pub count: Option<u64>,
}

impl GapCluster {
    /// Every gap of one request.
    pub fn exact(points: Vec<f64>) -> Self {
        GapCluster {
            points,
            count: None,
        }
    }
}

/// How the share variances are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variance {
    /// Cluster-robust (requests are the independent units); perfgate's gate.
    Clustered,
    /// Binomial, as if every gap were independent: the naive test, kept for `calibrate` to
    /// show why it is not used.
    Independent,
}

/// The comparison of the pooled p-quantile of gaps, with the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct TailComparison {
    /// Pooled p-quantile of the baseline's gaps, ms (`T`).
    pub baseline_q: f64,
    /// Pooled p-quantile of the candidate's gaps, ms.
    pub candidate_q: f64,
    /// candidate_q / baseline_q.
    pub ratio: f64,
    /// (1 - alpha) one-sided confidence bounds of the ratio of quantiles, from inverting the
    /// share test; `None` where the data cannot bound it.
    pub ci: (Option<f64>, Option<f64>),
    /// Share of baseline gaps above `T`.
    pub share_baseline: f64,
    /// Share of candidate gaps above the fail threshold.
    pub share_candidate: f64,
    /// The fail threshold: max((1 + fail) T, T + md), ms.
    pub threshold: f64,
    /// One-sided p-value of "the candidate's quantile is above the fail threshold".
    pub p_regress: f64,
    /// One-sided p-value of "the baseline's quantile is above (1 + fail) x the candidate's"
    /// (the mirror test).
    pub p_improve: f64,
    /// True when the upper confidence bound of the ratio is within 1 + fail (or the absolute
    /// change within `md`): the data rule out a regression beyond the tolerance.
    pub within_fail: bool,
    /// Design effect of the candidate's share at the threshold: clustered / binomial variance
    /// (1 = as if independent; > 1 = gaps cluster in requests).
    pub design_effect: f64,
    /// Gaps and requests of the baseline and of the candidate.
    pub gaps: (f64, f64),
    pub requests: (usize, usize),
}

/// One side: weighted points sorted by value, with the request each belongs to.
struct Side {
    /// (value, weight, request index), ascending by value.
    pts: Vec<(f64, f64, usize)>,
    /// Cumulative weight after each point.
    cum: Vec<f64>,
    /// Gaps per request (n_i).
    sizes: Vec<f64>,
    /// Total gaps.
    total: f64,
}

impl Side {
    fn new(clusters: &[GapCluster]) -> Option<Side> {
        let mut pts = Vec::new();
        let mut sizes = Vec::new();
        for c in clusters {
            let p: Vec<f64> = c.points.iter().copied().filter(|x| !x.is_nan()).collect();
            if p.is_empty() {
                continue;
            }
            let w = match c.count {
                Some(k) if k as f64 > p.len() as f64 => k as f64 / p.len() as f64,
                _ => 1.0,
            };
            let i = sizes.len();
            sizes.push(w * p.len() as f64);
            pts.extend(p.into_iter().map(|x| (x, w, i)));
        }
        if pts.is_empty() {
            return None;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut cum = Vec::with_capacity(pts.len());
        let mut c = 0.0;
        for p in &pts {
            c += p.1;
            cum.push(c);
        }
        Some(Side {
            pts,
            cum,
            total: c,
            sizes,
        })
    }

    fn groups(&self) -> usize {
        self.sizes.len()
    }

    /// Type-7 quantile over the gaps the points stand for (as [`super::itl::pooled_summary`]).
    fn quantile(&self, p: f64) -> f64 {
        let at = |pos: f64| -> f64 {
            let i = self.cum.partition_point(|&c| c <= pos);
            self.pts[i.min(self.pts.len() - 1)].0
        };
        let h = p.clamp(0.0, 1.0) * (self.total - 1.0).max(0.0);
        let (lo, hi) = (h.floor(), h.ceil());
        let (a, b) = (at(lo), at(hi));
        a + (h - lo) * (b - a)
    }

    /// Per-request weight of gaps strictly above `t`.
    fn above(&self, t: f64) -> Vec<f64> {
        let mut x = vec![0.0; self.sizes.len()];
        let start = self.pts.partition_point(|p| p.0 <= t);
        for &(_, w, i) in &self.pts[start..] {
            x[i] += w;
        }
        x
    }
}

/// Share sum(x) / N and its clustered and binomial variances.
fn share_var(x: &[f64], sizes: &[f64]) -> (f64, f64) {
    let total: f64 = sizes.iter().sum();
    let g = sizes.len() as f64;
    if total <= 0.0 {
        return (0.0, 0.0);
    }
    let s = x.iter().sum::<f64>() / total;
    let ss: f64 = x
        .iter()
        .zip(sizes)
        .map(|(xi, ni)| (xi - s * ni).powi(2))
        .sum();
    let v = if g > 1.0 {
        g / (g - 1.0) * ss / (total * total)
    } else {
        0.0
    };
    (s, v)
}

/// Binomial variance of a share of `n` independent gaps at the share `s`.
fn binom_var(s: f64, n: f64) -> f64 {
    if n > 0.0 {
        s * (1.0 - s) / n
    } else {
        0.0
    }
}

/// One-sided test of "the `hi` side's share above `t_hi` exceeds the `lo` side's share above
/// `t_lo`": (difference, sd, design effect of `hi`).
fn share_z(hi: &Side, t_hi: f64, lo: &Side, t_lo: f64, var: Variance) -> (f64, f64, f64, f64) {
    let (xh, xl) = (hi.above(t_hi), lo.above(t_lo));
    let (sh, vh) = share_var(&xh, &hi.sizes);
    let (sl, vl) = share_var(&xl, &lo.sizes);
    // The binomial floor at the pooled share (a side with no gap above its threshold still
    // has a share that could have been positive).
    let pooled = (sh * hi.total + sl * lo.total) / (hi.total + lo.total);
    let (bh, bl) = (binom_var(pooled, hi.total), binom_var(pooled, lo.total));
    let (vh, vl) = match var {
        Variance::Clustered => (vh.max(bh), vl.max(bl)),
        Variance::Independent => (bh, bl),
    };
    let deff = if bh > 0.0 { vh / bh } else { 1.0 };
    (sh - sl, (vh + vl).sqrt(), deff, sh)
}

/// Upper-tail probability of the reference distribution: Student's t with `df` degrees of
/// freedom (normal when `df` is infinite).
fn upper_p(z: f64, df: f64) -> f64 {
    if z.is_nan() {
        return 1.0;
    }
    if !df.is_finite() {
        return crate::stats::normal::normal_sf(z);
    }
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) => (1.0 - t.cdf(z)).clamp(0.0, 1.0),
        Err(_) => crate::stats::normal::normal_sf(z),
    }
}

/// p-value of a difference `d` with standard deviation `sd`.
fn p_of(d: f64, sd: f64, df: f64) -> f64 {
    if sd > 0.0 {
        upper_p(d / sd, df)
    } else if d > 0.0 {
        0.0
    } else {
        1.0
    }
}

/// Compares the pooled p-quantile (e.g. 0.99) of the candidate's gaps with the baseline's
/// (module docs): regression when the candidate's is above max((1 + fail) T, T + md), `T` the
/// baseline's; `alpha` is the one-sided level of the confidence bounds. `None` when a side has
/// no gap, or fewer than 2 requests (no variance between requests to estimate).
pub fn compare_tail(
    baseline: &[GapCluster],
    candidate: &[GapCluster],
    p: f64,
    fail: f64,
    md: f64,
    alpha: f64,
    var: Variance,
) -> Option<TailComparison> {
    let b = Side::new(baseline)?;
    let c = Side::new(candidate)?;
    if b.groups() < 2 || c.groups() < 2 || !(0.0 < p && p < 1.0) {
        return None;
    }
    let df = match var {
        Variance::Clustered => (c.groups() - 1) as f64,
        Variance::Independent => f64::INFINITY,
    };
    let qb = b.quantile(p);
    let qc = c.quantile(p);
    let scale = 1.0 + fail.max(0.0);
    let md = md.max(0.0);
    // Regression: candidate's share above the fail threshold vs baseline's share above T.
    let threshold = (scale * qb).max(qb + md);
    let (d, sd, deff, share_c) = share_z(&c, threshold, &b, qb, var);
    let p_regress = p_of(d, sd, df);
    // Improvement, the mirror image: baseline's share above the candidate's threshold.
    let threshold_c = (scale * qc).max(qc + md);
    let (di, sdi, _, _) = share_z(&b, threshold_c, &c, qc, var);
    let p_improve = p_of(di, sdi, df);
    let (_, share_b) = {
        let x = b.above(qb);
        let (s, _) = share_var(&x, &b.sizes);
        ((), s)
    };
    let ci = ratio_bounds(&b, &c, qb, alpha, var, df);
    let within_fail = ci.1.is_some_and(|hi| hi * qb <= threshold);
    Some(TailComparison {
        baseline_q: qb,
        candidate_q: qc,
        ratio: if qb > 0.0 { qc / qb } else { f64::INFINITY },
        ci,
        share_baseline: share_b,
        share_candidate: share_c,
        threshold,
        p_regress,
        p_improve,
        within_fail,
        design_effect: deff,
        gaps: (b.total, c.total),
        requests: (b.groups(), c.groups()),
    })
}

/// (1 - alpha) one-sided bounds of the ratio of quantiles by inverting the share test over
/// thresholds t = candidate gap values: the lower bound is the largest t / T at which the
/// candidate's share at or above t is significantly above the baseline's share above T (so
/// its quantile is above t); the upper bound the smallest t / T below which the candidate's
/// share above t stays significantly below it. O(N log N): one pass down the candidate's
/// sorted gaps with running sums per request.
fn ratio_bounds(
    b: &Side,
    c: &Side,
    qb: f64,
    alpha: f64,
    var: Variance,
    df: f64,
) -> (Option<f64>, Option<f64>) {
    if qb <= 0.0 || !(alpha > 0.0 && alpha < 1.0) {
        return (None, None);
    }
    let crit = match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) if df.is_finite() => t.inverse_cdf(1.0 - alpha),
        _ => crate::stats::normal::normal_quantile(1.0 - alpha),
    };
    let xb = b.above(qb);
    let (sb, vb) = share_var(&xb, &b.sizes);
    let g = c.groups() as f64;
    let n = c.total;
    let sum_n2: f64 = c.sizes.iter().map(|v| v * v).sum();
    let mut x = vec![0.0; c.sizes.len()];
    let (mut s1, mut s2, mut s3) = (0.0f64, 0.0f64, 0.0f64); // sum x, sum x^2, sum x n
    let z_at = |s1: f64, s2: f64, s3: f64| -> f64 {
        let sh = s1 / n;
        let ss = (s2 - 2.0 * sh * s3 + sh * sh * sum_n2).max(0.0);
        let vh = if g > 1.0 {
            g / (g - 1.0) * ss / (n * n)
        } else {
            0.0
        };
        let pooled = (s1 + sb * b.total) / (n + b.total);
        let (bh, bl) = (binom_var(pooled, n), binom_var(pooled, b.total));
        let (vh, vl) = match var {
            Variance::Clustered => (vh.max(bh), vb.max(bl)),
            Variance::Independent => (bh, bl),
        };
        let sd = (vh + vl).sqrt();
        if sd > 0.0 {
            (sh - sb) / sd
        } else {
            0.0
        }
    };
    let (mut lower, mut upper) = (None, None);
    let mut upper_open = true; // still in the run of thresholds significantly below
    let mut i = c.pts.len();
    while i > 0 {
        let v = c.pts[i - 1].0;
        // share strictly above v
        if upper_open {
            if z_at(s1, s2, s3) < -crit {
                upper = Some(v / qb);
            } else {
                upper_open = false;
            }
        }
        // add every point equal to v: share at or above v
        while i > 0 && c.pts[i - 1].0 == v {
            let (_, w, k) = c.pts[i - 1];
            let n_k = c.sizes[k];
            s2 += (x[k] + w).powi(2) - x[k].powi(2);
            s3 += w * n_k;
            s1 += w;
            x[k] += w;
            i -= 1;
        }
        if lower.is_none() && z_at(s1, s2, s3) > crit {
            lower = Some(v / qb);
        }
        if lower.is_some() && !upper_open {
            break;
        }
    }
    // The upper bound needs a threshold below which the share stops being significantly low.
    if upper_open {
        upper = None;
    }
    (lower, upper)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::normal::normal_quantile;

    /// Deterministic gaps of one request: median `m`, log-sd 0.1 over a fixed grid of normal
    /// quantiles, rotated by `phase` so that requests differ in order only.
    fn request(m: f64, n: usize, phase: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let u = (((i + phase) % n) as f64 + 0.5) / n as f64;
                m * (0.1 * normal_quantile(u)).exp()
            })
            .collect()
    }

    /// 20 requests of 63 gaps, each with its own speed factor exp(0.15 z_i) on a fixed grid.
    fn run(stall_every: Option<usize>, factor: f64, seed_shift: f64) -> Vec<GapCluster> {
        (0..20)
            .map(|i| {
                let u = ((i as f64 + 0.5 + seed_shift) / 20.0).clamp(0.01, 0.99);
                let speed = (0.15 * normal_quantile(u)).exp();
                let mut g = request(20.0 * speed, 63, i * 7);
                if let Some(k) = stall_every {
                    for (j, x) in g.iter_mut().enumerate() {
                        if (j + 1) % k == 0 {
                            *x *= factor;
                        }
                    }
                }
                GapCluster::exact(g)
            })
            .collect()
    }

    fn cmp(b: &[GapCluster], c: &[GapCluster]) -> TailComparison {
        compare_tail(b, c, 0.99, 0.2, 0.5, 0.01, Variance::Clustered).unwrap()
    }

    #[test]
    fn identical_runs_have_ratio_one_and_no_regression() {
        let b = run(None, 1.0, 0.0);
        let t = cmp(&b, &b);
        assert!((t.ratio - 1.0).abs() < 1e-12, "{t:?}");
        assert!(t.p_regress > 0.4, "{t:?}");
        assert!(t.p_improve > 0.4, "{t:?}");
        let (lo, hi) = t.ci;
        assert!(
            lo.is_none_or(|l| l <= 1.0) && hi.is_none_or(|h| h >= 1.0),
            "{t:?}"
        );
        assert_eq!(t.gaps, (1260.0, 1260.0));
        assert_eq!(t.requests, (20, 20));
    }

    #[test]
    fn a_stall_every_16th_gap_is_a_significant_regression() {
        let b = run(None, 1.0, 0.0);
        let c = run(Some(16), 2.0, 0.3);
        let t = cmp(&b, &c);
        assert!(t.ratio > 1.3, "{t:?}");
        // Every request has its 3 stalls (3/63 = 4.8 % of gaps); those of the slower requests
        // are above 1.2 T: 3.8 % of gaps against the baseline's 1 %.
        assert!(t.share_candidate > 0.03, "{t:?}");
        // Significant, though not overwhelmingly: the baseline's own 13 gaps above its P99
        // sit in its two slowest requests (speeds exp(0.15 z)), so its P99 is known only as
        // well as 20 requests tell it (a 5-run baseline tells it better).
        assert!(t.p_regress < 0.01, "{t:?}");
        assert!(t.p_improve > 0.5, "{t:?}");
        assert!(t.ci.0.is_some_and(|l| l > 1.0), "{t:?}");
        // ... and in the other direction it is an improvement.
        let back = cmp(&c, &b);
        assert!(back.p_improve < 0.01 && back.p_regress > 0.5, "{back:?}");
    }

    /// One request of 20 with every gap 5x: 63 of 1,260 gaps (5 %) far above the threshold.
    /// Counted as independent gaps that is overwhelming; but it is one request, i.e. one
    /// draw of "how slow a request can be", and the clustered test does not FAIL on it.
    #[test]
    fn a_single_bad_request_is_one_observation_not_sixty_three() {
        let b = run(None, 1.0, 0.0);
        let mut c = run(None, 1.0, 0.3);
        c[7].points.iter_mut().for_each(|x| *x *= 5.0);
        let t = cmp(&b, &c);
        assert!(t.share_candidate > 0.045, "{t:?}");
        assert!(t.design_effect > 20.0, "{t:?}");
        assert!(t.p_regress > 0.01, "{t:?}");
        let naive = compare_tail(&b, &c, 0.99, 0.2, 0.5, 0.01, Variance::Independent).unwrap();
        assert!(naive.p_regress < 1e-6, "{naive:?}");
        // Eight such requests (40 %, none in the baseline) are a pattern: significant, about
        // as a Fisher test of 8/20 against 0/20 requests (p = 0.002) would say.
        for i in [1, 3, 9, 11, 13, 15, 18] {
            c[i].points.iter_mut().for_each(|x| *x *= 5.0);
        }
        let eight = cmp(&b, &c);
        assert!(eight.p_regress < 0.01, "{eight:?}");
    }

    #[test]
    fn summarised_requests_are_weighted_by_their_count() {
        // A request of 1,000 gaps kept as 128 points stands for 1,000 gaps, not 128.
        let long: Vec<f64> = (0..1000).map(|i| 10.0 + i as f64 * 0.01).collect();
        let g: Vec<(f64, u64)> = long.iter().map(|&x| (x, 1)).collect();
        let (pts, count) = crate::stats::itl::compress(&g);
        let mut b = vec![GapCluster { points: pts, count }];
        b.push(GapCluster::exact(vec![100.0; 10]));
        let side = Side::new(&b).unwrap();
        assert_eq!(side.total, 1010.0);
        // 10 of 1,010 gaps are 100 ms: the P99 is at the boundary, P98 among the long request.
        assert!(side.quantile(0.995) == 100.0);
        assert!(side.quantile(0.98) < 20.0);
        let exact = compare_tail(&b, &b, 0.99, 0.2, 0.5, 0.01, Variance::Clustered).unwrap();
        assert_eq!(exact.gaps.0, 1010.0);
    }

    #[test]
    fn degenerate_inputs_are_none_not_panics() {
        let one = vec![GapCluster::exact(vec![1.0, 2.0])];
        let two = vec![GapCluster::exact(vec![1.0]), GapCluster::exact(vec![2.0])];
        assert!(compare_tail(&[], &two, 0.99, 0.2, 0.0, 0.01, Variance::Clustered).is_none());
        assert!(compare_tail(&one, &two, 0.99, 0.2, 0.0, 0.01, Variance::Clustered).is_none());
        let nan = vec![GapCluster::exact(vec![f64::NAN]), GapCluster::exact(vec![])];
        assert!(compare_tail(&two, &nan, 0.99, 0.2, 0.0, 0.01, Variance::Clustered).is_none());
        let same = vec![GapCluster::exact(vec![5.0; 10]); 3];
        let t = compare_tail(&same, &same, 0.99, 0.2, 0.0, 0.01, Variance::Clustered).unwrap();
        assert_eq!(t.p_regress, 1.0);
        assert_eq!(t.ratio, 1.0);
    }

    #[test]
    fn the_bounds_bracket_a_uniform_change() {
        let b = run(None, 1.0, 0.0);
        let c: Vec<GapCluster> = run(None, 1.0, 0.3)
            .into_iter()
            .map(|g| GapCluster::exact(g.points.iter().map(|x| x * 1.5).collect()))
            .collect();
        let t = cmp(&b, &c);
        let (lo, hi) = t.ci;
        assert!(lo.is_some_and(|l| l < 1.5), "{t:?}");
        assert!(hi.is_none_or(|h| h > 1.5), "{t:?}");
        assert!(t.p_regress < 0.01, "{t:?}");
    }
}
