//! Failures told in words that say what to do: a non-2xx answer (its status and the readable part
//! of its body, with the setting to change), a transport error, a body that is not a stream.

use super::send::{RefusedField, Resp, Sent};
use super::{StreamClient, ERROR_BODY_BYTES};
use crate::client::deadline::Deadlines;
use crate::client::dialect::clip;
use crate::record::{Failure, FailureClass};
use std::time::{Duration, Instant};

impl StreamClient {
    /// A non-2xx response: its status and the start of its body, in a message that says what
    /// to do.
    pub(super) async fn error_status(
        &self,
        resp: Resp,
        headers: &reqwest::header::HeaderMap,
        dl: &Deadlines,
        start_ms: f64,
    ) -> Sent {
        let status = resp.status();
        let text = resp
            .read_prefix(
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

    pub(super) fn transport_message(&self, e: &reqwest::Error) -> String {
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
                    crate::client::models::shown(ids),
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

pub(super) fn classify_transport(e: &reqwest::Error) -> FailureClass {
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

pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: &dyn std::error::Error = e;
    let mut text = cur.to_string();
    while let Some(next) = cur.source() {
        cur = next;
        text = cur.to_string();
    }
    clip(&text)
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
            return crate::client::dialect::error_message(e);
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

pub(super) fn not_sse_message(content_type: &str, prefix: &[u8]) -> String {
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
