//! From stamped events to one [`RequestRecord`] (docs/design.md "Metrics"). Pure: the known-answer tests feed
//! it arrival times computed by hand.
//!
//! - TTFT = t_first - t0 (first token-bearing event, any channel); TTFOT = first answer event.
//! - E2E = t_last - t0; t_done = `[DONE]` / end of body.
//! - output_tokens = last usage `completion_tokens` when trustworthy (else a known vendor usage,
//!   Groq's `x_groq.usage`, under the same rules), else the number of token-bearing events
//!   (source recorded). Trustworthy: not zero, not below the token events, not above
//!   max_tokens nor [`MAX_TOKENS_PER_EVENT`] per token event.
//! - TPOT = (t_last - t_first) / (output_tokens - 1), undefined for output_tokens <= 1.
//! - ITL = every gap between token-bearing events; split evenly over the tokens an event carried
//!   when trustworthy cumulative usage arrives on every token event (vLLM #28183's approach);
//!   kept bounded ([`crate::stats::itl`]).
//! - Every token-bearing event up to `[DONE]` / end of body counts, also after a finish_reason
//!   (noted in `tokens_after_finish`); an empty or `"null"` finish_reason is no finish.
//! - Success needs >= 1 token event, no in-band error, and a normal end (a finish_reason or
//!   `[DONE]`; a connection reset after a finish_reason is still a normal end); anything else
//!   is a classified failure that keeps its partial diagnostics.

use super::dialect::{EventInfo, Usage};
use super::think::ThinkScanner;
use crate::config::scenario::Api;
use crate::record::{Failure, FailureClass, RequestRecord, StreamNote, TokenSource};

/// Tokens one token-bearing event may believably carry: a usage figure above this many per
/// event is distrusted (cumulative usage jumping 1, 2, 2^40 once asked the ITL split for 2^40
/// gaps). Generous: speculative decoding and coalesced delivery carry a few dozen at most, hidden
/// reasoning (counted in usage, never streamed) a few thousand over a handful of events.
pub const MAX_TOKENS_PER_EVENT: u64 = 8192;

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
    last_usage: Option<Usage>,
    last_vendor_usage: Option<Usage>,
    // full reasoning was streamed (reasoning fields, thinking parts, <think> text)
    reasoning_streamed: bool,
    // token events that carried only a reasoning summary
    summary_events: u64,
    // <think> tags in the answer text
    think: ThinkScanner,
    notes: Vec<StreamNote>,
    // the dialect: what ends its stream normally
    api: Api,
    vendor_prompt: Option<u64>,
    finish_seen: bool,
    after_finish: u64,
    choices_not_array: bool,
    done_at: Option<f64>,
    error: Option<String>,
    foreign: Option<Api>,
    malformed: Option<f64>,
    multi_choice: bool,
    events: u64,
}

impl Measurer {
    /// A request that started `start_ms` after the start of the run, with the end rules of
    /// chat (a finish_reason or `[DONE]` ends normally), which completions and Anthropic share.
    pub fn new(start_ms: f64) -> Measurer {
        Measurer::for_api(start_ms, Api::OpenaiChat)
    }

    /// [`Measurer::new`] for a stream of `api`: a Responses stream ends normally only with its
    /// `response.completed` / `response.incomplete`, never with a bare `[DONE]`.
    pub fn for_api(start_ms: f64, api: Api) -> Measurer {
        Measurer {
            rec: RequestRecord::new(start_ms),
            token_times: Vec::new(),
            token_usage: Vec::new(),
            first_answer: None,
            last_usage: None,
            last_vendor_usage: None,
            reasoning_streamed: false,
            summary_events: 0,
            think: ThinkScanner::default(),
            notes: Vec::new(),
            api,
            vendor_prompt: None,
            finish_seen: false,
            after_finish: 0,
            choices_not_array: false,
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
        self.choices_not_array |= i.choices_not_array;
        // Every token event counts, also after a finish_reason (some servers and proxies put
        // one on every chunk); those are noted.
        if i.token {
            if self.finish_seen {
                self.after_finish += 1;
            }
            self.token_times.push(e.at_ms);
            self.token_usage
                .push(i.usage.and_then(|u| u.completion_tokens));
            let mut reasoning = i.reasoning && !i.reasoning_summary;
            // a reasoning field or a non-text answer tells answer text apart from reasoning
            if i.reasoning || (i.answer && i.text.is_none()) {
                self.think.told_apart();
            }
            // reasoning inside the answer text, between <think> tags
            let mut answer_at = i.answer.then_some(e.at_ms);
            if let Some(text) = &i.text {
                let p = self.think.push(text, e.at_ms);
                if p.restart_answer {
                    // a closing tag never opened (MiniMax M2): the text before it was reasoning
                    self.first_answer = None;
                }
                if p.ignored_close {
                    note(&mut self.notes, StreamNote::ThinkCloseInAnswer);
                }
                reasoning |= p.reasoning;
                answer_at = p.answer_at;
            }
            self.reasoning_streamed |= reasoning;
            if i.reasoning_summary && answer_at.is_none() {
                self.summary_events += 1;
            }
            if self.first_answer.is_none() {
                self.first_answer = answer_at;
            }
        }
        if i.usage_not_integer {
            note(&mut self.notes, StreamNote::UsageNotInteger);
        }
        if let Some(u) = i.usage {
            if u.completion_tokens.is_some() {
                self.last_usage = Some(u);
            }
            if let Some(p) = u.prompt_tokens {
                rec.prompt_tokens = Some(p);
            }
        }
        if let Some(u) = i.vendor_usage {
            if u.completion_tokens.is_some() {
                self.last_vendor_usage = Some(u);
            }
            if let Some(p) = u.prompt_tokens {
                self.vendor_prompt = Some(p);
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
    pub fn finish(mut self, end: End, max_tokens: Option<u64>) -> RequestRecord {
        // text held back as a possible split tag was answer text
        if self.first_answer.is_none() {
            self.first_answer = self.think.finish().answer_at;
        }
        let Measurer {
            mut rec,
            token_times,
            token_usage,
            first_answer,
            last_usage,
            last_vendor_usage,
            reasoning_streamed,
            summary_events,
            think: _,
            notes,
            api,
            vendor_prompt,
            finish_seen,
            after_finish,
            choices_not_array,
            done_at,
            error,
            foreign,
            malformed,
            multi_choice,
            events: _,
        } = self;
        let n_events = token_times.len() as u64;
        rec.token_events = n_events;
        rec.tokens_after_finish = (after_finish > 0).then_some(after_finish);
        if rec.prompt_tokens.is_none() {
            rec.prompt_tokens = vendor_prompt;
        }
        // Token count: usage unless it is missing, zero, or smaller than the number of token events
        // (every token-bearing event carries at least one token, so such usage is wrong).
        // Usage above the request's max_tokens is impossible, so it is wrong too, and so is
        // more than MAX_TOKENS_PER_EVENT per token event.
        // What the usage says was streamed: completion_tokens, less reasoning tokens that were
        // never streamed (a hidden-reasoning model), plus them when the server counts them
        // apart (xAI) and they were streamed; a reasoning summary counts its events.
        let streamed = |u: &Usage| -> Option<(u64, Option<u64>)> {
            let c = u.completion_tokens?;
            let r = u.reasoning_tokens.unwrap_or(0);
            let included = u.reasoning_included();
            Some(match (r, reasoning_streamed) {
                (0, _) => (c, None),
                (_, true) if included => (c, None),
                (_, true) => (c.saturating_add(r), None),
                (_, false) => {
                    let visible = if included { c.saturating_sub(r) } else { c };
                    (visible.saturating_add(summary_events), Some(r))
                }
            })
        };
        let believable = |u: u64, raw: u64| {
            u >= n_events
                && u > 0
                && max_tokens.is_none_or(|m| raw <= m && u <= m)
                && u <= n_events.saturating_mul(MAX_TOKENS_PER_EVENT)
        };
        // The reasoning figure is possible: not above completion_tokens when that includes it,
        // nor above MAX_TOKENS_PER_EVENT per token event (2^64 - 1 was recorded as it came).
        let reasoning_possible = |u: &Usage| {
            u.reasoning_tokens.is_none_or(|r| {
                r <= n_events.saturating_mul(MAX_TOKENS_PER_EVENT)
                    && (!u.reasoning_included() || u.completion_tokens.is_none_or(|c| r <= c))
            })
        };
        // The standard usage wins when both it and a vendor usage came.
        let (reported, reported_source) = match (last_usage, last_vendor_usage) {
            (Some(u), _) => (Some(u), TokenSource::Usage),
            (None, Some(v)) => (Some(v), TokenSource::VendorUsage),
            (None, None) => (None, TokenSource::Usage),
        };
        let counted = reported.and_then(|u| {
            let (n, hidden) = streamed(&u)?;
            Some((
                n,
                hidden,
                u.completion_tokens.unwrap_or(n),
                reasoning_possible(&u),
            ))
        });
        let trusted =
            |&(n, _, raw, possible): &(u64, Option<u64>, u64, bool)| possible && believable(n, raw);
        let (tokens, source) = match counted {
            Some(c @ (n, hidden, _, _)) if trusted(&c) => {
                rec.hidden_reasoning_tokens = hidden;
                (n, reported_source)
            }
            _ => (n_events, TokenSource::Events),
        };
        rec.reasoning_tokens = reported
            .filter(reasoning_possible)
            .and_then(|u| u.reasoning_tokens)
            .filter(|&r| r > 0);
        rec.usage_distrusted = counted
            .filter(|c| !trusted(c) && n_events > 0)
            .map(|(_, _, raw, _)| raw);
        rec.stream_notes = notes;
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
            // split per token only on trustworthy standard usage
            let split = source == TokenSource::Usage;
            (rec.itl_ms, rec.itl_count) =
                crate::stats::itl::compress(&itl(&token_times, &token_usage, split));
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
        } else if done_at.is_none()
            && transport_failure.is_some()
            && !(finish_seen
                && n_events > 0
                && transport_failure
                    .as_ref()
                    .is_some_and(|f| f.class == FailureClass::Truncated))
        {
            // A reset after a finish_reason ends an answer that was complete: a normal end.
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
        } else if n_events == 0 && api == Api::OpenaiResponses {
            // a Responses stream has no [DONE] and no finish_reason: say what it lacked
            let how = if finish_seen {
                " (response.completed arrived without any output delta)"
            } else if done_at.is_some() {
                " ([DONE] arrived without any output delta and without response.completed, which ends a Responses stream)"
            } else {
                " (the stream ended without any output delta and without response.completed)"
            };
            Some(Failure {
                class: FailureClass::NoToken,
                status: None,
                message: format!(
                    "empty response: no output tokens{how} (no output_text, refusal, function-call arguments or reasoning delta)"
                ),
            })
        } else if n_events == 0 {
            let how = if choices_not_array {
                " (`choices` is an object, not the array the OpenAI API defines, so no choice was read)"
            } else if done_at.is_some() && !finish_seen {
                " ([DONE] arrived before any token and without a finish_reason)"
            } else if done_at.is_some() {
                " (the stream finished and sent [DONE] without a token)"
            } else if finish_seen {
                " (the stream sent a finish_reason without a token)"
            } else {
                " (stream ended without finish_reason or [DONE])"
            };
            Some(Failure {
                class: FailureClass::NoToken,
                status: None,
                message: format!(
                    "empty response: no output tokens{how} (no content, reasoning or tool-call delta)"
                ),
            })
        } else if !finish_seen && api == Api::OpenaiResponses {
            let how = if done_at.is_some() {
                "[DONE] without"
            } else {
                "without"
            };
            Some(Failure {
                class: FailureClass::Truncated,
                status: None,
                message: format!("the Responses stream ended {how} response.completed or response.incomplete (truncated) after {n_events} token events"),
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

/// Adds `n` to `notes` once.
fn note(notes: &mut Vec<StreamNote>, n: StreamNote) {
    if !notes.contains(&n) {
        notes.push(n);
    }
}

fn unreachable_failure() -> Failure {
    Failure {
        class: FailureClass::Truncated,
        status: None,
        message: "the body ended abnormally".into(),
    }
}

/// Gaps between token events as `(gap, count)`: per token (k gaps of gap/k) when `split` and
/// every token event carries increasing cumulative usage, else per event. One entry per event,
/// whatever the usage says (memory never follows a usage figure).
fn itl(times: &[f64], usage: &[Option<u64>], split: bool) -> Vec<(f64, u64)> {
    let per_token = split
        && usage.len() == times.len()
        && usage.iter().all(Option::is_some)
        && usage.windows(2).all(|w| w[1] > w[0]);
    let mut out = Vec::with_capacity(times.len().saturating_sub(1));
    for i in 1..times.len() {
        let gap = times[i] - times[i - 1];
        if per_token {
            let k = usage[i]
                .unwrap_or(1)
                .saturating_sub(usage[i - 1].unwrap_or(0))
                .max(1);
            out.push((gap / k as f64, k));
        } else {
            out.push((gap, 1));
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
                    ..Default::default()
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
                    ..Default::default()
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
                ..Default::default()
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

    fn fin(mut s: Stamped, f: &str) -> Stamped {
        s.info.finish = Some(f.into());
        s
    }
    fn usage(c: u64) -> Option<Usage> {
        Some(Usage {
            prompt_tokens: Some(9),
            completion_tokens: Some(c),
            ..Default::default()
        })
    }

    // Groq: x_groq.usage 4 on the finish chunk @40, tokens @10 20 30, [DONE] @41.
    // TPOT = (30-10)/(4-1) = 6.667; source vendor_usage; with a standard usage 5 too, it wins.
    #[test]
    fn vendor_usage_counts_under_the_same_rules_and_standard_wins() {
        let ev = |std: Option<u64>, vendor: u64| {
            vec![
                tok(10.0),
                tok(20.0),
                tok(30.0),
                other(40.0, |i| {
                    i.finish = Some("stop".into());
                    i.vendor_usage = usage(vendor);
                    i.usage = std.and_then(usage);
                }),
                other(41.0, |i| i.done = true),
            ]
        };
        let r = measure(0.0, &ev(None, 4), End::Eof(41.0), None);
        assert!(r.ok());
        assert_eq!(r.output_tokens, Some(4));
        assert_eq!(r.token_source, Some(TokenSource::VendorUsage));
        assert_eq!(r.tpot_ms, Some(20.0 / 3.0));
        assert_eq!(r.prompt_tokens, Some(9));
        let r = measure(0.0, &ev(Some(5), 4), End::Eof(41.0), None);
        assert_eq!(r.output_tokens, Some(5));
        assert_eq!(r.token_source, Some(TokenSource::Usage));
        // same trust rules: 2 < 3 token events is distrusted, events counted
        let r = measure(0.0, &ev(None, 2), End::Eof(41.0), None);
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.usage_distrusted, Some(2));
        // above max_tokens: distrusted
        let r = measure(0.0, &ev(None, 4), End::Eof(41.0), Some(3));
        assert_eq!(r.token_source, Some(TokenSource::Events));
    }

    // finish_reason "stop" on every chunk: tokens @10 20 30 all count. TPOT (30-10)/2 = 10,
    // E2E 30, 2 tokens after the finish noted. Today's code stopped at the first: 1 token.
    #[test]
    fn tokens_after_a_finish_reason_count_and_are_noted() {
        let ev = vec![
            fin(tok(10.0), "stop"),
            fin(tok(20.0), "stop"),
            fin(tok(30.0), "stop"),
            other(31.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(31.0), None);
        assert!(r.ok());
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.tpot_ms, Some(10.0));
        assert_eq!(r.e2e_ms, Some(30.0));
        assert_eq!(r.itl_ms, vec![10.0, 10.0]);
        assert_eq!(r.tokens_after_finish, Some(2));
    }

    // Cumulative usage 1, 2, 2^40 on successive token events (today: an 8 TB allocation in
    // the ITL split, exit 134). 2^40 > 3 x MAX_TOKENS_PER_EVENT: distrusted, events counted,
    // ITL per event: gaps 10, 10. A believable jump (1, 2, 30000 over 3 events) splits into
    // 30000 - 2 gaps, kept as ITL_KEEP points.
    #[test]
    fn cumulative_usage_jumps_are_bounded() {
        let with = |at: f64, c: u64| {
            let mut s = tok(at);
            s.info.usage = usage(c);
            s
        };
        let ev = vec![
            with(10.0, 1),
            with(20.0, 2),
            with(30.0, 1 << 40),
            other(31.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(31.0), None);
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.usage_distrusted, Some(1 << 40));
        assert_eq!(r.itl_ms, vec![10.0, 10.0]);
        let ev = vec![
            with(10.0, 1),
            with(20.0, 2),
            with(30.0, 20_000),
            other(31.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(31.0), None);
        assert_eq!(r.token_source, Some(TokenSource::Usage));
        assert_eq!(r.itl_ms.len(), crate::stats::itl::ITL_KEEP);
        assert_eq!(r.itl_count, Some(1 + 19_998));
        assert_eq!(r.itl_ms.last(), Some(&10.0));
    }

    // Hidden reasoning (issue 27): tokens @300 320 340 360 380, usage 60 of which 55 reasoning
    // never streamed. TPOT (380-300)/(5-1) = 20, not (380-300)/59 = 1.36; the 55 are recorded.
    // The same usage with the reasoning streamed counts all 60; xAI's usage (completion 5,
    // reasoning 55 apart: total = prompt + completion + reasoning) with reasoning streamed: 60.
    #[test]
    fn hidden_reasoning_tokens_leave_the_tpot_denominator() {
        let ev = |reasoning_event: bool, u: Usage| {
            let mut v = vec![];
            if reasoning_event {
                v.push(other(290.0, |i| {
                    i.token = true;
                    i.reasoning = true;
                }));
            }
            v.extend([300.0, 320.0, 340.0, 360.0, 380.0].map(tok));
            v.push(other(391.0, |i| {
                i.finish = Some("stop".into());
                i.usage = Some(u);
            }));
            v
        };
        let openai = Usage {
            prompt_tokens: Some(10),
            completion_tokens: Some(60),
            reasoning_tokens: Some(55),
            total_tokens: Some(70),
        };
        let r = measure(0.0, &ev(false, openai), End::Eof(392.0), None);
        assert_eq!(r.output_tokens, Some(5));
        assert_eq!(r.tpot_ms, Some(20.0));
        assert_eq!(r.hidden_reasoning_tokens, Some(55));
        assert_eq!(r.reasoning_tokens, Some(55));
        let r = measure(0.0, &ev(true, openai), End::Eof(392.0), None);
        assert_eq!(r.output_tokens, Some(60));
        assert_eq!(r.hidden_reasoning_tokens, None);
        assert_eq!(r.ttft_ms, Some(290.0));
        assert_eq!(r.ttfot_ms, Some(300.0));
        let xai = Usage {
            prompt_tokens: Some(10),
            completion_tokens: Some(5),
            reasoning_tokens: Some(55),
            total_tokens: Some(70),
        };
        let r = measure(0.0, &ev(true, xai), End::Eof(392.0), None);
        assert_eq!(r.output_tokens, Some(60));
        let r = measure(0.0, &ev(false, xai), End::Eof(392.0), None);
        assert_eq!(r.output_tokens, Some(5));
        assert_eq!(r.hidden_reasoning_tokens, Some(55));
    }

    #[test]
    fn done_before_any_token_says_so() {
        let ev = vec![other(5.0, |_| {}), other(6.0, |i| i.done = true)];
        let r = measure(0.0, &ev, End::Eof(6.0), None);
        let e = r.error.unwrap();
        assert_eq!(e.class, FailureClass::NoToken);
        assert!(
            e.message
                .contains("[DONE] arrived before any token and without a finish_reason"),
            "{}",
            e.message
        );
        let ev = vec![
            other(5.0, |i| i.choices_not_array = true),
            other(6.0, |i| i.done = true),
        ];
        let e = measure(0.0, &ev, End::Eof(6.0), None).error.unwrap();
        assert!(
            e.message.contains("`choices` is an object"),
            "{}",
            e.message
        );
    }

    // Tokens @100 120 140, finish_reason @150, then a connection reset @170 before [DONE]: the
    // answer was complete (README: a finish_reason is a normal end). TPOT (140-100)/2 = 20.
    #[test]
    fn a_reset_after_finish_reason_is_a_normal_end() {
        let ev = vec![
            tok(100.0),
            tok(120.0),
            tok(140.0),
            other(150.0, |i| i.finish = Some("stop".into())),
        ];
        let reset = Failure {
            class: FailureClass::Truncated,
            status: None,
            message: "connection reset".into(),
        };
        let r = measure(0.0, &ev, End::Failed(reset.clone(), 170.0), None);
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.tpot_ms, Some(20.0));
        assert_eq!(r.t_done_ms, Some(170.0));
        // before any finish_reason it is still truncated
        let r = measure(0.0, &ev[..3], End::Failed(reset, 170.0), None);
        assert_eq!(r.error.unwrap().class, FailureClass::Truncated);
    }

    fn text(at: f64, t: &str) -> Stamped {
        let mut s = tok(at);
        s.info.text = Some(t.into());
        s
    }
    fn with_usage(at: f64, u: Usage) -> Stamped {
        other(at, |i| {
            i.finish = Some("stop".into());
            i.usage = Some(u);
        })
    }

    // Issue 28 finding 1: answer text a1..a6 @10..60, "use </think> to close" @70, a8 @80, usage
    // 60 of which 52 hidden reasoning. The unopened </think> comes after answer text in its own
    // event: it is answer text, not MiniMax's end of reasoning, so the 52 stay hidden: 8 streamed
    // tokens, TPOT (80 - 10) / 7 = 10 (was output 60, TPOT 70 / 59 = 1.19 and TTFOT 70).
    #[test]
    fn a_think_close_in_answer_prose_does_not_cancel_hidden_reasoning() {
        let mut ev: Vec<Stamped> = (1..=6).map(|k| text(10.0 * k as f64, "a")).collect();
        ev.push(text(70.0, "use </think> to close"));
        ev.push(text(80.0, "a8"));
        ev.push(with_usage(
            90.0,
            Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(60),
                reasoning_tokens: Some(52),
                total_tokens: Some(70),
            },
        ));
        let r = measure(0.0, &ev, End::Eof(91.0), None);
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.output_tokens, Some(8));
        assert_eq!(r.hidden_reasoning_tokens, Some(52));
        assert_eq!(r.tpot_ms, Some(10.0));
        assert_eq!(r.ttfot_ms, None);
        assert_eq!(r.stream_notes, vec![StreamNote::ThinkCloseInAnswer]);
        // MiniMax's own shape (the tag starts its event) still ends the reasoning: TTFOT 70
        ev[6] = text(70.0, "</think>\n\nHello");
        let r = measure(0.0, &ev, End::Eof(91.0), None);
        assert_eq!(r.ttfot_ms, Some(70.0));
        assert_eq!(r.output_tokens, Some(60));
        assert!(r.stream_notes.is_empty());
    }

    // Issue 28 finding 4: "<thi" @100 "nk>hm" @120 "</think>" @140 "Hi" @160 " there" @180: the
    // split tag opens reasoning, TTFOT 160 (was 100 = TTFT, so none); 5 events, TPOT 80 / 4 = 20.
    #[test]
    fn a_think_tag_split_over_events_is_read() {
        let ev = vec![
            text(100.0, "<thi"),
            text(120.0, "nk>hm"),
            text(140.0, "</think>"),
            text(160.0, "Hi"),
            text(180.0, " there"),
            other(190.0, |i| i.finish = Some("stop".into())),
        ];
        let r = measure(0.0, &ev, End::Eof(191.0), None);
        assert!(r.ok(), "{:?}", r.error);
        assert_eq!(r.ttft_ms, Some(100.0));
        assert_eq!(r.ttfot_ms, Some(160.0));
        assert_eq!(r.tpot_ms, Some(20.0));
        // "a <" then "b": not a tag, answer text from the first event
        let ev = vec![
            text(100.0, "<"),
            text(120.0, "b"),
            other(130.0, |i| i.done = true),
        ];
        let r = measure(0.0, &ev, End::Eof(130.0), None);
        assert_eq!((r.ttft_ms, r.ttfot_ms), (Some(100.0), None));
    }

    // Issue 28 finding 6: reasoning_tokens above completion_tokens (which includes them) is
    // impossible usage: distrusted like other impossible counts, events counted; 2^64 - 1 is not
    // recorded; an output count that is not a whole number is noted.
    #[test]
    fn impossible_reasoning_counts_are_distrusted() {
        let ev = |r: u64| {
            vec![
                other(5.0, |i| {
                    i.token = true;
                    i.reasoning = true;
                }),
                tok(10.0),
                tok(20.0),
                with_usage(
                    30.0,
                    Usage {
                        prompt_tokens: Some(5),
                        completion_tokens: Some(6),
                        reasoning_tokens: Some(r),
                        total_tokens: None,
                    },
                ),
            ]
        };
        let r = measure(0.0, &ev(20), End::Eof(31.0), None);
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.usage_distrusted, Some(6));
        assert_eq!(r.reasoning_tokens, None);
        let r = measure(0.0, &ev(u64::MAX), End::Eof(31.0), None);
        assert_eq!(r.reasoning_tokens, None);
        assert_eq!(r.usage_distrusted, Some(6));
        // a possible one is kept
        let r = measure(0.0, &ev(2), End::Eof(31.0), None);
        assert_eq!(r.reasoning_tokens, Some(2));
        assert_eq!(r.output_tokens, Some(6));
        let mut bad = ev(2);
        bad[3] = other(30.0, |i| {
            i.finish = Some("stop".into());
            i.usage_not_integer = true;
        });
        let r = measure(0.0, &bad, End::Eof(31.0), None);
        assert_eq!(r.token_source, Some(TokenSource::Events));
        assert_eq!(r.stream_notes, vec![StreamNote::UsageNotInteger]);
    }

    // Issue 28 finding 8: a Responses stream ends normally only with response.completed /
    // response.incomplete (a finish): a bare [DONE] after tokens is a truncation, and an empty
    // one says what it lacked, not "[DONE]".
    #[test]
    fn a_responses_stream_needs_its_completion_event() {
        let run = |ev: &[Stamped]| {
            let mut m = Measurer::for_api(0.0, Api::OpenaiResponses);
            for e in ev {
                m.push(e);
            }
            m.finish(End::Eof(50.0), None)
        };
        let done = other(40.0, |i| i.done = true);
        let r = run(&[tok(10.0), tok(20.0), done.clone()]);
        let e = r.error.unwrap();
        assert_eq!(e.class, FailureClass::Truncated);
        assert!(
            e.message.contains("without response.completed"),
            "{}",
            e.message
        );
        // the same stream is a success in chat ([DONE] ends it)
        assert!(measure(
            0.0,
            &[tok(10.0), tok(20.0), done.clone()],
            End::Eof(50.0),
            None
        )
        .ok());
        let e = run(&[done]).error.unwrap();
        assert_eq!(e.class, FailureClass::NoToken);
        assert!(
            e.message.contains("without response.completed"),
            "{}",
            e.message
        );
        let completed = other(40.0, |i| {
            i.finish = Some("completed".into());
            i.done = true;
        });
        let e = run(std::slice::from_ref(&completed)).error.unwrap();
        assert!(
            e.message
                .contains("response.completed arrived without any output delta"),
            "{}",
            e.message
        );
        assert!(run(&[tok(10.0), completed]).ok());
    }
}
