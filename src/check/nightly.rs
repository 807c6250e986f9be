//! `check --history`: the nightly history read before measuring (its spread widens the committed
//! baselines' tolerances), tonight's runs judged for change points after the gate, and the night
//! appended (docs/history.md).

use super::baselines::Baselines;
use crate::assess::nightly::{judge_nights, learned_spread, Learned};
use crate::config::{Metric, Scenario};
use crate::history::{entry_of, Entry, HistoryError, Loaded, Night, Runner, Store};
use crate::results::{NightPoint, NightlySeries, Results, Status, StepMark, NIGHTS_SHOWN};
use crate::stats::changepoint::StepRule;
use crate::summary::SummaryKey;
use std::collections::BTreeMap;

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

    /// The night-to-night spread of `sc`'s gated metrics, where the history has enough nights.
    pub fn learned(&self, sc: &Scenario) -> BTreeMap<Metric, Learned> {
        learned_spread(sc, self.past(sc), &self.rule)
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

/// Judges every measured scenario's nights with tonight's run as the last one: a `nightly step`
/// check per gated metric and the notes; returns tonight's entries to append (scenarios that
/// measured nothing have none). The verdict is decided again.
pub fn judge_tonight(
    results: &mut Results,
    scenarios: &[Scenario],
    baselines: &Baselines,
    h: &HistoryRun,
) -> Vec<Entry> {
    let mut tonight = Vec::new();
    for res in results.scenarios.iter_mut() {
        let Some(sc) = scenarios.iter().find(|s| s.name == res.name) else {
            continue;
        };
        if matches!(res.status, Status::Misconfigured) {
            continue;
        }
        let mut night = h.night.clone();
        // The night is the results file's time, so `history append --results` of this very
        // file names the same night and appends nothing (it stamped the end, this the start).
        if !results.created_at.is_empty() {
            night.time = results.created_at.clone();
        }
        night.baseline_created_at = baselines.get(&sc.name).ok().map(|b| b.created_at.clone());
        let Some(entry) = entry_of(res, &night) else {
            res.notes
                .push("nightly history: nothing measured tonight, so no night is appended".into());
            continue;
        };
        let judged = judge_nights(sc, h.past(sc), &entry, &h.rule);
        crate::assess::nightly::series_decides(&mut res.checks, &judged);
        res.nightly = Some(series_of(sc, h, &entry, &judged.steps));
        res.checks.extend(judged.checks);
        res.notes.extend(judged.notes);
        tonight.push(entry);
    }
    results.decide();
    tonight
}

/// The newest nights of `sc`'s series (tonight last) and its change points, for the reports.
fn series_of(
    sc: &Scenario,
    h: &HistoryRun,
    tonight: &Entry,
    steps: &BTreeMap<SummaryKey, Vec<crate::stats::changepoint::Step>>,
) -> NightlySeries {
    let (kept, _) = crate::assess::nightly::comparable(h.past(sc), &tonight.fingerprint);
    let all: Vec<&Entry> = kept.iter().chain(std::iter::once(tonight)).collect();
    let from = all.len().saturating_sub(NIGHTS_SHOWN);
    let nights = all[from..]
        .iter()
        .map(|e| NightPoint {
            time: e.time.clone(),
            commit: e.commit.clone(),
            p50_ms: sc
                .gate
                .metrics
                .iter()
                .filter_map(|&m| Some((m, e.metrics.get(&SummaryKey::from(m))?.p50)))
                .collect(),
        })
        .collect();
    let marks = steps
        .iter()
        .filter_map(|(k, ss)| Some((k.metric()?, ss)))
        .flat_map(|(m, ss)| {
            ss.iter()
                .filter(|s| s.first >= from)
                .map(move |s| StepMark {
                    metric: m,
                    night: s.first - from,
                    up: s.direction == crate::stats::changepoint::Direction::Up,
                })
        })
        .collect();
    NightlySeries {
        branch: h.store.branch.clone(),
        total: all.len(),
        nights,
        steps: marks,
    }
}
