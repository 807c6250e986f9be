//! The client-lag decision (issue 30): a latency check whose fail move perfgate's own delay
//! could account for is not gated. perfgate stamps every token when its event loop gets to the
//! socket; a client too busy to get there on time adds its own delay to TTFT, E2E and the gaps
//! between tokens, and a regression of that size could be the client's, not the server's.
//!
//! The delay is the lag probe's wakeup lag ([`crate::runner::lag`]) beyond the timer's own
//! granularity (tokio's timer wheel fires up to 1 ms late on an idle machine: a probe of an
//! idle client reads a median of about 1.15 ms). A TTFT or E2E P50 check is not gated when the
//! median excess is more than half the smallest move that would FAIL it: max(fail x the
//! baseline's value, min_delta). TPOT is a difference of two stamps over many tokens, so a
//! uniform client delay cancels in it: TPOT checks stay gated. Tails and ITL keep the "client
//! busy" note (P99 lag above 10 ms): the P99 lag of a shared runner, 2-5 ms beside other jobs
//! (measured: three checks and a busy loop on 2 cores), would ungate nearly every ITL P99 row of
//! few-ms gaps. Share checks (errors, tail>P90) count, not time, and stay gated.

use super::*;

/// How the reason of a check this decision took out of the gate begins.
pub const CLIENT_BUSY: &str = "not gated: perfgate itself was late by";

/// The timer granularity the probe's wakeup lag includes on an idle machine, ms.
pub const TIMER_FLOOR_MS: f64 = 1.0;

/// The client's own delay while measuring, ms beyond [`TIMER_FLOOR_MS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientDelay {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl ClientDelay {
    /// From the lag probe's median and P99 wakeup lag, ms.
    pub fn from_lag(p50: f64, p99: f64) -> ClientDelay {
        let excess = |x: f64| {
            if x.is_finite() {
                (x - TIMER_FLOOR_MS).max(0.0)
            } else {
                0.0
            }
        };
        ClientDelay {
            p50_ms: excess(p50),
            p99_ms: excess(p99),
        }
    }

    /// The larger of two arms' delays (an A/B run: either arm's lag reaches the comparison).
    pub fn max(self, other: ClientDelay) -> ClientDelay {
        ClientDelay {
            p50_ms: self.p50_ms.max(other.p50_ms),
            p99_ms: self.p99_ms.max(other.p99_ms),
        }
    }
}

/// Takes `d` out of the gate (INFO, out of the Holm family, nothing pending) when `delay`
/// could account for half its fail move; says why with both figures.
pub(super) fn untrust(d: &mut Draft, delay: ClientDelay) {
    // P50 rows of TTFT and E2E only: the median lag is a steady figure, while the P99 lag of a
    // shared runner (2-5 ms beside other jobs) would take nearly every ITL P99 row of
    // few-ms gaps out of the gate; tails and ITL keep the "client busy" note instead.
    let (metric, q) = match (d.metric, d.kind) {
        (Some(m), CheckKind::Quantile(Quantile::P50)) if m != Metric::Tpot => (m, Quantile::P50),
        _ => return,
    };
    // already not gated (a tail the baseline cannot bound, too few values)
    if d.p_value.is_none() {
        return;
    }
    let Some(base) = d.baseline.filter(|b| b.is_finite() && *b > 0.0) else {
        return;
    };
    let lag = delay.p50_ms;
    let fail_move = (base * d.fail).max(d.min_delta_ms);
    if lag <= 0.5 * fail_move {
        return;
    }
    d.check.verdict = Verdict::Info;
    d.check.p_value = None;
    d.check.p_holm = None;
    d.check.samples_needed = None;
    d.check.min_detectable_change = None;
    d.p_improve = None;
    d.pending = None;
    d.check.reason = format!(
        "{CLIENT_BUSY} {lag:.1} ms (event-loop lag {} beyond the timer's {TIMER_FLOOR_MS:.0} ms) while measuring, more than half the {} {} move that would fail this check ({} = {:.0}% of {}): a change this size could be the client's; lower load.concurrency, use a bigger runner, or split the load (docs/gate.md \"A client too busy to measure\")",
        "median",
        metric.label(),
        q.label(),
        crate::units::fmt_ms(fail_move),
        d.fail * 100.0,
        crate::units::fmt_ms(base)
    );
}
