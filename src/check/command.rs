//! `perfgate check`: its flags, and the command from reading the scenarios to the exit code
//! (`--shard`, `--load-shard`, `--from`, `--history` included).

use crate::check;
use crate::compare::{Baselines, CheckOptions};
use crate::config::args::{load_measured_scenarios, ScenarioArgs};
use crate::config::{self, Scenario};
use crate::deliver::{deliver, ReportFiles};
use crate::exit::{self, Error};
use crate::history::HistoryArgs;
use crate::import::Imported;
use crate::report;
use crate::results::Results;
use crate::verdict::FailOn;
use clap::Args;
use std::path::PathBuf;

/// `perfgate check`'s flags.
#[derive(Debug, Args)]
pub struct CheckArgs {
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
    history: HistoryArgs,
    /// Measure nothing: gate another tool's per-request export (AIPerf profile_export.jsonl,
    /// GuideLLM benchmarks JSON/YAML, vllm bench serve --save-detailed JSON) against the
    /// baseline of the one selected scenario, with its statistics and reports (needs --format;
    /// docs/import.md).
    #[arg(long, value_name = "EXPORT", requires = "format", conflicts_with_all = ["shard", "load_shard", "history"])]
    from: Option<PathBuf>,
    /// With --from: the tool that wrote the export.
    #[arg(long, value_enum, requires = "from")]
    format: Option<crate::import::args::FormatArg>,
}

/// Runs `perfgate check`: reads the scenarios, the baselines and the history before measuring,
/// measures (or reads `--from`), judges, appends the night, reports, returns the exit code.
pub async fn cmd_check(a: CheckArgs) -> Result<i32, Error> {
    let id = crate::results::CheckId::new(a.id.as_str())
        .map_err(|e| Error::Usage(format!("--id {e}")))?;
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
        (Some(from), Some(format)) => Some(crate::import::args::read(&scs, from, format)?),
        _ => None,
    };
    // Fail before measuring: a missing, broken or stale baseline is known offline.
    let hint = crate::hint::Hint::new(&a.sc.scenarios, &a.baselines);
    let baselines = Baselines::load(&scs, &a.baselines, hint);
    baselines
        .refuse_unusable(&scs, policy)
        .map_err(|e| Error::Baseline(e.into()))?;
    // Read before measuring: an unreadable history is an error before anything is spent.
    let history = match a.history.store()? {
        Some(store) => {
            let h =
                crate::compare::nightly::HistoryRun::open(store, &scs, &|k| std::env::var(k).ok())
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
    let results = match imported {
        Some((sc, imp)) => check_results(sc, imp, &baselines, &opts),
        None => check::run_check(&scs, &baselines, &opts).await,
    };
    let unsaved = match &history {
        Some(h) => nightly_history(&results, h),
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

/// `check --history` once judged: tonight's night of every scenario judged against its nights,
/// appended. Returns the error of an append that failed (the verdict stands; the night is in
/// the results file for `perfgate history append`).
fn nightly_history(
    results: &crate::results::Results,
    h: &crate::compare::nightly::HistoryRun,
) -> Option<Error> {
    let judged = results.scenarios.iter().filter(|s| s.nightly.is_some());
    let tonight = crate::history::entries_of(judged, &h.night);
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

/// The results of gating the imported run against `sc`'s baseline, with the import's notes
/// (what was imported, what the tool measured otherwise) on the scenario.
fn check_results(
    sc: &Scenario,
    imported: Imported,
    baselines: &Baselines,
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
        s.notes.extend(
            notes
                .iter()
                .map(|n| crate::results::Note::new(crate::results::NoteKind::Imported, n.as_str())),
        );
    }
    results.decide();
    results
}
