//! gzip and br `Content-Encoding` on an SSE stream, through perfgate's real HTTP client.
//!
//! A tiny HTTP/1.1 server (std `TcpListener` on 127.0.0.1, one connection, every wait bounded)
//! streams an openai-chat answer of [`TOKENS`] content chunks, the first [`FIRST_MS`] after the
//! request and then one every [`GAP_MS`], plus a usage chunk and `[DONE]`, compressed with gzip
//! (flate2) or brotli, in chunked transfer encoding.
//!
//! What was observed, and is asserted here:
//! * When the server flushes its compressor after every event (gzip `Z_SYNC_FLUSH`, brotli
//!   `BROTLI_OPERATION_FLUSH`: `Write::flush` in flate2 and brotli), each event arrives as its own
//!   compressed block and reqwest's decoder hands it on at once: TTFT and TPOT are the same as
//!   for an uncompressed stream (within a few ms on loopback), and the token count comes from
//!   usage as usual.
//! * When the server does NOT flush (a compressor that only writes when its buffer fills, as a
//!   proxy with default gzip settings does), nothing arrives until the stream ends: every event
//!   reaches perfgate at once, so TTFT equals the whole stream's time and TPOT is ~0. perfgate
//!   measures what arrives, which is what a client would see; it cannot recover the server's
//!   timing. That is why perfgate asks for `Accept-Encoding: identity` by default (asserted
//!   below): a server or proxy that honours it sends the stream uncompressed. A scenario that
//!   wants to measure the compressed path sets `headers: {Accept-Encoding: "gzip, br"}`.

use perfgate::client::http::StreamClient;
use perfgate::config::Scenario;
use perfgate::record::{RequestRecord, TokenSource};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Content chunks per answer.
const TOKENS: u64 = 8;
/// Delay from the request to the first content chunk, ms.
const FIRST_MS: u64 = 120;
/// Delay between content chunks, ms.
const GAP_MS: u64 = 30;
/// Slack for timings on a busy 2-core machine, ms (loopback plus timer lateness).
const TOL_MS: f64 = 40.0;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Encoding {
    Gzip,
    Brotli,
}

/// Writes every `write` call as one HTTP/1.1 chunk, straight to the socket.
struct Chunked(TcpStream);

impl Write for Chunked {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !buf.is_empty() {
            self.0
                .write_all(format!("{:x}\r\n", buf.len()).as_bytes())?;
            self.0.write_all(buf)?;
            self.0.write_all(b"\r\n")?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The SSE events of one answer: content chunks, a usage chunk, `[DONE]`.
fn events() -> Vec<String> {
    let mut ev = vec![
        r#"data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#.to_string(),
    ];
    for i in 0..TOKENS {
        ev.push(format!(
            r#"data: {{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"tok{i} "}},"finish_reason":null}}]}}"#
        ));
    }
    ev.push(r#"data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#.to_string());
    ev.push(format!(
        r#"data: {{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":{TOKENS},"total_tokens":{}}}}}"#,
        TOKENS + 3
    ));
    ev.push("data: [DONE]".to_string());
    ev.into_iter().map(|e| e + "\n\n").collect()
}

/// Serves one request on a fresh loopback port; returns the base URL and a receiver for the
/// request's headers (lower-cased names). The thread gives up after 30 s without a client.
fn serve(enc: Encoding, flush_each_event: bool) -> (String, mpsc::Receiver<Vec<(String, String)>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let sock = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => return,
            }
        };
        sock.set_nonblocking(false).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        sock.set_nodelay(true).unwrap();
        let mut reader = BufReader::new(sock.try_clone().unwrap());
        let mut headers = Vec::new();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap(); // request line
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 || line.trim_end().is_empty() {
                break;
            }
            if let Some((k, v)) = line.trim_end().split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let _ = tx.send(headers);
        let t0 = Instant::now();
        let mut out = sock;
        let ce = match enc {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
        };
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: {ce}\r\n\
             cache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        out.flush().unwrap();
        let w = Chunked(out.try_clone().unwrap());
        let mut z: Box<dyn Write> = match enc {
            Encoding::Gzip => Box::new(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::default(),
            )),
            Encoding::Brotli => Box::new(brotli::CompressorWriter::new(w, 4096, 5, 22)),
        };
        for (i, ev) in events().iter().enumerate() {
            // the role chunk at once; content i at FIRST_MS + i * GAP_MS; the rest right after
            let at = match i as u64 {
                0 => 0,
                k if k <= TOKENS => FIRST_MS + (k - 1) * GAP_MS,
                _ => FIRST_MS + (TOKENS - 1) * GAP_MS,
            };
            let due = t0 + Duration::from_millis(at);
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            z.write_all(ev.as_bytes()).unwrap();
            if flush_each_event {
                z.flush().unwrap();
            }
        }
        drop(z); // finishes the compressed stream (gzip trailer / brotli last block)
        out.write_all(b"0\r\n\r\n").unwrap();
        out.flush().unwrap();
    });
    (format!("http://127.0.0.1:{port}/v1"), rx)
}

fn scenario(base_url: &str, extra_endpoint: &str) -> Scenario {
    let yaml = format!(
        "scenarios:\n  - name: enc\n    endpoint:\n      base_url: \"{base_url}\"\n      model: m\n{extra_endpoint}    request:\n      prompt: hi\n      max_tokens: {TOKENS}\n    load:\n      samples: 20\n"
    );
    let mut s = perfgate::config::parse_str(&yaml, "enc.yaml", &|_| None)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    s.remove(0)
}

/// One request through perfgate's client; the record and the request headers the server saw.
async fn measure(
    enc: Encoding,
    flush: bool,
    extra_endpoint: &str,
) -> (RequestRecord, Vec<(String, String)>) {
    let (base, headers) = serve(enc, flush);
    let sc = scenario(&base, extra_endpoint);
    let client = StreamClient::new(&sc.endpoint, &base, 1).unwrap();
    let body = perfgate::client::body::build(
        sc.endpoint.api,
        &sc.endpoint.model,
        &sc.request,
        sc.endpoint.include_usage,
        None,
    );
    let sent = tokio::time::timeout(Duration::from_secs(30), client.send(&body, Instant::now()))
        .await
        .expect("the request ends within 30 s");
    let h = headers
        .recv_timeout(Duration::from_secs(5))
        .expect("the server saw the request");
    (sent.record, h)
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Held while timings are measured: the two cores are busy enough without two streams at once.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A compressed stream flushed per event: same tokens and timings as an uncompressed one.
async fn flushed_stream_is_measured_like_plain(enc: Encoding) {
    let _g = SERIAL.lock().await;
    let mut last = String::new();
    // Timings are retried (up to 3 runs) only when the machine delayed a wake-up; counts never.
    for _attempt in 0..3 {
        let (r, h) = measure(enc, true, "").await;
        assert!(r.error.is_none(), "{enc:?}: {:?}", r.error);
        assert_eq!(header(&h, "accept-encoding"), Some("identity"), "{h:?}");
        assert_eq!(r.output_tokens, Some(TOKENS), "{enc:?}");
        assert_eq!(r.token_source, Some(TokenSource::Usage), "{enc:?}");
        assert_eq!(r.token_events, TOKENS, "{enc:?}");
        let ttft = r.ttft_ms.unwrap();
        let tpot = r.tpot_ms.unwrap();
        let e2e = r.e2e_ms.unwrap();
        println!(
            "{enc:?} flushed per event: TTFT {ttft:.1} ms, TPOT {tpot:.2} ms, E2E {e2e:.1} ms"
        );
        let want_e2e = (FIRST_MS + (TOKENS - 1) * GAP_MS) as f64;
        if (FIRST_MS as f64 - 1.0..FIRST_MS as f64 + TOL_MS).contains(&ttft)
            && (GAP_MS as f64 - 5.0..GAP_MS as f64 + 5.0).contains(&tpot)
            && (want_e2e - 1.0..want_e2e + TOL_MS).contains(&e2e)
        {
            return;
        }
        last = format!("TTFT {ttft} (want ~{FIRST_MS}), TPOT {tpot} (want ~{GAP_MS}), E2E {e2e} (want ~{want_e2e})");
    }
    panic!("{enc:?}: timings off in 3 runs: {last}");
}

#[tokio::test]
async fn gzip_stream_flushed_per_event() {
    flushed_stream_is_measured_like_plain(Encoding::Gzip).await;
}

#[tokio::test]
async fn brotli_stream_flushed_per_event() {
    flushed_stream_is_measured_like_plain(Encoding::Brotli).await;
}

/// A compressor that never flushes holds every event until the end: perfgate still counts
/// the right tokens, and its TTFT is (honestly) the arrival time of the whole body.
#[tokio::test]
async fn unflushed_gzip_arrives_at_the_end() {
    let _g = SERIAL.lock().await;
    let (r, _) = measure(Encoding::Gzip, false, "").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.output_tokens, Some(TOKENS));
    assert_eq!(r.token_events, TOKENS);
    let ttft = r.ttft_ms.unwrap();
    let e2e = r.e2e_ms.unwrap();
    println!(
        "gzip, no flush: TTFT {ttft:.1} ms, E2E {e2e:.1} ms, TPOT {:?}",
        r.tpot_ms
    );
    let stream_ms = (FIRST_MS + (TOKENS - 1) * GAP_MS) as f64;
    assert!(
        ttft >= stream_ms - 1.0,
        "TTFT {ttft} < whole stream {stream_ms}"
    );
    // all events arrive together: flushed, they would be (TOKENS - 1) * GAP_MS = 210 ms apart
    assert!(
        e2e - ttft < GAP_MS as f64,
        "all events arrive together: {r:?}"
    );
}

/// `headers:` overrides perfgate's `Accept-Encoding: identity`; decoding works either way.
#[tokio::test]
async fn accept_encoding_can_be_overridden() {
    let (r, h) = measure(
        Encoding::Brotli,
        true,
        "      headers: {Accept-Encoding: \"gzip, br\"}\n",
    )
    .await;
    assert_eq!(header(&h, "accept-encoding"), Some("gzip, br"), "{h:?}");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.output_tokens, Some(TOKENS));
}
