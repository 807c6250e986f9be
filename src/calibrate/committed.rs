//! One committed-baseline experiment: a baseline of k runs and a candidate run per scenario and
//! metric, drawn from the noise model and run through the gate replicate by replicate (looks of
//! a sequential run included), with the comparator rules on the same data.

use super::comparators::{threshold_fails, ttest_fails};
use super::noise::{draw, drift, Change, Profile};
use crate::config::scenario::{GateSpec, Metric, Quantile};
use crate::gate::{self, Samples, ScenarioSamples, Verdict};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;

/// One simulated check: a baseline of k runs and a candidate run, per scenario and metric.
pub(super) struct Sim {
    /// [scenario][metric] -> baseline runs
    pub(super) base: Vec<Vec<Vec<Vec<f64>>>>,
    /// [scenario][metric] -> candidate
    pub(super) cand: Vec<Vec<Vec<f64>>>,
}

impl Sim {
    /// The first `n` samples of every run, baseline and candidate.
    fn first(&self, n: usize) -> Sim {
        let cut = |v: &Vec<f64>| v[..n.min(v.len())].to_vec();
        Sim {
            base: self
                .base
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|runs| runs.iter().map(cut).collect())
                        .collect()
                })
                .collect(),
            cand: self
                .cand
                .iter()
                .map(|m| m.iter().map(cut).collect())
                .collect(),
        }
    }
}

/// Draws one check of `e` with `n` samples per run on both sides.
fn simulate(e: &Experiment, n: usize, rng: &mut StdRng) -> Sim {
    let (profiles, scenarios, k, tau, change) = (&e.profiles, e.scenarios, e.k, e.tau, e.change);
    let n_c = n;
    let base_drifts: Vec<f64> = (0..k).map(|_| drift(tau, rng)).collect();
    let cand_drift = drift(tau, rng);
    let mut base = Vec::new();
    let mut cand = Vec::new();
    for _ in 0..scenarios {
        let mut bm = Vec::new();
        let mut cm = Vec::new();
        for p in profiles {
            bm.push(
                base_drifts
                    .iter()
                    .map(|&d| draw(p, n, d, Change::None, rng))
                    .collect(),
            );
            cm.push(draw(p, n_c, cand_drift, change, rng));
        }
        base.push(bm);
        cand.push(cm);
    }
    Sim { base, cand }
}

/// The gate's input for every scenario of `sim` at a look of `n_c` candidate samples.
fn inputs(
    sim: &Sim,
    profiles: &[Profile],
    gate: &GateSpec,
    n_c: usize,
    looks: usize,
) -> Vec<ScenarioSamples> {
    sim.base
        .iter()
        .zip(&sim.cand)
        .enumerate()
        .map(|(i, (bm, cm))| {
            let metrics = profiles
                .iter()
                .zip(bm.iter().zip(cm))
                .map(|(p, (b, c))| {
                    let pooled: Vec<f64> = b.iter().flatten().copied().collect();
                    (
                        p.metric,
                        Samples {
                            ok: pooled,
                            failed: 0,
                        },
                        Samples {
                            ok: c[..n_c.min(c.len())].to_vec(),
                            failed: 0,
                        },
                    )
                })
                .collect();
            let spread: BTreeMap<Metric, gate::Spread> = if bm.first().map_or(0, |r| r.len()) >= 2 {
                profiles
                    .iter()
                    .zip(bm)
                    .filter_map(|(p, runs)| {
                        crate::stats::spread::run_spread_upper(runs).map(|tau| {
                            (
                                p.metric,
                                gate::Spread {
                                    tau,
                                    runs: runs.len(),
                                    nights: None,
                                },
                            )
                        })
                    })
                    .collect()
            } else {
                BTreeMap::new()
            };
            ScenarioSamples {
                client_delay: None,
                pairing: crate::gate::Pairing::default(),
                scenario: format!("s{i}"),
                gate: gate.clone(),
                metrics,
                spread,
                errors: gate::ErrorCounts::new((0, 1), (0, 1)),
                stopped: gate::ErrorCounts::default(),
                looks,
                slo: Vec::new(),
                design: gate::Design::Committed,
                itl: None,
                quality: Default::default(),
            }
        })
        .collect()
}

/// Rates from one experiment.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// Share of replicates with a FAIL from perfgate's gate.
    pub perfgate: f64,
    /// Same for the percentage-threshold rule.
    pub threshold: f64,
    /// Same for the per-run t-test (None when k = 1).
    pub ttest: Option<f64>,
    /// Mean candidate samples used (sequential).
    pub mean_n: f64,
    /// Median of (samples at which a null run stopped with PASS) / (samples the first look
    /// said it needed), when measured.
    pub need_ratio: Option<f64>,
}

/// One experiment's settings.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Row label.
    pub label: String,
    /// Metrics simulated (and gated).
    pub profiles: Vec<Profile>,
    /// Quantiles gated.
    pub quantiles: Vec<Quantile>,
    /// Scenarios in the check.
    pub scenarios: usize,
    /// Baseline runs.
    pub k: usize,
    /// Samples per run (baseline and the first candidate look).
    pub n: usize,
    /// Sequential: candidate max samples (looks 20, 50, 100, ...).
    pub max_samples: Option<usize>,
    /// Run-to-run drift.
    pub tau: f64,
    /// Candidate change.
    pub change: Change,
    /// Which metric's FAIL counts (None: any, i.e. family-wise).
    pub count_metric: Option<Metric>,
}

impl Experiment {
    /// A row gating `profiles` at `quantiles`: one scenario, a baseline of one run, 20 samples,
    /// no drift, no change, any FAIL counted; rows set the rest with `..Experiment::new(..)`.
    pub fn new(label: impl Into<String>, profiles: Vec<Profile>, quantiles: Vec<Quantile>) -> Self {
        Experiment {
            label: label.into(),
            profiles,
            quantiles,
            scenarios: 1,
            k: 1,
            n: 20,
            max_samples: None,
            tau: 0.0,
            change: Change::None,
            count_metric: None,
        }
    }
}

/// Runs `reps` replicates of `e`.
pub fn run_experiment(e: &Experiment, reps: usize, seed: u64) -> Rates {
    let mut rng = StdRng::seed_from_u64(seed);
    let gate = GateSpec {
        metrics: e.profiles.iter().map(|p| p.metric).collect(),
        quantiles: e.quantiles.clone(),
        ..GateSpec::default()
    };
    let looks = crate::config::scenario::LoadSpec {
        concurrency: 1,
        samples: e.n as u32,
        warmup: 0,
        max_samples: e.max_samples.map(|m| m as u32),
        rate: None,
        seed: None,
        ramp: crate::config::scenario::Ramp::Steady,
        share: None,
        trace: None,
    }
    .looks();
    let n_max = *looks.last().unwrap_or(&e.n);
    let (mut fails, mut thr, mut tt, mut tt_n, mut n_sum) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut need = Vec::new();
    for _ in 0..reps {
        // Baselines of max_samples, as bless measures when max_samples is set.
        let sim = simulate(e, n_max, &mut rng);
        let mut verdict_fail = false;
        let mut used = n_max;
        let mut first_need: Option<usize> = None;
        for (i, &n_c) in looks.iter().enumerate() {
            let ins = inputs(&sim, &e.profiles, &gate, n_c, looks.len());
            let (checks, _) = gate::evaluate(&ins);
            if i == 0 {
                first_need = checks
                    .iter()
                    .filter(|c| {
                        c.verdict == Verdict::Warn
                            && c.kind == crate::gate::CheckKind::Quantile(Quantile::P50)
                    })
                    .filter_map(|c| c.samples_needed)
                    .max();
            }
            let last = i + 1 == looks.len();
            if last || gate::all_decided(&checks) {
                verdict_fail = checks.iter().any(|c| {
                    c.verdict == Verdict::Fail && e.count_metric.is_none_or(|m| c.metric == Some(m))
                });
                used = n_c;
                if e.change == Change::None && !last && looks.len() > 1 && i > 0 {
                    if let Some(f) = first_need {
                        // Samples are only taken at looks: compare with the first look that
                        // reaches the printed need.
                        let at = looks.iter().copied().find(|&l| l >= f).unwrap_or(n_max);
                        need.push(n_c as f64 / at as f64);
                    }
                }
                break;
            }
        }
        fails += verdict_fail as usize;
        n_sum += used;
        // Comparators on the fixed first-look sample (n per run on both sides).
        let fixed_base = sim.first(e.n);
        thr += threshold_fails(&fixed_base, &gate, e.count_metric, &e.profiles) as usize;
        if let Some(f) = ttest_fails(&fixed_base, &gate, e.count_metric, &e.profiles) {
            tt += f as usize;
            tt_n += 1;
        }
    }
    need.sort_by(f64::total_cmp);
    Rates {
        perfgate: fails as f64 / reps as f64,
        threshold: thr as f64 / reps as f64,
        ttest: (tt_n > 0).then(|| tt as f64 / tt_n as f64),
        mean_n: n_sum as f64 / reps as f64,
        need_ratio: (!need.is_empty()).then(|| need[need.len() / 2]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::noise::TPOT;
    use super::*;

    #[test]
    fn gate_catches_a_large_tpot_regression_and_not_the_null() {
        let exp = |change| Experiment {
            label: "t".into(),
            profiles: vec![TPOT],
            quantiles: vec![Quantile::P50],
            scenarios: 1,
            k: 1,
            n: 20,
            max_samples: None,
            tau: 0.0,
            change,
            count_metric: Some(Metric::Tpot),
        };
        let hit = run_experiment(&exp(Change::Uniform(1.5)), 100, 3);
        assert!(hit.perfgate >= 0.95, "{hit:?}");
        let null = run_experiment(&exp(Change::None), 200, 4);
        assert!(null.perfgate <= 0.03, "{null:?}");
        assert!(null.threshold >= null.perfgate);
    }
}
