//! `perfgate ab`: its flags, and the command from reading the scenarios as two arms to the
//! exit code.

use crate::config::args::{load_scenarios_as, ScenarioArgs};
use crate::deliver::{deliver, ReportFiles};
use crate::exit::Error;
use crate::report;
use crate::verdict::FailOn;
use clap::Args;

/// `perfgate ab --design`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DesignArg {
    /// Both arms up at once, requests dispatched in seeded AB/BA pairs.
    Interleaved,
    /// One arm at a time, in blocks (ABBA...), the server swapped between blocks.
    Blocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OverlapArg {
    /// Take turns when both arms run on this machine, overlap otherwise.
    Auto,
    /// Always take turns: no request of one arm in flight with one of the other.
    Never,
    /// Each arm at its own concurrency, whatever the other has in flight.
    Allowed,
}

/// `perfgate ab`'s flags.
#[derive(Debug, Args)]
pub struct AbArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    /// The base arm's endpoint (with its /v1) [default: the scenario's endpoint.base_url, or
    /// base_url in server.base].
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The candidate arm's endpoint [default: as for --base-url, with server.candidate].
    #[arg(long, value_name = "URL")]
    candidate_url: Option<String>,
    /// The base arm's model id [default: the scenario's endpoint.model].
    #[arg(long, value_name = "MODEL")]
    base_model: Option<String>,
    /// The candidate arm's model id [default: the scenario's endpoint.model].
    #[arg(long, value_name = "MODEL")]
    candidate_model: Option<String>,
    /// The base arm's server command line: one string, split like a shell would (quotes,
    /// backslashes), then ${VAR} and ${VAR:-default} expanded in each word as in server.command
    /// of the scenario file ($VAR without braces is left to your shell: double quotes expand it,
    /// single quotes keep ${VAR} for perfgate). It replaces server.command (or
    /// server.base.command) of every scenario.
    #[arg(long, value_name = "COMMAND")]
    base_server_cmd: Option<String>,
    /// The candidate arm's server command line, as --base-server-cmd.
    #[arg(long, value_name = "COMMAND")]
    candidate_server_cmd: Option<String>,
    /// Start no server for either arm, whatever the scenarios' `server:` blocks say: measure the
    /// arms' URLs as they are (two servers you started yourself, or two gateway routes).
    #[arg(long, conflicts_with_all = ["base_server_cmd", "candidate_server_cmd"])]
    no_server: bool,
    /// interleaved: both arms up at once, requests in seeded AB/BA pairs; blocked: one arm at a
    /// time (one GPU), --blocks blocks per arm in ABBA order, the server swapped between blocks.
    #[arg(long, value_enum, default_value_t = DesignArg::Interleaved)]
    design: DesignArg,
    /// Interleaved: whether both arms may have requests in flight at once. `auto`: the arms take
    /// turns when both run on this machine (servers perfgate starts, loopback endpoints, sim://),
    /// where they would slow each other, and overlap otherwise; `never`: always take turns;
    /// `allowed`: each arm at its own concurrency (the overlap is measured and noted).
    #[arg(long, value_enum, default_value_t = OverlapArg::Auto)]
    overlap: OverlapArg,
    /// Blocks per arm of --design blocked (2 or more; 2 = ABBA, 4 = ABBABAAB).
    #[arg(long, value_name = "K", value_parser = parse_blocks)]
    blocks: Option<usize>,
    /// Seed of the interleaved order (which pairs are AB and which BA).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    out: ReportFiles,
    /// Which verdict fails the command: `fail` (a regression, exit 1) or `warn` (a WARN exits 1
    /// too). The verdict and the results file are the same either way.
    #[arg(long, value_enum, value_name = "VERDICT", env = "PERFGATE_FAIL_ON", default_value_t = FailOn::Fail)]
    fail_on: FailOn,
    /// As for check: a model the server does not list is a configuration error (exit 2).
    #[arg(long)]
    require_listed_model: bool,
    /// Check id for the PR comment marker `<!-- perfgate:ID -->` [default: GITHUB_WORKFLOW/GITHUB_JOB
    /// inside GitHub Actions, else perfgate].
    #[arg(long, default_value_t = crate::github::default_id(), hide_default_value = true)]
    id: String,
    #[command(flatten)]
    github: crate::github::GithubArgs,
}

fn parse_blocks(s: &str) -> Result<usize, String> {
    let k: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}`: give a whole number of blocks per arm, 2 or more"))?;
    if !(2..=50).contains(&k) {
        return Err(format!(
            "{k}: use 2 to 50 blocks per arm: with one block per arm, drift between the two blocks cannot be told from a change (2 gives ABBA)"
        ));
    }
    Ok(k)
}

/// `perfgate ab`: reads every scenario three ways (as written, base arm, candidate arm),
/// refuses what an A/B run does not support before measuring, measures, reports.
pub async fn cmd_ab(a: AbArgs) -> Result<i32, Error> {
    use crate::config::arm::{ArmKey, ArmOverride, Reading};
    let id = crate::results::CheckId::new(a.id.as_str())
        .map_err(|e| Error::Usage(format!("--id {e}")))?;
    let design = match (a.design, a.blocks) {
        (DesignArg::Interleaved, Some(k)) => {
            return Err(Error::Usage(format!(
                "--blocks {k} applies to --design blocked; the interleaved design alternates request by request"
            )))
        }
        (DesignArg::Interleaved, None) => crate::ab::DesignChoice::Interleaved,
        (DesignArg::Blocked, _) if a.overlap != OverlapArg::Auto => {
            return Err(Error::Usage(
                "--overlap applies to --design interleaved; in the blocked design one arm runs at a time".to_string(),
            ))
        }
        (DesignArg::Blocked, k) => crate::ab::DesignChoice::Blocked {
            per_arm: k.unwrap_or(crate::ab::DEFAULT_BLOCKS),
        },
    };
    let cmd = |flag: &str, v: &Option<String>| -> Result<Option<Vec<String>>, Error> {
        v.as_deref()
            .map(|c| {
                crate::config::arm::split_command(c)
                    .map_err(|e| Error::Usage(format!("--{flag}: {e}")))
            })
            .transpose()
    };
    let base_over = ArmOverride {
        base_url: a.base_url.clone(),
        model: a.base_model.clone(),
        server_command: cmd("base-server-cmd", &a.base_server_cmd)?,
        no_server: a.no_server,
    };
    let cand_over = ArmOverride {
        base_url: a.candidate_url.clone(),
        model: a.candidate_model.clone(),
        server_command: cmd("candidate-server-cmd", &a.candidate_server_cmd)?,
        no_server: a.no_server,
    };
    let written = load_scenarios_as(&a.sc, Reading::Serverless)?;
    let base = load_scenarios_as(&a.sc, Reading::Arm(ArmKey::Base, &base_over))?;
    let cand = load_scenarios_as(&a.sc, Reading::Arm(ArmKey::Candidate, &cand_over))?;
    let flags_given = base_over.sets_arm() || cand_over.sets_arm();
    let scs = crate::ab::pair::pair(written, base, cand, flags_given, design)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let opts = crate::ab::AbOptions {
        design,
        overlap: match a.overlap {
            OverlapArg::Auto => crate::ab::OverlapChoice::Auto,
            OverlapArg::Never => crate::ab::OverlapChoice::Never,
            OverlapArg::Allowed => crate::ab::OverlapChoice::Allowed,
        },
        seed: a.seed,
        id,
        unlisted_model: if a.require_listed_model {
            crate::assess::UnlistedModel::Refuse
        } else {
            crate::assess::UnlistedModel::Note
        },
    };
    if let Some(p) = &a.out.output {
        let mut none = crate::ab::interrupted_results(&scs, &opts);
        report::last_resort::keep(p, &mut none);
    }
    let results = crate::ab::run_ab(&scs, &opts).await;
    let rep = report::Report::new(results, None);
    Ok(deliver(rep, &a.out, &a.github, a.fail_on).await)
}
