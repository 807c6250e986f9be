//! Sending one streamed request and timing it: over perfgate's own HTTP/1.1 transport to a plain
//! `http://` endpoint without a proxy (`own`, `wire`), over reqwest and rustls otherwise; SSE
//! decoded as bytes arrive, each event stamped (one `Instant` clock) with the arrival of the read
//! that completed it (on the own transport the kernel's receive time, [`crate::rx_stamp`]; on
//! reqwest the time the read returned), before any JSON parsing. Every failure becomes a classified [`crate::record::Failure`]; secrets are
//! redacted from every message (a server may echo the key back).
//!
//! This module builds the client ([`StreamClient::new`]) and holds the limits; one submodule per
//! job: `send` (the POST, its re-sends after a closed kept-alive connection, the outcome
//! [`Sent`]), `read` (reading bodies against the deadlines: the stream's read loop, an error
//! body's prefix, a drain), `errors` (error bodies and failure messages that say what to do),
//! `pool` (requests outside the measurement: pool warming, the keep-alive check, `/models`,
//! plain GETs), `own` (the own transport: its connections, pool and read loop) and `wire` (its
//! bytes: the request, the response head, the body's framing; pure).

mod errors;
mod own;
mod pool;
mod read;
mod send;
mod wire;

pub use errors::{body_detail, max_tokens_hint, retry_after};
pub use own::{Transport, TRANSPORT_ENV};
pub use pool::{same_origin, GetError};
pub use send::{max_tokens_of, Delivery, RefusedField, Sent};

use super::deadline::Timeouts;
use crate::config::scenario::{Api, Endpoint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("perfgate/", env!("CARGO_PKG_VERSION"));

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
    /// perfgate's own HTTP/1.1 transport for the streamed requests (`None`: reqwest carries
    /// them); shared by the clones of this client.
    own: Option<Arc<own::Own>>,
    /// What a streamed request carries on the own transport: `headers` plus the
    /// `Content-Type` and `User-Agent` reqwest adds.
    own_headers: reqwest::header::HeaderMap,
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
        StreamClient::with_transport(ep, base_url, pool, Transport::from_env())
    }

    /// [`StreamClient::new`] with the streamed requests on `transport` (`new` reads it from
    /// [`TRANSPORT_ENV`]).
    pub fn with_transport(
        ep: &Endpoint,
        base_url: &str,
        pool: usize,
        transport: Transport,
    ) -> Result<StreamClient, ClientError> {
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
            let (name, value) = ep.api.auth_header(key.expose());
            let mut v = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                ClientError::ApiKey {
                    env: ep.api_key_env.as_deref().unwrap_or("?").to_string(),
                }
            })?;
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        for (name, value) in ep.api.fixed_headers() {
            headers.insert(*name, reqwest::header::HeaderValue::from_static(value));
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
            .user_agent(USER_AGENT)
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
        let own = transport
            .own_for(&url)
            .then(|| Arc::new(own::Own::new(&url, ep.connect_timeout, pool)));
        // reqwest's request: these headers replace its defaults of the same name, then it adds
        // its User-Agent unless one is set, and appends the Content-Type
        let mut own_headers = headers.clone();
        if !own_headers.contains_key(reqwest::header::USER_AGENT) {
            own_headers.insert(
                reqwest::header::USER_AGENT,
                reqwest::header::HeaderValue::from_static(USER_AGENT),
            );
        }
        own_headers.append(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        Ok(StreamClient {
            own,
            own_headers,
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

    /// Whether the streamed requests go over perfgate's own HTTP/1.1 transport (not reqwest).
    pub fn own_transport(&self) -> bool {
        self.own.is_some()
    }

    /// The full request URL.
    pub fn url(&self) -> &str {
        self.url.as_str()
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

    /// Replaces every secret (API key, env-sourced header values) in `s` with `<redacted>`.
    pub fn redact(&self, s: &str) -> String {
        crate::redact::redact(s, &self.secrets)
    }
}

/// A duration in ms.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The local address of the connection that carried `resp` (distinct per connection).
fn local_addr(resp: &reqwest::Response) -> Option<std::net::SocketAddr> {
    resp.extensions()
        .get::<hyper_util::client::legacy::connect::HttpInfo>()
        .map(|i| i.local_addr())
}
