//! The two sides of a comparison as the gate reads them ([`Arm`]), and the gate's input for one
//! scenario built from them ([`gate_input`]), whatever produced each side.

use crate::baseline::Baseline;
use crate::config::metric::Timings;
use crate::config::scenario::Objective;
use crate::config::{Metric, Scenario};
use crate::gate::{self, Samples, ScenarioSamples};
use crate::record::{RequestRecord, WorkItem};
use crate::runner::RunOutput;
use crate::stats::cluster::GapCluster;
use std::collections::BTreeMap;

/// One side of a comparison, whatever produced it (a baseline file, a run just measured, one arm
/// of a future A/B run): per request, its gated metrics, or `None` for a failed request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arm {
    /// Every request not stopped by the provider: its gated figures, or `None` when it failed.
    pub requests: Vec<Option<Timings>>,
    /// Requests the provider completed but stopped on purpose (a refusal, a content filter:
    /// [`crate::record::FailureClass::is_stop`]): neither a success nor a failure, in no latency
    /// sample.
    pub stopped: usize,
    /// The inter-token gaps of each successful request that has them (for the ITL P99 check;
    /// empty for a baseline blessed before gaps were stored).
    pub itl: Vec<GapCluster>,
    /// Per request (as `requests`), what it sent: its identity for pairing the sides
    /// ([`super::pairing`]); `None` for a fixed prompt.
    pub work: Vec<Option<WorkItem>>,
    /// The number of requests of each run, in order (`requests` is the runs one after another):
    /// a baseline's bless runs, or one measured run.
    pub runs: Vec<usize>,
}

impl Arm {
    /// The stored records of a baseline.
    pub fn from_baseline(b: &Baseline) -> Self {
        let stop = |r: &&crate::baseline::BaselineRecord| r.error.is_some_and(|c| c.is_stop());
        let requests = b
            .records()
            .filter(|r| !stop(r))
            .map(|r| r.error.is_none().then(|| r.timings()))
            .collect();
        let itl = b
            .records()
            .filter(|r| r.error.is_none())
            .filter_map(|r| r.itl_ms.as_ref().and_then(|i| i.cluster()))
            .collect();
        let stopped = b.records().filter(|r| stop(r)).count();
        Arm {
            requests,
            stopped,
            itl,
            work: b
                .records()
                .filter(|r| !stop(r))
                .map(|r| r.work.clone())
                .collect(),
            runs: b
                .runs
                .iter()
                .map(|run| run.records.iter().filter(|r| !stop(r)).count())
                .collect(),
        }
    }

    /// Measured records.
    pub fn from_records(recs: &[RequestRecord]) -> Self {
        let requests = recs
            .iter()
            .filter(|r| !r.stopped())
            .map(|r| r.ok().then(|| r.timings()))
            .collect();
        let itl = recs
            .iter()
            .filter(|r| r.ok() && !r.itl_ms.is_empty())
            .map(|r| GapCluster {
                points: r.itl_ms.clone(),
                count: r.itl_count,
            })
            .collect();
        Arm {
            requests,
            stopped: recs.iter().filter(|r| r.stopped()).count(),
            itl,
            work: recs
                .iter()
                .filter(|r| !r.stopped())
                .map(|r| r.work.clone())
                .collect(),
            runs: vec![recs.iter().filter(|r| !r.stopped()).count()],
        }
    }

    /// The values of one metric over the successes, and the number of failures.
    pub fn samples(&self, m: Metric) -> Samples {
        let mut s = Samples::default();
        for r in &self.requests {
            match r {
                Some(t) => s.ok.extend(m.value(*t)), // None: e.g. TPOT of a 1-token answer
                None => s.failed += 1,
            }
        }
        s
    }

    /// The value of metric `m` of request `i` (`None`: failed, or the metric undefined).
    pub(crate) fn value(&self, i: usize, m: Metric) -> Option<f64> {
        self.requests
            .get(i)
            .copied()
            .flatten()
            .and_then(|t| m.value(t))
    }

    /// Every request as an outcome: one value (0, unused) per request that did not fail (a
    /// success or a stop) and the failures; for checks that count requests (the error-rate
    /// objective).
    fn outcomes(&self) -> Samples {
        let (failed, total) = self.errors();
        Samples {
            ok: vec![0.0; total - failed],
            failed,
        }
    }

    /// (failed, total) requests: a stop is not a failure, but one of the requests.
    pub(crate) fn errors(&self) -> (usize, usize) {
        let failed = self.requests.iter().filter(|r| r.is_none()).count();
        (failed, self.requests.len() + self.stopped)
    }

    /// (stopped, total) requests, for the stopped-share check.
    pub(crate) fn stops(&self) -> (usize, usize) {
        (self.stopped, self.requests.len() + self.stopped)
    }
}

/// The gate's input for one scenario: `baseline` vs `candidate` for each gated metric not in
/// `skip` (made incomparable by a workload drift), with the baseline's run-to-run `spread` (per
/// metric: tau and the number of runs; empty when the baseline is a single run). Knows nothing
/// of where the two arms came from.
pub fn gate_input(
    sc: &Scenario,
    baseline: &Arm,
    candidate: &Arm,
    spread: BTreeMap<Metric, gate::Spread>,
    skip: &[Metric],
) -> ScenarioSamples {
    let metrics: Vec<(Metric, Samples, Samples)> = sc
        .gate
        .metrics
        .iter()
        .filter(|m| !skip.contains(m))
        .map(|&m| (m, baseline.samples(m), candidate.samples(m)))
        .collect();
    let itl = itl_samples(sc, baseline, candidate, &spread, skip);
    let gated: Vec<Metric> = metrics.iter().map(|(m, _, _)| *m).collect();
    ScenarioSamples {
        client_delay: None,
        pairing: super::pairing::pairing(baseline, candidate, &gated),
        scenario: sc.name.to_string(),
        gate: sc.gate.clone(),
        metrics,
        spread,
        errors: gate::ErrorCounts::new(baseline.errors(), candidate.errors()),
        stopped: gate::ErrorCounts::new(baseline.stops(), candidate.stops()),
        looks: sc.load.looks().len(),
        slo: slo_samples(sc, candidate),
        design: gate::Design::Committed,
        itl,
        quality: Default::default(),
    }
}

/// The ITL P99 check's input when `itl` is in `gate.metrics`: every request's gaps on both
/// sides. Its run-to-run spread is TPOT's (TPOT is the mean of a request's gaps: a run that
/// decodes slower moves both alike). Not compared when a workload drift made TPOT
/// incomparable (the same token counting defines the gaps).
fn itl_samples(
    sc: &Scenario,
    baseline: &Arm,
    candidate: &Arm,
    spread: &BTreeMap<Metric, gate::Spread>,
    skip: &[Metric],
) -> Option<gate::ItlSamples> {
    sc.gate.itl?;
    if skip.contains(&Metric::Tpot) || baseline.requests.is_empty() {
        return None;
    }
    Some(gate::ItlSamples {
        baseline: baseline.itl.clone(),
        candidate: candidate.itl.clone(),
        spread: spread.get(&Metric::Tpot).copied(),
    })
}

/// The candidate's samples for each `gate.slo` objective.
fn slo_samples(sc: &Scenario, candidate: &Arm) -> Vec<(Objective, Samples)> {
    sc.gate
        .slo
        .iter()
        .map(|&o| match o {
            Objective::Latency { metric, .. } => (o, candidate.samples(metric)),
            Objective::ErrorRate { .. } => (o, candidate.outcomes()),
        })
        .collect()
}

/// The gate's input for a scenario without a usable baseline that has `gate.slo` objectives:
/// those objectives alone (a gate on day one): no metric compared, no baseline requests.
pub fn slo_only_input(sc: &Scenario, candidate: &Arm) -> ScenarioSamples {
    gate_input(
        sc,
        &Arm::default(),
        candidate,
        BTreeMap::new(),
        &sc.gate.metrics,
    )
}

/// The run-to-run spread of a k-run baseline for the scenario's gated metrics (empty for a
/// single-run baseline).
pub fn baseline_spread(sc: &Scenario, b: &Baseline) -> BTreeMap<Metric, gate::Spread> {
    b.run_spread
        .as_ref()
        .map(|rs| {
            // TPOT's spread also widens the ITL P99 check (itl_samples).
            let itl = sc.gate.itl.is_some().then_some(Metric::Tpot);
            sc.gate
                .metrics
                .iter()
                .chain(itl.iter())
                .filter_map(|&m| {
                    rs.tau
                        .get(&crate::summary::SummaryKey::from(m))
                        .map(|&tau| {
                            (
                                m,
                                gate::Spread {
                                    tau,
                                    runs: rs.runs,
                                    nights: None,
                                },
                            )
                        })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The gate's input for one scenario: its baseline file vs the candidate run, without the
/// metrics in `skip`.
pub fn scenario_samples(
    sc: &Scenario,
    b: &Baseline,
    run: &RunOutput,
    skip: &[Metric],
) -> ScenarioSamples {
    gate_input(
        sc,
        &Arm::from_baseline(b),
        &Arm::from_records(&run.records),
        baseline_spread(sc, b),
        skip,
    )
}
