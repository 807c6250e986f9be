//! `perfgate history`: show a scenario's nights and change points; append a saved results
//! file's night after a failed push (the store is [`crate::history`], its flags
//! [`HistoryArgs`], shared with `check --history`).

use crate::assess::nightly::judge_nights;
use crate::compare::nightly::HistoryRun;
use crate::config::args::{load_scenarios_as, ScenarioArgs};
use crate::exit::{self, Error};
use crate::history::{self, HistoryArgs, Store};
use crate::summary::SummaryKey;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `perfgate history ...`.
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Print each scenario's nights (the nightly medians) and the change points found in them.
    Show(ShowArgs),
    /// Append the night of a saved results file (`check --output`) to the history: for a night
    /// whose push failed.
    Append(AppendArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    #[command(flatten)]
    history: HistoryArgs,
    /// Nights shown per scenario (the newest).
    #[arg(long, default_value_t = 20)]
    last: usize,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    #[command(flatten)]
    history: HistoryArgs,
    /// The results file of the night (`perfgate check --output`).
    #[arg(long, value_name = "RESULTS.json")]
    results: PathBuf,
}

/// Runs `perfgate history ...`.
pub fn cmd_history(c: HistoryCommand) -> Result<i32, Error> {
    match c {
        HistoryCommand::Show(a) => show(a),
        HistoryCommand::Append(a) => append(a),
    }
}

/// The store of a `history` subcommand: `--history` defaults to `perfgate-history` here.
fn store_of(a: &HistoryArgs) -> Result<Store, Error> {
    let mut a = a.clone();
    a.history
        .get_or_insert_with(|| history::DEFAULT_BRANCH.into());
    a.store()?
        .ok_or_else(|| Error::usage("--history BRANCH is needed"))
}

fn show(a: ShowArgs) -> Result<i32, Error> {
    // Read as the nights were recorded, without a `server:` block: reading the series needs no
    // server, nor the environment its command names (`${LLAMA_SERVER}` unset on a laptop).
    let scs = load_scenarios_as(&a.sc, crate::config::arm::Reading::Serverless)?;
    let store = store_of(&a.history)?;
    let h = HistoryRun::open(store, &scs, &|k| std::env::var(k).ok()).map_err(Error::from)?;
    for sc in &scs {
        let past = h.past(sc);
        let Some((tonight, before)) = past.split_last() else {
            println!("{}: no nights on branch {}", sc.name, h.store.branch);
            continue;
        };
        // the file's strings (commits, times, the server's names in the notes) are printed
        // made safe: a hand-edited history must not drive the terminal
        let safe = crate::report::safe_text::field;
        let judged = judge_nights(sc, before, tonight, &h.rule);
        let (nights, dropped) = crate::assess::nightly::comparable(past, &tonight.fingerprint);
        println!(
            "{}: {} night(s) of this configuration on branch {}{}",
            sc.name,
            nights.len(),
            h.store.branch,
            if dropped > 0 {
                format!(" ({dropped} older of another configuration)")
            } else {
                String::new()
            }
        );
        let keys: Vec<SummaryKey> = sc.gate.metrics.iter().map(|&m| m.into()).collect();
        let from = nights.len().saturating_sub(a.last.max(1));
        print!("  {:>5}  {:<10}  {:<10}", "night", "date", "commit");
        for k in &keys {
            print!("  {:>10}", format!("{} P50", k.name().to_uppercase()));
        }
        println!();
        for (i, e) in nights.iter().enumerate().skip(from) {
            print!(
                "  {:>5}  {:<10}  {:<10}",
                i + 1,
                safe(&e.time).chars().take(10).collect::<String>(),
                e.commit
                    .as_deref()
                    .map_or("-".to_string(), |c| safe(c).chars().take(10).collect())
            );
            for k in &keys {
                let v = e
                    .metrics
                    .get(k)
                    .map_or("-".into(), |p| crate::units::fmt_ms(p.p50));
                let mark = judged
                    .steps
                    .get(k)
                    .and_then(|ss| ss.iter().find(|s| s.first == i))
                    .map_or(" ", |s| match s.direction {
                        crate::stats::changepoint::Direction::Up => "^",
                        crate::stats::changepoint::Direction::Down => "v",
                    });
                print!("  {v:>9}{mark}");
            }
            println!();
        }
        for c in &judged.checks {
            println!(
                "  {} {}: {} {}",
                c.metric.map_or("-", |m| m.label()),
                c.kind.label(),
                c.verdict.as_str(),
                safe(&c.reason)
            );
        }
        for n in &judged.notes {
            println!("  note: {}", safe(n));
        }
    }
    Ok(exit::OK)
}

fn append(a: AppendArgs) -> Result<i32, Error> {
    let store = store_of(&a.history)?;
    let results = crate::report::json::load(&a.results)?;
    // What is not a night is refused as `bless --from` refuses it: an interrupted run, a
    // load-shard worker's part of the load.
    let shown = a.results.display();
    let mut not_runs: Vec<String> = results
        .whole_run()
        .err()
        .map(|why| why.to_string())
        .into_iter()
        .collect();
    not_runs.extend(results.scenarios.iter().filter_map(|s| {
        s.whole_run()
            .err()
            .map(|why| format!("scenario {}: {shown} {why}", s.name))
    }));
    if !not_runs.is_empty() {
        return Err(Error::usage(format!(
            "{shown}: nothing appended: {}",
            not_runs.join("; ")
        )));
    }
    let env = |k: &str| std::env::var(k).ok();
    let night = history::Night {
        time: results.created_at.clone(),
        commit: crate::compare::nightly::commit_under_test(&store, &env),
        run_url: None,
        runner: history::Runner::here(&env),
        baseline_created_at: None,
    };
    let entries = history::entries_of(&results.scenarios, &night);
    if entries.is_empty() {
        return Err(Error::usage(format!(
            "{}: no scenario measured a successful request: nothing to append",
            a.results.display()
        )));
    }
    // a night the reader would refuse (a hand-edited `created_at`) would break the history
    for e in &entries {
        if let Err(problem) = history::entry::check(e) {
            return Err(Error::usage(format!(
                "{}: the night of scenario `{}`: {problem}: nothing appended",
                a.results.display(),
                e.scenario
            )));
        }
    }
    let done = store.append(&entries).map_err(Error::from)?;
    if done.already {
        eprintln!(
            "perfgate: history: the night of {} is already on branch {}: nothing appended",
            a.results.display(),
            store.branch
        );
        return Ok(exit::OK);
    }
    eprintln!(
        "perfgate: history: appended {} scenario(s) to branch {} (commit {}, {} attempt(s))",
        entries.len(),
        store.branch,
        &done.commit[..done.commit.len().min(12)],
        done.attempts
    );
    Ok(exit::OK)
}
