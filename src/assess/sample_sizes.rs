//! How many samples (docs/baselines.md "How many samples"), from a baseline's requests: what a
//! P50 check at the scenario's `load.samples` catches and the n for a smaller change, the lines
//! `bless` prints after writing a baseline and `validate` prints for a committed one.

use super::Baseline;
use crate::config::{Quantile, Scenario};
use crate::gate::power;

/// Per gated metric with a P50, the change a check at `load.samples` requests catches when the
/// candidate is distributed as `b`'s requests, and the n that would catch half the excess over
/// the fail tolerance ([`crate::gate::power`]): `TTFT P50 catches about +21% at n = 20; n = 80
/// for +15%`. Empty when `p50` is not in `gate.quantiles`.
pub fn sample_sizes(sc: &Scenario, b: &Baseline) -> Vec<String> {
    if !sc.gate.quantiles.contains(&Quantile::P50) {
        return Vec::new();
    }
    let n = sc.load.samples as usize;
    sc.gate
        .metrics
        .iter()
        .filter_map(|&m| {
            let values: Vec<f64> = b.records().filter_map(|x| x.metric(m)).collect();
            let sorted = crate::stats::sorted(&values);
            let fail = sc.gate.band(m, Quantile::P50).fail;
            let now = power::catches_at(&sorted, n, fail, sc.gate.alpha)?;
            let target = ((fail + (now - fail) / 2.0) * 100.0).ceil() / 100.0;
            let more = (target < now)
                .then(|| power::samples_for(&sorted, target, fail, sc.gate.alpha, n + 1))
                .flatten()
                .map_or(String::new(), |k| {
                    format!("; n = {k} for {:+.0}%", target * 100.0)
                });
            Some(format!(
                "{} P50 catches about {:+.0}% at n = {n}{more}",
                m.label(),
                now * 100.0
            ))
        })
        .collect()
}
