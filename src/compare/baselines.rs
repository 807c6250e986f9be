//! Each scenario's baseline file, loaded once per check and passed down, and why one cannot be
//! used (missing, broken, or stale for its configuration).

use crate::assess::staleness;
use crate::baseline::{self, Baseline, LoadError};
use crate::config::{Scenario, ScenarioName};
use crate::hint::Hint;
use crate::results::Status;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The baseline file of every scenario of a check, read once before measuring; the check, its
/// confirmation re-runs and its reports all use these copies.
#[derive(Debug, Clone)]
pub struct Baselines {
    dir: PathBuf,
    loaded: BTreeMap<ScenarioName, Result<Baseline, LoadError>>,
    /// The `perfgate bless` the messages suggest.
    hint: Hint,
}

impl Baselines {
    /// Reads `dir/<name>.json` for each scenario; `hint` is the `perfgate bless` its messages
    /// suggest.
    pub fn load(scenarios: &[Scenario], dir: &Path, hint: Hint) -> Self {
        let loaded = scenarios
            .iter()
            .map(|sc| {
                let got = baseline::load(&baseline::path_for(dir, &sc.name), &hint);
                (sc.name.clone(), got)
            })
            .collect();
        Baselines {
            dir: dir.to_path_buf(),
            loaded,
            hint,
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
            .filter(|b| staleness(sc, b, &self.hint).is_none())
    }

    /// The scenarios whose baseline is known, before measuring, to be unusable: (name, status,
    /// why) for a missing file, a broken file, or a scenario that changed since it was blessed.
    pub fn unusable(&self, scenarios: &[Scenario]) -> Vec<(ScenarioName, Status, String)> {
        scenarios
            .iter()
            .filter_map(|sc| {
                self.why_unusable(sc, Missing::Fails)
                    .map(|(status, why)| (sc.name.clone(), status, why))
            })
            .collect()
    }

    /// Refuses a check, before anything is measured, whose scenarios include one that could
    /// not be compared: a broken baseline always; a missing or stale one when `policy` requires
    /// a baseline and the scenario has no `gate.slo` objectives (those gate it on day one).
    pub fn refuse_unusable(
        &self,
        scenarios: &[Scenario],
        policy: crate::verdict::BaselinePolicy,
    ) -> Result<(), NoUsableBaseline> {
        let unusable: Vec<(ScenarioName, String)> = self
            .unusable(scenarios)
            .into_iter()
            .filter(|(name, st, _)| {
                *st == Status::InvalidBaseline
                    || (policy.is_required()
                        && !scenarios
                            .iter()
                            .any(|s| &s.name == name && s.gate.has_objectives()))
            })
            .map(|(name, _, why)| (name, why))
            .collect();
        if unusable.is_empty() {
            Ok(())
        } else {
            Err(NoUsableBaseline {
                unusable,
                total: scenarios.len(),
            })
        }
    }
}

/// A check refused before measuring: scenarios whose baseline is missing (when required),
/// broken, or stale, so the check would compare nothing for them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "no usable baseline for {} of {total} scenario(s), so this check would compare nothing for them (nothing was measured):\n{}",
    unusable.len(),
    unusable.iter().map(|(name, why)| format!("  - scenario {name}: {why}")).collect::<Vec<_>>().join("\n")
)]
pub struct NoUsableBaseline {
    /// (scenario, why) for each refused scenario.
    pub unusable: Vec<(ScenarioName, String)>,
    /// Scenarios in the check.
    pub total: usize,
}

/// The message for a scenario without a baseline file: which scenario, what to run, and (when
/// `missing` is the default) the opt-out; under `--allow-missing-baseline` or with `gate.slo`
/// objectives it says why it did not fail instead of suggesting what was done.
pub fn missing_message(name: &str, path: &Path, missing: Missing, hint: &Hint) -> String {
    let bless = format!(
        "run `{}` against the unchanged server and commit {}",
        hint.bless_only(name),
        path.display()
    );
    match missing {
        Missing::Fails => format!(
            "no baseline at {}: {bless}, or pass --allow-missing-baseline for the first run of a new scenario (reported, not gated)",
            path.display()
        ),
        Missing::Allowed => format!(
            "no baseline at {} (reported, not gated: --allow-missing-baseline); to gate it, {bless}",
            path.display()
        ),
        Missing::SloOnly => format!(
            "no baseline at {} (gated by its objectives alone: gate.slo, gate.cache); to gate regressions too, {bless}",
            path.display()
        ),
    }
}

/// What a missing baseline does to a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// It fails the check (exit 2): the default.
    Fails,
    /// `--allow-missing-baseline`: reported, not gated.
    Allowed,
    /// The scenario has `gate.slo` objectives (or `gate.cache.hit_rate`): they alone gate it.
    SloOnly,
}

impl Missing {
    /// For `sc` under `policy`.
    pub fn of(sc: &Scenario, policy: crate::verdict::BaselinePolicy) -> Missing {
        if sc.gate.has_objectives() {
            Missing::SloOnly
        } else if policy.is_required() {
            Missing::Fails
        } else {
            Missing::Allowed
        }
    }
}

impl Baselines {
    /// Why `sc` cannot be compared against its loaded baseline, the one place this is decided
    /// (before measuring and after): missing, broken, or stale for its configuration.
    pub(super) fn why_unusable(&self, sc: &Scenario, missing: Missing) -> Option<(Status, String)> {
        match self.get(&sc.name) {
            Err(LoadError::Missing(p)) => Some((
                Status::NoBaseline,
                missing_message(&sc.name, &p, missing, &self.hint),
            )),
            Err(e) => Some((Status::InvalidBaseline, e.to_string())),
            Ok(b) => staleness(sc, b, &self.hint).map(|why| (Status::Stale, why)),
        }
    }
}
