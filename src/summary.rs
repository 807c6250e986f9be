//! Summaries of a set of measured values (metric quantiles, client lag), as stored in baseline
//! and results files.

use crate::config::Metric;
use crate::stats::quantile::summarize;
use crate::units::round3;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a metric summary is of, the key of the `summary` maps of baseline and results files
/// (`ttft_ms`, `tpot_ms`, `e2e_ms`, `itl_ms`): the gated metrics, and ITL over every gap.
///
/// Ordered, hashed and borrowed as its key text, so a map keyed by it is written in the order
/// the files always had (alphabetical) and can be looked up by that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SummaryKey {
    /// Time to first token, ms.
    #[serde(rename = "ttft_ms")]
    Ttft,
    /// Time per output token, ms.
    #[serde(rename = "tpot_ms")]
    Tpot,
    /// End-to-end latency, ms.
    #[serde(rename = "e2e_ms")]
    E2e,
    /// Inter-token latency, every gap pooled, ms.
    #[serde(rename = "itl_ms")]
    Itl,
}

impl SummaryKey {
    /// Every key.
    pub const ALL: [SummaryKey; 4] = [
        SummaryKey::Ttft,
        SummaryKey::Tpot,
        SummaryKey::E2e,
        SummaryKey::Itl,
    ];

    /// The key as written (`ttft_ms`).
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryKey::Ttft => "ttft_ms",
            SummaryKey::Tpot => "tpot_ms",
            SummaryKey::E2e => "e2e_ms",
            SummaryKey::Itl => "itl_ms",
        }
    }
    /// The metric's lower-case name, without the unit (`ttft`).
    pub fn name(self) -> &'static str {
        self.metric().map_or("itl", Metric::as_str)
    }
}

impl<'de> Deserialize<'de> for SummaryKey {
    /// One of the four keys; anything else is refused with the key and the known ones.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SummaryKey::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown summary key `{s}`: perfgate writes ttft_ms, tpot_ms, e2e_ms and itl_ms"
                ))
            })
    }
}

impl From<Metric> for SummaryKey {
    fn from(m: Metric) -> SummaryKey {
        match m {
            Metric::Ttft => SummaryKey::Ttft,
            Metric::Tpot => SummaryKey::Tpot,
            Metric::E2e => SummaryKey::E2e,
        }
    }
}

impl SummaryKey {
    /// The gated metric this summarises (`None` for ITL, gated by its own check).
    pub fn metric(self) -> Option<Metric> {
        Metric::ALL
            .into_iter()
            .find(|m| SummaryKey::from(*m) == self)
    }
}

impl std::fmt::Display for SummaryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialOrd for SummaryKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SummaryKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for SummaryKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::borrow::Borrow<str> for SummaryKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// Metric summaries by what they summarise, in file order.
pub type Summaries = BTreeMap<SummaryKey, MetricSummary>;

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
    /// The share of the cores available to perfgate that its own process used while measuring
    /// (process CPU time over wall time x cores): near 1, perfgate was the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_share: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::SummaryKey;

    #[test]
    fn keys_read_and_write_as_text_and_an_unknown_one_is_named() {
        for k in SummaryKey::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<SummaryKey>(&json).unwrap(), k);
        }
        let e = serde_json::from_str::<SummaryKey>("\"foo_ms\"").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "unknown summary key `foo_ms`: perfgate writes ttft_ms, tpot_ms, e2e_ms and itl_ms"
            ),
            "{e}"
        );
    }
}
