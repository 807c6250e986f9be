//! Per-request measurement records: what one streamed request produced.
//!
//! A [`RequestRecord`] is the unit everything downstream works on (stats, gate, baselines).
//! All times are milliseconds (f64) measured on one monotonic clock from t0, the instant just
//! before the request was sent (docs/design.md "Metrics").

use serde::{Deserialize, Serialize};

/// Where `output_tokens` came from (docs/design.md "Metrics").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// `usage.completion_tokens` (or Anthropic `usage.output_tokens`) reported by the server.
    Usage,
    /// The number of token-bearing events (an estimate: one event may carry several tokens).
    Events,
    /// A provider's own usage object where the standard `usage` is absent (Groq's
    /// `x_groq.usage` on the finish chunk), under the same trust rules as `usage`.
    VendorUsage,
}

impl TokenSource {
    /// Stable snake_case name, as used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Events => "events",
            TokenSource::VendorUsage => "vendor_usage",
        }
    }
    /// True when the count is the server's own (standard or vendor usage), not counted events.
    pub fn is_reported(self) -> bool {
        self != TokenSource::Events
    }
}

/// Where `cached_tokens` came from: the places servers report the prompt tokens they served from
/// their prefix cache, in order of precedence (docs/metrics.md "Prefix cache").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachedSource {
    /// The API's own usage field: chat and completions
    /// `usage.prompt_tokens_details.cached_tokens`, Responses
    /// `usage.input_tokens_details.cached_tokens`, Anthropic `usage.cache_read_input_tokens`.
    Usage,
    /// A vendor's spelling or place where the standard one is absent: DeepSeek's
    /// `usage.prompt_cache_hit_tokens`, Moonshot's `cached_tokens` (in `usage` or in the
    /// finishing choice's `usage`), the standard spelling in a vendor usage (Groq's `x_groq.usage`).
    VendorUsage,
    /// llama.cpp's `timings.cache_n` (kept in `server_timings` too).
    ServerTimings,
}

impl CachedSource {
    /// Stable snake_case name, as used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CachedSource::Usage => "usage",
            CachedSource::VendorUsage => "vendor_usage",
            CachedSource::ServerTimings => "server_timings",
        }
    }
    /// Higher wins when a stream reports the cached count in several places:
    /// usage > vendor usage > server timings.
    pub fn precedence(self) -> u8 {
        match self {
            CachedSource::Usage => 2,
            CachedSource::VendorUsage => 1,
            CachedSource::ServerTimings => 0,
        }
    }
}

/// Something a stream sent that perfgate read but did not use as it looked, noted per request
/// (and summed in the run's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamNote {
    /// A `</think>` never opened came after answer text (or after a tag, a reasoning field, a
    /// tool call): read as answer text the model wrote, not as the end of reasoning.
    ThinkCloseInAnswer,
    /// The usage's output token count was not a whole number (`12.5`, `"12"`, `-1`): not read.
    UsageNotInteger,
    /// The server reported more cached prompt tokens than prompt tokens (which include them):
    /// not believable, so `cached_tokens` is not recorded.
    CachedAbovePrompt,
}

impl StreamNote {
    /// Stable snake_case name, as used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamNote::ThinkCloseInAnswer => "think_close_in_answer",
            StreamNote::UsageNotInteger => "usage_not_integer",
            StreamNote::CachedAbovePrompt => "cached_above_prompt",
        }
    }
}

/// Where the output tokens of a set of requests came from: one [`TokenSource`] for all of
/// them, or `mixed`. Written as the source's name or `mixed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TokenSources {
    /// Every request's count came from this source.
    One(TokenSource),
    /// The requests' counts came from different sources.
    Mixed,
}

impl TokenSources {
    /// The token source over `sources` (`None` when there are none).
    pub fn of(sources: impl IntoIterator<Item = TokenSource>) -> Option<TokenSources> {
        let mut it = sources.into_iter();
        let first = it.next()?;
        Some(if it.all(|t| t == first) {
            TokenSources::One(first)
        } else {
            TokenSources::Mixed
        })
    }
    /// Its name as written (`usage`, `events`, `vendor_usage`, `mixed`).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSources::One(t) => t.as_str(),
            TokenSources::Mixed => "mixed",
        }
    }
}

impl From<TokenSources> for String {
    fn from(t: TokenSources) -> String {
        t.as_str().to_string()
    }
}

impl TryFrom<String> for TokenSources {
    type Error = String;
    fn try_from(s: String) -> Result<TokenSources, String> {
        let one = [
            TokenSource::Usage,
            TokenSource::Events,
            TokenSource::VendorUsage,
        ]
        .into_iter()
        .find(|t| t.as_str() == s);
        match one {
            Some(t) => Ok(TokenSources::One(t)),
            None if s == "mixed" => Ok(TokenSources::Mixed),
            None => Err(format!(
                "unknown token source `{s}`, expected usage, events, vendor_usage or mixed"
            )),
        }
    }
}

/// Why a request failed. Serialised in snake_case into results and baselines. Ordered by that
/// name, so a map keyed by it (`errors_by_class`) is written in alphabetical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// TCP connect refused / DNS / reset before a response.
    Connect,
    /// TLS handshake failure.
    Tls,
    /// A non-2xx HTTP status.
    HttpStatus,
    /// An `{"error": ...}` object, `event: error` or `finish_reason: "error"` inside a 200 stream.
    InBandError,
    /// A 2xx response whose body is not an SSE stream (HTML, JSON, the server ignored `stream: true`).
    NotSse,
    /// The stream ended normally but carried no token-bearing event.
    NoToken,
    /// The body ended (EOF or reset) before `[DONE]` or a `finish_reason`.
    Truncated,
    /// The connection was not established within `connect_timeout`.
    TimeoutConnect,
    /// No token-bearing event arrived within `first_token_timeout`.
    TimeoutFirstToken,
    /// The gap between two events exceeded `idle_timeout`.
    TimeoutIdle,
    /// The whole request exceeded `request_timeout`.
    TimeoutRequest,
    /// The body or one event exceeded the size limit.
    TooLarge,
    /// A data event that is not valid JSON (after accepting NaN/Infinity), so its tokens cannot
    /// be counted.
    MalformedEvent,
    /// The stream uses something perfgate does not measure (several choices, n > 1).
    Unsupported,
    /// A stop, not a failure: the provider completed the request but its model refused (OpenAI
    /// `delta.refusal`, Responses `response.refusal.delta`, Anthropic `stop_reason: "refusal"`).
    /// See [`FailureClass::is_stop`].
    Refusal,
    /// A stop, not a failure: the provider's content filter ended the answer
    /// (`finish_reason: "content_filter"`, Responses `incomplete_details.reason:
    /// "content_filter"`). See [`FailureClass::is_stop`].
    ContentFilter,
}

impl PartialOrd for FailureClass {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FailureClass {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl FailureClass {
    /// Stable snake_case name, as used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Connect => "connect",
            FailureClass::Tls => "tls",
            FailureClass::HttpStatus => "http_status",
            FailureClass::InBandError => "in_band_error",
            FailureClass::NotSse => "not_sse",
            FailureClass::NoToken => "no_token",
            FailureClass::Truncated => "truncated",
            FailureClass::TimeoutConnect => "timeout_connect",
            FailureClass::TimeoutFirstToken => "timeout_first_token",
            FailureClass::TimeoutIdle => "timeout_idle",
            FailureClass::TimeoutRequest => "timeout_request",
            FailureClass::TooLarge => "too_large",
            FailureClass::MalformedEvent => "malformed_event",
            FailureClass::Unsupported => "unsupported",
            FailureClass::Refusal => "refusal",
            FailureClass::ContentFilter => "content_filter",
        }
    }

    /// True for a request the provider completed but stopped on purpose (a refusal, a content
    /// filter; docs/metrics.md "Stopped by the provider"): like a failure it is kept out of the
    /// latency figures (its length is not the workload's), but it is not a failure of the
    /// endpoint: it is counted apart, out of the error rate and `max_error_rate`, and gated by
    /// its own share check.
    pub fn is_stop(self) -> bool {
        matches!(self, FailureClass::Refusal | FailureClass::ContentFilter)
    }
}

/// A classified failure with a human-readable message (secrets already redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The class, counted in the error rate by class.
    pub class: FailureClass,
    /// HTTP status when one was received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What went wrong and, where possible, what to do about it.
    pub message: String,
}

/// One measured request (docs/design.md "Metrics"). Success figures are `None` when undefined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Start of this request, ms after the start of the measured run.
    pub start_ms: f64,
    /// Time to first token-bearing event (any channel, reasoning included), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Time to first answer-text or tool-call event, when it differs from TTFT, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfot_ms: Option<f64>,
    /// (t_last - t_first) / (output_tokens - 1), ms; `None` when output_tokens <= 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// t_last - t0: arrival of the last token-bearing event, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// When the stream closed (`[DONE]` or end of body), ms after t0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_done_ms: Option<f64>,
    /// Every gap between successive token-bearing events, ms: per event, or per token (a gap
    /// over an event carrying k tokens counted as k gaps of gap/k) when the server reports
    /// cumulative usage on every token event (docs/design.md "Metrics"). Bounded: above
    /// [`crate::stats::itl::ITL_KEEP`] gaps, that many points standing for `itl_count` gaps
    /// (the error bound is in [`crate::stats::itl`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl_ms: Vec<f64>,
    /// The number of gaps `itl_ms` stands for, when it is a summary (absent: every gap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_count: Option<u64>,
    /// Token-bearing events that arrived after a `finish_reason` (counted; some servers put
    /// `finish_reason` on every chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after_finish: Option<u64>,
    /// Generated tokens (see `token_source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Where `output_tokens` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<TokenSource>,
    /// Prompt tokens the server reported in usage (Anthropic's whole prompt: `input_tokens`
    /// plus its cache reads and writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the server reported as served from its prefix cache (see `cached_source`);
    /// `Some(0)` is a reported miss, `None` that nothing believable was reported. Not above
    /// `prompt_tokens` (Anthropic's counted whole: input, cache reads and cache writes): a
    /// higher one is dropped and noted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Where `cached_tokens` came from (usage > vendor usage > server timings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_source: Option<CachedSource>,
    /// Number of token-bearing events seen.
    pub token_events: u64,
    /// The completion id the server gave this response (OpenAI `id`, e.g. `chatcmpl-...`;
    /// Anthropic `message.id`), to find a slow request in the server's own logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// A usage figure the server reported but perfgate did not believe (zero, fewer than the
    /// token events, or above max_tokens): output_tokens then counts events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_distrusted: Option<u64>,
    /// Reasoning tokens the usage reported (`completion_tokens_details.reasoning_tokens`,
    /// Responses `output_tokens_details.reasoning_tokens`), streamed or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Reasoning tokens the usage counts that were never streamed (a hidden-reasoning model):
    /// left out of `output_tokens` and TPOT's denominator, since no event carried them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_reasoning_tokens: Option<u64>,
    /// What the stream sent that was read otherwise than it looked ([`StreamNote`]), once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_notes: Vec<StreamNote>,
    /// Server-reported timings (llama.cpp's `timings` object): its known numeric fields only
    /// (see [`crate::client::dialect::TIMINGS_FIELDS`]), so a record stays small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<serde_json::Value>,
    /// Speculative decoding: the draft tokens proposed and accepted for this request (from
    /// llama.cpp's `timings.draft_n` / `draft_n_accepted`; docs/metrics.md "Speculative
    /// decoding"). Absent when the server reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<crate::speculative::Drafts>,
    /// A request that asked for structured output or tool calls (`response_format`, `tools`):
    /// whether its answer parsed, or why not (docs/metrics.md "Structured output and tool
    /// calls"); absent for a plain answer and for a failed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::structured::Parsed>,
    /// Present when the request failed; a failed request never enters success latency figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Failure>,
    /// Open loop: when this request was scheduled to be sent, ms after the start of the
    /// measured run (`start_ms` is when it was actually sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_ms: Option<f64>,
    /// Open loop: `start_ms - sched_ms`, the time the request waited for a free slot (or for a
    /// busy client) after its scheduled arrival. Latency from the scheduled time is this plus
    /// the latency from the send (coordinated omission made visible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_delay_ms: Option<f64>,
    /// Steady-state closed loop: the requests in flight while this one ran (itself included),
    /// averaged over its duration (docs/scenarios.md "Steady state").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<f64>,
    /// A prompt-set, generated-lengths, trace or conversation request: which request of the run it was and what it sent, so that two runs
    /// can be shown to send the same requests ([`WorkItem`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkItem>,
    /// The answer text, bounded: its hash and length written, its first characters kept in
    /// memory only to locate a difference between two arms (docs/ab.md "Outputs that changed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::output_text::OutputText>,
}

/// What a request of a varied workload (`request.prompt_set`, `request.generate`) sent: its place in the run and
/// its prompt, recorded per request and kept in baselines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkItem {
    /// The request's global index in the run's sequence (0-based, over every look).
    pub index: u64,
    /// The prompt-set entry it sent (0-based, in the file's order); none for drawn lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<u64>,
    /// sha256 (16 hex chars) of the prompt it sent: the entry's messages, or the drawn
    /// length and word order.
    pub prompt_id: String,
    /// The output limit it asked for (`max_tokens`, or the entry's own, or the drawn one).
    pub max_tokens: u32,
    /// `request.generate`: the prompt length drawn for it, tokens (what `prompt_tokens`, the
    /// server's count, is compared with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u32>,
    /// `request.conversation`: the conversation it belongs to (0-based in the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u64>,
    /// `request.conversation`: its turn in the conversation (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
}

impl RequestRecord {
    /// Its gated figures ([`crate::config::Metric::value`] says which is which).
    pub fn timings(&self) -> crate::config::metric::Timings {
        crate::config::metric::Timings {
            ttft_ms: self.ttft_ms,
            tpot_ms: self.tpot_ms,
            e2e_ms: self.e2e_ms,
        }
    }

    /// A record of a request that started `start_ms` after the start of the run, with nothing
    /// measured yet (every figure `None`, no ITL, 0 token events, no error).
    pub fn new(start_ms: f64) -> RequestRecord {
        RequestRecord {
            start_ms,
            ttft_ms: None,
            ttfot_ms: None,
            tpot_ms: None,
            e2e_ms: None,
            t_done_ms: None,
            itl_ms: Vec::new(),
            itl_count: None,
            tokens_after_finish: None,
            output_tokens: None,
            token_source: None,
            prompt_tokens: None,
            cached_tokens: None,
            cached_source: None,
            token_events: 0,
            response_id: None,
            usage_distrusted: None,
            reasoning_tokens: None,
            hidden_reasoning_tokens: None,
            stream_notes: Vec::new(),
            server_timings: None,
            draft: None,
            structured: None,
            error: None,
            sched_ms: None,
            sched_delay_ms: None,
            concurrency: None,
            work: None,
            output: None,
        }
    }

    /// A copy with every time rounded to 3 decimals (µs), for files people read and diff.
    pub fn rounded(&self) -> RequestRecord {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        RequestRecord {
            start_ms: r(self.start_ms),
            ttft_ms: self.ttft_ms.map(r),
            ttfot_ms: self.ttfot_ms.map(r),
            tpot_ms: self.tpot_ms.map(r),
            e2e_ms: self.e2e_ms.map(r),
            t_done_ms: self.t_done_ms.map(r),
            itl_ms: self.itl_ms.iter().copied().map(r).collect(),
            sched_ms: self.sched_ms.map(r),
            sched_delay_ms: self.sched_delay_ms.map(r),
            concurrency: self.concurrency.map(r),
            ..self.clone()
        }
    }

    /// True when the request succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// True when the request failed: not a success, and not stopped by the provider on purpose
    /// ([`FailureClass::is_stop`]).
    pub fn failed(&self) -> bool {
        self.error.as_ref().is_some_and(|e| !e.class.is_stop())
    }

    /// True when the provider completed the request but stopped it on purpose.
    pub fn stopped(&self) -> bool {
        self.error.as_ref().is_some_and(|e| e.class.is_stop())
    }
}

/// One measured request of a conversation scenario sent again after the run (docs/scenarios.md
/// "Conversations"): its prompt behind a cache-busting first line, so no prefix cache can serve
/// any of it (cold), and that first line alone with a two-word question (floor: the server's
/// fixed costs with an all but empty prefill). Its measured TTFT lies between the two by the
/// share of its prompt the server reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferencePair {
    /// The measured request's index in the run (its `work.index`).
    pub index: u64,
    /// The cold request's TTFT, ms (`None`: it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_ttft_ms: Option<f64>,
    /// The floor request's TTFT, ms (`None`: it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_ttft_ms: Option<f64>,
    /// Prompt tokens the server reported for the cold request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Cached tokens the server reported for the cold request (an honest server: about 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_cached_tokens: Option<u64>,
}
