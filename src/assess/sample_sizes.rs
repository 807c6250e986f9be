//! How many samples (docs/baselines.md "How many samples"), from a baseline's requests: what a
//! P50 check at the scenario's `load.samples` catches and the n for a smaller change, the lines
//! `bless` prints after writing a baseline and `validate` prints for a committed one. The fail
//! tolerance is the one a `check` against this baseline applies: the configured one widened by
//! the bless runs' spread ([`crate::gate::ScenarioSamples::p50_band`]), measured request by
//! request when the check will send the same requests as the runs did.

use super::arm::{baseline_spread, gate_input, Arm};
use crate::baseline::Baseline;
use crate::config::{Quantile, Scenario};
use crate::gate::power;

/// Per gated metric with a P50, the change a check at `load.samples` requests catches when the
/// candidate is distributed as `b`'s requests, and the n that would catch half the excess over
/// the fail tolerance ([`crate::gate::power`]): `TTFT P50 catches about +21% at n = 20; n = 80
/// for +15%`, with `(fail tolerance 10% widened to 13.6% by the bless runs' spread)` when the
/// check will widen it. Empty when `p50` is not in `gate.quantiles`.
pub fn sample_sizes(sc: &Scenario, b: &Baseline) -> Vec<String> {
    if !sc.gate.quantiles.contains(&Quantile::P50) {
        return Vec::new();
    }
    let reference = Arm::from_baseline(b);
    // a check sends the requests of one bless run again: the gate's input against that run
    let input = gate_input(
        sc,
        &reference,
        &first_run(&reference),
        baseline_spread(sc, b),
        &[],
    );
    let n = sc.load.samples as usize;
    sc.gate
        .metrics
        .iter()
        .filter_map(|&m| {
            let values: Vec<f64> = b.records().filter_map(|x| x.metric(m)).collect();
            let sorted = crate::stats::sorted(&values);
            let configured = sc.gate.band(m, Quantile::P50).fail;
            let fail = input.p50_band(m).fail;
            let now = power::catches_at(&sorted, n, fail, sc.gate.alpha)?;
            let target = ((fail + (now - fail) / 2.0) * 100.0).ceil() / 100.0;
            let more = (target < now)
                .then(|| power::samples_for(&sorted, target, fail, sc.gate.alpha, n + 1))
                .flatten()
                .map_or(String::new(), |k| {
                    format!("; n = {k} for {:+.0}%", target * 100.0)
                });
            let widened = (fail > configured).then(|| {
                format!(
                    " (fail tolerance {:.0}% widened to {:.1}% by the bless runs' spread{}, as `check` applies it)",
                    configured * 100.0,
                    fail * 100.0,
                    input
                        .paired_spread(m)
                        .map_or(String::new(), |s| format!(" tau {:.1}%", s.tau * 100.0))
                )
            });
            Some(format!(
                "{} P50 catches about {:+.0}% at n = {n}{more}{}",
                m.label(),
                now * 100.0,
                widened.unwrap_or_default()
            ))
        })
        .collect()
}

/// The first run of `arm`'s runs (its requests and what they sent; no gaps).
fn first_run(arm: &Arm) -> Arm {
    let len = arm.runs.first().copied().unwrap_or(0);
    Arm {
        requests: arm.requests.iter().take(len).cloned().collect(),
        stopped: 0,
        itl: Vec::new(),
        work: arm.work.iter().take(len).cloned().collect(),
        runs: vec![len],
    }
}
