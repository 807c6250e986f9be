//! Runs one scenario: warmup requests (discarded), then `samples` measured requests in a closed
//! loop of `concurrency` workers, each refilling its slot the moment its request ends.
//!
//! Bounded: exactly `warmup + samples` requests (plus at most one retry when the server rejects
//! `stream_options`), each bounded by the endpoint's timeouts. A run whose first requests all
//! fail to connect stops early: the endpoint is unreachable.

use crate::client::body;
use crate::client::http::{Sent, StreamClient};
use crate::config::Scenario;
use crate::record::{FailureClass, RequestRecord};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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
        }
    }
}

/// The current time as RFC 3339 UTC, second precision.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
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
}

/// Runs `sc` against `base_url` (the scenario's own URL, or the in-process simulator's).
///
/// Errors: only when the client cannot be built (bad URL); every request failure is recorded.
pub async fn run(sc: &Scenario, base_url: &str) -> Result<RunOutput, String> {
    let client = StreamClient::new(&sc.endpoint, base_url, sc.load.concurrency as usize)?;
    let shared = Arc::new(Shared {
        client,
        scenario: sc.clone(),
        include_usage: AtomicBool::new(sc.endpoint.include_usage),
        fallback: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        next: AtomicUsize::new(0),
        completed: AtomicUsize::new(0),
        results: Mutex::new(Vec::new()),
        run_id: format!(
            "{:x}",
            std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64 ^ rand_seed()
        ),
    });
    // Phase 1: warmup (discarded).
    let warm = phase(&shared, sc.load.warmup as usize, Instant::now()).await;
    let warmup_failures = warm.iter().filter(|s| !s.record.ok()).count() as u32;
    let mut unreachable = unreachable_reason(&warm);
    // Phase 2: measured.
    let started_at = now_rfc3339();
    let run_start = Instant::now();
    let measured = if unreachable.is_none() {
        let m = phase(&shared, sc.load.samples as usize, run_start).await;
        if unreachable.is_none() && m.iter().all(|s| !s.record.ok()) {
            unreachable = unreachable_reason(&m);
        }
        m
    } else {
        Vec::new()
    };
    let wall_ms = run_start.elapsed().as_secs_f64() * 1000.0;
    let pick = |f: &dyn Fn(&Sent) -> Option<String>| measured.iter().chain(warm.iter()).find_map(f);
    let model = pick(&|s: &Sent| s.model.clone());
    let system_fingerprint = pick(&|s: &Sent| s.system_fingerprint.clone());
    let server = pick(&|s: &Sent| s.server.clone());
    let retried = measured.iter().filter(|s| s.retried).count() as u32;
    let mut records: Vec<RequestRecord> = measured.into_iter().map(|s| s.record).collect();
    records.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    Ok(RunOutput {
        records,
        wall_ms,
        started_at,
        model,
        system_fingerprint,
        server,
        stream_options_fallback: shared.fallback.load(Ordering::SeqCst),
        unreachable,
        warmup_failures,
        retried,
    })
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(1);
    h.finish()
}

/// When every request so far failed to connect, the reason (the first message).
fn unreachable_reason(sent: &[Sent]) -> Option<String> {
    let connectish = |c: FailureClass| {
        matches!(
            c,
            FailureClass::Connect | FailureClass::TimeoutConnect | FailureClass::Tls
        )
    };
    if !sent.is_empty()
        && sent
            .iter()
            .all(|s| s.record.error.as_ref().is_some_and(|e| connectish(e.class)))
    {
        sent[0].record.error.as_ref().map(|e| e.message.clone())
    } else {
        None
    }
}

async fn phase(shared: &Arc<Shared>, count: usize, run_start: Instant) -> Vec<Sent> {
    if count == 0 {
        return Vec::new();
    }
    shared.next.store(0, Ordering::SeqCst);
    shared.completed.store(0, Ordering::SeqCst);
    shared.stop.store(false, Ordering::SeqCst);
    shared.results.lock().map(|mut r| r.clear()).ok();
    let workers = (shared.scenario.load.concurrency as usize).min(count);
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let sh = Arc::clone(shared);
        handles.push(tokio::spawn(
            async move { worker(sh, count, run_start).await },
        ));
    }
    for h in handles {
        let _ = h.await;
    }
    let mut out = shared
        .results
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, s)| s).collect()
}

async fn worker(sh: Arc<Shared>, count: usize, run_start: Instant) {
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let i = sh.next.fetch_add(1, Ordering::SeqCst);
        if i >= count {
            return;
        }
        let sc = &sh.scenario;
        let nonce = format!("{}-{i}", sh.run_id);
        let mut retried = false;
        let sent = loop {
            let usage = sh.include_usage.load(Ordering::SeqCst);
            let b = body::build(
                sc.endpoint.api,
                &sc.endpoint.model,
                &sc.request,
                usage,
                Some(&nonce),
            );
            let s = sh.client.send(&b, run_start).await;
            if s.rejected_stream_options && usage && !retried {
                sh.include_usage.store(false, Ordering::SeqCst);
                sh.fallback.store(true, Ordering::SeqCst);
                retried = true;
                continue;
            }
            break s;
        };
        let failed_connect = sent.record.error.as_ref().is_some_and(|e| {
            matches!(
                e.class,
                FailureClass::Connect | FailureClass::TimeoutConnect | FailureClass::Tls
            )
        });
        if let Ok(mut r) = sh.results.lock() {
            r.push((i, sent));
            // Unreachable endpoint: the first requests all failed to connect; stop early.
            let early = sc.load.concurrency as usize + 2;
            if failed_connect
                && r.len() >= early.min(count)
                && r.iter().all(|(_, s)| {
                    s.record.error.as_ref().is_some_and(|e| {
                        matches!(
                            e.class,
                            FailureClass::Connect
                                | FailureClass::TimeoutConnect
                                | FailureClass::Tls
                        )
                    })
                })
            {
                sh.stop.store(true, Ordering::SeqCst);
            }
        }
        sh.completed.fetch_add(1, Ordering::SeqCst);
    }
}
