//! Sending one streamed request and timing it: reqwest over rustls, SSE decoded as bytes arrive,
//! each event stamped (one `Instant` clock) when the read that completed it returned, before any
//! JSON parsing. Every failure becomes a classified [`Failure`]; secrets are redacted from every
//! message (a server may echo the key back).

use super::deadline::{self, Deadlines, Timeouts};
use super::dialect::clip;
use super::measure::End;
use super::stream::{BodyFold, Step};
use crate::config::scenario::{Api, Endpoint};
use crate::record::{Failure, FailureClass, RequestRecord};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::timeout_at;

/// Largest single SSE event accepted, bytes.
pub const MAX_EVENT_BYTES: usize = 8 << 20;
/// Largest response body accepted, bytes.
pub const MAX_BODY_BYTES: u64 = 256 << 20;
/// How much of an error body is read for its message, bytes.
pub const ERROR_BODY_BYTES: usize = 64 << 10;
/// Pool warming: the most of a `GET <base>/models` body read (and discarded) so the connection
/// returns to the pool, bytes. A longer body is dropped with its connection.
pub const WARM_BODY_BYTES: usize = 64 << 10;
/// Pool warming: limit on the whole pass of `GET <base>/models` requests (each connection is
/// also bounded by the endpoint's `connect_timeout`); what is not done by then is abandoned.
pub const POOL_WARM_TIMEOUT: Duration = Duration::from_secs(3);
/// Re-sends of one request allowed in `Connection: close` mode, where each re-send discards one
/// stale pooled connection left from before the switch.
pub const MAX_CLOSE_MODE_RESENDS: u32 = 3;
/// The keep-alive check: limit on its one `GET <base>/models` (a server whose `/models` never
/// answers costs at most this plus [`POOL_WARM_TIMEOUT`] per scenario).
pub const KEEPALIVE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an idle connection stays in the pool (reqwest's default, set explicitly): far longer
/// than the gap between perfgate's phases (warmup, pool warming, measured looks), which follow
/// each other at once. Servers that close idle connections sooner (llama-server after 5 s) are
/// met by the stale-connection re-send of [`StreamClient::send`].
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// After the end-of-stream event (`[DONE]`, `message_stop`) the rest of the body (the chunked
/// terminator, normally in the same or the next packet) is read for at most this long, and at
/// most [`WARM_BODY_BYTES`], so the connection returns to the pool instead of being closed and
/// the worker's next request does not pay a new connection inside its TTFT. The figures are
/// stamped before this; it only delays the worker's next send when a server holds the stream.
pub const DRAIN_AFTER_DONE: Duration = Duration::from_millis(50);
/// Pool warming: most passes of `GET <base>/models` requests (see [`StreamClient::warm_pool`]).
pub const WARM_PASSES: usize = 6;
/// Pool warming: pause after a pass, so connections whose responses just ended are back in the
/// pool before the next pass or the measured requests look for one.
pub const POOL_SETTLE: Duration = Duration::from_millis(5);

/// Largest body [`StreamClient::get`] keeps (a vLLM `/metrics` page is a few hundred KiB).
pub const GET_BODY_BYTES: usize = 4 << 20;

/// Why a [`StreamClient::get`] got no answer: what happened (refused, no route, no answer in
/// time), secrets redacted. Readiness probes retry every such failure alike.
#[derive(Debug, Clone, PartialEq)]
pub struct GetError {
    /// What happened (secrets redacted).
    pub message: String,
}

/// Why the POST of one request got no response.
#[derive(Debug)]
enum PostError {
    /// It failed on a kept-alive connection the server had closed (not a refused connection,
    /// not a timeout): [`StreamClient::send`] re-sends it.
    StaleConnection(Failure),
    /// Any other failure: refused, timed out, or the headers never came.
    Failed(Failure),
}

/// A ready-to-use client for one endpoint.
#[derive(Clone)]
pub struct StreamClient {
    http: reqwest::Client,
    url: reqwest::Url,
    headers: reqwest::header::HeaderMap,
    /// `<base>/models` under the API route's base path (pool warming).
    models_url: reqwest::Url,
    /// `headers` with `Accept: application/json` (pool warming).
    models_headers: reqwest::header::HeaderMap,
    /// What a GET to another origin carries: `Accept: application/json` and `Accept-Encoding`
    /// only, never the API key or the scenario's `headers:` (see [`StreamClient::get`]).
    foreign_headers: reqwest::header::HeaderMap,
    /// The server closes its connection after a streamed response (see
    /// [`StreamClient::set_close_after_stream`]); shared by the clones of this client.
    close_after_stream: Arc<AtomicBool>,
    /// The model ids `GET <base>/models` listed (see [`StreamClient::list_models`]); shared by
    /// the clones of this client; unset when the server did not answer with a list.
    listed_models: Arc<std::sync::OnceLock<Vec<String>>>,
    api: Api,
    api_key_env: Option<String>,
    secrets: Vec<String>,
    timeouts: Timeouts,
}

/// Why a [`StreamClient`] could not be built: nothing was sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL does not parse.
    #[error("base_url `{url}`: {source}")]
    BaseUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    /// The API key (from the variable `env`) cannot be sent as a header value.
    #[error("the API key in {env} is not a valid header value")]
    ApiKey { env: String },
    /// A `headers:` name that is not a valid HTTP header name.
    #[error("header `{name}` is not valid")]
    HeaderName { name: String },
    /// A `headers:` value that is not a valid HTTP header value.
    #[error("header `{name}` has an invalid value")]
    HeaderValue { name: String },
    /// The HTTP client (its TLS stack) could not start.
    #[error("cannot start the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
}

impl StreamClient {
    /// Builds a client for `ep` sending to `base_url` (already normalised) + the API route,
    /// with a connection pool of `pool` idle connections per host (kept [`POOL_IDLE_TIMEOUT`]).
    ///
    /// Errors: the URL cannot be joined, a header cannot be sent, or the TLS stack cannot start.
    pub fn new(ep: &Endpoint, base_url: &str, pool: usize) -> Result<StreamClient, ClientError> {
        crate::tls::install_crypto_provider();
        let mut url = reqwest::Url::parse(base_url).map_err(|source| ClientError::BaseUrl {
            url: base_url.to_string(),
            source,
        })?;
        let base_path = url.path().trim_end_matches('/').to_string();
        let mut models_url = url.clone();
        models_url.set_path(&format!("{base_path}/models"));
        models_url.set_query(None);
        url.set_path(&format!("{base_path}{}", ep.api.path()));
        let mut headers = reqwest::header::HeaderMap::new();
        let secrets = ep.secrets();
        headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("text/event-stream"),
        );
        // Ask for an uncompressed stream: a compressor between server and client can hold
        // events back until its buffer fills, which moves TTFT and ITL (tests/it/encoding.rs). A
        // body that is gzip or br encoded anyway is still decoded; `headers:` may override this.
        headers.insert(
            reqwest::header::ACCEPT_ENCODING,
            reqwest::header::HeaderValue::from_static("identity"),
        );
        if let Some(key) = &ep.api_key {
            let (name, value) = match ep.api {
                Api::AnthropicMessages => ("x-api-key", key.expose().to_string()),
                _ => ("authorization", format!("Bearer {}", key.expose())),
            };
            let mut v = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                ClientError::ApiKey {
                    env: ep.api_key_env.as_deref().unwrap_or("?").to_string(),
                }
            })?;
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        if ep.api == Api::AnthropicMessages {
            headers.insert(
                "anthropic-version",
                reqwest::header::HeaderValue::from_static("2023-06-01"),
            );
        }
        for h in &ep.headers {
            let name =
                reqwest::header::HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
                    ClientError::HeaderName {
                        name: h.name.clone(),
                    }
                })?;
            let mut v = reqwest::header::HeaderValue::from_str(h.value.expose()).map_err(|_| {
                ClientError::HeaderValue {
                    name: h.name.clone(),
                }
            })?;
            if h.from_env {
                v.set_sensitive(true);
            }
            headers.insert(name, v);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(ep.connect_timeout)
            .pool_max_idle_per_host(pool.max(1))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("perfgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClientError::Build)?;
        let mut models_headers = headers.clone();
        models_headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        let mut foreign_headers = reqwest::header::HeaderMap::new();
        for name in [reqwest::header::ACCEPT, reqwest::header::ACCEPT_ENCODING] {
            if let Some(v) = models_headers.get(&name) {
                foreign_headers.insert(name, v.clone());
            }
        }
        Ok(StreamClient {
            http,
            url,
            headers,
            models_url,
            models_headers,
            foreign_headers,
            close_after_stream: Arc::new(AtomicBool::new(false)),
            listed_models: Arc::new(std::sync::OnceLock::new()),
            api: ep.api,
            api_key_env: ep.api_key_env.clone(),
            secrets,
            timeouts: Timeouts {
                first_token: ep.first_token_timeout,
                idle: ep.idle_timeout,
                request: ep.request_timeout,
            },
        })
    }

    /// The full request URL.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The pool-warming URL: `<base>/models` under the API route's base path.
    pub fn models_url(&self) -> &str {
        self.models_url.as_str()
    }

    /// Asks `GET <base>/models` (one request, at most [`KEEPALIVE_PROBE_TIMEOUT`], a body of at
    /// most [`super::models::MODELS_BODY_BYTES`]) which models the server offers, and keeps the
    /// answer for messages. `None` when it did not answer 200 with a list.
    pub async fn list_models(&self) -> Option<Vec<String>> {
        let deadline = Instant::now() + KEEPALIVE_PROBE_TIMEOUT;
        let req = self
            .http
            .get(self.models_url.clone())
            .headers(self.models_headers.clone());
        let resp = timeout_at(deadline.into(), req.send()).await.ok()?.ok()?;
        if resp.status() != reqwest::StatusCode::OK {
            return None;
        }
        let body = read_prefix(resp, super::models::MODELS_BODY_BYTES, deadline).await;
        let ids = super::models::parse_ids(&body)?;
        Some(self.listed_models.get_or_init(|| ids).clone())
    }

    /// True once streamed requests ask for `Connection: close` (see
    /// [`StreamClient::set_close_after_stream`]).
    pub fn close_after_stream(&self) -> bool {
        self.close_after_stream.load(Ordering::SeqCst)
    }

    /// Marks the server as one that closes its connection after every streamed response
    /// (llama.cpp's llama-server does, although it announces keep-alive): a connection put back
    /// in the pool after a stream would be found closed by the next request, which then fails
    /// before any response and is re-sent. Streamed requests then carry `Connection: close`, so
    /// each opens its own connection, as the server requires.
    pub fn set_close_after_stream(&self) {
        self.close_after_stream.store(true, Ordering::SeqCst);
    }

    /// Whether the server keeps a connection open after a streamed response: sends one
    /// `GET <base>/models` after a short pause and looks whether it travels on one of `conns`
    /// (the local addresses of connections that carried a finished stream, idle in the pool
    /// since). `Some(false)` when it travelled on another connection; `None` when it failed
    /// (a `/models` that resets or closes says nothing about the stream's connection), the
    /// server did not answer within [`KEEPALIVE_PROBE_TIMEOUT`], or the connection cannot be
    /// told.
    pub async fn keeps_alive_after_stream(&self, conns: &[std::net::SocketAddr]) -> Option<bool> {
        // let a close that follows the stream reach the connection first
        tokio::time::sleep(POOL_SETTLE).await;
        let deadline = Instant::now() + KEEPALIVE_PROBE_TIMEOUT;
        let req = self
            .http
            .get(self.models_url.clone())
            .headers(self.models_headers.clone());
        match timeout_at(deadline.into(), req.send()).await.ok()? {
            Ok(mut resp) => {
                let on = local_addr(&resp)?;
                drain(&mut resp, WARM_BODY_BYTES, deadline).await;
                Some(conns.contains(&on))
            }
            Err(_) => None,
        }
    }

    /// Pool warming: fills the connection pool to `n` connections, so that `n` requests sent
    /// at once all find an idle connection and none pays TCP/TLS setup inside its timing.
    ///
    /// A pass sends `n` concurrent `GET <base>/models` (the scenario's headers, API key
    /// included; `Accept: application/json`): each takes an idle pooled connection or opens
    /// its own. Every body is read to its end (at most [`WARM_BODY_BYTES`]) and discarded, so
    /// its connection returns to the pool, whatever the status. Passes repeat until one is
    /// served by `n` different connections that earlier passes had already used: `n`
    /// requests at once then found `n` pooled connections and opened none. (One pass is not
    /// enough: on a fast server a request can end, and free its connection for the next,
    /// before all are sent; and the pool may drop a fresh connection it hands over.) Also
    /// stops when no request got an answer, when the server speaks HTTP/2 (one multiplexed
    /// connection) or the connection cannot be told apart, after [`WARM_PASSES`] passes, or
    /// at [`POOL_WARM_TIMEOUT`]; each connect is bounded by `connect_timeout`. Nothing is
    /// recorded; returns the number of connections the warming used.
    pub async fn warm_pool(&self, n: usize) -> usize {
        let deadline = Instant::now() + POOL_WARM_TIMEOUT;
        let mut seen: std::collections::HashSet<std::net::SocketAddr> = Default::default();
        for _ in 0..WARM_PASSES {
            if Instant::now() >= deadline {
                break;
            }
            let sends = (0..n).map(|_| {
                let req = self
                    .http
                    .get(self.models_url.clone())
                    .headers(self.models_headers.clone());
                async move { timeout_at(deadline.into(), req.send()).await.ok()?.ok() }
            });
            let mut held: Vec<reqwest::Response> = futures_util::future::join_all(sends)
                .await
                .into_iter()
                .flatten()
                .collect();
            let h2 = held.iter().any(|r| r.version() == reqwest::Version::HTTP_2);
            // the connection of each response, by its local address
            let conns: Vec<Option<std::net::SocketAddr>> = held.iter().map(local_addr).collect();
            futures_util::future::join_all(
                held.iter_mut()
                    .map(|resp| drain(resp, WARM_BODY_BYTES, deadline)),
            )
            .await;
            // A connection whose body ended goes back to the pool from a task of its own.
            tokio::time::sleep(POOL_SETTLE).await;
            let distinct: std::collections::HashSet<_> = conns.iter().flatten().copied().collect();
            let none_new = distinct.iter().all(|c| seen.contains(c));
            seen.extend(distinct.iter().copied());
            if held.is_empty()
                || h2
                || conns.iter().any(Option::is_none)
                || (distinct.len() >= n && none_new)
            {
                break;
            }
        }
        seen.len()
    }

    /// One `GET url` with `Accept: application/json`, bounded by `limit` as a whole: the status
    /// and at most [`GET_BODY_BYTES`] of the body (lossy UTF-8). The scenario's headers (API key
    /// included) go only to the endpoint's own origin (scheme, host and port of its base_url,
    /// [`same_origin`]): a `server.ready.url` or `server.metrics` elsewhere gets none. For
    /// readiness probes, server identity and `/metrics` scrapes (src/server/), never for
    /// measuring. Errors are redacted and say whether the connection was refused or the time
    /// ran out.
    pub async fn get(&self, url: &str, limit: Duration) -> Result<(u16, String), GetError> {
        let deadline = Instant::now() + limit;
        let headers = if same_origin(&self.url, url) {
            &self.models_headers
        } else {
            &self.foreign_headers
        };
        let req = self.http.get(url).headers(headers.clone());
        let mut resp = match timeout_at(deadline.into(), req.send()).await {
            Err(_) => {
                return Err(GetError {
                    message: format!("no answer within {} ms", limit.as_millis()),
                })
            }
            Ok(Err(e)) => {
                return Err(GetError {
                    message: self.redact(&root_cause(&e)),
                })
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while body.len() < GET_BODY_BYTES {
            match timeout_at(deadline.into(), resp.chunk()).await {
                Ok(Ok(Some(c))) => body.extend_from_slice(&c),
                _ => break,
            }
        }
        body.truncate(GET_BODY_BYTES);
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Replaces every secret (API key, env-sourced header values) in `s` with `<redacted>`.
    pub fn redact(&self, s: &str) -> String {
        crate::redact::redact(s, &self.secrets)
    }

    /// Sends one request with `body` and measures it. `run_start` is the run's clock origin
    /// (for `start_ms`). Never panics; every failure is a classified record.
    ///
    /// A request that fails before any response because the server closed a kept-alive
    /// connection as it was reused (a race every HTTP/1.1 client meets; llama-server closes
    /// idle connections after 5 s) is retried once on a fresh clock, and `Sent::delivery` says
    /// [`Delivery::Resent`].
    pub async fn send(&self, body: &serde_json::Value, run_start: Instant) -> Sent {
        let mut resends = 0;
        let mut sent = loop {
            let t0 = Instant::now();
            let start_ms = ms(t0.duration_since(run_start));
            match self.send_inner(body, t0, start_ms).await {
                Try::Ended(s) => break s,
                // A request dropped before any response is sent once more, as OpenAI's SDKs
                // do (a kept-alive connection the server closed as it was reused looks the
                // same). The runner counts these re-sends: too many make the run
                // untrustworthy. Against a server that closes after every stream (Connection:
                // close mode), the pool may still hold several such connections from before
                // the switch, each failing once and then discarded: up to
                // MAX_CLOSE_MODE_RESENDS tries then. The same holds for a re-send that meets a
                // second closed pooled connection before the runner has switched to that mode
                // (concurrency N leaves up to N of them; on a busy machine two in a row were
                // seen): after one stale connection, another is the same race.
                Try::StaleConnection(s) => {
                    let allowed = if self.close_after_stream() || resends > 0 {
                        MAX_CLOSE_MODE_RESENDS
                    } else {
                        1
                    };
                    if resends < allowed {
                        resends += 1;
                        continue;
                    }
                    break s;
                }
            }
        };
        if resends > 0 {
            sent.delivery = Delivery::Resent;
        }
        sent.model = sent.model.map(|m| self.redact(&m));
        sent.system_fingerprint = sent.system_fingerprint.map(|m| self.redact(&m));
        sent.record.response_id = sent.record.response_id.map(|m| self.redact(&m));
        sent.server = sent.server.map(|m| self.redact(&m));
        if let Some(t) = sent.record.server_timings.take() {
            sent.record.server_timings = Some(crate::redact::redact_json(&t, &self.secrets));
        }
        if let Some(e) = sent.record.error.as_mut() {
            e.message = self.redact(&e.message);
        }
        sent
    }

    /// One try of [`StreamClient::send`]: the headers, then an error body or the stream.
    async fn send_inner(&self, body: &serde_json::Value, t0: Instant, start_ms: f64) -> Try {
        let dl = Deadlines::start(t0, self.timeouts);
        let close = self.close_after_stream();
        let resp = match self.post(body, &dl, close).await {
            Ok(r) => r,
            Err(PostError::StaleConnection(failure)) => {
                return Try::StaleConnection(Sent::failed(start_ms, failure))
            }
            Err(PostError::Failed(failure)) => return Try::Ended(Sent::failed(start_ms, failure)),
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        let conn = local_addr(&resp);
        let server = headers
            .get("server")
            .and_then(|v| v.to_str().ok())
            .map(clip);
        if !status.is_success() {
            let mut s = self.error_status(resp, &headers, &dl, start_ms).await;
            s.server = server;
            return Try::Ended(s);
        }
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let declared_sse = content_type
            .to_ascii_lowercase()
            .contains("text/event-stream");
        let mut fold = BodyFold::new(self.api, declared_sse, start_ms);
        let mut resp = resp;
        let end = read_body(&mut resp, &mut fold, &dl, t0).await;
        if fold.saw_end_event() && !close {
            // Figures are stamped; let the connection go back to the pool.
            drain(
                &mut resp,
                WARM_BODY_BYTES,
                Instant::now() + DRAIN_AFTER_DONE,
            )
            .await;
        }
        let max_tokens = max_tokens_of(self.api, body);
        let folded = match fold.finish(end, max_tokens) {
            Ok(f) => f,
            Err(prefix) => {
                let msg = self.redact(&not_sse_message(
                    &content_type,
                    self.redact(&String::from_utf8_lossy(&prefix)).as_bytes(),
                ));
                let mut s = Sent::failed(
                    start_ms,
                    Failure {
                        class: FailureClass::NotSse,
                        status: Some(status.as_u16()),
                        message: msg,
                    },
                );
                s.server = server;
                return Try::Ended(s);
            }
        };
        let mut record = folded.record;
        if let Some(e) = record.error.as_mut() {
            e.status.get_or_insert(status.as_u16());
        }
        Try::Ended(Sent {
            record,
            model: folded.model,
            system_fingerprint: folded.fingerprint,
            server,
            refused: None,
            delivery: Delivery::FirstTry,
            sim_request: headers
                .get(crate::wire::SIM_REQUEST_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
            conn,
        })
    }

    /// Sends the POST and waits for the response headers until the first-token deadline.
    /// `close`: the server closes its connection after every stream, so say `Connection: close`.
    /// `Err`: the failure, told apart by whether it happened on a kept-alive connection the
    /// server had closed ([`PostError`]).
    async fn post(
        &self,
        body: &serde_json::Value,
        dl: &Deadlines,
        close: bool,
    ) -> Result<reqwest::Response, PostError> {
        let mut req = self
            .http
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if close {
            // The server closes the connection after a stream anyway: say so, so the
            // connection is never put back in the pool and found dead by the next request.
            req = req.header(reqwest::header::CONNECTION, "close");
        }
        let (deadline, limit) = dl.headers();
        match timeout_at(deadline.into(), req.send()).await {
            Err(_) => {
                let mut f = deadline::headers_timeout(limit, dl.timeouts());
                f.message = format!("{} from {}", f.message, self.url);
                Err(PostError::Failed(f))
            }
            Ok(Err(e)) => {
                let failure = Failure {
                    class: classify_transport(&e),
                    status: None,
                    message: self.transport_message(&e),
                };
                Err(if !e.is_connect() && !e.is_timeout() {
                    PostError::StaleConnection(failure)
                } else {
                    PostError::Failed(failure)
                })
            }
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// A non-2xx response: its status and the start of its body, in a message that says what
    /// to do.
    async fn error_status(
        &self,
        resp: reqwest::Response,
        headers: &reqwest::header::HeaderMap,
        dl: &Deadlines,
        start_ms: f64,
    ) -> Sent {
        let status = resp.status().as_u16();
        let text = read_prefix(
            resp,
            ERROR_BODY_BYTES,
            dl.first_token()
                .max(Instant::now() + Duration::from_secs(5)),
        )
        .await;
        let text = self.redact(&text);
        let mut msg = self.status_message(status, headers, &text);
        if let Some(hint) = max_tokens_hint(status, &text) {
            msg = format!("{msg}; {hint}");
        }
        let mut s = Sent::failed(
            start_ms,
            Failure {
                class: FailureClass::HttpStatus,
                status: Some(status),
                message: msg,
            },
        );
        if (status == 400 || status == 422) && text.contains("stream_options") {
            s.refused = Some(RefusedField::StreamOptions);
        }
        s
    }

    fn transport_message(&self, e: &reqwest::Error) -> String {
        let host = self.url.host_str().unwrap_or("?");
        let port = self.url.port_or_known_default().unwrap_or(0);
        if plain_http_answer(&root_cause(e)) {
            return format!(
                "TLS handshake with {host}:{port} failed: the server answered plain HTTP, not TLS; use http:// in base_url ({})",
                root_cause(e)
            );
        }
        match classify_transport(e) {
            FailureClass::TimeoutConnect => format!("could not connect to {host}:{port} within connect_timeout ({})", root_cause(e)),
            FailureClass::Tls => format!("TLS handshake with {host}:{port} failed: {}", root_cause(e)),
            _ if !e.is_connect() => format!(
                "the connection to {host}:{port} closed or broke before a response ({}): the server dropped the request or does not speak HTTP/1.1 here",
                root_cause(e)
            ),
            _ => format!("could not connect to {host}:{port}: {}; is the server running and is base_url right?", root_cause(e)),
        }
    }

    fn status_message(
        &self,
        status: u16,
        headers: &reqwest::header::HeaderMap,
        body: &str,
    ) -> String {
        let detail = body_detail(body);
        let base = if detail.is_empty() {
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            format!("HTTP {status} {reason}")
        } else {
            format!("HTTP {status}: {detail}")
        };
        match status {
            401 | 403 => match &self.api_key_env {
                Some(var) => format!("{base} (the key was read from {var}; check that it is valid for this endpoint)"),
                None => format!("{base} (no API key was sent: set endpoint.api_key_env to the NAME of the variable that holds it)"),
            },
            404 => match self.listed_models.get() {
                // `/models` answered with a list, so base_url is right: say what the server offers.
                Some(ids) if !ids.is_empty() => format!(
                    "{base} for {} (the server lists these models at {}: {}; set endpoint.model to one of them, or check that this server serves {})",
                    self.url,
                    self.models_url,
                    super::models::shown(ids),
                    self.api.path()
                ),
                Some(_) => format!(
                    "{base} for {} (the server answers {}, so base_url is right; check endpoint.model, and that this server serves {})",
                    self.url,
                    self.models_url,
                    self.api.path()
                ),
                None => format!("{base} for {} (check base_url: it usually ends in /v1, and perfgate appends {})", self.url, self.api.path()),
            },
            429 => match retry_after(headers) {
                Some(r) => format!("{base} (rate limited; the server asks to retry after {r}: lower load.concurrency or raise the limit)"),
                None => format!("{base} (rate limited: lower load.concurrency or raise the limit)"),
            },
            300..=399 => {
                let loc = headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or("?");
                format!("{base} redirect to {} (perfgate does not follow redirects: set base_url to the final address)", clip(loc))
            }
            _ => base,
        }
    }
}

/// The outcome of one request plus what the server said about itself.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The measurement.
    pub record: RequestRecord,
    /// `model` from the stream.
    pub model: Option<String>,
    /// `system_fingerprint` from the stream.
    pub system_fingerprint: Option<String>,
    /// The `Server` header.
    pub server: Option<String>,
    /// A request field the server refused (a 400/422 whose body names it).
    pub refused: Option<RefusedField>,
    /// Whether the request went out once, or again after its try met a closed connection.
    pub delivery: Delivery,
    /// perfgate's simulator: the request number of its `x-perfgate-sim-request` header, to look
    /// up the simulator's own send times (the accuracy benchmark).
    pub sim_request: Option<u64>,
    /// The local address of the connection that carried the response (tells connections
    /// apart: was a kept-alive connection reused?).
    pub conn: Option<std::net::SocketAddr>,
}

/// The output limit `body` asks of a server of `api`, read under the keys that api takes
/// (`request.max_tokens_field`): the bound a believable usage stays under. A key another api
/// uses is not the limit (`max_tokens` in a Responses body is not what the server honours).
pub fn max_tokens_of(api: Api, body: &serde_json::Value) -> Option<u64> {
    crate::config::scenario::MaxTokensField::allowed(api)
        .iter()
        .find_map(|f| body.get(f.key()).and_then(serde_json::Value::as_u64))
}

/// What to set when a 400/422 names the output-limit key as unsupported: OpenAI's reasoning
/// models answer "Unsupported parameter: 'max_tokens' is not supported with this model. Use
/// 'max_completion_tokens' instead."; a server that predates `max_completion_tokens` names it
/// as unknown.
pub fn max_tokens_hint(status: u16, body: &str) -> Option<String> {
    if status != 400 && status != 422 {
        return None;
    }
    let b = body.to_ascii_lowercase();
    let rejected = |k: &str| {
        b.contains(&format!("'{k}'"))
            || b.contains(&format!("\"{k}\""))
            || b.contains(&format!("`{k}`"))
            || b.contains(&format!("param\":\"{k}"))
    };
    let unsupported = [
        "unsupported",
        "not supported",
        "unrecognized",
        "unknown",
        "extra",
        "not permitted",
        "not allowed",
    ]
    .iter()
    .any(|w| b.contains(w));
    if !unsupported {
        return None;
    }
    if rejected("max_tokens") && b.contains("max_completion_tokens") {
        return Some(
            "the model rejects `max_tokens`: set request.max_tokens_field: max_completion_tokens"
                .into(),
        );
    }
    if rejected("max_completion_tokens") {
        return Some(
            "the server does not know `max_completion_tokens`: set request.max_tokens_field: max_tokens (or leave it out)"
                .into(),
        );
    }
    None
}

/// A request field a server refused with a 400/422 that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedField {
    /// `stream_options` (`include_usage`): the runner re-sends without it.
    StreamOptions,
}

/// How a request ended up being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Its first try is what was measured.
    FirstTry,
    /// Its first try failed before any response on a kept-alive connection the server had
    /// closed, so it was sent again: a dropped request, counted against the run's trust.
    Resent,
    /// Re-sent likewise, but before perfgate learned that the server closes its connection
    /// after every stream (set by the runner): expected, not a dropped request.
    ResentBeforeCloseMode,
}

impl Delivery {
    /// True when the request was sent more than once.
    pub fn was_resent(self) -> bool {
        self != Delivery::FirstTry
    }
}

/// One try of a request: how it ended, or that it met a closed kept-alive connection (which
/// [`StreamClient::send`] may try again).
enum Try {
    /// The try ended (measured, or failed for good).
    Ended(Sent),
    /// It failed before any response on a connection the server had closed.
    StaleConnection(Sent),
}

impl Sent {
    fn failed(start_ms: f64, failure: Failure) -> Sent {
        Sent {
            record: RequestRecord {
                error: Some(failure),
                ..RequestRecord::new(start_ms)
            },
            model: None,
            system_fingerprint: None,
            server: None,
            refused: None,
            delivery: Delivery::FirstTry,
            sim_request: None,
            conn: None,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Reads the body into `fold` until it ends, a limit is hit or the transport fails; returns how
/// it ended (times in ms after `t0`).
async fn read_body(
    resp: &mut reqwest::Response,
    fold: &mut BodyFold,
    dl: &Deadlines,
    t0: Instant,
) -> End {
    let mut last_event = t0;
    loop {
        let (deadline, limit) = dl.next_chunk(fold.got_token(), last_event);
        let chunk = match timeout_at(deadline.into(), resp.chunk()).await {
            Err(_) => {
                let at = ms(Instant::now() - t0);
                return End::Failed(deadline::stream_timeout(limit, dl.timeouts()), at);
            }
            Ok(Err(e)) => {
                let at = ms(Instant::now() - t0);
                return End::Failed(
                    Failure {
                        class: FailureClass::Truncated,
                        status: None,
                        message: format!("connection reset / incomplete body ({})", root_cause(&e)),
                    },
                    at,
                );
            }
            Ok(Ok(None)) => return End::Eof(ms(Instant::now() - t0)),
            Ok(Ok(Some(bytes))) => bytes,
        };
        let now = Instant::now();
        match fold.chunk(&chunk, ms(now - t0)) {
            Step::Done(end) => return end,
            Step::More { event } => {
                if event {
                    last_event = now;
                }
            }
        }
    }
}

fn classify_transport(e: &reqwest::Error) -> FailureClass {
    let chain = root_cause(e).to_ascii_lowercase();
    if e.is_timeout() {
        FailureClass::TimeoutConnect
    } else if chain.contains("certificate") || chain.contains("tls") || chain.contains("handshake")
    {
        FailureClass::Tls
    } else {
        FailureClass::Connect
    }
}

/// The innermost error text (e.g. "Connection refused (os error 111)").
/// rustls' words for a TLS client that received a plain-HTTP answer (`https://` against a
/// plain-http server): "received corrupt message of type InvalidContentType".
fn plain_http_answer(cause: &str) -> bool {
    cause.contains("InvalidContentType")
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: &dyn std::error::Error = e;
    let mut text = cur.to_string();
    while let Some(next) = cur.source() {
        cur = next;
        text = cur.to_string();
    }
    clip(&text)
}

async fn read_prefix(mut resp: reqwest::Response, limit: usize, deadline: Instant) -> String {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match timeout_at(deadline.into(), resp.chunk()).await {
            Ok(Ok(Some(c))) => buf.extend_from_slice(&c[..c.len().min(limit - buf.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The local address of the connection that carried `resp` (distinct per connection).
fn local_addr(resp: &reqwest::Response) -> Option<std::net::SocketAddr> {
    resp.extensions()
        .get::<hyper_util::client::legacy::connect::HttpInfo>()
        .map(|i| i.local_addr())
}

/// Reads and discards the rest of a body, at most about `limit` bytes, until `deadline`; true
/// when the body ended (its connection then returns to the pool).
async fn drain(resp: &mut reqwest::Response, limit: usize, deadline: Instant) -> bool {
    let mut read = 0usize;
    while read <= limit {
        match timeout_at(deadline.into(), resp.chunk()).await {
            Ok(Ok(Some(c))) => read += c.len(),
            Ok(Ok(None)) => return true,
            _ => return false,
        }
    }
    false
}

/// `Retry-After` as text: `2s` for delta-seconds; for an HTTP date, the seconds after the
/// response's `Date` header (or now) plus the date itself (RFC 9110 s10.2.3).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let raw = headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .to_string();
    if let Ok(secs) = raw.parse::<u64>() {
        return Some(format!("{secs}s"));
    }
    let parse = |s: &str| {
        time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc2822).ok()
    };
    let at = parse(&raw)?;
    let now = headers
        .get("date")
        .and_then(|d| d.to_str().ok())
        .and_then(parse)
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    let secs = (at - now).whole_seconds().max(0);
    Some(format!("{secs}s ({})", clip(&raw)))
}

/// The readable part of an error body: a JSON error message, an HTML `<title>`, or the first
/// line of text (at most 300 characters).
pub fn body_detail(body: &str) -> String {
    let t = body.trim();
    if t.is_empty() {
        return String::new();
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
        if let Some(e) = v.get("error") {
            return super::dialect::error_message(e);
        }
        if let Some(m) = v
            .get("message")
            .or_else(|| v.get("detail"))
            .and_then(|m| m.as_str())
        {
            return clip(m);
        }
        return clip(t);
    }
    let lower = t.to_ascii_lowercase();
    if let (Some(a), Some(b)) = (lower.find("<title>"), lower.find("</title>")) {
        if b > a + 7 {
            return format!("HTML page \"{}\"", clip(&t[a + 7..b]));
        }
    }
    if lower.starts_with("<!doctype") || lower.starts_with("<html") {
        return "an HTML page".into();
    }
    clip(t.lines().next().unwrap_or(""))
}

fn not_sse_message(content_type: &str, prefix: &[u8]) -> String {
    let text = String::from_utf8_lossy(prefix);
    let ct = if content_type.is_empty() {
        "no content-type".to_string()
    } else {
        format!("content-type {content_type}")
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(trimmed.trim()) {
            if v.get("error").is_some() {
                return format!(
                    "the server answered a JSON error instead of an SSE stream ({ct}): {}",
                    body_detail(trimmed)
                );
            }
            return format!("the server answered one JSON document instead of an SSE stream ({ct}): it ignored `stream: true`");
        }
        return format!("the body is not an SSE stream ({ct}; it looks like JSON lines: is this a native, non-OpenAI API?)");
    }
    if trimmed.is_empty() {
        return format!("the server answered an empty body ({ct}) instead of an SSE stream");
    }
    format!(
        "the body is not an SSE stream ({ct}): {}",
        body_detail(trimmed)
    )
}

/// True when `url` has the origin of `base` (scheme, host and port, a default port spelled out or
/// not): the only place the endpoint's credentials go. A URL that does not parse is foreign.
pub fn same_origin(base: &reqwest::Url, url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| u.origin() == base.origin())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rejected_max_tokens_names_the_key_to_set() {
        let openai = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
        assert!(super::max_tokens_hint(400, openai)
            .unwrap()
            .contains("request.max_tokens_field: max_completion_tokens"));
        let old = r#"{"detail":[{"msg":"extra fields not permitted","loc":["body","max_completion_tokens"]}]}"#;
        assert!(super::max_tokens_hint(422, old)
            .unwrap()
            .contains("request.max_tokens_field: max_tokens"));
        assert_eq!(super::max_tokens_hint(500, openai), None);
        assert_eq!(
            super::max_tokens_hint(400, r#"{"error":"max_tokens must be at least 1"}"#),
            None
        );
    }

    use super::*;

    // Issue 28: the usage bound was the first limit key present in any api's name, so a
    // Responses body with `max_tokens: 100` beside its `max_output_tokens: 8` was bounded by 100.
    #[test]
    fn the_usage_bound_is_the_apis_own_limit_key() {
        let body = serde_json::json!({"max_tokens": 100, "max_output_tokens": 8});
        assert_eq!(max_tokens_of(Api::OpenaiResponses, &body), Some(8));
        assert_eq!(max_tokens_of(Api::OpenaiChat, &body), Some(100));
        let chat = serde_json::json!({"max_completion_tokens": 5});
        assert_eq!(max_tokens_of(Api::OpenaiChat, &chat), Some(5));
        assert_eq!(max_tokens_of(Api::AnthropicMessages, &chat), None);
    }

    #[test]
    fn credentials_stay_on_the_base_urls_origin() {
        let base = reqwest::Url::parse("http://127.0.0.1:8080/v1/chat/completions").unwrap();
        assert!(same_origin(&base, "http://127.0.0.1:8080/health"));
        assert!(same_origin(&base, "http://127.0.0.1:8080/metrics?x=1"));
        assert!(!same_origin(&base, "http://127.0.0.1:9090/metrics"));
        assert!(!same_origin(&base, "https://127.0.0.1:8080/health"));
        assert!(!same_origin(&base, "http://localhost:8080/health"));
        assert!(!same_origin(&base, "not a url"));
        let tls = reqwest::Url::parse("https://api.example.com/v1").unwrap();
        assert!(same_origin(&tls, "https://api.example.com:443/version"));
        assert!(!same_origin(
            &tls,
            "https://api.example.com.evil.test/version"
        ));
    }

    #[test]
    fn error_bodies_become_readable() {
        assert_eq!(
            body_detail(r#"{"error":{"message":"Invalid API key","type":"auth"}}"#),
            "Invalid API key"
        );
        assert_eq!(
            body_detail("<html><head><title>502 Bad Gateway</title></head></html>"),
            "HTML page \"502 Bad Gateway\""
        );
        assert_eq!(
            body_detail("upstream connect error\nmore"),
            "upstream connect error"
        );
        assert_eq!(body_detail(""), "");
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h).as_deref(), Some("2s"));
        h.insert(
            "retry-after",
            "Wed, 01 Jan 2025 00:00:05 GMT".parse().unwrap(),
        );
        h.insert("date", "Wed, 01 Jan 2025 00:00:02 GMT".parse().unwrap());
        assert_eq!(
            retry_after(&h).as_deref(),
            Some("3s (Wed, 01 Jan 2025 00:00:05 GMT)")
        );
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn not_sse_messages() {
        assert!(
            not_sse_message("application/json", br#"{"id":"x","choices":[]}"#)
                .contains("ignored `stream: true`")
        );
        assert!(
            not_sse_message("application/x-ndjson", b"{\"a\":1}\n{\"b\":2}\n")
                .contains("JSON lines")
        );
    }
}
