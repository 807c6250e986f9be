//! A streamed request's three time limits (`endpoint.first_token_timeout`, `idle_timeout`,
//! `request_timeout`): which one ends each wait of the request, and the failure it makes when it
//! does. Pure: instants in, an instant and a [`Limit`] out.

use crate::record::{Failure, FailureClass};
use std::time::{Duration, Instant};

/// The endpoint's limits on one streamed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From the send to the first token (response headers included).
    pub first_token: Duration,
    /// Between two events once the stream has begun (keep-alive comments do not count).
    pub idle: Duration,
    /// From the send to the end of the body.
    pub request: Duration,
}

/// The limit that ends a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `request_timeout` (also when it falls at the same instant as another limit).
    Request,
    /// `first_token_timeout`.
    FirstToken,
    /// `idle_timeout`.
    Idle,
}

/// A request's limits as instants, from its send time.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    timeouts: Timeouts,
    request: Instant,
    /// The first-token deadline, never after the request deadline.
    first_token: Instant,
}

impl Deadlines {
    /// The deadlines of a request sent at `t0`.
    pub fn start(t0: Instant, timeouts: Timeouts) -> Deadlines {
        let request = t0 + timeouts.request;
        Deadlines {
            timeouts,
            request,
            first_token: (t0 + timeouts.first_token).min(request),
        }
    }

    /// The limits themselves (for the failure messages).
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The first-token deadline (never after the request deadline).
    pub fn first_token(&self) -> Instant {
        self.first_token
    }

    /// Waiting for the response headers: until the first-token deadline.
    pub fn headers(&self) -> (Instant, Limit) {
        (self.first_token, self.which_first_token())
    }

    /// Waiting for the next piece of the body, the last event having arrived at `last_event`:
    /// before the first token, the first-token or the idle deadline, whichever comes first;
    /// after it, the idle or the request deadline. A tie goes to the request deadline, then to
    /// the first-token deadline.
    pub fn next_chunk(&self, got_token: bool, last_event: Instant) -> (Instant, Limit) {
        let idle = last_event + self.timeouts.idle;
        if got_token {
            if self.request <= idle {
                (self.request, Limit::Request)
            } else {
                (idle, Limit::Idle)
            }
        } else if self.first_token <= idle {
            (self.first_token, self.which_first_token())
        } else {
            (idle, Limit::Idle)
        }
    }

    /// The first-token deadline is the request deadline when `first_token_timeout` is not
    /// shorter: it is reported as such.
    fn which_first_token(&self) -> Limit {
        if self.first_token == self.request {
            Limit::Request
        } else {
            Limit::FirstToken
        }
    }
}

impl Limit {
    /// The limit's setting and value: `first_token_timeout (1m)`.
    fn setting(self, t: Timeouts) -> String {
        let (name, d) = match self {
            Limit::Request => ("request_timeout", t.request),
            Limit::FirstToken => ("first_token_timeout", t.first_token),
            Limit::Idle => ("idle_timeout", t.idle),
        };
        format!("{name} ({})", humantime::format_duration(d))
    }

    /// The failure of a request this limit ended.
    fn failure(self, message: String) -> Failure {
        let class = match self {
            Limit::Request => FailureClass::TimeoutRequest,
            Limit::FirstToken => FailureClass::TimeoutFirstToken,
            Limit::Idle => FailureClass::TimeoutIdle,
        };
        Failure {
            class,
            status: None,
            message,
        }
    }
}

/// The failure of a request whose response headers did not come before `limit` (the wait for
/// the headers is the first-token one: an idle limit there counts as it).
pub fn headers_timeout(limit: Limit, t: Timeouts) -> Failure {
    let (limit, what) = match limit {
        Limit::FirstToken | Limit::Idle => (Limit::FirstToken, "no response headers"),
        Limit::Request => (Limit::Request, "no response"),
    };
    limit.failure(format!("{what} within {}", limit.setting(t)))
}

/// The failure of a stream whose next piece did not come before `limit`.
pub fn stream_timeout(limit: Limit, t: Timeouts) -> Failure {
    let setting = limit.setting(t);
    limit.failure(match limit {
        Limit::Request => format!("{setting} reached"),
        Limit::FirstToken => format!("no token within {setting}"),
        Limit::Idle => format!("no event for {setting} (keep-alive comments do not count)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn limits(first: u64, idle: u64, request: u64) -> Timeouts {
        Timeouts {
            first_token: S(first),
            idle: S(idle),
            request: S(request),
        }
    }

    #[test]
    fn headers_wait_for_the_first_token_deadline() {
        let t0 = Instant::now();
        let d = Deadlines::start(t0, limits(60, 30, 600));
        assert_eq!(d.headers(), (t0 + S(60), Limit::FirstToken));
        // first_token_timeout longer than request_timeout: the request deadline, named as such.
        let d = Deadlines::start(t0, limits(700, 30, 600));
        assert_eq!(d.headers(), (t0 + S(600), Limit::Request));
        let d = Deadlines::start(t0, limits(600, 30, 600));
        assert_eq!(d.headers(), (t0 + S(600), Limit::Request));
    }

    #[test]
    fn before_the_first_token_the_earlier_of_first_token_and_idle() {
        let t0 = Instant::now();
        let d = Deadlines::start(t0, limits(60, 30, 600));
        // headers at 0 s, nothing since: idle (30 s) ends the wait before first_token (60 s)
        assert_eq!(d.next_chunk(false, t0), (t0 + S(30), Limit::Idle));
        // a role chunk at 50 s: idle would end at 80 s, first_token at 60 s
        assert_eq!(
            d.next_chunk(false, t0 + S(50)),
            (t0 + S(60), Limit::FirstToken)
        );
        // a tie at 60 s goes to first_token
        assert_eq!(
            d.next_chunk(false, t0 + S(30)),
            (t0 + S(60), Limit::FirstToken)
        );
    }

    #[test]
    fn after_the_first_token_the_earlier_of_idle_and_request() {
        let t0 = Instant::now();
        let d = Deadlines::start(t0, limits(60, 30, 600));
        assert_eq!(d.next_chunk(true, t0 + S(100)), (t0 + S(130), Limit::Idle));
        assert_eq!(
            d.next_chunk(true, t0 + S(590)),
            (t0 + S(600), Limit::Request)
        );
        // a tie at 600 s goes to the request deadline
        assert_eq!(
            d.next_chunk(true, t0 + S(570)),
            (t0 + S(600), Limit::Request)
        );
        // first_token_timeout does not apply any more once a token came
        let d = Deadlines::start(t0, limits(1, 30, 600));
        assert_eq!(d.next_chunk(true, t0 + S(10)), (t0 + S(40), Limit::Idle));
    }

    #[test]
    fn each_limit_makes_its_own_failure() {
        let t = limits(60, 30, 600);
        let f = headers_timeout(Limit::FirstToken, t);
        assert_eq!(f.class, FailureClass::TimeoutFirstToken);
        assert_eq!(
            f.message,
            "no response headers within first_token_timeout (1m)"
        );
        let f = headers_timeout(Limit::Request, t);
        assert_eq!(f.class, FailureClass::TimeoutRequest);
        assert_eq!(f.message, "no response within request_timeout (10m)");
        let f = stream_timeout(Limit::Idle, t);
        assert_eq!(f.class, FailureClass::TimeoutIdle);
        assert_eq!(
            f.message,
            "no event for idle_timeout (30s) (keep-alive comments do not count)"
        );
        assert_eq!(
            stream_timeout(Limit::Request, t).message,
            "request_timeout (10m) reached"
        );
        assert_eq!(
            stream_timeout(Limit::FirstToken, t).message,
            "no token within first_token_timeout (1m)"
        );
    }
}
