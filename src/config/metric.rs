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

/// A part of a request's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The prompt's processing, up to the first token.
    Prefill,
    /// The answer's tokens after the first.
    Decode,
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
    /// The default `gate.min_delta`, ms: the absolute floor below which a change never FAILs.
    pub fn default_min_delta_ms(self) -> f64 {
        match self {
            Metric::Ttft => 5.0,
            Metric::Tpot => 0.5,
            Metric::E2e => 10.0,
        }
    }

    /// Whether the metric times the prompt's processing (`Prefill`), the answer's tokens
    /// (`Decode`), or both: what a drift of the prompt, or of the answers' lengths, leaves
    /// incomparable.
    pub fn times(self, phase: Phase) -> bool {
        match (self, phase) {
            (Metric::Ttft, Phase::Prefill) | (Metric::Tpot, Phase::Decode) => true,
            (Metric::Ttft, Phase::Decode) | (Metric::Tpot, Phase::Prefill) => false,
            (Metric::E2e, _) => true,
        }
    }

    /// The metrics that time `phase`, in report order.
    pub fn timing(phase: Phase) -> Vec<Metric> {
        Metric::ALL.into_iter().filter(|m| m.times(phase)).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: a metric's facts are its own file's exhaustive matches; what a drift of the
    /// prompt or of the answers' lengths removes, and the default floors, read from them.
    #[test]
    fn each_metric_says_what_it_times_and_its_floor() {
        assert_eq!(Metric::timing(Phase::Prefill), [Metric::Ttft, Metric::E2e]);
        assert_eq!(Metric::timing(Phase::Decode), [Metric::Tpot, Metric::E2e]);
        let floors: Vec<f64> = Metric::ALL.map(Metric::default_min_delta_ms).to_vec();
        assert_eq!(floors, [5.0, 0.5, 10.0]);
    }
}
