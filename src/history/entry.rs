//! One night of one scenario in the history: the compact, reviewable line a scheduled run
//! appends (docs/history.md "The file"), built from the scenario's result, and the file of such
//! lines read back with every line checked.

use crate::config::ScenarioName;
use crate::results::ScenarioResult;
use crate::summary::SummaryKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the entry layout. An entry of a newer version is refused (upgrade perfgate);
/// older versions are read (there are none yet: version 1 is the first).
pub const HISTORY_VERSION: u32 = 1;

/// Quantile levels of [`Point::q`], in percent: enough of the per-request distribution for
/// later tests (a P90/P99 series, a Q-Q look) without the records.
pub const DIGEST_LEVELS: [u8; 10] = [0, 5, 10, 25, 50, 75, 90, 95, 99, 100];

/// One scenario's night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// [`HISTORY_VERSION`] of the perfgate that wrote it.
    pub history_version: u32,
    pub perfgate_version: String,
    /// [`crate::baseline::METRICS_VERSION`]: nights measured with other metric definitions are
    /// not compared.
    pub metrics_version: u32,
    /// When the run was measured, RFC 3339 UTC.
    pub time: String,
    pub scenario: ScenarioName,
    /// The scenario's configuration fingerprint: a series continues only while it is the same.
    pub fingerprint: String,
    /// The commit under test (`GITHUB_SHA`, else `git rev-parse HEAD`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The workflow run that measured it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
    /// Where perfgate ran.
    pub runner: Runner,
    /// Who the server said it was.
    #[serde(default, skip_serializing_if = "ServerId::is_empty")]
    pub server: ServerId,
    /// `created_at` of the committed baseline the night was checked against: a change point
    /// whose new level began before a later bless is accepted on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_created_at: Option<String>,
    /// Measured requests, and how many failed.
    pub requests: usize,
    pub failed: usize,
    /// Per metric: location, spread and a digest of the successful requests.
    pub metrics: BTreeMap<SummaryKey, Point>,
}

/// Where perfgate ran.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runner {
    /// `$RUNNER_NAME` in GitHub Actions, else the host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub os: String,
    pub arch: String,
    /// Logical CPUs perfgate saw.
    pub cpus: usize,
}

/// What the server said about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerId {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The started server's identity ([`crate::server::identity`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub identity: BTreeMap<String, String>,
}

impl ServerId {
    fn is_empty(&self) -> bool {
        *self == ServerId::default()
    }

    /// What differs from `before`, as `key a -> b` items (empty when nothing does).
    pub fn changes_from(&self, before: &ServerId) -> Vec<String> {
        let show = |v: Option<&String>| v.map_or("(absent)".to_string(), |s| s.clone());
        let mut out = Vec::new();
        for (k, a, b) in [
            ("model", &before.model, &self.model),
            ("server", &before.server, &self.server),
        ] {
            if a != b {
                out.push(format!("{k} {} -> {}", show(a.as_ref()), show(b.as_ref())));
            }
        }
        let keys: std::collections::BTreeSet<&String> =
            before.identity.keys().chain(self.identity.keys()).collect();
        for k in keys {
            let (a, b) = (before.identity.get(k), self.identity.get(k));
            if a != b {
                out.push(format!("{k} {} -> {}", show(a), show(b)));
            }
        }
        out
    }
}

/// One metric of one night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Successful requests where the metric is defined.
    pub n: usize,
    /// Median, ms: the value the change-point rule follows.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// Standard deviation of ln(value): the within-night spread, so the night-to-night spread
    /// can be told from sampling noise ([`crate::stats::spread`]).
    pub log_sd: f64,
    /// Type-7 quantiles at [`DIGEST_LEVELS`], ms.
    pub q: Vec<f64>,
}

/// What the run knew about itself besides the result: when, which commit, where.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Night {
    pub time: String,
    pub commit: Option<String>,
    pub run_url: Option<String>,
    pub runner: Runner,
    pub baseline_created_at: Option<String>,
}

impl Runner {
    /// This machine: `$RUNNER_NAME` (GitHub Actions) or the host name, OS, architecture, CPUs.
    pub fn here(env: &dyn Fn(&str) -> Option<String>) -> Runner {
        let name = env("RUNNER_NAME")
            .or_else(|| env("HOSTNAME"))
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .filter(|s| !s.is_empty())
            .map(|s| s.chars().take(100).collect());
        Runner {
            name,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// The night's entry for a measured scenario; `None` when it measured no successful request
/// (a night that measured nothing has no value: it is not appended).
pub fn entry_of(s: &ScenarioResult, night: &Night) -> Option<Entry> {
    let ok: Vec<&crate::record::RequestRecord> = s.records.iter().filter(|r| r.ok()).collect();
    if ok.is_empty() {
        return None;
    }
    let mut metrics = BTreeMap::new();
    for m in crate::config::Metric::ALL {
        let v: Vec<f64> = ok.iter().filter_map(|r| m.value(r.timings())).collect();
        if let Some(p) = point(&v) {
            metrics.insert(SummaryKey::from(m), p);
        }
    }
    let itl: Vec<f64> = ok.iter().flat_map(|r| r.itl_ms.iter().copied()).collect();
    if let Some(p) = point(&itl) {
        metrics.insert(SummaryKey::Itl, p);
    }
    let identity = s
        .server
        .as_ref()
        .map(|sr| sr.identity.clone())
        .unwrap_or_default();
    Some(Entry {
        history_version: HISTORY_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").into(),
        metrics_version: crate::baseline::METRICS_VERSION,
        time: night.time.clone(),
        scenario: s.name.clone(),
        fingerprint: s.fingerprint.clone(),
        commit: night.commit.clone(),
        run_url: night.run_url.clone(),
        runner: night.runner.clone(),
        server: ServerId {
            model: s.measured.model.clone(),
            server: s.measured.server.clone(),
            identity,
        },
        baseline_created_at: night.baseline_created_at.clone(),
        requests: s.measured.requests,
        failed: s.measured.failed,
        metrics,
    })
}

/// A metric's point from its values (ms); `None` without a positive finite value.
pub fn point(values: &[f64]) -> Option<Point> {
    let mut v: Vec<f64> = values
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| crate::stats::quantile::quantile_type7(&v, p).unwrap_or(f64::NAN);
    let r3 = crate::units::round3;
    let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
    let n = logs.len();
    let log_sd = if n < 2 {
        0.0
    } else {
        let mean = logs.iter().sum::<f64>() / n as f64;
        (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    Some(Point {
        n,
        p50: r3(q(0.5)),
        p90: r3(q(0.9)),
        p99: r3(q(0.99)),
        log_sd: (log_sd * 1e5).round() / 1e5,
        q: DIGEST_LEVELS
            .iter()
            .map(|&l| r3(q(f64::from(l) / 100.0)))
            .collect(),
    })
}

/// Why a history file could not be read: the file, the line, what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EntryError {
    /// A line that is not an entry (hand-edited, truncated, another tool's file).
    #[error("{file} line {line}: not a perfgate history entry ({problem}); fix or delete the line on the history branch")]
    Broken {
        file: String,
        line: usize,
        problem: String,
    },
    /// An entry written by a newer perfgate.
    #[error("{file} line {line}: written by perfgate {by} (history version {version}); this perfgate {ours} reads version {HISTORY_VERSION} and older: upgrade perfgate")]
    Newer {
        file: String,
        line: usize,
        by: String,
        version: u32,
        ours: &'static str,
    },
    /// An entry of another scenario in this scenario's file.
    #[error("{file} line {line}: an entry of scenario `{found}` in the file of `{expected}`; move it to its own file")]
    OtherScenario {
        file: String,
        line: usize,
        found: String,
        expected: String,
    },
}

/// Reads a scenario's history file (one entry per line, oldest first; blank lines skipped).
/// Every line is checked: a broken or newer line is refused with its line number.
pub fn parse(file: &str, expected: &ScenarioName, text: &str) -> Result<Vec<Entry>, EntryError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        // The version first, so a newer layout is refused as newer, not as broken.
        #[derive(Deserialize)]
        struct Head {
            history_version: Option<u32>,
            perfgate_version: Option<String>,
        }
        let head: Head = serde_json::from_str(line).map_err(|e| EntryError::Broken {
            file: file.into(),
            line: line_no,
            problem: e.to_string(),
        })?;
        let version = head.history_version.ok_or_else(|| EntryError::Broken {
            file: file.into(),
            line: line_no,
            problem: "no history_version".into(),
        })?;
        if version > HISTORY_VERSION {
            return Err(EntryError::Newer {
                file: file.into(),
                line: line_no,
                by: head.perfgate_version.unwrap_or_else(|| "?".into()),
                version,
                ours: env!("CARGO_PKG_VERSION"),
            });
        }
        let e: Entry = serde_json::from_str(line).map_err(|e| EntryError::Broken {
            file: file.into(),
            line: line_no,
            problem: e.to_string(),
        })?;
        if &e.scenario != expected {
            return Err(EntryError::OtherScenario {
                file: file.into(),
                line: line_no,
                found: e.scenario.to_string(),
                expected: expected.to_string(),
            });
        }
        if let Some(problem) = implausible(&e) {
            return Err(EntryError::Broken {
                file: file.into(),
                line: line_no,
                problem,
            });
        }
        out.push(e);
    }
    Ok(out)
}

/// A value no perfgate writes (a hand edit): non-positive or non-finite latencies, more failures
/// than requests.
fn implausible(e: &Entry) -> Option<String> {
    if e.failed > e.requests {
        return Some(format!("{} failed of {} requests", e.failed, e.requests));
    }
    for (k, p) in &e.metrics {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(p.p50) && ok(p.p90) && ok(p.p99) && p.log_sd.is_finite() && p.log_sd >= 0.0) {
            return Some(format!(
                "{k}: a quantile or log_sd that is not a positive number"
            ));
        }
    }
    None
}

/// Whether `old` already holds the night of `new` (same time, commit and configuration): an
/// append repeated after a push that did land adds nothing.
pub fn already_in(old: &[Entry], new: &Entry) -> bool {
    old.iter()
        .any(|e| e.time == new.time && e.commit == new.commit && e.fingerprint == new.fingerprint)
}

/// The file with `new` appended and only the last `keep` entries kept (the retention rule):
/// one line per entry, a final newline.
pub fn render(old: &[Entry], new: &Entry, keep: usize) -> String {
    let all: Vec<&Entry> = old.iter().chain(std::iter::once(new)).collect();
    let from = all.len().saturating_sub(keep.max(1));
    let mut out = String::new();
    for e in &all[from..] {
        // serde_json cannot fail on these types (string keys, finite numbers)
        out.push_str(&serde_json::to_string(e).unwrap_or_default());
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A night of scenario `name` with TPOT median `tpot` ms.
    pub fn entry(name: &str, time: &str, tpot: f64) -> Entry {
        let mut metrics = BTreeMap::new();
        metrics.insert(
            SummaryKey::Tpot,
            Point {
                n: 20,
                p50: tpot,
                p90: tpot * 1.1,
                p99: tpot * 1.2,
                log_sd: 0.05,
                q: vec![tpot; 10],
            },
        );
        Entry {
            history_version: HISTORY_VERSION,
            perfgate_version: "0.1.0".into(),
            metrics_version: 1,
            time: time.into(),
            scenario: ScenarioName::new(name).unwrap(),
            fingerprint: "f1".into(),
            commit: Some("a".repeat(40)),
            run_url: None,
            runner: Runner {
                name: Some("r1".into()),
                os: "linux".into(),
                arch: "x86_64".into(),
                cpus: 2,
            },
            server: ServerId::default(),
            baseline_created_at: None,
            requests: 20,
            failed: 0,
            metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::entry;
    use super::*;

    #[test]
    fn a_file_round_trips_and_keeps_the_last_entries() {
        let name = ScenarioName::new("s").unwrap();
        let a = entry("s", "2026-12-01T00:00:00Z", 8.0);
        let b = entry("s", "2026-12-02T00:00:00Z", 8.5);
        let c = entry("s", "2026-12-03T00:00:00Z", 9.0);
        let text = render(&[a.clone(), b.clone()], &c, 2);
        assert_eq!(text.lines().count(), 2);
        let back = parse("s.jsonl", &name, &text).unwrap();
        assert_eq!(back, vec![b, c]);
    }

    #[test]
    fn a_newer_entry_is_refused_with_its_line_and_what_to_do() {
        let name = ScenarioName::new("s").unwrap();
        let ok = serde_json::to_string(&entry("s", "t", 8.0)).unwrap();
        let newer = r#"{"history_version": 2, "perfgate_version": "0.9.0", "something": 1}"#;
        let e = parse("s.jsonl", &name, &format!("{ok}\n{newer}\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("s.jsonl line 2: written by perfgate 0.9.0 (history version 2); this perfgate {} reads version 1 and older: upgrade perfgate", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn broken_and_foreign_lines_are_refused() {
        let name = ScenarioName::new("s").unwrap();
        let e = parse("s.jsonl", &name, "{\"history_version\": 1}\n").unwrap_err();
        assert!(matches!(e, EntryError::Broken { line: 1, .. }), "{e}");
        let other = serde_json::to_string(&entry("t", "x", 8.0)).unwrap();
        let e = parse("s.jsonl", &name, &other).unwrap_err();
        assert!(e.to_string().contains("an entry of scenario `t`"), "{e}");
        let mut bad = entry("s", "x", 8.0);
        bad.metrics.get_mut(&SummaryKey::Tpot).unwrap().p50 = -1.0;
        let e = parse("s.jsonl", &name, &serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(e.to_string().contains("tpot_ms"), "{e}");
        assert_eq!(parse("s.jsonl", &name, "\n\n").unwrap(), vec![]);
    }

    #[test]
    fn a_point_is_computed_from_the_values() {
        // 1..=21 ms: median 11, P90 = 1 + 0.9 * 20 = 19, P99 = 1 + 0.99 * 20 = 20.8
        let v: Vec<f64> = (1..=21).map(f64::from).collect();
        let p = point(&v).unwrap();
        assert_eq!((p.n, p.p50, p.p90, p.p99), (21, 11.0, 19.0, 20.8));
        assert_eq!(p.q.len(), 10);
        assert_eq!((p.q[0], p.q[4], p.q[9]), (1.0, 11.0, 21.0));
        assert!(p.log_sd > 0.5 && p.log_sd < 1.0, "{}", p.log_sd);
        assert_eq!(point(&[0.0, f64::NAN]), None);
    }

    #[test]
    fn server_changes_are_named() {
        let a = ServerId {
            model: Some("m1".into()),
            ..ServerId::default()
        };
        let mut b = a.clone();
        b.model = Some("m2".into());
        b.identity
            .insert("llama.cpp.build_info".into(), "b42".into());
        assert_eq!(
            b.changes_from(&a),
            vec!["model m1 -> m2", "llama.cpp.build_info (absent) -> b42"]
        );
        assert!(a.changes_from(&a).is_empty());
    }
}
