//! A conversation scenario's cold reference (docs/scenarios.md "Conversations"): measured
//! requests sent again after the run, each first with a cache-busting first line (cold: no
//! prefix of it can be cached) and then once more exactly so (hot: all of it is). What the
//! server says it reused is never trusted alone; these two TTFTs bound the measured one, and
//! [`crate::assess::cache`] turns the three into a measured reuse.

use super::phase::{send, varied, Shared};
use crate::config::common::Slot;
use crate::config::file::RawMessage;
use crate::config::scenario::RequestSpec;
use crate::record::ReferencePair;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// `k` of the sorted `indexes` (measured requests' indexes; request g is turn `turn(g)`, 0-based,
/// of at most `turns`), spread evenly over the run and over the turn positions: the j-th is, in
/// the j-th of k equal parts, the first request of turn `j mod turns` (the part's first request
/// when it has none), so the reference covers every turn, not always the same one; all of them
/// when there are at most `k`.
pub fn spread(indexes: &[u64], k: usize, turns: usize, turn: &dyn Fn(u64) -> u64) -> Vec<u64> {
    let n = indexes.len();
    if n <= k {
        return indexes.to_vec();
    }
    let turns = turns.max(1) as u64;
    (0..k)
        .map(|j| {
            let (lo, hi) = (j * n / k, ((j + 1) * n / k).max(j * n / k + 1));
            let want = j as u64 % turns;
            let at = (lo..hi).find(|&i| turn(indexes[i]) == want).unwrap_or(lo);
            indexes[at]
        })
        .collect()
}

/// Sends the cold and floor request of each measured request in `indexes` on the scenario's
/// concurrency (a stream sends one pair at a time, cold then floor), in `indexes`' order.
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

/// The cache-busting first line of the `j`-th reference pair of run `run_id`: short (a few
/// tokens: the cold request computes it and the measured request did not, so its prefill counts
/// as reused; 6 hex digits cost about 1 % of a 400-token prompt, where the 30 characters of a
/// spelled-out nonce cost 5 points on llama.cpp), and unique (24 bits of a hash of the run's id
/// and `j`: a server's cache from an earlier run does not hold it).
fn cold_line(run_id: &str, j: usize) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (run_id, j).hash(&mut h);
    format!("[{:06x}]\n", h.finish() & 0xff_ffff)
}

/// The cold and the floor request of measured request `index` (`j`-th of the reference);
/// `None` when interrupted.
async fn one_pair(sh: &Shared, index: u64, j: usize, run_start: Instant) -> Option<ReferencePair> {
    let (mut cold, _) = varied(&sh.scenario, sh.scale, Slot::Measured(index as usize))?;
    let line = cold_line(&sh.run_id, j);
    // the floor: the same first line (no cache holds it either) and two words, one user turn
    let floor = RequestSpec {
        messages: vec![RawMessage {
            role: "user".into(),
            content: format!("{line}Say hi."),
        }],
        prompt: format!("{line}Say hi."),
        system: None,
        ..cold.clone()
    };
    cold.messages.first_mut()?.content.insert_str(0, &line);
    let cold = send(sh, &cold, run_start).await?;
    let floor = send(sh, &floor, run_start).await?;
    let ttft = |s: &crate::client::http::Sent| s.record.ttft_ms.filter(|_| s.record.ok());
    Some(ReferencePair {
        index,
        cold_ttft_ms: ttft(&cold),
        floor_ttft_ms: ttft(&floor),
        prompt_tokens: cold.record.prompt_tokens,
        cold_cached_tokens: cold.record.cached_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn the_cold_line_is_short_and_differs_by_pair_and_run() {
        let a = super::cold_line("run1", 0);
        assert_eq!(a.len(), 9, "{a}");
        assert!(a.starts_with('[') && a.ends_with("]\n"));
        assert_eq!(a, super::cold_line("run1", 0));
        assert_ne!(a, super::cold_line("run1", 1));
        assert_ne!(a, super::cold_line("run2", 0));
    }

    #[test]
    fn the_reference_takes_every_turn_position_across_the_run() {
        let ix: Vec<u64> = (0..24).collect();
        // six 4-turn conversations, 6 pairs: parts of 4, turns 0, 1, 2, 3, 0, 1
        assert_eq!(spread(&ix, 6, 4, &|g| g % 4), [0, 5, 10, 15, 16, 21]);
        // 8 pairs: parts of 3 requests: 0..3 turn 0 -> 0; 3..6 turn 1 -> 5; 6..9 turn 2 -> 6;
        // 9..12 turn 3 -> 11; 12..15 turn 0 -> 12; 15..18 turn 1 -> 17; 18..21 turn 2 -> 18;
        // 21..24 turn 3 -> 23: eight distinct requests, every turn twice
        assert_eq!(spread(&ix, 8, 4, &|g| g % 4), [0, 5, 6, 11, 12, 17, 18, 23]);
        // 21 requests of 3 turns, 4 pairs: parts 0..5, 5..10, 10..15, 15..21 -> turns 0, 1, 2, 0
        let ix: Vec<u64> = (0..21).collect();
        assert_eq!(spread(&ix, 4, 3, &|g| g % 3), [0, 7, 11, 15]);
        assert_eq!(
            spread(&ix, 6, 3, &|g| g % 3)
                .iter()
                .map(|i| i % 3)
                .collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2]
        );
        assert_eq!(spread(&ix[..3], 8, 4, &|g| g % 4), [0, 1, 2]);
        assert!(spread(&ix, 0, 4, &|g| g % 4).is_empty());
        // a part without the turn wanted (failed requests left out): its first request
        assert_eq!(spread(&[0, 4, 8, 12], 2, 4, &|g| g % 4), [0, 8]);
        // sessions of 3, 2 and 1 turns, twice (turns 0 1 2 0 1 0 0 1 2 0 1 0), 4 pairs: parts
        // of 3: turn 0 in 0..3 -> 0; turn 1 in 3..6 -> 4; turn 2 in 6..9 -> 8; turn 0 in
        // 9..12 -> 9 (by g mod 3 they would be 0, 4, 8 and 9 too, but turn 2 and 0 by luck)
        let pos = [0, 1, 2, 0, 1, 0, 0, 1, 2, 0, 1, 0];
        let ix: Vec<u64> = (0..12).collect();
        let picked = spread(&ix, 4, 3, &|g| pos[g as usize]);
        assert_eq!(picked, [0, 4, 8, 9]);
        // 5 pairs over the first 10: parts of 2: turn 0 in 0..2 -> 0, turn 1 in 2..4 -> 2 has
        // none (turns 2, 0): 2; turn 2 in 4..6 -> none: 4; turn 0 in 6..8 -> 6; turn 1 in
        // 8..10 -> none (2, 0): 8
        assert_eq!(
            spread(&ix[..10], 5, 3, &|g| pos[g as usize]),
            [0, 2, 4, 6, 8]
        );
    }
}
