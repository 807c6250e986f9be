//! The simulator's HTTP/1.1 server on a loopback port: OpenAI-compatible endpoints with seeded
//! lognormal latencies ([`SimServer::start`]) or a recorded case served verbatim
//! ([`SimServer::start_replay`]).
//!
//! It is a measuring instrument, so timing comes first: every event is scheduled at an absolute
//! instant (request arrival + planned offset, tokio clock, 1 ms timer resolution, so events are
//! at most about 1 ms late and never drift), sockets have TCP_NODELAY, and each SSE event is its
//! own HTTP chunk, flushed when due. No network input can panic it: bad JSON gets 400, an
//! unknown path 404, a request body over [`MAX_REQUEST_BODY`] bytes 413.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{
    HeaderName, HeaderValue, ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE,
    TRANSFER_ENCODING,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, Sleep};

use super::config::{SimConfig, MAX_OUTPUT_LIMIT};
use super::replay::ReplayCase;
use super::schedule::RequestPlan;

/// Largest request body accepted, bytes (1 MiB); a larger one is answered 413.
pub const MAX_REQUEST_BODY: usize = 1 << 20;

/// Output tokens of a request that gives neither `max_tokens` nor `max_completion_tokens`, tokens.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

/// Model id `/v1/models` reports in replay mode.
pub const REPLAY_MODEL: &str = "perfgate-replay";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ResBody = UnsyncBoxBody<Bytes, BoxError>;

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

struct Shared {
    mode: Mode,
    /// Requests received, all endpoints.
    served: AtomicU64,
    /// Generation requests that passed validation; request n gets RNG stream n.
    gen_seq: AtomicU64,
    /// Send times of the events of recent streamed requests (the simulator as a measuring
    /// instrument): `x-perfgate-sim-request: N` names a request, `GET /sim/timings/N` reports it.
    timings: Mutex<TimingLog>,
}

/// Streamed requests whose send times are kept (the oldest are forgotten first).
pub const MAX_TIMED_REQUESTS: usize = 16_384;
/// Events whose send time is kept per request (later ones are not recorded).
pub const MAX_TIMED_EVENTS: usize = 65_536;
/// Response header naming the request in `GET /sim/timings/N`.
pub const SIM_REQUEST_HEADER: &str = "x-perfgate-sim-request";

/// The process-wide origin of the simulator's clock (a monotonic `Instant`, taken the first time
/// a simulator starts or this is called): an in-process client comparing its own `Instant`s with
/// [`RequestTimings`] uses the same clock; `GET /sim/timings/N` reports ms since this origin.
pub fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// What one event of a simulated stream carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The chat role chunk (no token).
    Role,
    /// A token-bearing chunk.
    Token,
    /// The chunk with `finish_reason`.
    Finish,
    /// The usage-only chunk.
    Usage,
    /// `data: [DONE]`.
    Done,
}

impl EventKind {
    fn as_str(self) -> &'static str {
        match self {
            EventKind::Role => "role",
            EventKind::Token => "token",
            EventKind::Finish => "finish",
            EventKind::Usage => "usage",
            EventKind::Done => "done",
        }
    }
}

/// When the simulator received one streamed request and handed each of its events to the
/// connection (HTTP chunk returned to hyper, which writes it to the socket), on the monotonic
/// clock of [`origin`].
#[derive(Debug, Clone)]
pub struct RequestTimings {
    /// The request number (`x-perfgate-sim-request`).
    pub request: u64,
    /// When the request's headers were received.
    pub arrival: std::time::Instant,
    /// The same moment on the wall clock (ms since the Unix epoch), for matching another
    /// process's records by time; only [`RequestTimings::arrival`] is used for intervals.
    pub arrival_unix_ms: f64,
    /// Tokens this request generates (its `completion_tokens`).
    pub output_tokens: u32,
    /// Each event's send time and kind, in order.
    pub events: Vec<(std::time::Instant, EventKind)>,
}

impl RequestTimings {
    /// Send time of the first token-bearing event.
    pub fn first_token(&self) -> Option<std::time::Instant> {
        self.token_times().next()
    }

    /// Send times of the token-bearing events.
    pub fn token_times(&self) -> impl Iterator<Item = std::time::Instant> + '_ {
        self.events
            .iter()
            .filter(|(_, k)| *k == EventKind::Token)
            .map(|(t, _)| *t)
    }

    /// The JSON of `GET /sim/timings/N`: times in ms since the request arrived and since
    /// [`origin`] (see [`RequestTimings::write_json`]).
    pub fn to_json(&self) -> Value {
        let mut s = String::new();
        self.write_json(&mut s);
        serde_json::from_str(&s).unwrap_or(Value::Null)
    }

    /// Appends the JSON object of this request to `out`, written directly (no JSON tree: a
    /// dump of thousands of long streams stays about the size of its text):
    /// `{"request":N,"arrival_unix_ms":ms,"output_tokens":n,"arrival_ms_since_origin":ms,
    /// "events":[{"kind":"token","ms_since_arrival":ms,"ms_since_origin":ms},...]}`.
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write;
        let o = origin();
        let since = |a: std::time::Instant, b: std::time::Instant| {
            a.saturating_duration_since(b).as_secs_f64() * 1000.0
        };
        // finite by construction (durations, and a wall clock read as a difference); a
        // non-finite value would be written as null
        let num =
            |x: f64| serde_json::Number::from_f64(x).map_or("null".to_string(), |n| n.to_string());
        let _ = write!(
            out,
            r#"{{"request":{},"arrival_unix_ms":{},"output_tokens":{},"arrival_ms_since_origin":{},"events":["#,
            self.request,
            num(self.arrival_unix_ms),
            self.output_tokens,
            num(since(self.arrival, o))
        );
        for (i, (t, k)) in self.events.iter().enumerate() {
            let _ = write!(
                out,
                r#"{}{{"kind":"{}","ms_since_arrival":{},"ms_since_origin":{}}}"#,
                if i == 0 { "" } else { "," },
                k.as_str(),
                num(since(*t, self.arrival)),
                num(since(*t, o))
            );
        }
        out.push_str("]}");
    }
}

/// Recent requests' timings, bounded by [`MAX_TIMED_REQUESTS`].
#[derive(Default)]
struct TimingLog {
    by_request: HashMap<u64, Arc<Mutex<RequestTimings>>>,
    order: VecDeque<u64>,
}

impl TimingLog {
    fn start(
        &mut self,
        request: u64,
        arrival: Instant,
        output_tokens: u32,
    ) -> Arc<Mutex<RequestTimings>> {
        if self.order.len() >= MAX_TIMED_REQUESTS {
            if let Some(old) = self.order.pop_front() {
                self.by_request.remove(&old);
            }
        }
        let t = Arc::new(Mutex::new(RequestTimings {
            request,
            arrival: arrival.into_std(),
            arrival_unix_ms: unix_ms_at(arrival.into_std()),
            output_tokens,
            events: Vec::new(),
        }));
        self.by_request.insert(request, Arc::clone(&t));
        self.order.push_back(request);
        t
    }
}

/// `at` on the wall clock, ms since the Unix epoch (now minus the time elapsed since `at`).
fn unix_ms_at(at: std::time::Instant) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    now - at.elapsed().as_secs_f64() * 1000.0
}

impl Shared {
    /// `{"requests":[...]}`: every kept request's timings with a request number >= `from`, in
    /// request order. The log's lock is held only to list the requests; each request's own
    /// lock only while it is written, so streams in progress are barely delayed.
    fn all_timings_json(&self, from: u64) -> String {
        let mut kept: Vec<(u64, Arc<Mutex<RequestTimings>>)> = match self.timings.lock() {
            Ok(log) => log
                .order
                .iter()
                .filter(|&&n| n >= from)
                .filter_map(|n| log.by_request.get(n).map(|t| (*n, Arc::clone(t))))
                .collect(),
            Err(_) => Vec::new(),
        };
        kept.sort_by_key(|(n, _)| *n);
        let mut out = String::from(r#"{"requests":["#);
        let mut first = true;
        for (_, t) in kept {
            if let Ok(t) = t.lock() {
                if !first {
                    out.push(',');
                }
                first = false;
                t.write_json(&mut out);
            }
        }
        out.push_str("]}");
        out
    }

    fn timings(&self, request: u64) -> Option<RequestTimings> {
        let log = self.timings.lock().ok()?;
        let t = log.by_request.get(&request)?;
        let t = t.lock().ok()?.clone();
        Some(t)
    }
}

enum Mode {
    Sim(SimConfig),
    Replay(Arc<ReplayPlan>),
}

/// A validated replay case, ready to serve.
struct ReplayPlan {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    reads: Vec<(Duration, Bytes)>,
    end: Duration,
    abort: bool,
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
        cfg.validate().map_err(invalid_input)?;
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
        let plan = ReplayPlan::new(&case).map_err(invalid_input)?;
        SimServer::spawn(Mode::Replay(Arc::new(plan)), addr).await
    }

    async fn spawn(mode: Mode, addr: SocketAddr) -> io::Result<SimServer> {
        if !addr.ip().is_loopback() {
            return Err(invalid_input(format!(
                "the simulator binds loopback addresses only; {} is not loopback (use 127.0.0.1)",
                addr.ip()
            )));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            mode,
            served: AtomicU64::new(0),
            gen_seq: AtomicU64::new(0),
            timings: Mutex::new(TimingLog::default()),
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

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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

async fn serve_conn(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let svc = service_fn(move |req| handle(req, Arc::clone(&shared)));
    // No header read timeout (it would need a timer and would close idle keep-alive
    // connections under a client's pool); errors just end the connection.
    let _ = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc)
        .await;
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<ResBody>, Infallible> {
    let arrival = Instant::now();
    shared.served.fetch_add(1, Ordering::Relaxed);
    let resp = match &shared.mode {
        Mode::Sim(cfg) => handle_sim(req, arrival, cfg, &shared).await,
        Mode::Replay(plan) => handle_replay(req, arrival, plan).await,
    };
    Ok(resp)
}

// ---------------------------------------------------------------------------------------------
// Lognormal simulator

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Completions,
}

async fn handle_sim(
    req: Request<Incoming>,
    arrival: Instant,
    cfg: &SimConfig,
    shared: &Shared,
) -> Response<ResBody> {
    let path = req.uri().path();
    let method = req.method();
    if path == "/sim/timings" {
        if method != Method::GET {
            return method_not_allowed("GET");
        }
        let mut from = 0;
        for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
            match (k.as_ref(), v.parse::<u64>()) {
                ("from", Ok(n)) => from = n,
                ("from", Err(_)) => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        &format!("from={v:?}: expected a request number (0, 1, 2, ...)"),
                        "invalid_request_error",
                    )
                }
                _ => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        &format!("unknown query parameter `{k}`; /sim/timings takes `from=N`"),
                        "invalid_request_error",
                    )
                }
            }
        }
        return raw_json_response(StatusCode::OK, shared.all_timings_json(from));
    }
    if let Some(n) = path.strip_prefix("/sim/timings/") {
        if method != Method::GET {
            return method_not_allowed("GET");
        }
        let Ok(n) = n.parse::<u64>() else {
            return not_found(path);
        };
        return match shared.timings(n) {
            Some(t) => json_response(StatusCode::OK, &t.to_json()),
            None => error_response(
                StatusCode::NOT_FOUND,
                &format!(
                    "no timings kept for request {n}: not yet received, not streamed, or older than the last {MAX_TIMED_REQUESTS} streamed requests"
                ),
                "not_found_error",
            ),
        };
    }
    match path {
        // vLLM, TGI, SGLang and llama-server answer GET /health; clients probe it (GuideLLM)
        "/health" if method == Method::GET => {
            json_response(StatusCode::OK, &json!({"status": "ok"}))
        }
        "/health" => method_not_allowed("GET"),
        "/v1/models" if method == Method::GET => models(&cfg.model),
        "/v1/models" => method_not_allowed("GET"),
        "/v1/chat/completions" if method == Method::POST => {
            generate(req, arrival, cfg, shared, Api::Chat).await
        }
        "/v1/completions" if method == Method::POST => {
            generate(req, arrival, cfg, shared, Api::Completions).await
        }
        "/v1/chat/completions" | "/v1/completions" => method_not_allowed("POST"),
        _ => not_found(path),
    }
}

fn models(model: &str) -> Response<ResBody> {
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": [{"id": model, "object": "model", "owned_by": "perfgate-sim"}]
        }),
    )
}

/// What the simulator reads from a generation request body.
#[derive(Debug, Clone, PartialEq)]
struct GenRequest {
    stream: bool,
    include_usage: bool,
    max_tokens: Option<u64>,
    prompt_tokens: u64,
}

fn parse_gen(body: &[u8], api: Api) -> Result<GenRequest, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    let Value::Object(obj) = v else {
        return Err("request body must be a JSON object".to_string());
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`stream` must be a boolean".to_string()),
    };
    let include_usage = obj
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let keys: &[&str] = match api {
        Api::Chat => &["max_completion_tokens", "max_tokens"],
        Api::Completions => &["max_tokens"],
    };
    let mut max_tokens = None;
    for &k in keys {
        match obj.get(k) {
            None | Some(Value::Null) => continue,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => {
                    max_tokens = Some(n);
                    break;
                }
                _ => return Err(format!("`{k}` must be a positive integer")),
            },
        }
    }
    Ok(GenRequest {
        stream,
        include_usage,
        max_tokens,
        prompt_tokens: prompt_tokens(&obj),
    })
}

/// Approximate prompt tokens: whitespace-separated words in every message's `content`
/// (strings or `{"text": ...}` parts) and in `prompt` (a string, strings, or token ids).
fn prompt_tokens(obj: &Map<String, Value>) -> u64 {
    let messages = match obj.get("messages") {
        Some(Value::Array(ms)) => ms
            .iter()
            .map(|m| m.get("content").map_or(0, count_words))
            .sum(),
        _ => 0,
    };
    messages + obj.get("prompt").map_or(0, count_words)
}

fn count_words(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.split_whitespace().count() as u64,
        Value::Array(items) => items.iter().map(count_words).sum(),
        Value::Object(part) => part.get("text").map_or(0, count_words),
        Value::Number(_) => 1,
        _ => 0,
    }
}

async fn generate(
    req: Request<Incoming>,
    arrival: Instant,
    cfg: &SimConfig,
    shared: &Shared,
    api: Api,
) -> Response<ResBody> {
    let gen_seq = &shared.gen_seq;
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let gen = match parse_gen(&body, api) {
        Ok(g) => g,
        Err(msg) => return error_response(StatusCode::BAD_REQUEST, &msg, "invalid_request_error"),
    };
    let seq = gen_seq.fetch_add(1, Ordering::Relaxed);
    let max_output = u64::from(cfg.max_output.min(MAX_OUTPUT_LIMIT));
    let requested = gen.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut tokens = requested.min(max_output) as u32;
    if cfg.vary_output > 0 && tokens > 1 {
        let less = (seq % u64::from(cfg.vary_output)) as u32;
        tokens = tokens.saturating_sub(less).max(1);
    }
    let plan = RequestPlan::new(cfg, seq, tokens);
    if plan.fails {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!(
                "simulated server error (fault injection, error_rate={})",
                cfg.error_rate
            ),
            "server_error",
        );
    }
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ctx = ChunkCtx {
        api,
        id: match api {
            Api::Chat => format!("chatcmpl-sim-{seq}"),
            Api::Completions => format!("cmpl-sim-{seq}"),
        },
        created,
        model: cfg.model.clone(),
        prompt_tokens: gen.prompt_tokens,
        completion_tokens: u64::from(tokens),
        // The model "ended" before max_tokens only when max_output capped it.
        finish_reason: if u64::from(tokens) < requested {
            "stop"
        } else {
            "length"
        },
    };
    if gen.stream {
        let script = SimScript {
            ctx,
            plan,
            arrival,
            include_usage: gen.include_usage,
            burst: cfg.burst.max(1),
            phase: Phase::Role,
            index: 0,
            last_at: arrival,
            last_kind: EventKind::Role,
        };
        let record = shared
            .timings
            .lock()
            .ok()
            .map(|mut log| log.start(seq, arrival, tokens));
        let mut body = TimedBody::new(script, arrival);
        body.record = record;
        let mut resp = Response::new(body.boxed_unsync());
        let h = resp.headers_mut();
        h.insert(
            HeaderName::from_static(SIM_REQUEST_HEADER),
            HeaderValue::from(seq),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        );
        resp
    } else {
        let total_ms = plan.total_ms();
        tokio::time::sleep_until(at(arrival, ms(total_ms))).await;
        json_response(StatusCode::OK, &ctx.full_response())
    }
}

/// Fixed fields of one simulated completion.
struct ChunkCtx {
    api: Api,
    id: String,
    created: u64,
    model: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    finish_reason: &'static str,
}

/// Text of token `i` (1-based).
fn token_text(i: u32) -> String {
    format!(" tok{i}")
}

impl ChunkCtx {
    fn object(&self) -> &'static str {
        match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    fn role_chunk(&self) -> Value {
        self.chunk(json!([{
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "finish_reason": null
        }]))
    }

    /// The SSE event carrying tokens `from..=to` (1-based): the bytes of
    /// `sse(&self.token_chunk(from, to))`, written directly (the simulator shares the CPU with
    /// the client it measures, so its per-event cost is kept small).
    fn token_event(&self, from: u32, to: u32) -> Bytes {
        use std::fmt::Write;
        let mut text = String::with_capacity(8 * (to + 1 - from) as usize);
        for i in from..=to {
            let _ = write!(text, " tok{i}");
        }
        // token texts are ASCII letters, digits and spaces: no JSON escaping needed
        let (id, model) = (
            Value::from(self.id.as_str()),
            Value::from(self.model.as_str()),
        );
        let choice = match self.api {
            Api::Chat => {
                format!(r#"{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}"#)
            }
            Api::Completions => {
                format!(r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":null}}"#)
            }
        };
        Bytes::from(format!(
            "data: {{\"id\":{id},\"object\":\"{}\",\"created\":{},\"model\":{model},\"choices\":[{choice}]}}\n\n",
            self.object(),
            self.created
        ))
    }

    /// The chunk carrying tokens `from..=to` (1-based).
    #[cfg(test)]
    fn token_chunk(&self, from: u32, to: u32) -> Value {
        let text: String = (from..=to).map(token_text).collect();
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]),
            Api::Completions => {
                json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": null}])
            }
        })
    }

    fn finish_chunk(&self) -> Value {
        let reason = self.finish_reason;
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {}, "finish_reason": reason}]),
            Api::Completions => {
                json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": reason}])
            }
        })
    }

    fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }

    fn usage_chunk(&self) -> Value {
        let mut v = self.chunk(json!([]));
        if let Value::Object(o) = &mut v {
            o.insert("usage".to_string(), self.usage());
        }
        v
    }

    fn full_response(&self) -> Value {
        let n = self.completion_tokens as u32;
        let text: String = (1..=n).map(token_text).collect();
        let choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self.finish_reason,
            }),
            Api::Completions => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": self.finish_reason,
            }),
        };
        json!({
            "id": self.id,
            "object": match self.api {
                Api::Chat => "chat.completion",
                Api::Completions => "text_completion",
            },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        })
    }
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Role,
    Tokens,
    Finish,
    Usage,
    Done,
    End,
}

/// The event sequence of one simulated stream, generated lazily (a long output is never
/// materialised).
struct SimScript {
    ctx: ChunkCtx,
    plan: RequestPlan,
    arrival: Instant,
    include_usage: bool,
    /// Tokens per event after the first.
    burst: u32,
    phase: Phase,
    index: u32,
    last_at: Instant,
    /// The kind of the step `next_step` returned last.
    last_kind: EventKind,
}

impl SimScript {
    /// The next token-bearing event: (send offset ms = the due time of its last token, number
    /// of its first token). The first token comes alone, later events carry up to `burst`.
    fn next_event(&mut self) -> Option<(f64, u32)> {
        let k = if self.index == 0 { 1 } else { self.burst };
        let from = self.index + 1;
        let mut last = None;
        for _ in 0..k {
            match self.plan.next() {
                Some(off) => {
                    self.index += 1;
                    last = Some(off);
                }
                None => break,
            }
        }
        last.map(|off| (off, from))
    }
}

impl Script for SimScript {
    fn last_kind(&self) -> EventKind {
        self.last_kind
    }

    fn next_step(&mut self) -> Step {
        loop {
            match self.phase {
                Phase::Role => {
                    self.phase = Phase::Tokens;
                    if self.ctx.api == Api::Chat {
                        self.last_kind = EventKind::Role;
                        return Step::Data(self.arrival, sse(&self.ctx.role_chunk()));
                    }
                }
                Phase::Tokens => match self.next_event() {
                    Some((off, from)) => {
                        self.last_at = at(self.arrival, ms(off));
                        self.last_kind = EventKind::Token;
                        let event = self.ctx.token_event(from, self.index);
                        return Step::Data(self.last_at, event);
                    }
                    None => {
                        if self.index == 0 {
                            self.last_at = at(self.arrival, ms(self.plan.ttft_ms));
                        }
                        self.phase = Phase::Finish;
                    }
                },
                Phase::Finish => {
                    self.phase = Phase::Usage;
                    self.last_kind = EventKind::Finish;
                    return Step::Data(self.last_at, sse(&self.ctx.finish_chunk()));
                }
                Phase::Usage => {
                    self.phase = Phase::Done;
                    if self.include_usage {
                        self.last_kind = EventKind::Usage;
                        return Step::Data(self.last_at, sse(&self.ctx.usage_chunk()));
                    }
                }
                Phase::Done => {
                    self.phase = Phase::End;
                    self.last_kind = EventKind::Done;
                    return Step::Data(self.last_at, Bytes::from_static(b"data: [DONE]\n\n"));
                }
                Phase::End => return Step::End(self.last_at),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Replay

impl ReplayPlan {
    fn new(case: &ReplayCase) -> Result<ReplayPlan, String> {
        case.validate()?;
        let status = StatusCode::from_u16(case.status)
            .map_err(|_| format!("status {} is not a valid HTTP status", case.status))?;
        let mut headers = Vec::with_capacity(case.headers.len());
        for (name, value) in &case.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: {name:?} is not a valid header name"))?;
            if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
                continue; // the body is always chunked
            }
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("headers: the value of {name} is not a valid header value"))?;
            headers.push((name, value));
        }
        let reads = case
            .read_bytes()?
            .into_iter()
            .map(|(t, b)| (ms(t), Bytes::from(b)))
            .collect();
        Ok(ReplayPlan {
            status,
            headers,
            reads,
            end: ms(case.end_ms()),
            abort: case.abort.unwrap_or(false),
        })
    }
}

async fn handle_replay(
    req: Request<Incoming>,
    arrival: Instant,
    plan: &Arc<ReplayPlan>,
) -> Response<ResBody> {
    if req.method() == Method::POST {
        if let Err(resp) = read_body(req).await {
            return resp;
        }
        let script = ReplayScript {
            plan: Arc::clone(plan),
            arrival,
            next: 0,
        };
        let mut resp = Response::new(TimedBody::new(script, arrival).boxed_unsync());
        *resp.status_mut() = plan.status;
        for (name, value) in &plan.headers {
            resp.headers_mut().append(name.clone(), value.clone());
        }
        return resp;
    }
    match req.uri().path() {
        "/v1/models" if req.method() == Method::GET => models(REPLAY_MODEL),
        "/health" if req.method() == Method::GET => {
            json_response(StatusCode::OK, &json!({"status": "ok"}))
        }
        path => not_found(path),
    }
}

struct ReplayScript {
    plan: Arc<ReplayPlan>,
    arrival: Instant,
    next: usize,
}

impl Script for ReplayScript {
    fn next_step(&mut self) -> Step {
        if let Some((t, bytes)) = self.plan.reads.get(self.next) {
            self.next += 1;
            return Step::Data(at(self.arrival, *t), bytes.clone());
        }
        let end = at(self.arrival, self.plan.end);
        if self.plan.abort {
            Step::Abort(end)
        } else {
            Step::End(end)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timed body: writes each step's bytes as one HTTP chunk at its instant.

/// One step of a response body.
enum Step {
    /// Write these bytes (one HTTP chunk) at this instant.
    Data(Instant, Bytes),
    /// End the body cleanly (final empty chunk) at this instant.
    End(Instant),
    /// Drop the connection at this instant without ending the body.
    Abort(Instant),
}

impl Step {
    fn at(&self) -> Instant {
        match self {
            Step::Data(t, _) | Step::End(t) | Step::Abort(t) => *t,
        }
    }
}

/// A lazily generated body; `next_step` is not called again after `End` or `Abort`.
trait Script: Send + Unpin + 'static {
    fn next_step(&mut self) -> Step;
    /// The kind of the step `next_step` returned last (for the timing record).
    fn last_kind(&self) -> EventKind {
        EventKind::Token
    }
}

struct TimedBody<S> {
    script: S,
    pending: Option<Step>,
    sleep: Pin<Box<Sleep>>,
    /// Abort was reached and one `Pending` has been returned, so hyper flushed what it had.
    abort_flushed: bool,
    done: bool,
    /// Where to record each data frame's send time (simulator streams only).
    record: Option<Arc<Mutex<RequestTimings>>>,
}

impl<S: Script> TimedBody<S> {
    fn new(script: S, arrival: Instant) -> TimedBody<S> {
        TimedBody {
            script,
            pending: None,
            sleep: Box::pin(tokio::time::sleep_until(arrival)),
            abort_flushed: false,
            done: false,
            record: None,
        }
    }
}

/// The error a replay body ends with when the case says `abort: true`.
#[derive(Debug)]
struct ReplayAbort;

impl std::fmt::Display for ReplayAbort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("replay case: connection dropped mid-body (abort: true)")
    }
}

impl std::error::Error for ReplayAbort {}

impl<S: Script> Body for TimedBody<S> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let step = match this.pending.take() {
            Some(s) => s,
            None => this.script.next_step(),
        };
        let due = step.at();
        if Instant::now() < due {
            if this.sleep.deadline() != due {
                this.sleep.as_mut().reset(due);
            }
            if this.sleep.as_mut().poll(cx).is_pending() {
                this.pending = Some(step);
                return Poll::Pending;
            }
        }
        match step {
            Step::Data(_, bytes) => {
                if let Some(r) = &this.record {
                    if let Ok(mut r) = r.lock() {
                        if r.events.len() < MAX_TIMED_EVENTS {
                            r.events
                                .push((std::time::Instant::now(), this.script.last_kind()));
                        }
                    }
                }
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Step::End(_) => {
                this.done = true;
                Poll::Ready(None)
            }
            Step::Abort(t) => {
                if this.abort_flushed {
                    this.done = true;
                    Poll::Ready(Some(Err(Box::new(ReplayAbort))))
                } else {
                    // Return Pending once so hyper flushes the chunks it has buffered before
                    // the error closes the connection.
                    this.abort_flushed = true;
                    this.pending = Some(Step::Abort(t));
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// `ms` milliseconds as a Duration (negative or NaN -> 0, too large -> one year).
fn ms(ms: f64) -> Duration {
    if ms.is_nan() || ms <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::from_secs(365 * 86_400))
}

/// `arrival + offset`, saturating far in the future instead of overflowing.
fn at(arrival: Instant, offset: Duration) -> Instant {
    arrival
        .checked_add(offset)
        .or_else(|| arrival.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(arrival)
}

/// Reads the whole request body, at most [`MAX_REQUEST_BODY`] bytes; else the response to send.
async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<ResBody>> {
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BODY as u64) {
        return Err(too_large());
    }
    match Limited::new(req.into_body(), MAX_REQUEST_BODY)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(_) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "could not read the request body",
            "invalid_request_error",
        )),
    }
}

fn too_large() -> Response<ResBody> {
    let mut resp = error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("request body exceeds {MAX_REQUEST_BODY} bytes"),
        "invalid_request_error",
    );
    // The unread rest of the body makes the connection unusable.
    resp.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    resp
}

fn not_found(path: &str) -> Response<ResBody> {
    let shown: String = path.chars().take(200).collect();
    error_response(
        StatusCode::NOT_FOUND,
        &format!(
            "unknown path {shown:?}; the simulator serves GET /v1/models, POST /v1/chat/completions, POST /v1/completions, GET /health, GET /sim/timings[?from=N] and GET /sim/timings/N"
        ),
        "invalid_request_error",
    )
}

fn method_not_allowed(allow: &'static str) -> Response<ResBody> {
    let mut resp = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed; use {allow}"),
        "invalid_request_error",
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

fn error_response(status: StatusCode, message: &str, kind: &str) -> Response<ResBody> {
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind}}),
    )
}

fn json_response(status: StatusCode, v: &Value) -> Response<ResBody> {
    raw_json_response(status, v.to_string())
}

/// A response whose body is `json`, already serialized.
fn raw_json_response(status: StatusCode, json: String) -> Response<ResBody> {
    let body = Full::new(Bytes::from(json))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn token_event_bytes_equal_the_serialized_chunk() {
        for api in [Api::Chat, Api::Completions] {
            let ctx = ChunkCtx {
                api,
                id: "chatcmpl-sim-7".into(),
                created: 1_700_000_000,
                model: "a \"quoted\" model\\".into(),
                prompt_tokens: 3,
                completion_tokens: 9,
                finish_reason: "length",
            };
            for (from, to) in [(1, 1), (2, 5), (9, 9)] {
                let fast = ctx.token_event(from, to);
                let slow = sse(&ctx.token_chunk(from, to));
                assert_eq!(fast, slow, "{api:?} {from}..={to}");
                let v: Value = serde_json::from_slice(&fast[6..]).unwrap();
                assert_eq!(v["model"], "a \"quoted\" model\\");
            }
        }
    }

    #[test]
    fn parse_gen_fields() {
        let g = parse_gen(
            br#"{"model":"x","messages":[{"role":"user","content":"hello big world"},{"role":"user","content":[{"type":"text","text":"two words"}]}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0,"seed":1}"#,
            Api::Chat,
        )
        .unwrap();
        assert_eq!(
            g,
            GenRequest {
                stream: true,
                include_usage: true,
                max_tokens: Some(5),
                prompt_tokens: 5
            }
        );
        let g = parse_gen(br#"{"max_completion_tokens":3,"max_tokens":9}"#, Api::Chat).unwrap();
        assert_eq!(g.max_tokens, Some(3));
        let g = parse_gen(br#"{"prompt":"a b c","max_tokens":null}"#, Api::Completions).unwrap();
        assert_eq!((g.max_tokens, g.prompt_tokens, g.stream), (None, 3, false));
        let g = parse_gen(br#"{"prompt":[1,2,3,4]}"#, Api::Completions).unwrap();
        assert_eq!(g.prompt_tokens, 4);
        for bad in [
            &b"{"[..],
            b"[]",
            b"\"x\"",
            br#"{"stream":"yes"}"#,
            br#"{"max_tokens":0}"#,
            br#"{"max_tokens":-1}"#,
            br#"{"max_tokens":2.5}"#,
            b"\xff\xfe",
        ] {
            assert!(parse_gen(bad, Api::Chat).is_err());
        }
    }

    #[test]
    fn ms_never_panics() {
        assert_eq!(ms(-1.0), Duration::ZERO);
        assert_eq!(ms(f64::NAN), Duration::ZERO);
        assert_eq!(ms(f64::INFINITY), Duration::from_secs(365 * 86_400));
        assert_eq!(ms(1.5), Duration::from_micros(1500));
    }
}
