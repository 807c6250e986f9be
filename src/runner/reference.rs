//! A conversation scenario's cold reference (docs/scenarios.md "Conversations"): measured
//! requests sent again after the run, each first with a cache-busting first line (cold: no
//! prefix of it can be cached) and then once more exactly so (hot: all of it is). What the
//! server says it reused is never trusted alone; these two TTFTs bound the measured one, and
//! [`crate::assess::cache`] turns the three into a measured reuse.

use super::phase::{send, varied, Shared};
use crate::config::prompt_set::Slot;
use crate::record::ReferencePair;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `k` of the sorted `indexes`, spread evenly over the run and over the turn positions: the
/// j-th is the start of the j-th of k equal parts moved on by `j mod turns` (so a run of whole
/// conversations gives turns 1, 2, 3, ... in turn, not always the same position); all of them
/// when there are at most `k`.
pub fn spread(indexes: &[u64], k: usize, turns: usize) -> Vec<u64> {
    let n = indexes.len();
    if n <= k {
        return indexes.to_vec();
    }
    let mut out: Vec<u64> = (0..k)
        .map(|j| indexes[(j * n / k + j % turns.max(1)).min(n - 1)])
        .collect();
    out.dedup();
    out
}

/// Sends the cold and hot request of each measured request in `indexes` on the scenario's
/// concurrency (a stream sends one pair at a time, cold then hot), in `indexes`' order.
pub(super) async fn send_pairs(
    shared: &Arc<Shared>,
    indexes: &[u64],
    run_start: Instant,
) -> Vec<ReferencePair> {
    let next = Arc::new(AtomicUsize::new(0));
    let out = Arc::new(Mutex::new(Vec::with_capacity(indexes.len())));
    let indexes = Arc::new(indexes.to_vec());
    let workers = (shared.scenario.load.concurrency as usize).clamp(1, indexes.len().max(1));
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (sh, next, out, indexes) = (
            Arc::clone(shared),
            Arc::clone(&next),
            Arc::clone(&out),
            Arc::clone(&indexes),
        );
        handles.push(tokio::spawn(async move {
            loop {
                let j = next.fetch_add(1, Ordering::SeqCst);
                let Some(&index) = indexes.get(j) else {
                    return;
                };
                if crate::cancel::requested() {
                    return;
                }
                let Some(pair) = one_pair(&sh, index, j, run_start).await else {
                    return;
                };
                if let Ok(mut v) = out.lock() {
                    v.push((j, pair));
                }
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let mut pairs = out
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    pairs.sort_by_key(|(j, _)| *j);
    pairs.into_iter().map(|(_, p)| p).collect()
}

/// The cold and the hot request of measured request `index` (`j`-th of the reference);
/// `None` when interrupted.
async fn one_pair(sh: &Shared, index: u64, j: usize, run_start: Instant) -> Option<ReferencePair> {
    let (mut request, _) = varied(&sh.scenario, sh.scale, Slot::Measured(index as usize))?;
    let line = format!("[perfgate cold reference {}-{j}]\n", sh.run_id);
    match request.messages.first_mut() {
        Some(first) => first.content.insert_str(0, &line),
        None => return None,
    }
    let cold = send(sh, &request, run_start).await?;
    let hot = send(sh, &request, run_start).await?;
    let ttft = |s: &crate::client::http::Sent| s.record.ttft_ms.filter(|_| s.record.ok());
    Some(ReferencePair {
        index,
        cold_ttft_ms: ttft(&cold),
        hot_ttft_ms: ttft(&hot),
        prompt_tokens: cold.record.prompt_tokens,
        cold_cached_tokens: cold.record.cached_tokens,
        hot_cached_tokens: hot.record.cached_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn the_reference_takes_every_turn_position_across_the_run() {
        let ix: Vec<u64> = (0..24).collect();
        // 6 parts of 4 (six 4-turn conversations): 0+0, 4+1, 8+2, 12+3, 16+0, 20+1: turns
        // 1, 2, 3, 4, 1, 2
        assert_eq!(spread(&ix, 6, 4), [0, 5, 10, 15, 16, 21]);
        assert_eq!(spread(&ix[..3], 8, 4), [0, 1, 2]);
        assert!(spread(&ix, 0, 4).is_empty());
        // the last part's shift stays inside the run
        assert_eq!(spread(&ix[..5], 4, 4), [0, 2, 4]);
    }
}
