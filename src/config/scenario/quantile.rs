//! The gated quantiles (`gate.quantiles`): P50, P90, P99, as probabilities, names and labels.

use serde::Serialize;

/// A gated quantile.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Quantile {
    /// The median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
}

crate::config::common::names!(Quantile { P50 => "p50", P90 => "p90", P99 => "p99" });

impl Quantile {
    /// As a probability (0.5, 0.9, 0.99).
    pub fn p(self) -> f64 {
        match self {
            Quantile::P50 => 0.5,
            Quantile::P90 => 0.9,
            Quantile::P99 => 0.99,
        }
    }
    /// `P50`.
    pub fn label(self) -> &'static str {
        match self {
            Quantile::P50 => "P50",
            Quantile::P90 => "P90",
            Quantile::P99 => "P99",
        }
    }
}
