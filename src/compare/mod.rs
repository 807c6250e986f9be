//! Measured runs compared with the committed references, below the commands that share it
//! (`check`, `report` for merged load-shard workers, `history`): [`baselines`] loads each
//! baseline once and says whether it is usable, [`compare()`] judges each run against its
//! baseline ([`crate::assess::judge()`]), then the gate over the whole family, into the
//! [`Results`] model; [`workers`] merges a scenario's load-shard workers into one run;
//! [`nightly`] reads, judges and appends the nightly history.

mod baselines;
pub mod nightly;
pub mod workers;

pub use baselines::{missing_message, Baselines, NoUsableBaseline};

use crate::assess::UnlistedModel;
use crate::assess::{gated_results, judge, CommittedBaseline, Reference};
use crate::config::{Scenario, ScenarioName};
use crate::gate::ScenarioSamples;
use crate::results::{Results, ScenarioResult};
use crate::runner::RunOutput;
use baselines::{unusable, Missing};
use std::collections::BTreeMap;

/// Options of one check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Whether a missing or stale baseline fails the check (the default) or is only reported.
    pub policy: crate::verdict::BaselinePolicy,
    /// The check id (comment marker).
    pub id: crate::results::CheckId,
    /// What a configured model that the server's `GET <base>/models` does not list means.
    pub unlisted_model: UnlistedModel,
    /// The live progress display every measurement reports to (an interactive terminal's
    /// progress line), if any.
    pub progress: Option<std::sync::Arc<dyn crate::runner::Progress>>,
    /// `--history`: the nightly history read before measuring; its night-to-night spread widens
    /// the baselines' fail tolerances ([`nightly::HistoryRun::learned`]).
    pub history: Option<std::sync::Arc<nightly::HistoryRun>>,
}

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
        let unusable = unusable(sc, loaded.clone(), Missing::of(sc, opts.policy));
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
            j.result.notes.extend(crate::machine::difference(
                env.cpu.as_deref(),
                env.host.as_deref(),
                here_cpu.as_deref(),
                here_host.as_deref(),
            ));
        }
        if let (Some(share), Ok(run)) = (sc.load.share, run.as_ref()) {
            // a load-shard worker measures, `perfgate report` gates the merged workers
            workers::mark_worker(&mut j.result, share, run);
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
