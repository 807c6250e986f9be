//! The flags `check --from EXPORT --format F` and `bless --from EXPORT --format F` share: which
//! tool wrote the export, and the one selected scenario it is read for (docs/import.md says why
//! these are flags of check and bless, not a command).

use super::{Format, Imported};
use crate::config::Scenario;
use crate::exit::Error;
use std::path::Path;

/// `--format`: which tool wrote the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
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
pub fn read<'a>(
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
