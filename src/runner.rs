//! Runs one scenario: warmup requests (discarded), then `samples` measured requests in a closed
//! loop of `concurrency` workers, each refilling its slot the moment its request ends; or, with
//! `load.rate`, in an open loop: request i is due at the i-th arrival of a seeded Poisson process
//! and is sent at max(due, a slot of the `concurrency` cap free), keeping its scheduled time.
//!
//! Bounded: exactly `warmup + samples` requests (plus at most one retry when the server rejects
//! `stream_options`), each bounded by the endpoint's timeouts. A run whose first requests all
//! fail (refused, 404, 401, no answer), more of them than `gate.max_error_rate` allows over
//! the whole run, stops early: the endpoint is not usable.
//!
//! perfgate's own delays stay out of the numbers: after the warmup, the connection pool is
//! filled to `concurrency` connections ([`StreamClient::warm_pool`]) so the first measured wave
//! does not pay TCP/TLS setup inside its TTFTs; and while measuring, a [`LagProbe`] records how
//! late the runtime wakes a task, so a client too busy to read its sockets on time is reported
//! ([`CLIENT_LAG_WARN_MS`]) instead of passing as a slow server.

use crate::client::body;
use crate::client::http::{Delivery, RefusedField, Sent, StreamClient};
use crate::config::Scenario;
use crate::record::{FailureClass, RequestRecord};
use crate::summary::ClientLag;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one run of a scenario produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Measured requests, ordered by start time.
    pub records: Vec<RequestRecord>,
    /// Wall time of the measured phase, ms.
    pub wall_ms: f64,
    /// RFC 3339 UTC start of the measured phase.
    pub started_at: String,
    /// `model` the server reported.
    pub model: Option<String>,
    /// `system_fingerprint` the server reported.
    pub system_fingerprint: Option<String>,
    /// `Server` header.
    pub server: Option<String>,
    /// True when the server rejected `stream_options` and the run continued without it.
    pub stream_options_fallback: bool,
    /// Set when the run stopped early because the endpoint was unreachable.
    pub unreachable: Option<String>,
    /// Warmup requests that failed.
    pub warmup_failures: u32,
    /// Measured requests sent twice because the server closed a reused connection first.
    pub retried: u32,
    /// Sequential sampling: the sample counts at which the run was evaluated.
    pub looks: Vec<usize>,
    /// The warmup requests (not measured; kept to diagnose a run that stopped after them).
    pub warmup_records: Vec<RequestRecord>,
    /// Sequential sampling: why the run stopped where it did.
    pub stop_reason: Option<String>,
    /// Event-loop lag of the client during the measured phase, ms (see [`LagProbe`]); `None`
    /// when nothing was measured long enough for one probe wakeup.
    pub client_lag: Option<ClientLag>,
    /// The server closed its connection after every streamed response (llama-server does), so
    /// each request opened a new one (see [`StreamClient::set_close_after_stream`]).
    pub closes_after_stream: bool,
    /// Measured requests re-sent before perfgate switched to `Connection: close` (a server that
    /// closes after each stream, found without a warmup): expected, not counted in `retried`.
    pub resent_before_close_mode: u32,
    /// The server perfgate started or waited for (`server:`, `endpoint.wait_ready`).
    pub server_side: Option<crate::server::ServerReport>,
    /// The model ids `GET <base>/models` listed before the warmup; `None` when it did not
    /// answer with a list.
    pub listed_models: Option<Vec<String>>,
    /// `request.prompt_tokens`: the synthetic prompt fitted before the warmup.
    pub prompt_fit: Option<crate::prompt_fit::PromptFit>,
    /// Server-side figures left out, and why (a `/metrics` counter that went down, a value no
    /// server means): notes of the scenario.
    pub metrics_dropped: Vec<String>,
}

impl RunOutput {
    /// A run with no requests (for scenarios that could not start).
    pub fn empty() -> Self {
        RunOutput {
            records: Vec::new(),
            wall_ms: 0.0,
            started_at: String::new(),
            model: None,
            system_fingerprint: None,
            server: None,
            stream_options_fallback: false,
            unreachable: None,
            warmup_failures: 0,
            retried: 0,
            looks: Vec::new(),
            stop_reason: None,
            warmup_records: Vec::new(),
            client_lag: None,
            closes_after_stream: false,
            resent_before_close_mode: 0,
            server_side: None,
            listed_models: None,
            prompt_fit: None,
            metrics_dropped: Vec::new(),
        }
    }
}

/// Largest share of measured requests that may need a re-send (dropped before any response)
/// before the run is not trusted: an occasional keep-alive race is normal, a server that drops
/// requests is not.
pub const MAX_RESENT_SHARE: f64 = 0.05;

impl RunOutput {
    /// When too many requests were dropped before any response and re-sent, why the run cannot
    /// be trusted.
    pub fn resent_problem(&self) -> Option<String> {
        let n = self.records.len().max(1);
        let allowed = ((n as f64) * MAX_RESENT_SHARE).floor().max(1.0) as u32;
        (self.retried > allowed).then(|| {
            format!(
                "{} of {} requests were dropped by the server before any response and had to be re-sent (more than {:.0}%): the endpoint is dropping requests",
                self.retried,
                n,
                MAX_RESENT_SHARE * 100.0
            )
        })
    }
}

struct Shared {
    client: StreamClient,
    scenario: Scenario,
    include_usage: AtomicBool,
    fallback: AtomicBool,
    stop: AtomicBool,
    next: AtomicUsize,
    completed: AtomicUsize,
    results: Mutex<Vec<(usize, Sent)>>,
    run_id: String,
    /// Requests sent so far in the session (warmup and measured): the `cache: cold` nonce's
    /// counter, so no two requests of a session share a prompt.
    nonce_seq: AtomicU64,
    /// Live progress display, when the caller passed one to [`Session::start_with`].
    progress: Option<Arc<dyn Progress>>,
    /// False during warmup, true once measured requests are sent (for `progress`).
    measuring: AtomicBool,
    /// Once perfgate switched to `Connection: close`: how many more re-sends are still expected
    /// (a request may take an idle pooled connection that carried a stream before the switch,
    /// which the server is closing; at most one per pooled connection, i.e. `concurrency`).
    close_leftovers: AtomicUsize,
}

/// A live view of a measuring session (the terminal's progress line). Called from the workers:
/// implementations must be cheap and must not block.
pub trait Progress: Send + Sync {
    /// A session of `sc` starts (its warmup requests come first).
    fn start(&self, sc: &Scenario);
    /// One request of `phase` ended.
    fn request(&self, phase: Phase, record: &RequestRecord);
    /// The session ended (its requests are done).
    fn finish(&self);
}

impl std::fmt::Debug for dyn Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// Which phase of a session a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A warmup request (discarded).
    Warmup,
    /// A measured request.
    Measured,
}

/// Interval of the client-lag probe's sleeps (one wakeup per interval while measuring).
pub const LAG_PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// P99 client lag above which a scenario gets the "client busy" note, ms: a client that wakes
/// its tasks this late may stamp tokens this late, which shows up as TTFT/ITL the server did
/// not cause.
pub const CLIENT_LAG_WARN_MS: f64 = 10.0;
/// Lag samples kept per session for the quantiles (all up to this many, about 2.7 minutes of
/// wakeups; a uniform reservoir sample beyond), so a long run stays bounded in memory.
pub const LAG_RESERVOIR: usize = 16_384;

/// The lag samples of one probe.
struct LagRecorder {
    kept: Vec<f64>,
    seen: u64,
    max: f64,
    rng: rand::rngs::StdRng,
}

impl LagRecorder {
    fn push(&mut self, lag_ms: f64) {
        use rand::Rng;
        self.seen += 1;
        self.max = self.max.max(lag_ms);
        if self.kept.len() < LAG_RESERVOIR {
            self.kept.push(lag_ms);
        } else {
            // Algorithm R: every wakeup so far is kept with the same probability.
            let j = self.rng.random_range(0..self.seen);
            if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.kept.get_mut(j)) {
                *slot = lag_ms;
            }
        }
    }
}

/// Event-loop lag probe: a task on the current tokio runtime sleeps `interval` in a loop and
/// records how late each wakeup was (actual minus due time, ms). A runtime whose threads are
/// busy (too many streams to parse, a blocked thread, a starved machine) wakes it late, and
/// wakes the measuring tasks just as late, so their timestamps then carry client-side delay.
/// The probe's own cost is one timer per interval. Samples accumulate over `start`/`stop`
/// cycles (the looks of a session); memory is bounded by [`LAG_RESERVOIR`].
pub struct LagProbe {
    interval: Duration,
    rec: Arc<Mutex<LagRecorder>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl LagProbe {
    /// A stopped probe that will sleep `interval` (at least 1 ms) between wakeups.
    pub fn new(interval: Duration) -> LagProbe {
        use rand::SeedableRng;
        LagProbe {
            interval: interval.max(Duration::from_millis(1)),
            rec: Arc::new(Mutex::new(LagRecorder {
                kept: Vec::new(),
                seen: 0,
                max: 0.0,
                rng: rand::rngs::StdRng::seed_from_u64(0x1a9),
            })),
            task: None,
        }
    }

    /// Starts probing on the current tokio runtime (must be called inside one); no-op when
    /// already running.
    pub fn start(&mut self) {
        if self.task.is_some() {
            return;
        }
        let rec = Arc::clone(&self.rec);
        let interval = self.interval;
        self.task = Some(tokio::spawn(async move {
            loop {
                let due = Instant::now() + interval;
                tokio::time::sleep_until(due.into()).await;
                let late = Instant::now().saturating_duration_since(due);
                if let Ok(mut r) = rec.lock() {
                    r.push(late.as_secs_f64() * 1000.0);
                }
            }
        }));
    }

    /// Stops probing (the samples are kept).
    pub fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }

    /// P50, P99 (type 7 over the kept samples), max and count of the wakeup lags, ms rounded to
    /// 0.001; `None` before the first wakeup.
    pub fn summary(&self) -> Option<ClientLag> {
        let r = self.rec.lock().ok()?;
        if r.seen == 0 {
            return None;
        }
        let mut xs = r.kept.clone();
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| crate::stats::quantile::quantile_type7(&xs, p).unwrap_or(r.max);
        Some(ClientLag {
            p50: crate::units::round3(q(0.5)),
            p99: crate::units::round3(q(0.99)),
            max: crate::units::round3(r.max),
            samples: r.seen,
        })
    }
}

impl Drop for LagProbe {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A measuring session: warmup done, measured requests added in one or more looks, all on one
/// client (connection pool) and one clock origin.
pub struct Session {
    shared: Arc<Shared>,
    warm: Vec<Sent>,
    measured: Vec<Sent>,
    started_at: String,
    run_start: Instant,
    unreachable: Option<String>,
    /// Runs only while measured requests are sent.
    probe: LagProbe,
    /// What `GET <base>/models` listed before the warmup.
    listed_models: Option<Vec<String>>,
    /// `request.prompt_tokens`: the synthetic prompt fitted before the warmup.
    prompt_fit: Option<crate::prompt_fit::PromptFit>,
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
        let shared = Arc::new(Shared {
            client,
            scenario,
            include_usage: AtomicBool::new(sc.endpoint.include_usage),
            fallback: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            next: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            results: Mutex::new(Vec::new()),
            progress,
            measuring: AtomicBool::new(false),
            close_leftovers: AtomicUsize::new(0),
            nonce_seq: AtomicU64::new(0),
            run_id: format!(
                "{:x}",
                std::process::id() as u64
                    ^ std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64)
                    ^ rand_seed()
            ),
        });
        if let Some(p) = &shared.progress {
            p.start(sc);
        }
        let warm = phase(&shared, sc.load.warmup as usize, Instant::now()).await;
        // Two or more warmup requests that all failed, more than the scenario tolerates over
        // its run ([`intolerable`]), or connections refused: the endpoint is not usable.
        let unreachable = unreachable_reason(&warm).filter(|_| {
            (warm.len() >= 2 && intolerable(sc, warm.len()))
                || warm.iter().all(|s| {
                    s.record.error.as_ref().is_some_and(|e| {
                        matches!(
                            e.class,
                            FailureClass::Connect | FailureClass::TimeoutConnect
                        )
                    })
                })
        });
        // A server that closes its connection after each stream (llama-server) would have the
        // next request find its pooled connection closed: ask for `Connection: close` instead.
        let streamed: Vec<std::net::SocketAddr> = warm
            .iter()
            .filter(|s| s.record.ok())
            .filter_map(|s| s.conn)
            .collect();
        if unreachable.is_none()
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
            warm,
            measured: Vec::new(),
            started_at: crate::clock::now_rfc3339(),
            run_start: Instant::now(),
            unreachable,
            probe: LagProbe::new(LAG_PROBE_INTERVAL),
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
            self.started_at = crate::clock::now_rfc3339();
            self.run_start = Instant::now();
        }
        self.probe.start();
        let m = phase(&self.shared, n, self.run_start).await;
        self.probe.stop();
        self.absorb(m);
    }

    /// Adds measured requests; when every one so far failed, the endpoint is unreachable. No
    /// request (an interleaved run stopped before this arm sent one) changes nothing: the reason
    /// the warmup found is kept, not replaced by "none".
    fn absorb(&mut self, m: Vec<Sent>) {
        if self.unreachable.is_none()
            && m.iter().all(|s| !s.record.ok())
            && self.measured.iter().all(|s| !s.record.ok())
        {
            self.unreachable = unreachable_reason(&m);
        }
        self.measured.extend(m);
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
            metrics_dropped: Vec::new(),
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

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(1);
    h.finish()
}

/// When every request so far failed, the reason: the first message (a connect failure is
/// reported as is; other classes say that every request failed). `None` otherwise.
fn unreachable_reason(sent: &[Sent]) -> Option<String> {
    let errors: Vec<_> = sent
        .iter()
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

async fn phase(shared: &Arc<Shared>, count: usize, run_start: Instant) -> Vec<Sent> {
    if count == 0 {
        return Vec::new();
    }
    reset_phase(shared);
    let workers = (shared.scenario.load.concurrency as usize).min(count);
    // Open loop: request i is due at phase start + the i-th Poisson arrival; a worker (a slot of
    // the concurrency cap) sends it at max(due, slot free).
    let schedule: Option<Arc<Vec<Instant>>> = shared.scenario.load.rate.map(|rate| {
        let start = Instant::now();
        let seed = shared.scenario.load.seed.unwrap_or(0);
        Arc::new(
            arrivals(rate, seed, count)
                .into_iter()
                .map(|s| start + std::time::Duration::from_secs_f64(s))
                .collect(),
        )
    });
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
        let Some(sent) = one_request(&sh, run_start, due).await else {
            return; // interrupted: not recorded
        };
        keep(&sh, i, sent, count);
    }
}

/// Sends one request of a phase (its own nonce, its re-send rules) and measures it; `None`
/// when perfgate was interrupted before it ended (then it is not recorded).
async fn one_request(sh: &Arc<Shared>, run_start: Instant, due: Option<Instant>) -> Option<Sent> {
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
    let close_mode_at_start = sh.client.close_after_stream();
    // Whether this request was already re-sent without `stream_options`.
    let mut without_stream_options = false;
    let sent = loop {
        let usage = sh.include_usage.load(Ordering::SeqCst);
        let b = body::build(
            sc.endpoint.api,
            &sc.endpoint.model,
            &sc.request,
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
        break s;
    };
    let mut sent = sent;
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
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        let sched_ms = if due >= run_start {
            ms(due - run_start)
        } else {
            -ms(run_start - due)
        };
        sent.record.sched_ms = Some(sched_ms);
        sent.record.sched_delay_ms = Some((sent.record.start_ms - sched_ms).max(0.0));
    }
    if let Some(p) = &sh.progress {
        let phase = if sh.measuring.load(Ordering::SeqCst) {
            Phase::Measured
        } else {
            Phase::Warmup
        };
        p.request(phase, &sent.record);
    }
    Some(sent)
}

/// Keeps request `i`'s measurement in the phase's results, and stops the phase early when the
/// first requests of a phase of `count` all failed (a hopeless endpoint: refused, 404, 401,
/// never answering) instead of sending every remaining request, but only once those failures
/// are more than the scenario tolerates over its whole run ([`intolerable`]): a server failing
/// 60 % of requests under `gate.slo.error_rate` is measured to the end and judged, not stopped
/// as unreachable when its first few failures happen to come together.
fn keep(sh: &Shared, i: usize, sent: Sent, count: usize) {
    if let Ok(mut r) = sh.results.lock() {
        r.push((i, sent));
        let early = (sh.scenario.load.concurrency as usize + 2).min(count);
        if r.len() >= early
            && intolerable(&sh.scenario, r.len())
            && r.iter().all(|(_, s)| !s.record.ok())
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
fn reset_phase(sh: &Shared) {
    sh.next.store(0, Ordering::SeqCst);
    sh.completed.store(0, Ordering::SeqCst);
    sh.stop.store(false, Ordering::SeqCst);
    sh.results.lock().map(|mut r| r.clear()).ok();
}

/// A phase's results in request order.
fn take_results(sh: &Shared) -> Vec<Sent> {
    let mut out = sh
        .results
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, s)| s).collect()
}

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
            if let Some(sent) = one_request(&sh, start, None).await {
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

#[cfg(test)]
mod tests {
    use super::{arrivals, LagProbe, LAG_RESERVOIR};

    #[test]
    fn lag_samples_are_bounded_and_summarised() {
        let p = LagProbe::new(std::time::Duration::from_millis(10));
        assert_eq!(p.summary(), None);
        let n = 3 * LAG_RESERVOIR as u64;
        if let Ok(mut r) = p.rec.lock() {
            // 1 % of the wakeups 20 ms late, the rest 1 ms; one 250 ms stall
            for i in 0..n {
                r.push(if i % 100 == 0 { 20.0 } else { 1.0 });
            }
            r.push(250.0);
            assert_eq!(r.kept.len(), LAG_RESERVOIR);
        }
        let s = p.summary().unwrap();
        assert_eq!(s.samples, n + 1);
        assert_eq!(s.max, 250.0);
        assert_eq!(s.p50, 1.0);
        // the reservoir keeps ~1 % of 20 ms values: P99 falls near the boundary
        assert!((1.0..=20.0).contains(&s.p99), "{s:?}");
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
