//! `perfgate bless`: its flags, and which of the three ways of writing a baseline they ask for
//! (measure, one arm of an A/B results file, another tool's export).

use crate::config::args::{load_measured_scenarios, load_scenarios, ScenarioArgs};
use crate::exit::Error;
use crate::import::args as import;
use crate::report;
use clap::Args;
use std::path::PathBuf;

/// `perfgate bless --from RESULTS.json --arm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ArmArg {
    Base,
    Candidate,
}

/// `perfgate bless`'s flags.
#[derive(Debug, Args)]
pub struct BlessArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    /// Directory of baseline files.
    #[arg(long, default_value = "baselines")]
    baselines: PathBuf,
    /// Separate runs per scenario (1-20). The run-to-run spread of the runs is stored and check
    /// widens its fail tolerance to it, so a runner that drifts between the bless and a check
    /// does not false-alarm (see docs/gate.md); 1 stores no spread.
    #[arg(long, default_value_t = crate::bless::DEFAULT_RUNS, value_parser = clap::value_parser!(u8).range(1..=20))]
    runs: u8,
    /// Write the baseline even when its runs' spread is so large that a check could not catch a
    /// 2x slowdown (refused by default, exit 3).
    #[arg(long)]
    allow_unstable: bool,
    /// Write the baseline even when the server's model list (GET <base_url>/models) does not
    /// name endpoint.model (refused by default, exit 2: such a baseline stays wrong for good);
    /// for gateways that route names they do not list.
    #[arg(long)]
    allow_unlisted_model: bool,
    /// Measure nothing: write one arm of this `perfgate ab --output` results file as the
    /// baseline of each scenario (with --arm), or the requests of another tool's export as the
    /// baseline of the one selected scenario (with --format; docs/import.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["runs", "allow_unstable", "allow_unlisted_model"])]
    from: Option<PathBuf>,
    /// With --from RESULTS.json: the arm whose requests become the baseline.
    #[arg(long, value_enum, requires = "from")]
    arm: Option<ArmArg>,
    /// With --from EXPORT: the tool that wrote it (aiperf, guidellm, vllm).
    #[arg(long, value_enum, requires = "from", conflicts_with = "arm")]
    format: Option<import::FormatArg>,
}

/// Runs `perfgate bless`: writes each selected scenario's baseline, measured or read `--from`.
pub async fn cmd_bless(a: BlessArgs) -> Result<i32, Error> {
    crate::limits::check_baselines_dir(&a.baselines)?;
    let host = crate::bless::this_host();
    if let (Some(from), Some(format)) = (&a.from, a.format) {
        let scs = load_scenarios(&a.sc)?;
        let (sc, imported) = import::read(&scs, from, format)?;
        return crate::bless::bless_import(sc, &a.baselines, &imported, host);
    }
    if a.from.is_some() && a.arm.is_none() {
        return Err(Error::Usage(
            "--from needs --arm base|candidate (a perfgate results file) or --format aiperf|guidellm|vllm (another tool's export)".into(),
        ));
    }
    if let (Some(from), Some(arm)) = (&a.from, a.arm) {
        let scs = load_scenarios(&a.sc)?;
        let side = match arm {
            ArmArg::Base => crate::gate::Side::Base,
            ArmArg::Candidate => crate::gate::Side::Candidate,
        };
        return crate::bless::bless_from(&scs, &a.baselines, from, side, host);
    }
    let scs = load_measured_scenarios(&a.sc)?;
    crate::bless::bless(
        &scs,
        &a.baselines,
        a.runs as usize,
        a.allow_unstable,
        if a.allow_unlisted_model {
            crate::assess::UnlistedModel::Note
        } else {
            crate::assess::UnlistedModel::Refuse
        },
        host,
        report::progress::TerminalProgress::stderr(),
    )
    .await
}
