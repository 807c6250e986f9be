//! The timed body: writes each step's bytes as one HTTP chunk at its instant (or ends or drops
//! the connection there), and the time helpers behind the schedule.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use super::http_util::BoxError;
use super::timing_log::{EventKind, RequestTimings, MAX_TIMED_EVENTS};
use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::time::{Instant, Sleep};

/// One step of a response body.
pub(super) enum Step {
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
pub(super) trait Script: Send + Unpin + 'static {
    fn next_step(&mut self) -> Step;
    /// The kind of the step `next_step` returned last (for the timing record).
    fn last_kind(&self) -> EventKind {
        EventKind::Token
    }
}

pub(super) struct TimedBody<S> {
    pub(super) script: S,
    pub(super) pending: Option<Step>,
    pub(super) sleep: Pin<Box<Sleep>>,
    /// Abort was reached and one `Pending` has been returned, so hyper flushed what it had.
    pub(super) abort_flushed: bool,
    pub(super) done: bool,
    /// Where to record each data frame's send time (simulator streams only).
    pub(super) record: Option<Arc<Mutex<RequestTimings>>>,
}

impl<S: Script> TimedBody<S> {
    pub(super) fn new(script: S, arrival: Instant) -> TimedBody<S> {
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
pub(super) struct ReplayAbort;

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

/// `ms` milliseconds as a Duration (negative or NaN -> 0, too large -> one year).
pub(super) fn ms(ms: f64) -> Duration {
    if ms.is_nan() || ms <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::from_secs(365 * 86_400))
}

/// `arrival + offset`, saturating far in the future instead of overflowing.
pub(super) fn at(arrival: Instant, offset: Duration) -> Instant {
    arrival
        .checked_add(offset)
        .or_else(|| arrival.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(arrival)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_never_panics() {
        assert_eq!(ms(-1.0), Duration::ZERO);
        assert_eq!(ms(f64::NAN), Duration::ZERO);
        assert_eq!(ms(f64::INFINITY), Duration::from_secs(365 * 86_400));
        assert_eq!(ms(1.5), Duration::from_micros(1500));
    }
}
