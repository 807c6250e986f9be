//! The ITL P99 rows of `calibrate`: every request's inter-token gaps drawn with a per-request
//! speed (a request-level random effect), gated as `gate.metrics: [ttft, tpot, itl]`, beside the
//! ITL test alone with requests as clusters and with gaps counted as independent.

use super::noise::{draw, drift, Change, TTFT};
use crate::config::scenario::{GateSpec, Metric, Quantile};
use crate::gate::{self, Samples, ScenarioSamples, Verdict};
use crate::stats::cluster::{compare_tail, GapCluster, Variance};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::collections::BTreeMap;

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
    let kd = crate::baseline::DEFAULT_RUNS as usize;
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
    let mut rng = StdRng::seed_from_u64(seed);
    let gate = GateSpec {
        metrics: vec![Metric::Ttft, Metric::Tpot],
        quantiles: vec![Quantile::P50, Quantile::P99],
        itl: Some(crate::config::scenario::ITL_BAND),
        ..GateSpec::default()
    };
    let (mut fam, mut itl, mut tpot, mut cl, mut nv, mut checks_n) = (0, 0, 0, 0, 0, 0usize);
    for _ in 0..reps {
        let base_drifts: Vec<f64> = (0..e.k).map(|_| drift(e.tau, &mut rng)).collect();
        let cand_drift = drift(e.tau, &mut rng);
        let mut ins = Vec::new();
        for i in 0..e.scenarios {
            let input = draw_scenario(e, i, &gate, &base_drifts, cand_drift, &mut rng);
            if let Some(gaps) = &input.itl {
                let [clustered, naive] = tail_test_rejects(gaps, &gate);
                cl += clustered as usize;
                nv += naive as usize;
            }
            checks_n += 1;
            ins.push(input);
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

/// Scenario `i` of one replicate, drawn and made the gate's input: per baseline run (at its
/// drift) TTFT values and each request's gaps (TPOT = their mean), then the candidate's.
fn draw_scenario(
    e: &ItlExperiment,
    i: usize,
    gate: &GateSpec,
    base_drifts: &[f64],
    cand_drift: f64,
    rng: &mut StdRng,
) -> ScenarioSamples {
    let mut runs_ttft = Vec::new();
    let mut runs_tpot = Vec::new();
    let mut base_gaps = Vec::new();
    for &d in base_drifts {
        runs_ttft.push(draw(&TTFT, e.n, d, Change::None, rng));
        let g: Vec<Vec<f64>> = (0..e.n)
            .map(|_| draw_gaps(&ITL, e.tokens, d, ItlChange::None, rng))
            .collect();
        runs_tpot.push(g.iter().map(|r| mean(r)).collect::<Vec<f64>>());
        base_gaps.extend(g);
    }
    let cand_ttft = draw(&TTFT, e.n, cand_drift, Change::None, rng);
    let cand_gaps: Vec<Vec<f64>> = (0..e.n)
        .map(|_| draw_gaps(&ITL, e.tokens, cand_drift, e.change, rng))
        .collect();
    let cand_tpot: Vec<f64> = cand_gaps.iter().map(|r| mean(r)).collect();
    let mut spreads = BTreeMap::new();
    if let Some(s) = spread(&runs_ttft) {
        spreads.insert(Metric::Ttft, s);
    }
    let tpot_spread = spread(&runs_tpot);
    if let Some(s) = tpot_spread {
        spreads.insert(Metric::Tpot, s);
    }
    let ok = |v: Vec<f64>| Samples { ok: v, failed: 0 };
    ScenarioSamples {
        client_delay: None,
        pairing: crate::gate::Pairing::default(),
        scenario: format!("s{i}"),
        gate: gate.clone(),
        metrics: vec![
            (Metric::Ttft, ok(runs_ttft.concat()), ok(cand_ttft)),
            (Metric::Tpot, ok(runs_tpot.concat()), ok(cand_tpot)),
        ],
        spread: spreads,
        errors: gate::ErrorCounts::new((0, e.n * e.k), (0, e.n)),
        stopped: gate::ErrorCounts::default(),
        looks: 1,
        slo: Vec::new(),
        design: gate::Design::Committed,
        itl: Some(gate::ItlSamples {
            baseline: base_gaps.into_iter().map(GapCluster::exact).collect(),
            candidate: cand_gaps.into_iter().map(GapCluster::exact).collect(),
            spread: tpot_spread,
        }),
        quality: Default::default(),
    }
}

/// The run-to-run spread of a metric's baseline runs (two or more of them).
fn spread(runs: &[Vec<f64>]) -> Option<gate::Spread> {
    (runs.len() >= 2)
        .then(|| {
            crate::stats::spread::run_spread_upper(runs).map(|tau| gate::Spread {
                tau,
                runs: runs.len(),
                nights: None,
            })
        })
        .flatten()
}

/// Whether the ITL tail test alone, at alpha 0.01 with no Holm, rejects: [with requests as
/// clusters, with gaps counted as independent].
fn tail_test_rejects(gaps: &gate::ItlSamples, gate: &GateSpec) -> [bool; 2] {
    let band = crate::config::scenario::ITL_BAND;
    let md = gate.min_delta(Metric::Tpot);
    [Variance::Clustered, Variance::Independent].map(|var| {
        let t = compare_tail(
            &gaps.baseline,
            &gaps.candidate,
            0.99,
            band.fail,
            md,
            0.01,
            var,
        );
        t.is_some_and(|t| t.p_regress < 0.01)
    })
}

/// The mean of `v` (0 when empty).
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
