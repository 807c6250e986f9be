//! One start of a server perfgate started (`server.command`): its time to ready and the time to
//! first token of the first request sent after it was ready, as a baseline stores them and
//! `gate.cold_start` compares them (docs/gate.md "Cold start").

use super::ServerReport;
use crate::record::RequestRecord;
use serde::{Deserialize, Serialize};

/// One server start's times, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerStart {
    /// From the process start to the first ready answer (to within one readiness probe).
    pub time_to_ready_ms: f64,
    /// TTFT of the first request sent after ready (the warmup's first, or the first measured
    /// one with `load.warmup: 0`); absent when that request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ttft_ms: Option<f64>,
}

impl ServerStart {
    /// The start a run's server report records: only a server this run started (a process
    /// shared with an earlier scenario, an endpoint only waited for, were not started here).
    pub fn of(r: &ServerReport) -> Option<ServerStart> {
        if !r.started_here || r.pid.is_none() {
            return None;
        }
        Some(ServerStart {
            time_to_ready_ms: r.time_to_ready_ms?,
            first_ttft_ms: r.first_ttft_ms,
        })
    }
}

/// The TTFT of the first request a run sent (by its start time): the warmup's first, else the
/// first measured request's; `None` when it failed or there was none. Pure.
pub fn first_ttft(warmup: &[RequestRecord], measured: &[RequestRecord]) -> Option<f64> {
    let first = |rs: &[RequestRecord]| {
        rs.iter()
            .min_by(|a, b| a.start_ms.total_cmp(&b.start_ms))
            .cloned()
    };
    let r = first(warmup).or_else(|| first(measured))?;
    if !r.ok() {
        return None;
    }
    r.ttft_ms.filter(|x| x.is_finite() && *x >= 0.0)
}
