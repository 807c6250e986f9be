//! perfgate's own HTTP/1.1 transport for streamed requests to a plain `http://` endpoint with no
//! proxy (issue 47): one task per stream reads its socket into a buffer kept for the stream,
//! decodes the framing in place ([`super::wire`]) and hands each read's body bytes to the fold
//! with the kernel's receive time of the read's last segment ([`crate::rx_stamp`]: a read that
//! runs late still carries when its bytes arrived). No connection task, no channel between it and the request, no body
//! layers: the reqwest transport's per-event hop. Connections are kept alive in a small pool of
//! this client's own ([`Own`]: at most the scenario's concurrency, each idle at most
//! [`super::POOL_IDLE_TIMEOUT`]); a connection goes back only when its body ended by its
//! framing and neither side asked to close it.
//!
//! Everything else stays on reqwest: `https://`, a proxy from the environment, the requests
//! outside the measurement (`/models`, readiness, `/metrics`). `PERFGATE_HTTP_TRANSPORT`
//! (`reqwest` or `own`) forces one transport (tests and the benchmark; see [`Transport`]).

use super::errors::root_cause;
use super::wire::{self, BodyDecoder, Framing, MAX_HEAD_BYTES};
use super::{ms, POOL_IDLE_TIMEOUT};
use crate::client::deadline::Deadlines;
use crate::client::measure::End;
use crate::client::stream::{BodyFold, Step};
use crate::record::{Failure, FailureClass};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout_at;

/// The environment variable that forces a transport: `reqwest` or `own` (anything else, or
/// unset: [`Transport::Auto`]).
pub const TRANSPORT_ENV: &str = "PERFGATE_HTTP_TRANSPORT";
/// A stream's read buffer at first, bytes.
pub const READ_BUF_START: usize = 4 << 10;
/// The most a stream's read buffer grows to, bytes: it grows (doubling) only when a read
/// filled it, that is when the client found that many bytes waiting.
pub const READ_BUF_MAX: usize = 64 << 10;
/// A stream's task yields to the others after handing on this many body bytes without
/// waiting: a late stream that finds its socket full again after every read would otherwise
/// fold up to tokio's budget of 128 reads (of up to [`READ_BUF_MAX`] each) in one poll, holding
/// the thread (the other streams' reads, the timers, the lag probe) for tens of ms.
pub const YIELD_BYTES: usize = 16 << 10;
/// The most compressed bytes read at once (a gzip or br body the server sends although perfgate
/// asked for identity): what one read can expand to stays bounded (deflate: ~1,000 x).
pub const COMPRESSED_READ: usize = 4 << 10;
/// The most bytes one read of a compressed body may decompress to.
pub const MAX_DECODED: usize = 16 << 20;

/// Which transport carries the streamed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// perfgate's own for `http://` without a proxy, reqwest otherwise.
    Auto,
    /// Always reqwest.
    Reqwest,
    /// perfgate's own for every `http://` endpoint, a proxy in the environment or not
    /// (`https://` stays on reqwest).
    Own,
}

impl Transport {
    /// The transport [`TRANSPORT_ENV`] asks for.
    pub fn from_env() -> Transport {
        match std::env::var(TRANSPORT_ENV).as_deref() {
            Ok("reqwest") => Transport::Reqwest,
            Ok("own") => Transport::Own,
            _ => Transport::Auto,
        }
    }

    /// Whether streamed requests to `url` go over perfgate's own transport.
    pub fn own_for(self, url: &reqwest::Url) -> bool {
        // a user name or password in the URL is reqwest's Basic authorization
        let userinfo = !url.username().is_empty() || url.password().is_some();
        if url.scheme() != "http" || url.host().is_none() || userinfo {
            return false;
        }
        match self {
            Transport::Reqwest => false,
            Transport::Own => true,
            Transport::Auto => !proxied(url),
        }
    }
}

/// reqwest would send a request to `url` through a proxy from the environment (`HTTP_PROXY`,
/// `ALL_PROXY`, `NO_PROXY`: the same matcher reqwest uses).
fn proxied(url: &reqwest::Url) -> bool {
    match url.as_str().parse::<hyper::Uri>() {
        Ok(uri) => hyper_util::client::proxy::matcher::Matcher::from_system()
            .intercept(&uri)
            .is_some(),
        Err(_) => true,
    }
}

/// One kept-alive connection and its stream's read buffer.
pub(super) struct Conn {
    stream: TcpStream,
    local: Option<SocketAddr>,
    /// The read buffer: `buf[..filled]` holds bytes not yet used.
    buf: Vec<u8>,
    filled: usize,
    /// The kernel's receive time of the last read's last segment ([`crate::rx_stamp`]), until
    /// the bytes it read are handed on.
    stamp: Option<Instant>,
    /// When it went idle in the pool.
    since: Instant,
}

/// The own transport of one client: where to connect and the idle connections.
pub(super) struct Own {
    url: reqwest::Url,
    connect_timeout: Duration,
    max_idle: usize,
    idle: Mutex<Vec<Conn>>,
}

/// Why no response head came (the caller makes the [`Failure`]).
pub(super) enum HeadError {
    /// Connecting failed: refused or unreachable (`timeout` false), or not within
    /// `connect_timeout`.
    Connect { timeout: bool, cause: String },
    /// The connection closed or broke, or the answer was not HTTP/1.1, before a response.
    Broken(String),
}

impl Own {
    pub(super) fn new(url: &reqwest::Url, connect_timeout: Duration, max_idle: usize) -> Own {
        Own {
            url: url.clone(),
            connect_timeout,
            max_idle: max_idle.max(1),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle connection the server has not closed, or `None`.
    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(c) = idle.pop() {
            if c.since.elapsed() < POOL_IDLE_TIMEOUT && alive(&c.stream) {
                return Some(c);
            }
        }
        None
    }

    /// Returns a connection whose response ended cleanly to the pool (when there is room).
    fn checkin(&self, mut c: Conn) {
        if c.buf.len() > READ_BUF_START {
            c.buf = vec![0; READ_BUF_START];
        }
        c.filled = 0;
        c.stamp = None;
        c.since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(c);
        }
    }

    /// Opens a connection (TCP_NODELAY), trying the host's addresses in order, all within
    /// `connect_timeout`.
    async fn connect(&self) -> Result<Conn, HeadError> {
        let port = self.url.port_or_known_default().unwrap_or(80);
        let host = self.url.host();
        let attempt = async {
            let addrs: Vec<SocketAddr> = match host {
                Some(url::Host::Ipv4(ip)) => vec![SocketAddr::from((ip, port))],
                Some(url::Host::Ipv6(ip)) => vec![SocketAddr::from((ip, port))],
                Some(url::Host::Domain(d)) => tokio::net::lookup_host((d, port))
                    .await
                    .map_err(|e| e.to_string())?
                    .collect(),
                None => Vec::new(),
            };
            let mut last = String::from("no address to connect to");
            for a in addrs {
                match TcpStream::connect(a).await {
                    Ok(s) => return Ok(s),
                    Err(e) => last = root_cause(&e),
                }
            }
            Err(last)
        };
        let stream = match tokio::time::timeout(self.connect_timeout, attempt).await {
            Err(_) => {
                return Err(HeadError::Connect {
                    timeout: true,
                    cause: "operation timed out".into(),
                })
            }
            Ok(Err(cause)) => {
                return Err(HeadError::Connect {
                    timeout: false,
                    cause,
                })
            }
            Ok(Ok(s)) => s,
        };
        let _ = stream.set_nodelay(true);
        crate::rx_stamp::enable(&stream);
        Ok(Conn {
            local: stream.local_addr().ok(),
            stream,
            buf: vec![0; READ_BUF_START],
            filled: 0,
            stamp: None,
            since: Instant::now(),
        })
    }

    /// Sends `request` (its bytes, [`wire::request`]) on a pooled connection or a new one and
    /// reads the response head. The caller bounds it in time.
    pub(super) async fn send(
        self: &Arc<Self>,
        request: &[u8],
        close: bool,
    ) -> Result<Response, HeadError> {
        let mut conn = match self.checkout() {
            Some(c) => c,
            None => self.connect().await?,
        };
        conn.stream
            .write_all(request)
            .await
            .map_err(|e| HeadError::Broken(root_cause(&e)))?;
        let head = loop {
            match wire::parse_head(&conn.buf[..conn.filled]) {
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    // an interim answer (100 Continue, 103 Early Hints): the real one follows
                    conn.buf.copy_within(h.len..conn.filled, 0);
                    conn.filled -= h.len;
                    continue;
                }
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(e) => return Err(HeadError::Broken(e.to_string())),
            }
            if conn.filled == conn.buf.len() {
                let n = (conn.buf.len() * 2).min(MAX_HEAD_BYTES);
                conn.buf.resize(n, 0);
            }
            let filled = conn.filled;
            match crate::rx_stamp::recv(&conn.stream, &mut conn.buf[filled..]).await {
                Ok((0, _)) => {
                    return Err(HeadError::Broken(
                        "connection closed before message completed".into(),
                    ))
                }
                Ok((n, stamp)) => {
                    conn.filled += n;
                    conn.stamp = stamp;
                }
                Err(e) => return Err(HeadError::Broken(root_cause(&e))),
            }
        };
        let framing = Framing::of(head.status, &head.headers)
            .map_err(|e| HeadError::Broken(e.to_string()))?;
        // the body's first bytes, read with the head
        conn.buf.copy_within(head.len..conn.filled, 0);
        conn.filled -= head.len;
        let says_close = |h: &reqwest::header::HeaderMap| {
            h.get_all(reqwest::header::CONNECTION).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
            })
        };
        let coding = Coding::of(&head.headers);
        Ok(Response {
            status: head.status,
            // a 101's connection now speaks another protocol
            reusable: head.http11 && head.status != 101 && !close && !says_close(&head.headers),
            headers: head.headers,
            dec: BodyDecoder::new(framing),
            coding,
            conn: Some(conn),
            own: Arc::clone(self),
        })
    }

    /// Pool warming: opens connections until `n` are idle, all within `deadline`; returns how
    /// many are idle.
    pub(super) async fn warm(&self, n: usize, deadline: Instant) -> usize {
        let idle = self.idle_count();
        let want = n.min(self.max_idle).saturating_sub(idle);
        let opened = futures_util::future::join_all(
            (0..want).map(|_| timeout_at(deadline.into(), self.connect())),
        )
        .await;
        for c in opened.into_iter().flatten().flatten() {
            self.checkin(c);
        }
        self.idle_count()
    }

    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether one of the connections at `conns` (local addresses) is idle in the pool and
    /// still open; the closed ones are dropped.
    pub(super) fn holds_open(&self, conns: &[SocketAddr]) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|c| alive(&c.stream));
        idle.iter()
            .any(|c| c.local.is_some_and(|l| conns.contains(&l)))
    }
}

/// The server has not closed the connection, and sent nothing unasked (a non-blocking read finds
/// no byte and no end).
fn alive(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A body's `Content-Encoding` that perfgate decodes (as reqwest does: gzip and br; anything
/// else is handed on as it came). Each decoder writes into a [`Capped`] buffer, so a bomb stops
/// when [`MAX_DECODED`] bytes came out of one read, not after it expanded.
enum Coding {
    Gzip(Box<flate2::write::GzDecoder<Capped>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Capped>>),
}

/// A decoder's output of one read: writing past [`MAX_DECODED`] bytes is an error.
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + b.len() > MAX_DECODED {
            return Err(std::io::Error::other(format!(
                "one read decompressed to more than {MAX_DECODED} bytes"
            )));
        }
        self.0.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Coding {
    fn of(h: &reqwest::header::HeaderMap) -> Option<Coding> {
        let v = h
            .get(reqwest::header::CONTENT_ENCODING)?
            .to_str()
            .ok()?
            .trim();
        let sink = Capped(Vec::new());
        if v.eq_ignore_ascii_case("gzip") || v.eq_ignore_ascii_case("x-gzip") {
            Some(Coding::Gzip(Box::new(flate2::write::GzDecoder::new(sink))))
        } else if v.eq_ignore_ascii_case("br") {
            let d = brotli_decompressor::DecompressorWriter::new(sink, 4096);
            Some(Coding::Brotli(Box::new(d)))
        } else {
            None
        }
    }

    /// Decodes `input`; the output is then [`Coding::out`]. More than [`MAX_DECODED`] bytes
    /// out of one read is an error (a decompression bomb), found as the output grows. Bytes
    /// after the end of the compressed stream are not decoded (as reqwest ignores them).
    fn feed(&mut self, input: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let w: &mut dyn Write = match self {
            Coding::Gzip(d) => {
                d.get_mut().0.clear();
                d.as_mut()
            }
            Coding::Brotli(d) => {
                d.get_mut().0.clear();
                d.as_mut()
            }
        };
        let mut rest = input;
        while !rest.is_empty() {
            match w.write(rest)? {
                0 => break,
                n => rest = &rest[n..],
            }
        }
        w.flush()
    }

    fn out(&self) -> &[u8] {
        match self {
            Coding::Gzip(d) => &d.get_ref().0,
            Coding::Brotli(d) => &d.get_ref().0,
        }
    }
}

/// A response on the own transport: its head, and its body being read.
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) headers: reqwest::header::HeaderMap,
    dec: BodyDecoder,
    coding: Option<Coding>,
    /// The connection may carry another request once the body ended.
    reusable: bool,
    conn: Option<Conn>,
    own: Arc<Own>,
}

/// One read of the body.
enum Read {
    /// Body bytes (possibly none: framing only); `len` of them at the front of the buffer, or in
    /// the decoder's output.
    Bytes(usize),
    /// The body ended (by its framing or, for a body until close, by the close).
    End,
    /// The transport failed: why.
    Failed(String),
}

impl Response {
    /// The local address of the connection.
    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        self.conn.as_ref().and_then(|c| c.local)
    }

    /// Decodes the `n` bytes at the front of the read buffer: the body's bytes are then
    /// [`Response::body`]'s.
    fn decode(&mut self, n: usize) -> Read {
        let Some(conn) = self.conn.as_mut() else {
            return Read::End;
        };
        let (out, used) = match self.dec.decode(&mut conn.buf[..n]) {
            Ok(x) => x,
            Err(e) => return Read::Failed(e.to_string()),
        };
        if used < n {
            // bytes after the body's end belong to no response
            self.reusable = false;
        }
        match &mut self.coding {
            None => Read::Bytes(out),
            Some(c) => match c.feed(&conn.buf[..out]) {
                Ok(()) => Read::Bytes(c.out().len()),
                Err(e) => Read::Failed(root_cause(&e)),
            },
        }
    }

    /// The body bytes of the last [`Response::decode`] (`len` of them).
    fn body(&self, len: usize) -> &[u8] {
        match (&self.coding, &self.conn) {
            (Some(c), _) => &c.out()[..len],
            (None, Some(conn)) => &conn.buf[..len],
            (None, None) => &[],
        }
    }

    /// Reads once (the bytes read with the head first) and decodes.
    async fn read(&mut self) -> Read {
        if let Some(e) = self.dec.error() {
            return Read::Failed(e.to_string());
        }
        if self.dec.done() {
            return Read::End;
        }
        let Some(conn) = self.conn.as_mut() else {
            return Read::End;
        };
        if conn.filled > 0 {
            let n = std::mem::take(&mut conn.filled);
            return self.decode(n);
        }
        let room = if self.coding.is_some() {
            COMPRESSED_READ.min(conn.buf.len())
        } else {
            conn.buf.len()
        };
        let n = match crate::rx_stamp::recv(&conn.stream, &mut conn.buf[..room]).await {
            Ok((0, _)) if self.dec.until_close() => {
                self.reusable = false;
                return Read::End;
            }
            Ok((0, _)) => return Read::Failed(self.dec.eof_message().into()),
            Ok((n, stamp)) => {
                conn.stamp = stamp;
                n
            }
            Err(e) => return Read::Failed(root_cause(&e)),
        };
        if n == conn.buf.len() && n < READ_BUF_MAX {
            conn.buf.resize(n * 2, 0);
        }
        self.decode(n)
    }

    /// Reads the body into `fold` until it ends, a limit is hit or the transport fails, with
    /// the reqwest transport's deadlines and one timer for the whole body (see
    /// [`super::read::read_body`]); each read's bytes are stamped with the kernel's receive time
    /// of its last segment ([`crate::rx_stamp`]), or the time it returned when there is none.
    pub(super) async fn read_body(
        &mut self,
        fold: &mut BodyFold,
        dl: &Deadlines,
        t0: Instant,
    ) -> End {
        let mut last_event = t0;
        let mut arrived = t0;
        let mut since_yield = 0usize;
        let timer = tokio::time::sleep_until(dl.next_chunk(false, t0).0.into());
        tokio::pin!(timer);
        loop {
            if since_yield >= YIELD_BYTES {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
            let read = tokio::select! {
                biased;
                read = self.read() => read,
                () = &mut timer => match super::read::next_deadline(dl, fold, last_event, t0) {
                    Ok(next) => { timer.as_mut().reset(next.into()); continue; }
                    Err(timed_out) => return timed_out,
                }
            };
            let now = Instant::now();
            // the bytes' arrival: the kernel's stamp (never after now), not before the last read's
            arrived = match self.conn.as_mut().and_then(|c| c.stamp.take()) {
                Some(s) => s.max(arrived),
                None => now,
            };
            match read {
                Read::Failed(why) => {
                    return End::Failed(
                        Failure {
                            class: FailureClass::Truncated,
                            status: None,
                            message: format!("connection reset / incomplete body ({why})"),
                        },
                        ms(now - t0),
                    )
                }
                Read::End => return End::Eof(ms(now - t0)),
                Read::Bytes(0) => {}
                Read::Bytes(len) => {
                    since_yield += len;
                    match fold.chunk(self.body(len), ms(arrived - t0)) {
                        Step::Done(end) => return end,
                        Step::More { event } => {
                            if event {
                                last_event = now;
                            }
                        }
                    }
                }
            }
            if self.dec.done() {
                return End::Eof(ms(arrived - t0));
            }
        }
    }

    /// The first `limit` bytes of the body (lossy UTF-8), read until `deadline`.
    pub(super) async fn read_prefix(mut self, limit: usize, deadline: Instant) -> String {
        let mut buf = Vec::new();
        while buf.len() < limit {
            match timeout_at(deadline.into(), self.read()).await {
                Ok(Read::Bytes(len)) => {
                    let b = self.body(len);
                    buf.extend_from_slice(&b[..b.len().min(limit - buf.len())]);
                }
                _ => break,
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Reads and discards the rest of the body, at most about `limit` bytes, until `deadline`;
    /// true when it ended.
    pub(super) async fn drain(&mut self, limit: usize, deadline: Instant) -> bool {
        let mut read = 0usize;
        while read <= limit {
            match timeout_at(deadline.into(), self.read()).await {
                Ok(Read::Bytes(len)) => read += len.max(1),
                Ok(Read::End) => return true,
                _ => return false,
            }
        }
        false
    }
}

impl Drop for Response {
    /// A connection whose body ended by its framing goes back to the pool; any other closes.
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            if self.reusable && self.dec.done() && !self.dec.until_close() {
                self.own.checkin(c);
            }
        }
    }
}

/// The failure of a request whose head did not come: as the reqwest transport words it.
pub(super) fn head_failure(e: &HeadError, host: &str, port: u16) -> (Failure, bool) {
    match e {
        HeadError::Connect { timeout: true, cause } => (
            Failure {
                class: FailureClass::TimeoutConnect,
                status: None,
                message: format!(
                    "could not connect to {host}:{port} within connect_timeout ({cause})"
                ),
            },
            false,
        ),
        HeadError::Connect {
            timeout: false,
            cause,
        } => (
            Failure {
                class: FailureClass::Connect,
                status: None,
                message: format!("could not connect to {host}:{port}: {cause}; is the server running and is base_url right?"),
            },
            false,
        ),
        HeadError::Broken(cause) => (
            Failure {
                class: FailureClass::Connect,
                status: None,
                message: format!(
                    "the connection to {host}:{port} closed or broke before a response ({cause}): the server dropped the request or does not speak HTTP/1.1 here"
                ),
            },
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_transport_is_for_plain_http_only() {
        let http = reqwest::Url::parse("http://127.0.0.1:8000/v1/chat/completions").unwrap();
        let https = reqwest::Url::parse("https://api.example.com/v1/chat/completions").unwrap();
        // forced: http only, https always on reqwest (no TLS here)
        assert!(Transport::Own.own_for(&http));
        assert!(!Transport::Own.own_for(&https));
        assert!(!Transport::Reqwest.own_for(&http));
        assert!(!Transport::Auto.own_for(&https));
        // a password in the URL: reqwest sends it as Basic authorization
        let user = reqwest::Url::parse("http://u:p@127.0.0.1:8000/v1/chat/completions").unwrap();
        assert!(!Transport::Own.own_for(&user));
    }

    #[test]
    fn a_read_of_a_compressed_body_is_bounded() {
        use std::io::Write;
        // 64 MiB of zeros gzip to ~64 KiB: one read may not decompress to more than 16 MiB
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("content-encoding", "gzip".parse().unwrap());
        let Some(mut c) = Coding::of(&h) else {
            panic!("gzip is decoded");
        };
        let e = c.feed(&bomb).unwrap_err();
        assert!(e.to_string().contains("decompressed to more than"), "{e}");
        assert!(c.out().len() <= MAX_DECODED);
        // br expands far more (64 MiB of zeros in well under the 4 KiB decoded at once, which
        // the bound was checked after): the bound holds as it decodes
        let mut enc = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 24);
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        let br = enc.into_inner();
        assert!(br.len() < COMPRESSED_READ, "{}", br.len());
        h.insert("content-encoding", "br".parse().unwrap());
        let mut c = Coding::of(&h).unwrap();
        let e = c.feed(&br).unwrap_err();
        assert!(e.to_string().contains("decompressed to more than"), "{e}");
        assert!(c.out().len() <= MAX_DECODED);
        // junk after the end of a gzip stream is not decoded, and the stream's output is kept
        h.insert("content-encoding", "gzip".parse().unwrap());
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"data: x\n\n").unwrap();
        let mut junk = enc.finish().unwrap();
        junk.extend_from_slice(b"JUNK");
        let mut c = Coding::of(&h).unwrap();
        c.feed(&junk).unwrap();
        assert_eq!(c.out(), b"data: x\n\n");
        // a small gzip body decodes whole
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"data: x\n\n").unwrap();
        let small = enc.finish().unwrap();
        let mut c = Coding::of(&h).unwrap();
        c.feed(&small).unwrap();
        assert_eq!(c.out(), b"data: x\n\n");
    }
}
