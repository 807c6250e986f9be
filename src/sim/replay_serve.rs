//! Replay mode: a recorded case (tests/cases format) validated once and served verbatim with
//! its recorded timing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, TRANSFER_ENCODING};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use tokio::time::Instant;

use super::http_util::{json_response, models, not_found, read_body, Arrival, ResBody};
use super::replay::{ReplayCase, ReplayError};
use super::timed_body::{at, ms, Script, Step, TimedBody};

/// Model id `/v1/models` reports in replay mode.
pub const REPLAY_MODEL: &str = "perfgate-replay";

/// A validated replay case, ready to serve.
pub(super) struct ReplayPlan {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    reads: Vec<(Duration, Bytes)>,
    end: Duration,
    abort: bool,
}

impl ReplayPlan {
    /// Errors: the case does not validate ([`ReplayCase::validate`], which also guarantees
    /// the status and headers converted here).
    pub(super) fn new(case: &ReplayCase) -> Result<ReplayPlan, ReplayError> {
        case.validate()?;
        let status =
            StatusCode::from_u16(case.status).map_err(|_| ReplayError::Status(case.status))?;
        let mut headers = Vec::with_capacity(case.headers.len());
        for (name, value) in &case.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ReplayError::HeaderName { name: name.clone() })?;
            if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
                continue; // the body is always chunked
            }
            let value = HeaderValue::from_str(value).map_err(|_| ReplayError::HeaderValue {
                name: name.to_string(),
            })?;
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

pub(super) async fn handle_replay(
    req: Request<Incoming>,
    arrival: Arrival,
    plan: &Arc<ReplayPlan>,
) -> Response<ResBody> {
    if req.method() == Method::POST {
        if let Err(resp) = read_body(req).await {
            return resp;
        }
        let arrival = arrival.read();
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

pub(super) struct ReplayScript {
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
