//! `perfgate calibrate --nightly`: the nightly verdict rule ([`crate::stats::nightly_band`])
//! beside the rank change-point rule it replaces ([`crate::stats::changepoint`]), a
//! Perfherder-style t-test and an E-divisive/Otava-style rule ([`crate::stats::edivisive`]), on
//! the same simulated series of nights.
//!
//! A night's value is a scenario's P50 as one nightly run measures it: ln x_t = ln 100 + e_t +
//! w_t (+ ln step from `step_at` on), e_t ~ N(0, `night_sd`) independent night-to-night drift,
//! w_t a slow random walk (w_t = w_(t-1) + N(0, `walk_sd`)) or an AR(1) runner drift (a_t =
//! `ar` a_(t-1) + N(0, `ar_sd`)), and with probability `outlier_p` an outlier night x
//! `outlier`.
//!
//! Figures per rule, from its own exit code (red: the night it confirms a step up) and its change
//! points: null rows, red nights and change points (either direction) per 100 nights; step rows,
//! the share of series red on the step's first or second night, the share with a step up
//! confirmed by its third night, and the share with one found within 7 nights.

use crate::stats::changepoint::{change_points, perfherder_t, Direction, StepRule};
use crate::stats::edivisive::{segment, OtavaRule};
use crate::stats::nightly_band::{judge_every_night, BandRule, Event, Tonight, Way};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// One simulated kind of series.
#[derive(Debug, Clone)]
pub struct NightModel {
    pub label: &'static str,
    pub nights: usize,
    pub night_sd: f64,
    pub walk_sd: f64,
    pub ar: f64,
    pub ar_sd: f64,
    pub outlier_p: f64,
    pub outlier: f64,
    /// The step: from this night (index) on, values are multiplied by `step` (1.0: none).
    pub step_at: usize,
    pub step: f64,
}

/// The series kinds `perfgate calibrate --nightly` prints, each unchanged, +10 % and +20 %.
pub fn models() -> Vec<NightModel> {
    let iid = NightModel {
        label: "iid, night sd 5 %",
        nights: 60,
        night_sd: 0.05,
        walk_sd: 0.0,
        ar: 0.0,
        ar_sd: 0.0,
        outlier_p: 0.0,
        outlier: 1.0,
        step_at: 30,
        step: 1.0,
    };
    // Issue 43's own condition (tau 5 %, 5 % outlier nights at 1.3x, no drift); last, so the rows
    // above keep their seeds (seed + row index) and their figures.
    let outliers = NightModel {
        label: "sd 5 %, 5 % outliers x1.3",
        outlier_p: 0.05,
        outlier: 1.3,
        ..iid.clone()
    };
    let walk = NightModel {
        label: "sd 5 %, 5 % outliers x1.3, walk 0.5 %/night",
        walk_sd: 0.005,
        outlier_p: 0.05,
        outlier: 1.3,
        ..iid.clone()
    };
    let ar = NightModel {
        label: "sd 5 %, 5 % outliers x1.3, AR(0.7) drift 2 %",
        ar: 0.7,
        ar_sd: 0.02,
        outlier_p: 0.05,
        outlier: 1.3,
        ..iid.clone()
    };
    [iid, walk, ar, outliers]
        .into_iter()
        .flat_map(|m| [1.0, 1.1, 1.2].map(|step| NightModel { step, ..m.clone() }))
        .collect()
}

/// One simulated series of `m`.
pub fn series(m: &NightModel, rng: &mut StdRng) -> Vec<f64> {
    let normal = |sd: f64| Normal::new(0.0, sd.max(1e-12)).expect("finite sd");
    let (e, w, d) = (normal(m.night_sd), normal(m.walk_sd), normal(m.ar_sd));
    let (mut walk, mut a) = (0.0, 0.0);
    (0..m.nights)
        .map(|t| {
            if m.walk_sd > 0.0 {
                walk += w.sample(rng);
            }
            a = m.ar * a + if m.ar_sd > 0.0 { d.sample(rng) } else { 0.0 };
            let mut x = 100.0 * (walk + a + e.sample(rng)).exp();
            if m.outlier_p > 0.0 && rng.random::<f64>() < m.outlier_p {
                x *= m.outlier;
            }
            if t >= m.step_at {
                x *= m.step;
            }
            x
        })
        .collect()
}

/// The four rules compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// [`crate::stats::nightly_band`] with [`BandRule::default`]: the night's exit code.
    Band,
    /// [`change_points`] with [`StepRule::default`]: the rank rule of perfgate <= 0.1 (its exit
    /// code came from the committed baseline; here: red on the night it finds a step up).
    Rank,
    /// [`perfherder_t`]: back 12, fore 12, t > 7, both directions.
    Perfherder,
    /// [`segment`] of the last 50 nights, Welch p < 0.001, re-run each night.
    Otava,
}

/// A rule's verdicts on one series: red per night and its change points (first night, found,
/// up).
pub struct Verdicts {
    pub red: Vec<bool>,
    pub steps: Vec<(usize, usize, bool)>,
}

impl Rule {
    pub const ALL: [Rule; 4] = [Rule::Band, Rule::Rank, Rule::Perfherder, Rule::Otava];

    pub fn name(self) -> &'static str {
        match self {
            Rule::Band => "band (new)",
            Rule::Rank => "rank (0.1)",
            Rule::Perfherder => "perfherder",
            Rule::Otava => "otava",
        }
    }

    pub fn verdicts(self, s: &[f64]) -> Verdicts {
        match self {
            Rule::Band => {
                let (nights, events) = judge_every_night(s, &BandRule::default());
                Verdicts {
                    red: nights
                        .iter()
                        .map(|n| matches!(n, Tonight::StepUp(_)))
                        .collect(),
                    steps: events
                        .iter()
                        .filter_map(|e| match e {
                            Event::Step(st) => Some((st.first, st.found_at, st.way == Way::Up)),
                            Event::Restored { .. } => None,
                        })
                        .collect(),
                }
            }
            Rule::Rank => red_when_found(
                s.len(),
                change_points(s, &StepRule::default())
                    .iter()
                    .map(|c| (c.first, c.found_at, c.direction == Direction::Up))
                    .collect(),
            ),
            Rule::Perfherder => {
                let inv: Vec<f64> = s.iter().map(|v| 1.0 / v).collect();
                let mut steps: Vec<(usize, usize, bool)> = perfherder_t(s, 12, 12, 7.0)
                    .into_iter()
                    .map(|(k, f)| (k, f, true))
                    .chain(
                        perfherder_t(&inv, 12, 12, 7.0)
                            .into_iter()
                            .map(|(k, f)| (k, f, false)),
                    )
                    .collect();
                steps.sort_by_key(|&(_, f, _)| f);
                red_when_found(s.len(), steps)
            }
            Rule::Otava => otava(s, &OtavaRule::default()),
        }
    }
}

/// Red on the nights a step up is found.
fn red_when_found(n: usize, steps: Vec<(usize, usize, bool)>) -> Verdicts {
    let red = (0..n)
        .map(|t| steps.iter().any(|s| s.1 == t && s.2))
        .collect();
    Verdicts { red, steps }
}

/// Otava re-run each night on the newest nights: a change point is reported the first night it
/// appears (not within +-1 night of one reported before); red on the night a step up is
/// reported.
fn otava(s: &[f64], rule: &OtavaRule) -> Verdicts {
    let lx: Vec<f64> = s.iter().map(|v| v.ln()).collect();
    let mut steps: Vec<(usize, usize, bool)> = Vec::new();
    for t in 0..s.len() {
        let from = (t + 1).saturating_sub(rule.window);
        let x = &lx[from..=t];
        let cps = segment(x, rule);
        let mean = |a: usize, b: usize| x[a..b].iter().sum::<f64>() / (b - a) as f64;
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cps.iter().copied())
            .chain(std::iter::once(x.len()))
            .collect();
        let up_at = |i: usize| mean(bounds[i + 1], bounds[i + 2]) > mean(bounds[i], bounds[i + 1]);
        for (i, &k) in cps.iter().enumerate() {
            let abs = from + k;
            if !steps.iter().any(|s| s.0.abs_diff(abs) <= 1) {
                steps.push((abs, t, up_at(i)));
            }
        }
    }
    red_when_found(s.len(), steps)
}

/// What one row measured for one rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleRates {
    /// Null rows: red nights per 100 nights.
    pub red_per_100: f64,
    /// Null rows: change points (either direction) per 100 nights.
    pub steps_per_100: f64,
    /// Step rows: the share red on the step's first or second night.
    pub red_within_2: f64,
    /// Step rows: the share with a step up found by the step's third night.
    pub confirmed_within_3: f64,
    /// Step rows: the share with a step up found within 7 nights.
    pub caught_within_7: f64,
}

/// Runs `reps` series of `m`, each rule on the same series.
pub fn run(m: &NightModel, reps: usize, seed: u64) -> Vec<(Rule, RuleRates)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let all: Vec<Vec<f64>> = (0..reps).map(|_| series(m, &mut rng)).collect();
    let at = m.step_at;
    Rule::ALL
        .iter()
        .map(|&rule| {
            let (mut red, mut steps, mut r2, mut c3, mut c7) = (0, 0, 0, 0, 0);
            for s in &all {
                let v = rule.verdicts(s);
                red += v.red.iter().filter(|r| **r).count();
                steps += v.steps.len();
                let found_up = |by: usize| {
                    v.steps
                        .iter()
                        .any(|&(_, f, up)| up && f >= at && f < at + by)
                };
                r2 += usize::from(v.red.iter().skip(at).take(2).any(|r| *r));
                c3 += usize::from(found_up(3));
                c7 += usize::from(found_up(7));
            }
            let per_100 = |k: usize| 100.0 * k as f64 / (reps * m.nights).max(1) as f64;
            let share = |k: usize| k as f64 / reps.max(1) as f64;
            (
                rule,
                RuleRates {
                    red_per_100: per_100(red),
                    steps_per_100: per_100(steps),
                    red_within_2: share(r2),
                    confirmed_within_3: share(c3),
                    caught_within_7: share(c7),
                },
            )
        })
        .collect()
}

/// The `--nightly` section.
pub fn report(reps: usize, seed: u64) -> String {
    let r = BandRule::default();
    let mut out = format!(
        "perfgate calibrate --nightly: {reps} series of 60 nights per row (step rows: the step from night 31), seed {seed}\n\
         rules: band (new) = the night's exit code: a robust band from the nights since the last confirmed step\n\
         (prior tau {:.0} % worth {} nights), a step up confirmed by 2 nights both beyond {} sd (a step down {} sd) or a CUSUM of 3+ (k {}, H {}, clip {});\n\
         rank (0.1) = Mann-Whitney step, 3+ nights, alpha 0.01; every rule's night is red when it confirms a step up;\n\
         perfherder = Welch t, back 12, fore 12, t > 7, both ways; otava = E-divisive of the last 50 nights, Welch p < 0.001.\n\
         unchanged rows: red nights per 100 nights / change points (either direction) per 100 nights.\n\
         step rows: share red on the step's 1st or 2nd night / step up found by its 3rd night / found within 7 nights.\n\n",
        100.0 * r.prior_tau,
        r.prior_nights,
        r.two_night_z,
        r.two_night_z_down,
        r.allowance,
        r.decision,
        r.clip
    );
    out.push_str(&format!("{:<52}", "series"));
    for rule in Rule::ALL {
        out.push_str(&format!(" {:>17}", rule.name()));
    }
    out.push('\n');
    for (i, m) in models().iter().enumerate() {
        let rates = run(m, reps, seed.wrapping_add(i as u64));
        let what = if m.step == 1.0 {
            "unchanged".to_string()
        } else {
            format!("{:+.0} %", 100.0 * (m.step - 1.0))
        };
        out.push_str(&format!("{:<52}", format!("{}: {what}", m.label)));
        for (_, r) in &rates {
            let cell = if m.step == 1.0 {
                format!("{:.2} / {:.2}", r.red_per_100, r.steps_per_100)
            } else {
                format!(
                    "{:.0}/{:.0}/{:.0}%",
                    100.0 * r.red_within_2,
                    100.0 * r.confirmed_within_3,
                    100.0 * r.caught_within_7
                )
            };
            out.push_str(&format!(" {cell:>17}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of `nights` without noise, multiplied by `step` from night `step_at` on.
    fn noise_free(nights: usize, step_at: usize, step: f64) -> NightModel {
        NightModel {
            label: "t",
            nights,
            night_sd: 0.0,
            walk_sd: 0.0,
            ar: 0.0,
            ar_sd: 0.0,
            outlier_p: 0.0,
            outlier: 1.0,
            step_at,
            step,
        }
    }

    #[test]
    fn a_series_has_its_step_and_no_noise_when_asked() {
        let m = noise_free(10, 4, 1.5);
        let s = series(&m, &mut StdRng::seed_from_u64(1));
        assert_eq!(s.len(), 10);
        for (t, x) in s.iter().enumerate() {
            let want = if t >= 4 { 150.0 } else { 100.0 };
            assert!((x - want).abs() < 1e-6, "{t}: {x}");
        }
    }

    #[test]
    fn a_step_up_is_red_on_the_night_it_is_found() {
        // up found on night 3, down found on night 6: red on night 3 only
        let v = red_when_found(8, vec![(2, 3, true), (5, 6, false)]);
        assert_eq!(
            v.red,
            vec![false, false, false, true, false, false, false, false]
        );
    }

    #[test]
    fn rates_count_red_nights_and_steps() {
        // noise-free +50 % step at night 30 of 60: the band confirms it on its second night
        // (both nights beyond 1.8 predicted sd of the prior's 5 %), red on that night only (the
        // step in force after it is a WARN): 1 red night of 60 per series, one change point
        let m = noise_free(60, 30, 1.5);
        let r = run(&m, 3, 7);
        let band = r.iter().find(|(k, _)| *k == Rule::Band).unwrap().1;
        assert_eq!(band.red_within_2, 1.0);
        assert_eq!(band.confirmed_within_3, 1.0);
        assert!((band.red_per_100 - 100.0 / 60.0).abs() < 1e-9, "{band:?}");
        assert!((band.steps_per_100 - 100.0 / 60.0).abs() < 1e-9, "{band:?}");
    }
}
