//! `perfgate check`: measure every scenario, compare with its baseline, decide the verdict and
//! exit code (docs/design.md "Jobs" and "Exit codes", docs/gate.md).
//!
//! Each run is judged against its baseline by [`crate::compare`] (shared with `perfgate report`
//! and `perfgate history`); [`confirm`] re-runs FAILs; this file measures and orchestrates.

mod command;
mod confirm;

pub use command::{cmd_check, CheckArgs};

/// The figures and notes of a run, kept here too for the library's existing callers.
pub use crate::assess::{measured, run_notes};

use crate::assess::{scenario_samples, workload_drift};
use crate::compare::{compare, Baselines, CheckOptions};
use crate::config::{Metric, Scenario};
use crate::gate;
use crate::results::Results;
use crate::runner::RunOutput;

/// The results of a run stopped before any scenario was measured: each one "not measured:
/// interrupted", marked incomplete (what a forced exit writes until the real results exist,
/// [`crate::report::last_resort`]).
pub fn interrupted_results(
    scenarios: &[Scenario],
    baselines: &Baselines,
    opts: &CheckOptions,
) -> Results {
    let runs = scenarios
        .iter()
        .map(|_| Err(crate::execute::MeasureError::Interrupted))
        .collect();
    let mut results = compare(scenarios, runs, baselines, opts);
    results.incomplete = true;
    results.decide();
    results
}

/// Measures every scenario (sequentially, in looks when `max_samples` is set, stopping a
/// scenario as soon as all its gated checks are decided) and compares with the baselines.
///
/// `baselines` holds every scenario's baseline, read once before measuring
/// ([`Baselines::load`]).
pub async fn run_check(
    scenarios: &[Scenario],
    baselines: &Baselines,
    opts: &CheckOptions,
) -> Results {
    let mut runs = Vec::with_capacity(scenarios.len());
    for sc in scenarios {
        if crate::cancel::requested() {
            runs.push(Err(crate::execute::MeasureError::Interrupted));
            continue;
        }
        let looks = sc.load.looks();
        eprintln!(
            "perfgate: measuring {} ({} warmup + {} requests{}, {})",
            sc.name,
            sc.load.warmup,
            sc.load.samples,
            match sc.load.max_samples {
                Some(m) => format!(", up to {m} in {} looks", looks.len()),
                None => String::new(),
            },
            match sc.load.rate {
                Some(r) => format!(
                    "open loop {r} requests/s, at most {} in flight",
                    sc.load.concurrency
                ),
                None => format!("concurrency {}", sc.load.concurrency),
            }
        );
        let run = match baselines.usable(sc) {
            Some(b) if looks.len() > 1 => {
                let mut decide = |out: &RunOutput| {
                    let skip: Vec<Metric> = workload_drift(sc, b, out)
                        .into_iter()
                        .flat_map(|d| d.metrics)
                        .collect();
                    let ss = scenario_samples(sc, b, out, &skip);
                    let (checks, _) = gate::evaluate(std::slice::from_ref(&ss));
                    gate::all_decided(&checks)
                        .then(|| "every gated check is PASS, FAIL or IMPROVED".to_string())
                };
                crate::execute::measure_until(sc, opts.progress.clone(), &mut decide).await
            }
            _ => crate::execute::measure(sc, opts.progress.clone()).await,
        };
        runs.push(run);
    }
    let mut results = compare(scenarios, runs, baselines, opts);
    if !crate::cancel::requested() {
        confirm::confirm_failures(scenarios, baselines, opts, &mut results).await;
    }
    results.incomplete = crate::cancel::requested();
    results.decide();
    results
}
