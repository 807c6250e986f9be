//! Run-to-run spread tau: the log-sd of a per-run multiplicative effect (runner or endpoint
//! drift between the bless run and a later check), estimated from k >= 2 runs
//! (docs/gate.md "Family and bands").
//!
//! With m_i the median of run i and ln m_i its log, the spread of the k log medians is
//! tau^2 + v_w, where v_w is the part explained by sampling within runs: the variance of a
//! sample median, pi/2 * s_i^2 / n_i for log-sd s_i (asymptotic, normal logs). The estimate is an
//! upper (1 - gamma) confidence bound (gamma = 0.10): (k - 1) S^2 / chi2_{k-1}(gamma) - v_w,
//! clamped at 0, since k = 3 runs often give a point estimate of 0.

use statrs::distribution::{ChiSquared, ContinuousCDF};

/// Upper 90 % confidence bound of tau (log scale, e.g. 0.03 = about 3 % run-to-run drift).
///
/// `runs`: each run's successful values (ms). Runs with fewer than 2 positive values are
/// ignored. Returns `None` with fewer than 2 usable runs.
pub fn run_spread_upper(runs: &[Vec<f64>]) -> Option<f64> {
    spread_upper_at(runs, 0.10)
}

/// As [`run_spread_upper`] with the bound's one-sided error `gamma` (0 < gamma < 1).
pub fn spread_upper_at(runs: &[Vec<f64>], gamma: f64) -> Option<f64> {
    let mut meds = Vec::new();
    let mut within = Vec::new();
    for r in runs {
        let logs: Vec<f64> = r
            .iter()
            .filter(|x| **x > 0.0 && x.is_finite())
            .map(|x| x.ln())
            .collect();
        if logs.len() < 2 {
            continue;
        }
        let mut s = logs.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let med = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        meds.push(med);
        within.push(std::f64::consts::FRAC_PI_2 * var / n as f64);
    }
    spread_upper_of_medians(&meds, &within, gamma)
}

/// The upper (1 - `gamma`) bound of tau from each run's log median and the sampling variance of
/// that median (pi/2 * s^2 / n): what [`spread_upper_at`] computes from the runs' values, for
/// callers that keep only the summaries (the nightly history). `None` with fewer than 2 runs.
pub fn spread_upper_of_medians(meds: &[f64], within: &[f64], gamma: f64) -> Option<f64> {
    let k = meds.len();
    if k < 2 || within.len() != k || !(gamma > 0.0 && gamma < 1.0) {
        return None;
    }
    let mean = meds.iter().sum::<f64>() / k as f64;
    let s2 = meds.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let v_w = within.iter().sum::<f64>() / k as f64;
    let chi = ChiSquared::new((k - 1) as f64).ok()?.inverse_cdf(gamma);
    if chi.is_nan() || chi <= 0.0 {
        return None;
    }
    let upper_total = (k - 1) as f64 * s2 / chi;
    Some((upper_total - v_w).max(0.0).sqrt())
}

/// The upper 90 % bound of tau from k >= 2 runs that sent the same n requests: `logs[j][i]` is
/// ln(value) of request i in run j (every run the same length). Each request's mean over the
/// runs is taken out first (r_ij = logs[j][i] - mean_j logs[j][i]), so the spread between requests
/// (a prompt mix of 4 to 300 words) is no part of it, as it is of run medians: run j's effect is
/// e_j = median_i r_ij, its sampling variance pi/2 s_j^2 / n with s_j^2 = k/(k-1) var_i(r_ij) (the
/// centring shrinks each request's deviations by (k-1)/k), and the bound is
/// [`spread_upper_of_medians`] of those. `None` with fewer than 2 runs or 2 requests, or runs of
/// unequal length.
pub fn paired_spread_upper(logs: &[Vec<f64>]) -> Option<f64> {
    let k = logs.len();
    let n = logs.first()?.len();
    if k < 2 || n < 2 || logs.iter().any(|r| r.len() != n) {
        return None;
    }
    let mean: Vec<f64> = (0..n)
        .map(|i| logs.iter().map(|r| r[i]).sum::<f64>() / k as f64)
        .collect();
    let (mut effects, mut within) = (Vec::with_capacity(k), Vec::with_capacity(k));
    for run in logs {
        let mut r: Vec<f64> = run.iter().zip(&mean).map(|(x, m)| x - m).collect();
        let avg = r.iter().sum::<f64>() / n as f64;
        let var = r.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1) as f64;
        r.sort_by(f64::total_cmp);
        effects.push(super::quantile::quantile_type7(&r, 0.5)?);
        within.push(std::f64::consts::FRAC_PI_2 * var * k as f64 / (k - 1) as f64 / n as f64);
    }
    spread_upper_of_medians(&effects, &within, 0.10)
}

/// The upper ~90 % bound of the night-to-night spread tau from a series of nightly log
/// medians in night order, robust to a level step, to outlier nights and to nights that
/// alternate. Two scale estimates, the smaller taken:
/// - from the median of the absolute successive differences, median|x_(i+1) - x_i| /
///   (sqrt 2 * 0.6745) (for independent normal nights the median |difference| is 0.6745 sqrt(2)
///   sigma): a step moves one difference and an outlier night two, and neither moves the
///   median. The chi-square bound of [`spread_upper_of_medians`] counted a step not yet
///   confirmed as noise: 8 nights at one level and 2 at twice it gave tau ~0.35, widened a 10 %
///   fail tolerance to 200 %, and the nightly run went green on a doubled TPOT (the
///   fresh-reader walkthrough of 2026-12-04). But it assumes independent nights: nights that
///   alternate double it (1.0x / 1.5x: 0.425 against a spread of 0.20; issue 41);
/// - from the median absolute deviation around the median, MAD / 0.6745, which does not see
///   the nights' order (1.0x / 1.5x: 0.30), but which a step of half the nights or a slow walk
///   widens (a 1 % a night walk over 30 nights: 0.11 against 0.0105).
///
/// The bound is (0.6 + 5 / sqrt(k - 1)) times the smaller: the 90 % bound of its sampling
/// spread, by simulation of k normal nights (1 / q10 of min / sigma: k = 10: 2.21, k = 20: 1.69,
/// k = 30: 1.51; the formula gives 2.27, 1.75, 1.53). Then the part explained by each night's
/// sampling (`within`, pi/2 s^2/n) is taken out as in [`spread_upper_of_medians`]. `None`
/// with fewer than 3 nights.
pub fn spread_upper_of_series(meds: &[f64], within: &[f64]) -> Option<f64> {
    let k = meds.len();
    if k < 3 || within.len() != k || meds.iter().any(|m| !m.is_finite()) {
        return None;
    }
    const Q75: f64 = 0.674_489_750_196_081_7;
    let median = |v: Vec<f64>| super::quantile::quantile_type7(&super::quantile::sorted(&v), 0.5);
    let d: Vec<f64> = meds.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let by_differences = median(d)? / (std::f64::consts::SQRT_2 * Q75);
    let centre = median(meds.to_vec())?;
    let by_mad = median(meds.iter().map(|m| (m - centre).abs()).collect())? / Q75;
    let s = by_differences.min(by_mad);
    let upper = (0.6 + 5.0 / ((k - 1) as f64).sqrt()) * s;
    let v_w = within.iter().sum::<f64>() / k as f64;
    Some((upper.powi(2) - v_w).max(0.0).sqrt())
}

/// The most a fail tolerance learned from the nightly history may be, as a multiple of the
/// configured one (docs/history.md "A tolerance learned from real nights"). Beyond it the
/// nights move too much to gate at that tolerance: independent nights of log-sd 5 % learn
/// about 2.1x at 10 % (21 %, k = 2), nights alternating 1.0x / 1.5x 27x (271 %).
pub const MAX_LEARNED_FACTOR: f64 = 3.0;

/// The fail tolerance widened to the run-to-run spread (docs/gate.md "Family and bands"):
/// max(fail, exp(2.33 * tau * sqrt(1 + 1/k)) - 1).
pub fn widened_fail(fail: f64, tau: f64, k: usize) -> f64 {
    if k == 0 || !tau.is_finite() || tau <= 0.0 {
        return fail;
    }
    fail.max((2.33 * tau * (1.0 + 1.0 / k as f64).sqrt()).exp() - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(med: f64, n: usize) -> Vec<f64> {
        // deterministic spread around `med` with log-sd ~0.1
        (0..n)
            .map(|i| med * (0.1 * (((i as f64 + 0.5) / n as f64) - 0.5) * 3.4).exp())
            .collect()
    }

    #[test]
    fn identical_runs_have_zero_spread() {
        let runs = vec![run(10.0, 50), run(10.0, 50), run(10.0, 50)];
        assert_eq!(run_spread_upper(&runs), Some(0.0));
    }

    #[test]
    fn shifted_runs_have_spread_near_the_shift() {
        // Run medians 10 * e^{-0.05}, 10, 10 * e^{0.05}: sample sd of the log medians 0.05.
        let runs = vec![
            run(10.0 * (-0.05f64).exp(), 200),
            run(10.0, 200),
            run(10.0 * 0.05f64.exp(), 200),
        ];
        let tau = run_spread_upper(&runs).unwrap();
        // Upper 90 % bound with k = 3: sqrt(2 * 0.0025 / chi2_2(0.10) - v_w);
        // chi2_2(0.10) = -2 ln(0.9) = 0.21072; v_w = pi/2 * 0.0096 / 200 = 7.6e-5 (log-sd ~0.098).
        let expect = (2.0 * 0.0025 / 0.210_721 - 7.6e-5f64).sqrt();
        assert!(
            (tau - expect).abs() < 0.002,
            "tau {tau}, expected about {expect}"
        );
        assert!(tau > 0.05, "the bound is above the point estimate");
    }

    #[test]
    fn one_run_gives_none() {
        assert_eq!(run_spread_upper(&[run(10.0, 20)]), None);
    }

    #[test]
    fn widening_follows_the_formula() {
        assert_eq!(widened_fail(0.10, 0.0, 5), 0.10);
        // tau 0.05, k 5: exp(2.33 * 0.05 * sqrt(1.2)) - 1 = 0.1361 (13.6 %)
        assert!((widened_fail(0.10, 0.05, 5) - 0.1361).abs() < 0.0005);
        assert_eq!(widened_fail(0.50, 0.05, 5), 0.50);
    }

    /// Issue 41: 30 nights alternating 1.0x and 1.5x learned tau 0.614 (a 477 % fail
    /// tolerance from a 2-run baseline): successive differences assume independent nights, and
    /// anti-correlated ones double them. The spread of the nights around their median (MAD)
    /// does not see the order; the smaller of the two is taken.
    #[test]
    fn anti_correlated_nights_do_not_inflate_the_spread() {
        let alt = |r: f64| -> Vec<f64> {
            (0..30)
                .map(|i| if i % 2 == 0 { 0.0 } else { r.ln() })
                .collect()
        };
        // by hand: median ln 1.5 / 2 = 0.202733, every |x - median| the same: MAD 0.202733,
        // s = 0.202733 / 0.674490 = 0.300572 (successive differences: 0.405465 / 0.953873 =
        // 0.425073); bound (0.6 + 5 / sqrt 29) s = 1.528477 s = 0.459417
        let t = spread_upper_of_series(&alt(1.5), &[0.0; 30]).unwrap();
        assert!((t - 0.459417).abs() < 1e-5, "{t}");
        // 1.0x / 2.0x: ln 2 / 2 / 0.674490 x 1.528477 = 0.785378
        let t = spread_upper_of_series(&alt(2.0), &[0.0; 30]).unwrap();
        assert!((t - 0.785378).abs() < 1e-5, "{t}");
        // a slow walk (1 % a night, 30 nights) keeps the successive differences' small figure:
        // s = 0.01 / 0.953873 = 0.010484, bound 0.016024 (around the median: 0.111)
        let walk: Vec<f64> = (0..30).map(|i| 0.01 * f64::from(i)).collect();
        let t = spread_upper_of_series(&walk, &[0.0; 30]).unwrap();
        assert!((t - 0.016024).abs() < 1e-5, "{t}");
    }

    /// The bound covers the spread of independent normal nights 90 % of the time at 10, 20 and
    /// 30 nights (docs/history.md "A tolerance learned from real nights").
    #[test]
    fn the_series_bound_covers_normal_nights_nine_times_in_ten() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand::rngs::StdRng::seed_from_u64(41);
        let normal = Normal::new(0.0, 0.05).unwrap();
        for k in [10usize, 20, 30] {
            let trials = 4000;
            let covered = (0..trials)
                .filter(|_| {
                    let x: Vec<f64> = (0..k).map(|_| normal.sample(&mut rng)).collect();
                    spread_upper_of_series(&x, &vec![0.0; k]).unwrap() >= 0.05
                })
                .count();
            let share = covered as f64 / trials as f64;
            assert!((0.885..=0.925).contains(&share), "k {k}: {share}");
        }
    }

    #[test]
    fn the_series_spread_ignores_a_step_and_an_outlier_night() {
        // 8 nights alternating e^{+-0.03}, then 2 nights at twice the level: the chi-square
        // bound of the medians takes the step for noise, the successive differences do not.
        let mut meds: Vec<f64> = (0..8)
            .map(|i| if i % 2 == 0 { 0.03 } else { -0.03 })
            .collect();
        meds.extend([2f64.ln() + 0.03, 2f64.ln() - 0.03]);
        let within = vec![0.0; meds.len()];
        let classical = spread_upper_of_medians(&meds, &within, 0.10).unwrap();
        let robust = spread_upper_of_series(&meds, &within).unwrap();
        assert!(classical > 0.35, "{classical}");
        // by hand: differences 0.06 x 8 and one 0.693 - 0.06: median 0.06, s = 0.06 /
        // (1.41421 * 0.67449) = 0.06290; around the median 0.03: |x - 0.03| 0 x 4, 0.06 x 4,
        // 0.633, 0.693: MAD 0.06, s = 0.08896 (the step widens it); the smaller, 0.06290;
        // bound (0.6 + 5 / 3) s = 0.14258
        assert!((robust - 0.14258).abs() < 1e-4, "{robust}");
        // one outlier night x1.5 among steady ones moves two differences, not the median
        let mut out = vec![0.0f64; 12];
        for (i, v) in out.iter_mut().enumerate() {
            *v = if i % 2 == 0 { 0.01 } else { -0.01 };
        }
        out[6] += 1.5f64.ln();
        let r = spread_upper_of_series(&out, &[0.0; 12]).unwrap();
        // differences: 0.02 x 9, and 0.405 +- 0.02 twice: median 0.02 -> s 0.020967; around
        // the median 0: 0.01 x 11 and 0.415: MAD 0.01 -> s 0.014826 (alternating nights: the
        // differences are twice the spread); bound (0.6 + 5 / sqrt 11) s = 0.031247
        assert!((r - 0.031247).abs() < 1e-5, "{r}");
        // sampling within nights explains part of it; too few nights: none
        let w = spread_upper_of_series(&out, &[0.0005; 12]).unwrap();
        assert!(
            (w - (0.031247f64.powi(2) - 0.0005).sqrt()).abs() < 1e-5,
            "{w}"
        );
        assert_eq!(spread_upper_of_series(&[0.0, 0.1], &[0.0, 0.0]), None);
    }

    #[test]
    fn paired_spread_ignores_the_spread_between_requests() {
        // Run 1 is 0.2 above run 0 on every request: centred, e = (-0.1, +0.1) and no
        // deviation within a run (within = 0), whatever the requests' own levels.
        let by_hand = spread_upper_of_medians(&[-0.1, 0.1], &[0.0, 0.0], 0.10).unwrap();
        // S^2 = 0.02, chi2_1(0.10) = 0.015791: sqrt(0.02 / 0.015791) = 1.12541.
        assert!((by_hand - 1.12541).abs() < 1e-4, "{by_hand}");
        for levels in [[0.0, 1.0, 2.0], [0.0, 5.0, 10.0]] {
            let logs = vec![levels.to_vec(), levels.iter().map(|x| x + 0.2).collect()];
            let got = paired_spread_upper(&logs).unwrap();
            assert!((got - by_hand).abs() < 1e-12, "{got}");
        }
        // Five runs of the same 4 requests 2 ms to 200 ms apart, each request within 1 % of
        // itself from run to run: a bound of under 1 %.
        let same: Vec<Vec<f64>> = (0..5)
            .map(|j| {
                [2.0f64, 20.0, 100.0, 200.0]
                    .iter()
                    .enumerate()
                    .map(|(i, x)| x.ln() + 0.01 * ((i + j) % 3) as f64)
                    .collect()
            })
            .collect();
        let tau = paired_spread_upper(&same).unwrap();
        assert!(tau < 0.01, "{tau}");
        assert_eq!(paired_spread_upper(&same[..1]), None);
        assert_eq!(paired_spread_upper(&[vec![1.0, 2.0], vec![1.0]]), None);
    }
}
