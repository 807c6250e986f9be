//! Turns the two arms of each scenario into the [`Results`] model: each scenario's candidate arm
//! judged against its base arm ([`crate::assess::judge()`], the judgement of `check` with the
//! base arm as the reference), with the design that ran; Holm family and verdicts as `check`'s.

use super::measure::AbRuns;
use super::{AbOptions, AbScenario, DesignChoice};
use crate::assess::{self, BaseArm, Reference};
use crate::config::ScenarioName;
use crate::gate::ScenarioSamples;
use crate::record::RequestRecord;
use crate::results::{AbDesign, AbResult, Results};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

/// Builds the results of an A/B run from each scenario's arms.
pub fn compare(scs: &[AbScenario], runs: Vec<AbRuns>, opts: &AbOptions) -> Results {
    let mut results = Vec::with_capacity(scs.len());
    let mut inputs: Vec<ScenarioSamples> = Vec::new();
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    let mut answers = Vec::with_capacity(scs.len());
    for (ab, runs) in scs.iter().zip(runs) {
        answers.push(assess::gated::Last {
            answers: answers_of(ab, &runs),
            night: None,
        });
        let j = one(ab, runs, opts);
        inputs.extend(j.gate_input);
        if let Some(f) = j.base_figures {
            base_figures.insert(j.result.name.clone(), f);
        }
        results.push(j.result);
    }
    // ab has no committed baseline: the policy is the default (nothing to allow missing).
    assess::gated_results(
        results,
        &inputs,
        &base_figures,
        answers,
        &opts.id,
        crate::verdict::BaselinePolicy::Required,
        None,
    )
}

/// The arms' answers compared (`gate.outputs`): each arm's records and the base arm's repeats.
fn answers_of(ab: &AbScenario, runs: &AbRuns) -> Option<assess::outputs::Answers> {
    let none: &[RequestRecord] = &[];
    let base = runs.base.as_ref().map_or(none, |r| &r.records);
    let cand = runs.candidate.as_ref().map_or(none, |r| &r.records);
    let repeats = runs.base.as_ref().map_or(none, |r| &r.repeats);
    assess::outputs::between_arms(&ab.base, &ab.candidate, base, cand, repeats)
}

/// One scenario judged against its base arm ([`crate::assess::judge()`]), which carries what
/// only an A/B run has: the scenario's name as written, the design and its blocks.
fn one(ab: &AbScenario, runs: AbRuns, opts: &AbOptions) -> assess::Judged {
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
    let arms = AbResult {
        design,
        order: super::plan::letters(&runs.order),
        alternations,
        seed: (design == AbDesign::Interleaved).then_some(opts.seed),
        blocks: runs.blocks.iter().map(|(b, _)| b.clone()).collect(),
        overlap: runs.overlap.clone(),
        base_endpoint: ab.base.endpoint.shown_url(),
        base_model: ab.base.endpoint.model.clone(),
        base_measured: assess::measured(base_run),
        base_server: base_run.server_side.clone(),
        base_records: base_run
            .records
            .iter()
            .map(|r| assess::outputs::written(r, &ab.base))
            .collect(),
    };
    let reference = Reference::BaseArm(BaseArm {
        scenario: &ab.base,
        written: &ab.written,
        ab: &arms,
        run: runs.base.as_ref(),
        notes: &ab.notes,
        blocks: &runs.blocks,
    });
    let given = assess::Given {
        unlisted_model: opts.unlisted_model,
        ..Default::default()
    };
    assess::judge(sc, runs.candidate.as_ref(), &reference, &given)
}
