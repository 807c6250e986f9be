//! The two comparator rules `calibrate` prints beside the gate, on the same simulated data: a
//! percentage threshold (as github-action-benchmark) and a t-test on per-run summaries (as
//! Bencher's `t_test` threshold).

use super::committed::Sim;
use super::noise::{p, Profile};
use crate::config::scenario::{GateSpec, Metric};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Percentage-threshold comparator: any (metric, quantile) point ratio above 1 + fail.
pub(super) fn threshold_fails(
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
pub(super) fn ttest_fails(
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
