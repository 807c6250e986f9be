//! The scenario flags every command that reads scenario files shares (`-s/--scenarios`,
//! `--only`), and the scenarios they select.

use crate::config::{self, Scenario};
use crate::exit::Error;
use clap::Args;
use std::path::PathBuf;

/// `-s/--scenarios` and `--only`.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// Scenario file or directory of *.yaml files (repeatable).
    #[arg(long = "scenarios", short = 's', default_value = "scenarios")]
    pub scenarios: Vec<PathBuf>,
    /// Only these scenarios, by name (repeatable).
    #[arg(long = "only")]
    pub only: Vec<String>,
}

/// The process environment, as scenario files' `${VAR}` read it.
pub fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The selected scenarios as written.
pub fn load_scenarios(a: &ScenarioArgs) -> Result<Vec<Scenario>, Error> {
    load_scenarios_as(a, config::arm::Reading::Written)
}

/// The scenarios of `check` and `bless`: as written, refusing a `server:` block of
/// `perfgate ab` arms only (it has no server for them to start).
pub fn load_measured_scenarios(a: &ScenarioArgs) -> Result<Vec<Scenario>, Error> {
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

/// The selected scenarios read as `reading` says (as written, serverless, one A/B arm);
/// an `--only` name that no scenario has is a usage error.
pub fn load_scenarios_as(
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
