//! Compares measured runs with their baselines: each scenario judged against its committed
//! baseline ([`crate::assess::judge()`]), then the gate over the whole family, into the
//! [`Results`] model.

use super::baselines::{Baselines, Missing};
use super::CheckOptions;
use crate::assess::{gated_results, judge, CommittedBaseline, Reference};
use crate::config::{Scenario, ScenarioName};
use crate::gate::ScenarioSamples;
use crate::results::{Results, ScenarioResult};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

/// Compares measured runs with their baselines and builds the results and exit code.
pub fn compare(
    scenarios: &[Scenario],
    runs: Vec<Result<RunOutput, crate::execute::MeasureError>>,
    baselines: &Baselines,
    opts: &CheckOptions,
) -> Results {
    let (here_cpu, here_host) = (crate::machine::cpu(), crate::machine::host());
    let mut results: Vec<ScenarioResult> = Vec::new();
    let mut gate_inputs: Vec<ScenarioSamples> = Vec::new();
    // the baselines' server-side figures, to say where a FAIL's time went
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    for (sc, run) in scenarios.iter().zip(runs) {
        let path = baselines.path_for(&sc.name);
        let loaded = baselines.get(&sc.name);
        let unusable = baselines.why_unusable(sc, Missing::of(sc, opts.policy));
        let learned = opts
            .history
            .as_ref()
            .map(|h| h.learned(sc))
            .unwrap_or_default();
        let reference = Reference::Baseline(CommittedBaseline {
            path: &path,
            loaded: loaded.as_ref().ok().copied(),
            unusable: unusable.as_ref(),
            learned: &learned,
        });
        let mut j = judge(sc, run.as_ref(), &reference, opts.unlisted_model);
        if let Ok(base) = loaded.as_ref() {
            let env = &base.environment;
            let differs = crate::machine::difference(
                env.cpu.as_deref(),
                env.host.as_deref(),
                here_cpu.as_deref(),
                here_host.as_deref(),
            );
            let kind = crate::results::NoteKind::Machine;
            j.result
                .notes
                .extend(differs.map(|n| crate::results::Note::new(kind, n)));
        }
        if let (Some(share), Ok(run)) = (sc.load.share, run.as_ref()) {
            // a load-shard worker measures, `perfgate report` gates the merged workers
            super::workers::mark_worker(&mut j.result, share, run);
            j.gate_input = None;
        }
        gate_inputs.extend(j.gate_input);
        if let Some(f) = j.base_figures {
            base_figures.insert(sc.name.clone(), f);
        }
        results.push(j.result);
    }
    gated_results(results, &gate_inputs, &base_figures, &opts.id, opts.policy)
}
