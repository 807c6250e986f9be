//! The validated `gate.cold_start` block: the server perfgate starts (`server:`) has its time to
//! ready and the time to first token of its first request gated against the baseline's starts
//! (docs/gate.md "Cold start").

use crate::config::common::{ensure, At, Invalid};
use crate::config::file::RawColdStart;
use crate::config::values::{parse_fraction, parse_ms};
use serde::Serialize;

/// The default relative tolerance of a start's times: 50 %. A start is one value per run (not
/// hundreds of requests), and loading a model from a page cache or a cold disk differs by more
/// than the P50 band's 10 %.
pub const COLD_START_FAIL: f64 = 0.50;
/// The default absolute floor: 100 ms, about the readiness probe's own resolution (25 ms) plus
/// a process start's scheduling noise.
pub const COLD_START_MIN_DELTA_MS: f64 = 100.0;

/// `gate.cold_start`: tolerance and floor of the cold-start checks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ColdStartGate {
    /// A start slower than (1 + fail) x the baseline's (and significant): FAIL.
    pub fail: f64,
    /// ... and slower by more than this, ms.
    pub min_delta_ms: f64,
}

/// `gate.cold_start: {}` or `{fail: 50%, min_delta: 200ms}`.
pub(super) fn build_cold_start(raw: &RawColdStart) -> Result<ColdStartGate, Invalid> {
    let fail = raw
        .fail
        .as_ref()
        .map(parse_fraction)
        .transpose()
        .at("gate.cold_start.fail")?
        .unwrap_or(COLD_START_FAIL);
    ensure!(
        fail > 0.0 && fail <= 10.0,
        "gate.cold_start.fail is {:.0}%: use above 0% up to 1000%, e.g. 50%",
        fail * 100.0
    );
    let min_delta_ms = raw
        .min_delta
        .as_ref()
        .map(parse_ms)
        .transpose()
        .at("gate.cold_start.min_delta")?
        .unwrap_or(COLD_START_MIN_DELTA_MS);
    Ok(ColdStartGate { fail, min_delta_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::RawNumber;

    #[test]
    fn defaults_and_refusals() {
        let g = build_cold_start(&RawColdStart::default()).unwrap();
        assert_eq!(
            g,
            ColdStartGate {
                fail: 0.5,
                min_delta_ms: 100.0
            }
        );
        let g = build_cold_start(&RawColdStart {
            fail: Some(RawNumber::Text("20%".into())),
            min_delta: Some(RawNumber::Text("1s".into())),
        })
        .unwrap();
        assert_eq!((g.fail, g.min_delta_ms), (0.2, 1000.0));
        let e = build_cold_start(&RawColdStart {
            fail: Some(RawNumber::Num(0.0)),
            min_delta: None,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("gate.cold_start.fail is 0%"), "{e}");
    }
}
