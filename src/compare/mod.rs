//! Measured runs compared with the committed references, below the commands that share it
//! (`check`, `report` for merged load-shard workers, `history`): [`baselines`] loads each
//! baseline once and says whether it is usable, [`compare()`] judges each run against its
//! baseline ([`crate::assess::judge()`]), then the gate over the whole family, into the
//! [`Results`] model; [`workers`] merges a scenario's load-shard workers into one run;
//! [`nightly`] reads, judges and appends the nightly history.

mod baselines;
pub mod nightly;
pub mod workers;

pub use baselines::Baselines;

use crate::assess::gated::Last;
use crate::assess::UnlistedModel;
use crate::assess::{gated_results, judge, outputs, CommittedBaseline, Given, Reference};
use crate::config::{Scenario, ScenarioName};
use crate::gate::ScenarioSamples;
use crate::results::{MergedWorkers, Results, ScenarioResult};
use crate::runner::RunOutput;
use baselines::Missing;
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
    /// `--history`: the nightly history read before measuring: each run is judged against its
    /// scenario's nights too ([`nightly::HistoryRun::nights`]).
    pub history: Option<std::sync::Arc<nightly::HistoryRun>>,
}

/// Compares measured runs with their baselines and builds the results and exit code.
pub fn compare(
    scenarios: &[Scenario],
    runs: Vec<Result<RunOutput, crate::execute::MeasureError>>,
    baselines: &Baselines,
    opts: &CheckOptions,
) -> Results {
    judge_all(scenarios, runs, baselines, opts, &[])
}

/// [`compare`], each scenario's run merged from the load-shard `workers` of the same index
/// (`perfgate report`; none for a check).
pub(super) fn judge_all(
    scenarios: &[Scenario],
    runs: Vec<Result<RunOutput, crate::execute::MeasureError>>,
    baselines: &Baselines,
    opts: &CheckOptions,
    workers: &[MergedWorkers],
) -> Results {
    let (cpu, host) = (crate::machine::cpu(), crate::machine::host());
    let mut results: Vec<ScenarioResult> = Vec::new();
    let mut gate_inputs: Vec<ScenarioSamples> = Vec::new();
    // the baselines' server-side figures, to say where a FAIL's time went
    let mut base_figures: BTreeMap<ScenarioName, BTreeMap<String, f64>> = BTreeMap::new();
    let mut last = Vec::with_capacity(scenarios.len());
    for (i, (sc, run)) in scenarios.iter().zip(runs).enumerate() {
        let path = baselines.path_for(&sc.name);
        let loaded = baselines.get(&sc.name);
        let unusable = baselines.why_unusable(sc, Missing::of(sc, opts.policy));
        let reference = Reference::Baseline(CommittedBaseline {
            path: &path,
            loaded: loaded.as_ref().ok().copied(),
            unusable: unusable.as_ref(),
            nights: opts.history.as_ref().map(|h| h.nights(sc)),
        });
        let given = Given {
            unlisted_model: opts.unlisted_model,
            here: (cpu.as_deref(), host.as_deref()),
            workers: workers.get(i),
        };
        let j = judge(sc, run.as_ref(), &reference, &given);
        last.push(Last {
            // the answers against the baseline's (gate.outputs)
            answers: match (loaded.as_ref().ok(), run.as_ref()) {
                (Some(b), Ok(run)) => outputs::against_baseline(sc, b, &run.records),
                _ => None,
            },
            night: j.night,
        });
        gate_inputs.extend(j.gate_input);
        if let Some(f) = j.base_figures {
            base_figures.insert(sc.name.clone(), f);
        }
        results.push(j.result);
    }
    gated_results(
        results,
        &gate_inputs,
        &base_figures,
        last,
        &opts.id,
        opts.policy,
        // a night's time is fixed before measuring: the results carry it, so `history append
        // --results` of this file names the same night
        opts.history.as_ref().map(|h| h.night.time.clone()),
    )
}
