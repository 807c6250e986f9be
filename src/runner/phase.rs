//! One phase of a session (the warmup, or the measured requests of a look): `concurrency`
//! workers in a closed loop, or requests due at seeded Poisson arrivals in an open loop; one
//! request's nonce, re-send rules and schedule; the early stop of a hopeless endpoint.

use super::progress::{Phase, Progress};
use super::steady;
use crate::client::body;
use crate::client::http::{Delivery, RefusedField, Sent, StreamClient};
use crate::config::common::Slot;
use crate::config::scenario::RequestSpec;
use crate::config::Scenario;
use crate::record::{RequestRecord, WorkItem};
use crate::synthetic_prompt::Scale;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub(super) struct Shared {
    pub(super) client: StreamClient,
    pub(super) scenario: Scenario,
    pub(super) include_usage: AtomicBool,
    pub(super) fallback: AtomicBool,
    pub(super) stop: AtomicBool,
    pub(super) next: AtomicUsize,
    pub(super) completed: AtomicUsize,
    pub(super) results: Mutex<Vec<(usize, Sent)>>,
    pub(super) run_id: String,
    /// Requests sent so far in the session (warmup and measured): the `cache: cold` nonce's
    /// counter, so no two requests of a session share a prompt.
    pub(super) nonce_seq: AtomicU64,
    /// Live progress display, when the caller passed one to [`Session::start_with`].
    pub(super) progress: Option<Arc<dyn Progress>>,
    /// False during warmup, true once measured requests are sent (for `progress`, and which
    /// prompt-set entries a phase sends).
    pub(super) measuring: AtomicBool,
    /// `request.generate`: tokens a synthetic prompt of w words counts, as fitted before the
    /// warmup ([`crate::prompt_fit::fit_scale`]).
    pub(super) scale: Scale,
    /// Measured requests of the session before this phase: a measured request's index in the
    /// run is this plus its index in the phase ([`request_index`]).
    pub(super) measured_before: AtomicUsize,
    /// Once perfgate switched to `Connection: close`: how many more re-sends are still expected
    /// (a request may take an idle pooled connection that carried a stream before the switch,
    /// which the server is closing; at most one per pooled connection, i.e. `concurrency`).
    pub(super) close_leftovers: AtomicUsize,
}

impl Shared {
    /// A session's shared state before its first phase: `scenario` (this run's copy), sent on
    /// `client` with `stream_options` as the endpoint asks, nonces prefixed by `run_id`.
    pub(super) fn new(
        client: StreamClient,
        scenario: Scenario,
        progress: Option<Arc<dyn Progress>>,
        run_id: String,
    ) -> Shared {
        Shared {
            include_usage: AtomicBool::new(scenario.endpoint.include_usage),
            client,
            scenario,
            fallback: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            next: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            results: Mutex::new(Vec::new()),
            progress,
            measuring: AtomicBool::new(false),
            measured_before: AtomicUsize::new(0),
            scale: Scale::GUESS,
            close_leftovers: AtomicUsize::new(0),
            nonce_seq: AtomicU64::new(0),
            run_id,
        }
    }
}

pub(super) async fn phase(shared: &Arc<Shared>, count: usize, run_start: Instant) -> Vec<Sent> {
    if count == 0 {
        return Vec::new();
    }
    reset_phase(shared);
    let workers = (shared.scenario.load.concurrency as usize).min(count);
    // Open loop: request i is due at phase start + the i-th Poisson arrival; a worker (a slot of
    // the concurrency cap) sends it at max(due, slot free).
    // A trace replay's measured phase: request i is due at its trace time after the phase's
    // first request's (scaled); the warmup uses Poisson arrivals at the trace's mean rate.
    let traced = shared
        .scenario
        .load
        .trace
        .as_ref()
        .filter(|_| shared.measuring.load(Ordering::SeqCst));
    let schedule: Option<Arc<Vec<Instant>>> = shared.scenario.load.rate.map(|rate| {
        let start = Instant::now();
        let offsets_s: Vec<f64> = match traced {
            Some(t) => {
                // the look's first request of the whole scenario: a load shard's workers all
                // count their trace offsets from it, so they replay one schedule together
                let share = shared.scenario.load.share;
                let n = share.map_or(1, |s| s.shard.count);
                let first = request_index(None, shared.measured_before.load(Ordering::SeqCst) * n);
                let first_due = first_gap_s(rate);
                (0..count)
                    .map(|i| {
                        let g =
                            request_index(share, shared.measured_before.load(Ordering::SeqCst) + i);
                        first_due + t.offset_ms(first, g) / 1000.0
                    })
                    .collect()
            }
            None => shard_arrivals(
                rate,
                shared.scenario.load.seed.unwrap_or(0),
                count,
                shared.scenario.load.share,
            ),
        };
        Arc::new(
            offsets_s
                .into_iter()
                .map(|s| start + std::time::Duration::from_secs_f64(s))
                .collect(),
        )
    });
    if let Some(c) = &shared.scenario.request.conversation {
        // (at most as many streams as conversations start in the phase)
        let measuring = shared.measuring.load(Ordering::SeqCst);
        let conversations = (0..workers)
            .take_while(|&k| c.span(measuring, k).0 < count)
            .count();
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..conversations {
            let sh = Arc::clone(shared);
            handles.push(tokio::spawn(async move {
                conversation_worker(sh, count, run_start).await
            }));
        }
        for h in handles {
            let _ = h.await;
        }
        return take_results(shared);
    }
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let sh = Arc::clone(shared);
        let sched = schedule.clone();
        handles.push(tokio::spawn(async move {
            worker(sh, count, run_start, sched).await
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    take_results(shared)
}

/// A steady-state look (docs/scenarios.md "Steady state"), closed loop at concurrency c > 1:
/// stream w starts `w x step` after the look's start; the first c requests (the ramp-up) are
/// not measured, the next `count` are, and while any of those is still in flight the streams
/// keep sending unmeasured drain requests (at most [`steady::DRAIN_PER_STREAM`] per stream), so
/// every measured request runs with c in flight. Each measured record carries the concurrency
/// it achieved.
pub(super) async fn steady_phase(
    shared: &Arc<Shared>,
    count: usize,
    run_start: Instant,
    step: std::time::Duration,
) -> SteadyLook {
    let mut look = SteadyLook::default();
    if count == 0 {
        return look;
    }
    reset_phase(shared);
    let c = shared.scenario.load.concurrency as usize;
    let st = Arc::new(SteadyState {
        measured_done: AtomicUsize::new(0),
        spans: Mutex::new(Vec::new()),
    });
    let start = Instant::now();
    let mut handles = Vec::with_capacity(c);
    for w in 0..c {
        let sh = Arc::clone(shared);
        let st = Arc::clone(&st);
        // a load shard's stream w is the scenario's stream `global_index(w)` of the ramp-up
        let stream = shared
            .scenario
            .load
            .share
            .map_or(w, |sh| sh.global_index(w));
        let at = start + step * stream as u32;
        handles.push(tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => {}
                _ = crate::cancel::grace_expired() => return,
            }
            steady_worker(sh, st, c, count, run_start).await
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let spans = st
        .spans
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    look.stopped = shared.stop.load(Ordering::SeqCst);
    // every request's achieved concurrency at once (O(n log n): a look may hold 100,000)
    let intervals: Vec<(f64, f64)> = spans.iter().map(|&(_, s, e)| (s, e)).collect();
    let by_index: std::collections::HashMap<usize, f64> = spans
        .iter()
        .map(|&(j, _, _)| j)
        .zip(steady::achieved_all(&intervals))
        .collect();
    let mut results = take_indexed(shared);
    for (i, sent) in results.iter_mut() {
        sent.record.concurrency = by_index.get(i).copied();
    }
    look.unmeasured_spans = spans
        .iter()
        .filter(|&&(j, _, _)| !matches!(steady::role(j, c, count), steady::Role::Measured(_)))
        .map(|&(_, s, e)| (s, e))
        .collect();
    for (i, sent) in results {
        match steady::role(i, c, count) {
            steady::Role::RampUp => look.ramp_up.push(sent),
            steady::Role::Measured(_) => look.measured.push(sent),
            steady::Role::Drain => look.drain += 1,
        }
    }
    look
}

/// What a steady-state look sent: its measured requests in order, the ramp-up's (not measured,
/// kept to tell why a look measured nothing) and how many drain requests it sent.
#[derive(Default)]
pub(super) struct SteadyLook {
    pub(super) measured: Vec<Sent>,
    pub(super) ramp_up: Vec<Sent>,
    pub(super) drain: usize,
    /// The ramp-up's and the drain's (start, end) ms from the run's start: merging load shards
    /// counts them in flight.
    pub(super) unmeasured_spans: Vec<(f64, f64)>,
    /// Stopped early: the endpoint is hopeless ([`keep`]).
    pub(super) stopped: bool,
}

struct SteadyState {
    /// Measured requests ended so far.
    measured_done: AtomicUsize,
    /// Every request's (index, start ms, end ms) from the run's start.
    spans: Mutex<Vec<(usize, f64, f64)>>,
}

async fn steady_worker(
    sh: Arc<Shared>,
    st: Arc<SteadyState>,
    c: usize,
    count: usize,
    run_start: Instant,
) {
    let mut first = true;
    loop {
        if !first {
            tokio::task::yield_now().await;
        }
        first = false;
        if sh.stop.load(Ordering::SeqCst) || crate::cancel::requested() {
            return;
        }
        let i = sh.next.fetch_add(1, Ordering::SeqCst);
        let role = steady::role(i, c, count);
        if role == steady::Role::Drain
            && (st.measured_done.load(Ordering::SeqCst) >= count
                || i >= c + count + steady::DRAIN_PER_STREAM * c)
        {
            return;
        }
        let unmeasured = !matches!(role, steady::Role::Measured(_));
        let slot = match role {
            steady::Role::Measured(k) => measured_slot(&sh, k),
            _ => Slot::Unmeasured(i),
        };
        let Some(sent) = one_request(&sh, run_start, None, unmeasured, slot).await else {
            return; // interrupted: not recorded
        };
        let end_ms = run_start.elapsed().as_secs_f64() * 1000.0;
        if let Ok(mut v) = st.spans.lock() {
            v.push((i, sent.record.start_ms, end_ms));
        }
        if matches!(role, steady::Role::Measured(_)) {
            st.measured_done.fetch_add(1, Ordering::SeqCst);
        }
        keep(&sh, i, sent, c + count);
    }
}

/// A trace replay's first measured request is due this long after the phase starts (as the
/// Poisson schedule's first request is due at its first gap): one mean gap, at most 1 s, so
/// the first requests are not sent while the phase's workers start.
fn first_gap_s(rate: f64) -> f64 {
    (1.0 / rate).min(1.0)
}

/// Open-loop arrival offsets, seconds after the phase start: cumulative sums of exponential gaps
/// of mean 1/rate (a Poisson process), deterministic for a seed. The first request is due at
/// its first gap, not at 0.
pub fn arrivals(rate: f64, seed: u64, count: usize) -> Vec<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut t = 0.0f64;
    (0..count)
        .map(|_| {
            // u in (0, 1]: -ln(u) is Exp(1)
            let u: f64 = 1.0 - rng.random::<f64>();
            t += -u.ln() / rate;
            t
        })
        .collect()
}

/// [`arrivals`] of one worker of a load shard (`share`, at its `rate` = the scenario's over N):
/// its every N-th arrival of the whole scenario's schedule, from its own index on, so the
/// workers' arrivals together are the unsharded schedule. Without a share, [`arrivals`].
pub fn shard_arrivals(
    rate: f64,
    seed: u64,
    count: usize,
    share: Option<crate::config::load_shard::LoadShare>,
) -> Vec<f64> {
    let Some(sh) = share else {
        return arrivals(rate, seed, count);
    };
    let n = sh.shard.count;
    let all = arrivals(sh.total_rate.unwrap_or(rate * n as f64), seed, count * n);
    (0..count).map(|j| all[sh.global_index(j)]).collect()
}

async fn worker(
    sh: Arc<Shared>,
    count: usize,
    run_start: Instant,
    schedule: Option<Arc<Vec<Instant>>>,
) {
    let mut first = true;
    loop {
        if !first && schedule.is_none() {
            // Closed loop: let the connection of the request that just ended go back to the
            // pool (a task of its own) before this worker looks for one, so it does not start
            // a new connection while its own is on the way back.
            tokio::task::yield_now().await;
        }
        first = false;
        if sh.stop.load(Ordering::SeqCst) || crate::cancel::requested() {
            return;
        }
        let i = sh.next.fetch_add(1, Ordering::SeqCst);
        if i >= count {
            return;
        }
        let due = schedule.as_ref().map(|s| s[i]);
        if let Some(due) = due {
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = crate::cancel::grace_expired() => return,
            }
            if sh.stop.load(Ordering::SeqCst) || crate::cancel::requested() {
                return;
            }
        }
        let slot = if sh.measuring.load(Ordering::SeqCst) {
            measured_slot(&sh, i)
        } else {
            Slot::Unmeasured(i)
        };
        let Some(sent) = one_request(&sh, run_start, due, false, slot).await else {
            return; // interrupted: not recorded
        };
        keep(&sh, i, sent, count);
    }
}

/// A closed-loop stream of conversations (`request.conversation`): takes the next whole
/// conversation, sends its turns (`turns`, or a session's own: [`ConversationSpec::span`]) one
/// after the other with the turn's think time ([`ConversationSpec::think_ms`]: `think_time`,
/// or a session's `delay`) between a turn's end and the next turn, until the phase's `count`
/// requests are taken (the warmup's last conversation may end early).
///
/// [`ConversationSpec::span`]: crate::config::conversation::ConversationSpec::span
/// [`ConversationSpec::think_ms`]: crate::config::conversation::ConversationSpec::think_ms A failed turn does not end its conversation: the history is the
/// scenario's own text, so the next turn is the same request either way.
async fn conversation_worker(sh: Arc<Shared>, count: usize, run_start: Instant) {
    let Some(c) = sh.scenario.request.conversation.clone() else {
        return;
    };
    let measuring = sh.measuring.load(Ordering::SeqCst);
    loop {
        if sh.stop.load(Ordering::SeqCst) || crate::cancel::requested() {
            return;
        }
        let conv = sh.next.fetch_add(1, Ordering::SeqCst);
        let (start, turns) = c.span(measuring, conv);
        if start >= count {
            return;
        }
        for t in 0..turns {
            let i = start + t;
            if i >= count || sh.stop.load(Ordering::SeqCst) || crate::cancel::requested() {
                return;
            }
            let slot = if sh.measuring.load(Ordering::SeqCst) {
                measured_slot(&sh, i)
            } else {
                Slot::Unmeasured(i)
            };
            let think_ms = c.think_ms(slot);
            if t > 0 && think_ms > 0.0 {
                // nothing in flight while thinking: an interrupt ends it at once
                let think = std::time::Duration::from_secs_f64(think_ms / 1000.0);
                tokio::select! {
                    _ = tokio::time::sleep(think) => {}
                    _ = crate::cancel::wait() => return,
                }
            }
            let Some(sent) = one_request(&sh, run_start, None, false, slot).await else {
                return; // interrupted: not recorded
            };
            keep(&sh, i, sent, count);
        }
    }
}

/// The index in the run's request sequence of the `local`-th measured request this perfgate
/// process sends (0-based over every look): what picks its prompt-set entry.
///
/// load shard: global request index. Identity while one process sends every request; a load
/// shard I/N (`share`: worker I sending global indices I-1, I-1+N, ...) maps `local` to
/// `(I - 1) + local * N`, and the workers together send the requests one process would.
pub fn request_index(share: Option<crate::config::load_shard::LoadShare>, local: usize) -> usize {
    share.map_or(local, |s| s.global_index(local))
}

/// What the request in `slot` sends when the scenario varies its requests, and what its record
/// keeps: a prompt set's entry ([`PromptSet::pick`](crate::config::prompt_set::PromptSet::pick)),
/// or drawn lengths ([`GenerateSpec::draw`](crate::config::generate::GenerateSpec::draw)) with
/// the prompt scaled by `scale`. `None`: the scenario's one request.
pub(super) fn varied(sc: &Scenario, scale: Scale, slot: Slot) -> Option<(RequestSpec, WorkItem)> {
    let index = match slot {
        Slot::Measured(g) | Slot::Unmeasured(g) => g as u64,
    };
    if let Some(ps) = &sc.request.prompt_set {
        let (entry, e) = ps.pick(slot);
        let r = sc.request.for_entry(e);
        let work = WorkItem {
            index,
            entry: Some(entry as u64),
            prompt_id: e.id.clone(),
            max_tokens: r.max_tokens,
            input_tokens: None,
            conversation: None,
            turn: None,
        };
        return Some((r, work));
    }
    if let Some(t) = &sc.load.trace {
        return Some(traced(sc, t, scale, slot, index));
    }
    if let Some(c) = &sc.request.conversation {
        let r = sc.request.for_turn(c, slot, scale.per_word);
        let t = c.turn_of(slot);
        let work = WorkItem {
            index,
            entry: None,
            prompt_id: crate::config::common::short_hash(
                &serde_json::json!(r.messages).to_string(),
            ),
            max_tokens: r.max_tokens,
            input_tokens: None,
            conversation: Some(t.conversation as u64),
            turn: Some(t.turn + 1),
        };
        return Some((r, work));
    }
    let g = sc.request.generate.as_ref()?;
    let d = g.draw(slot);
    let r = sc.request.for_drawn(&d, scale.words_for(d.input_tokens));
    let work = WorkItem {
        index,
        entry: None,
        prompt_id: crate::config::common::short_hash(
            &serde_json::json!({"input_tokens": d.input_tokens, "text_seed": d.text_seed})
                .to_string(),
        ),
        max_tokens: r.max_tokens,
        input_tokens: Some(d.input_tokens),
        conversation: None,
        turn: None,
    };
    Some((r, work))
}

/// The request of a trace entry: its lengths, and a synthetic prompt scaled by `scale` whose
/// blocks follow the entry's hash ids (requests sharing a hash id share that block's text, so
/// the trace's prefix reuse is reproduced), or its own text when it has none (Azure).
fn traced(
    sc: &Scenario,
    t: &crate::config::trace::TraceSpec,
    scale: Scale,
    slot: Slot,
    index: u64,
) -> (RequestSpec, WorkItem) {
    let p = t.pick(slot);
    let e = p.item;
    let words = scale.words_for(e.input_tokens);
    let (text, id) = if e.hash_ids.is_empty() {
        let seed = crate::seeded::SplitMix64::for_item(0x0074_7261_6365, p.entry as u64).next_u64();
        (
            crate::synthetic_prompt::text_seeded(words, seed),
            serde_json::json!({"entry": p.entry, "input_tokens": e.input_tokens}),
        )
    } else {
        let per_block = ((f64::from(t.block_size) / scale.per_word).round() as u32).max(1);
        let counts = crate::synthetic_prompt::block_words(words, e.hash_ids.len(), per_block);
        let blocks: Vec<(u64, u32)> = e.hash_ids.iter().copied().zip(counts).collect();
        (
            crate::synthetic_prompt::blocks_text(&blocks),
            serde_json::json!({"hash_ids": e.hash_ids, "input_tokens": e.input_tokens}),
        )
    };
    let r = RequestSpec {
        messages: vec![crate::config::file::RawMessage {
            role: "user".into(),
            content: text.clone(),
        }],
        prompt: text,
        max_tokens: e.output_tokens,
        min_tokens: sc.request.min_tokens.map(|m| m.min(e.output_tokens)),
        ..sc.request.clone()
    };
    let work = WorkItem {
        index,
        entry: Some(p.entry as u64),
        prompt_id: crate::config::common::short_hash(&id.to_string()),
        max_tokens: e.output_tokens,
        input_tokens: Some(e.input_tokens),
        conversation: None,
        turn: None,
    };
    (r, work)
}

/// The slot of the measured request at index `i` of the current phase.
pub(super) fn measured_slot(sh: &Shared, i: usize) -> Slot {
    Slot::Measured(request_index(
        sh.scenario.load.share,
        sh.measured_before.load(Ordering::SeqCst) + i,
    ))
}

/// Sends one request of a phase (its own nonce, its re-send rules) and measures it; `None`
/// when perfgate was interrupted before it ended (then it is not recorded). `slot` says which
/// prompt-set entry it sends (a scenario without `request.prompt_set` ignores it).
pub(super) async fn one_request(
    sh: &Arc<Shared>,
    run_start: Instant,
    due: Option<Instant>,
    unmeasured: bool,
    slot: Slot,
) -> Option<Sent> {
    let sc = &sh.scenario;
    let picked = varied(sc, sh.scale, slot);
    let request = picked.as_ref().map_or(&sc.request, |(r, _)| r);
    let close_mode_at_start = sh.client.close_after_stream();
    let mut sent = send(sh, request, run_start).await?;
    let resent = sent.delivery.was_resent();
    if resent && !close_mode_at_start {
        // A pooled connection was found closed: the server may close after every stream
        // (and there was no warmup to find out); stop reusing connections after streams.
        // The requests already sent on pooled connections meet the same closed connections:
        // those re-sends are expected, not drops, and do not count against the run's trust.
        if !sh.client.close_after_stream() {
            sh.client.set_close_after_stream();
            sh.close_leftovers
                .store(sc.load.concurrency as usize, Ordering::SeqCst);
        }
        sent.delivery = Delivery::ResentBeforeCloseMode;
    } else if resent
        && sh
            .close_leftovers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        // one of the connections left in the pool from before the switch
        sent.delivery = Delivery::ResentBeforeCloseMode;
    }
    if let Some(due) = due {
        stamp_schedule(&mut sent.record, due, run_start);
    }
    if let (Some((_, work)), Slot::Measured(_)) = (picked, slot) {
        sent.record.work = Some(work);
    }
    if sc.request.temperature != Some(0.0) {
        // no answer of a random sample is compared (gate.outputs): only its hash is kept
        if let Some(o) = sent.record.output.as_mut() {
            o.forget_text();
        }
    }
    if let Some(p) = &sh.progress {
        let phase = if unmeasured {
            Phase::Unmeasured
        } else if sh.measuring.load(Ordering::SeqCst) {
            Phase::Measured
        } else {
            Phase::Warmup
        };
        p.request(phase, &sent.record);
    }
    Some(sent)
}

/// Sends `request` once on the session's client and measures it (re-sent once without
/// `stream_options` when the server refuses them); `None` when perfgate was interrupted.
pub(super) async fn send(sh: &Shared, request: &RequestSpec, run_start: Instant) -> Option<Sent> {
    let sc = &sh.scenario;
    // One nonce per request of the whole session (`cache: cold`), not per index of a phase: the
    // warmup's request i and the measured request i, or request i of two `measure` calls (an
    // A/B alternation measures one at a time), would otherwise send the same prompt, and the
    // later one would hit the prefix cache the earlier one filled.
    let nonce = format!(
        "{}-{}",
        sh.run_id,
        sh.nonce_seq.fetch_add(1, Ordering::SeqCst)
    );
    // Whether this request was already re-sent without `stream_options`.
    let mut without_stream_options = false;
    loop {
        let usage = sh.include_usage.load(Ordering::SeqCst);
        let b = body::build(
            sc.endpoint.api,
            &sc.endpoint.model,
            request,
            usage,
            Some(&nonce),
        );
        let s = tokio::select! {
            s = sh.client.send(&b, run_start) => s,
            _ = crate::cancel::grace_expired() => return None,
        };
        if s.refused == Some(RefusedField::StreamOptions) && usage && !without_stream_options {
            sh.include_usage.store(false, Ordering::SeqCst);
            sh.fallback.store(true, Ordering::SeqCst);
            without_stream_options = true;
            continue;
        }
        return Some(s);
    }
}

/// An open-loop request's scheduled time (`sched_ms`, from `run_start`) and how late it was
/// sent after it (`sched_delay_ms`).
fn stamp_schedule(record: &mut RequestRecord, due: Instant, run_start: Instant) {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let sched_ms = if due >= run_start {
        ms(due - run_start)
    } else {
        -ms(run_start - due)
    };
    record.sched_ms = Some(sched_ms);
    record.sched_delay_ms = Some((record.start_ms - sched_ms).max(0.0));
}

/// Keeps request `i`'s measurement in the phase's results, and stops the phase early when the
/// first requests of a phase of `count` all failed (a hopeless endpoint: refused, 404, 401,
/// never answering) instead of sending every remaining request, but only once those failures
/// are more than the scenario tolerates over its whole run ([`intolerable`]): a server failing
/// 60 % of requests under `gate.slo.error_rate` is measured to the end and judged, not stopped
/// as unreachable when its first few failures happen to come together.
pub(super) fn keep(sh: &Shared, i: usize, sent: Sent, count: usize) {
    if let Ok(mut r) = sh.results.lock() {
        r.push((i, sent));
        let early = (sh.scenario.load.concurrency as usize + 2).min(count);
        if r.len() >= early
            && intolerable(&sh.scenario, r.len())
            && r.iter().all(|(_, s)| s.record.failed())
        {
            sh.stop.store(true, Ordering::SeqCst);
        }
    }
    sh.completed.fetch_add(1, Ordering::SeqCst);
}

/// True when `failed` failures are more than `sc` tolerates over its whole run (its largest
/// look): above `gate.max_error_rate` of it, whatever the other requests do, so the run could
/// only end as could-not-measure. `max_error_rate` is what makes a run unmeasurable; a
/// `gate.slo.error_rate` objective lifts its default to 100 %, so failures are then judged by
/// the objective and never stop a run early.
pub fn intolerable(sc: &Scenario, failed: usize) -> bool {
    let run = sc.load.looks().last().copied().unwrap_or(0).max(1);
    failed as f64 > sc.gate.max_error_rate * run as f64
}

/// Clears a phase's counters and results before it starts.
pub(super) fn reset_phase(sh: &Shared) {
    sh.next.store(0, Ordering::SeqCst);
    sh.completed.store(0, Ordering::SeqCst);
    sh.stop.store(false, Ordering::SeqCst);
    sh.results.lock().map(|mut r| r.clear()).ok();
}

/// A phase's results in request order.
pub(super) fn take_results(sh: &Shared) -> Vec<Sent> {
    take_indexed(sh).into_iter().map(|(_, s)| s).collect()
}

/// A phase's results in request order, with their indexes.
fn take_indexed(sh: &Shared) -> Vec<(usize, Sent)> {
    let mut out = sh
        .results
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    out.sort_by_key(|(i, _)| *i);
    out
}

#[cfg(test)]
mod tests {
    use super::{arrivals, shard_arrivals};
    use crate::config::load_shard::LoadShare;
    use crate::config::shard::Shard;
    use crate::synthetic_prompt::block_words;

    #[test]
    fn load_shards_arrivals_together_are_the_unsharded_schedule() {
        let whole = arrivals(40.0, 7, 103);
        let mut merged: Vec<f64> = Vec::new();
        for index in 1..=4 {
            let shard = Shard { index, count: 4 };
            let share = LoadShare {
                shard,
                total_concurrency: 8,
                total_samples: 103,
                total_rate: Some(40.0),
                start_at_unix_ms: None,
            };
            let count = crate::config::load_shard::share(103, shard) as usize;
            let mine = shard_arrivals(10.0, 7, count, Some(share));
            // worker 2 takes the whole schedule's arrivals 1, 5, 9, ...
            if index == 2 {
                assert_eq!(&mine[..3], &[whole[1], whole[5], whole[9]]);
            }
            merged.extend(mine);
        }
        merged.sort_by(f64::total_cmp);
        assert_eq!(merged, whole);
        assert_eq!(shard_arrivals(10.0, 7, 5, None), arrivals(10.0, 7, 5));
        // the prompt-set entry / trace entry a worker's request takes: worker 3 of 4's third
        // measured request is the scenario's request 2 x 4 + 2 = 10
        let share = LoadShare {
            shard: Shard { index: 3, count: 4 },
            total_concurrency: 8,
            total_samples: 103,
            total_rate: None,
            start_at_unix_ms: None,
        };
        assert_eq!(super::request_index(Some(share), 2), 10);
        assert_eq!(super::request_index(None, 2), 2);
    }

    #[test]
    fn block_words_by_hand() {
        // 1003 words in 3 blocks of 481: 481, 481, 41
        assert_eq!(block_words(1003, 3, 481), [481, 481, 41]);
        // 950 words: the last block keeps 1 and the second gives up 13 (481 + 481 + 1 - 950)
        assert_eq!(block_words(950, 3, 481), [481, 468, 1]);
        // too few words for the blocks: every block keeps at least 1
        assert_eq!(block_words(2, 3, 481), [1, 1, 1]);
        assert_eq!(block_words(700, 1, 481), [700]);
        assert!(block_words(5, 0, 481).is_empty());
        for (w, k) in [(1003u32, 3usize), (950, 3), (10, 2), (4000, 8)] {
            assert_eq!(block_words(w, k, 481).iter().sum::<u32>(), w.max(k as u32));
        }
    }

    #[test]
    fn poisson_arrivals_are_seeded_increasing_and_at_the_rate() {
        let a = arrivals(50.0, 1, 20_000);
        assert_eq!(a, arrivals(50.0, 1, 20_000));
        assert_ne!(a[..10], arrivals(50.0, 2, 10)[..]);
        assert!(a[0] > 0.0 && a.windows(2).all(|w| w[1] > w[0]));
        let rate = a.len() as f64 / a[a.len() - 1];
        assert!((rate - 50.0).abs() < 2.0, "{rate}");
    }
}
