//! End-to-end tests of the simulator over real loopback HTTP, with a hand-written HTTP/1.1
//! client on a raw `TcpStream` (no other perfgate module), so timing is measured as close to
//! the socket as possible. Every test is bounded by `tokio::time::timeout`.
//!
//! By what they test: `api` (the OpenAI-compatible surface: models, chat and completions
//! bodies), `responses` (the Responses API stream), `timing` (the schedules served on time,
//! concurrent streams, seeds, bursts and stalls), `replay` (recorded stream cases), `robustness`
//! (bad requests and settings, error injection, shutdown). This file is their HTTP client.

mod api;
mod replay;
mod responses;
mod robustness;
mod timing;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::schedule::RequestPlan;
use super::{ReplayCase, SimConfig, SimServer};

const LIMIT: Duration = Duration::from_secs(10);

/// Runs `test` against a simulator started with the options `opts` on a free loopback port,
/// the whole test bounded by [`LIMIT`].
async fn serve<F, Fut>(opts: SimConfig, test: F)
where
    F: FnOnce(SimServer) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    timeout(LIMIT, async {
        let srv = SimServer::start(opts, 0).await.unwrap();
        test(srv).await
    })
    .await
    .expect("test timed out");
}

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

/// One streamed chat request of `max_tokens` tokens, the request number the simulator answered
/// with, and the times it kept for that request.
async fn chat_with_timings(
    srv: &SimServer,
    max_tokens: u64,
) -> (RawResponse, u64, super::RequestTimings) {
    let r = one(
        srv.addr(),
        &post("/v1/chat/completions", &chat_body(max_tokens, true, true)),
    )
    .await;
    let n: u64 = r
        .header(super::server::SIM_REQUEST_HEADER)
        .expect("request header")
        .parse()
        .unwrap();
    let t = srv.timings(n).expect("timings kept");
    (r, n, t)
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

/// A measured time (ms) is near its planned time: never early (beyond clock granularity) and
/// at most 40 ms late, so a loaded 2-core machine does not fail a correct server.
fn near(measured: f64, planned: f64) -> bool {
    measured >= planned - 3.0 && measured <= planned + 40.0
}
