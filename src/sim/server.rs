//! The simulator's HTTP/1.1 server on a loopback port: OpenAI-compatible endpoints with seeded
//! lognormal latencies ([`SimServer::start`]) or a recorded case served verbatim
//! ([`SimServer::start_replay`]).
//!
//! It is a measuring instrument, so timing comes first: every event is scheduled at an absolute
//! instant (request arrival + planned offset, tokio clock, 1 ms timer resolution, so events are
//! at most about 1 ms late and never drift), sockets have TCP_NODELAY, and each SSE event is its
//! own HTTP chunk, flushed when due. No network input can panic it: bad JSON gets 400, an
//! unknown path 404, a request body over [`MAX_REQUEST_BODY`] bytes 413.
//!
//! This file binds, accepts and routes; the rest is one job a module: `state` (what connections
//! share), `lognormal` (the simulator's requests and schedule), `chunks` (the bytes of a
//! completion), `replay_serve` (a recorded case), `timed_body` (writing each chunk at its
//! instant), `timing_log` (the send times it keeps) and `http_util` (bodies, responses and a
//! request's arrival).

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

pub use super::lognormal::DEFAULT_MAX_TOKENS;
pub use super::timing_log::{origin, EventKind, RequestTimings, SIM_REQUEST_HEADER};

use super::config::SimConfig;
use super::http_util::{Arrival, ResBody};
use super::lognormal::handle_sim;
use super::replay::ReplayCase;
use super::replay_serve::{handle_replay, ReplayPlan};
use super::state::{Mode, Shared};
use super::timing_log::TimingLog;

/// A running simulator. Dropping it (or [`SimServer::shutdown`]) stops it.
pub struct SimServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("addr", &self.addr)
            .field("requests_served", &self.requests_served())
            .finish()
    }
}

impl SimServer {
    /// Binds 127.0.0.1:`port` (0 = any free port) and serves the lognormal simulator in a
    /// background tokio task (must be called inside a tokio runtime). Fails with
    /// `InvalidInput` when `cfg` is out of range (see [`SimConfig::validate`]).
    pub async fn start(cfg: SimConfig, port: u16) -> io::Result<SimServer> {
        SimServer::start_at(cfg, loopback(port)).await
    }

    /// Like [`SimServer::start`] on an explicit address; refuses (`InvalidInput`) any address
    /// that is not loopback (127.0.0.0/8 or ::1).
    pub async fn start_at(cfg: SimConfig, addr: SocketAddr) -> io::Result<SimServer> {
        cfg.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        SimServer::spawn(Mode::Sim(cfg), addr).await
    }

    /// Serves a recorded case instead: every POST (any path) gets the recording's status,
    /// headers and body writes, each at its `at_ms` after the request arrived; `GET /v1/models`
    /// lists [`REPLAY_MODEL`]. Fails with `InvalidInput` when the case does not validate.
    pub async fn start_replay(case: ReplayCase, port: u16) -> io::Result<SimServer> {
        SimServer::start_replay_at(case, loopback(port)).await
    }

    /// Like [`SimServer::start_replay`] on an explicit loopback address.
    pub async fn start_replay_at(case: ReplayCase, addr: SocketAddr) -> io::Result<SimServer> {
        let plan =
            ReplayPlan::new(&case).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        SimServer::spawn(Mode::Replay(Arc::new(plan)), addr).await
    }

    async fn spawn(mode: Mode, addr: SocketAddr) -> io::Result<SimServer> {
        if !addr.ip().is_loopback() {
            return Err(invalid_input(format!(
                "the simulator binds loopback addresses only; {} is not loopback (use 127.0.0.1)",
                addr.ip()
            )));
        }
        let cpu = match &mode {
            Mode::Sim(cfg) => super::cpu::CpuEngine::start(cfg.prefill_cpu)?,
            Mode::Replay(_) => None,
        };
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            mode,
            served: AtomicU64::new(0),
            gen_seq: AtomicU64::new(0),
            timings: Mutex::new(TimingLog::default()),
            prompts_seen: Mutex::default(),
            prefix_cache: Mutex::new(super::prefix_cache::PrefixCache::new(
                super::config::MAX_CACHED_BLOCKS,
            )),
            prefill: super::prefill::PrefillEngine::default(),
            cpu,
        });
        let _ = origin();
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(SimServer { addr, shared, task })
    }

    /// The bound address (127.0.0.1 and the actual port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI base URL, `"http://127.0.0.1:PORT/v1"`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The send times recorded for streamed request `request` (`x-perfgate-sim-request`), while
    /// it is among the last [`MAX_TIMED_REQUESTS`].
    pub fn timings(&self, request: u64) -> Option<RequestTimings> {
        self.shared.timings(request)
    }

    /// Number of requests received so far (all endpoints, including rejected ones).
    pub fn requests_served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// Stops accepting and aborts in-flight streams (their clients see an incomplete body).
    /// Dropping the server does the same.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        // Aborting the accept task drops the listener and the JoinSet of connection tasks,
        // which aborts every connection.
        self.task.abort();
    }
}

pub(super) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

pub(super) fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((stream, _peer)) => {
                    conns.spawn(serve_conn(stream, Arc::clone(&shared)));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

pub(super) async fn serve_conn(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    crate::rx_stamp::enable(&stream);
    let last = Arc::new(Mutex::new(None));
    let conn = StampedConn {
        stream,
        last: Arc::clone(&last),
    };
    let svc = service_fn(move |req| handle(req, Arrival(Arc::clone(&last)), Arc::clone(&shared)));
    // No header read timeout (it would need a timer and would close idle keep-alive
    // connections under a client's pool); errors just end the connection.
    let _ = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(conn), svc)
        .await;
}

/// A simulator connection that reads through [`crate::rx_stamp`] and keeps the kernel's receive
/// time of its last read for the handler.
struct StampedConn {
    stream: TcpStream,
    last: Arc<Mutex<Option<std::time::Instant>>>,
}

#[allow(unsafe_code)] // a ReadBuf's unfilled part for recvmsg: see SAFETY below
impl AsyncRead for StampedConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // SAFETY: the read only writes bytes into the unfilled part, and only the `n` it
        // reports are marked initialised.
        let (n, stamp) = ready!(crate::rx_stamp::poll_recv(&this.stream, cx, unsafe {
            buf.unfilled_mut()
        }))?;
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        // a read without a stamp clears the last one: a later request never takes an earlier
        // request's arrival
        *this.last.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for StampedConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

pub(super) async fn handle(
    req: Request<Incoming>,
    arrival: Arrival,
    shared: Arc<Shared>,
) -> Result<Response<ResBody>, Infallible> {
    shared.served.fetch_add(1, Ordering::Relaxed);
    let resp = match &shared.mode {
        Mode::Sim(cfg) => handle_sim(req, arrival, cfg, &shared).await,
        Mode::Replay(plan) => handle_replay(req, arrival, plan).await,
    };
    Ok(resp)
}
