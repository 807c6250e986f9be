//! The client-lag decision (issue 30): a latency check whose fail move perfgate's own delay
//! could account for is not gated. perfgate stamps every token when its event loop gets to the
//! socket; a client too busy to get there on time adds its own delay to TTFT, E2E and the gaps
//! between tokens, and a regression of that size could be the client's, not the server's.
//!
//! The delay is the lag probe's wakeup lag ([`crate::runner::lag`]) beyond the timer's own
//! granularity (tokio's timer wheel fires up to 1 ms late on an idle machine: a probe of an
//! idle client reads a median of about 1.15 ms). A TTFT or E2E P50 check is not gated when the
//! median excess is more than half the smallest move that would FAIL it: max(fail x the
//! baseline's value, min_delta); for a busy client ([`Busy`]: it used up its cores, or its lag's
//! P99 passed the "client busy" note's 10 ms), the lag's P99, and every latency quantile check. TPOT is a difference of two stamps over many tokens, so a
//! uniform client delay cancels in it: TPOT checks stay gated. Tails and ITL keep the "client
//! busy" note (P99 lag above 10 ms): the P99 lag of a shared runner, 2-5 ms beside other jobs
//! (measured: three checks and a busy loop on 2 cores), would ungate nearly every ITL P99 row of
//! few-ms gaps. Share checks (errors, tail>P90) count, not time, and stay gated.

use super::*;

/// How the reason of a check this decision took out of the gate begins
/// ([`ReasonKind::ClientBusy`]).
const CLIENT_BUSY: &str = "not gated: perfgate itself was late by";

/// The timer granularity the probe's wakeup lag includes on an idle machine, ms.
pub const TIMER_FLOOR_MS: f64 = 1.0;

/// The share of its cores perfgate's process used while measuring from which it is taken as
/// the bottleneck (`client_lag_ms.cpu_share`). Measured (scripts/bench.py, perfgate pinned to
/// one core, the simulator on the other): 64 streams used about 34 % of the core with a TTFT
/// error P50 of 0.24 ms; 256 streams 82 % with 2.3 ms; 1,024 streams 84 % (63,000 events/s,
/// the simulator's own core saturated too) with 21 ms, while the probe's lag P50 read 1.2-1.4 ms
/// and its P99 52-160 ms: a client that busy delays its requests' writes and reads far beyond
/// what the probe's median sees, so its delay is taken as the lag's P99.
pub const CPU_BOUND_SHARE: f64 = 0.75;

/// The CPU share from which a lag P99 above the "client busy" note's threshold means perfgate
/// itself fell behind, not only a busy machine around it (the test suite's debug builds on 2
/// shared cores see such tails while their own process idles).
pub const BUSY_TAIL_SHARE: f64 = 0.5;

/// Why a client is taken as the bottleneck, its delay then the lag probe's P99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Busy {
    /// Its process used this share of its cores (>= [`CPU_BOUND_SHARE`]).
    Cpu(f64),
    /// Its lag's P99 was above [`crate::runner::CLIENT_LAG_WARN_MS`] (the "client busy" note)
    /// while its process used at least [`BUSY_TAIL_SHARE`] of its cores.
    LagTail,
}

/// The client's own delay while measuring, ms beyond [`TIMER_FLOOR_MS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientDelay {
    /// The typical delay: the probe's median lag, or its P99 when the client was busy.
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Set when the client was the bottleneck ([`Busy`]).
    pub busy: Option<Busy>,
}

impl ClientDelay {
    /// From the lag probe's median and P99 wakeup lag, ms, and the process's CPU share.
    pub fn from_lag(p50: f64, p99: f64, cpu_share: Option<f64>) -> ClientDelay {
        let excess = |x: f64| {
            if x.is_finite() {
                (x - TIMER_FLOOR_MS).max(0.0)
            } else {
                0.0
            }
        };
        // a late tail alone is a busy machine (the note says so); with this process using at
        // least half its cores, it is perfgate that fell behind
        let busy = match cpu_share {
            Some(s) if s >= CPU_BOUND_SHARE => Some(Busy::Cpu(s)),
            Some(s)
                if s >= BUSY_TAIL_SHARE
                    && p99.is_finite()
                    && p99 > crate::runner::CLIENT_LAG_WARN_MS =>
            {
                Some(Busy::LagTail)
            }
            _ => None,
        };
        ClientDelay {
            p50_ms: if busy.is_some() {
                excess(p99).max(excess(p50))
            } else {
                excess(p50)
            },
            p99_ms: excess(p99),
            busy,
        }
    }

    /// The larger of two arms' delays (an A/B run: either arm's lag reaches the comparison).
    pub fn max(self, other: ClientDelay) -> ClientDelay {
        ClientDelay {
            p50_ms: self.p50_ms.max(other.p50_ms),
            p99_ms: self.p99_ms.max(other.p99_ms),
            busy: self.busy.or(other.busy),
        }
    }
}

/// Takes `d` out of the gate (INFO, out of the Holm family, nothing pending) when `delay`
/// could account for half its fail move; says why with both figures.
pub(super) fn untrust(d: &mut Draft, delay: ClientDelay) {
    // P50 rows of TTFT and E2E only: the median lag is a steady figure, while the P99 lag of a
    // shared runner (2-5 ms beside other jobs) would take nearly every ITL P99 row of
    // few-ms gaps out of the gate; tails and ITL keep the "client busy" note instead. A client
    // that used up its cores delays each token unevenly (at 1,024 streams on one core TPOT
    // carried a 5.7 ms median error on 5 ms gaps): then every latency quantile is in question.
    let (metric, q) = match (d.metric, d.kind) {
        (Some(m), CheckKind::Quantile(Quantile::P50)) if m != Metric::Tpot => (m, Quantile::P50),
        (Some(m), CheckKind::Quantile(q) | CheckKind::ItlTail(q)) if delay.busy.is_some() => (m, q),
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
    d.check.reason_kind = ReasonKind::ClientBusy;
    d.check.p_value = None;
    d.check.p_holm = None;
    d.check.samples_needed = None;
    d.check.min_detectable_change = None;
    d.p_improve = None;
    d.pending = None;
    let how = match delay.busy {
        Some(Busy::Cpu(share)) => format!(
            "its process kept {:.0}% of its cores busy, so the event-loop lag's P99 beyond the timer's {TIMER_FLOOR_MS:.0} ms",
            share * 100.0
        ),
        Some(Busy::LagTail) => format!(
            "the event-loop lag's P99 beyond the timer's {TIMER_FLOOR_MS:.0} ms: above {:.0} ms the client fell behind",
            crate::runner::CLIENT_LAG_WARN_MS
        ),
        None => format!("event-loop lag median beyond the timer's {TIMER_FLOOR_MS:.0} ms"),
    };
    d.check.reason = format!(
        "{CLIENT_BUSY} {lag:.1} ms ({how}) while measuring, more than half the {} {} move that would fail this check ({} = {:.0}% of {}): a change this size could be the client's; lower load.concurrency, use a bigger runner, or split the load over workers (docs/gate.md \"A client too busy to measure\")",
        metric.label(),
        q.label(),
        crate::units::fmt_ms(fail_move),
        d.fail * 100.0,
        crate::units::fmt_ms(base)
    );
}
