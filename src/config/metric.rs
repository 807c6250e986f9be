//! The gated latency metrics (`gate.metrics`): their names in scenario files and labels.

use serde::Serialize;

/// A gated latency metric.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token, ms.
    Ttft,
    /// Time per output token, ms.
    Tpot,
    /// End-to-end latency (t_last - t0), ms.
    E2e,
}

/// One request's gated figures, ms (`None` where undefined: a failed request, TPOT of a
/// one-token answer). Every record type gives its figures as this, and [`Metric::value`] is the
/// one place that says which figure a metric is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl Metric {
    /// Every gated per-request metric, in report order.
    pub const ALL: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

    /// The metric named `s` in a scenario file (`ttft`), if it is one.
    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// This metric's figure of one request.
    pub fn value(self, t: Timings) -> Option<f64> {
        match self {
            Metric::Ttft => t.ttft_ms,
            Metric::Tpot => t.tpot_ms,
            Metric::E2e => t.e2e_ms,
        }
    }

    /// Lower-case name (`ttft`).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::E2e => "e2e",
        }
    }
    /// Upper-case label for reports (`TTFT`).
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
        }
    }
}
