//! `check --from EXPORT --format F` and `bless --from EXPORT --format F`: another tool's
//! per-request export ([`crate::import`]) in place of a measured run, gated and reported as
//! one (docs/import.md says why these are flags of check and bless, not a command).

use crate::compare::CheckOptions;
use crate::config::Scenario;
use crate::exit::Error;
use crate::import::{Format, Imported};
use crate::results::Results;
use std::path::Path;

/// `--format`: which tool wrote the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum FormatArg {
    /// AIPerf's profile_export.jsonl (per-request records).
    Aiperf,
    /// GuideLLM's benchmarks JSON or YAML (--output kind=json|yaml), one benchmark.
    Guidellm,
    /// vllm bench serve --save-result --save-detailed JSON.
    Vllm,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Aiperf => Format::Aiperf,
            FormatArg::Guidellm => Format::Guidellm,
            FormatArg::Vllm => Format::Vllm,
        }
    }
}

/// Reads the export for the one selected scenario: an export is one load's requests, so
/// several selected scenarios (without `--only`) are a usage error.
pub(super) fn read<'a>(
    scs: &'a [Scenario],
    path: &Path,
    format: FormatArg,
) -> Result<(&'a Scenario, Imported), Error> {
    let sc = match scs {
        [one] => one,
        _ => {
            let names: Vec<&str> = scs.iter().map(|s| s.name.as_str()).collect();
            return Err(Error::Usage(format!(
                "--from {} is one load's requests, so it is gated as one scenario: {} selected ({}); pick one with --only NAME",
                path.display(),
                scs.len(),
                names.join(", ")
            )));
        }
    };
    Ok((sc, crate::import::read(path, format.into())?))
}

/// The results of gating the imported run against `sc`'s baseline, with the import's notes
/// (what was imported, what the tool measured otherwise) on the scenario.
pub(super) fn check_results(
    sc: &Scenario,
    imported: Imported,
    baselines: &crate::compare::Baselines,
    opts: &CheckOptions,
) -> Results {
    let notes = imported.notes;
    let mut results = crate::compare::compare(
        std::slice::from_ref(sc),
        vec![Ok(imported.run)],
        baselines,
        opts,
    );
    for s in &mut results.scenarios {
        s.notes.extend(notes.iter().cloned());
    }
    results.decide();
    results
}
