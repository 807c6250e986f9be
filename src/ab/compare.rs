//! Turns the two arms of each scenario into the [`Results`] model: the base arm plays the
//! baseline of `check` (same gate input, [`crate::assess::gate_input`], with no run spread and
//! the design that ran), the candidate arm the run; statuses, notes, Holm family and verdicts
//! are `check`'s.

use super::measure::AbRuns;
use super::{AbOptions, AbScenario, DesignChoice};
use crate::assess::{self, Arm};
use crate::config::{Metric, ScenarioName};
use crate::gate::{self, Block, Design, ScenarioSamples, Side};
use crate::record::RequestRecord;
use crate::results::{AbDesign, AbResult, Results, ScenarioResult, Status};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

/// Builds the results of an A/B run from each scenario's arms.
pub fn compare(scs: &[AbScenario], runs: Vec<AbRuns>, opts: &AbOptions) -> Results {
    let mut results = Vec::with_capacity(scs.len());
    let mut inputs: Vec<ScenarioSamples> = Vec::new();
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    for (ab, runs) in scs.iter().zip(runs) {
        let (res, input, figures) = one(ab, runs, opts);
        inputs.extend(input);
        if let Some(f) = figures {
            base_figures.insert(res.name.clone(), f);
        }
        results.push(res);
    }
    // ab has no committed baseline: the policy is the default (nothing to allow missing).
    assess::gated_results(
        results,
        &inputs,
        &base_figures,
        &opts.id,
        crate::verdict::BaselinePolicy::Required,
    )
}

/// One scenario: its result, its gate input when both arms were measured, and the base arm's
/// server-side figures (to say where a FAIL's time went).
fn one(
    ab: &AbScenario,
    runs: AbRuns,
    opts: &AbOptions,
) -> (
    ScenarioResult,
    Option<ScenarioSamples>,
    Option<BTreeMap<String, f64>>,
) {
    let sc = &ab.candidate;
    let design = match opts.design {
        DesignChoice::Interleaved => AbDesign::Interleaved,
        DesignChoice::Blocked { .. } => AbDesign::Blocked,
    };
    let alternations = match opts.design {
        DesignChoice::Interleaved => runs.order.len() / 2,
        DesignChoice::Blocked { per_arm } => per_arm,
    };
    let empty = RunOutput::empty();
    let base_run = runs.base.as_ref().unwrap_or(&empty);
    let cand_run = runs.candidate.as_ref().unwrap_or(&empty);
    let mut res = ScenarioResult {
        name: ab.written.name.clone(),
        fingerprint: ab.written.fingerprint.clone(),
        source: ab.written.source.clone(),
        endpoint: sc.endpoint.shown_url(),
        api: sc.endpoint.api.as_str().to_string(),
        model: sc.endpoint.model.clone(),
        concurrency: sc.load.concurrency,
        family: ab.written.family.clone(),
        status: Status::Compared,
        status_detail: String::new(),
        baseline: None,
        measured: assess::measured(cand_run),
        checks: Vec::new(),
        notes: Vec::new(),
        server: cand_run.server_side.clone(),
        records: cand_run
            .records
            .iter()
            .map(RequestRecord::rounded)
            .collect(),
        ab: Some(AbResult {
            design,
            order: super::plan::letters(&runs.order),
            alternations,
            seed: (design == AbDesign::Interleaved).then_some(opts.seed),
            blocks: runs.blocks.iter().map(|(b, _)| b.clone()).collect(),
            base_endpoint: ab.base.endpoint.shown_url(),
            base_model: ab.base.endpoint.model.clone(),
            base_measured: assess::measured(base_run),
            base_server: base_run.server_side.clone(),
            base_records: base_run
                .records
                .iter()
                .map(RequestRecord::rounded)
                .collect(),
        }),
    };
    res.notes = sc.endpoint.warnings.clone();
    res.notes.extend(ab.notes.iter().cloned());
    for (label, run) in [("base", base_run), ("candidate", cand_run)] {
        res.notes.extend(
            run.server_side
                .as_ref()
                .map(|s| format!("{label} arm: {}", s.note())),
        );
    }
    if let Some(n) = identity_difference(base_run, cand_run) {
        res.notes.push(n);
    }
    let mut arms = [
        ("base", &ab.base, &runs.base),
        ("candidate", &ab.candidate, &runs.candidate),
    ];
    // The arm found unreachable is why the run stopped: its reason comes first, before the other
    // arm's "no request was sent".
    if matches!(&runs.candidate, Ok(r) if r.unreachable.is_some())
        && !matches!(&runs.base, Ok(r) if r.unreachable.is_some())
    {
        arms.swap(0, 1);
    }
    for (label, arm_sc, run) in arms {
        let problem = match run {
            Err(e) => Some((Status::Unmeasurable, e.to_string())),
            Ok(r) => {
                let m = assess::measured(r);
                assess::run_problem(arm_sc, r, &m, opts.unlisted_model).or_else(|| {
                    let rate = m.failed as f64 / m.requests.max(1) as f64;
                    (rate > arm_sc.gate.max_error_rate).then(|| {
                        (
                            Status::Unmeasurable,
                            format!(
                                "error rate {:.1}% is above max_error_rate {:.1}% (first failure: {})",
                                rate * 100.0,
                                arm_sc.gate.max_error_rate * 100.0,
                                m.first_error.clone().unwrap_or_default()
                            ),
                        )
                    })
                })
            }
        };
        if let Some((status, why)) = problem {
            if res.status == Status::Compared {
                res.status = status;
                res.status_detail = format!("{label} arm: {why}");
            }
        }
        if let Ok(r) = run {
            for n in assess::run_notes(arm_sc, r) {
                res.notes.push(format!("{label} arm: {n}"));
            }
        }
    }
    if res.status != Status::Compared {
        return (res, None, None);
    }
    // The base arm as a one-run baseline: the workload-drift rules of `check` apply as is.
    let as_baseline = crate::baseline::from_runs(&ab.base, std::slice::from_ref(base_run), None);
    let drifts = assess::workload_drift(sc, &as_baseline, cand_run);
    let skip: Vec<Metric> = drifts.iter().flat_map(|d| d.metrics.clone()).collect();
    if !drifts.is_empty() && sc.gate.metrics.iter().all(|m| skip.contains(m)) {
        let whys: Vec<String> = drifts.iter().map(|d| arm_words(&d.why)).collect();
        res.status = Status::Misconfigured;
        res.status_detail = format!(
            "the arms ran different workloads: {}; every gated metric depends on it, so nothing was compared",
            whys.join("; ")
        );
        return (res, None, None);
    }
    for d in &drifts {
        let names = d.gated_labels(&sc.gate.metrics);
        if !names.is_empty() {
            res.notes.push(format!(
                "workload drift between the arms: {}; {} not compared (the other metrics and the error rate are)",
                arm_words(&d.why),
                names.join(" and ")
            ));
        }
    }
    let mut input = assess::gate_input(
        sc,
        &Arm::from_records(&base_run.records),
        &Arm::from_records(&cand_run.records),
        BTreeMap::new(),
        &skip,
    );
    input.design = match opts.design {
        DesignChoice::Interleaved => Design::Interleaved,
        DesignChoice::Blocked { .. } => Design::Blocked(
            runs.blocks
                .iter()
                .map(|(b, recs)| block(b.side, recs, &input.metrics))
                .collect(),
        ),
    };
    let figures = base_run.server_side.as_ref().map(|s| s.metrics.clone());
    (res, Some(input), figures)
}

/// One block's samples of each compared metric.
fn block(
    side: Side,
    recs: &[RequestRecord],
    compared: &[(Metric, gate::Samples, gate::Samples)],
) -> Block {
    let arm = Arm::from_records(recs);
    Block {
        side,
        metrics: compared
            .iter()
            .map(|(m, _, _)| (*m, arm.samples(*m)))
            .collect(),
    }
}

/// A drift message of `check` ("... in the baseline vs ... now") in the words of two arms.
fn arm_words(why: &str) -> String {
    why.replace("in the baseline", "in the base arm")
        .replace(" now", " in the candidate arm")
}

/// What differs between the two arms' servers, as they describe themselves (what the run
/// compares, shown so the reader knows what changed).
fn identity_difference(base: &RunOutput, cand: &RunOutput) -> Option<String> {
    let b = &base.server_side.as_ref()?.identity;
    let c = &cand.server_side.as_ref()?.identity;
    if b.is_empty() || c.is_empty() {
        return None;
    }
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| b.get(*k) != c.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.map(String::as_str).unwrap_or("(absent)").to_string();
            format!("{k} {} -> {}", show(b.get(k)), show(c.get(k)))
        })
        .collect();
    Some(if diffs.is_empty() {
        "the two arms' servers describe themselves identically (an A/A run unless their flags differ)".into()
    } else {
        format!("base -> candidate server: {}", diffs.join(", "))
    })
}
