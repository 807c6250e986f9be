//! Pure statistics for the regression gate (docs/gate.md; each file cites the literature of its
//! formulas): quantiles, rank tests, the Hodges-Lehmann shift with its Moses
//! interval, the paired signed-rank test with its Walsh-average interval, exact binomial/Fisher tests and Holm's step-down adjustment.
//!
//! Invariants shared by every submodule:
//! - no I/O, no printing, no serde: functions take slices and numbers and return numbers;
//! - nothing panics on empty input, NaN or infinities: NaN samples are dropped (documented per function),
//!   and a result that does not exist is `None` (or a documented neutral value such as a p-value of 1);
//! - latency inputs are in whatever unit the caller uses (perfgate uses milliseconds); ratios are unitless.

pub mod blocked;
pub mod cache;
pub mod changepoint;
pub mod cluster;
pub mod cold_start;
pub mod edivisive;
pub mod holm;
pub mod itl;
pub mod nightly_band;
pub mod normal;
pub mod objective;
pub mod quantile;
pub mod rank;
pub mod shift;
pub mod signed_rank;
pub mod spread;
pub mod tail;
pub mod tests_exact;

pub use holm::holm_adjust;
pub use normal::{normal_cdf, normal_quantile, normal_sf};
pub use quantile::{
    harrell_davis, min_n_for_upper_bound, order_stat_lower_bound, order_stat_upper_bound,
    quantile_type7, sorted, summarize, Summary,
};
pub use rank::{
    mann_whitney_exact_applies, mann_whitney_greater, mann_whitney_less, mann_whitney_u,
    moses_critical_k, EXACT_MAX_PAIRS,
};
pub use shift::{hl_log_shift, hodges_lehmann_ratio, Shift, MIN_POSITIVE_LATENCY};
pub use tests_exact::{binomial_cdf, binomial_sf, fisher_greater, fisher_less};
