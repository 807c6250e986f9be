//! `perfgate calibrate --nightly`: the change-point rule of the nightly history
//! ([`crate::stats::changepoint`]) on simulated series of nights, beside a naive threshold and a
//! Perfherder-style t-test on the same series.
//!
//! A night's value is a scenario's P50 as one nightly run measures it: ln x_t = ln 100 + a_t + e_t
//! (+ ln step from `step_at` on), with e_t ~ N(0, `night_sd`) independent night-to-night noise,
//! a_t = `ar` a_(t-1) + N(0, `drift_sd`) a slowly wandering runner (AR(1)), and with probability
//! `outlier_p` an outlier night multiplied by U(1.3, 1.6) (a noisy neighbour).
//!
//! Figures: for a null row, false alerts per series per night (alerts / nights judged); for a step
//! row, the nights from the step (the step night is 1) after which at least 90 % of the series
//! have alerted (an alert found on or after the step night), the share alerted within 10 nights,
//! and the share whose first such alert names the step's night within +-1 (the naive rule names
//! the night it fires).

use crate::stats::changepoint::{change_points, naive_threshold, perfherder_t, StepRule};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// One simulated kind of series.
#[derive(Debug, Clone)]
pub struct NightModel {
    pub label: &'static str,
    pub nights: usize,
    pub night_sd: f64,
    pub ar: f64,
    pub drift_sd: f64,
    pub outlier_p: f64,
    /// The step: from this night on, values are multiplied by `step` (1.0: none).
    pub step_at: usize,
    pub step: f64,
}

/// The rows `perfgate calibrate --nightly` prints.
pub fn models() -> Vec<NightModel> {
    let quiet = NightModel {
        label: "",
        nights: 60,
        night_sd: 0.03,
        ar: 0.0,
        drift_sd: 0.0,
        outlier_p: 0.0,
        step_at: 30,
        step: 1.0,
    };
    let noisy = NightModel {
        night_sd: 0.05,
        ar: 0.7,
        drift_sd: 0.02,
        outlier_p: 0.05,
        ..quiet.clone()
    };
    let row = |m: &NightModel, label, step| NightModel {
        label,
        step,
        ..m.clone()
    };
    vec![
        row(&quiet, "null, quiet runner (night sd 3 %)", 1.0),
        row(
            &noisy,
            "null, noisy runner (sd 5 %, AR drift, 5 % outlier nights)",
            1.0,
        ),
        row(&quiet, "+10 % step at night 30, quiet runner", 1.10),
        row(&quiet, "+20 % step at night 30, quiet runner", 1.20),
        row(&noisy, "+10 % step at night 30, noisy runner", 1.10),
        row(&noisy, "+20 % step at night 30, noisy runner", 1.20),
    ]
}

/// One simulated series of `m`.
pub fn series(m: &NightModel, rng: &mut StdRng) -> Vec<f64> {
    let e = Normal::new(0.0, m.night_sd.max(1e-12)).expect("finite sd");
    let d = Normal::new(0.0, m.drift_sd.max(1e-12)).expect("finite sd");
    let mut a = 0.0;
    (0..m.nights)
        .map(|t| {
            a = m.ar * a + if m.drift_sd > 0.0 { d.sample(rng) } else { 0.0 };
            let mut x = 100.0 * (a + e.sample(rng)).exp();
            if m.outlier_p > 0.0 && rng.random::<f64>() < m.outlier_p {
                x *= rng.random_range(1.3..1.6);
            }
            if t >= m.step_at {
                x *= m.step;
            }
            x
        })
        .collect()
}

/// The three rules compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// [`change_points`] with [`StepRule::default`].
    Perfgate,
    /// [`naive_threshold`]: tonight > 1.10 x the median of the last 20 nights.
    Naive,
    /// [`perfherder_t`]: back 12, fore 12, t > 7.
    Perfherder,
}

impl Rule {
    pub const ALL: [Rule; 3] = [Rule::Perfgate, Rule::Naive, Rule::Perfherder];

    /// The alerts on a series: (first night named, night it was found).
    pub fn alerts(self, s: &[f64]) -> Vec<(usize, usize)> {
        match self {
            Rule::Perfgate => change_points(s, &StepRule::default())
                .iter()
                .filter(|c| c.direction == crate::stats::changepoint::Direction::Up)
                .map(|c| (c.first, c.found_at))
                .collect(),
            Rule::Naive => naive_threshold(s, 20, 0.10)
                .into_iter()
                .map(|t| (t, t))
                .collect(),
            Rule::Perfherder => perfherder_t(s, 12, 12, 7.0),
        }
    }
}

/// What one row measured for one rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleRates {
    /// Null rows: alerts per series per night.
    pub false_alerts_per_night: f64,
    /// Step rows: nights from the step until >= 90 % of the series alerted (the step night is 1);
    /// `None` when not reached by the end of the series.
    pub nights_to_90: Option<usize>,
    /// Step rows: the share of series alerted within 10 nights of the step.
    pub within_10: f64,
    /// Step rows: the share of series whose first alert after the step names its night +-1.
    pub named: f64,
}

/// Runs `reps` series of `m`, each rule on the same series.
pub fn run(m: &NightModel, reps: usize, seed: u64) -> Vec<(Rule, RuleRates)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let all: Vec<Vec<f64>> = (0..reps).map(|_| series(m, &mut rng)).collect();
    Rule::ALL
        .iter()
        .map(|&rule| {
            let mut alerts = 0usize;
            let mut delays: Vec<Option<usize>> = Vec::new();
            let mut named = 0usize;
            for s in &all {
                let a = rule.alerts(s);
                alerts += a.len();
                if m.step != 1.0 {
                    // the first alert found on or after the step night, in nights from the
                    // step (the step night is 1), and whether it names the step's night +-1
                    let hit = a
                        .iter()
                        .filter(|(_, found)| *found >= m.step_at)
                        .min_by_key(|(_, found)| *found);
                    if hit.is_some_and(|(first, _)| first.abs_diff(m.step_at) <= 1) {
                        named += 1;
                    }
                    delays.push(hit.map(|(_, found)| found + 1 - m.step_at));
                }
            }
            let nights = (reps * m.nights).max(1) as f64;
            let within_10 = if delays.is_empty() {
                0.0
            } else {
                delays.iter().filter(|d| d.is_some_and(|d| d <= 10)).count() as f64
                    / delays.len() as f64
            };
            let nights_to_90 = (1..=m.nights.saturating_sub(m.step_at)).find(|&d| {
                !delays.is_empty()
                    && delays.iter().filter(|x| x.is_some_and(|x| x <= d)).count() as f64
                        >= 0.9 * delays.len() as f64
            });
            (
                rule,
                RuleRates {
                    false_alerts_per_night: alerts as f64 / nights,
                    nights_to_90,
                    within_10,
                    named: named as f64 / reps.max(1) as f64,
                },
            )
        })
        .collect()
}

/// The `--nightly` section.
pub fn report(reps: usize, seed: u64) -> String {
    let mut out = format!(
        "perfgate calibrate --nightly: {reps} series of 60 nights per row, seed {seed}\n\
         rules: perfgate = rank step test with 3-night confirmation (alpha 0.01 per night, step >= 5 %);\n\
         naive = tonight > 1.10 x median of the last 20 nights; perfherder = Welch t, back 12, fore 12, t > 7.\n\
         null rows: false alerts per series per night (every alert of a null series is false).\n\
         step rows: nights from the step until 90 % of series alerted (the step night is 1) / share\n\
         alerted within 10 nights / share whose first alert names the step's night +-1.\n\n"
    );
    out.push_str(&format!(
        "{:<62} {:>18} {:>18} {:>18}\n",
        "series", "perfgate", "naive", "perfherder"
    ));
    for (i, m) in models().iter().enumerate() {
        let rates = run(m, reps, seed.wrapping_add(i as u64));
        let cell = |r: &RuleRates| {
            if m.step == 1.0 {
                format!("{:.2}%", 100.0 * r.false_alerts_per_night)
            } else {
                let n = r
                    .nights_to_90
                    .map_or("never".to_string(), |n| n.to_string());
                format!(
                    "{n} / {:.0}% / {:.0}%",
                    100.0 * r.within_10,
                    100.0 * r.named
                )
            }
        };
        out.push_str(&format!(
            "{:<62} {:>18} {:>18} {:>18}\n",
            m.label,
            cell(&rates[0].1),
            cell(&rates[1].1),
            cell(&rates[2].1)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_has_its_step_and_no_noise_when_asked() {
        let m = NightModel {
            label: "t",
            nights: 10,
            night_sd: 0.0,
            ar: 0.0,
            drift_sd: 0.0,
            outlier_p: 0.0,
            step_at: 4,
            step: 1.5,
        };
        let s = series(&m, &mut StdRng::seed_from_u64(1));
        assert_eq!(s.len(), 10);
        for (t, x) in s.iter().enumerate() {
            let want = if t >= 4 { 150.0 } else { 100.0 };
            assert!((x - want).abs() < 1e-6, "{t}: {x}");
        }
    }

    #[test]
    fn rates_count_alerts_and_delays() {
        // noise-free +50 % step at night 30 of 60: the naive rule fires from the step night
        // while the median of the last 20 nights is below 150 / 1.1: nights 30..=39 (median
        // 100) and 40 (ten of each: median 125 < 136.4), 11 alerts per series
        let m = NightModel {
            label: "t",
            nights: 60,
            night_sd: 0.0,
            ar: 0.0,
            drift_sd: 0.0,
            outlier_p: 0.0,
            step_at: 30,
            step: 1.5,
        };
        let r = run(&m, 3, 7);
        let naive = r.iter().find(|(k, _)| *k == Rule::Naive).unwrap().1;
        assert_eq!(naive.nights_to_90, Some(1));
        assert_eq!(naive.within_10, 1.0);
        assert!((naive.false_alerts_per_night - 11.0 / 60.0).abs() < 1e-12);
    }
}
