//! Command-line interface (clap): parses arguments, runs the command, returns the exit code.
//! Messages go to stderr; reports to stdout.

use crate::check;
use crate::compare::CheckOptions;
use crate::config::{self, Scenario};
use crate::exit::{self, Error};
use crate::report;
use crate::sim::{ReplayCase, SimConfig, SimServer};
use crate::verdict::FailOn;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

mod history;
mod import;

/// perfgate: a CI regression gate for LLM inference latency (TTFT, TPOT, ITL).
#[derive(Debug, Parser)]
#[command(name = "perfgate", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure every scenario, compare with baselines/, report, exit 1 on a regression.
    Check(CheckArgs),
    /// Measure every scenario and rewrite its baseline (atomically), or write one arm of an A/B
    /// run's results as the baseline (--from).
    Bless(BlessArgs),
    /// Measure two arms (base and candidate) of every scenario in the same job, interleaved,
    /// compare them like check, report, exit 1 on a regression.
    Ab(AbArgs),
    /// Check scenario files offline: keys, values, env vars.
    Validate(ScenarioArgs),
    /// Run the built-in OpenAI-compatible streaming simulator on 127.0.0.1.
    Sim(SimArgs),
    /// Simulate the gate on documented noise profiles: false-alarm rate and power, beside two
    /// common comparator rules.
    Calibrate(CalibrateArgs),
    /// Re-render saved results (`check --output`) in any format, without measuring; exits with
    /// the code the results carry.
    Report(ReportArgs),
    /// Scaffold scenarios/example.yaml, baselines/ and a pull-request workflow (never overwrites).
    Init(InitArgs),
    /// The nightly history (`check --history`): show a scenario's nights and change points, or
    /// append a saved night.
    #[command(subcommand)]
    History(history::HistoryCommand),
}

#[derive(Debug, Args)]
struct ReportArgs {
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

#[derive(Debug, Args)]
struct InitArgs {
    /// Directory to scaffold (created if needed).
    #[arg(default_value = ".")]
    dir: PathBuf,
}

/// The report files a command can write.
#[derive(Debug, Args)]
struct ReportFiles {
    /// Write the markdown report (the PR comment body) to FILE.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write the results JSON to FILE (layout: schema/results.schema.json).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Write JUnit XML to FILE: one testcase per check, for CI systems other than GitHub.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write a self-contained HTML page to FILE: distributions of baseline and candidate, verdicts.
    #[arg(long)]
    html: Option<PathBuf>,
}

impl ReportFiles {
    fn outputs(&self) -> report::Outputs<'_> {
        report::Outputs {
            json: self.output.as_deref(),
            markdown: self.markdown.as_deref(),
            junit: self.junit.as_deref(),
            html: self.html.as_deref(),
        }
    }
}

#[derive(Debug, Args)]
struct CalibrateArgs {
    /// Replicates per experiment (2000 gives rates to about +/-0.5 %).
    #[arg(long, default_value_t = 2000)]
    replicates: usize,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 20240601)]
    seed: u64,
    /// Only experiments whose label contains this text.
    #[arg(long)]
    only: Option<String>,
    /// The nightly history's change-point rule instead (series of nights, beside a naive
    /// threshold and a Perfherder-style t-test).
    #[arg(long)]
    nightly: bool,
}

#[derive(Debug, Args)]
struct ScenarioArgs {
    /// Scenario file or directory of *.yaml files (repeatable).
    #[arg(long = "scenarios", short = 's', default_value = "scenarios")]
    scenarios: Vec<PathBuf>,
    /// Only these scenarios, by name (repeatable).
    #[arg(long = "only")]
    only: Vec<String>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    /// Directory of baseline files.
    #[arg(long, default_value = "baselines")]
    baselines: PathBuf,
    #[command(flatten)]
    out: ReportFiles,
    /// Which verdict fails the command: `fail` (a regression, exit 1) or `warn` (a WARN exits 1
    /// too). The verdict and the results file are the same either way.
    #[arg(long, value_enum, value_name = "VERDICT", env = "PERFGATE_FAIL_ON", default_value_t = FailOn::Fail)]
    fail_on: FailOn,
    /// Report a scenario without a baseline (missing, or stale because the scenario changed)
    /// instead of failing with exit 2: for the first run of a new scenario. An invalid baseline
    /// file is an error either way.
    #[arg(long)]
    allow_missing_baseline: bool,
    /// The default since baselines became required; kept so older workflows still run.
    #[arg(long, hide = true, conflicts_with = "allow_missing_baseline")]
    require_baseline: bool,
    /// Fail (exit 2) a scenario whose `endpoint.model` is not among the models the server lists
    /// at GET <base>/models, instead of noting it (a server that accepts any name would measure
    /// a typo).
    #[arg(long)]
    require_listed_model: bool,
    /// Run only shard I of N (1 <= I <= N), e.g. `--shard 2/4` in a CI matrix: the scenarios
    /// sorted by name, the k-th (from 0) in shard k mod N + 1. Merge the shards' results files
    /// with `perfgate report`.
    #[arg(long, value_name = "I/N")]
    shard: Option<config::shard::Shard>,
    /// Run worker I of N of every scenario's load (a CI matrix, a Kubernetes Indexed Job):
    /// 1/N of its concurrency, samples and rate, the request indices I-1, I-1+N, ...; not
    /// gated: `perfgate report` merges the N workers' results files and gates them
    /// (docs/load-shards.md). The scenarios must load one shared server (http(s), no
    /// `server:`).
    #[arg(long, value_name = "I/N", conflicts_with_all = ["shard", "history"])]
    load_shard: Option<config::shard::Shard>,
    /// With --load-shard: when the workers start their measured requests together, as RFC 3339
    /// (2026-12-04T07:30:00Z), seconds since the epoch (`date +%s`) or +SECONDS from now;
    /// each worker warms up first, then waits for it.
    #[arg(long, value_name = "TIME", requires = "load_shard")]
    start_at: Option<String>,
    /// Check id for the PR comment marker `<!-- perfgate:ID -->` [default: GITHUB_WORKFLOW/GITHUB_JOB
    /// inside GitHub Actions, else perfgate].
    #[arg(long, default_value_t = crate::github::default_id(), hide_default_value = true)]
    id: String,
    #[command(flatten)]
    github: crate::github::GithubArgs,
    #[command(flatten)]
    history: history::HistoryArgs,
    /// Measure nothing: gate another tool's per-request export (AIPerf profile_export.jsonl,
    /// GuideLLM benchmarks JSON/YAML, vllm bench serve --save-detailed JSON) against the
    /// baseline of the one selected scenario, with its statistics and reports (needs --format;
    /// docs/import.md).
    #[arg(long, value_name = "EXPORT", requires = "format", conflicts_with_all = ["shard", "load_shard", "history"])]
    from: Option<PathBuf>,
    /// With --from: the tool that wrote the export.
    #[arg(long, value_enum, requires = "from")]
    format: Option<import::FormatArg>,
}

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

#[derive(Debug, Args)]
struct AbArgs {
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

fn parse_prefill_cpu(s: &str) -> Result<crate::sim::PrefillCpu, String> {
    crate::sim::PrefillCpu::parse(s)
        .ok_or_else(|| format!("{s:?} is not `off`, `any` or a core number"))
}

fn parse_cache_report(s: &str) -> Result<crate::sim::CacheReport, String> {
    crate::sim::CacheReport::parse(s).ok_or_else(|| {
        format!(
            "`{s}`: use one of {}",
            crate::sim::CacheReport::NAMES.join(", ")
        )
    })
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

/// `perfgate bless --from RESULTS.json --arm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ArmArg {
    Base,
    Candidate,
}

#[derive(Debug, Args)]
struct BlessArgs {
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

#[derive(Debug, Args)]
struct SimArgs {
    /// Port on 127.0.0.1 (0 = any free port; the address is printed).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Model id the simulator reports.
    #[arg(long, conflicts_with = "replay", default_value = "perfgate-sim")]
    model: String,
    /// Median time to first token, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 40.0)]
    ttft_ms: f64,
    /// Lognormal log-sd of TTFT (0 = fixed).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.10)]
    ttft_sigma: f64,
    /// Median gap between output tokens, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 8.0)]
    tpot_ms: f64,
    /// Lognormal log-sd of each gap (0 = fixed).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.10)]
    tpot_sigma: f64,
    /// Cap on output tokens per request.
    #[arg(long, conflicts_with = "replay", default_value_t = 4096)]
    max_output: u32,
    /// Seed of the latency draws.
    #[arg(long, conflicts_with = "replay", default_value_t = 42)]
    seed: u64,
    /// Share of requests answered with HTTP 500 (fault injection).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    error_rate: f64,
    /// Tokens per event after the first (bursts, as multi-step scheduling or speculative
    /// decoding send them); each burst is sent when its last token is due.
    #[arg(long, conflicts_with = "replay", default_value_t = 1)]
    burst: u32,
    /// Stall after every Nth token (0 = never): the next gap is --stall-ms longer.
    #[arg(long, conflicts_with = "replay", default_value_t = 0)]
    stall_every: u32,
    /// Extra delay of a stalled gap, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    stall_ms: f64,
    /// Request n generates min(max_tokens, max_output) - (n mod N) tokens (0 = off), so
    /// another tool's per-request records can be matched to the simulator's by output length.
    #[arg(long, conflicts_with = "replay", default_value_t = 0)]
    vary_output: u32,
    /// An exact-repeat cache: a prompt served before gets this TTFT, ms, applied before
    /// --prefix-cache-block (unset = off).
    #[arg(long, conflicts_with = "replay")]
    cached_ttft_ms: Option<f64>,
    /// Batched prefill: prefills arriving within this many ms of a batch's first run as one
    /// batch taking the sum of their TTFTs (unset = independent prefills).
    #[arg(long, conflicts_with = "replay")]
    prefill_window_ms: Option<f64>,
    /// Prefill time per uncached prompt token, ms: TTFT grows with the prompt's length
    /// (default 0).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    ttft_per_token_ms: f64,
    /// A block prefix cache of N words per block (0 = off): a request reuses the leading blocks
    /// of its prompt already served, which --ttft-per-token-ms does not charge.
    #[arg(long, value_name = "N", conflicts_with = "replay", default_value_t = 0)]
    prefix_cache_block: u32,
    /// The cached tokens usage reports: honest, none (no field), all (every prompt token) or
    /// zero (fault injection: a server misreporting its cache).
    #[arg(long, value_name = "MODE", conflicts_with = "replay", default_value = "honest", value_parser = parse_cache_report)]
    cache_report: crate::sim::CacheReport,
    /// The prefill as CPU work: off (a wait), any (the TTFT's worth of CPU time on one compute
    /// thread, so simulators sharing the cores slow each other, as two servers on one machine),
    /// or a core number to pin that thread to (Linux).
    #[arg(long, value_name = "WHERE", conflicts_with = "replay", default_value = "off", value_parser = parse_prefill_cpu)]
    prefill_cpu: crate::sim::PrefillCpu,
    /// Serve a recorded stream (tests/cases format) instead, with its timing.
    #[arg(long)]
    replay: Option<PathBuf>,
}

/// Parses `std::env::args`, runs, and returns the process exit code.
///
/// Runtime sizing: one multi-thread tokio runtime with tokio's default worker count, one per
/// CPU core. Every stream is I/O-bound (a read, an SSE decode, a timestamp), so more workers
/// than cores would only add context switches between the read of a chunk and its timestamp,
/// and fewer would leave a core idle while another queues wakeups. A machine too small for the
/// load still shows: the runner's lag probe reports the event-loop lag of every scenario
/// (`client_lag_ms`) and notes it above [`crate::runner::CLIENT_LAG_WARN_MS`].
pub fn main() -> i32 {
    // perfgate re-runs itself as the supervisor of a started server (src/server/supervisor.rs)
    if let Some(code) = crate::server::supervisor::main_if_requested() {
        return code;
    }
    // PERFGATE_FAIL_ON set to nothing (a workflow passing an empty input) means unset, not
    // "a value is required" (exit 2); single-threaded here, before the runtime starts
    if std::env::var_os("PERFGATE_FAIL_ON").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("PERFGATE_FAIL_ON");
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::INVALID_INPUT
            } else {
                exit::OK
            };
            let _ = e.print();
            return code;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&Error::Runtime(e)),
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

/// Says what ended the command (on stderr) and returns the exit code its kind carries.
fn fail(e: &Error) -> i32 {
    eprintln!("perfgate: {e}");
    e.exit_code()
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn load_scenarios(a: &ScenarioArgs) -> Result<Vec<Scenario>, Error> {
    load_scenarios_as(a, config::arm::Reading::Written)
}

/// The scenarios of `check` and `bless`: as written, refusing a `server:` block of
/// `perfgate ab` arms only (it has no server for them to start).
fn load_measured_scenarios(a: &ScenarioArgs) -> Result<Vec<Scenario>, Error> {
    let scs = load_scenarios(a)?;
    let arms_only: Vec<String> = scs
        .iter()
        .filter(|s| s.written_server == config::arm::WrittenServer::ArmsOnly)
        .map(|s| format!("{} ({})", s.name, s.source))
        .collect();
    if !arms_only.is_empty() {
        return Err(Error::Scenario(
            format!(
                "the server: block of {} has only base: / candidate: arms, which only perfgate ab starts; give it a command: of its own for check and bless",
                arms_only.join(", ")
            )
            .into(),
        ));
    }
    Ok(scs)
}

fn load_scenarios_as(
    a: &ScenarioArgs,
    reading: config::arm::Reading<'_>,
) -> Result<Vec<Scenario>, Error> {
    let files = config::scenario_files(&a.scenarios)?;
    let all = config::load_as(&files, &env_lookup, reading)?;
    if a.only.is_empty() {
        return Ok(all);
    }
    for want in &a.only {
        if !all.iter().any(|s| &s.name == want) {
            let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
            return Err(Error::Usage(format!(
                "--only {want}: no such scenario (have: {})",
                names.join(", ")
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|s| a.only.iter().any(|o| s.name == *o))
        .collect())
}

async fn run(cli: Cli) -> Result<i32, Error> {
    if matches!(
        cli.command,
        Command::Check(_)
            | Command::Bless(_)
            | Command::Ab(_)
            | Command::Report(_)
            | Command::History(_)
    ) {
        crate::cancel::install();
        // A forced exit (second signal, hard stop) still writes the results JSON kept ready,
        // then removes the temporary files of the writes it cut short.
        crate::cancel::on_force_exit("last-resort results", report::last_resort::write);
        crate::cancel::on_force_exit("temporary files", crate::fsutil::remove_pending);
    }
    let code = run_command(cli).await;
    // Every server perfgate started stops here, whatever the command's outcome.
    crate::server::stop_all().await;
    code
}

async fn run_command(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Validate(a) => {
            let scs = load_scenarios(&a)?;
            for s in &scs {
                for w in s.warnings() {
                    eprintln!("perfgate: {}: warning: {w}", s.source);
                }
                println!(
                    "ok  {:<24} {}  {} {} model {}, max_tokens {}, concurrency {}, samples {}",
                    s.name,
                    s.source,
                    s.endpoint.api.as_str(),
                    s.endpoint.shown_url(),
                    s.endpoint.model,
                    s.request.max_tokens,
                    s.load.concurrency,
                    s.load.samples
                );
                if let Some(ps) = &s.request.prompt_set {
                    println!("    {}", ps.describe());
                }
                if let Some(g) = &s.request.generate {
                    println!("    {}", g.describe());
                }
                if let Some(c) = &s.request.conversation {
                    println!(
                        "    conversations of {}; {} conversation(s) measured, cold reference of {} request pair(s)",
                        c.describe(s.request.system.is_some()),
                        s.load.samples / c.turns,
                        c.reference.min(s.load.samples)
                    );
                }
                if let Some(t) = &s.load.trace {
                    println!(
                        "    {}; mean rate {:.2} requests/s",
                        t.describe(),
                        s.load.rate.unwrap_or(0.0)
                    );
                }
            }
            println!("{} scenario(s) valid", scs.len());
            Ok(exit::OK)
        }
        Command::Check(a) => cmd_check(a).await,
        Command::Ab(a) => cmd_ab(a).await,
        Command::Report(a) => cmd_report(a),
        Command::Init(a) => crate::init::init(&a.dir),
        Command::Bless(a) => cmd_bless(a).await,
        Command::Sim(a) => cmd_sim(a).await,
        Command::History(c) => history::cmd_history(c),
        Command::Calibrate(a) => {
            if a.replicates == 0 || a.replicates > 1_000_000 {
                return Err(Error::usage("--replicates must be between 1 and 1000000"));
            }
            if a.nightly {
                print!(
                    "{}",
                    crate::calibrate::nightly::report(a.replicates, a.seed)
                );
            } else {
                print!(
                    "{}",
                    crate::calibrate::report(a.replicates, a.seed, a.only.as_deref())
                );
            }
            Ok(exit::OK)
        }
    }
}

async fn cmd_check(a: CheckArgs) -> Result<i32, Error> {
    let id = crate::results::CheckId::new(a.id.as_str())
        .map_err(|e| Error::Usage(format!("--id {e}")))?;
    crate::hint::set(&a.sc.scenarios, &a.baselines);
    crate::limits::check_baselines_dir(&a.baselines)?;
    let mut scs = load_measured_scenarios(&a.sc)?;
    if let Some(sh) = a.shard {
        let total = scs.len();
        scs = sh.select(scs).map_err(|e| Error::Usage(e.to_string()))?;
        let names: Vec<&str> = scs.iter().map(|s| s.name.as_str()).collect();
        eprintln!(
            "perfgate: shard {}/{}: {} of {total} scenario(s): {}",
            sh.index,
            sh.count,
            scs.len(),
            names.join(", ")
        );
    }
    if let Some(sh) = a.load_shard {
        // the workers start together once: a second scenario would start whenever each worker
        // finished the first, apart
        if scs.len() > 1 {
            let names: Vec<&str> = scs.iter().map(|s| s.name.as_str()).collect();
            return Err(Error::Usage(format!(
                "--load-shard runs one scenario per job (its workers start together once, at --start-at; a second scenario would start whenever each worker finished the first): {} selected ({}); pick one with --only NAME, a job (or a Job) per scenario",
                scs.len(),
                names.join(", ")
            )));
        }
        let now = config::load_shard::now_unix_ms();
        let at = a
            .start_at
            .as_deref()
            .map(|t| config::load_shard::parse_start_at(t, now))
            .transpose()
            .map_err(|e| Error::Usage(format!("--start-at {e}")))?;
        scs = scs
            .into_iter()
            .map(|sc| config::load_shard::split(sc, sh, at))
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Scenario(e.to_string().into()))?;
        eprintln!(
            "perfgate: load shard {}/{}: this worker's part of {} scenario(s){}",
            sh.index,
            sh.count,
            scs.len(),
            match at {
                Some(t) if t > now => format!(
                    ", measuring from {} ({:.1} s from now; give every worker this time, not its own +SECONDS)",
                    config::load_shard::utc(t),
                    (t - now) / 1000.0
                ),
                Some(_) => ", measuring at once (--start-at has passed)".into(),
                None => ", measuring at once: without --start-at the workers start whenever each is ready, and `perfgate report` refuses workers that did not measure together".into(),
            }
        );
    }
    let policy = if a.allow_missing_baseline {
        crate::verdict::BaselinePolicy::AllowMissing
    } else {
        crate::verdict::BaselinePolicy::Required
    };
    // Another tool's export, read before anything else is done with it.
    let imported = match (&a.from, a.format) {
        (Some(from), Some(format)) => Some(import::read(&scs, from, format)?),
        _ => None,
    };
    // Fail before measuring: a missing, broken or stale baseline is known offline.
    let baselines = crate::compare::Baselines::load(&scs, &a.baselines);
    baselines
        .refuse_unusable(&scs, policy)
        .map_err(|e| Error::Baseline(e.into()))?;
    // Read before measuring: an unreadable history is an error before anything is spent.
    let history = match a.history.store()? {
        Some(store) => {
            let h = crate::compare::nightly::HistoryRun::open(store, &scs, &|k| std::env::var(k).ok())
                .map_err(Error::from)?;
            Some(std::sync::Arc::new(h))
        }
        None => None,
    };
    let opts = CheckOptions {
        history: history.clone(),
        policy,
        id,
        unlisted_model: if a.require_listed_model {
            crate::assess::UnlistedModel::Refuse
        } else {
            crate::assess::UnlistedModel::Note
        },
        // A live progress line while measuring, on an interactive terminal only (never in CI
        // logs).
        progress: report::progress::TerminalProgress::stderr(),
    };
    if let Some(p) = &a.out.output {
        let mut none = check::interrupted_results(&scs, &baselines, &opts);
        report::last_resort::keep(p, &mut none);
    }
    let mut results = match imported {
        Some((sc, imp)) => import::check_results(sc, imp, &baselines, &opts),
        None => check::run_check(&scs, &baselines, &opts).await,
    };
    let unsaved = match &history {
        Some(h) => nightly_history(&mut results, &scs, &baselines, h),
        None => None,
    };
    let rep = report::Report::with_loaded(results, |name| {
        (baselines.path_for(name), baselines.get(name))
    });
    let code = deliver(rep, &a.out, &a.github, a.fail_on).await;
    Ok(match unsaved {
        // interrupted while appending: the reports are whole (the run was), the command was not
        Some(Error::Interrupted(_)) => exit::INTERRUPTED,
        Some(e) => crate::verdict::with_write_failure(code, &e),
        None => code,
    })
}

/// `check --history` after the gate: tonight judged against the nights (a `nightly step` check
/// per gated metric), then appended. Returns the error of an append that failed (the verdict
/// stands; the night is in the results file for `perfgate history append`).
fn nightly_history(
    results: &mut crate::results::Results,
    scs: &[Scenario],
    baselines: &crate::compare::Baselines,
    h: &crate::compare::nightly::HistoryRun,
) -> Option<Error> {
    let tonight = crate::compare::nightly::judge_tonight(results, scs, baselines, h);
    if results.incomplete {
        eprintln!("perfgate: history: the run was interrupted, so tonight is not appended");
        return None;
    }
    if tonight.is_empty() {
        eprintln!(
            "perfgate: history: no scenario measured anything, so there is no night to append"
        );
        return None;
    }
    match h.store.append(&tonight) {
        Ok(done) if done.already => {
            eprintln!(
                "perfgate: history: tonight is already on branch {}: nothing appended",
                h.store.branch
            );
            None
        }
        Ok(done) => {
            eprintln!(
                "perfgate: history: appended {} scenario(s) to branch {} (commit {}{})",
                tonight.len(),
                h.store.branch,
                &done.commit[..done.commit.len().min(12)],
                if done.attempts > 1 {
                    format!(
                        ", after {} attempts: other jobs appended at once",
                        done.attempts
                    )
                } else {
                    String::new()
                }
            );
            None
        }
        Err(e) => {
            let e = Error::from(e);
            eprintln!("perfgate: {e}");
            Some(e)
        }
    }
}

/// After measuring (`check`, `ab`): prints the terminal report, writes the report files,
/// publishes to GitHub, says why scenarios could not be measured, and returns the exit code
/// (a WARN's 1 under `--fail-on warn`).
async fn deliver(
    rep: report::Report,
    out: &ReportFiles,
    github: &crate::github::GithubArgs,
    fail_on: FailOn,
) -> i32 {
    let mut rep = rep;
    if let Some(p) = &out.output {
        report::last_resort::keep(p, &mut rep.results);
    }
    let written = report::print_and_write(&rep, &out.outputs());
    report::last_resort::done();
    let results = rep.results;
    // PR comment, step summary, annotations, outputs, tracking issue: warns, never changes the exit code.
    // The step outputs name only the report files written now.
    let reports = crate::github::Reports {
        json: written.written_path(out.output.as_deref()),
        markdown: written.written_path(out.markdown.as_deref()),
    };
    crate::github::publish(&results, github, reports).await;
    written.print_failures();
    // On stderr too (stdout may go to a file): each reason once, through the report's sanitiser.
    for s in &results.scenarios {
        let why = report::safe_text::field(&s.status_detail);
        match s.status {
            crate::results::Status::Unmeasurable => {
                eprintln!("perfgate: could not measure {}: {why}", s.name)
            }
            crate::results::Status::Misconfigured => eprintln!(
                "perfgate: scenario {} is misconfigured (wrong base_url, model or key?): {why}",
                s.name
            ),
            _ => {}
        }
    }
    let code = written.exit_code(results.exit_code);
    let with_policy = fail_on.exit_code(results.verdict, code);
    if with_policy != code {
        eprintln!("perfgate: --fail-on warn, and the verdict is WARN: exit {with_policy}");
    }
    with_policy
}

/// `perfgate ab`: reads every scenario three ways (as written, base arm, candidate arm),
/// refuses what an A/B run does not support before measuring, measures, reports.
async fn cmd_ab(a: AbArgs) -> Result<i32, Error> {
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

/// `perfgate report`: loads (and merges) saved results, prints the terminal report, writes the
/// requested files, and exits with the code the results carry.
fn cmd_report(a: ReportArgs) -> Result<i32, Error> {
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

async fn cmd_bless(a: BlessArgs) -> Result<i32, Error> {
    crate::hint::set(&a.sc.scenarios, &a.baselines);
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

async fn cmd_sim(a: SimArgs) -> Result<i32, Error> {
    let server = if let Some(p) = &a.replay {
        let case = ReplayCase::load(p).map_err(|e| Error::Sim {
            context: "",
            source: e.into(),
        })?;
        SimServer::start_replay(case, a.port).await
    } else {
        let cfg = SimConfig {
            seed: a.seed,
            model: a.model.clone(),
            ttft_ms: a.ttft_ms,
            ttft_sigma: a.ttft_sigma,
            tpot_ms: a.tpot_ms,
            tpot_sigma: a.tpot_sigma,
            max_output: a.max_output,
            error_rate: a.error_rate,
            burst: a.burst,
            stall_every: a.stall_every,
            stall_ms: a.stall_ms,
            vary_output: a.vary_output,
            cached_ttft_ms: a.cached_ttft_ms,
            prefill_window_ms: a.prefill_window_ms,
            ttft_per_token_ms: a.ttft_per_token_ms,
            prefix_cache_block: a.prefix_cache_block,
            cache_report: a.cache_report,
            prefill_cpu: a.prefill_cpu,
        };
        cfg.validate().map_err(|e| Error::Sim {
            context: "sim: ",
            source: Box::new(e),
        })?;
        SimServer::start(cfg, a.port).await
    }
    .map_err(|source| Error::Listen {
        port: a.port,
        source,
    })?;
    println!("perfgate sim listening on {}", server.base_url());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown();
    Ok(exit::OK)
}
