//! Units and rounding of the figures perfgate writes.

/// Rounds to 3 decimals (µs for ms values), so files diff cleanly.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
