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

impl Metric {
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
