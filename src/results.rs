//! The results model of one `check` run: what was measured, what it was compared with, and the
//! verdicts. Every renderer (terminal, markdown, JSON) reads this one model, so they cannot
//! disagree. Serialised as the `--output` results JSON (`schema_version` 1).

use crate::baseline::MetricSummary;
use crate::gate::{Check, Verdict};
use crate::record::RequestRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the results JSON layout.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// Whether a scenario could be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Compared with its baseline; see `checks`.
    Compared,
    /// No baseline file: run `perfgate bless`.
    NoBaseline,
    /// The baseline measures something else (fingerprint, workload or metric definitions).
    Stale,
    /// The baseline file is broken.
    InvalidBaseline,
    /// The endpoint could not be measured (unreachable, or error rate above `max_error_rate`).
    Unmeasurable,
    /// Every request was rejected with 401/403/404/405: a wrong key or base_url (exit 2).
    Misconfigured,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema_version: u32,
    pub perfgate_version: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// The check id (names the PR comment marker).
    pub id: String,
    /// FAIL, WARN, PASS, IMPROVED, NO_BASELINE, ERROR or INTERRUPTED; always
    /// [`crate::verdict::decide`] over `scenarios`.
    pub verdict: crate::verdict::Overall,
    /// The process exit code (DESIGN s6).
    pub exit_code: i32,
    /// Number of gated checks in the Holm family.
    pub family_size: usize,
    /// True when the run was interrupted (Ctrl-C / SIGTERM): the figures are partial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
    /// `allow_missing` when the check ran with `--allow-missing-baseline` (absent otherwise).
    #[serde(
        default,
        skip_serializing_if = "crate::verdict::BaselinePolicy::is_required"
    )]
    pub baseline_policy: crate::verdict::BaselinePolicy,
    pub scenarios: Vec<ScenarioResult>,
}

/// One scenario's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub name: String,
    pub fingerprint: String,
    /// `file:line` of its definition.
    pub source: String,
    /// Endpoint URL as configured (no secrets: keys live in env vars only).
    pub endpoint: String,
    pub api: String,
    pub model: String,
    pub concurrency: u32,
    pub status: Status,
    /// Why, when not `compared`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineInfo>,
    pub measured: Measured,
    pub checks: Vec<Check>,
    /// Warnings for the reader (workload changes, fallbacks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Every measured request.
    pub records: Vec<RequestRecord>,
}

/// Where the baseline came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    pub path: String,
    pub created_at: String,
    pub perfgate_version: String,
    pub requests: usize,
    pub summary: BTreeMap<String, MetricSummary>,
}

/// Figures of the candidate run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub requests: usize,
    pub ok: usize,
    pub failed: usize,
    /// Failures per class (`connect`, `http_status`, ...).
    pub errors_by_class: BTreeMap<String, usize>,
    /// The first failure message, for the report (secrets redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Measured-phase wall time, ms.
    pub wall_ms: f64,
    /// sum(output_tokens of successes) / wall time, tokens/s.
    pub output_tokens_per_s: f64,
    /// Successful requests / wall time, requests/s.
    pub requests_per_s: f64,
    /// `ttft_ms`, `tpot_ms`, `e2e_ms`, `itl_ms` quantiles over successes.
    pub summary: BTreeMap<String, MetricSummary>,
    /// `usage`, `events` or `mixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_p50: Option<f64>,
    /// Median prompt tokens the server reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Mean requests in flight over the measured phase (sum of request durations / wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_concurrency: Option<f64>,
    /// Open loop: the configured arrival rate, requests/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Open loop: actual send minus scheduled send, ms, over every measured request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_delay_ms: Option<MetricSummary>,
    /// Open loop: TTFT counted from the scheduled send (schedule delay + TTFT), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_schedule_ms: Option<MetricSummary>,
    /// Open loop: E2E latency counted from the scheduled send, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_from_schedule_ms: Option<MetricSummary>,
    /// How late perfgate's own runtime woke a probe task while measuring (event-loop lag), ms:
    /// high values mean the client, not the server, was busy. Absent when the measured phase
    /// was too short for a sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag_ms: Option<ClientLag>,
}

/// Event-loop lag of the client while it measured: a probe task sleeps
/// [`crate::runner::LAG_PROBE_INTERVAL`] in a loop on the measuring runtime and records how
/// late each wakeup was (actual minus due time, ms; tokio rounds a sleep up to its 1 ms timer
/// tick, so an idle runtime shows about 1-1.5 ms). Quantiles are type 7 over the kept samples (all of them up to
/// [`crate::runner::LAG_RESERVOIR`], a uniform sample beyond).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientLag {
    /// Median wakeup lag, ms.
    pub p50: f64,
    /// 99th percentile wakeup lag, ms; above [`crate::runner::CLIENT_LAG_WARN_MS`] the
    /// scenario gets a "client busy" note.
    pub p99: f64,
    /// Largest wakeup lag, ms (over every wakeup).
    pub max: f64,
    /// Number of wakeups measured.
    pub samples: u64,
}

/// Open-loop figures of a set of records: (schedule delay, TTFT from the schedule, E2E from the
/// schedule) summaries; `None`s for a closed-loop run.
pub fn schedule_summaries(
    records: &[RequestRecord],
) -> (
    Option<MetricSummary>,
    Option<MetricSummary>,
    Option<MetricSummary>,
) {
    let delays: Vec<f64> = records.iter().filter_map(|r| r.sched_delay_ms).collect();
    let from = |f: fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.ok())
            .filter_map(|r| Some(r.sched_delay_ms? + f(r)?))
            .collect()
    };
    (
        summary(&delays),
        summary(&from(|r| r.ttft_ms)),
        summary(&from(|r| r.e2e_ms)),
    )
}

/// Median schedule delay above which the report warns that the client fell behind, ms.
pub const SCHEDULE_DELAY_WARN_MS: f64 = 5.0;

fn summary(xs: &[f64]) -> Option<MetricSummary> {
    crate::baseline::metric_summary(xs)
}

/// Summaries of a set of measured records (successes), including ITL over every gap.
pub fn measured_summary(records: &[RequestRecord]) -> BTreeMap<String, MetricSummary> {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
    let mut out = BTreeMap::new();
    let cols: [(&str, Vec<f64>); 3] = [
        ("ttft_ms", ok.iter().filter_map(|r| r.ttft_ms).collect()),
        ("tpot_ms", ok.iter().filter_map(|r| r.tpot_ms).collect()),
        ("e2e_ms", ok.iter().filter_map(|r| r.e2e_ms).collect()),
    ];
    for (k, v) in cols {
        if let Some(s) = summary(&v) {
            out.insert(k.to_string(), s);
        }
    }
    // ITL: each request's bounded gaps, pooled (crate::stats::itl)
    let itl = ok.iter().map(|r| (&r.itl_ms[..], r.itl_count));
    if let Some(s) = crate::stats::itl::pooled_summary(itl) {
        out.insert("itl_ms".to_string(), crate::baseline::summary_of(&s));
    }
    out
}

impl ScenarioResult {
    /// The worst verdict among its checks (FAIL > WARN > IMPROVED > PASS > INFO).
    pub fn worst(&self) -> Option<Verdict> {
        self.checks.iter().map(|c| c.verdict).min()
    }
}

impl Results {
    /// Sets `verdict` and `exit_code` from the scenarios, the policy and `incomplete`: the one
    /// place they are decided ([`crate::verdict::decide`]).
    pub fn decide(&mut self) {
        (self.verdict, self.exit_code) =
            crate::verdict::decide(&self.scenarios, self.baseline_policy, self.incomplete);
    }
    /// Checks with a given verdict, across scenarios.
    pub fn count(&self, v: Verdict) -> usize {
        self.scenarios
            .iter()
            .flat_map(|s| s.checks.iter())
            .filter(|c| c.verdict == v)
            .count()
    }
}
