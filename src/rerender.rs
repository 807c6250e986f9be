//! `perfgate report`: saved results (`check --output`) loaded, merged (shards; load-shard
//! workers merged and gated by [`crate::compare::workers`]) and rendered again, without
//! measuring.

use crate::config;
use crate::config::args::env_lookup;
use crate::deliver::ReportFiles;
use crate::exit::{self, Error};
use crate::report;
use clap::Args;
use std::path::PathBuf;

/// `perfgate report`'s flags.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results JSON files written by `perfgate check --output` (several are merged).
    #[arg(required = true, value_name = "RESULTS.json")]
    results: Vec<PathBuf>,
    /// Directory of the baselines the results were compared with, for the HTML plots
    /// [default: the paths recorded in the results]; merged load-shard workers are gated
    /// against the baselines in it [default there: baselines].
    #[arg(long)]
    baseline_dir: Option<PathBuf>,
    /// Scenario file or directory (repeatable), read only to gate merged load-shard workers
    /// (`check --load-shard`) with their scenarios' gate settings.
    #[arg(long = "scenarios", short = 's', default_value = "scenarios")]
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    out: ReportFiles,
}

/// `perfgate report`: loads (and merges) saved results, prints the terminal report, writes the
/// requested files, and exits with the code the results carry.
pub fn cmd_report(a: ReportArgs) -> Result<i32, Error> {
    let mut all = Vec::with_capacity(a.results.len());
    for p in &a.results {
        all.push(report::json::load(p)?);
    }
    let mut names: Vec<String> = a.results.iter().map(|p| p.display().to_string()).collect();
    let scenarios = || {
        let files = config::scenario_files(&a.scenarios).map_err(|e| e.to_string())?;
        config::load_as(&files, &env_lookup, config::arm::Reading::Serverless)
            .map_err(|e| e.to_string())
    };
    let baselines = a
        .baseline_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("baselines"));
    crate::compare::workers::merge_workers(&mut all, &mut names, &scenarios, &baselines)
        .map_err(|e| Error::Results(e.into()))?;
    let results = crate::results::merge(all, &names).map_err(|e| Error::Results(e.into()))?;
    let rep = report::Report::new(results, a.baseline_dir.as_deref());
    let written = report::print_and_write(&rep, &a.out.outputs());
    written.print_failures();
    if crate::cancel::requested() {
        // Ctrl-C / SIGTERM while writing: the files are complete (each written atomically), but
        // the command was interrupted.
        return Ok(exit::INTERRUPTED);
    }
    Ok(written.exit_code(rep.results.exit_code))
}
