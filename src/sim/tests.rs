//! End-to-end tests of the simulator over real loopback HTTP, with a hand-written HTTP/1.1
//! client on a raw `TcpStream` (no other perfgate module), so timing is measured as close to
//! the socket as possible. Every test is bounded by `tokio::time::timeout`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::schedule::RequestPlan;
use super::{ReplayCase, SimConfig, SimServer};

const LIMIT: Duration = Duration::from_secs(10);

/// A parsed HTTP/1.1 response with the arrival time of each body chunk.
#[derive(Debug, Default)]
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    /// Arrival of the head, ms after the request was written.
    head_ms: f64,
    /// Chunked body: (arrival ms after t0, chunk bytes), one entry per HTTP chunk.
    chunks: Vec<(f64, Vec<u8>)>,
    /// Content-Length body.
    body: Vec<u8>,
    /// The body ended properly (final empty chunk, or Content-Length reached).
    complete: bool,
    /// When the body ended or the connection closed, ms after t0.
    end_ms: f64,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    /// The SSE events; asserts each HTTP chunk is exactly one `data: ...\n\n` event.
    fn events(&self) -> Vec<(f64, String)> {
        self.chunks
            .iter()
            .map(|(t, c)| {
                let s = std::str::from_utf8(c).expect("UTF-8 chunk");
                assert!(
                    s.starts_with("data: ") && s.ends_with("\n\n"),
                    "chunk {s:?}"
                );
                let payload = &s[6..s.len() - 2];
                assert!(
                    !payload.contains('\n'),
                    "more than one event in a chunk: {s:?}"
                );
                (*t, payload.to_string())
            })
            .collect()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Writes one request on `stream` and reads its response. `t0` is taken just before writing.
async fn exchange(stream: &mut TcpStream, raw_request: &[u8]) -> RawResponse {
    let t0 = Instant::now();
    stream.write_all(raw_request).await.expect("write request");
    let since = |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
    let mut buf: Vec<u8> = Vec::new();
    let mut resp = RawResponse::default();
    let mut tmp = vec![0u8; 64 * 1024];
    // Head.
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut tmp).await.expect("read head");
        if n == 0 {
            resp.end_ms = since(Instant::now());
            return resp; // closed before a head
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    resp.head_ms = since(Instant::now());
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    resp.status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    for line in lines {
        if let Some((n, v)) = line.split_once(':') {
            resp.headers
                .push((n.trim().to_string(), v.trim().to_string()));
        }
    }
    buf.drain(..head_end + 4);
    let chunked = resp
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let content_length: Option<usize> = resp.header("content-length").and_then(|v| v.parse().ok());
    let mut last_read = Instant::now();
    loop {
        // Consume what is complete in `buf`.
        if chunked {
            while let Some(line_end) = find(&buf, b"\r\n") {
                let size_str = std::str::from_utf8(&buf[..line_end]).expect("chunk size");
                let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16)
                    .expect("hex chunk size");
                if size == 0 {
                    if buf.len() >= line_end + 4 {
                        resp.complete = true;
                        resp.end_ms = since(last_read);
                        return resp;
                    }
                    break;
                }
                if buf.len() < line_end + 2 + size + 2 {
                    break;
                }
                let data = buf[line_end + 2..line_end + 2 + size].to_vec();
                buf.drain(..line_end + 2 + size + 2);
                resp.chunks.push((since(last_read), data));
            }
        } else if let Some(len) = content_length {
            if buf.len() >= len {
                resp.body = buf[..len].to_vec();
                resp.complete = true;
                resp.end_ms = since(last_read);
                return resp;
            }
        }
        // A reset counts as the end of the connection.
        let n = stream.read(&mut tmp).await.unwrap_or_default();
        last_read = Instant::now();
        if n == 0 {
            resp.body = buf;
            resp.end_ms = since(last_read);
            return resp;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n").into_bytes()
}

async fn one(addr: SocketAddr, raw: &[u8]) -> RawResponse {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    exchange(&mut s, raw).await
}

fn chat_body(max_tokens: u64, stream: bool, include_usage: bool) -> String {
    json!({
        "model": "whatever",
        "messages": [{"role": "user", "content": "Write a short story about a cat"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": include_usage},
        "ignore_eos": true,
        "temperature": 0,
    })
    .to_string()
}

/// Arrival times (ms) of the content-bearing chunks of a chat stream.
fn content_times(resp: &RawResponse) -> Vec<f64> {
    resp.events()
        .iter()
        .filter(|(_, p)| p.as_str() != "[DONE]")
        .filter_map(|(t, p)| {
            let v: Value = serde_json::from_str(p).unwrap();
            let c = v["choices"][0]["delta"]["content"].as_str().unwrap_or("");
            (!c.is_empty()).then_some(*t)
        })
        .collect()
}

fn sim(q: &str) -> SimConfig {
    SimConfig::from_query(q).unwrap()
}

fn fmt_ms(ts: &[f64]) -> String {
    ts.iter()
        .map(|t| format!("{t:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_endpoint() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("model=m1"), 0).await.unwrap();
        assert_eq!(
            srv.base_url(),
            format!("http://127.0.0.1:{}/v1", srv.addr().port())
        );
        let r = one(srv.addr(), &get("/v1/models")).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.json(),
            json!({"object":"list","data":[{"id":"m1","object":"model","owned_by":"perfgate-sim"}]})
        );
        assert_eq!(srv.requests_served(), 1);
        let h = one(srv.addr(), &get("/health")).await;
        assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_shape() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=5&tpot_ms=2&model=m2"), 0)
            .await
            .unwrap();
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(5, true, true)),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("cache-control"), Some("no-cache"));
        assert_eq!(r.header("content-length"), None);
        assert!(r.complete, "body must end with the final chunk");
        let ev = r.events();
        let payloads: Vec<&str> = ev.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(payloads.len(), 1 + 5 + 1 + 1 + 1, "{payloads:#?}");
        let js: Vec<Value> = payloads[..payloads.len() - 1]
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        // Role-only first chunk.
        assert_eq!(js[0]["object"], "chat.completion.chunk");
        assert_eq!(js[0]["model"], "m2");
        assert_eq!(
            js[0]["choices"][0]["delta"],
            json!({"role":"assistant","content":""})
        );
        assert_eq!(js[0]["choices"][0]["finish_reason"], Value::Null);
        // Exactly five content chunks.
        for (i, j) in js[1..6].iter().enumerate() {
            assert_eq!(
                j["choices"][0]["delta"],
                json!({"content": format!(" tok{}", i + 1)})
            );
            assert_eq!(j["id"], js[0]["id"]);
        }
        // Finish, usage, [DONE].
        assert_eq!(js[6]["choices"][0]["delta"], json!({}));
        assert_eq!(js[6]["choices"][0]["finish_reason"], "length");
        assert_eq!(js[7]["choices"], json!([]));
        assert_eq!(
            js[7]["usage"],
            json!({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12})
        );
        assert_eq!(payloads[8], "[DONE]");
        assert_eq!(content_times(&r).len(), 5);

        // Without include_usage: no usage chunk.
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(3, true, false)),
        )
        .await;
        let ev = r.events();
        assert_eq!(ev.len(), 1 + 3 + 1 + 1);
        assert!(!ev.iter().any(|(_, p)| p.contains("usage")));
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_timing() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0"), 0)
            .await
            .unwrap();
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(5, true, true)),
        )
        .await;
        let role_ms = r.chunks[0].0;
        let t = content_times(&r);
        eprintln!(
            "timing: head {:.1} ms, role {role_ms:.1} ms, content [{}] ms, end {:.1} ms",
            r.head_ms,
            fmt_ms(&t),
            r.end_ms
        );
        assert!(role_ms < 40.0, "role chunk at {role_ms} ms");
        assert_eq!(t.len(), 5);
        assert!(near(t[0], 100.0), "first content at {} ms", t[0]);
        assert!(near(t[4], 180.0), "last content at {} ms", t[4]);
        for (i, w) in t.windows(2).enumerate() {
            let gap = w[1] - w[0];
            assert!((0.0..=60.0).contains(&gap), "gap {i} = {gap} ms");
        }
        assert!(near(r.end_ms, 180.0), "end at {} ms", r.end_ms);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_keep_their_timing() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0"), 0)
            .await
            .unwrap();
        let addr = srv.addr();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                tokio::spawn(async move {
                    let r = one(
                        addr,
                        &post("/v1/chat/completions", &chat_body(5, true, true)),
                    )
                    .await;
                    content_times(&r)
                })
            })
            .collect();
        for task in tasks {
            let t = task.await.unwrap();
            eprintln!("concurrent: content [{}] ms", fmt_ms(&t));
            assert_eq!(t.len(), 5);
            assert!(near(t[0], 100.0), "first content at {} ms", t[0]);
            assert!(near(t[4], 180.0), "last content at {} ms", t[4]);
        }
        assert_eq!(srv.requests_served(), 4);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_schedule() {
    timeout(LIMIT, async {
        let q = "seed=7&ttft_ms=30&tpot_ms=10&ttft_sigma=0.4&tpot_sigma=0.4";
        let cfg = sim(q);
        let planned: Vec<Vec<f64>> = (0..2)
            .map(|n| RequestPlan::new(&cfg, n, 8).collect())
            .collect();
        assert_ne!(planned[0], planned[1], "requests of one server differ");
        let other: Vec<f64> =
            RequestPlan::new(&sim("seed=8&ttft_sigma=0.4&tpot_sigma=0.4"), 0, 8).collect();
        assert_ne!(planned[0], other, "seeds differ");

        let mut measured: Vec<Vec<Vec<f64>>> = Vec::new();
        for _server in 0..2 {
            let srv = SimServer::start(cfg.clone(), 0).await.unwrap();
            // A /v1/models probe does not consume a request number.
            let _ = one(srv.addr(), &get("/v1/models")).await;
            let mut s = TcpStream::connect(srv.addr()).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut per_req = Vec::new();
            for _ in 0..2 {
                // Two requests on one keep-alive connection.
                let r = exchange(
                    &mut s,
                    &post("/v1/chat/completions", &chat_body(8, true, false)),
                )
                .await;
                assert!(r.complete);
                per_req.push(content_times(&r));
            }
            measured.push(per_req);
        }
        for (n, plan) in planned.iter().enumerate() {
            eprintln!("seed 7 request {n}: planned [{}] ms", fmt_ms(plan));
            for (s, m) in measured.iter().enumerate() {
                eprintln!("  server {s} measured [{}] ms", fmt_ms(&m[n]));
                assert_eq!(m[n].len(), 8);
                for (p, t) in plan.iter().zip(&m[n]) {
                    assert!(near(*t, *p), "request {n}: planned {p} ms, measured {t} ms");
                }
            }
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_rate_one_gives_500() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("error_rate=1"), 0).await.unwrap();
        for stream in [true, false] {
            let r = one(
                srv.addr(),
                &post("/v1/chat/completions", &chat_body(5, stream, true)),
            )
            .await;
            assert_eq!(r.status, 500);
            assert_eq!(r.header("content-type"), Some("application/json"));
            let v = r.json();
            assert_eq!(v["error"]["type"], "server_error");
            assert!(v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("fault injection"));
        }
        let r = one(srv.addr(), &post("/v1/completions", r#"{"prompt":"x"}"#)).await;
        assert_eq!(r.status, 500);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streamed_and_completions() {
    timeout(LIMIT, async {
        let srv = SimServer::start(
            sim("ttft_ms=30&tpot_ms=10&ttft_sigma=0&tpot_sigma=0&max_output=4&model=mm"),
            0,
        )
        .await
        .unwrap();
        // Non-streamed chat: one JSON after the whole generation time (30 + 3 * 10 ms).
        let r = one(srv.addr(), &post("/v1/chat/completions", &chat_body(10, false, false))).await;
        assert_eq!(r.status, 200);
        eprintln!("non-streamed chat answered at {:.1} ms (planned 60)", r.end_ms);
        assert!(near(r.head_ms, 60.0), "answered at {} ms", r.head_ms);
        let v = r.json();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["model"], "mm");
        assert_eq!(v["choices"][0]["message"]["content"], " tok1 tok2 tok3 tok4");
        // max_output (4) capped max_tokens (10): the model "stopped".
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 4);

        // Streamed completions: text chunks, no role chunk.
        let body = r#"{"prompt":"one two three","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}"#;
        let r = one(srv.addr(), &post("/v1/completions", body)).await;
        assert_eq!(r.status, 200);
        assert!(r.complete);
        let ev = r.events();
        assert_eq!(ev.len(), 3 + 1 + 1 + 1);
        for (i, (t, p)) in ev[..3].iter().enumerate() {
            let v: Value = serde_json::from_str(p).unwrap();
            assert_eq!(v["object"], "text_completion");
            assert_eq!(v["choices"][0]["text"], format!(" tok{}", i + 1));
            let planned = 30.0 + 10.0 * i as f64;
            assert!(near(*t, planned), "token {i} at {t} ms, planned {planned}");
        }
        let fin: Value = serde_json::from_str(&ev[3].1).unwrap();
        assert_eq!(fin["choices"][0]["finish_reason"], "length");
        let usage: Value = serde_json::from_str(&ev[4].1).unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
        assert_eq!(usage["usage"]["completion_tokens"], 3);
        assert_eq!(ev[5].1, "[DONE]");

        // Non-streamed completions.
        let r = one(srv.addr(), &post("/v1/completions", r#"{"prompt":"a","max_tokens":2}"#)).await;
        let v = r.json();
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["choices"][0]["text"], " tok1 tok2");
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_answered_not_panicked() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=1&tpot_ms=1"), 0)
            .await
            .unwrap();
        let addr = srv.addr();

        let r = one(addr, &post("/v1/chat/completions", "{not json")).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON"));

        let r = one(
            addr,
            &post("/v1/chat/completions", r#"{"max_tokens":"five"}"#),
        )
        .await;
        assert_eq!(r.status, 400);
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"));

        let r = one(addr, &post("/v2/nothing", "{}")).await;
        assert_eq!(r.status, 404);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        let r = one(addr, &get("/")).await;
        assert_eq!(r.status, 404);
        let r = one(addr, &get("/v1/chat/completions")).await;
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("POST"));

        // Declared too large: 413 without reading the body.
        let raw =
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2000000\r\n\r\n{}";
        let r = one(addr, raw).await;
        assert_eq!(r.status, 413);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");

        // Actually too large, chunked upload without a length: 413 once 1 MiB is exceeded.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head =
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
        let piece = vec![b' '; 64 * 1024];
        let mut raw = head.to_vec();
        for _ in 0..17 {
            raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            raw.extend_from_slice(&piece);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        let r = exchange(&mut s, &raw).await;
        assert_eq!(r.status, 413);

        // Garbage that is not HTTP: the connection is closed, the server lives on.
        let r = one(addr, b"\x00\x01garbage\r\n\r\n").await;
        assert!(r.status == 0 || r.status == 400, "status {}", r.status);

        // Keep-alive: two requests on one connection, then the server still answers.
        let mut s = TcpStream::connect(addr).await.unwrap();
        for _ in 0..2 {
            let r = exchange(&mut s, &get("/v1/models")).await;
            assert_eq!(r.status, 200);
        }
        let r = one(
            addr,
            &post("/v1/chat/completions", &chat_body(2, true, true)),
        )
        .await;
        assert_eq!(r.status, 200);
        assert!(r.complete);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_non_loopback_and_bad_config() {
    timeout(LIMIT, async {
        let e = SimServer::start_at(SimConfig::default(), "0.0.0.0:0".parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("loopback"), "{e}");
        let bad = SimConfig {
            ttft_ms: f64::NAN,
            ..SimConfig::default()
        };
        let e = SimServer::start(bad, 0).await.unwrap_err();
        assert!(e.to_string().contains("ttft_ms"), "{e}");
        let e = SimConfig::from_query("tpot=3").unwrap_err().to_string();
        assert!(
            e.contains("tpot") && e.contains("tpot_ms") && e.contains("ttft_sigma"),
            "{e}"
        );
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_aborts_streams_and_stops_accepting() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=50&tpot_ms=50&ttft_sigma=0&tpot_sigma=0"), 0)
            .await
            .unwrap();
        let addr = srv.addr();
        let client = tokio::spawn(async move {
            one(
                addr,
                &post("/v1/chat/completions", &chat_body(100, true, true)),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(120)).await;
        srv.shutdown();
        let r = client.await.unwrap();
        assert_eq!(r.status, 200);
        assert!(!r.complete, "stream must be cut");
        assert!(r.end_ms < 1000.0, "cut at {} ms", r.end_ms);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
    })
    .await
    .expect("test timed out");
}

const REPLAY_CASE: &str = r#"
source: inline-test.md
api: openai-chat
status: 200
headers:
  content-type: text/event-stream
  x-case: inline
  content-length: "999"
reads:
  - at_ms: 10
    text: "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
  - at_ms: 60
    text: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\u00e9\"}}]}\n\n"
  - at_ms: 120
    hex: "e4bd"
  - at_ms: 121
    hex: "a0"
close_at_ms: 150
expect:
  success: true
  ttft_ms: 60
  output_tokens: 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_delivers_bytes_on_time() {
    timeout(LIMIT, async {
        let case = ReplayCase::from_yaml(REPLAY_CASE).unwrap();
        let want = case.read_bytes().unwrap();
        let srv = SimServer::start_replay(case, 0).await.unwrap();
        let r = one(srv.addr(), &post("/anything", "not even json")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("x-case"), Some("inline"));
        assert_eq!(r.header("content-length"), None, "body is chunked");
        assert!(r.complete);
        let got: Vec<f64> = r.chunks.iter().map(|c| c.0).collect();
        eprintln!(
            "replay: chunks at [{}] ms (planned 10, 60, 120, 121), end {:.1} ms (planned 150)",
            fmt_ms(&got),
            r.end_ms
        );
        assert_eq!(r.chunks.len(), want.len());
        for ((t, bytes), (at, want_bytes)) in r.chunks.iter().zip(&want) {
            assert_eq!(bytes, want_bytes);
            assert!(near(*t, *at), "read planned at {at} ms arrived at {t} ms");
        }
        assert!(near(r.end_ms, 150.0), "end at {} ms", r.end_ms);
        let r = one(srv.addr(), &get("/v1/models")).await;
        assert_eq!(r.json()["data"][0]["id"], "perfgate-replay");
        assert_eq!(srv.requests_served(), 2);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_abort_leaves_body_incomplete() {
    timeout(LIMIT, async {
        for close in ["close_at_ms: 80\n", ""] {
            let yaml = format!(
                "status: 200\nheaders:\n  content-type: text/event-stream\nreads:\n  - at_ms: 10\n    text: \"data: {{}}\\n\\n\"\n  - at_ms: 40\n    text: \"data: {{\\\"x\\\":1}}\\n\\n\"\n{close}abort: true\n"
            );
            let case = ReplayCase::from_yaml(&yaml).unwrap();
            let srv = SimServer::start_replay(case, 0).await.unwrap();
            let r = one(srv.addr(), &post("/v1/chat/completions", "{}")).await;
            let got: Vec<f64> = r.chunks.iter().map(|c| c.0).collect();
            eprintln!(
                "replay abort ({}): chunks at [{}] ms, connection closed at {:.1} ms",
                close.trim(),
                fmt_ms(&got),
                r.end_ms
            );
            assert_eq!(r.status, 200);
            assert!(!r.complete, "abort must leave the chunked body unfinished");
            assert_eq!(r.chunks.len(), 2, "both reads arrive before the abort");
            assert_eq!(r.chunks[1].1, b"data: {\"x\":1}\n\n");
            let planned_end = if close.is_empty() { 40.0 } else { 80.0 };
            assert!(near(r.end_ms, planned_end), "closed at {} ms", r.end_ms);
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_error_status_and_empty_body() {
    timeout(LIMIT, async {
        let case = ReplayCase::from_yaml(
            "status: 503\nheaders:\n  content-type: text/html\nreads:\n  - at_ms: 0\n    text: \"<html><title>Busy</title></html>\"\n",
        )
        .unwrap();
        let srv = SimServer::start_replay(case, 0).await.unwrap();
        let r = one(srv.addr(), &post("/v1/chat/completions", "{}")).await;
        assert_eq!(r.status, 503);
        assert!(r.complete);
        assert_eq!(r.chunks.len(), 1);
        let h = one(srv.addr(), &get("/health")).await;
        assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
        let bad = ReplayCase {
            status: 42,
            ..ReplayCase::from_yaml("status: 200").unwrap()
        };
        let e = SimServer::start_replay(bad, 0).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    })
    .await
    .expect("test timed out");
}

/// A measured time (ms) is near its planned time: never early (beyond clock granularity) and
/// at most 40 ms late, so a loaded 2-core machine does not fail a correct server.
fn near(measured: f64, planned: f64) -> bool {
    measured >= planned - 3.0 && measured <= planned + 40.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_times_are_recorded_and_served() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=30&tpot_ms=5&ttft_sigma=0&tpot_sigma=0"), 0)
            .await
            .unwrap();
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(4, true, true)),
        )
        .await;
        let n: u64 = r
            .header(super::server::SIM_REQUEST_HEADER)
            .expect("request header")
            .parse()
            .unwrap();
        let t = srv.timings(n).expect("timings kept");
        let kinds: Vec<_> = t.events.iter().map(|(_, k)| *k).collect();
        use super::EventKind::*;
        assert_eq!(
            kinds,
            [Role, Token, Token, Token, Token, Finish, Usage, Done]
        );
        // the first token was sent ~30 ms after arrival and arrived after it was sent
        let first = t.first_token().unwrap();
        let sent_ms = first.duration_since(t.arrival).as_secs_f64() * 1000.0;
        assert!((25.0..200.0).contains(&sent_ms), "{sent_ms}");
        // the client saw it about when it was sent (its t0 is after connecting and writing)
        let seen_ms = content_times(&r)[0];
        assert!((seen_ms - sent_ms).abs() < 25.0, "{seen_ms} vs {sent_ms}");
        assert!(t.events.windows(2).all(|w| w[1].0 >= w[0].0));

        let j = one(srv.addr(), &get(&format!("/sim/timings/{n}"))).await;
        assert_eq!(j.status, 200);
        let v = j.json();
        assert_eq!(v["request"], n);
        let ev = v["events"].as_array().unwrap();
        assert_eq!(ev.len(), 8);
        assert_eq!(ev[1]["kind"], "token");
        let since_arrival = ev[1]["ms_since_arrival"].as_f64().unwrap();
        assert!((since_arrival - sent_ms).abs() < 0.01);
        let o = v["arrival_ms_since_origin"].as_f64().unwrap();
        assert!((ev[1]["ms_since_origin"].as_f64().unwrap() - o - since_arrival).abs() < 0.01);
        assert_eq!(one(srv.addr(), &get("/sim/timings/999")).await.status, 404);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_stalls_and_varied_output() {
    timeout(LIMIT, async {
        // 7 tokens: token 1 alone at 20 ms, then bursts of 3 sent when their last token is due;
        // gaps 4 ms, with a 60 ms stall after token 4 (stall_every 4).
        // token due times: 20, 24, 28, 32, 96, 100, 104 -> events [1]@20, [2..4]@32, [5..7]@104
        let srv = SimServer::start(
            sim("ttft_ms=20&tpot_ms=4&ttft_sigma=0&tpot_sigma=0&burst=3&stall_every=4&stall_ms=60&vary_output=3"),
            0,
        )
        .await
        .unwrap();
        let mut seen_tokens = Vec::new();
        for round in 0..3u64 {
            let r = one(
                srv.addr(),
                &post("/v1/chat/completions", &chat_body(7, true, true)),
            )
            .await;
            assert_eq!(r.status, 200);
            let n: u64 = r
                .header(super::server::SIM_REQUEST_HEADER)
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(n, round);
            let ev = r.events();
            let usage: Value = ev
                .iter()
                .filter(|(_, p)| p.as_str() != "[DONE]")
                .map(|(_, p)| serde_json::from_str::<Value>(p).unwrap())
                .find(|v| v.get("usage").is_some_and(|u| !u.is_null()))
                .expect("usage chunk");
            // vary_output 3: request n generates 7 - (n mod 3) tokens
            let want = 7 - round;
            assert_eq!(usage["usage"]["completion_tokens"], want);
            let texts: Vec<String> = ev
                .iter()
                .filter(|(_, p)| p.as_str() != "[DONE]")
                .filter_map(|(_, p)| {
                    let v: Value = serde_json::from_str(p).unwrap();
                    v["choices"][0]["delta"]["content"]
                        .as_str()
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                })
                .collect();
            seen_tokens.push(texts.clone());
            let t = srv.timings(n).unwrap();
            assert_eq!(u64::from(t.output_tokens), want);
            let offs: Vec<f64> = t
                .token_times()
                .map(|x| x.duration_since(t.arrival).as_secs_f64() * 1000.0)
                .collect();
            let expect: &[f64] = match round {
                0 => &[20.0, 32.0, 104.0],
                1 => &[20.0, 32.0, 100.0], // 6 tokens: [1], [2..4], [5,6] due at 100
                _ => &[20.0, 32.0, 96.0],  // 5 tokens: [1], [2..4], [5] due at 96
            };
            assert_eq!(offs.len(), expect.len(), "{offs:?}");
            for (o, e) in offs.iter().zip(expect) {
                // sent when due, never early, at most a timer tick or a busy machine late
                assert!(*o >= e - 0.01 && *o < e + 40.0, "sent {o} ms, due {e} ms");
            }
        }
        assert_eq!(
            seen_tokens[0],
            vec![" tok1", " tok2 tok3 tok4", " tok5 tok6 tok7"]
        );
        assert_eq!(seen_tokens[2], vec![" tok1", " tok2 tok3 tok4", " tok5"]);

        // the list endpoint: every kept request, in order, with wall-clock arrival and tokens
        let j = one(srv.addr(), &get("/sim/timings")).await;
        assert_eq!(j.status, 200);
        let list = j.json()["requests"].as_array().unwrap().clone();
        assert_eq!(list.len(), 3);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        for (i, r) in list.iter().enumerate() {
            assert_eq!(r["request"], i as u64);
            assert_eq!(r["output_tokens"], 7 - i as u64);
            let a = r["arrival_unix_ms"].as_f64().unwrap();
            assert!(a <= now_ms && now_ms - a < 10_000.0, "{a} vs {now_ms}");
        }
        let j = one(srv.addr(), &get("/sim/timings?from=2")).await;
        let list = j.json()["requests"].as_array().unwrap().clone();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["request"], 2);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timings_queries_are_checked() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=1&tpot_ms=1"), 0)
            .await
            .unwrap();
        for q in ["from=abc", "from=-1", "from=", "since=3"] {
            let r = one(srv.addr(), &get(&format!("/sim/timings?{q}"))).await;
            assert_eq!(r.status, 400, "{q}");
            let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(msg.contains("from"), "{q}: {msg}");
        }
        let r = one(srv.addr(), &get("/sim/timings/12")).await;
        assert_eq!(r.status, 404);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("no timings kept for request 12"), "{msg}");
        let r = one(srv.addr(), &get("/nope")).await;
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            msg.contains("GET /health") && msg.contains("/sim/timings"),
            "{msg}"
        );
        assert_eq!(
            one(srv.addr(), &get("/sim/timings")).await.json(),
            json!({"requests": []})
        );
    })
    .await
    .expect("test timed out");
}

/// A Responses API request body (`POST /v1/responses`).
fn responses_body(max_output_tokens: u64, stream: bool) -> String {
    json!({
        "model": "whatever",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Write a short story about a cat"}],
        "max_output_tokens": max_output_tokens,
        "stream": stream,
    })
    .to_string()
}

/// The typed events of a Responses API stream: (arrival ms, `event:` name, data JSON); asserts
/// each HTTP chunk is exactly one `event: ...\ndata: ...\n\n` event whose name is its `type`.
fn typed_events(resp: &RawResponse) -> Vec<(f64, String, Value)> {
    resp.chunks
        .iter()
        .map(|(t, c)| {
            let s = std::str::from_utf8(c).expect("UTF-8 chunk");
            let rest = s.strip_prefix("event: ").unwrap_or_else(|| panic!("{s:?}"));
            let (name, rest) = rest.split_once('\n').unwrap();
            let data = rest
                .strip_prefix("data: ")
                .and_then(|d| d.strip_suffix("\n\n"))
                .unwrap_or_else(|| panic!("{s:?}"));
            assert!(
                !data.contains('\n'),
                "more than one event in a chunk: {s:?}"
            );
            let v: Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["type"], name, "{s:?}");
            (*t, name.to_string(), v)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_responses_shape_and_known_answer() {
    timeout(LIMIT, async {
        // Known answer, sigma 0: the first delta at ttft_ms = 100 ms, then one every tpot_ms =
        // 20 ms: 100, 120, 140, 160, 180; TPOT = (180 - 100) / (5 - 1) = 20 ms.
        let srv = SimServer::start(
            sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0&model=m3"),
            0,
        )
        .await
        .unwrap();
        for path in ["/v1/responses", "/responses"] {
            let r = one(srv.addr(), &post(path, &responses_body(5, true))).await;
            assert_eq!(r.status, 200, "{path}");
            assert_eq!(r.header("content-type"), Some("text/event-stream"));
            assert!(r.complete, "body must end with the final chunk");
            let ev = typed_events(&r);
            let names: Vec<&str> = ev.iter().map(|(_, n, _)| n.as_str()).collect();
            let mut want = vec![
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
            ];
            want.extend(["response.output_text.delta"; 5]);
            want.extend([
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                // max_output_tokens (5) cut the answer, as OpenAI reports it
                "response.incomplete",
            ]);
            assert_eq!(names, want, "{path}");
            for (i, (_, _, v)) in ev.iter().enumerate() {
                assert_eq!(v["sequence_number"], i as u64, "{path}");
            }
            let id = &ev[0].2["response"]["id"];
            assert_eq!(ev[0].2["response"]["status"], "in_progress");
            assert_eq!(ev[0].2["response"]["model"], "m3");
            let deltas: Vec<&str> = ev[4..9]
                .iter()
                .map(|(_, _, v)| v["delta"].as_str().unwrap())
                .collect();
            assert_eq!(deltas, [" tok1", " tok2", " tok3", " tok4", " tok5"]);
            assert_eq!(ev[9].2["text"], " tok1 tok2 tok3 tok4 tok5");
            let last = &ev[12].2["response"];
            assert_eq!(&last["id"], id);
            assert_eq!(last["status"], "incomplete");
            assert_eq!(
                last["incomplete_details"],
                json!({"reason": "max_output_tokens"})
            );
            // input: "Be brief." 2 words + the 7 words of the message
            assert_eq!(
                last["usage"],
                json!({"input_tokens": 9, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 14})
            );
            assert_eq!(last["output"][0]["status"], "incomplete");
            // timing: the events before the answer at once, the deltas on schedule, the rest
            // with the last delta
            let t: Vec<f64> = ev[4..9].iter().map(|(t, _, _)| *t).collect();
            eprintln!(
                "{path}: deltas at [{}] ms, end {:.1} ms",
                fmt_ms(&t),
                r.end_ms
            );
            assert!(ev[3].0 < 40.0, "content_part.added at {} ms", ev[3].0);
            for (i, planned) in [100.0, 120.0, 140.0, 160.0, 180.0].iter().enumerate() {
                assert!(near(t[i], *planned), "delta {i} at {} ms", t[i]);
            }
            assert!(
                near(ev[12].0, 180.0),
                "response.incomplete at {} ms",
                ev[12].0
            );
            assert!(near(r.end_ms, 180.0), "end at {} ms", r.end_ms);

            // the timing log names each event's kind
            let n: u64 = r
                .header(super::server::SIM_REQUEST_HEADER)
                .unwrap()
                .parse()
                .unwrap();
            let kinds: Vec<_> = srv.timings(n).unwrap().events.iter().map(|e| e.1).collect();
            use super::EventKind::*;
            assert_eq!(
                kinds,
                [
                    Role, Role, Role, Role, Token, Token, Token, Token, Token, Finish, Finish,
                    Finish, Done
                ]
            );
            assert_eq!(srv.timings(n).unwrap().output_tokens, 5);
        }
        // a cap below max_output_tokens: the model "ended" on its own, response.completed
        let srv = SimServer::start(sim("ttft_ms=5&tpot_ms=1&max_output=3&burst=2"), 0)
            .await
            .unwrap();
        let r = one(
            srv.addr(),
            &post("/v1/responses", &responses_body(10, true)),
        )
        .await;
        let ev = typed_events(&r);
        // burst 2: token 1 alone, then tokens 2-3 in one delta
        let deltas: Vec<&str> = ev
            .iter()
            .filter(|(_, n, _)| n == "response.output_text.delta")
            .map(|(_, _, v)| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, [" tok1", " tok2 tok3"]);
        let (_, name, last) = ev.last().unwrap();
        assert_eq!(name, "response.completed");
        assert_eq!(last["sequence_number"], 9);
        assert_eq!(last["response"]["status"], "completed");
        assert_eq!(last["response"]["incomplete_details"], Value::Null);
        assert_eq!(last["response"]["usage"]["output_tokens"], 3);
        // not streamed: the final response object; a GET is refused
        let r = one(
            srv.addr(),
            &post("/v1/responses", &responses_body(2, false)),
        )
        .await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(
            (v["object"].as_str(), v["status"].as_str()),
            (Some("response"), Some("incomplete"))
        );
        assert_eq!(v["output"][0]["content"][0]["text"], " tok1 tok2");
        assert_eq!(v["usage"]["output_tokens"], 2);
        assert_eq!(one(srv.addr(), &get("/v1/responses")).await.status, 405);
        let bad = one(
            srv.addr(),
            &post("/v1/responses", r#"{"input":"x","max_output_tokens":0}"#),
        )
        .await;
        assert_eq!(bad.status, 400);
    })
    .await
    .expect("test timed out");
}

// Issue 28: a Responses request without max_output_tokens asked no limit, yet the simulator
// reported `response.incomplete` (reason max_output_tokens) at its default 16 tokens. Now the
// default length (the chat default, DEFAULT_MAX_TOKENS) ends with response.completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_without_a_limit_complete_at_the_default_length() {
    timeout(LIMIT, async {
        let srv = SimServer::start(sim("ttft_ms=1&tpot_ms=1&burst=4"), 0)
            .await
            .unwrap();
        let body = json!({"model": "m", "input": "hi", "stream": true}).to_string();
        let r = one(srv.addr(), &post("/v1/responses", &body)).await;
        let ev = typed_events(&r);
        let (_, name, last) = ev.last().unwrap();
        assert_eq!(name, "response.completed");
        assert_eq!(last["response"]["status"], "completed");
        assert_eq!(
            last["response"]["usage"]["output_tokens"],
            super::server::DEFAULT_MAX_TOKENS
        );
        // with the limit asked, the cap is still reported as OpenAI does
        let r = one(
            srv.addr(),
            &post("/v1/responses", &responses_body(16, true)),
        )
        .await;
        let ev = typed_events(&r);
        assert_eq!(ev.last().unwrap().1, "response.incomplete");
    })
    .await
    .expect("test timed out");
}
