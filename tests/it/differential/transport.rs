//! The differential test of perfgate's own HTTP/1.1 transport (`client::http::own`, issue 47)
//! against the reqwest transport it bypasses: the same request, over loopback, to the same
//! server, must give the same record (every field exact, every time within [`TOL_MS`]), model,
//! fingerprint, `Server`, refused field and delivery. Over every replayed case of `tests/cases`
//! (served by `SimServer::start_replay`, as `tests/it/cases.rs` does), every fuzz seed of
//! `fuzz/seeds/stream_measure` (served as chunked reads by a raw server), and hostile servers
//! (a head of 1 MB, an endless chunk-size line, a chunk size of 2^64, a truncated body, a
//! stalled body, a refused connection, a kept-alive connection closed under the next request).

use super::{cases, files, fuzz_stream, root, Stream};
use perfgate::client::http::{Sent, StreamClient, Transport};
use perfgate::config::scenario::Api;
use perfgate::record::FailureClass;
use perfgate::sim::{ReplayCase, SimServer};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Absolute tolerance for every time, ms (as `tests/it/cases.rs`).
const TOL_MS: f64 = 15.0;
/// Replays of one case when only timings differ (a loaded 2-core machine).
const ATTEMPTS: u32 = 5;
/// Cases replayed at once (each over both transports at once).
const AT_ONCE: usize = 3;

/// A one-scenario endpoint for `api` at `base_url`.
fn scenario(base_url: &str, api: Api, first_token_timeout_s: u64) -> perfgate::config::Scenario {
    let yaml = format!(
        "scenarios:\n  - name: t\n    endpoint:\n      base_url: \"{base_url}\"\n      api: {api}\n      model: m\n      first_token_timeout: {first_token_timeout_s}s\n      idle_timeout: 30s\n      connect_timeout: 2s\n    request:\n      prompt: hi\n      max_tokens: 16\n    load:\n      samples: 20\n"
    );
    let mut v = perfgate::config::parse_str(&yaml, "t.yaml", &|_| None).unwrap();
    v.remove(0)
}

/// Sends one request over `transport` to `base_url` (a client with a pool of 1).
async fn send_over(
    transport: Transport,
    base_url: &str,
    api: Api,
    first_token_timeout_s: u64,
) -> Sent {
    let sc = scenario(base_url, api, first_token_timeout_s);
    // built off the runtime's workers: a client's TLS setup blocks for a while, which would
    // delay the streams beside it
    let (ep, url) = (sc.endpoint.clone(), base_url.to_string());
    let client = tokio::task::spawn_blocking(move || {
        StreamClient::with_transport(&ep, &url, 1, transport).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(client.own_transport(), transport == Transport::Own);
    let body = body_of(&sc);
    client.send(&body, Instant::now()).await
}

/// The request body of scenario `sc` as the runner builds it (no cold-cache nonce).
fn body_of(sc: &perfgate::config::Scenario) -> Value {
    perfgate::client::body::build(
        sc.endpoint.api,
        &sc.endpoint.model,
        &sc.request,
        sc.endpoint.include_usage,
        None,
    )
}

/// Where two outcomes differ: (exact differences, timing differences).
fn differences(a: &Sent, b: &Sent) -> (Vec<String>, Vec<String>) {
    let mut exact = Vec::new();
    let mut timing = Vec::new();
    let ra = serde_json::to_value(&a.record).unwrap();
    let rb = serde_json::to_value(&b.record).unwrap();
    walk("record", &ra, &rb, false, &mut exact, &mut timing);
    let d = |x: &dyn std::fmt::Debug| format!("{x:?}");
    for (what, x, y) in [
        ("model", d(&a.model), d(&b.model)),
        (
            "fingerprint",
            d(&a.system_fingerprint),
            d(&b.system_fingerprint),
        ),
        ("server", d(&a.server), d(&b.server)),
        ("refused", d(&a.refused), d(&b.refused)),
        ("delivery", d(&a.delivery), d(&b.delivery)),
        ("sim_request", d(&a.sim_request), d(&b.sim_request)),
        ("conn", d(&a.conn.is_some()), d(&b.conn.is_some())),
    ] {
        if x != y {
            exact.push(format!("{what}: {x} vs {y}"));
        }
    }
    (exact, timing)
}

/// Compares two JSON values: numbers under a key ending in `_ms` within [`TOL_MS`], everything
/// else exactly.
fn walk(
    path: &str,
    a: &Value,
    b: &Value,
    time: bool,
    exact: &mut Vec<String>,
    timing: &mut Vec<String>,
) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let t = time || k.ends_with("_ms");
                walk(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    t,
                    exact,
                    timing,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                walk(&format!("{path}[{i}]"), p, q, time, exact, timing);
            }
        }
        (Value::Number(x), Value::Number(y)) if time => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if (x - y).abs() > TOL_MS {
                timing.push(format!("{path}: {x} vs {y}"));
            }
        }
        (Value::String(x), Value::String(y)) if ports(x) == ports(y) => {}
        _ if a != b => exact.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}

/// `s` with every loopback port replaced (each transport has its own server).
fn ports(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split("127.0.0.1:").enumerate() {
        if i > 0 {
            out.push_str("127.0.0.1:PORT");
        }
        out.push_str(part.trim_start_matches(|c: char| c.is_ascii_digit()));
    }
    out
}

/// Runs `one` (which sends over the transport it is given) over both transports until they
/// agree, up to [`ATTEMPTS`] times when only timings differ; the error says how they differ.
async fn agree_over_transports<F, Fut>(name: &str, one: F) -> Result<(), String>
where
    F: Fn(Transport) -> Fut,
    Fut: std::future::Future<Output = Sent> + Send + 'static,
{
    for attempt in 1..=ATTEMPTS {
        // each on a task of its own: building a client blocks its task for a while
        let a = tokio::spawn(one(Transport::Reqwest));
        let b = tokio::spawn(one(Transport::Own));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let (exact, timing) = differences(&a, &b);
        if !exact.is_empty() {
            return Err(format!(
                "{name}: the transports differ:\n  {}\nreqwest: {a:#?}\nown: {b:#?}",
                exact.join("\n  ")
            ));
        }
        if timing.is_empty() {
            return Ok(());
        }
        if attempt == ATTEMPTS {
            return Err(format!(
                "{name}: timings differ (attempt {attempt}):\n  {}",
                timing.join("\n  ")
            ));
        }
    }
    Ok(())
}

/// Every replayed case (an api perfgate speaks) as a [`ReplayCase`].
fn replay_cases() -> Vec<(String, ReplayCase)> {
    let mut out = Vec::new();
    for path in files(&root().join("tests/cases")) {
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        match ReplayCase::load(&path) {
            Ok(c) => out.push((path.file_name().unwrap().to_string_lossy().into_owned(), c)),
            Err(e) if e.contains("is not known") => continue,
            Err(e) => panic!("{e}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replayed_case_gives_the_same_record_over_both_transports() {
    use futures_util::StreamExt;
    let all = replay_cases();
    assert_eq!(all.len(), cases().len());
    assert!(all.len() >= 90, "only {} cases", all.len());
    let results: Vec<Result<(), String>> = futures_util::stream::iter(all.into_iter())
        .map(|(name, case)| async move {
            let api: Api = case
                .api
                .as_deref()
                .unwrap_or("openai-chat")
                .parse()
                .unwrap();
            let ftt = (case.end_ms() / 1000.0).ceil() as u64 + 30;
            let case = Arc::new(case);
            let out = agree_over_transports(&name, |t| {
                let case = Arc::clone(&case);
                async move {
                    let server = SimServer::start_replay((*case).clone(), 0).await.unwrap();
                    let sent = send_over(t, &server.base_url(), api, ftt).await;
                    server.shutdown();
                    sent
                }
            })
            .await;
            eprintln!("{name}: {}", if out.is_ok() { "same" } else { "DIFFERENT" });
            out
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} cases differ:\n{}",
        failed.len(),
        results.len(),
        failed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    eprintln!(
        "{} cases: the same record over both transports",
        results.len()
    );
}

/// A raw HTTP/1.1 server on 127.0.0.1: every connection (at most `max_conns`, for at most
/// 60 s) gets `answer(request number on this connection, stream)` after each request head;
/// `answer` returns whether to wait for another request on the connection.
fn raw_server(
    max_conns: usize,
    answer: impl Fn(usize, &mut TcpStream) -> bool + Send + Sync + 'static,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        l.set_nonblocking(true).unwrap();
        let mut n = 0;
        while n < max_conns && Instant::now() < deadline {
            match l.accept() {
                Ok((mut s, _)) => {
                    n += 1;
                    let answer = Arc::clone(&answer);
                    std::thread::spawn(move || {
                        s.set_nonblocking(false).unwrap();
                        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                        let _ = s.set_nodelay(true);
                        for k in 0..8 {
                            if !read_request(&mut s) || !answer(k, &mut s) {
                                break;
                            }
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// Reads one request (head and Content-Length body); false at EOF or a timeout.
fn read_request(s: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while got.len() < end + 4 + len {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => got.extend_from_slice(&b[..n]),
                }
            }
            return true;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
}

/// Serves `s` once per request: its reads as HTTP chunks, each at its time (ms after the
/// request), then the last chunk.
fn serve_stream(s: Stream) -> String {
    raw_server(64, move |_, sock| {
        let ct = if s.declared_sse {
            "text/event-stream"
        } else {
            "application/octet-stream"
        };
        let t0 = Instant::now();
        let _ = write!(
            sock,
            "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        for (at, bytes) in &s.reads {
            let due = t0 + Duration::from_secs_f64(at / 1000.0);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if !bytes.is_empty() {
                let _ = write!(sock, "{:x}\r\n", bytes.len());
                let _ = sock.write_all(bytes);
                let _ = sock.write_all(b"\r\n");
            }
        }
        let _ = sock.write_all(b"0\r\n\r\n");
        true
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fuzz_seed_gives_the_same_record_over_both_transports() {
    let mut n = 0;
    let mut failed = Vec::new();
    for path in files(&root().join("fuzz/seeds/stream_measure")) {
        let data = std::fs::read(&path).unwrap();
        let Some(s) = fuzz_stream(path.display().to_string(), &data) else {
            continue;
        };
        // reads 1 ms apart; each seed for the api its first byte names
        let api = s.api;
        let base = serve_stream(s.clone());
        let r = agree_over_transports(&s.name, |t| {
            let base = base.clone();
            async move { send_over(t, &base, api, 10).await }
        })
        .await;
        if let Err(e) = r {
            failed.push(e);
        }
        n += 1;
    }
    assert!(n >= 50, "only {n} fuzz seeds read");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    eprintln!("{n} fuzz seeds: the same record over both transports");
}

/// A chat chunk carrying `t`.
fn chat(t: &str) -> String {
    format!("data: {{\"id\":\"c\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{t}\"}}}}]}}\n\n")
}

/// Writes `body` as one chunk.
fn chunk(sock: &mut TcpStream, body: &str) {
    let _ = write!(sock, "{:x}\r\n{body}\r\n", body.len());
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// Sends one request over each transport to `base` (first-token timeout `ftt` s), each in its
/// own time bound; both outcomes.
async fn both(base: &str, ftt: u64) -> (Sent, Sent) {
    let bound = Duration::from_secs(ftt + 30);
    let one = |t| async move {
        tokio::time::timeout(bound, send_over(t, base, Api::OpenaiChat, ftt))
            .await
            .expect("bounded")
    };
    (one(Transport::Reqwest).await, one(Transport::Own).await)
}

fn class(s: &Sent) -> Option<FailureClass> {
    s.record.error.as_ref().map(|e| e.class)
}

fn message(s: &Sent) -> &str {
    s.record.error.as_ref().map_or("", |e| e.message.as_str())
}

#[tokio::test]
async fn hostile_client_a_head_of_one_megabyte_is_refused_alike() {
    let base = raw_server(8, |_, sock| {
        let _ = sock.write_all(b"HTTP/1.1 200 OK\r\nx-big: ");
        let _ = sock.write_all(&vec![b'a'; 1 << 20]);
        let _ = sock.write_all(b"\r\n\r\n");
        false
    });
    let (a, b) = both(&base, 5).await;
    // hyper's words and perfgate's: the same failure, after the same re-send
    assert_eq!(class(&b), Some(FailureClass::Connect), "{b:?}");
    assert!(message(&b).contains("message head is too large"), "{b:?}");
    assert_eq!(differences(&a, &b).0, Vec::<String>::new());
}

#[tokio::test]
async fn hostile_client_an_endless_chunk_size_line_is_cut() {
    let base = raw_server(4, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        chunk(sock, &chat("a"));
        let _ = sock.write_all(b"5;");
        // 4 MB of extension, then the connection is held: nothing may wait for the line's end
        for _ in 0..64 {
            if sock.write_all(&[b'x'; 64 << 10]).is_err() {
                break;
            }
        }
        std::thread::sleep(Duration::from_secs(2));
        false
    });
    let t = Instant::now();
    let (a, b) = both(&base, 5).await;
    assert!(t.elapsed() < Duration::from_secs(20));
    truncated_after_one_token(&a, &b, "chunk extensions over limit");
}

/// Both outcomes a truncated body, the own transport's message saying `why` after the one token
/// the server sent.
fn truncated_after_one_token(a: &Sent, b: &Sent, why: &str) {
    assert_eq!(class(a), Some(FailureClass::Truncated), "{a:?}");
    assert_eq!(class(b), Some(FailureClass::Truncated), "{b:?}");
    assert_eq!(
        message(b),
        format!("connection reset / incomplete body ({why}) after 1 token events")
    );
}

#[tokio::test]
async fn hostile_client_a_chunk_size_of_2_to_the_64_is_refused() {
    let base = raw_server(4, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        chunk(sock, &chat("a"));
        let _ = sock.write_all(b"10000000000000000\r\n");
        std::thread::sleep(Duration::from_secs(2));
        false
    });
    let (a, b) = both(&base, 5).await;
    truncated_after_one_token(&a, &b, "invalid chunk size: overflow");
}

#[tokio::test]
async fn hostile_client_a_truncated_body_is_the_same_failure() {
    let base = raw_server(4, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        chunk(sock, &chat("a"));
        std::thread::sleep(Duration::from_millis(20));
        chunk(sock, &chat("b"));
        // half a chunk, then the connection closes
        let _ = sock.write_all(b"40\r\ndata: {");
        false
    });
    let (a, b) = both(&base, 5).await;
    assert_eq!(class(&b), Some(FailureClass::Truncated), "{b:?}");
    assert_eq!(
        message(&b),
        "connection reset / incomplete body (end of file before message length reached) after 2 token events"
    );
    let (exact, timing) = differences(&a, &b);
    assert_eq!(exact, Vec::<String>::new());
    assert!(timing.len() <= 3, "{timing:?}");
}

#[tokio::test]
async fn hostile_client_a_stalled_body_times_out_alike() {
    let base = raw_server(4, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        std::thread::sleep(Duration::from_millis(2500));
        false
    });
    let (a, b) = both(&base, 1).await;
    assert_eq!(class(&b), Some(FailureClass::TimeoutFirstToken), "{b:?}");
    assert_eq!(differences(&a, &b).0, Vec::<String>::new());
    // a server that never answers the head: the same limit, the same message
    let base = raw_server(4, |_, _| {
        std::thread::sleep(Duration::from_millis(2500));
        false
    });
    let (a, b) = both(&base, 1).await;
    assert_eq!(class(&b), Some(FailureClass::TimeoutFirstToken), "{b:?}");
    assert_eq!(differences(&a, &b).0, Vec::<String>::new());
}

#[tokio::test]
async fn hostile_client_a_refused_connection_reads_the_same() {
    // a port nothing listens on (bound, then closed)
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let (a, b) = both(&base, 5).await;
    assert_eq!(class(&b), Some(FailureClass::Connect), "{b:?}");
    assert!(message(&b).starts_with(&format!("could not connect to 127.0.0.1:{port}: ")));
    assert_eq!(differences(&a, &b).0, Vec::<String>::new());
}

/// A kept-alive connection the server closes as the next request arrives: that request is sent
/// again on a new connection and measured, over both transports.
#[tokio::test]
async fn client_a_closed_kept_alive_connection_is_resent_alike() {
    let base = raw_server(16, |k, sock| {
        if k > 0 {
            return false; // the second request on a connection: closed unanswered
        }
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        chunk(sock, &chat("a"));
        chunk(sock, &(chat("b") + "data: [DONE]\n\n"));
        let _ = sock.write_all(b"0\r\n\r\n");
        true
    });
    for t in [Transport::Reqwest, Transport::Own] {
        let sc = scenario(&base, Api::OpenaiChat, 5);
        let client = StreamClient::with_transport(&sc.endpoint, &base, 1, t).unwrap();
        let body = body_of(&sc);
        let first = client.send(&body, Instant::now()).await;
        assert!(first.record.ok(), "{t:?}: {first:?}");
        assert!(!first.delivery.was_resent());
        let second = client.send(&body, Instant::now()).await;
        assert!(second.record.ok(), "{t:?}: {second:?}");
        assert_eq!(second.record.output_tokens, Some(2));
        assert_ne!(first.conn, second.conn, "{t:?}: a new connection");
    }
}

/// Keep-alive: a server that keeps its connection open gets the next request on it, over the
/// own transport; pool warming opens the connections a phase needs.
#[tokio::test]
async fn client_own_transport_reuses_and_warms_connections() {
    let base = raw_server(16, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        chunk(sock, &(chat("a") + "data: [DONE]\n\n"));
        let _ = sock.write_all(b"0\r\n\r\n");
        true
    });
    let sc = scenario(&base, Api::OpenaiChat, 5);
    let client = StreamClient::with_transport(&sc.endpoint, &base, 4, Transport::Own).unwrap();
    let body = body_of(&sc);
    let first = client.send(&body, Instant::now()).await;
    let second = client.send(&body, Instant::now()).await;
    assert!(
        first.record.ok() && second.record.ok(),
        "{first:?} {second:?}"
    );
    assert_eq!(first.conn, second.conn);
    let conns: Vec<_> = first.conn.into_iter().collect();
    assert_eq!(client.keeps_alive_after_stream(&conns).await, Some(true));
    // one idle already; warming opens three more
    assert_eq!(client.warm_pool(4).await, 4);
}

/// A client whose only thread is busy when the first token arrives still measures when it
/// arrived: the own transport stamps each read with the kernel's receive time of its last
/// segment (`perfgate::rx_stamp`). reqwest's reads carry the time they ran, so its TTFT holds
/// the client's own delay: the contrast that shows the test can fail.
#[tokio::test] // one thread: the blocker holds it
async fn client_a_late_read_carries_the_arrival_on_the_own_transport() {
    let base = raw_server(4, |_, sock| {
        let _ = sock.write_all(SSE_HEAD.as_bytes());
        std::thread::sleep(Duration::from_millis(20));
        chunk(sock, &chat("a"));
        std::thread::sleep(Duration::from_millis(200));
        chunk(sock, &chat("b"));
        let _ = sock.write_all(b"0\r\n\r\n");
        true
    });
    let sc = scenario(&base, Api::OpenaiChat, 5);
    for (t, want) in [
        (Transport::Own, 18.0..=60.0),
        (Transport::Reqwest, 140.0..=400.0),
    ] {
        let (ep, url) = (sc.endpoint.clone(), base.clone());
        let client =
            tokio::task::spawn_blocking(move || StreamClient::with_transport(&ep, &url, 1, t))
                .await
                .unwrap()
                .unwrap();
        // from 5 to 155 ms after the request the thread is busy: the first token, sent at
        // 20 ms, waits in the socket until the client reads it at about 155 ms
        let blocker = tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            std::thread::sleep(Duration::from_millis(150));
        });
        let sent = client.send(&body_of(&sc), Instant::now()).await;
        blocker.await.unwrap();
        let ttft = sent.record.ttft_ms.expect("a first token");
        assert!(want.contains(&ttft), "{t:?}: TTFT {ttft} ms, want {want:?}");
        assert_eq!(sent.record.output_tokens, Some(2), "{t:?}");
    }
}
