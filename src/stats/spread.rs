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
}
