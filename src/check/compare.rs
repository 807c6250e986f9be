//! Compares measured runs with their baselines: each scenario's status, notes and gate input,
//! then the gate over the whole family, into the [`Results`] model.

use super::baselines::{unusable, Baselines, Missing};
use super::CheckOptions;
use crate::assess::{
    gated_results, measured, minority_source_note, run_notes, run_problem, scenario_samples,
    schedule_notes, server_notes, slo_only_input, workload_drift, Arm,
};
use crate::config::{Metric, Scenario, ScenarioName};
use crate::gate::ScenarioSamples;
use crate::record::RequestRecord;
use crate::results::{BaselineInfo, Results, ScenarioResult, Status};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

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
            res.notes.extend(server_notes::identity_drift(
                &b.environment.server_identity,
                &s.identity,
            ));
            if s.started_here {
                res.notes.extend(server_notes::ready_note(
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
