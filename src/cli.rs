//! Command-line interface (clap): parses arguments and dispatches to the command's module,
//! which runs it and returns the exit code. Messages go to stderr; reports to stdout.

use crate::exit::{self, Error};
use clap::{Parser, Subcommand};

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
    Check(crate::check::CheckArgs),
    /// Measure every scenario and rewrite its baseline (atomically), or write one arm of an A/B
    /// run's results as the baseline (--from).
    Bless(crate::bless::BlessArgs),
    /// Measure two arms (base and candidate) of every scenario in the same job, interleaved,
    /// compare them like check, report, exit 1 on a regression.
    Ab(crate::ab::AbArgs),
    /// Check scenario files offline: keys, values, env vars; with a committed baseline, what
    /// its P50 checks catch at the scenario's samples.
    Validate(crate::validate::ValidateArgs),
    /// Run the built-in OpenAI-compatible streaming simulator on 127.0.0.1.
    Sim(crate::sim::SimArgs),
    /// Simulate the gate on documented noise profiles: false-alarm rate and power, beside two
    /// common comparator rules.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Re-render saved results (`check --output`) in any format, without measuring; exits with
    /// the code the results carry.
    Report(crate::rerender::ReportArgs),
    /// Scaffold scenarios/example.yaml (or a server's template, --server), baselines/, a
    /// pull-request workflow and a .gitignore (never overwrites).
    Init(crate::init::InitArgs),
    /// The nightly history (`check --history`): show a scenario's nights and change points, or
    /// append a saved night.
    #[command(subcommand)]
    History(crate::nights::HistoryCommand),
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
        crate::cancel::on_force_exit("last-resort results", crate::report::last_resort::write);
        crate::cancel::on_force_exit("temporary files", crate::fsutil::remove_pending);
    }
    let code = run_command(cli).await;
    // Every server perfgate started stops here, whatever the command's outcome.
    crate::server::stop_all().await;
    code
}

async fn run_command(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Validate(a) => crate::validate::cmd_validate(&a),
        Command::Check(a) => crate::check::cmd_check(a).await,
        Command::Ab(a) => crate::ab::cmd_ab(a).await,
        Command::Report(a) => crate::rerender::cmd_report(a),
        Command::Init(a) => crate::init::init(&a.dir, a.server),
        Command::Bless(a) => crate::bless::cmd_bless(a).await,
        Command::Sim(a) => crate::sim::cmd_sim(a).await,
        Command::History(c) => crate::nights::cmd_history(c),
        Command::Calibrate(a) => crate::calibrate::cmd_calibrate(a),
    }
}
