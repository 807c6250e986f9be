//! Turns the two arms of each scenario into the [`Results`] model: each scenario's candidate arm
//! judged against its base arm ([`crate::assess::judge()`], the judgement of `check` with the
//! base arm as the reference), with the design that ran; Holm family and verdicts as `check`'s.

use super::measure::AbRuns;
use super::{AbOptions, AbScenario, DesignChoice};
use crate::assess::{self, Arm, BaseArm, Reference};
use crate::config::{Metric, ScenarioName};
use crate::gate::{self, Block, Design, ScenarioSamples, Side};
use crate::record::RequestRecord;
use crate::results::{AbDesign, AbResult, Results, ScenarioResult};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

/// Builds the results of an A/B run from each scenario's arms.
pub fn compare(scs: &[AbScenario], runs: Vec<AbRuns>, opts: &AbOptions) -> Results {
    let mut results = Vec::with_capacity(scs.len());
    let mut inputs: Vec<ScenarioSamples> = Vec::new();
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    let mut answers = Vec::with_capacity(scs.len());
    for (ab, runs) in scs.iter().zip(runs) {
        answers.push(answers_of(ab, &runs));
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
        answers,
        &opts.id,
        crate::verdict::BaselinePolicy::Required,
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

/// One scenario: judged against its base arm ([`crate::assess::judge()`]), then what only an A/B
/// run has: the scenario's name as written, the design and the base arm's figures, and the
/// blocks of the blocked design in the gate's input.
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
    });
    let given = assess::Given {
        unlisted_model: opts.unlisted_model,
        ..Default::default()
    };
    let j = assess::judge(sc, runs.candidate.as_ref(), &reference, &given);
    let input = j.gate_input.map(|mut input| {
        input.design = match opts.design {
            DesignChoice::Interleaved => Design::Interleaved,
            DesignChoice::Blocked { .. } => Design::Blocked(
                runs.blocks
                    .iter()
                    .map(|(b, recs)| block(b.side, recs, &input.metrics))
                    .collect(),
            ),
        };
        input
    });
    (j.result, input, j.base_figures)
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
