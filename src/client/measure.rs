//! From stamped events to one [`RequestRecord`] (docs/design.md "Metrics"). Pure: the known-answer tests feed
//! it arrival times computed by hand.
//!
//! - TTFT = t_first - t0 (first token-bearing event, any channel); TTFOT = first answer event.
//! - E2E = t_last - t0; t_done = `[DONE]` / end of body.
//! - output_tokens = last usage `completion_tokens` when trustworthy, else the number of
//!   token-bearing events (source recorded).
//! - TPOT = (t_last - t_first) / (output_tokens - 1), undefined for output_tokens <= 1.
//! - ITL = every gap between token-bearing events; split evenly over the tokens an event carried
//!   when cumulative usage arrives on every token event (vLLM #28183's approach).
//! - Success needs >= 1 token event, no in-band error, and a normal end (a finish_reason or
//!   `[DONE]`); anything else is a classified failure that keeps its partial diagnostics.

use super::dialect::EventInfo;
use crate::record::{Failure, FailureClass, RequestRecord, TokenSource};

/// One interpreted event and when it arrived, ms after t0.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped {
    /// Arrival of the read that completed the event, ms after t0.
    pub at_ms: f64,
    /// Its meaning.
    pub info: EventInfo,
}

/// How the response body ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The body ended cleanly (EOF) at this time, ms after t0 (`[DONE]` is seen as an event).
    Eof(f64),
    /// The transport failed or a limit was hit (timeout, reset, size): the failure, and when.
    Failed(Failure, f64),
}

/// Builds the record for a request whose response was a 2xx SSE stream.
/// `start_ms` is the request's start offset within the run.
///
/// `max_tokens` (the request's limit) bounds a believable usage figure: usage above it is
/// distrusted and the events are counted instead. Equivalent to feeding every event to a
/// [`Measurer`] and finishing it.
pub fn measure(
    start_ms: f64,
    events: &[Stamped],
    end: End,
    max_tokens: Option<u64>,
) -> RequestRecord {
    let mut m = Measurer::new(start_ms);
    for e in events {
        m.push(e);
    }
    m.finish(end, max_tokens)
}

/// [`measure`] one event at a time, as the events arrive: it keeps only what the record needs
/// (each token event's time, 8 bytes, and its cumulative usage, 16 bytes), so a long stream's
/// events are never held in memory (1,024 streams of 4,096 tokens: ~100 MB less).
#[derive(Debug, Clone)]
pub struct Measurer {
    rec: RequestRecord,
    token_times: Vec<f64>,
    // cumulative completion_tokens carried by each token event, when present
    token_usage: Vec<Option<u64>>,
    first_answer: Option<f64>,
    last_usage: Option<u64>,
    finish_seen: bool,
    done_at: Option<f64>,
    error: Option<String>,
    foreign: Option<&'static str>,
    malformed: Option<f64>,
    multi_choice: bool,
    events: u64,
}

impl Measurer {
    /// A request that started `start_ms` after the start of the run.
    pub fn new(start_ms: f64) -> Measurer {
        Measurer {
            rec: RequestRecord::new(start_ms),
            token_times: Vec::new(),
            token_usage: Vec::new(),
            first_answer: None,
            last_usage: None,
            finish_seen: false,
            done_at: None,
            error: None,
            foreign: None,
            malformed: None,
            multi_choice: false,
            events: 0,
        }
    }

    /// Events pushed so far (all kinds).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Takes one event, in arrival order. Events after `[DONE]` are ignored.
    pub fn push(&mut self, e: &Stamped) {
        self.events += 1;
        if self.done_at.is_some() {
            return; // nothing after [DONE] counts
        }
        let rec = &mut self.rec;
        let i = &e.info;
        if rec.response_id.is_none() {
            rec.response_id = i.id.clone();
        }
        if i.malformed && self.malformed.is_none() {
            self.malformed = Some(e.at_ms);
        }
        self.multi_choice |= i.multi_choice;
        // Token events after a finish_reason are not part of this answer (n = 1).
        if i.token && !self.finish_seen {
            self.token_times.push(e.at_ms);
            self.token_usage
                .push(i.usage.and_then(|u| u.completion_tokens));
            if i.answer && self.first_answer.is_none() {
                self.first_answer = Some(e.at_ms);
            }
        }
        if let Some(u) = i.usage {
            if let Some(c) = u.completion_tokens {
                self.last_usage = Some(c);
            }
            if let Some(p) = u.prompt_tokens {
                rec.prompt_tokens = Some(p);
            }
        }
        if i.timings.is_some() {
            rec.server_timings = i.timings.clone();
        }
        if i.finish.is_some() {
            self.finish_seen = true;
        }
        self.foreign = self.foreign.or(i.foreign_api);
        if let Some(msg) = &i.error {
            if self.error.is_none() {
                self.error = Some(msg.clone());
            }
        }
        if i.done {
            self.done_at = Some(e.at_ms);
        }
    }

    /// The record, given how the body ended (see [`measure`]).
    pub fn finish(self, end: End, max_tokens: Option<u64>) -> RequestRecord {
        let Measurer {
            mut rec,
            token_times,
            token_usage,
            first_answer,
            last_usage,
            finish_seen,
            done_at,
            error,
            foreign,
            malformed,
            multi_choice,
            events: _,
        } = self;
        let n_events = token_times.len() as u64;
        rec.token_events = n_events;
        // Token count: usage unless it is missing, zero, or smaller than the number of token events
        // (every token-bearing event carries at least one token, so such usage is wrong).
        // Usage above the request's max_tokens is impossible, so it is wrong too.
        let believable = |u: u64| u >= n_events && u > 0 && max_tokens.is_none_or(|m| u <= m);
        let (tokens, source) = match last_usage {
            Some(u) if believable(u) => (u, TokenSource::Usage),
            _ => (n_events, TokenSource::Events),
        };
        rec.usage_distrusted = last_usage.filter(|&u| !believable(u) && n_events > 0);
        if let (Some(&first), Some(&last)) = (token_times.first(), token_times.last()) {
            rec.ttft_ms = Some(first);
            rec.e2e_ms = Some(last);
            rec.output_tokens = Some(tokens);
            rec.token_source = Some(source);
            if let Some(a) = first_answer {
                if a != first {
                    rec.ttfot_ms = Some(a);
                }
            }
            if tokens > 1 {
                rec.tpot_ms = Some((last - first) / (tokens - 1) as f64);
            }
            rec.itl_ms = itl(&token_times, &token_usage);
        }
        let (end_ms, transport_failure) = match end {
            End::Eof(t) => (t, None),
            End::Failed(f, t) => (t, Some(f)),
        };
        rec.t_done_ms = Some(done_at.unwrap_or(end_ms));
        rec.error = if multi_choice {
            Some(Failure {
            class: FailureClass::Unsupported,
            status: None,
            message: "the stream carries several choices (n > 1), which perfgate does not measure; remove `n` from request.extra_body".into(),
        })
        } else if let Some(at) = malformed {
            Some(Failure {
            class: FailureClass::MalformedEvent,
            status: None,
            message: format!(
                "an event at {at:.0} ms is not valid JSON, so its tokens cannot be counted (the server sent a broken or non-standard chunk)"
            ),
        })
        } else if let Some(msg) = error {
            Some(Failure {
                class: FailureClass::InBandError,
                status: None,
                message: format!("in-band error in a 200 stream: {msg}"),
            })
        } else if done_at.is_none() && transport_failure.is_some() {
            let mut f = transport_failure.unwrap_or_else(unreachable_failure);
            if f.class == FailureClass::Truncated {
                f.message = format!("{} after {} token events", f.message, n_events);
            }
            Some(f)
        } else if let (0, Some(api)) = (n_events, foreign) {
            Some(Failure {
            class: FailureClass::NotSse,
            status: None,
            message: format!(
                "protocol mismatch: the stream looks like {api}, not the configured API; set endpoint.api: {api}"
            ),
        })
        } else if n_events == 0 {
            Some(Failure {
                class: FailureClass::NoToken,
                status: None,
                message: format!(
                    "empty response: no output tokens{} (no content, reasoning or tool-call delta)",
                    if finish_seen {
                        ""
                    } else {
                        " (stream ended without finish_reason)"
                    }
                ),
            })
        } else if !finish_seen && done_at.is_none() {
            Some(Failure {
            class: FailureClass::Truncated,
            status: None,
            message: format!("stream ended without finish_reason or [DONE] (truncated) after {n_events} token events"),
        })
        } else {
            None
        };
        rec
    }
}

fn unreachable_failure() -> Failure {
    Failure {
        class: FailureClass::Truncated,
        status: None,
        message: "the body ended abnormally".into(),
    }
}

/// Gaps between token events; per token when every token event carries cumulative usage.
fn itl(times: &[f64], usage: &[Option<u64>]) -> Vec<f64> {
    let per_token = usage.len() == times.len() && usage.iter().all(Option::is_some) && {
        let u: Vec<u64> = usage.iter().flatten().copied().collect();
        u.windows(2).all(|w| w[1] > w[0])
    };
    let mut out = Vec::new();
    for i in 1..times.len() {
        let gap = times[i] - times[i - 1];
        if per_token {
            let k = usage[i]
                .unwrap_or(1)
                .saturating_sub(usage[i - 1].unwrap_or(0))
                .max(1);
            out.extend(std::iter::repeat_n(gap / k as f64, k as usize));
        } else {
            out.push(gap);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::dialect::Usage;

    fn tok(at: f64) -> Stamped {
        Stamped {
            at_ms: at,
            info: EventInfo {
                token: true,
                answer: true,
                ..Default::default()
            },
        }
    }
    fn other(at: f64, f: impl FnOnce(&mut EventInfo)) -> Stamped {
        let mut info = EventInfo::default();
        f(&mut info);
        Stamped { at_ms: at, info }
    }

    // Case 03 (role-only first chunk): role @5, tokens @214 234 254 274, finish @294, [DONE] @295.
    // TTFT 214; 4 tokens (events); TPOT (274-214)/3 = 20; ITL [20,20,20]; E2E 274; t_done 295.
    #[test]
    fn known_answer_role_only_first_chunk() {
        let ev = vec![
            other(5.0, |_| {}),
            tok(214.0),
            tok(234.0),
            tok(254.0),
            tok(274.0),
            other(294.0, |i| i.finish = Some("stop".into())),
            other(295.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(296.0), None);
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.ttft_ms, Some(214.0));
        assert_eq!(r.output_tokens, Some(4));
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.tpot_ms, Some(20.0));
        assert_eq!(r.itl_ms, vec![20.0, 20.0, 20.0]);
        assert_eq!(r.e2e_ms, Some(274.0));
        assert_eq!(r.t_done_ms, Some(295.0));
    }

    // Case 05: tokens @150 170 190 210, usage 6 @260, [DONE] @261 -> TPOT (210-150)/5 = 12.
    #[test]
    fn known_answer_usage_chunk() {
        let ev = vec![
            other(120.0, |_| {}),
            tok(150.0),
            tok(170.0),
            tok(190.0),
            tok(210.0),
            other(230.0, |i| i.finish = Some("stop".into())),
            other(260.0, |i| {
                i.usage = Some(Usage {
                    prompt_tokens: Some(20),
                    completion_tokens: Some(6),
                })
            }),
            other(261.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(261.0), None);
        assert!(r.ok());
        assert_eq!(r.output_tokens, Some(6));
        assert_eq!(r.token_source, Some(TokenSource::Usage));
        assert_eq!(r.tpot_ms, Some(12.0));
        assert_eq!(r.e2e_ms, Some(210.0));
        assert_eq!(r.t_done_ms, Some(261.0));
        assert_eq!(r.prompt_tokens, Some(20));
    }

    #[test]
    fn zero_usage_is_distrusted() {
        let ev = vec![
            tok(10.0),
            tok(20.0),
            other(30.0, |i| {
                i.finish = Some("stop".into());
                i.usage = Some(Usage {
                    prompt_tokens: Some(0),
                    completion_tokens: Some(0),
                })
            }),
        ];
        let r = measure(0.0, &ev, End::Eof(31.0), None);
        assert_eq!(r.output_tokens, Some(2));
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.tpot_ms, Some(10.0));
        assert_eq!(r.usage_distrusted, Some(0));
    }

    #[test]
    fn per_token_itl_with_cumulative_usage() {
        let with = |at: f64, c: u64| {
            let mut s = tok(at);
            s.info.usage = Some(Usage {
                prompt_tokens: None,
                completion_tokens: Some(c),
            });
            s
        };
        let ev = vec![
            with(100.0, 1),
            with(130.0, 4),
            with(140.0, 5),
            other(141.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(141.0), None);
        assert_eq!(r.itl_ms, vec![10.0, 10.0, 10.0, 10.0]);
        assert_eq!(r.output_tokens, Some(5));
        assert_eq!(r.tpot_ms, Some(10.0));
    }

    #[test]
    fn failures_are_classified() {
        let err = vec![
            tok(540.0),
            other(2500.0, |i| i.error = Some("Provider disconnected".into())),
        ];
        let r = measure(0.0, &err, End::Eof(2501.0), None);
        assert_eq!(r.error.as_ref().unwrap().class, FailureClass::InBandError);
        assert!(r.error.unwrap().message.contains("Provider disconnected"));
        let none = vec![
            other(5.0, |i| i.finish = Some("stop".into())),
            other(6.0, |i| i.done = true),
        ];
        assert_eq!(
            measure(0.0, &none, End::Eof(6.0), None)
                .error
                .unwrap()
                .class,
            FailureClass::NoToken
        );
        let cut = vec![tok(100.0), tok(120.0)];
        let r = measure(0.0, &cut, End::Eof(170.0), None);
        assert_eq!(r.error.unwrap().class, FailureClass::Truncated);
        let finished_no_done = vec![
            tok(100.0),
            tok(120.0),
            tok(140.0),
            other(150.0, |i| i.finish = Some("stop".into())),
        ];
        let r = measure(0.0, &finished_no_done, End::Eof(170.0), None);
        assert!(r.ok());
        assert_eq!(r.t_done_ms, Some(170.0));
        assert_eq!(r.tpot_ms, Some(20.0));
    }
}
