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
//! - cached_tokens = the prompt tokens the server reported as served from its prefix cache, from
//!   the most trusted place it used (usage > vendor usage > server timings; the latest from that
//!   place), unless above the prompt tokens that include it (then none, noted).
//! - ITL = every gap between token-bearing events; split evenly over the tokens an event carried
//!   when trustworthy cumulative usage arrives on every token event (vLLM #28183's approach);
//!   kept bounded ([`crate::stats::itl`]).
//! - Every token-bearing event up to `[DONE]` / end of body counts, also after a finish_reason
//!   (noted in `tokens_after_finish`); an empty or `"null"` finish_reason is no finish.
//! - Success needs >= 1 token event, no in-band error, and a normal end (a finish_reason or
//!   `[DONE]`; a connection reset after a finish_reason is still a normal end); anything else
//!   is a classified failure that keeps its partial diagnostics. A normal end of an answer the
//!   provider stopped on purpose (a refusal, a content filter) is a stop: its `error` has a stop
//!   class ([`FailureClass::is_stop`]), its figures are kept, it is in no latency sample.

use super::chunk::ChatChunk;
use super::dialect::{clip, Cached, EventInfo, Usage};
use super::think::ThinkScanner;
use crate::api::StreamEnd;
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
    // the cached prompt tokens from the most trusted place reported so far
    cached: Option<Cached>,
    finish_seen: bool,
    after_finish: u64,
    choices_not_array: bool,
    done_at: Option<f64>,
    error: Option<String>,
    stopped: Option<Failure>,
    foreign: Option<Api>,
    malformed: Option<f64>,
    multi_choice: bool,
    events: u64,
    // the answer text, bounded (hash, length, first characters)
    output: crate::output_text::OutputBuilder,
    // the request asked for structured output or tool calls: what the stream answered
    structured: Option<crate::structured::Collector>,
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
            cached: None,
            finish_seen: false,
            after_finish: 0,
            choices_not_array: false,
            done_at: None,
            error: None,
            stopped: None,
            foreign: None,
            malformed: None,
            multi_choice: false,
            events: 0,
            output: crate::output_text::OutputBuilder::default(),
            structured: None,
        }
    }

    /// Collects the answer (text, tool calls) of a request that asked for structured output or
    /// tool calls, whose record then says whether it parsed (`RequestRecord::structured`).
    pub fn expect_structured(&mut self, e: crate::structured::Expect) {
        self.structured = Some(crate::structured::Collector::new(e));
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
        let i = &e.info;
        if self.rec.response_id.is_none() {
            self.rec.response_id = i.id.clone();
        }
        if i.malformed && self.malformed.is_none() {
            self.malformed = Some(e.at_ms);
        }
        self.multi_choice |= i.multi_choice;
        self.choices_not_array |= i.choices_not_array;
        // A whole chat completion after the token events recaps the answer (docs/servers.md):
        // not one more token event (which moved E2E to it and made TPOT and ITL count it), and
        // its usage only when the stream gave none.
        let recap = i.whole && !self.token_times.is_empty();
        // Every token event counts, also after a finish_reason (some servers and proxies put
        // one on every chunk); those are noted.
        if let (true, false, Some(t)) = (i.token, recap, i.completion_text.as_deref()) {
            self.output.push(t);
        }
        if i.token && !recap {
            self.token(
                e.at_ms,
                Channels {
                    answer: i.answer,
                    reasoning: i.reasoning,
                    summary: i.reasoning_summary,
                },
                i.text.as_deref(),
                i.usage.and_then(|u| u.completion_tokens),
            );
        }
        if i.usage_not_integer {
            note(&mut self.notes, StreamNote::UsageNotInteger);
        }
        if let Some(u) = i.usage {
            if u.completion_tokens.is_some() && !(recap && self.last_usage.is_some()) {
                self.last_usage = Some(u);
            }
            if let Some(p) = u
                .prompt_tokens
                .filter(|_| !recap || self.rec.prompt_tokens.is_none())
            {
                self.rec.prompt_tokens = Some(p);
            }
        }
        if let Some(u) = i.vendor_usage {
            if u.completion_tokens.is_some() && !(recap && self.last_vendor_usage.is_some()) {
                self.last_vendor_usage = Some(u);
            }
            if let Some(p) = u
                .prompt_tokens
                .filter(|_| !recap || self.vendor_prompt.is_none())
            {
                self.vendor_prompt = Some(p);
            }
        }
        if let Some(c) = i.cached {
            // a more trusted place wins; from the same place, the latest
            if self
                .cached
                .is_none_or(|old| c.source.precedence() >= old.source.precedence())
            {
                self.cached = Some(c);
            }
        }
        if let Some(c) = &mut self.structured {
            for d in &i.tool_calls {
                c.push_tool(d);
            }
        }
        if let Some(t) = &i.timings {
            self.rec.draft = crate::speculative::Drafts::from_timings(t);
            self.rec.server_timings = Some(t.clone());
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
        if self.stopped.is_none() {
            self.stopped = i.stopped.clone();
        }
        if i.done {
            self.done_at = Some(e.at_ms);
        }
    }

    /// [`Measurer::push`] for a plain chat chunk read in place ([`ChatChunk`]): the same as
    /// pushing what the dialect makes of it, without building that.
    pub fn push_chat(&mut self, at_ms: f64, c: &ChatChunk<'_>) {
        self.events += 1;
        if self.done_at.is_some() {
            return;
        }
        if self.rec.response_id.is_none() {
            self.rec.response_id = c.id.as_deref().map(clip);
        }
        self.multi_choice |= c.multi_choice;
        if let Some(text) = c.text.as_deref() {
            let answer = Channels {
                answer: true,
                reasoning: false,
                summary: false,
            };
            self.token(at_ms, answer, Some(text), None);
        }
        self.finish_seen |= c.finish.is_some();
    }

    /// A token-bearing event (not a recap) that arrived at `at_ms`: what it carried, its answer
    /// text, and the cumulative completion tokens it reported.
    fn token(&mut self, at_ms: f64, ch: Channels, text: Option<&str>, usage: Option<u64>) {
        if self.finish_seen {
            self.after_finish += 1;
        }
        self.token_times.push(at_ms);
        self.token_usage.push(usage);
        let mut reasoning = ch.reasoning && !ch.summary;
        // a reasoning field or a non-text answer tells answer text apart from reasoning
        if ch.reasoning || (ch.answer && text.is_none()) {
            self.think.told_apart();
        }
        // reasoning inside the answer text, between <think> tags
        let mut answer_at = ch.answer.then_some(at_ms);
        if let (Some(c), Some(t)) = (&mut self.structured, text) {
            c.push_text(t);
        }
        if let Some(text) = text {
            self.output.push(text);
            let p = self.think.push(text, at_ms);
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
        if ch.summary && answer_at.is_none() {
            self.summary_events += 1;
        }
        if self.first_answer.is_none() {
            self.first_answer = answer_at;
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
            mut notes,
            api,
            vendor_prompt,
            cached,
            finish_seen,
            after_finish,
            choices_not_array,
            done_at,
            error,
            stopped,
            foreign,
            malformed,
            multi_choice,
            events: _,
            output,
            structured,
        } = self;
        rec.output = output.finish();
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
        match cached.map(|c| believable_cached(c, rec.prompt_tokens)) {
            Some(Ok(c)) => {
                rec.cached_tokens = Some(c.tokens);
                rec.cached_source = Some(c.source);
            }
            Some(Err(n)) => note(&mut notes, n),
            None => {}
        }
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
        } else if let (Some(s), true) = (stopped, finish_seen || done_at.is_some()) {
            // completed, but stopped on purpose by the provider: a stop, not a failure
            Some(s)
        } else if let (0, Some(api)) = (n_events, foreign) {
            Some(Failure {
            class: FailureClass::NotSse,
            status: None,
            message: format!(
                "protocol mismatch: the stream looks like {api}, not the configured API; set endpoint.api: {api}"
            ),
        })
        } else if n_events == 0 && api.stream_end() == StreamEnd::Completed {
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
        } else if !finish_seen && api.stream_end() == StreamEnd::Completed {
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
        // only an answer that completed is judged: a failure is counted as one already
        if rec.error.is_none() {
            rec.structured = structured.map(|c| c.outcome());
        }
        rec
    }
}

/// A reported cached count, unless it is above the prompt count that includes it: a server
/// cannot have reused more prompt tokens than it was sent, so the count is not recorded and the
/// note says why (the precedence is not fallen back on: a place that reports the impossible is
/// not replaced by a less trusted one, as with output tokens).
fn believable_cached(c: Cached, prompt: Option<u64>) -> Result<Cached, StreamNote> {
    if c.within_prompt && prompt.is_some_and(|p| c.tokens > p) {
        Err(StreamNote::CachedAbovePrompt)
    } else {
        Ok(c)
    }
}

/// The channels a token event carried.
#[derive(Debug, Clone, Copy)]
struct Channels {
    /// Answer text, a refusal or a tool call.
    answer: bool,
    /// Streamed reasoning.
    reasoning: bool,
    /// The reasoning is a summary.
    summary: bool,
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
mod tests;
