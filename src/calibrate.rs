//! `perfgate calibrate`: Monte-Carlo calibration of the gate on documented noise profiles
//! (docs/gate.md): false-alarm rate and power of perfgate's gate, side by
//! side with two comparator rules computed on the same simulated data:
//!
//! - **percentage threshold** (as github-action-benchmark): FAIL when the candidate's sample
//!   P50 (P99) exceeds the baseline's by more than the fail tolerance (10 %, 50 %);
//! - **t-test on per-run summaries** (as Bencher's `t_test` threshold): FAIL when the
//!   candidate run's P50 (P99) is above the upper 99 % Student-t prediction bound
//!   mean + t(0.99, k-1) * sd * sqrt(1 + 1/k) of the k baseline runs' values (needs k >= 2).
//!
//! Latency model: lognormal around a median (TTFT 200 ms, sigma 0.35, 5 % of requests on a 3x
//! slow path; TPOT 20 ms, sigma 0.10), times a per-run drift exp(tau * Z) shared by every
//! scenario of a run. Seeded: the same seed and replicate count print the same numbers.
//!
//! The ITL rows ([`itl_experiments`]) simulate every request's inter-token gaps with a
//! per-request speed (request-level random effect) and show the ITL P99 check's false alarms,
//! its level at its own fail boundary beside a naive test that counts gaps as independent, and
//! its power for a stall pattern (docs/accuracy.md).

pub mod nightly;

use crate::config::scenario::{GateSpec, Metric, Quantile};
use crate::gate::{self, Samples, ScenarioSamples, Verdict};
use crate::stats::quantile::{quantile_type7, sorted};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;
use std::fmt::Write;

/// A noise profile of one metric.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Which metric it models.
    pub metric: Metric,
    /// Median, ms.
    pub median_ms: f64,
    /// Lognormal log-sd within a run.
    pub sigma: f64,
    /// Share of requests on the slow path.
    pub slow_share: f64,
    /// Slow-path multiplier.
    pub slow_factor: f64,
}

/// TTFT: lognormal sigma 0.35 around 200 ms, 5 % of requests 3x slower.
pub const TTFT: Profile = Profile {
    metric: Metric::Ttft,
    median_ms: 200.0,
    sigma: 0.35,
    slow_share: 0.05,
    slow_factor: 3.0,
};
/// TPOT: lognormal sigma 0.10 around 20 ms.
pub const TPOT: Profile = Profile {
    metric: Metric::Tpot,
    median_ms: 20.0,
    sigma: 0.10,
    slow_share: 0.0,
    slow_factor: 1.0,
};

/// A change applied to the candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// No change.
    None,
    /// Every request slower by this factor (1.2 = +20 %).
    Uniform(f64),
    /// The slow-path share becomes this (tail-only regression).
    SlowShare(f64),
}

fn draw(p: &Profile, n: usize, drift: f64, change: Change, rng: &mut StdRng) -> Vec<f64> {
    let (factor, slow) = match change {
        Change::None => (1.0, p.slow_share),
        Change::Uniform(f) => (f, p.slow_share),
        Change::SlowShare(s) => (1.0, s),
    };
    (0..n)
        .map(|_| {
            let z: f64 = rng.sample(StandardNormal);
            let mut x = p.median_ms * (p.sigma * z).exp() * drift * factor;
            if slow > 0.0 && rng.random::<f64>() < slow {
                x *= p.slow_factor;
            }
            x
        })
        .collect()
}

fn drift(tau: f64, rng: &mut StdRng) -> f64 {
    let z: f64 = rng.sample(StandardNormal);
    (tau * z).exp()
}

/// One simulated check: a baseline of k runs and a candidate run, per scenario and metric.
struct Sim {
    /// [scenario][metric] -> baseline runs
    base: Vec<Vec<Vec<Vec<f64>>>>,
    /// [scenario][metric] -> candidate
    cand: Vec<Vec<Vec<f64>>>,
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
                                },
                            )
                        })
                    })
                    .collect()
            } else {
                BTreeMap::new()
            };
            ScenarioSamples {
                scenario: format!("s{i}"),
                gate: gate.clone(),
                metrics,
                spread,
                errors: gate::ErrorCounts::new((0, 1), (0, 1)),
                looks,
                slo: Vec::new(),
                design: gate::Design::Committed,
                itl: None,
            }
        })
        .collect()
}

fn p(v: &[f64], q: f64) -> f64 {
    quantile_type7(&sorted(v), q).unwrap_or(f64::NAN)
}

/// Percentage-threshold comparator: any (metric, quantile) point ratio above 1 + fail.
fn threshold_fails(
    sim: &Sim,
    gate: &GateSpec,
    metric: Option<Metric>,
    profiles: &[Profile],
) -> bool {
    sim.base.iter().zip(&sim.cand).any(|(bm, cm)| {
        profiles.iter().zip(bm.iter().zip(cm)).any(|(pr, (b, c))| {
            if metric.is_some_and(|m| m != pr.metric) {
                return false;
            }
            let pooled: Vec<f64> = b.iter().flatten().copied().collect();
            gate.quantiles
                .iter()
                .any(|q| p(c, q.p()) > (1.0 + gate.band(pr.metric, *q).fail) * p(&pooled, q.p()))
        })
    })
}

/// Bencher-style t-test on per-run summaries; `None` when the baseline has one run.
fn ttest_fails(
    sim: &Sim,
    gate: &GateSpec,
    metric: Option<Metric>,
    profiles: &[Profile],
) -> Option<bool> {
    let k = sim.base.first()?.first()?.len();
    if k < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (k - 1) as f64)
        .ok()?
        .inverse_cdf(0.99);
    Some(sim.base.iter().zip(&sim.cand).any(|(bm, cm)| {
        profiles.iter().zip(bm.iter().zip(cm)).any(|(pr, (b, c))| {
            if metric.is_some_and(|m| m != pr.metric) {
                return false;
            }
            gate.quantiles.iter().any(|q| {
                let vals: Vec<f64> = b.iter().map(|r| p(r, q.p())).collect();
                let mean = vals.iter().sum::<f64>() / k as f64;
                let sd =
                    (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64).sqrt();
                p(c, q.p()) > mean + t * sd * (1.0 + 1.0 / k as f64).sqrt()
            })
        })
    }))
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
        let cut = |v: &Vec<f64>| v[..e.n.min(v.len())].to_vec();
        let fixed_base = Sim {
            base: sim
                .base
                .iter()
                .map(|m| {
                    m.iter()
                        .map(|runs| runs.iter().map(cut).collect())
                        .collect()
                })
                .collect(),
            cand: sim
                .cand
                .iter()
                .map(|m| m.iter().map(cut).collect())
                .collect(),
        };
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

/// The experiments `calibrate` runs (issue targets in comments).
pub fn experiments() -> Vec<Experiment> {
    let both = vec![TTFT, TPOT];
    let q = vec![Quantile::P50, Quantile::P99];
    let mut v = Vec::new();
    let e = |label: &str,
             profiles: Vec<Profile>,
             quantiles: Vec<Quantile>,
             scenarios,
             k,
             n,
             max,
             tau,
             change,
             count| Experiment {
        label: label.to_string(),
        profiles,
        quantiles,
        scenarios,
        k,
        n,
        max_samples: max,
        tau,
        change,
        count_metric: count,
    };
    // Family-wise false alarms: 5 scenarios x (TTFT, TPOT) x (P50, P99). Target with the default
    // bless (k = DEFAULT_RUNS): <= 1 % at tau 0, <= 5 % at tau 0.05.
    let kd = crate::bless::DEFAULT_RUNS as usize;
    for (tau, k) in [
        (0.0, 1),
        (0.0, kd),
        (0.03, 1),
        (0.03, kd),
        (0.05, 1),
        (0.05, kd),
    ] {
        v.push(e(
            &format!("null, 5 scenarios, tau {tau}, k {k}, n 20"),
            both.clone(),
            q.clone(),
            5,
            k,
            20,
            None,
            tau,
            Change::None,
            None,
        ));
    }
    v.push(e(
        "null, 5 scenarios, tau 0, k 1, n 100",
        both.clone(),
        q.clone(),
        5,
        1,
        100,
        None,
        0.0,
        Change::None,
        None,
    ));
    // Power, TPOT P50 (target >= 90 % for +20 % at n 20).
    for f in [1.1, 1.2, 1.5] {
        v.push(e(
            &format!("TPOT +{:.0}% uniform, n 20", (f - 1.0) * 100.0),
            vec![TPOT],
            vec![Quantile::P50],
            1,
            1,
            20,
            None,
            0.0,
            Change::Uniform(f),
            Some(Metric::Tpot),
        ));
    }
    // Power with the default bless (k runs, the fail tolerance widened to their spread):
    // target >= 90 % for +20 % TPOT P50 at tau 0; at tau 0.05 for comparison.
    for tau in [0.0, 0.05] {
        v.push(e(
            &format!("TPOT +20% uniform, n 20, tau {tau}, k {kd}"),
            vec![TPOT],
            vec![Quantile::P50],
            1,
            kd,
            20,
            None,
            tau,
            Change::Uniform(1.2),
            Some(Metric::Tpot),
        ));
    }
    // Power, TTFT P50 sequential up to 300 (target >= 90 % for +20 %).
    for f in [1.1, 1.2, 1.5] {
        v.push(e(
            &format!("TTFT +{:.0}% uniform, seq 20..300", (f - 1.0) * 100.0),
            vec![TTFT],
            vec![Quantile::P50],
            1,
            1,
            20,
            Some(300),
            0.0,
            Change::Uniform(f),
            Some(Metric::Ttft),
        ));
    }
    v.push(e(
        "TTFT tail-only (slow 5%->10%), n 20",
        vec![TTFT],
        q.clone(),
        1,
        1,
        20,
        None,
        0.0,
        Change::SlowShare(0.10),
        Some(Metric::Ttft),
    ));
    v.push(e(
        "TTFT tail-only (slow 5%->10%), n 300",
        vec![TTFT],
        q.clone(),
        1,
        1,
        300,
        None,
        0.0,
        Change::SlowShare(0.10),
        Some(Metric::Ttft),
    ));
    // Sequential stopping under no change.
    v.push(e(
        "TPOT null, seq 20..300",
        vec![TPOT],
        vec![Quantile::P50],
        1,
        1,
        20,
        Some(300),
        0.0,
        Change::None,
        None,
    ));
    v.push(e(
        "TTFT null, seq 20..300",
        vec![TTFT],
        vec![Quantile::P50],
        1,
        1,
        20,
        Some(300),
        0.0,
        Change::None,
        None,
    ));
    // P99 false alarms at every n (target <= 1 %).
    for n in [20, 100, 300, 500, 1000] {
        v.push(e(
            &format!("TTFT P99 null, n {n}"),
            vec![TTFT],
            vec![Quantile::P99],
            1,
            1,
            n,
            None,
            0.0,
            Change::None,
            None,
        ));
    }
    v
}

/// Runs every experiment and renders the table.
pub fn report(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "perfgate calibrate: {reps} replicates per row, seed {seed}, alpha 0.01 (Holm), default bands");
    let _ = writeln!(
        out,
        "FAIL rate = false-alarm rate for null rows, power otherwise. n/needed: median of (n where a\nsequential null run stopped) / (first look >= the samples the first look's WARN said it needed).\n"
    );
    let mut any = false;
    for (i, e) in experiments().into_iter().enumerate() {
        if filter.is_some_and(|f| !e.label.contains(f)) {
            continue;
        }
        if !any {
            let _ = writeln!(
                out,
                "{:<48} {:>9} {:>10} {:>10} {:>8} {:>10}",
                "experiment", "perfgate", "threshold", "t-test/run", "mean n", "n/needed"
            );
        }
        any = true;
        let r = run_experiment(&e, reps, seed.wrapping_add(i as u64 * 7919));
        let _ = writeln!(
            out,
            "{:<48} {:>8.1}% {:>9.1}% {:>10} {:>8.0} {:>10}",
            e.label,
            r.perfgate * 100.0,
            r.threshold * 100.0,
            r.ttest
                .map(|t| format!("{:.1}%", t * 100.0))
                .unwrap_or_else(|| "n/a".into()),
            r.mean_n,
            r.need_ratio
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
    let itl: Vec<ItlExperiment> = itl_experiments()
        .into_iter()
        .filter(|e| filter.is_none_or(|f| e.label.contains(f)))
        .collect();
    if !itl.is_empty() {
        if any {
            out.push('\n');
        }
        any = true;
        let _ = writeln!(
            out,
            "ITL P99 (gate.metrics: [ttft, tpot, itl]): gaps ~20 ms, request speeds log-sd {}, gap noise log-sd {},\n{:.1} % of gaps {}x; each scenario gates TTFT, TPOT (P50, P99; TPOT = a request's mean gap) and ITL P99\n(band {:.0}/{:.0} %). family = any FAIL of the whole family; ITL, TPOT P50 = FAIL per check after Holm;\nclustered, naive = the ITL test alone at alpha 0.01, requests as clusters vs gaps as independent.\n",
            ITL.request_sigma,
            ITL.gap_sigma,
            ITL.hiccup_share * 100.0,
            ITL.hiccup_factor,
            crate::config::scenario::ITL_BAND.warn * 100.0,
            crate::config::scenario::ITL_BAND.fail * 100.0,
        );
        let _ = writeln!(
            out,
            "{:<48} {:>8} {:>8} {:>9} {:>10} {:>8}",
            "experiment", "family", "ITL", "TPOT P50", "clustered", "naive"
        );
        for (i, e) in itl.iter().enumerate() {
            let r = run_itl(e, reps, seed.wrapping_add(2_000_003 + i as u64 * 7919));
            let _ = writeln!(
                out,
                "{:<48} {:>7.1}% {:>7.2}% {:>8.1}% {:>9.2}% {:>7.2}%",
                e.label,
                r.family * 100.0,
                r.itl * 100.0,
                r.tpot * 100.0,
                r.clustered * 100.0,
                r.naive * 100.0
            );
        }
    }
    let ab = ab_report(reps, seed, filter);
    if !ab.is_empty() {
        if any {
            out.push('\n');
        }
        any = true;
        out.push_str(&ab);
    }
    let slo: Vec<SloExperiment> = slo_experiments()
        .into_iter()
        .filter(|e| filter.is_none_or(|f| e.label.contains(f)))
        .collect();
    if !slo.is_empty() {
        if any {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "SLO checks (gate.slo, no baseline): TTFT profile, objective on P90, one check at alpha 0.01.\nThe true P90 is {:.1} ms (mixture CDF solved by bisection). FAIL at the true P90 = false FAIL rate.\n",
            true_quantile(&TTFT, 0.9)
        );
        let _ = writeln!(
            out,
            "{:<48} {:>9} {:>9} {:>9}",
            "experiment", "FAIL", "PASS", "WARN"
        );
        for (i, e) in slo.iter().enumerate() {
            let r = run_slo(e, reps, seed.wrapping_add(1_000_003 + i as u64 * 7919));
            let _ = writeln!(
                out,
                "{:<48} {:>8.1}% {:>8.1}% {:>8.1}%",
                e.label,
                r[0] * 100.0,
                r[1] * 100.0,
                r[2] * 100.0
            );
        }
    }
    out
}

/// Inter-token gaps with request-level random effects: gap j of request i is
/// `median * speed_i * drift * exp(gap_sigma z_ij)`, `speed_i = exp(request_sigma z_i)`
/// (each request its own speed: batch, KV length, node), and a share `hiccup_share` of gaps
/// `hiccup_factor` times longer (occasional stalls that happen anyway).
#[derive(Debug, Clone, Copy)]
pub struct ItlProfile {
    pub median_ms: f64,
    pub request_sigma: f64,
    pub gap_sigma: f64,
    pub hiccup_share: f64,
    pub hiccup_factor: f64,
}

/// ITL: gaps around 20 ms, request speeds log-sd 0.15, gap noise log-sd 0.10, 0.5 % of gaps 3x.
pub const ITL: ItlProfile = ItlProfile {
    median_ms: 20.0,
    request_sigma: 0.15,
    gap_sigma: 0.10,
    hiccup_share: 0.005,
    hiccup_factor: 3.0,
};

/// A change of the candidate's gaps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ItlChange {
    None,
    /// Every gap slower by this factor.
    Uniform(f64),
    /// Every `every`-th gap of each request `factor` times longer.
    Stall {
        every: usize,
        factor: f64,
    },
}

/// One request's gaps (`tokens - 1` of them).
fn draw_gaps(
    pr: &ItlProfile,
    tokens: usize,
    drift: f64,
    change: ItlChange,
    rng: &mut StdRng,
) -> Vec<f64> {
    let zr: f64 = rng.sample(StandardNormal);
    let speed = pr.median_ms * (pr.request_sigma * zr).exp() * drift;
    (0..tokens.saturating_sub(1))
        .map(|j| {
            let z: f64 = rng.sample(StandardNormal);
            let mut x = speed * (pr.gap_sigma * z).exp();
            if rng.random::<f64>() < pr.hiccup_share {
                x *= pr.hiccup_factor;
            }
            match change {
                ItlChange::None => {}
                ItlChange::Uniform(f) => x *= f,
                ItlChange::Stall { every, factor } => {
                    if every > 0 && (j + 1) % every == 0 {
                        x *= factor;
                    }
                }
            }
            x
        })
        .collect()
}

/// One ITL experiment: `scenarios` scenarios, each gating TTFT and TPOT (P50, P99; TPOT is
/// each request's mean gap) and the pooled ITL P99, baseline of `k` runs of `n` requests of
/// `tokens` tokens, run drift `tau` shared by a run's scenarios.
#[derive(Debug, Clone)]
pub struct ItlExperiment {
    pub label: String,
    pub scenarios: usize,
    pub k: usize,
    pub n: usize,
    pub tokens: usize,
    pub tau: f64,
    pub change: ItlChange,
}

/// Rates of one ITL experiment.
#[derive(Debug, Clone, Default)]
pub struct ItlRates {
    /// Replicates with any FAIL in the whole family (every check of every scenario).
    pub family: f64,
    /// ITL P99 checks that FAIL in the gate (Holm over the family), per check.
    pub itl: f64,
    /// TPOT P50 checks that FAIL, per check (what the ITL check adds to).
    pub tpot: f64,
    /// The clustered test alone at alpha 0.01 (no Holm), per check.
    pub clustered: f64,
    /// The naive test (gaps as independent) alone at alpha 0.01, per check.
    pub naive: f64,
}

/// The ITL rows (targets in the comments; docs/accuracy.md).
pub fn itl_experiments() -> Vec<ItlExperiment> {
    let kd = crate::bless::DEFAULT_RUNS as usize;
    let e = |label: String, scenarios, k, n, tau, change| ItlExperiment {
        label,
        scenarios,
        k,
        n,
        tokens: 64,
        tau,
        change,
    };
    let mut v = Vec::new();
    // False alarms, 5 scenarios (target <= 1 % family-wise at tau 0; <= 5 % at tau 0.05, k 5).
    for (tau, k) in [(0.0, 1), (0.0, kd), (0.05, 1), (0.05, kd)] {
        v.push(e(
            format!("ITL null, 5 scen, tau {tau}, k {k}, n 20x64"),
            5,
            k,
            20,
            tau,
            ItlChange::None,
        ));
    }
    // At the fail boundary: every gap x1.2 = the P99 exactly 20 % up. A test that keeps its
    // level rejects at most alpha here (clustered/naive columns).
    for k in [1, kd] {
        v.push(e(
            format!("ITL at the boundary x1.2, k {k}, n 20x64"),
            1,
            k,
            20,
            0.0,
            ItlChange::Uniform(1.2),
        ));
    }
    // Power: a stall every 16th gap (+100 %), and a uniform +20 % / +50 %.
    for (k, n) in [(1, 20), (kd, 20), (1, 40), (kd, 40)] {
        v.push(e(
            format!("ITL stall every 16th +100%, k {k}, n {n}x64"),
            1,
            k,
            n,
            0.0,
            ItlChange::Stall {
                every: 16,
                factor: 2.0,
            },
        ));
    }
    for f in [1.2, 1.5] {
        for (k, n) in [(kd, 20), (kd, 40)] {
            v.push(e(
                format!("ITL uniform +{:.0}%, k {k}, n {n}x64", (f - 1.0) * 100.0),
                1,
                k,
                n,
                0.0,
                ItlChange::Uniform(f),
            ));
        }
    }
    v
}

/// Runs `reps` replicates of an ITL experiment.
pub fn run_itl(e: &ItlExperiment, reps: usize, seed: u64) -> ItlRates {
    use crate::stats::cluster::{compare_tail, GapCluster, Variance};
    let mut rng = StdRng::seed_from_u64(seed);
    let gate = GateSpec {
        metrics: vec![Metric::Ttft, Metric::Tpot],
        quantiles: vec![Quantile::P50, Quantile::P99],
        itl: Some(crate::config::scenario::ITL_BAND),
        ..GateSpec::default()
    };
    let band = crate::config::scenario::ITL_BAND;
    let md = gate.min_delta(Metric::Tpot);
    let (mut fam, mut itl, mut tpot, mut cl, mut nv, mut checks_n) = (0, 0, 0, 0, 0, 0usize);
    for _ in 0..reps {
        let base_drifts: Vec<f64> = (0..e.k).map(|_| drift(e.tau, &mut rng)).collect();
        let cand_drift = drift(e.tau, &mut rng);
        let mut ins = Vec::new();
        for i in 0..e.scenarios {
            // per run: TTFT values, and each request's gaps (TPOT = their mean)
            let mut runs_ttft = Vec::new();
            let mut runs_tpot = Vec::new();
            let mut base_gaps = Vec::new();
            for &d in &base_drifts {
                runs_ttft.push(draw(&TTFT, e.n, d, Change::None, &mut rng));
                let g: Vec<Vec<f64>> = (0..e.n)
                    .map(|_| draw_gaps(&ITL, e.tokens, d, ItlChange::None, &mut rng))
                    .collect();
                runs_tpot.push(g.iter().map(|r| mean(r)).collect::<Vec<f64>>());
                base_gaps.extend(g);
            }
            let cand_ttft = draw(&TTFT, e.n, cand_drift, Change::None, &mut rng);
            let cand_gaps: Vec<Vec<f64>> = (0..e.n)
                .map(|_| draw_gaps(&ITL, e.tokens, cand_drift, e.change, &mut rng))
                .collect();
            let cand_tpot: Vec<f64> = cand_gaps.iter().map(|r| mean(r)).collect();
            let spread = |runs: &[Vec<f64>]| {
                (runs.len() >= 2)
                    .then(|| {
                        crate::stats::spread::run_spread_upper(runs).map(|tau| gate::Spread {
                            tau,
                            runs: runs.len(),
                        })
                    })
                    .flatten()
            };
            let mut spreads = BTreeMap::new();
            if let Some(s) = spread(&runs_ttft) {
                spreads.insert(Metric::Ttft, s);
            }
            let tpot_spread = spread(&runs_tpot);
            if let Some(s) = tpot_spread {
                spreads.insert(Metric::Tpot, s);
            }
            let bc: Vec<GapCluster> = base_gaps.into_iter().map(GapCluster::exact).collect();
            let cc: Vec<GapCluster> = cand_gaps.into_iter().map(GapCluster::exact).collect();
            for (var, hits) in [
                (Variance::Clustered, &mut cl),
                (Variance::Independent, &mut nv),
            ] {
                let t = compare_tail(&bc, &cc, 0.99, band.fail, md, 0.01, var);
                *hits += t.is_some_and(|t| t.p_regress < 0.01) as usize;
            }
            checks_n += 1;
            let ok = |v: Vec<f64>| Samples { ok: v, failed: 0 };
            ins.push(ScenarioSamples {
                scenario: format!("s{i}"),
                gate: gate.clone(),
                metrics: vec![
                    (Metric::Ttft, ok(runs_ttft.concat()), ok(cand_ttft)),
                    (Metric::Tpot, ok(runs_tpot.concat()), ok(cand_tpot)),
                ],
                spread: spreads,
                errors: gate::ErrorCounts::new((0, e.n * e.k), (0, e.n)),
                looks: 1,
                slo: Vec::new(),
                design: gate::Design::Committed,
                itl: Some(gate::ItlSamples {
                    baseline: bc,
                    candidate: cc,
                    spread: tpot_spread,
                }),
            });
        }
        let (checks, _) = gate::evaluate(&ins);
        let fail = |c: &&gate::Check| c.verdict == Verdict::Fail;
        fam += checks.iter().any(|c| fail(&c)) as usize;
        itl += checks
            .iter()
            .filter(|c| c.kind == gate::CheckKind::ItlTail(Quantile::P99))
            .filter(fail)
            .count();
        tpot += checks
            .iter()
            .filter(|c| {
                c.kind == gate::CheckKind::Quantile(Quantile::P50) && c.metric == Some(Metric::Tpot)
            })
            .filter(fail)
            .count();
    }
    let per = checks_n.max(1) as f64;
    ItlRates {
        family: fam as f64 / reps.max(1) as f64,
        itl: itl as f64 / per,
        tpot: tpot as f64 / per,
        clustered: cl as f64 / per,
        naive: nv as f64 / per,
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// One SLO experiment: n requests from [`TTFT`], an objective on its P90 at `factor` times
/// the true P90.
#[derive(Debug, Clone)]
pub struct SloExperiment {
    pub label: String,
    pub n: usize,
    pub factor: f64,
}

/// The SLO rows: the objective exactly at the true P90 (the false-FAIL rate must stay at or
/// under alpha), 25 % above it (shown met) and 25 % below it (shown missed).
pub fn slo_experiments() -> Vec<SloExperiment> {
    let mut v = Vec::new();
    for (what, factor) in [
        ("at the true P90", 1.0),
        ("25% above P90", 1.25),
        ("25% below P90", 0.8),
    ] {
        for n in [20, 100, 500] {
            v.push(SloExperiment {
                label: format!("SLO ttft_p90 {what}, n {n}"),
                n,
                factor,
            });
        }
    }
    v
}

/// The p-quantile of a profile's mixture (no drift): the x where
/// (1 - s) Phi((ln x - ln m) / sigma) + s Phi((ln(x / f) - ln m) / sigma) = p, by bisection.
pub fn true_quantile(pr: &Profile, p: f64) -> f64 {
    use crate::stats::normal::normal_cdf;
    let cdf = |x: f64| {
        let z = |y: f64| (y.ln() - pr.median_ms.ln()) / pr.sigma;
        (1.0 - pr.slow_share) * normal_cdf(z(x)) + pr.slow_share * normal_cdf(z(x / pr.slow_factor))
    };
    let (mut lo, mut hi) = (1e-9, pr.median_ms * pr.slow_factor * 1e3);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// [FAIL, PASS, WARN] rates of the SLO check over `reps` replicates.
pub fn run_slo(e: &SloExperiment, reps: usize, seed: u64) -> [f64; 3] {
    use crate::stats::objective::{share_test, Decision};
    let threshold = true_quantile(&TTFT, 0.9) * e.factor;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = [0usize; 3];
    for _ in 0..reps {
        let xs = draw(&TTFT, e.n, 1.0, Change::None, &mut rng);
        let over = xs.iter().filter(|x| **x > threshold).count() as u64;
        let i = match share_test(over, e.n as u64, 0.1).decide(0.01) {
            Decision::Missed => 0,
            Decision::Met => 1,
            Decision::Undecided => 2,
        };
        counts[i] += 1;
    }
    counts.map(|c| c as f64 / reps.max(1) as f64)
}

// ---------------------------------------------------------------------------------------------
// A/B designs (`perfgate ab`, issue 17): both arms measured in the same run, under a drift that
// multiplies both arms' requests alike at the same moments.
// ---------------------------------------------------------------------------------------------

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
    let looks = match (e.design, e.max_samples) {
        (AbDesign::Interleaved, Some(m)) => crate::config::scenario::LoadSpec {
            concurrency: 1,
            samples: e.n as u32,
            warmup: 0,
            max_samples: Some(m as u32),
            rate: None,
            seed: None,
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
            let vals: Vec<Vec<f64>> = e
                .profiles
                .iter()
                .map(|p| {
                    sched
                        .iter()
                        .zip(&path)
                        .map(|(&(cand, _), &d)| {
                            let (factor, slow) = match (cand, e.change) {
                                (true, Change::Uniform(f)) => (f, p.slow_share),
                                (true, Change::SlowShare(s)) => (1.0, s),
                                _ => (1.0, p.slow_share),
                            };
                            draw_one(p, d, factor, slow, &mut rng)
                        })
                        .collect()
                })
                .collect();
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
        AbDesign::Blocked(order) => {
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
    };
    ScenarioSamples {
        scenario: format!("s{si}"),
        gate: gate.clone(),
        metrics,
        errors: gate::ErrorCounts::new((0, n_b), (0, n_cand)),
        spread: BTreeMap::new(),
        looks,
        slo: Vec::new(),
        design,
        itl: None,
    }
}

/// The A/B rows of `calibrate` (issue 17 targets in comments), and the committed-baseline rows
/// under the same tau that show what measuring both arms in one run buys.
pub fn ab_experiments() -> (Vec<AbExperiment>, Vec<Experiment>) {
    let both = vec![TTFT, TPOT];
    let q = vec![Quantile::P50, Quantile::P99];
    let mut v = Vec::new();
    #[allow(clippy::too_many_arguments)]
    let e = |label: String,
             profiles: Vec<Profile>,
             quantiles: Vec<Quantile>,
             scenarios,
             n,
             max_samples,
             design,
             drift,
             change,
             count_metric,
             fail_p50| AbExperiment {
        label,
        profiles,
        quantiles,
        scenarios,
        n,
        max_samples,
        design,
        drift,
        change,
        count_metric,
        fail_p50,
    };
    let il = AbDesign::Interleaved;
    // Interleaved, family-wise false alarms (target <= 1 % at tau 0.05 and 0.20).
    for (n, drift, what) in [
        (40, Drift::Walk(0.05), "walk tau 0.05"),
        (40, Drift::Walk(0.20), "walk tau 0.20"),
        (40, Drift::Step(0.20), "step +20%"),
        (500, Drift::Walk(0.20), "walk tau 0.20"),
    ] {
        v.push(e(
            format!("ab interleaved null, 5 sc, {what}, n {n}"),
            both.clone(),
            q.clone(),
            5,
            n,
            None,
            il,
            drift,
            Change::None,
            None,
            None,
        ));
    }
    // Interleaved power: TPOT +10 % at n 40 per arm (target >= 90 %), with the default 10 %
    // band and with a 5 % band; +20 % for comparison.
    for (f, band) in [(1.1, None), (1.1, Some(0.05)), (1.2, None)] {
        for tau in [0.0, 0.05, 0.20] {
            v.push(e(
                format!(
                    "ab interleaved TPOT +{:.0}%{}, n 40, tau {tau}",
                    (f - 1.0) * 100.0,
                    band.map_or(String::new(), |b: f64| format!(" (fail {:.0}%)", b * 100.0))
                ),
                vec![TPOT],
                vec![Quantile::P50],
                1,
                40,
                None,
                il,
                Drift::Walk(tau),
                Change::Uniform(f),
                Some(Metric::Tpot),
                band,
            ));
        }
    }
    // Interleaved power: TTFT +20 % within the sequential budget 20..300 (target >= 90 %).
    for tau in [0.0, 0.05, 0.20] {
        v.push(e(
            format!("ab interleaved TTFT +20%, seq 20..300, tau {tau}"),
            vec![TTFT],
            vec![Quantile::P50],
            1,
            20,
            Some(300),
            il,
            Drift::Walk(tau),
            Change::Uniform(1.2),
            Some(Metric::Ttft),
            None,
        ));
    }
    // Blocked: family-wise false alarms (target <= 1 % with linear drift of 10 %), the same
    // blocks analysed pooled, and more blocks.
    for (order, n) in [("ABBA", 40), ("ABBA", 500), ("ABBABAAB", 40)] {
        for (drift, what) in [
            (Drift::Linear(0.10), "linear +10%"),
            (Drift::Step(0.10), "step +10%"),
            (Drift::Walk(0.05), "walk tau 0.05"),
            (Drift::Walk(0.20), "walk tau 0.20"),
        ] {
            for design in [AbDesign::Blocked(order), AbDesign::Pooled(order)] {
                let how = if matches!(design, AbDesign::Blocked(_)) {
                    "blocked"
                } else {
                    "pooled"
                };
                v.push(e(
                    format!("ab {how} {order} null, 5 sc, {what}, n {n}"),
                    both.clone(),
                    q.clone(),
                    5,
                    n,
                    None,
                    design,
                    drift,
                    Change::None,
                    None,
                    None,
                ));
            }
        }
    }
    // ABAB: the order where pooling keeps a quarter of a linear drift.
    for design in [AbDesign::Blocked("ABAB"), AbDesign::Pooled("ABAB")] {
        let how = if matches!(design, AbDesign::Blocked(_)) {
            "blocked"
        } else {
            "pooled"
        };
        v.push(e(
            format!("ab {how} ABAB null, 5 sc, linear +30%, n 40"),
            both.clone(),
            q.clone(),
            5,
            40,
            None,
            design,
            Drift::Linear(0.30),
            Change::None,
            None,
            None,
        ));
    }
    // Blocked power under linear drift of 10 %: TPOT +10 % at n 40 per arm, TTFT +20 % at 300.
    for (order, p, f, n, band) in [
        ("ABBA", TPOT, 1.1, 40, None),
        ("ABBA", TPOT, 1.1, 40, Some(0.05)),
        ("ABBA", TPOT, 1.2, 40, None),
        ("ABBA", TTFT, 1.2, 300, None),
        ("ABBABAAB", TPOT, 1.1, 40, Some(0.05)),
        ("ABBABAAB", TTFT, 1.2, 300, None),
    ] {
        v.push(e(
            format!(
                "ab blocked {order} {} +{:.0}%{}, n {n}, linear +10%",
                p.metric.label(),
                (f - 1.0) * 100.0,
                band.map_or(String::new(), |b: f64| format!(" (fail {:.0}%)", b * 100.0))
            ),
            vec![p],
            vec![Quantile::P50],
            1,
            n,
            None,
            AbDesign::Blocked(order),
            Drift::Linear(0.10),
            Change::Uniform(f),
            Some(p.metric),
            band,
        ));
    }
    // Committed baseline (k = 5 blessed runs) at the same tau, as run-to-run drift.
    let kd = crate::bless::DEFAULT_RUNS as usize;
    let mut c = Vec::new();
    let ex =
        |label: String, profiles, quantiles, scenarios, n, max, tau, change, count| Experiment {
            label,
            profiles,
            quantiles,
            scenarios,
            k: kd,
            n,
            max_samples: max,
            tau,
            change,
            count_metric: count,
        };
    for tau in [0.05, 0.20] {
        c.push(ex(
            format!("committed null, 5 sc, tau {tau}, k {kd}, n 40"),
            both.clone(),
            q.clone(),
            5,
            40,
            None,
            tau,
            Change::None,
            None,
        ));
        c.push(ex(
            format!("committed TPOT +10%, n 40, tau {tau}, k {kd}"),
            vec![TPOT],
            vec![Quantile::P50],
            1,
            40,
            None,
            tau,
            Change::Uniform(1.1),
            Some(Metric::Tpot),
        ));
        c.push(ex(
            format!("committed TTFT +20%, seq 20..300, tau {tau}, k {kd}"),
            vec![TTFT],
            vec![Quantile::P50],
            1,
            20,
            Some(300),
            tau,
            Change::Uniform(1.2),
            Some(Metric::Ttft),
        ));
    }
    (v, c)
}

/// The A/B section of the `calibrate` table.
fn ab_report(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let mut out = String::new();
    let (ab, committed) = ab_experiments();
    let ab: Vec<(usize, AbExperiment)> = ab
        .into_iter()
        .enumerate()
        .filter(|(_, e)| filter.is_none_or(|f| e.label.contains(f)))
        .collect();
    let committed: Vec<(usize, Experiment)> = committed
        .into_iter()
        .enumerate()
        .filter(|(_, e)| filter.is_none_or(|f| e.label.contains(f)))
        .collect();
    if ab.is_empty() && committed.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "A/B designs (perfgate ab): drift over the run, common to both arms, every scenario and metric;\nn per arm. FAIL = false-alarm rate for null rows, power otherwise; FAIL|sigWARN = a FAIL or a WARN\nfor a significant slowdown beyond the warn tolerance (not an inconclusive WARN).\n"
    );
    let _ = writeln!(
        out,
        "{:<58} {:>9} {:>13} {:>8}",
        "experiment", "FAIL", "FAIL|sigWARN", "mean n"
    );
    for (i, e) in &ab {
        let r = run_ab(e, reps, seed.wrapping_add(2_000_003 + *i as u64 * 7919));
        let _ = writeln!(
            out,
            "{:<58} {:>8.1}% {:>12.1}% {:>8.0}",
            e.label,
            r.fail * 100.0,
            r.flagged * 100.0,
            r.mean_n
        );
    }
    for (i, e) in &committed {
        let r = run_experiment(e, reps, seed.wrapping_add(3_000_017 + *i as u64 * 7919));
        let _ = writeln!(
            out,
            "{:<58} {:>8.1}% {:>13} {:>8.0}",
            e.label,
            r.perfgate * 100.0,
            "-",
            r.mean_n
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_true_quantile_is_where_the_mixture_cdf_is_p() {
        // Without a slow path it is the lognormal's: m * exp(sigma * z_p), z_0.9 = 1.281552.
        let q = true_quantile(&TPOT, 0.9);
        assert!(
            (q - 20.0 * (0.10f64 * 1.281_551_565_5).exp()).abs() < 1e-6,
            "{q}"
        );
        // With one: a large sample's share below it is 0.9.
        let q = true_quantile(&TTFT, 0.9);
        let mut rng = StdRng::seed_from_u64(3);
        let xs = draw(&TTFT, 200_000, 1.0, Change::None, &mut rng);
        let below = xs.iter().filter(|x| **x <= q).count() as f64 / xs.len() as f64;
        assert!((below - 0.9).abs() < 0.003, "{below}");
    }

    #[test]
    fn the_slo_check_false_fails_at_most_alpha_at_the_threshold() {
        let rows = slo_experiments();
        let at = rows
            .iter()
            .find(|e| e.label == "SLO ttft_p90 at the true P90, n 100")
            .unwrap();
        let r = run_slo(at, 2000, 11);
        // exact binomial test: at most alpha (0.01) plus Monte-Carlo error (sd 0.0022 at 2000)
        assert!(r[0] <= 0.01 + 3.0 * 0.0023, "{r:?}");
        let below = rows
            .iter()
            .find(|e| e.label == "SLO ttft_p90 25% below P90, n 500")
            .unwrap();
        assert!(run_slo(below, 400, 12)[0] > 0.9);
    }

    #[test]
    fn draws_follow_the_profile() {
        let mut rng = StdRng::seed_from_u64(1);
        let x = draw(&TPOT, 20_000, 1.0, Change::None, &mut rng);
        let med = p(&x, 0.5);
        assert!((med / 20.0 - 1.0).abs() < 0.01, "median {med}");
        let y = draw(&TPOT, 20_000, 1.0, Change::Uniform(1.2), &mut rng);
        assert!((p(&y, 0.5) / med - 1.2).abs() < 0.02);
        let t = draw(&TTFT, 40_000, 1.0, Change::None, &mut rng);
        // 5 % of requests 3x slower: P99 well above the lognormal's own 200 * e^(2.326 * 0.35).
        assert!(p(&t, 0.99) > 200.0 * (2.326f64 * 0.35).exp() * 1.5);
    }

    /// The ITL rows' point: at the fail boundary (every gap x1.2) the clustered test keeps its
    /// level, the naive binomial test does not; the stall pattern is caught by the gate.
    #[test]
    fn itl_clustered_test_keeps_its_level_where_the_naive_one_does_not() {
        let rows = itl_experiments();
        let row = |l: &str| rows.iter().find(|e| e.label == l).unwrap().clone();
        let b = run_itl(&row("ITL at the boundary x1.2, k 1, n 20x64"), 150, 5);
        assert!(b.clustered <= 0.02, "{b:?}");
        assert!(b.naive >= 0.08, "{b:?}");
        assert_eq!(b.itl, 0.0, "{b:?}");
        let s = run_itl(&row("ITL stall every 16th +100%, k 1, n 40x64"), 60, 6);
        assert!(s.itl >= 0.6, "{s:?}");
        assert!(s.tpot <= 0.2, "{s:?}");
    }

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
