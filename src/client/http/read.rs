//! Reading response bodies against their deadlines: the stream's read loop (each chunk folded
//! into the measurement as it arrives), the prefix of an error body, and draining a body so its
//! connection returns to the pool.

use super::errors::root_cause;
use super::ms;
use crate::client::deadline::{self, Deadlines};
use crate::client::measure::End;
use crate::client::stream::{BodyFold, Step};
use crate::record::{Failure, FailureClass};
use std::time::Instant;
use tokio::time::timeout_at;

/// When the body's timer fires: the deadline in force now (the idle deadline follows the last
/// event), or the stream's timeout when that has passed too.
pub(super) fn next_deadline(
    dl: &Deadlines,
    fold: &BodyFold,
    last_event: Instant,
    t0: Instant,
) -> Result<Instant, End> {
    let (deadline, limit) = dl.next_chunk(fold.got_token(), last_event);
    let now = Instant::now();
    if now >= deadline {
        return Err(End::Failed(
            deadline::stream_timeout(limit, dl.timeouts()),
            ms(now - t0),
        ));
    }
    Ok(deadline)
}

/// Reads the body into `fold` until it ends, a limit is hit or the transport fails; returns how
/// it ended (times in ms after `t0`).
///
/// One timer for the whole body, not one per read: the deadline only moves later (the idle
/// deadline follows the last event, the first-token deadline is never after the request's), so
/// the timer is left at the deadline it was set to and, when it fires, set again to the deadline
/// in force then, or the stream times out. A read costs no timer registration.
pub(super) async fn read_body(
    resp: &mut reqwest::Response,
    fold: &mut BodyFold,
    dl: &Deadlines,
    t0: Instant,
) -> End {
    let mut last_event = t0;
    let timer = tokio::time::sleep_until(dl.next_chunk(false, t0).0.into());
    tokio::pin!(timer);
    loop {
        let read = tokio::select! {
            biased;
            read = resp.chunk() => read,
            () = &mut timer => match next_deadline(dl, fold, last_event, t0) {
                Ok(next) => { timer.as_mut().reset(next.into()); continue; }
                Err(timed_out) => return timed_out,
            }
        };
        let chunk = match read {
            Err(e) => {
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
            Ok(None) => return End::Eof(ms(Instant::now() - t0)),
            Ok(Some(bytes)) => bytes,
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

pub(super) async fn read_prefix(
    mut resp: reqwest::Response,
    limit: usize,
    deadline: Instant,
) -> String {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match timeout_at(deadline.into(), resp.chunk()).await {
            Ok(Ok(Some(c))) => buf.extend_from_slice(&c[..c.len().min(limit - buf.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Reads and discards the rest of a body, at most about `limit` bytes, until `deadline`; true
/// when the body ended (its connection then returns to the pool).
pub(super) async fn drain(resp: &mut reqwest::Response, limit: usize, deadline: Instant) -> bool {
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
