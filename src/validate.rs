//! `perfgate validate`: checks scenario files offline (keys, values, env vars) and says what each
//! one will send; with a committed baseline, what its P50 checks catch at its `load.samples` and
//! the n for a smaller change ([`crate::assess::sample_sizes`], the lines `bless` prints).

use crate::baseline::{self, LoadError};
use crate::config::args::{load_scenarios, ScenarioArgs};
use crate::config::Scenario;
use crate::exit::{self, Error};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    /// Directory of baseline files: a scenario's committed baseline adds what its P50 checks
    /// catch at its n (nothing is measured).
    #[arg(long, default_value = "baselines")]
    baselines: PathBuf,
}

pub fn cmd_validate(a: &ValidateArgs) -> Result<i32, Error> {
    let scs = load_scenarios(&a.sc)?;
    let hint = crate::hint::Hint::new(&a.sc.scenarios, &a.baselines);
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
        if let Some(srv) = &s.server {
            println!("    server: {}", srv.shown_command);
            if let Some(program) = srv.command.first().filter(|p| !on_path(p)) {
                eprintln!(
                    "perfgate: {}: warning: the server program `{program}` is not on PATH here (`check` and `bless` would exit 3 on this machine); give its full path in server.command[0] or install it",
                    s.source
                );
            }
            for d in &srv.defaults {
                println!("    server.command: {d} (set {} to change it)", d.var);
            }
        }
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
                c.whole(s.load.samples as usize).0,
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
        sample_sizes(s, &a.baselines, &hint);
    }
    println!("{} scenario(s) valid", scs.len());
    Ok(exit::OK)
}

/// What `s`'s committed baseline says its P50 checks catch (stdout), or why it says nothing
/// (stderr: a broken or stale baseline, which `check` would refuse); nothing without one.
fn sample_sizes(s: &Scenario, dir: &Path, hint: &crate::hint::Hint) {
    let path = baseline::path_for(dir, &s.name);
    match baseline::load(&path, hint) {
        Err(LoadError::Missing(_)) => {}
        Err(e) => eprintln!(
            "perfgate: {}: warning: {e}; `perfgate check` would refuse it (exit 2)",
            s.name
        ),
        Ok(b) => match crate::assess::staleness(s, &b, hint) {
            Some(why) => eprintln!(
                "perfgate: {}: warning: {} is stale: {why}",
                s.name,
                path.display()
            ),
            None => {
                for line in crate::assess::sample_sizes(s, &b) {
                    println!("    {line} (from {})", path.display());
                }
            }
        },
    }
}

/// Whether `program` runs as given: a path that is a file, or a name found in a `PATH` entry.
fn on_path(program: &str) -> bool {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return p.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}
