//! Requests outside the measurement: pool warming before a phase, the keep-alive check after a
//! stream, `GET <base>/models`, and plain GETs for readiness, identity and `/metrics` (the
//! endpoint's credentials only to its own origin).

use super::errors::root_cause;
use super::read::{drain, read_prefix};
use super::{
    local_addr, StreamClient, GET_BODY_BYTES, KEEPALIVE_PROBE_TIMEOUT, POOL_SETTLE,
    POOL_WARM_TIMEOUT, WARM_BODY_BYTES, WARM_PASSES,
};
use std::time::{Duration, Instant};
use tokio::time::timeout_at;

/// The pause before the keep-alive probe's second look (a loaded machine returns a streamed
/// connection to the pool late).
const KEEPALIVE_RETRY_SETTLE: Duration = Duration::from_millis(200);
/// Most probes of the second look at once.
const KEEPALIVE_RETRY_MAX: usize = 16;

/// Why a [`StreamClient::get`] got no answer: what happened (refused, no route, no answer in
/// time), secrets redacted. Readiness probes retry every such failure alike.
#[derive(Debug, Clone, PartialEq)]
pub struct GetError {
    /// What happened (secrets redacted).
    pub message: String,
}

impl StreamClient {
    /// Asks `GET <base>/models` (one request, at most [`KEEPALIVE_PROBE_TIMEOUT`], a body of at
    /// most [`crate::client::models::MODELS_BODY_BYTES`]) which models the server offers, and keeps the
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
        let body = read_prefix(resp, crate::client::models::MODELS_BODY_BYTES, deadline).await;
        let ids = crate::client::models::parse_ids(&body)?;
        Some(self.listed_models.get_or_init(|| ids).clone())
    }

    /// Whether the server keeps a connection open after a streamed response: sends one
    /// `GET <base>/models` after a short pause and looks whether it travels on one of `conns`
    /// (the local addresses of connections that carried a finished stream, idle in the pool
    /// since), and when it did not, looks again after 200 ms with as many probes at once as
    /// there are such connections plus one. `Some(false)` when none travelled on one of them;
    /// `None` when every probe failed
    /// (a `/models` that resets or closes says nothing about the stream's connection), the
    /// server did not answer within [`KEEPALIVE_PROBE_TIMEOUT`], or the connection cannot be
    /// told.
    pub async fn keeps_alive_after_stream(&self, conns: &[std::net::SocketAddr]) -> Option<bool> {
        // let a close that follows the stream reach the connection first
        tokio::time::sleep(POOL_SETTLE).await;
        if let Some(own) = &self.own {
            // The own transport's pool holds the streams' connections: is one still open?
            if own.holds_open(conns) {
                return Some(true);
            }
            tokio::time::sleep(KEEPALIVE_RETRY_SETTLE).await;
            return Some(own.holds_open(conns));
        }
        let deadline = Instant::now() + KEEPALIVE_PROBE_TIMEOUT;
        let first = self.probe_connection(deadline).await?;
        if conns.contains(&first) {
            return Some(true);
        }
        // On a loaded machine a streamed connection may not be back in the pool yet, and the
        // probe opened its own. After a longer pause, as many probes at once as there are
        // streamed connections plus the probe's: every idle connection is handed out, so a
        // streamed one still open is found; a server that closed them (llama-server) gets new
        // connections only.
        tokio::time::sleep(KEEPALIVE_RETRY_SETTLE).await;
        let mut distinct = conns.to_vec();
        distinct.sort();
        distinct.dedup();
        let n = (distinct.len() + 1).min(KEEPALIVE_RETRY_MAX);
        let got: Vec<std::net::SocketAddr> =
            futures_util::future::join_all((0..n).map(|_| self.probe_connection(deadline)))
                .await
                .into_iter()
                .flatten()
                .collect();
        if got.is_empty() {
            return None;
        }
        Some(got.iter().any(|a| conns.contains(a)))
    }

    /// One `GET <base>/models` (body drained, at most [`WARM_BODY_BYTES`]): the local address of
    /// the connection it travelled on; `None` when it got no answer by `deadline` or the
    /// connection cannot be told.
    async fn probe_connection(&self, deadline: Instant) -> Option<std::net::SocketAddr> {
        let req = self
            .http
            .get(self.models_url.clone())
            .headers(self.models_headers.clone());
        match timeout_at(deadline.into(), req.send()).await.ok()? {
            Ok(mut resp) => {
                let on = local_addr(&resp)?;
                drain(&mut resp, WARM_BODY_BYTES, deadline).await;
                Some(on)
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
        if let Some(own) = &self.own {
            // The own transport: open connections until `n` are idle (no request needed).
            return own.warm(n, deadline).await;
        }
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
}

/// True when `url` has the origin of `base` (scheme, host and port, a default port spelled out or
/// not): the only place the endpoint's credentials go. A URL that does not parse is foreign.
pub fn same_origin(base: &reqwest::Url, url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| u.origin() == base.origin())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
