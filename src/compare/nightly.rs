//! `check --history`: the nightly history read before measuring, with tonight's time, commit and
//! runner fixed; each scenario's nights are a part of its reference ([`HistoryRun::nights`]:
//! their spread widens the committed baseline's tolerances, tonight's run is judged against
//! them in [`crate::assess::judge()`]); the night appended after (docs/history.md).

use crate::assess::nightly::Nights;
use crate::config::Scenario;
use crate::history::{Entry, HistoryError, Loaded, Night, Runner, Store};
use crate::stats::changepoint::StepRule;

/// The history a check reads and appends to.
#[derive(Debug, Clone)]
pub struct HistoryRun {
    pub store: Store,
    /// The nights as read before measuring.
    pub loaded: Loaded,
    /// Tonight: when, which commit, where.
    pub night: Night,
    pub rule: StepRule,
}

impl HistoryRun {
    /// Reads the history of `scenarios` (fetching the branch); an unreadable history is an error
    /// before anything is measured.
    pub fn open(
        store: Store,
        scenarios: &[Scenario],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HistoryRun, HistoryError> {
        let names: Vec<_> = scenarios.iter().map(|s| s.name.clone()).collect();
        let loaded = store.read(&names)?;
        let night = Night {
            time: crate::clock::now_rfc3339(),
            commit: commit_under_test(&store, env),
            run_url: run_url(env),
            runner: Runner::here(env),
            baseline_created_at: None,
        };
        Ok(HistoryRun {
            store,
            loaded,
            night,
            rule: StepRule::default(),
        })
    }

    /// The nights of `sc` read from the branch (none yet: empty).
    pub fn past(&self, sc: &Scenario) -> &[Entry] {
        self.loaded
            .series
            .get(&sc.name)
            .map_or(&[][..], Vec::as_slice)
    }

    /// The nights `sc`'s run is judged against, tonight among them.
    pub fn nights(&self, sc: &Scenario) -> Nights<'_> {
        Nights {
            branch: &self.store.branch,
            past: self.past(sc),
            night: &self.night,
            rule: &self.rule,
        }
    }
}

/// The commit under test: `GITHUB_SHA`, else the checkout's HEAD.
pub fn commit_under_test(store: &Store, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let hex = |s: &str| s.len() >= 7 && s.len() <= 64 && s.chars().all(|c| c.is_ascii_hexdigit());
    env("GITHUB_SHA").filter(|s| hex(s)).or_else(|| {
        crate::history::git::run(
            &store.repo,
            &["rev-parse", "HEAD"],
            None,
            &[],
            std::time::Duration::from_secs(30),
        )
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|s| hex(s))
    })
}

/// The workflow run's URL inside GitHub Actions.
fn run_url(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let server = env("GITHUB_SERVER_URL")?;
    let repo = env("GITHUB_REPOSITORY")?;
    let id = env("GITHUB_RUN_ID")?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':'))
    };
    (ok(&server) && ok(&repo) && id.chars().all(|c| c.is_ascii_digit()))
        .then(|| format!("{server}/{repo}/actions/runs/{id}"))
}
