//! Server starts compared (`gate.cold_start`, docs/gate.md "Cold start"): a check's few starts
//! against a baseline's few. Pure; times in ms, compared on the log scale.
//!
//! With m baseline starts and n candidate starts, the exact one-sided Mann-Whitney test can
//! reach `alpha` only when 1 / C(m + n, n) <= alpha (1 check start needs m >= 1/alpha - 1
//! baseline starts: 99 at alpha 0.01). Below that the test is the band: the candidates' mean
//! log time against the baseline's, scaled by the baseline starts' own spread,
//! t = (mean ln y - mean ln x) / (s sqrt(1/m + 1/n)) with m - 1 degrees of freedom (Student's
//! t prediction of a new start, assuming log-normal start times; s the standard deviation of
//! ln x, pooled with ln y's when n >= 2). It needs m >= 2: one stored start has no spread.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Which test compared the starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartTest {
    /// The exact Mann-Whitney rank test (both sides had enough starts).
    Rank,
    /// Student's t band from the starts' spread, with `df` degrees of freedom.
    Band { df: usize },
}

/// Two sides' starts compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartComparison {
    /// exp(mean ln y - mean ln x) (band) or the Hodges-Lehmann ratio (rank).
    pub ratio: f64,
    /// The one-sided (1 - alpha) bounds of the ratio (0 / +inf when none).
    pub lower: f64,
    pub upper: f64,
    /// One-sided p-value of "the candidate starts slower".
    pub p_slower: f64,
    /// One-sided p-value of "the candidate starts faster".
    pub p_faster: f64,
    pub test: StartTest,
    /// The spread of the starts used (standard deviation of ln time); `None` for the rank test.
    pub sd_log: Option<f64>,
}

/// Why two sides' starts cannot be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooFew {
    /// No candidate start.
    NoCandidate,
    /// Fewer than 2 baseline starts (no spread) and too few for the rank test: `needed` is the
    /// number of baseline starts the band needs (2).
    Baseline { have: usize, needed: usize },
}

/// The fewest baseline starts with which the exact rank test can reach `alpha` against `n`
/// candidate starts: the least m with 1 / C(m + n, n) <= alpha.
pub fn rank_starts_needed(n: usize, alpha: f64) -> usize {
    (1..=100_000)
        .find(|&m| 1.0 / binomial(m + n, n) <= alpha)
        .unwrap_or(usize::MAX)
}

fn binomial(a: usize, b: usize) -> f64 {
    (0..b).fold(1.0, |acc, i| acc * (a - i) as f64 / (i + 1) as f64)
}

fn logs(v: &[f64]) -> Vec<f64> {
    v.iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|x| x.ln())
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sum_sq(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum()
}

/// Compares candidate starts `cand` with baseline starts `base` (ms) at one-sided `alpha`.
pub fn compare(base: &[f64], cand: &[f64], alpha: f64) -> Result<StartComparison, TooFew> {
    let (lx, ly) = (logs(base), logs(cand));
    let (m, n) = (lx.len(), ly.len());
    if n == 0 {
        return Err(TooFew::NoCandidate);
    }
    if m > 0 && m >= rank_starts_needed(n, alpha) {
        let p_slower = super::rank::mann_whitney_greater(cand, base).unwrap_or(1.0);
        let p_faster = super::rank::mann_whitney_less(cand, base).unwrap_or(1.0);
        let s = super::shift::hodges_lehmann_ratio(cand, base, alpha.min(0.5));
        return Ok(StartComparison {
            ratio: s.map_or(f64::NAN, |s| s.ratio),
            lower: s.map_or(0.0, |s| s.lower),
            upper: s.map_or(f64::INFINITY, |s| s.upper),
            p_slower,
            p_faster,
            test: StartTest::Rank,
            sd_log: None,
        });
    }
    if m < 2 {
        return Err(TooFew::Baseline { have: m, needed: 2 });
    }
    // pooled when the candidate has a spread of its own
    let df = if n >= 2 { m + n - 2 } else { m - 1 };
    let ss = sum_sq(&lx) + if n >= 2 { sum_sq(&ly) } else { 0.0 };
    let sd = (ss / df as f64).sqrt();
    let d = mean(&ly) - mean(&lx);
    let se = sd * (1.0 / m as f64 + 1.0 / n as f64).sqrt();
    let t_dist = StudentsT::new(0.0, 1.0, df as f64).ok();
    let (p_slower, p_faster, half) = match t_dist {
        Some(t) if se > 0.0 => (t.sf(d / se), t.cdf(d / se), t.inverse_cdf(1.0 - alpha) * se),
        // every start took the same time: any difference is beyond the spread
        _ => (
            if d > 0.0 { 0.0 } else { 1.0 },
            if d < 0.0 { 0.0 } else { 1.0 },
            0.0,
        ),
    };
    Ok(StartComparison {
        ratio: d.exp(),
        lower: (d - half).exp(),
        upper: (d + half).exp(),
        p_slower,
        p_faster,
        test: StartTest::Band { df },
        sd_log: Some(sd),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_needs_many_baseline_starts_for_one_check_start() {
        // 1 / C(m + 1, 1) = 1 / (m + 1) <= 0.01 first at m = 99; <= 0.05 at m = 19
        assert_eq!(rank_starts_needed(1, 0.01), 99);
        assert_eq!(rank_starts_needed(1, 0.05), 19);
        // 5 vs 5: 1 / C(10, 5) = 1/252 <= 0.01; 4 vs 5: 1/126 <= 0.01; 3 vs 5: 1/56 > 0.01
        assert_eq!(rank_starts_needed(5, 0.01), 4);
    }

    #[test]
    fn band_by_hand() {
        // baseline 300, 330, 270 ms: ln = 5.70378, 5.79909, 5.59842; mean 5.70043;
        // deviations 0.00335, 0.09866, -0.10201; sum of squares 0.020151; sd = sqrt(0.020151/2)
        // = 0.100377; candidate 900 ms: ln 6.80239, d = 1.10196 (ratio 3.0101);
        // se = 0.100377 sqrt(1/3 + 1) = 0.115906; t = 9.5074, df 2: p = 0.00544
        let c = compare(&[300.0, 330.0, 270.0], &[900.0], 0.01).unwrap();
        assert_eq!(c.test, StartTest::Band { df: 2 });
        assert!((c.ratio - 3.0101).abs() < 1e-3, "{c:?}");
        assert!((c.sd_log.unwrap() - 0.100377).abs() < 1e-5, "{c:?}");
        assert!((c.p_slower - 0.00544).abs() < 2e-4, "{c:?}");
        // t_{0.99, 2} = 6.9646: upper = exp(1.10196 + 6.9646 x 0.115906) = exp(1.90919) = 6.747
        assert!((c.upper - 6.747).abs() < 0.01, "{c:?}");
        // the same start as the baseline's mean: ratio 1.0, p 0.5
        let same = compare(&[300.0, 330.0, 270.0], &[5.70043f64.exp()], 0.01).unwrap();
        assert!((same.ratio - 1.0).abs() < 1e-4 && (same.p_slower - 0.5).abs() < 1e-3);
    }

    #[test]
    fn too_few_is_said() {
        assert_eq!(
            compare(&[300.0], &[900.0], 0.01),
            Err(TooFew::Baseline { have: 1, needed: 2 })
        );
        assert_eq!(
            compare(&[300.0, 310.0], &[], 0.01),
            Err(TooFew::NoCandidate)
        );
    }

    #[test]
    fn rank_when_both_sides_have_enough() {
        // 5 vs 5 all above: U = 25, exact p = 1/252 = 0.003968
        let b = [300.0, 301.0, 302.0, 303.0, 304.0];
        let c = [900.0, 901.0, 902.0, 903.0, 904.0];
        let r = compare(&b, &c, 0.01).unwrap();
        assert_eq!(r.test, StartTest::Rank);
        assert!((r.p_slower - 1.0 / 252.0).abs() < 1e-9, "{r:?}");
    }
}
