//! Batched prefill (`prefill_window_ms`): the simulator's model of a compute-bound engine that
//! runs the prefills waiting at one moment as one batch. A batch opens at its first prefill's
//! arrival (or when the batch before it ends, if later), takes every prefill that arrives until
//! `window` after it opens, and runs for the sum of their TTFTs; each of them gets its first
//! token when the batch ends. So a lone request's TTFT is its own, c requests that start
//! together each wait for all c, and a closed loop that starts its streams together stays in
//! step wave after wave (the start-up burst that `load.ramp: steady` measures around).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One batch: when it opens and the work (ms) of the prefills in it so far.
#[derive(Debug)]
struct Batch {
    opens: Instant,
    work_ms: f64,
}

/// The simulator's prefill engine; one per simulator.
#[derive(Debug, Default)]
pub(super) struct PrefillEngine {
    last: Mutex<Option<Arc<Mutex<Batch>>>>,
}

impl PrefillEngine {
    /// Where a prefill of `ttft_ms` arriving at `arrival` goes, given the batch before it:
    /// joins it while it collects (`arrival` before `opens + window`), else opens a new batch at
    /// `max(arrival, end of the batch before)`. Pure, for the tests: returns whether it joined
    /// and the batch's opening.
    fn place(last: Option<&Batch>, arrival: Instant, window: Duration) -> (bool, Instant) {
        match last {
            Some(b) if arrival < b.opens + window => (true, b.opens),
            Some(b) => {
                let ends = b.opens + Duration::from_secs_f64(b.work_ms / 1000.0);
                (false, ends.max(arrival))
            }
            None => (false, arrival),
        }
    }

    /// The TTFT, ms from `arrival`, of a prefill of `ttft_ms` in its batch: waits until the
    /// batch stops collecting (its size is then final) and returns its end - `arrival`.
    pub(super) async fn ttft(&self, arrival: Instant, ttft_ms: f64, window_ms: f64) -> f64 {
        let window = Duration::from_secs_f64(window_ms.max(0.0) / 1000.0);
        let batch = {
            let Ok(mut last) = self.last.lock() else {
                return ttft_ms;
            };
            let before = last
                .as_ref()
                .and_then(|b| b.lock().ok().map(|b| (b.opens, b.work_ms)));
            let before = before.map(|(opens, work_ms)| Batch { opens, work_ms });
            match Self::place(before.as_ref(), arrival, window) {
                (true, _) => {
                    let b = last.as_ref().map(Arc::clone);
                    if let Some(b) = &b {
                        if let Ok(mut g) = b.lock() {
                            g.work_ms += ttft_ms;
                        }
                    }
                    b
                }
                (false, opens) => {
                    let b = Arc::new(Mutex::new(Batch {
                        opens,
                        work_ms: ttft_ms,
                    }));
                    *last = Some(Arc::clone(&b));
                    Some(b)
                }
            }
        };
        let Some(batch) = batch else {
            return ttft_ms;
        };
        let opens = batch.lock().map_or(arrival, |b| b.opens);
        tokio::time::sleep_until((opens + window).into()).await;
        let work_ms = batch.lock().map_or(ttft_ms, |b| b.work_ms);
        let ends = opens + Duration::from_secs_f64(work_ms / 1000.0);
        (ends.max(opens + window) - arrival).as_secs_f64() * 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefill_joins_a_collecting_batch_or_waits_for_the_one_running() {
        let t0 = Instant::now();
        let ms = |x: u64| Duration::from_millis(x);
        let w = ms(5);
        // none before: opens at its arrival
        assert_eq!(PrefillEngine::place(None, t0, w), (false, t0));
        // a batch opened at t0 with 40 ms of work: at +3 ms it joins, at +5 ms it does not
        let b = Batch {
            opens: t0,
            work_ms: 40.0,
        };
        assert_eq!(PrefillEngine::place(Some(&b), t0 + ms(3), w), (true, t0));
        assert_eq!(
            PrefillEngine::place(Some(&b), t0 + ms(5), w),
            (false, t0 + ms(40))
        );
        // after the batch ended: opens at its own arrival
        assert_eq!(
            PrefillEngine::place(Some(&b), t0 + ms(60), w),
            (false, t0 + ms(60))
        );
    }

    #[tokio::test]
    async fn four_together_wait_for_all_four_and_a_lone_one_for_itself() {
        let e = Arc::new(PrefillEngine::default());
        let t0 = Instant::now();
        // four 20 ms prefills arriving at once: one batch of 80 ms
        let mut hs = Vec::new();
        for _ in 0..4 {
            let e = Arc::clone(&e);
            hs.push(tokio::spawn(async move { e.ttft(t0, 20.0, 5.0).await }));
        }
        for h in hs {
            let t = h.await.unwrap();
            assert!((t - 80.0).abs() < 1e-6, "{t}");
        }
        // a lone one after that batch ended: its own 20 ms
        let t1 = t0 + Duration::from_millis(200);
        let t = e.ttft(t1, 20.0, 5.0).await;
        assert!((t - 20.0).abs() < 1e-6, "{t}");
        // one arriving while a batch runs (opened at t1, ends at t1 + 20): waits for it, then
        // its own 20 ms: 10 ms after t1 -> opens at t1 + 20, ends t1 + 40, TTFT 30 ms
        let t = e.ttft(t1 + Duration::from_millis(10), 20.0, 5.0).await;
        assert!((t - 30.0).abs() < 1e-6, "{t}");
    }
}
