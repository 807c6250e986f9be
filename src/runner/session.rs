//! A measuring session: the client and its connection pool, the warmup and what it showed
//! (an unusable endpoint, a server that closes after each stream), the measured requests of one
//! or more looks on one clock origin, and the [`RunOutput`] they make.

use super::lag::{LagProbe, LAG_PROBE_INTERVAL};
use super::output::RunOutput;
use super::output::SteadyCounts;
use super::phase::{intolerable, phase, steady_phase, Shared};
use super::progress::Progress;
use crate::client::http::{Delivery, Sent, StreamClient};
use crate::config::Scenario;
use crate::record::{FailureClass, RequestRecord};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A measuring session: warmup done, measured requests added in one or more looks, all on one
/// client (connection pool) and one clock origin.
pub struct Session {
    pub(super) shared: Arc<Shared>,
    pub(super) warm: Vec<Sent>,
    pub(super) measured: Vec<Sent>,
    pub(super) started_at: String,
    pub(super) run_start: Instant,
    /// `run_start` as ms since the Unix epoch (merging load shards aligns workers by it).
    pub(super) started_unix_ms: f64,
    /// A load shard's `--start-at`: how late the measured requests started after it, ms (0:
    /// on time).
    pub(super) late_ms: Option<f64>,
    pub(super) unreachable: Option<String>,
    /// Runs only while measured requests are sent.
    pub(super) probe: LagProbe,
    /// What `GET <base>/models` listed before the warmup.
    pub(super) listed_models: Option<Vec<String>>,
    /// `request.prompt_tokens`: the synthetic prompt fitted before the warmup.
    pub(super) prompt_fit: Option<crate::prompt_fit::PromptFit>,
    /// `request.generate`: the synthetic prompt's scale fitted before the warmup.
    pub(super) length_fit: Option<crate::prompt_fit::LengthFit>,
    /// Steady-state looks: their unmeasured ramp-up and drain requests.
    pub(super) steady: SteadyCounts,
    /// Steady-state looks: their ramp-up's and drain's (start, end), ms from `run_start`.
    pub(super) unmeasured_spans: Vec<(f64, f64)>,
    /// `request.conversation`: the cold reference, once [`Session::cache_reference`] sent it.
    pub(super) reference: Vec<crate::record::ReferencePair>,
    /// `gate.outputs`: the measured requests [`Session::repeat`] sent again.
    pub(super) repeats: Vec<RequestRecord>,
}

impl Session {
    /// Builds the client, sends the warmup requests (discarded), checks whether the server keeps
    /// a connection open after a stream ([`StreamClient::keeps_alive_after_stream`]), then
    /// warms the connection pool to `concurrency` connections when the warmup did not open
    /// that many ([`StreamClient::warm_pool`]). Neither check nor warming is recorded or
    /// counted as a request or a failure.
    ///
    /// Errors: only when the client cannot be built (bad URL); request failures are recorded.
    pub async fn start(
        sc: &Scenario,
        base_url: &str,
    ) -> Result<Session, crate::client::http::ClientError> {
        Session::start_with(sc, base_url, None).await
    }

    /// [`Session::start`], reporting every request to `progress` (a live display) when given.
    pub async fn start_with(
        sc: &Scenario,
        base_url: &str,
        progress: Option<Arc<dyn Progress>>,
    ) -> Result<Session, crate::client::http::ClientError> {
        let client = StreamClient::new(&sc.endpoint, base_url, sc.load.concurrency as usize)?;
        // What the server offers, for messages (a wrong or unlisted model name); not a request.
        let listed_models = if crate::cancel::requested() {
            None
        } else {
            client.list_models().await
        };
        // `request.prompt_tokens`: fit the synthetic prompt in this run's copy of the scenario.
        let mut scenario = sc.clone();
        let prompt_fit = match sc.request.prompt_tokens {
            Some(n) if !crate::cancel::requested() => {
                Some(crate::prompt_fit::fit(&client, &mut scenario, n).await)
            }
            _ => None,
        };
        // `request.generate`: fit the synthetic prompt's scale (tokens per filler word).
        // A trace: the same, at its measured requests' prompt lengths; AIPerf sessions at
        // their messages'.
        let needed = sc.load.looks().last().copied().unwrap_or(0);
        let sessions = sc
            .request
            .conversation
            .as_ref()
            .and_then(|c| c.fit_points());
        let points = match (&sc.request.generate, &sc.load.trace) {
            (Some(g), _) => Some(g.fit_points()),
            (None, Some(t)) => Some(t.fit_points(needed)),
            _ => sessions,
        };
        let length_fit = match points {
            Some(p) if !crate::cancel::requested() => {
                Some(crate::prompt_fit::fit_scale(&client, sc, &p).await)
            }
            _ => None,
        };
        let mut shared = Shared::new(client, scenario, progress, run_id());
        if let Some(s) = length_fit.as_ref().and_then(|f| f.scale) {
            shared.scale = s;
        }
        let shared = Arc::new(shared);
        if let Some(p) = &shared.progress {
            p.start(sc);
        }
        let warm = phase(&shared, sc.load.warmup as usize, Instant::now()).await;
        let unreachable = unusable_after_warmup(sc, &warm);
        // A server that closes its connection after each stream (llama-server) would have the
        // next request find its pooled connection closed: ask for `Connection: close` instead.
        let streamed: Vec<std::net::SocketAddr> = warm
            .iter()
            .filter(|s| s.record.ok())
            .filter_map(|s| s.conn)
            .collect();
        // The built-in simulator (`sim://`) keeps its connections alive (hyper's keep-alive): it
        // is not probed, so a loaded machine's slow pool cannot make it look like one that
        // closes (the probe misjudged it twice on a busy CI box).
        let builtin_sim = matches!(sc.endpoint.target, crate::config::Target::Sim(_));
        if unreachable.is_none()
            && !builtin_sim
            && !crate::cancel::requested()
            && !streamed.is_empty()
            && shared.client.keeps_alive_after_stream(&streamed).await == Some(false)
        {
            shared.client.set_close_after_stream();
            shared
                .close_leftovers
                .store(sc.load.concurrency as usize, Ordering::SeqCst);
        }
        // The warmup ran min(warmup, concurrency) workers, so it opened at most that many
        // connections (and a failed request may have lost its own). Fill the pool up to
        // `concurrency`, so the first measured wave does not open connections inside its
        // TTFTs. Not for an endpoint found unusable, nor after Ctrl-C.
        let concurrency = sc.load.concurrency as usize;
        let warm_workers = (sc.load.warmup as usize).min(concurrency);
        if unreachable.is_none()
            && !crate::cancel::requested()
            && (warm_workers < concurrency || warm.iter().any(|s| !s.record.ok()))
        {
            shared.client.warm_pool(concurrency).await;
        }
        Ok(Session {
            shared,
            listed_models,
            prompt_fit,
            length_fit,
            warm,
            measured: Vec::new(),
            started_at: crate::clock::now_rfc3339(),
            run_start: Instant::now(),
            started_unix_ms: crate::config::load_shard::now_unix_ms(),
            late_ms: None,
            unreachable,
            probe: LagProbe::new(LAG_PROBE_INTERVAL),
            steady: SteadyCounts::default(),
            unmeasured_spans: Vec::new(),
            reference: Vec::new(),
            repeats: Vec::new(),
        })
    }

    /// Sends `n` more measured requests (closed loop at the scenario's concurrency).
    /// Does nothing once the endpoint was found unreachable.
    pub async fn measure(&mut self, n: usize) {
        if self.unreachable.is_some() || n == 0 {
            return;
        }
        self.shared.measuring.store(true, Ordering::SeqCst);
        if self.measured.is_empty() {
            if let Some(at) = self
                .shared
                .scenario
                .load
                .share
                .and_then(|s| s.start_at_unix_ms)
            {
                self.late_ms = Some(wait_until_unix_ms(at).await);
            }
            self.started_at = crate::clock::now_rfc3339();
            self.started_unix_ms = crate::config::load_shard::now_unix_ms();
            self.run_start = Instant::now();
        }
        self.probe.start();
        self.shared
            .measured_before
            .store(self.measured.len(), Ordering::SeqCst);
        if self.steady_looks() {
            let step = self.ramp_step();
            let look = steady_phase(&self.shared, n, self.run_start, step).await;
            self.probe.stop();
            self.steady.ramp_up += look.ramp_up.len();
            self.steady.drain += look.drain;
            self.unmeasured_spans.extend(look.unmeasured_spans);
            self.steady.step_ms = step.as_secs_f64() * 1000.0;
            if look.stopped {
                // a hopeless endpoint (its first requests all failed): every request sent is
                // recorded, the ramp-up's too, so the results show each failure
                let mut all = look.ramp_up;
                all.extend(look.measured);
                self.absorb(all);
            } else if look.measured.is_empty() && self.unreachable.is_none() {
                // interrupted in the ramp-up (Ctrl-C): its failures, if any, say why
                self.unreachable = unreachable_reason(&look.ramp_up);
            } else {
                self.absorb(look.measured);
            }
            return;
        }
        let m = phase(&self.shared, n, self.run_start).await;
        self.probe.stop();
        self.absorb(m);
    }

    /// Whether a look runs the steady-state closed loop ([`crate::config::scenario::LoadSpec::steady`]);
    /// never for conversations, whose streams start their conversations' turns one at a time.
    fn steady_looks(&self) -> bool {
        let sc = &self.shared.scenario;
        sc.load.steady() && sc.request.conversation.is_none()
    }

    /// The ramp-up's gap between two streams' starts: the warmup's median E2E over c.
    fn ramp_step(&self) -> std::time::Duration {
        let e2e: Vec<f64> = self
            .warm
            .iter()
            .filter(|s| s.record.ok())
            .filter_map(|s| s.record.e2e_ms)
            .collect();
        super::steady::ramp_step(&e2e, self.shared.scenario.load.total_concurrency() as usize)
    }

    /// Adds measured requests; when every one so far failed, the endpoint is unreachable. No
    /// request (an interleaved run stopped before this arm sent one) changes nothing: the reason
    /// the warmup found is kept, not replaced by "none".
    pub(super) fn absorb(&mut self, m: Vec<Sent>) {
        if self.unreachable.is_none()
            && m.iter().all(|s| !s.record.ok())
            && self.measured.iter().all(|s| !s.record.ok())
        {
            self.unreachable = unreachable_reason(&m);
        }
        self.measured.extend(m);
    }

    /// `request.conversation`: sends the cold reference after the measured requests
    /// ([`crate::record::ReferencePair`]): `reference` of them, spread evenly over the run in
    /// index order, on the scenario's concurrency; each pair cold, then hot. Not measured, not
    /// counted as requests; nothing when the endpoint was unreachable or perfgate interrupted.
    pub async fn cache_reference(&mut self) {
        let sc = &self.shared.scenario;
        let Some(c) = &sc.request.conversation else {
            return;
        };
        let indexes: Vec<u64> = {
            let mut ix: Vec<u64> = self
                .measured
                .iter()
                .filter(|s| s.record.ok())
                .filter_map(|s| s.record.work.as_ref().map(|w| w.index))
                .collect();
            ix.sort_unstable();
            let turn = |g: u64| {
                let slot = crate::config::common::Slot::Measured(g as usize);
                u64::from(c.turn_of(slot).turn)
            };
            super::reference::spread(&ix, c.reference as usize, c.turns as usize, &turn)
        };
        if self.unreachable.is_some() || crate::cancel::requested() || indexes.is_empty() {
            return;
        }
        let pairs = super::reference::send_pairs(&self.shared, &indexes, self.run_start).await;
        self.reference = pairs;
    }

    /// `perfgate ab`'s base arm (`gate.outputs`, docs/ab.md "Outputs that changed"): when its
    /// measured requests sent the same request again fewer than `wanted` times (a prompt set
    /// of distinct entries), that many more of its successful prompt-set requests, spread over the
    /// run, sent again one at a time after it; their records are kept apart (not measured, not
    /// counted). Nothing without request identities (every request is the same request, so the
    /// measured ones repeat it already), when unreachable or interrupted.
    pub async fn repeat(&mut self, wanted: usize) {
        let ok: Vec<&RequestRecord> = self
            .measured
            .iter()
            .map(|s| &s.record)
            .filter(|r| r.ok())
            .collect();
        if ok.iter().any(|r| r.work.is_none()) {
            return;
        }
        let distinct: std::collections::HashSet<(&str, u32)> = ok
            .iter()
            .filter_map(|r| {
                r.work
                    .as_ref()
                    .map(|w| (w.prompt_id.as_str(), w.max_tokens))
            })
            .collect();
        let natural = ok.len() - distinct.len();
        let k = wanted.saturating_sub(natural);
        let mut ix: Vec<u64> = ok
            .iter()
            .filter_map(|r| r.work.as_ref().map(|w| w.index))
            .collect();
        ix.sort_unstable();
        let ix = super::reference::spread(&ix, k, 1, &|_| 0);
        for index in ix {
            if self.unreachable.is_some() || crate::cancel::requested() {
                return;
            }
            let slot = crate::config::common::Slot::Measured(index as usize);
            match super::phase::one_request(&self.shared, self.run_start, None, true, slot).await {
                Some(s) => self.repeats.push(s.record),
                None => return,
            }
        }
    }

    /// The cold reference [`Session::cache_reference`] sent (empty before, or without one).
    pub fn reference(&self) -> &[crate::record::ReferencePair] {
        &self.reference
    }

    /// Measured requests so far.
    pub fn measured_count(&self) -> usize {
        self.measured.len()
    }

    /// True once the endpoint was found unreachable.
    pub fn is_unreachable(&self) -> bool {
        self.unreachable.is_some()
    }

    /// What the session measured so far.
    pub fn output(&self) -> RunOutput {
        let wall_ms = if self.measured.is_empty() {
            0.0
        } else {
            self.run_start.elapsed().as_secs_f64() * 1000.0
        };
        let pick = |f: &dyn Fn(&Sent) -> Option<String>| {
            self.measured.iter().chain(self.warm.iter()).find_map(f)
        };
        let mut records: Vec<RequestRecord> =
            self.measured.iter().map(|s| s.record.clone()).collect();
        records.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        RunOutput {
            records,
            wall_ms,
            started_at: self.started_at.clone(),
            model: pick(&|s: &Sent| s.model.clone()),
            system_fingerprint: pick(&|s: &Sent| s.system_fingerprint.clone()),
            server: pick(&|s: &Sent| s.server.clone()),
            stream_options_fallback: self.shared.fallback.load(Ordering::SeqCst),
            unreachable: self.unreachable.clone(),
            warmup_failures: self.warm.iter().filter(|s| !s.record.ok()).count() as u32,
            retried: self
                .measured
                .iter()
                .filter(|s| s.delivery == Delivery::Resent)
                .count() as u32,
            resent_before_close_mode: self
                .measured
                .iter()
                .filter(|s| s.delivery == Delivery::ResentBeforeCloseMode)
                .count() as u32,
            looks: Vec::new(),
            stop_reason: None,
            warmup_records: self.warm.iter().map(|s| s.record.clone()).collect(),
            client_lag: self.probe.summary(),
            closes_after_stream: self.shared.client.close_after_stream(),
            server_side: None,
            listed_models: self.listed_models.clone(),
            prompt_fit: self.prompt_fit.clone(),
            length_fit: self.length_fit.clone(),
            metrics_dropped: Vec::new(),
            steady: self.steady_looks().then_some(self.steady),
            started_unix_ms: self.started_unix_ms,
            late_ms: self.late_ms,
            unmeasured_spans: self.unmeasured_spans.clone(),
            cache_reference: self.reference.clone(),
            repeats: self.repeats.clone(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(p) = &self.shared.progress {
            p.finish();
        }
    }
}

/// Runs `sc` against `base_url` (the scenario's own URL, or the in-process simulator's):
/// warmup, then `samples` measured requests.
///
/// Errors: only when the client cannot be built (bad URL); every request failure is recorded.
pub async fn run(
    sc: &Scenario,
    base_url: &str,
) -> Result<RunOutput, crate::client::http::ClientError> {
    let mut s = Session::start(sc, base_url).await?;
    s.measure(sc.load.samples as usize).await;
    Ok(s.output())
}

/// Sleeps until `at` (ms since the Unix epoch) or an interrupt; returns how late it is then, ms
/// (0 when `at` had not passed).
async fn wait_until_unix_ms(at: f64) -> f64 {
    let ahead = at - crate::config::load_shard::now_unix_ms();
    if ahead > 0.0 {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs_f64(ahead / 1000.0)) => {}
            _ = crate::cancel::wait() => {}
        }
    }
    (crate::config::load_shard::now_unix_ms() - at).max(0.0)
}

/// Why the endpoint is not usable after the warmup `warm`: two or more warmup requests that
/// all failed, more than the scenario tolerates over its run ([`intolerable`]), or connections
/// refused. `None`: measure.
fn unusable_after_warmup(sc: &Scenario, warm: &[Sent]) -> Option<String> {
    unreachable_reason(warm).filter(|_| {
        (warm.len() >= 2 && intolerable(sc, warm.len()))
            || warm.iter().all(|s| {
                s.record.error.as_ref().is_some_and(|e| {
                    matches!(
                        e.class,
                        FailureClass::Connect | FailureClass::TimeoutConnect
                    )
                })
            })
    })
}

/// The session's id in `cache: cold` nonces: process id, time and a random value, so two
/// sessions (or two perfgate runs) never send the same prompt.
fn run_id() -> String {
    format!(
        "{:x}",
        std::process::id() as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
            ^ rand_seed()
    )
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(1);
    h.finish()
}

/// When every request so far failed, the reason: the first message (a connect failure is
/// reported as is; other classes say that every request failed). `None` otherwise.
fn unreachable_reason(sent: &[Sent]) -> Option<String> {
    // a request the provider stopped on purpose (a refusal, a content filter) was answered
    let errors: Vec<_> = sent
        .iter()
        .filter(|s| s.record.failed())
        .filter_map(|s| s.record.error.as_ref())
        .collect();
    if sent.is_empty() || errors.len() < sent.len() {
        return None;
    }
    let first = errors[0];
    let connectish = |c: FailureClass| {
        matches!(
            c,
            FailureClass::Connect | FailureClass::TimeoutConnect | FailureClass::Tls
        )
    };
    if errors.iter().all(|e| connectish(e.class)) {
        Some(first.message.clone())
    } else {
        Some(format!(
            "every one of the first {} requests failed; the first: {}",
            sent.len(),
            first.message
        ))
    }
}
