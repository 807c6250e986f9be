//! A/B designs in `calibrate` (`perfgate ab`, issue 17): both arms measured in the same run,
//! under a drift over the run that multiplies both arms' requests alike at the same moments;
//! interleaved and blocked schedules, and the gate's input for each.

use super::noise::{Change, Profile};
use crate::config::scenario::{GateSpec, Metric, Quantile};
use crate::gate::{self, Samples, ScenarioSamples, Verdict};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::collections::BTreeMap;

/// Drift over one A/B run, on the log scale, common to both arms, every scenario and every
/// metric at the same moment (the worst case for the family: one slow machine moves them all).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drift {
    /// None.
    None,
    /// A random walk (Brownian motion) whose log-sd at the end of the run is tau.
    Walk(f64),
    /// Linear: the machine (1 + f) times slower at the end of the run than at its start.
    Linear(f64),
    /// A step: (1 + f) times slower from a moment drawn uniformly over the run.
    Step(f64),
}

impl Drift {
    /// The log drift at `t` equally spaced moments of one run.
    fn path(self, t: usize, rng: &mut StdRng) -> Vec<f64> {
        let u = |j: usize| (j as f64 + 0.5) / t as f64;
        match self {
            Drift::None => vec![0.0; t],
            Drift::Walk(tau) => {
                let sd = tau / (t as f64).sqrt();
                let mut w = 0.0;
                (0..t)
                    .map(|_| {
                        let z: f64 = rng.sample(StandardNormal);
                        w += sd * z;
                        w
                    })
                    .collect()
            }
            Drift::Linear(f) => (0..t).map(|j| (1.0 + f).ln() * u(j)).collect(),
            Drift::Step(f) => {
                let at: f64 = rng.random();
                (0..t)
                    .map(|j| if u(j) > at { (1.0 + f).ln() } else { 0.0 })
                    .collect()
            }
        }
    }
}

/// How the two arms were measured and analysed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AbDesign {
    /// Requests alternate between the arms, each consecutive pair in a random order.
    Interleaved,
    /// One arm at a time in blocks of equal size in this order (A base, B candidate), analysed
    /// by the blocked estimate.
    Blocked(&'static str),
    /// The same blocks, analysed as if interleaved (pooled): what blocking is for.
    Pooled(&'static str),
}

/// One A/B experiment.
#[derive(Debug, Clone)]
pub struct AbExperiment {
    pub label: String,
    pub profiles: Vec<Profile>,
    pub quantiles: Vec<Quantile>,
    pub scenarios: usize,
    /// Requests per arm (the first look when sequential).
    pub n: usize,
    /// Sequential: requests per arm at most (looks 20, 50, 100, ...); interleaved only.
    pub max_samples: Option<usize>,
    pub design: AbDesign,
    pub drift: Drift,
    pub change: Change,
    /// Which metric's FAIL counts (None: any, family-wise).
    pub count_metric: Option<Metric>,
    /// P50 fail tolerance instead of the default 10 % (warn at half of it).
    pub fail_p50: Option<f64>,
}

impl AbExperiment {
    /// A row gating `profiles` at `quantiles`: one scenario, 40 requests per arm, interleaved,
    /// no drift, no change, any FAIL counted, the default bands; rows set the rest with
    /// `..AbExperiment::new(..)`.
    pub fn new(label: impl Into<String>, profiles: Vec<Profile>, quantiles: Vec<Quantile>) -> Self {
        AbExperiment {
            label: label.into(),
            profiles,
            quantiles,
            scenarios: 1,
            n: 40,
            max_samples: None,
            design: AbDesign::Interleaved,
            drift: Drift::None,
            change: Change::None,
            count_metric: None,
            fail_p50: None,
        }
    }
}

/// Rates of one A/B experiment.
#[derive(Debug, Clone, Default)]
pub struct AbRates {
    /// Share of replicates with a FAIL.
    pub fail: f64,
    /// Share with a FAIL or a WARN for a significant slowdown beyond the warn tolerance (of the
    /// counted metric; not a WARN for "inconclusive at this n").
    pub flagged: f64,
    /// Mean requests per arm used.
    pub mean_n: f64,
}

/// One request of `p` at log drift `d`: its value.
fn draw_one(p: &Profile, d: f64, factor: f64, slow: f64, rng: &mut StdRng) -> f64 {
    let z: f64 = rng.sample(StandardNormal);
    let mut x = p.median_ms * (p.sigma * z + d).exp() * factor;
    if slow > 0.0 && rng.random::<f64>() < slow {
        x *= p.slow_factor;
    }
    x
}

/// The arm (false base, true candidate) and block of each moment of a run of `n` requests per
/// arm.
fn ab_schedule(design: AbDesign, n: usize, rng: &mut StdRng) -> Vec<(bool, usize)> {
    match design {
        AbDesign::Interleaved => (0..n)
            .flat_map(|_| {
                let first: bool = rng.random();
                [(first, 0), (!first, 0)]
            })
            .collect(),
        AbDesign::Blocked(order) | AbDesign::Pooled(order) => {
            let per = n / (order.len() / 2).max(1);
            order
                .chars()
                .enumerate()
                .flat_map(|(k, c)| std::iter::repeat_n((c == 'B', k), per))
                .collect()
        }
    }
}

/// Runs `reps` replicates of `e`.
pub fn run_ab(e: &AbExperiment, reps: usize, seed: u64) -> AbRates {
    let mut rng = StdRng::seed_from_u64(seed);
    let gate = ab_gate(e);
    let looks = match (e.design, e.max_samples) {
        (AbDesign::Interleaved, Some(m)) => crate::config::scenario::LoadSpec {
            concurrency: 1,
            samples: e.n as u32,
            warmup: 0,
            max_samples: Some(m as u32),
            rate: None,
            seed: None,
            ramp: crate::config::scenario::Ramp::Steady,
            share: None,
            trace: None,
        }
        .looks(),
        _ => vec![e.n],
    };
    let n_max = *looks.last().unwrap_or(&e.n);
    let (mut fails, mut flagged, mut n_sum) = (0usize, 0usize, 0usize);
    for _ in 0..reps {
        // One drift path per replicate, shared by every scenario and metric.
        let sched_len = ab_schedule(e.design, n_max, &mut rng).len();
        let path = e.drift.path(sched_len, &mut rng);
        // [scenario] -> schedule, [scenario][metric] -> value of each moment.
        let mut runs = Vec::new();
        for _ in 0..e.scenarios {
            let sched = ab_schedule(e.design, n_max, &mut rng);
            let vals = draw_moments(e, &sched, &path, &mut rng);
            runs.push((sched, vals));
        }
        let mut used = n_max;
        let mut last_checks = Vec::new();
        for (i, &n_c) in looks.iter().enumerate() {
            let ins: Vec<ScenarioSamples> = runs
                .iter()
                .enumerate()
                .map(|(si, (sched, vals))| ab_input(e, &gate, si, sched, vals, n_c, looks.len()))
                .collect();
            let (checks, _) = gate::evaluate(&ins);
            let last = i + 1 == looks.len();
            if last || gate::all_decided(&checks) {
                used = n_c;
                last_checks = checks;
                break;
            }
        }
        let counted = |c: &&gate::Check| e.count_metric.is_none_or(|m| c.metric == Some(m));
        fails += last_checks
            .iter()
            .filter(counted)
            .any(|c| c.verdict == Verdict::Fail) as usize;
        flagged += last_checks.iter().filter(counted).any(|c| {
            c.verdict == Verdict::Fail
                || (c.verdict == Verdict::Warn && c.reason.starts_with("significant slowdown"))
        }) as usize;
        n_sum += used;
    }
    AbRates {
        fail: fails as f64 / reps.max(1) as f64,
        flagged: flagged as f64 / reps.max(1) as f64,
        mean_n: n_sum as f64 / reps.max(1) as f64,
    }
}

/// The gate of `e`: its metrics and quantiles, the default bands but for `fail_p50`.
fn ab_gate(e: &AbExperiment) -> GateSpec {
    let mut gate = GateSpec {
        metrics: e.profiles.iter().map(|p| p.metric).collect(),
        quantiles: e.quantiles.clone(),
        ..GateSpec::default()
    };
    if let Some(f) = e.fail_p50 {
        for p in &e.profiles {
            gate.bands.insert(
                (p.metric, Quantile::P50),
                crate::config::scenario::Band {
                    warn: f / 2.0,
                    fail: f,
                },
            );
        }
    }
    gate
}

/// The value of each moment of `sched` at the log drift of `path`, per metric of `e`: the
/// candidate's requests with `e.change` applied.
fn draw_moments(
    e: &AbExperiment,
    sched: &[(bool, usize)],
    path: &[f64],
    rng: &mut StdRng,
) -> Vec<Vec<f64>> {
    e.profiles
        .iter()
        .map(|p| {
            sched
                .iter()
                .zip(path)
                .map(|(&(cand, _), &d)| {
                    let (factor, slow) = match (cand, e.change) {
                        (true, Change::Uniform(f)) => (f, p.slow_share),
                        (true, Change::SlowShare(s)) => (1.0, s),
                        _ => (1.0, p.slow_share),
                    };
                    draw_one(p, d, factor, slow, rng)
                })
                .collect()
        })
        .collect()
}

/// The gate's input for scenario `si` at `n_c` requests per arm (the first n_c of each arm, in
/// time order).
fn ab_input(
    e: &AbExperiment,
    gate: &GateSpec,
    si: usize,
    sched: &[(bool, usize)],
    vals: &[Vec<f64>],
    n_c: usize,
    looks: usize,
) -> ScenarioSamples {
    let take = |v: &[f64], cand: bool| -> Vec<f64> {
        sched
            .iter()
            .zip(v)
            .filter(|((c, _), _)| *c == cand)
            .map(|(_, x)| *x)
            .take(n_c)
            .collect()
    };
    let metrics: Vec<(Metric, Samples, Samples)> = e
        .profiles
        .iter()
        .zip(vals)
        .map(|(p, v)| {
            (
                p.metric,
                Samples {
                    ok: take(v, false),
                    failed: 0,
                },
                Samples {
                    ok: take(v, true),
                    failed: 0,
                },
            )
        })
        .collect();
    let n_b = metrics.first().map_or(0, |m| m.1.n());
    let n_cand = metrics.first().map_or(0, |m| m.2.n());
    let design = match e.design {
        AbDesign::Interleaved | AbDesign::Pooled(_) => gate::Design::Interleaved,
        AbDesign::Blocked(order) => blocked_design(e, order, sched, vals),
    };
    ScenarioSamples {
        client_delay: None,
        pairing: crate::gate::Pairing::default(),
        scenario: format!("s{si}"),
        gate: gate.clone(),
        metrics,
        errors: gate::ErrorCounts::new((0, n_b), (0, n_cand)),
        stopped: gate::ErrorCounts::default(),
        spread: BTreeMap::new(),
        looks,
        slo: Vec::new(),
        design,
        itl: None,
        quality: Default::default(),
    }
}

/// The blocks of a run in `order`: each block's side and its requests' values per metric.
fn blocked_design(
    e: &AbExperiment,
    order: &str,
    sched: &[(bool, usize)],
    vals: &[Vec<f64>],
) -> gate::Design {
    let blocks = (0..order.len())
        .map(|k| {
            let cand = sched.iter().find(|(_, b)| *b == k).is_some_and(|x| x.0);
            gate::Block {
                side: if cand {
                    gate::Side::Candidate
                } else {
                    gate::Side::Base
                },
                metrics: e
                    .profiles
                    .iter()
                    .zip(vals)
                    .map(|(p, v)| {
                        let ok = sched
                            .iter()
                            .zip(v)
                            .filter(|((_, b), _)| *b == k)
                            .map(|(_, x)| *x)
                            .collect();
                        (p.metric, Samples { ok, failed: 0 })
                    })
                    .collect(),
            }
        })
        .collect();
    gate::Design::Blocked(blocks)
}
