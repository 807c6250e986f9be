//! The POST of one streamed request and its re-sends: a try that meets a kept-alive connection
//! the server had closed is sent again ([`StreamClient::send`]); the outcome is a [`Sent`].

use super::errors::{classify_transport, not_sse_message};
use super::read::{drain, read_body, read_prefix};
use super::{
    local_addr, ms, own, wire, StreamClient, DRAIN_AFTER_DONE, MAX_CLOSE_MODE_RESENDS,
    WARM_BODY_BYTES,
};
use crate::client::deadline::{self, Deadlines};
use crate::client::dialect::clip;
use crate::client::measure::End;
use crate::client::stream::BodyFold;
use crate::config::scenario::Api;
use crate::record::{Failure, FailureClass, RequestRecord};
use std::time::Instant;
use tokio::time::timeout_at;

/// Why the POST of one request got no response.
#[derive(Debug)]
enum PostError {
    /// It failed on a kept-alive connection the server had closed (not a refused connection,
    /// not a timeout): [`StreamClient::send`] re-sends it.
    StaleConnection(Failure),
    /// Any other failure: refused, timed out, or the headers never came.
    Failed(Failure),
}

impl StreamClient {
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
        let conn = resp.local_addr();
        let server = headers
            .get("server")
            .and_then(|v| v.to_str().ok())
            .map(clip);
        if !(200..300).contains(&status) {
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
        if self.api == crate::config::scenario::Api::OpenaiChat {
            if let Some(e) = crate::structured::Expect::from_body(body) {
                fold.expect_structured(e);
            }
        }
        let mut resp = resp;
        let end = resp.read_body(&mut fold, &dl, t0).await;
        if fold.saw_end_event() && !close {
            // Figures are stamped; let the connection go back to the pool.
            resp.drain(WARM_BODY_BYTES, Instant::now() + DRAIN_AFTER_DONE)
                .await;
        }
        drop(resp);
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
                        status: Some(status),
                        message: msg,
                    },
                );
                s.server = server;
                return Try::Ended(s);
            }
        };
        let mut record = folded.record;
        if let Some(e) = record.error.as_mut() {
            e.status.get_or_insert(status);
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
    ) -> Result<Resp, PostError> {
        if let Some(own) = &self.own {
            return self.post_own(own, body, dl, close).await;
        }
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
            Err(_) => Err(PostError::Failed(self.headers_timeout(dl, limit))),
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
            Ok(Ok(r)) => Ok(Resp::Reqwest(r)),
        }
    }

    /// [`StreamClient::post`] over perfgate's own transport ([`own`]): the same request bytes
    /// (method, path, headers, body) in one write, the same failures for the same events.
    async fn post_own(
        &self,
        own: &std::sync::Arc<own::Own>,
        body: &serde_json::Value,
        dl: &Deadlines,
        close: bool,
    ) -> Result<Resp, PostError> {
        let body = body.to_string();
        let bytes = if close {
            let mut h = self.own_headers.clone();
            h.append(
                reqwest::header::CONNECTION,
                reqwest::header::HeaderValue::from_static("close"),
            );
            wire::request("POST", &self.url, &h, body.as_bytes())
        } else {
            wire::request("POST", &self.url, &self.own_headers, body.as_bytes())
        };
        let (deadline, limit) = dl.headers();
        match timeout_at(deadline.into(), own.send(&bytes, close)).await {
            Err(_) => Err(PostError::Failed(self.headers_timeout(dl, limit))),
            Ok(Err(e)) => {
                let host = self.url.host_str().unwrap_or("?");
                let port = self.url.port_or_known_default().unwrap_or(0);
                match own::head_failure(&e, host, port) {
                    (f, true) => Err(PostError::StaleConnection(f)),
                    (f, false) => Err(PostError::Failed(f)),
                }
            }
            Ok(Ok(r)) => Ok(Resp::Own(Box::new(r))),
        }
    }

    /// No response head by the first-token deadline.
    fn headers_timeout(&self, dl: &Deadlines, limit: deadline::Limit) -> Failure {
        let mut f = deadline::headers_timeout(limit, dl.timeouts());
        f.message = format!("{} from {}", f.message, self.url);
        f
    }
}

/// A response on either transport.
pub(super) enum Resp {
    Reqwest(reqwest::Response),
    Own(Box<own::Response>),
}

impl Resp {
    pub(super) fn status(&self) -> u16 {
        match self {
            Resp::Reqwest(r) => r.status().as_u16(),
            Resp::Own(r) => r.status,
        }
    }

    pub(super) fn headers(&self) -> &reqwest::header::HeaderMap {
        match self {
            Resp::Reqwest(r) => r.headers(),
            Resp::Own(r) => &r.headers,
        }
    }

    /// The local address of the connection that carried it.
    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Resp::Reqwest(r) => local_addr(r),
            Resp::Own(r) => r.local_addr(),
        }
    }

    async fn read_body(&mut self, fold: &mut BodyFold, dl: &Deadlines, t0: Instant) -> End {
        match self {
            Resp::Reqwest(r) => read_body(r, fold, dl, t0).await,
            Resp::Own(r) => r.read_body(fold, dl, t0).await,
        }
    }

    async fn drain(&mut self, limit: usize, deadline: Instant) -> bool {
        match self {
            Resp::Reqwest(r) => drain(r, limit, deadline).await,
            Resp::Own(r) => r.drain(limit, deadline).await,
        }
    }

    pub(super) async fn read_prefix(self, limit: usize, deadline: Instant) -> String {
        match self {
            Resp::Reqwest(r) => read_prefix(r, limit, deadline).await,
            Resp::Own(r) => r.read_prefix(limit, deadline).await,
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
    api.max_tokens_fields()
        .iter()
        .find_map(|f| body.get(f.key()).and_then(serde_json::Value::as_u64))
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
    pub(super) fn failed(start_ms: f64, failure: Failure) -> Sent {
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

#[cfg(test)]
mod tests {
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
}
