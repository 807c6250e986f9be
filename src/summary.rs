//! Summaries of a set of measured values (metric quantiles, client lag), as stored in baseline
//! and results files.

use crate::stats::quantile::summarize;
use crate::units::round3;
use serde::{Deserialize, Serialize};

/// Quantiles of one metric (type 7), ms, over successful requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSummary {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// Type-7 quantiles, mean, min and max of `xs` (ms), rounded to 3 decimals; `None` when empty.
pub fn metric_summary(xs: &[f64]) -> Option<MetricSummary> {
    summarize(xs).map(|s| summary_of(&s))
}

/// A [`crate::stats::Summary`] rounded for files.
pub fn summary_of(s: &crate::stats::Summary) -> MetricSummary {
    MetricSummary {
        n: s.n,
        p50: round3(s.p50),
        p90: round3(s.p90),
        p99: round3(s.p99),
        mean: round3(s.mean),
        min: round3(s.min),
        max: round3(s.max),
    }
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
