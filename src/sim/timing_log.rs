//! The simulator as a measuring instrument: when each streamed request arrived and each of its
//! events was handed to the connection, kept for the most recent requests (bounded), served as
//! `GET /sim/timings`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::time::Instant;

/// Streamed requests whose send times are kept (the oldest are forgotten first).
pub const MAX_TIMED_REQUESTS: usize = 16_384;
/// Events whose send time is kept per request (later ones are not recorded).
pub const MAX_TIMED_EVENTS: usize = 65_536;
/// Response header naming the request in `GET /sim/timings/N` (shared with the client).
pub use crate::wire::SIM_REQUEST_HEADER;

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
    /// The chat role chunk (no token); the Responses API's events before the first delta
    /// (`response.created`, `response.in_progress`, `response.output_item.added`,
    /// `response.content_part.added`).
    Role,
    /// A token-bearing chunk (the Responses API's `response.output_text.delta`).
    Token,
    /// The chunk with `finish_reason`; the Responses API's `response.output_text.done`,
    /// `response.content_part.done` and `response.output_item.done`.
    Finish,
    /// The usage-only chunk.
    Usage,
    /// `data: [DONE]`; the Responses API's last event, `response.completed` (or
    /// `response.incomplete`), which carries the usage.
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
pub(super) struct TimingLog {
    pub(super) by_request: HashMap<u64, Arc<Mutex<RequestTimings>>>,
    pub(super) order: VecDeque<u64>,
}

impl TimingLog {
    pub(super) fn start(
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
pub(super) fn unix_ms_at(at: std::time::Instant) -> f64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    now - at.elapsed().as_secs_f64() * 1000.0
}
