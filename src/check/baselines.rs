//! Each scenario's baseline file, loaded once per check and passed down, and why one cannot be
//! used (missing, broken, or stale for its configuration).

use super::drift::staleness;
use crate::baseline::{self, Baseline, LoadError};
use crate::config::Scenario;
use crate::results::Status;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The baseline file of every scenario of a check, read once before measuring; the check, its
/// confirmation re-runs and its reports all use these copies.
#[derive(Debug, Clone)]
pub struct Baselines {
    dir: PathBuf,
    loaded: BTreeMap<String, Result<Baseline, LoadError>>,
}

impl Baselines {
    /// Reads `dir/<name>.json` for each scenario.
    pub fn load(scenarios: &[Scenario], dir: &Path) -> Self {
        let loaded = scenarios
            .iter()
            .map(|sc| {
                let got = baseline::load(&baseline::path_for(dir, &sc.name));
                (sc.name.clone(), got)
            })
            .collect();
        Baselines {
            dir: dir.to_path_buf(),
            loaded,
        }
    }

    /// Where the baseline of scenario `name` lives.
    pub fn path_for(&self, name: &str) -> PathBuf {
        baseline::path_for(&self.dir, name)
    }

    /// The baseline of scenario `name`, as read by [`Baselines::load`]. A scenario that was not
    /// among those loaded has no file as far as this check knows: `Missing`.
    pub fn get(&self, name: &str) -> Result<&Baseline, LoadError> {
        match self.loaded.get(name) {
            Some(Ok(b)) => Ok(b),
            Some(Err(e)) => Err(e.clone()),
            None => Err(LoadError::Missing(self.path_for(name))),
        }
    }

    /// The baseline of `sc` when it can be compared with it (present, valid, not stale).
    pub fn usable(&self, sc: &Scenario) -> Option<&Baseline> {
        self.get(&sc.name)
            .ok()
            .filter(|b| staleness(sc, b).is_none())
    }

    /// The scenarios whose baseline is known, before measuring, to be unusable: (name, status,
    /// why) for a missing file, a broken file, or a scenario that changed since it was blessed.
    pub fn unusable(&self, scenarios: &[Scenario]) -> Vec<(String, Status, String)> {
        scenarios
            .iter()
            .filter_map(|sc| {
                unusable(sc, self.get(&sc.name)).map(|(status, why)| (sc.name.clone(), status, why))
            })
            .collect()
    }
}

/// The message for a scenario without a baseline file: which scenario, and what to run.
pub fn missing_message(name: &str, path: &Path) -> String {
    format!(
        "no baseline at {}: run `perfgate bless --only {name}` against the unchanged server and commit {}, or pass --allow-missing-baseline for the first run of a new scenario (reported, not gated)",
        path.display(),
        path.display()
    )
}

/// Why a scenario cannot be compared against its loaded baseline, the one place this is
/// decided (before measuring and after): missing, broken, or stale for its configuration.
pub(super) fn unusable(
    sc: &Scenario,
    loaded: Result<&Baseline, LoadError>,
) -> Option<(Status, String)> {
    match loaded {
        Err(LoadError::Missing(p)) => Some((Status::NoBaseline, missing_message(&sc.name, &p))),
        Err(LoadError::Invalid(m)) => Some((Status::InvalidBaseline, m)),
        Ok(b) => staleness(sc, b).map(|why| (Status::Stale, why)),
    }
}
