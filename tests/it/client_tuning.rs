//! Client tuning: perfgate's own delays stay out of the numbers.
//!
//! - Pool warming: after `Session::start` at concurrency N, the connection pool already holds N
//!   connections, so the first measured wave (N requests at once) opens none: counted by the
//!   client and by a TCP proxy in front of the built-in simulator, which also sees whether a
//!   new connection carried a measured request.
//! - Client lag: a probe on the runtime records how late its 10 ms wakeups are; a runtime that is
//!   deliberately blocked shows lag above the threshold and the "client busy" note; a real run
//!   against the simulator reports the probe's figures, and the note exactly when they are over.
//!
//! The tests here measure timing and connection reuse, so they run one at a time ([`SERIAL`]).
//! They count requests and connections per wave, so their scenarios use `load.ramp: burst`
//! (every request sent is measured, a wave starts at once); the steady state's ramp-up and
//! drain are tested in tests/it/steady.rs.

use perfgate::client::http::WARM_PASSES;
use perfgate::runner::{LagProbe, Session, CLIENT_LAG_WARN_MS, LAG_PROBE_INTERVAL};
use perfgate::sim::{SimConfig, SimServer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Held by every test of this file: a concurrent test would load the 2-core runner and bend the
/// timing the others measure.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A TCP proxy on 127.0.0.1 in front of a server, counting the connections it accepts and,
/// once `measuring` is set, the new connections that carried a request.
struct Proxy {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    measuring: Arc<AtomicBool>,
    /// Connections accepted while `measuring` that then carried request bytes.
    new_used: Arc<AtomicUsize>,
}

async fn counting_proxy(target: SocketAddr) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let p = Proxy {
        addr: listener.local_addr().unwrap(),
        accepted: Arc::default(),
        measuring: Arc::default(),
        new_used: Arc::default(),
    };
    let (accepted, measuring, new_used) = (
        Arc::clone(&p.accepted),
        Arc::clone(&p.measuring),
        Arc::clone(&p.new_used),
    );
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                continue;
            };
            accepted.fetch_add(1, Ordering::SeqCst);
            let opened_measuring = measuring.load(Ordering::SeqCst);
            let new_used = Arc::clone(&new_used);
            let _ = inbound.set_nodelay(true);
            tokio::spawn(async move {
                let mut first = [0u8; 1];
                if matches!(inbound.peek(&mut first).await, Ok(n) if n > 0) && opened_measuring {
                    new_used.fetch_add(1, Ordering::SeqCst);
                }
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    p
}

fn scenario(base_url: &str, load: &str) -> perfgate::config::Scenario {
    let yaml = format!(
        "scenarios:\n  - name: s\n    endpoint: {{base_url: '{base_url}', model: perfgate-sim}}\n    request: {{prompt: hi, max_tokens: 4, ignore_eos: true}}\n    load: {load}\n"
    );
    perfgate::config::parse_str(&yaml, "t.yaml", &|_| None)
        .unwrap()
        .remove(0)
}

fn fast_sim() -> SimConfig {
    SimConfig::from_query("ttft_ms=5&tpot_ms=1&ttft_sigma=0&tpot_sigma=0&seed=1").unwrap()
}

/// The proxy's accept count once it has not changed for 30 ms (at most 2 s): a connection the
/// client opened may wait a moment in the listen queue before the proxy accepts it.
async fn settled(accepted: &AtomicUsize) -> usize {
    let until = std::time::Instant::now() + Duration::from_secs(2);
    let mut last = accepted.load(Ordering::SeqCst);
    loop {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let now = accepted.load(Ordering::SeqCst);
        if now == last || std::time::Instant::now() >= until {
            return now;
        }
        last = now;
    }
}

/// What a session at `concurrency` did with connections, as the proxy saw them.
#[derive(Debug)]
struct Connections {
    /// Opened by `Session::start` (warmup and pool warming).
    at_start: usize,
    /// Opened while the first measured wave (`concurrency` requests at once) ran.
    first_wave: usize,
    /// New connections accepted during the first wave that carried one of its requests: each
    /// such request paid TCP setup inside its TTFT.
    first_wave_used: usize,
    /// Opened while the later measured requests ran.
    later: usize,
    /// New connections accepted during the later requests that carried one of them.
    later_used: usize,
}

async fn connections(concurrency: u32, warmup: u32, samples: u32) -> Connections {
    let sim = SimServer::start(fast_sim(), 0).await.unwrap();
    let proxy = counting_proxy(sim.addr()).await;
    let base = format!("http://{}/v1", proxy.addr);
    let sc = scenario(
        &base,
        &format!(
            "{{concurrency: {concurrency}, warmup: {warmup}, samples: {samples}, ramp: burst}}"
        ),
    );
    let mut session = Session::start(&sc, &base).await.unwrap();
    let at_start = settled(&proxy.accepted).await;
    proxy.measuring.store(true, Ordering::SeqCst);
    // the first wave: `concurrency` requests at once, then the rest
    session.measure(concurrency as usize).await;
    let after_wave = settled(&proxy.accepted).await;
    let first_wave_used = proxy.new_used.load(Ordering::SeqCst);
    session.measure((samples - concurrency) as usize).await;
    let out = session.output();
    assert_eq!(out.records.len(), samples as usize);
    assert!(out.records.iter().all(|r| r.ok()), "{:?}", out.records[0]);
    assert_eq!(out.warmup_failures, 0);
    assert_eq!(out.retried, 0);
    let at_end = settled(&proxy.accepted).await;
    Connections {
        at_start,
        first_wave: after_wave - at_start,
        first_wave_used,
        later: at_end - after_wave,
        later_used: proxy.new_used.load(Ordering::SeqCst) - first_wave_used,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_is_warm_before_the_first_measured_request() {
    let _serial = SERIAL.lock().await;
    // concurrency 32, 2 warmup requests: without warming, the first measured wave opened 30
    // connections inside its TTFTs (and, without draining the body after [DONE], ~10 more
    // later as requests lost their connection).
    let c = connections(32, 2, 96).await;
    assert!(c.at_start >= 32, "{c:?}");
    assert_eq!(c.first_wave, 0, "{c:?}");
    assert_eq!(c.first_wave_used, 0, "{c:?}");
    // Later requests reuse the same connections. A worker can ask for its next connection
    // before the previous one is back in the pool (a task of its own hands it back); on a
    // starved machine that rarely opens one, never in a quiet run. What matters is the request
    // that pays TCP setup (later_used); the client may open one more that no request uses
    // (seen once in a loaded CI run: later 2, later_used 1).
    assert!(c.later <= 2 && c.later_used <= 1, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_is_warmed_without_warmup_requests() {
    let _serial = SERIAL.lock().await;
    let c = connections(8, 0, 24).await;
    assert!(c.at_start >= 8, "{c:?}");
    assert_eq!(c.first_wave, 0, "{c:?}");
    assert_eq!(c.first_wave_used, 0, "{c:?}");
    // as above: at most one later request pays TCP setup; one more unused connection may open
    assert!(c.later <= 2 && c.later_used <= 1, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_warming_is_not_counted_as_requests() {
    let _serial = SERIAL.lock().await;
    let sim = SimServer::start(fast_sim(), 0).await.unwrap();
    let sc = scenario(
        &sim.base_url(),
        "{concurrency: 6, warmup: 1, samples: 20, ramp: burst}",
    );
    let mut session = Session::start(&sc, &sim.base_url()).await.unwrap();
    let served = sim.requests_served();
    let url = reqwest::Url::parse(&sim.base_url()).unwrap();
    if perfgate::client::http::Transport::from_env().own_for(&url) {
        // perfgate's own transport (issue 47): 1 GET of /v1/models for the models the server
        // lists, 1 warmup request; the keep-alive check looks at its own pool and the warming
        // opens connections, neither sends a request
        assert_eq!(served, 2);
    } else {
        // reqwest: 1 GET of /v1/models for the models the server lists, 1 warmup request, 1
        // GET of /v1/models to see whether its connection stayed open, then passes of 6
        // warming GETs: at least two (one to open the connections, one to find all 6 in the
        // pool), at most WARM_PASSES
        let passes = (served - 3) / 6;
        assert!((served - 3) % 6 == 0, "{served}");
        assert!((2..=WARM_PASSES as u64).contains(&passes), "{served}");
    }
    session.measure(20).await;
    let out = session.output();
    assert_eq!(out.records.len(), 20);
    assert_eq!(out.warmup_records.len(), 1);
    assert_eq!(out.warmup_failures, 0);
    assert_eq!(out.retried, 0);
    assert!(!out.closes_after_stream);
    assert_eq!(sim.requests_served(), served + 20);
}

fn case(name: &str) -> perfgate::sim::ReplayCase {
    perfgate::sim::ReplayCase::load(std::path::Path::new(&format!(
        "{}/tests/cases/{name}.yaml",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_route_that_answers_404_still_warms_the_pool() {
    let _serial = SERIAL.lock().await;
    // The replay server streams its recording for a POST to any path but answers GET
    // /x/v1/models 404: the status is ignored, the body read, the connection kept.
    let sim = SimServer::start_replay(case("03-role-only-first-chunk-a"), 0)
        .await
        .unwrap();
    let proxy = counting_proxy(sim.addr()).await;
    let base = format!("http://{}/x/v1", proxy.addr);
    let sc = scenario(
        &base,
        "{concurrency: 6, warmup: 1, samples: 20, ramp: burst}",
    );
    let mut session = Session::start(&sc, &base).await.unwrap();
    let at_start = settled(&proxy.accepted).await;
    assert!(at_start >= 6, "{at_start}");
    proxy.measuring.store(true, Ordering::SeqCst);
    // one wave: 6 requests at once, each on a connection opened before measuring
    session.measure(6).await;
    let out = session.output();
    assert_eq!(out.records.len(), 6);
    assert!(out.records.iter().all(|r| r.ok()));
    assert_eq!(out.warmup_failures, 0);
    assert_eq!(settled(&proxy.accepted).await, at_start);
    assert_eq!(proxy.new_used.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_endpoint_is_not_warmed() {
    let _serial = SERIAL.lock().await;
    // every request 404 (a wrong base_url): one GET of <base>/models (what the server lists,
    // 404 here), then the warmup finds the endpoint unusable, and no warming GETs follow
    let sim = SimServer::start_replay(case("35-base-url-joining"), 0)
        .await
        .unwrap();
    let base = format!("{}/v1", sim.base_url());
    let sc = scenario(
        &base,
        "{concurrency: 16, warmup: 2, samples: 20, ramp: burst}",
    );
    let mut session = Session::start(&sc, &base).await.unwrap();
    assert!(session.is_unreachable());
    assert_eq!(sim.requests_served(), 1 + 2);
    session.measure(20).await;
    assert_eq!(sim.requests_served(), 1 + 2);
}

/// A server that streams like llama-server: keep-alive announced, yet the connection closed
/// after every streamed response (`GET /v1/models` keeps it). Counts the POSTs and those that
/// asked for `Connection: close`.
async fn closing_server() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    stream_server(true, false, 0).await
}

/// The same server; `close_after_stream` false keeps connections open after a stream, and
/// `models_drops` answers `GET /v1/models` by closing the connection without a response, and
/// `close_delay_ms` closes that long after the stream (a request sent meanwhile is dropped).
async fn stream_server(
    close_after_stream: bool,
    models_drops: bool,
    close_delay_ms: u64,
) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let posts = Arc::new(AtomicUsize::new(0));
    let closes = Arc::new(AtomicUsize::new(0));
    let (p, c) = (Arc::clone(&posts), Arc::clone(&closes));
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let (p, c) = (Arc::clone(&p), Arc::clone(&c));
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // one request: the head, then content-length bytes of body
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    if head.starts_with("get ") {
                        if models_drops {
                            return;
                        }
                        let body = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    p.fetch_add(1, Ordering::SeqCst);
                    if head.contains("\r\nconnection: close\r\n") {
                        c.fetch_add(1, Ordering::SeqCst);
                    }
                    let mut out = String::from(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nkeep-alive: timeout=5, max=100\r\n\r\n",
                    );
                    let mut events: Vec<String> = (0..4)
                        .map(|i| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}}}}]}}\n\n"))
                        .collect();
                    events.push("data: [DONE]\n\n".into());
                    for e in events {
                        out.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
                    }
                    out.push_str("0\r\n\r\n");
                    if sock.write_all(out.as_bytes()).await.is_err() || close_after_stream {
                        tokio::time::sleep(Duration::from_millis(close_delay_ms)).await;
                        return; // and close, as llama-server does
                    }
                }
            });
        }
    });
    (addr, posts, closes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_after_each_stream_gets_connection_close() {
    let _serial = SERIAL.lock().await;
    let (addr, posts, closes) = closing_server().await;
    let base = format!("http://{addr}/v1");
    let sc = scenario(
        &base,
        "{concurrency: 2, warmup: 2, samples: 20, ramp: burst}",
    );
    let mut session = Session::start(&sc, &base).await.unwrap();
    // the warmup streams were not asked to close; the check after them found the server
    // closing, so every measured request asks for `Connection: close`
    assert_eq!(posts.load(Ordering::SeqCst), 2);
    assert_eq!(closes.load(Ordering::SeqCst), 0);
    session.measure(20).await;
    let out = session.output();
    assert!(out.closes_after_stream);
    assert_eq!(out.records.len(), 20);
    assert!(out.records.iter().all(|r| r.ok()), "{:?}", out.records);
    // no request was sent on a connection the server had closed
    assert_eq!(out.retried, 0);
    assert_eq!(posts.load(Ordering::SeqCst), 22);
    assert_eq!(closes.load(Ordering::SeqCst), 20);
    let notes = perfgate::check::run_notes(&sc, &out);
    assert!(
        notes.iter().any(|n| n
            .text
            .contains("closed its connection after every streamed response")),
        "{notes:?}"
    );
}

/// A `/models` that drops its connection says nothing about the stream's connections: a server
/// that keeps them open must not be taken for one that closes after each stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_route_that_drops_does_not_mean_closing_after_streams() {
    let _serial = SERIAL.lock().await;
    let (addr, posts, closes) = stream_server(false, true, 0).await;
    let base = format!("http://{addr}/v1");
    let sc = scenario(
        &base,
        "{concurrency: 4, warmup: 2, samples: 20, ramp: burst}",
    );
    let mut session = Session::start(&sc, &base).await.unwrap();
    session.measure(20).await;
    let out = session.output();
    assert!(!out.closes_after_stream);
    assert_eq!(out.records.len(), 20);
    assert!(out.records.iter().all(|r| r.ok()), "{:?}", out.records);
    assert_eq!(out.retried, 0);
    assert_eq!(posts.load(Ordering::SeqCst), 22);
    assert_eq!(
        closes.load(Ordering::SeqCst),
        0,
        "no request asked to close"
    );
    let notes = perfgate::check::run_notes(&sc, &out);
    assert!(
        !notes
            .iter()
            .any(|n| n.text.contains("closed its connection")),
        "{notes:?}"
    );
}

/// Without a warmup, a server that closes after each stream is found out by the first
/// re-send; the re-sends of requests already under way are expected and must not make the run
/// untrusted ("the endpoint is dropping requests", exit 3), and a note says what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_server_without_warmup_is_not_called_a_dropper() {
    let _serial = SERIAL.lock().await;
    let mut resent_seen = 0;
    for _ in 0..3 {
        // closes 30 ms after each stream: the next request, sent at once on the kept-alive
        // connection, is dropped before any response
        let (addr, posts, _closes) = stream_server(true, false, 30).await;
        let base = format!("http://{addr}/v1");
        let sc = scenario(
            &base,
            "{concurrency: 4, warmup: 0, samples: 20, ramp: burst}",
        );
        let mut session = Session::start(&sc, &base).await.unwrap();
        session.measure(20).await;
        let out = session.output();
        assert_eq!(out.records.len(), 20);
        assert!(out.records.iter().all(|r| r.ok()), "{:?}", out.records);
        assert_eq!(out.resent_problem(), None, "{out:?}");
        // a dropped request never reached the handler: each measured request was served once
        assert_eq!(posts.load(Ordering::SeqCst), 20);
        assert_eq!(out.retried, 0, "{out:?}");
        let notes = perfgate::check::run_notes(&sc, &out);
        let noted = notes.iter().any(|n| {
            n.text
                .contains("before perfgate found that the server closes")
        });
        assert_eq!(noted, out.resent_before_close_mode > 0, "{notes:?}");
        if out.resent_before_close_mode > 0 {
            assert!(out.closes_after_stream);
        }
        resent_seen += out.resent_before_close_mode;
    }
    assert!(
        resent_seen > 0,
        "the delayed close must have caused re-sends"
    );
}

#[test]
fn a_blocked_runtime_shows_client_lag_and_the_note() {
    let _serial = SERIAL.blocking_lock();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lag = rt.block_on(async {
        let mut probe = LagProbe::new(LAG_PROBE_INTERVAL);
        probe.start();
        // a task that hogs the only worker thread 30 ms at a time
        let hog = tokio::spawn(async {
            loop {
                std::thread::sleep(Duration::from_millis(30));
                tokio::task::yield_now().await;
            }
        });
        tokio::time::sleep(Duration::from_millis(600)).await;
        hog.abort();
        probe.stop();
        probe.summary().expect("samples")
    });
    assert!(lag.samples >= 10, "{lag:?}");
    assert!(lag.p99 > CLIENT_LAG_WARN_MS, "{lag:?}");
    assert!(lag.p99 <= lag.max && lag.p50 <= lag.p99, "{lag:?}");
    let sc = scenario("sim://", "{samples: 20}");
    let mut run = perfgate::runner::RunOutput::empty();
    run.client_lag = Some(lag.clone());
    let notes = perfgate::check::run_notes(&sc, &run);
    let note = notes
        .iter()
        .find(|n| n.text.contains("client busy"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        note.text.contains(&format!("P99 {:.1} ms", lag.p99)),
        "{note}"
    );
    assert!(note.text.contains("client-side delay"), "{note}");
    assert!(note.text.contains("--load-shard I/N"), "{note}");
}

/// A real run against the simulator: the probe runs beside the requests and its figures reach
/// the measured block; the "client busy" note follows its threshold whatever this machine's load
/// made of the lag (a quiet 2-core machine shows P99 2-3 ms, one shared with a CPU-bound
/// neighbour more than the 10 ms threshold: neither is perfgate's defect, so neither is asserted).
#[test]
fn the_client_lag_probe_runs_and_the_busy_note_follows_its_threshold() {
    let _serial = SERIAL.blocking_lock();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async {
        let sim = SimServer::start(
            SimConfig::from_query("ttft_ms=20&tpot_ms=5&seed=2").unwrap(),
            0,
        )
        .await
        .unwrap();
        let sc = scenario(&sim.base_url(), "{concurrency: 4, warmup: 2, samples: 160}");
        perfgate::runner::run(&sc, &sim.base_url()).await.unwrap()
    });
    assert_eq!(out.records.len(), 160);
    let lag = out.client_lag.clone().expect("the probe ran");
    println!("client lag over a quiet run: {lag:?}");
    // 160 requests of >= 55 ms simulated each at concurrency 4: >= 2.2 s measured, one wakeup
    // per 10 ms at most; a stalled machine gives fewer, never fewer than one per stall
    assert!(lag.samples >= 20, "{lag:?}");
    assert!(lag.p50 <= lag.p99 && lag.p99 <= lag.max, "{lag:?}");
    let sc = scenario("sim://", "{samples: 20}");
    let notes = perfgate::check::run_notes(&sc, &out);
    assert_eq!(
        notes.iter().any(|n| n.text.contains("client busy")),
        lag.p99 > CLIENT_LAG_WARN_MS,
        "the note iff P99 {} ms > {CLIENT_LAG_WARN_MS} ms: {notes:?}",
        lag.p99
    );
    let m = perfgate::check::measured(&out);
    assert_eq!(m.client_lag_ms, Some(lag));
}
