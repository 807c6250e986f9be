//! Interleaved A/B measuring (`perfgate ab`): two sessions' measured requests dispatched in one
//! order, each session within its own concurrency.

use super::phase::{keep, measured_slot, one_request, reset_phase, take_results};
use super::session::Session;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Which of two sessions a request of an interleaved run goes to (index into the pair).
pub type ArmIndex = usize;

/// Whether both arms may have requests in flight at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    /// Each arm within its own concurrency, whatever the other has in flight (arms on two
    /// machines: neither slows the other).
    BothArms,
    /// A request of one arm is sent only once the other arm has none in flight (arms sharing
    /// one machine, which would slow each other and draw their figures together).
    OneArm,
}

/// One measured request's time in flight: its arm, and when it was sent and done (ms after the
/// run's start, the task's own clock: a failed request counts as well).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub arm: ArmIndex,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Interleaved A/B (`perfgate ab`): sends one measured request per entry of `order` to
/// `arms[order[k]]`, dispatched in that order, each session keeping at most its scenario's
/// `concurrency` requests in flight (a request waits for a slot of its own arm; the next one
/// in `order` waits for it). Both sessions share one clock origin, so their records'
/// `start_ms` are comparable. Closed loop only (no `load.rate`). Stops early on Ctrl-C, and
/// when an arm's first requests all failed (that arm is then unreachable). With
/// [`InFlight::OneArm`] a request also waits until the other arm has nothing in flight.
/// Returns every dispatched request's [`Span`], in dispatch order.
pub async fn measure_interleaved(
    arms: [&mut Session; 2],
    order: &[ArmIndex],
    in_flight: InFlight,
) -> Vec<Span> {
    let [a, b] = arms;
    let start = Instant::now();
    let started_at = crate::clock::now_rfc3339();
    for s in [&mut *a, &mut *b] {
        reset_phase(&s.shared);
        s.shared.measuring.store(true, Ordering::SeqCst);
        if s.measured.is_empty() {
            s.started_at = started_at.clone();
            s.run_start = start;
        }
        s.probe.start();
        s.shared
            .measured_before
            .store(s.measured.len(), Ordering::SeqCst);
    }
    let sessions = [&*a, &*b];
    let counts = [0usize, 1].map(|k| order.iter().filter(|&&x| x == k).count());
    let width = sessions.map(|s| (s.shared.scenario.load.concurrency as usize).max(1));
    let slots = width.map(|c| Arc::new(tokio::sync::Semaphore::new(c)));
    let mut next = [0usize; 2];
    let mut tasks = Vec::with_capacity(order.len());
    for &k in order {
        let Some(s) = sessions.get(k) else { continue };
        let hopeless =
            |s: &&Session| s.unreachable.is_some() || s.shared.stop.load(Ordering::SeqCst);
        if crate::cancel::requested() || sessions.iter().any(hopeless) {
            break;
        }
        let slot = tokio::select! {
            p = Arc::clone(&slots[k]).acquire_owned() => p,
            _ = crate::cancel::grace_expired() => break,
        };
        let Ok(slot) = slot else { break };
        if in_flight == InFlight::OneArm {
            // the other arm's every slot free = none of its requests in flight; it sends no
            // new one meanwhile (this loop dispatches them all)
            let o = 1 - k;
            let drained = tokio::select! {
                p = slots[o].acquire_many(width[o] as u32) => p.is_ok(),
                _ = crate::cancel::grace_expired() => false,
            };
            if !drained {
                break;
            }
        }
        let i = next[k];
        next[k] += 1;
        let sh = Arc::clone(&s.shared);
        let count = counts[k];
        tasks.push(tokio::spawn(async move {
            let sent_ms = start.elapsed().as_secs_f64() * 1000.0;
            let at = measured_slot(&sh, i);
            if let Some(sent) = one_request(&sh, start, None, false, at).await {
                keep(&sh, i, sent, count);
            }
            let span = Span {
                arm: k,
                start_ms: sent_ms,
                end_ms: start.elapsed().as_secs_f64() * 1000.0,
            };
            drop(slot);
            span
        }));
    }
    let mut spans = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(span) = t.await {
            spans.push(span);
        }
    }
    for s in [a, b] {
        s.probe.stop();
        let m = take_results(&s.shared);
        s.absorb(m);
    }
    spans
}
