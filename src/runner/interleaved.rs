//! Interleaved A/B measuring (`perfgate ab`): two sessions' measured requests dispatched in one
//! order, each session within its own concurrency.

use super::phase::{keep, measured_slot, one_request, reset_phase, take_results};
use super::session::Session;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Which of two sessions a request of an interleaved run goes to (index into the pair).
pub type ArmIndex = usize;

/// Interleaved A/B (`perfgate ab`): sends one measured request per entry of `order` to
/// `arms[order[k]]`, dispatched in that order, each session keeping at most its scenario's
/// `concurrency` requests in flight (a request waits for a slot of its own arm; the next one
/// in `order` waits for it). Both sessions share one clock origin, so their records'
/// `start_ms` are comparable. Closed loop only (no `load.rate`). Stops early on Ctrl-C, and
/// when an arm's first requests all failed (that arm is then unreachable).
pub async fn measure_interleaved(arms: [&mut Session; 2], order: &[ArmIndex]) {
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
    let slots = sessions.map(|s| {
        Arc::new(tokio::sync::Semaphore::new(
            (s.shared.scenario.load.concurrency as usize).max(1),
        ))
    });
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
        let i = next[k];
        next[k] += 1;
        let sh = Arc::clone(&s.shared);
        let count = counts[k];
        tasks.push(tokio::spawn(async move {
            let at = measured_slot(&sh, i);
            if let Some(sent) = one_request(&sh, start, None, false, at).await {
                keep(&sh, i, sent, count);
            }
            drop(slot);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    for s in [a, b] {
        s.probe.stop();
        let m = take_results(&s.shared);
        s.absorb(m);
    }
}
