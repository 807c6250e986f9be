//! HTTP plumbing of the simulator: reading a bounded request body and the JSON and error
//! responses.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Largest request body accepted, bytes (1 MiB); a larger one is answered 413.
pub const MAX_REQUEST_BODY: usize = 1 << 20;

/// Errors a response body can end with.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Every response body the simulator sends.
pub(super) type ResBody = UnsyncBoxBody<Bytes, BoxError>;

/// Reads the whole request body, at most [`MAX_REQUEST_BODY`] bytes; else the response to send.
pub(super) async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<ResBody>> {
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

pub(super) fn too_large() -> Response<ResBody> {
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

pub(super) fn not_found(path: &str) -> Response<ResBody> {
    let shown: String = path.chars().take(200).collect();
    error_response(
        StatusCode::NOT_FOUND,
        &format!(
            "unknown path {shown:?}; the simulator serves GET /v1/models, POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, GET /health, GET /sim/timings[?from=N] and GET /sim/timings/N"
        ),
        "invalid_request_error",
    )
}

pub(super) fn method_not_allowed(allow: &'static str) -> Response<ResBody> {
    let mut resp = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed; use {allow}"),
        "invalid_request_error",
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

pub(super) fn error_response(status: StatusCode, message: &str, kind: &str) -> Response<ResBody> {
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind}}),
    )
}

pub(super) fn json_response(status: StatusCode, v: &Value) -> Response<ResBody> {
    raw_json_response(status, v.to_string())
}

/// A response whose body is `json`, already serialized.
pub(super) fn raw_json_response(status: StatusCode, json: String) -> Response<ResBody> {
    let body = Full::new(Bytes::from(json))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// `GET /v1/models`: the one model served.
pub(super) fn models(model: &str) -> Response<ResBody> {
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": [{"id": model, "object": "model", "owned_by": "perfgate-sim"}]
        }),
    )
}

/// When a request arrived: the kernel's receive time of the read that completed it, not when
/// this runtime got to read it (a simulator busy with a thousand streams reads late), nor when
/// its head arrived (a client may send the body later).
pub(super) struct Arrival(pub(super) Arc<Mutex<Option<std::time::Instant>>>);

impl Arrival {
    /// The arrival of a request whose body has been read: the last read's stamp (never in the
    /// future, [`crate::rx_stamp`]), or now when that read carried none.
    pub(super) fn read(self) -> Instant {
        let stamp = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        Instant::from_std(stamp.unwrap_or_else(std::time::Instant::now))
    }
}
