//! One night of one scenario in the history: the compact, reviewable line a scheduled run
//! appends (docs/history.md "The file"), built from the scenario's result, and the file of such
//! lines read back with every line checked.

use crate::config::ScenarioName;
use crate::results::ScenarioResult;
use crate::summary::SummaryKey;
use crate::units::Num;
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

/// The night's entries of `scenarios`: one per scenario that measured a successful request
/// ([`entry_of`]), each naming the baseline it was checked against.
pub fn entries_of<'a>(
    scenarios: impl IntoIterator<Item = &'a ScenarioResult>,
    night: &Night,
) -> Vec<Entry> {
    let of = |s: &ScenarioResult| {
        let mut n = night.clone();
        n.baseline_created_at = s.baseline.as_ref().map(|b| b.created_at.clone());
        entry_of(s, &n)
    };
    scenarios.into_iter().filter_map(of).collect()
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
    /// An entry that parsed but holds a value no perfgate writes (a hand edit).
    #[error("{file} line {line}: {problem}; no perfgate writes that: fix or delete the line on the history branch")]
    Implausible {
        file: String,
        line: usize,
        problem: Implausible,
    },
    /// The file starts with a byte-order mark (saved by an editor that adds one).
    #[error("{file} starts with a UTF-8 byte-order mark: remove it on the history branch (the file is JSON lines, which have none)")]
    ByteOrderMark { file: String },
    /// An entry of another scenario in this scenario's file.
    #[error("{file} line {line}: an entry of scenario `{found}` in the file of `{expected}`; move it to its own file")]
    OtherScenario {
        file: String,
        line: usize,
        found: String,
        expected: String,
    },
}

/// What is implausible in an entry: a value no perfgate writes. Times are believable from
/// [`crate::limits::MIN_WRITTEN_MS`] (the µs perfgate rounds to) to a day
/// ([`crate::limits::MAX_LATENCY_MS`]), the bounds a baseline's times have.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Implausible {
    #[error("{failed} failed of {requests} requests")]
    MoreFailedThanRequests { failed: usize, requests: usize },
    #[error("{key}.{field} = {} ms is not a believable time ({} ms to {} day)", Num(*value), crate::limits::MIN_WRITTEN_MS, crate::limits::MAX_LATENCY_MS / 86_400_000.0)]
    Latency {
        key: SummaryKey,
        /// `p50`, `q[9]`, ...
        field: String,
        value: f64,
    },
    #[error("{key}.log_sd = {} is not a believable spread of ln(ms) (0 to {:.2})", Num(*value), crate::limits::max_log_sd())]
    LogSd { key: SummaryKey, value: f64 },
    /// The night's time, shortened and made safe to print.
    #[error("time `{0}` is not an RFC 3339 time")]
    Time(String),
}

/// Reads a scenario's history file (one entry per line; blank lines skipped) in time order:
/// oldest first, nights of one time in the file's order (a night appended late, by `history
/// append`, goes in its place). Every line is checked: a broken, newer or implausible line is
/// refused with its line number.
pub fn parse(file: &str, expected: &ScenarioName, text: &str) -> Result<Vec<Entry>, EntryError> {
    if text.starts_with('\u{feff}') {
        return Err(EntryError::ByteOrderMark { file: file.into() });
    }
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
            problem: shown(&e.to_string()),
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
                by: head
                    .perfgate_version
                    .map_or_else(|| "?".into(), |v| shown(&v)),
                version,
                ours: env!("CARGO_PKG_VERSION"),
            });
        }
        let e: Entry = serde_json::from_str(line).map_err(|e| EntryError::Broken {
            file: file.into(),
            line: line_no,
            problem: shown(&e.to_string()),
        })?;
        if &e.scenario != expected {
            return Err(EntryError::OtherScenario {
                file: file.into(),
                line: line_no,
                found: e.scenario.to_string(),
                expected: expected.to_string(),
            });
        }
        let at = check(&e).map_err(|problem| EntryError::Implausible {
            file: file.into(),
            line: line_no,
            problem,
        })?;
        out.push((at, e));
    }
    // stable: nights of one time keep the file's order
    out.sort_by_key(|(at, _)| *at);
    Ok(out.into_iter().map(|(_, e)| e).collect())
}

/// The entry's time, when every value in it is one perfgate writes: no more failures than
/// requests, believable times ([`crate::limits::believable_ms`]) and log-sds
/// ([`crate::limits::max_log_sd`]), an RFC 3339 time.
pub fn check(e: &Entry) -> Result<time::OffsetDateTime, Implausible> {
    if e.failed > e.requests {
        return Err(Implausible::MoreFailedThanRequests {
            failed: e.failed,
            requests: e.requests,
        });
    }
    for (&key, p) in &e.metrics {
        let named = [("p50", p.p50), ("p90", p.p90), ("p99", p.p99)]
            .into_iter()
            .map(|(f, v)| (f.to_string(), v));
        let digest = p.q.iter().enumerate().map(|(i, &v)| (format!("q[{i}]"), v));
        if let Some((field, value)) = named
            .chain(digest)
            .find(|(_, v)| !crate::limits::believable_ms(*v))
        {
            return Err(Implausible::Latency { key, field, value });
        }
        if !(0.0..=crate::limits::max_log_sd()).contains(&p.log_sd) {
            return Err(Implausible::LogSd {
                key,
                value: p.log_sd,
            });
        }
    }
    time_of(&e.time)
        .ok_or_else(|| Implausible::Time(crate::report::safe_text::bounded(&e.time, 40)))
}

/// Text quoted from the file in an error: without control characters (the message is printed
/// on stderr), at most 300 characters.
fn shown(s: &str) -> String {
    crate::report::safe_text::bounded(s, 300)
}

/// An RFC 3339 time.
fn time_of(t: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
}

/// Whether `old` already holds the night of `new` (same time, commit and configuration): an
/// append repeated after a push that did land adds nothing.
pub fn already_in(old: &[Entry], new: &Entry) -> bool {
    old.iter()
        .any(|e| e.time == new.time && e.commit == new.commit && e.fingerprint == new.fingerprint)
}

/// The file with `new` added in time order (as [`parse`] reads it; `new` after the nights of
/// its time) and only the newest `keep` entries kept (the retention rule): one line per entry,
/// a final newline.
pub fn render(old: &[Entry], new: &Entry, keep: usize) -> String {
    let mut all: Vec<&Entry> = old.iter().chain(std::iter::once(new)).collect();
    // stable; a time that does not parse (none that [`parse`] read) sorts first
    all.sort_by_key(|e| time_of(&e.time));
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
        let ok = serde_json::to_string(&entry("s", "2026-12-01T03:00:00Z", 8.0)).unwrap();
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
        let mut bad = entry("s", "2026-12-01T03:00:00Z", 8.0);
        bad.metrics.get_mut(&SummaryKey::Tpot).unwrap().p50 = -1.0;
        let e = parse("s.jsonl", &name, &serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(e.to_string().contains("tpot_ms"), "{e}");
        assert_eq!(parse("s.jsonl", &name, "\n\n").unwrap(), vec![]);
    }

    /// Issue 41: medians of 1e300 and 1e-300 ms were read (only "finite and > 0" was checked),
    /// learned an `inf%` fail tolerance, and each append wrote them back.
    #[test]
    fn unbelievable_values_are_refused_with_their_line_and_what_to_do() {
        let name = ScenarioName::new("s").unwrap();
        let ok = serde_json::to_string(&entry("s", "2026-12-01T03:00:00Z", 8.0)).unwrap();
        let refused = |bad: &Entry| {
            let text = format!("{ok}\n{}\n", serde_json::to_string(bad).unwrap());
            parse("s.jsonl", &name, &text).unwrap_err().to_string()
        };
        let what = "no perfgate writes that: fix or delete the line on the history branch";
        for (v, shown) in [
            (1e300, "1e300"),
            (1e-300, "1e-300"),
            (86_400_001.0, "86400001"),
        ] {
            let mut bad = entry("s", "2026-12-02T03:00:00Z", 8.0);
            bad.metrics.get_mut(&SummaryKey::Tpot).unwrap().p50 = v;
            assert_eq!(
                refused(&bad),
                format!("s.jsonl line 2: tpot_ms.p50 = {shown} ms is not a believable time (0.001 ms to 1 day); {what}")
            );
        }
        let mut bad = entry("s", "2026-12-02T03:00:00Z", 8.0);
        bad.metrics.get_mut(&SummaryKey::Tpot).unwrap().q[9] = 1e300;
        assert_eq!(
            refused(&bad),
            format!("s.jsonl line 2: tpot_ms.q[9] = 1e300 ms is not a believable time (0.001 ms to 1 day); {what}")
        );
        // ln(86,400,000 / 0.001) = 25.18: no believable times spread more
        let mut bad = entry("s", "2026-12-02T03:00:00Z", 8.0);
        bad.metrics.get_mut(&SummaryKey::Tpot).unwrap().log_sd = 1e300;
        assert_eq!(
            refused(&bad),
            format!("s.jsonl line 2: tpot_ms.log_sd = 1e300 is not a believable spread of ln(ms) (0 to 25.18); {what}")
        );
        let bad = entry("s", "yesterday", 8.0);
        assert_eq!(
            refused(&bad),
            format!("s.jsonl line 2: time `yesterday` is not an RFC 3339 time; {what}")
        );
        // the edges themselves are read
        let mut edge = entry("s", "2026-12-02T03:00:00Z", 0.001);
        edge.metrics.get_mut(&SummaryKey::Tpot).unwrap().p99 = 86_400_000.0;
        edge.metrics.get_mut(&SummaryKey::Tpot).unwrap().log_sd = 25.0;
        let text = format!("{ok}\n{}\n", serde_json::to_string(&edge).unwrap());
        assert_eq!(parse("s.jsonl", &name, &text).unwrap().len(), 2);
    }

    /// Issue 41: a night appended late (`history append` of an older results file) became the
    /// newest night and was judged out of place.
    #[test]
    fn nights_are_read_and_written_in_time_order() {
        let name = ScenarioName::new("s").unwrap();
        let line = |t: &str, v: f64| serde_json::to_string(&entry("s", t, v)).unwrap();
        let text = [
            line("2026-12-01T03:00:00Z", 1.0),
            line("2026-12-03T03:00:00Z", 3.0),
            line("2026-12-02T03:00:00Z", 2.0),
            // the same instant written with an offset: after 12-03 03:00 UTC by an hour
            line("2026-12-03T05:00:00+01:00", 4.0),
            // two nights at one time keep their order
            line("2026-12-03T05:00:00+01:00", 5.0),
        ]
        .join("\n");
        // the TPOT P50 of each night, in the order read
        let p50s = |es: &[Entry]| -> Vec<f64> {
            es.iter()
                .map(|e| e.metrics[&SummaryKey::Tpot].p50)
                .collect()
        };
        let read = parse("s.jsonl", &name, &text).unwrap();
        assert_eq!(p50s(&read), vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        // an older night appended goes in its place, and the oldest is the one dropped
        let late = entry("s", "2026-12-01T12:00:00Z", 1.5);
        let out = render(&read, &late, 5);
        let back = parse("s.jsonl", &name, &out).unwrap();
        assert_eq!(p50s(&back), vec![1.5, 2.0, 3.0, 4.0, 5.0]);
        assert!(out.starts_with(&line("2026-12-01T12:00:00Z", 1.5)), "{out}");
    }

    /// Issue 41: a byte-order mark read as "line 1: not a perfgate history entry (expected
    /// value at line 1 column 1)".
    #[test]
    fn a_byte_order_mark_is_named() {
        let name = ScenarioName::new("s").unwrap();
        let ok = serde_json::to_string(&entry("s", "2026-12-01T03:00:00Z", 8.0)).unwrap();
        let e = parse("s.jsonl", &name, &format!("\u{feff}{ok}\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.jsonl starts with a UTF-8 byte-order mark: remove it on the history branch (the file is JSON lines, which have none)"
        );
    }

    /// The reader's errors quote the file (serde names an unknown key, a newer line its
    /// perfgate version): printed on stderr, they must not carry its terminal escapes.
    #[test]
    fn errors_quote_the_file_without_its_escapes() {
        let name = ScenarioName::new("s").unwrap();
        let e = parse(
            "s.jsonl",
            &name,
            "{\"history_version\": 1, \"\\u001b[2J\": 1}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("s.jsonl line 1: not a perfgate history entry (unknown field `[2J`"),
            "{e}"
        );
        let newer = "{\"history_version\": 2, \"perfgate_version\": \"9\\u001b]0;x\\u0007\"}";
        let e = parse("s.jsonl", &name, newer).unwrap_err().to_string();
        assert!(
            e.starts_with("s.jsonl line 1: written by perfgate 9]0;x (history version 2)"),
            "{e}"
        );
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
