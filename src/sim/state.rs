//! The state every connection of one simulator shares: what it serves, request counters and
//! the timing log.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::config::SimConfig;
use super::prefix_cache::PrefixCache;
use super::replay_serve::ReplayPlan;
use super::timing_log::{RequestTimings, TimingLog};

/// What the simulator serves.
pub(super) enum Mode {
    Sim(SimConfig),
    Replay(Arc<ReplayPlan>),
}

/// What every connection of one simulator shares.
pub(super) struct Shared {
    pub(super) mode: Mode,
    /// Requests received, all endpoints.
    pub(super) served: AtomicU64,
    /// Generation requests that passed validation; request n gets RNG stream n.
    pub(super) gen_seq: AtomicU64,
    /// Send times of the events of recent streamed requests (the simulator as a measuring
    /// instrument): `x-perfgate-sim-request: N` names a request, `GET /sim/timings/N` reports it.
    pub(super) timings: Mutex<TimingLog>,
    /// Hashes of the prompts served so far, for `cached_ttft_ms` (the exact-repeat cache).
    pub(super) prompts_seen: Mutex<HashSet<u64>>,
    /// The block keys served so far, for `prefix_cache_block` (the block prefix cache).
    pub(super) prefix_cache: Mutex<PrefixCache>,
    /// Batched prefill (`prefill_window_ms`).
    pub(super) prefill: super::prefill::PrefillEngine,
    /// CPU-bound prefill's compute thread (`prefill_cpu`); `None` when the prefill is a wait.
    pub(super) cpu: Option<super::cpu::CpuEngine>,
}

impl Shared {
    /// Whether `prompt` (a hash) was served before; remembers it. The set is bounded by
    /// [`super::config::MAX_CACHED_PROMPTS`] (then it starts empty again, as an evicting cache).
    pub(super) fn prompt_cached(&self, prompt: u64) -> bool {
        let Ok(mut seen) = self.prompts_seen.lock() else {
            return false;
        };
        if seen.len() >= super::config::MAX_CACHED_PROMPTS {
            seen.clear();
        }
        !seen.insert(prompt)
    }

    /// How many of `keys` (a prompt's block keys, in order) the prefix cache held, leading
    /// ones only; caches them all (see [`PrefixCache::reuse`]).
    pub(super) fn prefix_reuse(&self, keys: &[u64]) -> usize {
        match self.prefix_cache.lock() {
            Ok(mut cache) => cache.reuse(keys),
            Err(_) => 0,
        }
    }

    /// `{"requests":[...]}`: every kept request's timings with a request number >= `from`, in
    /// request order. The log's lock is held only to list the requests; each request's own
    /// lock only while it is written, so streams in progress are barely delayed.
    pub(super) fn all_timings_json(&self, from: u64) -> String {
        let mut kept: Vec<(u64, Arc<Mutex<RequestTimings>>)> = match self.timings.lock() {
            Ok(log) => log
                .order
                .iter()
                .filter(|&&n| n >= from)
                .filter_map(|n| log.by_request.get(n).map(|t| (*n, Arc::clone(t))))
                .collect(),
            Err(_) => Vec::new(),
        };
        kept.sort_by_key(|(n, _)| *n);
        let mut out = String::from(r#"{"requests":["#);
        let mut first = true;
        for (_, t) in kept {
            if let Ok(t) = t.lock() {
                if !first {
                    out.push(',');
                }
                first = false;
                t.write_json(&mut out);
            }
        }
        out.push_str("]}");
        out
    }

    pub(super) fn timings(&self, request: u64) -> Option<RequestTimings> {
        let log = self.timings.lock().ok()?;
        let t = log.by_request.get(&request)?;
        let t = t.lock().ok()?.clone();
        Some(t)
    }
}
