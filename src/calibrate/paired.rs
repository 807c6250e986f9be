//! The paired rows of `calibrate` (issue 43): a prompt mix whose requests differ far more from
//! each other than a request differs from itself, gated by the TTFT P50 check twice on the same
//! data: paired (the sides sent the same requests: [`crate::gate::Pairing::Matched`]) and
//! unpaired (the pooled values).
//!
//! Model: 24 prompts, request i's TTFT = 10 ms + a prefill of 10 x 39^(i/23) ms (20 to 400 ms in
//! all), times a within-request noise exp(0.05 Z) and a per-run drift exp(tau Z); the candidate's
//! prefill is `prefill` times slower. A baseline of k runs of the 24 requests, a candidate run of
//! the same 24; the fail tolerance widened to the k runs' spread as `check` widens it.

use super::noise::drift;
use crate::config::scenario::{GateSpec, Metric, Quantile};
use crate::gate::{self, CheckKind, Pairing, Samples, ScenarioSamples, Verdict};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::collections::BTreeMap;

/// Prompts in the mix (each sent once per run).
pub const PROMPTS: usize = 24;
/// Within-request log-sd.
pub const WITHIN_SIGMA: f64 = 0.05;

/// One paired row.
#[derive(Debug, Clone)]
pub struct PairedExperiment {
    pub label: String,
    /// Baseline runs.
    pub k: usize,
    /// Run-to-run drift.
    pub tau: f64,
    /// The candidate's prefill factor (1.3 = 30 % slower prefill; 1 = no change).
    pub prefill: f64,
    /// Share of requests (either side) on a 3x slow path: a skewed within-request noise, which
    /// the signed-rank test's symmetry assumption meets when the reference is a mean of k runs.
    pub slow: f64,
}

/// FAIL rates of the TTFT P50 check on the same replicates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedRates {
    pub paired: f64,
    pub unpaired: f64,
}

/// The rows: false alarms with a 1-run and the default baseline (and with drift), then power
/// for +10, +20 and +30 % prefill with both. Target: false alarms <= 1 % per check.
pub fn paired_experiments() -> Vec<PairedExperiment> {
    let kd = crate::baseline::DEFAULT_RUNS as usize;
    let mut v = Vec::new();
    for (k, tau) in [(1, 0.0), (kd, 0.0), (1, 0.03), (kd, 0.03)] {
        v.push(PairedExperiment {
            label: format!("prompt mix null, tau {tau}, k {k}"),
            k,
            tau,
            prefill: 1.0,
            slow: 0.0,
        });
    }
    for k in [1, kd] {
        v.push(PairedExperiment {
            label: format!("prompt mix null, 5% of requests 3x, k {k}"),
            k,
            tau: 0.0,
            prefill: 1.0,
            slow: 0.05,
        });
    }
    for k in [1, kd] {
        for f in [1.1, 1.2, 1.3] {
            v.push(PairedExperiment {
                label: format!("prompt mix +{:.0}% prefill, k {k}", (f - 1.0) * 100.0),
                k,
                tau: 0.0,
                prefill: f,
                slow: 0.0,
            });
        }
    }
    v
}

/// The typical TTFT of prompt `i` with its prefill `f` times slower, ms.
fn typical(i: usize, f: f64) -> f64 {
    10.0 + f * 10.0 * 39f64.powf(i as f64 / (PROMPTS - 1) as f64)
}

/// One run of the 24 requests at `drift`, a share `slow` of them 3x slower.
fn run(f: f64, drift: f64, slow: f64, rng: &mut StdRng) -> Vec<f64> {
    (0..PROMPTS)
        .map(|i| {
            let z: f64 = rng.sample(StandardNormal);
            let path = if slow > 0.0 && rng.random::<f64>() < slow {
                3.0
            } else {
                1.0
            };
            typical(i, f) * (WITHIN_SIGMA * z).exp() * drift * path
        })
        .collect()
}

/// The gate's input: `base` runs against `cand`, paired or not.
fn input(base: &[Vec<f64>], cand: &[f64], paired: bool) -> ScenarioSamples {
    let gate = GateSpec {
        metrics: vec![Metric::Ttft],
        quantiles: vec![Quantile::P50],
        ..GateSpec::default()
    };
    let pairing = if paired {
        let d = (0..cand.len())
            .map(|i| cand[i].ln() - base.iter().map(|r| r[i].ln()).sum::<f64>() / base.len() as f64)
            .collect();
        let logs: Vec<Vec<f64>> = base
            .iter()
            .map(|r| r.iter().map(|x| x.ln()).collect())
            .collect();
        let tau = crate::stats::spread::paired_spread_upper(&logs);
        Pairing::Matched(BTreeMap::from([(Metric::Ttft, gate::Paired { d, tau })]))
    } else {
        Pairing::NoIdentities
    };
    let spread = if base.len() >= 2 {
        crate::stats::spread::run_spread_upper(base)
            .map(|tau| {
                BTreeMap::from([(
                    Metric::Ttft,
                    gate::Spread {
                        tau,
                        runs: base.len(),
                        nights: None,
                    },
                )])
            })
            .unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    ScenarioSamples {
        client_delay: None,
        stopped: gate::ErrorCounts::default(),
        pairing,
        scenario: "mix".into(),
        gate,
        metrics: vec![(
            Metric::Ttft,
            Samples {
                ok: base.concat(),
                failed: 0,
            },
            Samples {
                ok: cand.to_vec(),
                failed: 0,
            },
        )],
        errors: gate::ErrorCounts::new((0, base.len() * PROMPTS), (0, PROMPTS)),
        spread,
        looks: 1,
        slo: Vec::new(),
        design: gate::Design::Committed,
        itl: None,
        quality: Default::default(),
    }
}

fn fails(s: ScenarioSamples) -> bool {
    gate::evaluate(&[s])
        .0
        .iter()
        .any(|c| c.verdict == Verdict::Fail && c.kind == CheckKind::Quantile(Quantile::P50))
}

/// Runs `reps` replicates of `e`, each gated paired and unpaired.
pub fn run_paired(e: &PairedExperiment, reps: usize, seed: u64) -> PairedRates {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut p, mut u) = (0usize, 0usize);
    for _ in 0..reps {
        let base: Vec<Vec<f64>> = (0..e.k)
            .map(|_| {
                let d = drift(e.tau, &mut rng);
                run(1.0, d, e.slow, &mut rng)
            })
            .collect();
        let d = drift(e.tau, &mut rng);
        let cand = run(e.prefill, d, e.slow, &mut rng);
        p += fails(input(&base, &cand, true)) as usize;
        u += fails(input(&base, &cand, false)) as usize;
    }
    PairedRates {
        paired: p as f64 / reps as f64,
        unpaired: u as f64 / reps as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_spans_20_to_400_ms() {
        assert!((typical(0, 1.0) - 20.0).abs() < 1e-12);
        assert!((typical(PROMPTS - 1, 1.0) - 400.0).abs() < 1e-9);
        // +30 % prefill: 10 + 1.3 x 390 = 517 ms at the longest prompt.
        assert!((typical(PROMPTS - 1, 1.3) - 517.0).abs() < 1e-9);
    }

    #[test]
    fn paired_catches_a_30_percent_prefill_the_unpaired_test_misses_and_stays_quiet_on_the_null() {
        let kd = crate::baseline::DEFAULT_RUNS as usize;
        let hit = run_paired(
            &PairedExperiment {
                label: "t".into(),
                k: kd,
                tau: 0.0,
                prefill: 1.3,
                slow: 0.0,
            },
            100,
            5,
        );
        assert!(hit.paired >= 0.95 && hit.unpaired <= 0.2, "{hit:?}");
        let null = run_paired(
            &PairedExperiment {
                label: "t".into(),
                k: kd,
                tau: 0.0,
                prefill: 1.0,
                slow: 0.0,
            },
            300,
            6,
        );
        assert!(null.paired <= 0.02, "{null:?}");
    }
}
