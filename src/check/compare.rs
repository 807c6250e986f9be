//! Compares measured runs with their baselines: each scenario's status, notes and gate input,
//! then the gate over the whole family, into the [`Results`] model.

use super::baselines::{unusable, Baselines, Missing};
use super::drift::{minority_source_note, workload_drift};
use super::figures::measured;
use super::notes::{run_notes, schedule_notes};
use super::CheckOptions;
use crate::baseline::Baseline;
use crate::config::scenario::Objective;
use crate::config::{Metric, Scenario, ScenarioName};
use crate::exit;
use crate::gate::{self, Samples, ScenarioSamples};
use crate::record::RequestRecord;
use crate::results::{
    BaselineInfo, CheckId, Results, ScenarioResult, Status, RESULTS_SCHEMA_VERSION,
};
use crate::runner::RunOutput;
use crate::stats::cluster::GapCluster;
use crate::verdict::Overall;
use std::collections::BTreeMap;

/// One side of a comparison, whatever produced it (a baseline file, a run just measured, one arm
/// of a future A/B run): per request, its gated metrics, or `None` for a failed request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arm {
    pub requests: Vec<Option<ArmRequest>>,
    /// The inter-token gaps of each successful request that has them (for the ITL P99 check;
    /// empty for a baseline blessed before gaps were stored).
    pub itl: Vec<GapCluster>,
}

/// The gated metrics of one successful request, ms (`None` where undefined, e.g. TPOT of a
/// one-token answer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmRequest {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl ArmRequest {
    fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Ttft => self.ttft_ms,
            Metric::Tpot => self.tpot_ms,
            Metric::E2e => self.e2e_ms,
        }
    }
}

impl Arm {
    /// The stored records of a baseline.
    pub fn from_baseline(b: &Baseline) -> Self {
        let requests = b
            .records()
            .map(|r| {
                r.error.is_none().then_some(ArmRequest {
                    ttft_ms: r.ttft_ms,
                    tpot_ms: r.tpot_ms,
                    e2e_ms: r.e2e_ms,
                })
            })
            .collect();
        let itl = b
            .records()
            .filter(|r| r.error.is_none())
            .filter_map(|r| r.itl_ms.as_ref().and_then(|i| i.cluster()))
            .collect();
        Arm { requests, itl }
    }

    /// Measured records.
    pub fn from_records(recs: &[RequestRecord]) -> Self {
        let requests = recs
            .iter()
            .map(|r| {
                r.ok().then_some(ArmRequest {
                    ttft_ms: r.ttft_ms,
                    tpot_ms: r.tpot_ms,
                    e2e_ms: r.e2e_ms,
                })
            })
            .collect();
        let itl = recs
            .iter()
            .filter(|r| r.ok() && !r.itl_ms.is_empty())
            .map(|r| GapCluster {
                points: r.itl_ms.clone(),
                count: r.itl_count,
            })
            .collect();
        Arm { requests, itl }
    }

    /// The values of one metric over the successes, and the number of failures.
    pub fn samples(&self, m: Metric) -> Samples {
        let mut s = Samples::default();
        for r in &self.requests {
            match r {
                Some(r) => s.ok.extend(r.metric(m)), // None: e.g. TPOT of a 1-token answer
                None => s.failed += 1,
            }
        }
        s
    }

    /// Every request as an outcome: one value (0, unused) per success and the failures; for
    /// checks that count requests (the error-rate objective).
    fn outcomes(&self) -> Samples {
        Samples {
            ok: vec![0.0; self.requests.iter().filter(|r| r.is_some()).count()],
            failed: self.requests.iter().filter(|r| r.is_none()).count(),
        }
    }

    /// (failed, total) requests.
    fn errors(&self) -> (usize, usize) {
        let failed = self.requests.iter().filter(|r| r.is_none()).count();
        (failed, self.requests.len())
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
    let metrics = sc
        .gate
        .metrics
        .iter()
        .filter(|m| !skip.contains(m))
        .map(|&m| (m, baseline.samples(m), candidate.samples(m)))
        .collect();
    let itl = itl_samples(sc, baseline, candidate, &spread, skip);
    ScenarioSamples {
        scenario: sc.name.to_string(),
        gate: sc.gate.clone(),
        metrics,
        spread,
        errors: gate::ErrorCounts::new(baseline.errors(), candidate.errors()),
        looks: sc.load.looks().len(),
        slo: slo_samples(sc, candidate),
        design: gate::Design::Committed,
        itl,
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
                        .map(|&tau| (m, gate::Spread { tau, runs: rs.runs }))
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

/// Compares measured runs with their baselines and builds the results and exit code.
pub fn compare(
    scenarios: &[Scenario],
    runs: Vec<Result<RunOutput, crate::execute::MeasureError>>,
    baselines: &Baselines,
    opts: &CheckOptions,
) -> Results {
    let mut results: Vec<ScenarioResult> = Vec::new();
    let mut gate_inputs: Vec<ScenarioSamples> = Vec::new();
    // the baselines' server-side figures, to say where a FAIL's time went
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    for (sc, run) in scenarios.iter().zip(runs) {
        let mut res = ScenarioResult {
            name: sc.name.clone(),
            fingerprint: sc.fingerprint.clone(),
            source: sc.source.clone(),
            endpoint: sc.endpoint.shown_url(),
            api: sc.endpoint.api.as_str().to_string(),
            model: sc.endpoint.model.clone(),
            concurrency: sc.load.concurrency,
            family: sc.family.clone(),
            status: Status::Compared,
            status_detail: String::new(),
            baseline: None,
            measured: measured(&RunOutput::empty()),
            checks: Vec::new(),
            notes: Vec::new(),
            server: None,
            records: Vec::new(),
            ab: None,
        };
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                res.status = Status::Unmeasurable;
                res.status_detail = e.to_string();
                results.push(res);
                continue;
            }
        };
        res.measured = measured(&run);
        res.measured.target_rate = sc.load.rate;
        res.notes = sc.endpoint.warnings.clone();
        res.server = run.server_side.clone();
        res.notes.extend(run.server_side.as_ref().map(|s| s.note()));
        res.notes.extend(run_notes(sc, &run));
        res.notes.extend(schedule_notes(&res.measured));
        let path = baselines.path_for(&sc.name);
        let rate = res.measured.failed as f64 / res.measured.requests.max(1) as f64;
        if let Some((status, why)) = run_problem(sc, &run, &res.measured, opts.unlisted_model) {
            res.status = status;
            res.status_detail = why;
        }
        let loaded = baselines.get(&sc.name);
        if let (Ok(b), Some(s)) = (&loaded, &run.server_side) {
            res.notes.extend(super::server_notes::identity_drift(
                &b.environment.server_identity,
                &s.identity,
            ));
            if s.started_here {
                res.notes.extend(super::server_notes::ready_note(
                    b.environment.server_time_to_ready_ms,
                    s,
                ));
            }
            base_figures.insert(sc.name.clone(), b.environment.server_metrics.clone());
        }
        if let Ok(b) = &loaded {
            res.baseline = Some(BaselineInfo {
                path: path.display().to_string(),
                created_at: b.created_at.clone(),
                perfgate_version: b.perfgate_version.clone(),
                requests: b.records().count(),
                summary: b.summary.clone(),
            });
        }
        match (
            &loaded,
            unusable(sc, loaded.clone(), Missing::of(sc, opts.policy)),
        ) {
            (_, Some((status, why))) => {
                if res.status == Status::Compared {
                    res.status = status;
                    res.status_detail = why;
                }
            }
            (Ok(b), None) => match res.status {
                Status::Compared | Status::Unmeasurable if res.measured.ok > 0 => {
                    let drifts = workload_drift(sc, b, &run);
                    let skip: Vec<Metric> = drifts.iter().flat_map(|d| d.metrics.clone()).collect();
                    let left: Vec<Metric> = sc
                        .gate
                        .metrics
                        .iter()
                        .copied()
                        .filter(|m| !skip.contains(m))
                        .collect();
                    let whys: Vec<String> = drifts.iter().map(|d| d.why.clone()).collect();
                    if !drifts.is_empty() && left.is_empty() {
                        if res.status == Status::Compared {
                            res.status = Status::Stale;
                            res.status_detail = format!(
                                    "workload drift: {}; every gated metric depends on it, so nothing was compared (find out why the workload changed before blessing anything)",
                                    whys.join("; ")
                                );
                        }
                    } else {
                        for d in &drifts {
                            let names = d.gated_labels(&sc.gate.metrics);
                            if !names.is_empty() {
                                res.notes.push(format!(
                                        "workload drift: {}; {} not compared (the other metrics and the error rate are)",
                                        d.why,
                                        names.join(" and ")
                                    ));
                            }
                        }
                        if drifts.is_empty() {
                            res.notes.extend(minority_source_note(&run));
                        }
                        gate_inputs.push(scenario_samples(sc, b, &run, &skip));
                    }
                }
                _ => {}
            },
            (Err(_), None) => {} // a failed load is always unusable
        }
        // gate.slo needs no baseline: a scenario that could not be compared still has its
        // absolute objectives checked (a gate on day one).
        if !sc.gate.slo.is_empty()
            && res.measured.ok > 0
            && matches!(
                res.status,
                Status::NoBaseline | Status::Stale | Status::InvalidBaseline
            )
            && !gate_inputs.iter().any(|g| sc.name == g.scenario)
        {
            gate_inputs.push(slo_only_input(sc, &Arm::from_records(&run.records)));
            // (a missing baseline's status detail says so already)
            let why = match res.status {
                Status::Stale => Some("the baseline is stale"),
                Status::InvalidBaseline => Some("the baseline file is broken"),
                _ => None,
            };
            res.notes.extend(why.map(|why| {
                format!(
                    "{why}: only the gate.slo objectives were checked; bless to gate regressions too"
                )
            }));
        }
        if matches!(
            res.status,
            Status::Compared | Status::NoBaseline | Status::Stale
        ) && rate > sc.gate.max_error_rate
        {
            res.status = Status::Unmeasurable;
            res.status_detail = format!(
                "error rate {:.1}% is above max_error_rate {:.1}% (first failure: {})",
                rate * 100.0,
                sc.gate.max_error_rate * 100.0,
                res.measured.first_error.clone().unwrap_or_default()
            );
        }
        if let Some(why) = &run.stop_reason {
            res.notes.push(format!("sequential sampling: {why}"));
        }
        res.records = run.records.iter().map(RequestRecord::rounded).collect();
        results.push(res);
    }
    gated_results(results, &gate_inputs, &base_figures, &opts.id, opts.policy)
}

/// The end of `check` and `ab` alike: the gate over every scenario's input (one Holm family),
/// each check put on its scenario with the "where the time went" notes of a FAIL (`base_figures`:
/// the baseline's or base arm's server-side figures by scenario), and the overall verdict.
pub fn gated_results(
    mut results: Vec<ScenarioResult>,
    inputs: &[gate::ScenarioSamples],
    base_figures: &BTreeMap<ScenarioName, BTreeMap<String, f64>>,
    id: &CheckId,
    policy: crate::verdict::BaselinePolicy,
) -> Results {
    let (checks, family) = gate::evaluate(inputs);
    for c in checks {
        if let Some(r) = results.iter_mut().find(|r| r.name == c.scenario) {
            r.checks.push(c);
        }
    }
    for r in results.iter_mut() {
        if r.status == Status::Compared {
            if let Some(why) = nothing_gated(&r.checks) {
                r.status = Status::Unmeasurable;
                r.status_detail = why;
            }
        }
        if let Some(base) = base_figures.get(&r.name) {
            let notes = super::server_notes::fail_notes(r, base);
            r.notes.extend(notes);
        }
    }
    let mut out = Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: crate::clock::now_rfc3339(),
        id: id.clone(),
        verdict: Overall::Pass,
        exit_code: exit::OK,
        family_size: family,
        // set by the caller once every measurement (and confirmation) is over
        incomplete: false,
        baseline_policy: policy,
        scenarios: results,
    };
    out.decide();
    out
}

/// Why a measured run cannot be compared, if it cannot: every request rejected as unauthorised
/// or not found (misconfigured), the endpoint unreachable or dropping requests, a model the
/// server does not list under `--require-listed-model`, or no successful request. `m` is the
/// run's [`measured`] figures.
pub fn run_problem(
    sc: &Scenario,
    run: &RunOutput,
    m: &crate::results::Measured,
    unlisted_model: super::UnlistedModel,
) -> Option<(Status, String)> {
    if m.ok == 0 && misconfigured(run) {
        // Every request was refused as unauthorised or not found: the scenario is wrong,
        // not the server slow (tests/cases/35-base-url-joining.yaml).
        let first = run
            .records
            .iter()
            .chain(&run.warmup_records)
            .find_map(|r| r.error.as_ref().map(|e| e.message.clone()));
        Some((
            Status::Misconfigured,
            format!("every request was rejected: {}", first.unwrap_or_default()),
        ))
    } else if let Some(why) = &run.unreachable {
        Some((Status::Unmeasurable, why.clone()))
    } else if let Some(why) = run.resent_problem() {
        Some((Status::Unmeasurable, why))
    } else if let (super::UnlistedModel::Refuse, Some(why)) = (
        unlisted_model,
        crate::client::models::unlisted_note(&sc.endpoint.model, run.listed_models.as_deref()),
    ) {
        // --require-listed-model: a model the server does not list is a configuration error.
        Some((
            Status::Misconfigured,
            format!("{why} (--require-listed-model)"),
        ))
    } else if m.requests == 0 {
        Some((
            Status::Unmeasurable,
            "no measured request was sent (the run stopped before this one began)".to_string(),
        ))
    } else if m.ok == 0 {
        Some((
            Status::Unmeasurable,
            format!(
                "every request failed; first: {}",
                m.first_error.as_deref().unwrap_or("(no reason recorded)")
            ),
        ))
    } else {
        None
    }
}

/// Why a compared scenario's gate could not compare any latency, if it could not: it has
/// latency quantile checks (P50, P90, P99, ITL) and every one is INFO, not compared (a baseline
/// or run of one successful request, TPOT of 1-token streams). The share checks (errors,
/// tail>P90) do not count: they count failed requests as slow, so against a baseline of 19
/// failures in 20 they PASS whatever the latency. A gate that cannot compare never passes
/// silently: the scenario is then could-not-measure (exit 3), the first check's reason kept.
fn nothing_gated(checks: &[gate::Check]) -> Option<String> {
    use gate::{CheckKind, Verdict};
    let latency: Vec<&gate::Check> = checks
        .iter()
        .filter(|c| matches!(c.kind, CheckKind::Quantile(_) | CheckKind::ItlTail(_)))
        .collect();
    if latency.is_empty() || latency.iter().any(|c| c.verdict != Verdict::Info) {
        return None;
    }
    let first = latency
        .iter()
        .find(|c| c.kind == CheckKind::Quantile(crate::config::Quantile::P50))
        .unwrap_or(&latency[0]);
    Some(format!(
        "no latency check could compare, so nothing was gated ({} {}: {})",
        first.metric.map_or("-", |m| m.label()),
        first.kind.label(),
        first.reason
    ))
}

/// True when every failure is an HTTP 401/403/404/405: a wrong key or URL, not a slow server.
fn misconfigured(run: &RunOutput) -> bool {
    let recs = if run.records.is_empty() {
        &run.warmup_records
    } else {
        &run.records
    };
    !recs.is_empty()
        && recs.iter().all(|r| {
            r.error.as_ref().is_some_and(|e| {
                e.class == crate::record::FailureClass::HttpStatus
                    && matches!(e.status, Some(401 | 403 | 404 | 405))
            })
        })
}
