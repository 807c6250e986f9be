//! What one SSE event means, per API dialect: does it carry generated tokens, usage, a finish,
//! an error, the end of the stream? Pure functions over the event's `event:` name and `data:`.
//!
//! Token-bearing rules follow docs/design.md ("Metrics") and `tests/cases/README.md`: non-empty
//! `delta.content`, `delta.reasoning_content` / `delta.reasoning`, a `tool_calls` entry with a
//! function name or argument text (chat); non-empty `text` (completions); a
//! `content_block_delta` with text, thinking or JSON (Anthropic). Role-only, empty or null
//! content, usage-only chunks, `prompt_filter_results` chunks and `[DONE]` are not.
//!
//! One submodule per API family reads its events: [`chat`] (OpenAI chat and completions, with
//! the fast path for the common chunk), [`anthropic`], [`responses`]; this module holds what they
//! share (the event's meaning, usage, error messages, clipping) and dispatches.

mod anthropic;
mod chat;
mod responses;

use super::sse::SseEvent;
use crate::config::Api;
use crate::record::{CachedSource, Failure, FailureClass};
use anthropic::anthropic;
pub use chat::failing_finish;
use chat::{fast_chat, openai};
use responses::responses;
use serde_json::Value;

/// Usage figures from the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: Option<u64>,
    /// Completion (output) tokens; reasoning included by OpenAI's convention (see
    /// [`Usage::reasoning_included`]).
    pub completion_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens` (Responses API:
    /// `output_tokens_details.reasoning_tokens`): tokens the model reasoned with, streamed or not.
    pub reasoning_tokens: Option<u64>,
    /// `total_tokens`, read only to tell whether `completion_tokens` includes the reasoning.
    pub total_tokens: Option<u64>,
}

impl Usage {
    /// Whether `completion_tokens` includes `reasoning_tokens` (OpenAI, DeepSeek, vLLM...), or
    /// leaves it out (xAI: `total_tokens = prompt + completion + reasoning`). Included unless
    /// the total says otherwise.
    pub fn reasoning_included(&self) -> bool {
        match (
            self.prompt_tokens,
            self.completion_tokens,
            self.reasoning_tokens,
            self.total_tokens,
        ) {
            (Some(p), Some(c), Some(r), Some(t)) if r > 0 => {
                p.saturating_add(c).saturating_add(r) != t
            }
            _ => true,
        }
    }
}

/// Prompt tokens a server reported as served from its prefix cache, and where it said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    /// The count (a whole number, at most [`crate::limits::MAX_FIGURE`]).
    pub tokens: u64,
    /// The place it was read from.
    pub source: CachedSource,
    /// The same API's prompt count includes these tokens, so a cached count above it is not
    /// believable. False for Anthropic, whose `input_tokens` counts only the tokens after the
    /// last cache breakpoint (the total is `input_tokens + cache_creation_input_tokens +
    /// cache_read_input_tokens`), so any cached count fits.
    pub within_prompt: bool,
}

/// The meaning of one event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventInfo {
    /// Carries generated output of any channel (answer text, reasoning, tool call).
    pub token: bool,
    /// Carries answer text, a refusal or a tool call (for TTFOT).
    pub answer: bool,
    /// Carries streamed reasoning (reasoning fields, thinking parts or blocks).
    pub reasoning: bool,
    /// The reasoning it carries is a summary (Responses API `reasoning_summary_text`,
    /// OpenRouter `reasoning.summary`), not the reasoning tokens themselves.
    pub reasoning_summary: bool,
    /// Its answer text (chat `delta.content` as a string, a Responses `output_text` delta),
    /// read for `<think>` tags across events ([`super::think`]).
    pub text: Option<String>,
    /// A completions stream's `text` (its answer, not read for `<think>` tags as `text` is): what
    /// `gate.outputs` compares.
    pub completion_text: Option<String>,
    /// A usage object with at least one figure.
    pub usage: Option<Usage>,
    /// A usage's output count was there but not a whole number (`12.5`, `"12"`, `-1`): not
    /// read.
    pub usage_not_integer: bool,
    /// Usage in a known vendor location (Groq's `x_groq.usage`), when the standard `usage` is
    /// not there: recorded as its own source; a standard usage wins when both come.
    pub vendor_usage: Option<Usage>,
    /// The cached prompt tokens the event reports, from its most trusted place (see
    /// [`CachedSource::precedence`]).
    pub cached: Option<Cached>,
    /// `choices` is present but is an object, not the array the OpenAI API defines.
    pub choices_not_array: bool,
    /// `finish_reason` / `stop_reason` when present.
    pub finish: Option<String>,
    /// An in-band error message.
    pub error: Option<String>,
    /// The provider stopped the answer on purpose (a refusal, a content filter): the stop,
    /// class [`FailureClass::Refusal`] or [`FailureClass::ContentFilter`], and what it said
    /// ([`FailureClass::is_stop`]).
    pub stopped: Option<Failure>,
    /// `[DONE]` or Anthropic `message_stop`.
    pub done: bool,
    /// llama.cpp's `timings` object.
    pub timings: Option<Value>,
    /// The tool-call pieces of a chat delta (`delta.tool_calls`), for the structured-output
    /// check ([`crate::structured`]).
    pub tool_calls: Vec<crate::structured::ToolDelta>,
    /// The `model` the server reported.
    pub model: Option<String>,
    /// `system_fingerprint` the server reported.
    pub system_fingerprint: Option<String>,
    /// The completion's id (OpenAI `id`, Anthropic `message.id`), clipped to 300 characters.
    pub id: Option<String>,
    /// A whole chat completion (a choice carries `message`, not `delta`: the answer in one
    /// piece). After token events it recaps them, and the measurer does not count it as one
    /// more (docs/servers.md); as a stream's only answer it is that answer.
    pub whole: bool,
    /// More than one choice index was seen (n > 1), which perfgate does not measure.
    pub multi_choice: bool,
    /// The data was not JSON (and not `[DONE]`).
    pub malformed: bool,
    /// The event belongs to another API's protocol (e.g. an Anthropic `message_start` read as
    /// OpenAI chat): the API the stream looks like.
    pub foreign_api: Option<Api>,
}

/// A refusal the provider completed the request with (`what`: what the stream said): a stop
/// ([`FailureClass::is_stop`]).
fn refused(what: &str) -> Failure {
    Failure {
        class: FailureClass::Refusal,
        status: None,
        message: format!("the model refused ({what}): the provider completed the request, but the answer is a refusal, not the workload's"),
    }
}

/// An answer the provider's content filter ended (`what`: what the stream said): a stop
/// ([`FailureClass::is_stop`]).
fn filtered(what: &str) -> Failure {
    Failure {
        class: FailureClass::ContentFilter,
        status: None,
        message: format!("a content filter stopped the answer ({what}): the provider completed the request, but the output is partial"),
    }
}

/// Fallback error text when an error object has no readable message (as openai-python).
pub const GENERIC_STREAM_ERROR: &str = "An error occurred during streaming";

/// Interprets one event for `api`.
pub fn interpret(api: Api, ev: &SseEvent) -> EventInfo {
    let data = ev.data.trim();
    if data == "[DONE]" {
        return EventInfo {
            done: true,
            ..Default::default()
        };
    }
    // chat's token chunks (no `event:` line) are read without a JSON tree
    let fast = match api {
        Api::OpenaiChat => ev.event.is_none(),
        Api::OpenaiCompletions | Api::AnthropicMessages | Api::OpenaiResponses => false,
    };
    if let Some(info) = fast.then(|| fast_chat(data)).flatten() {
        return info;
    }
    general(api, ev, data)
}

/// [`interpret`] through a JSON tree: every dialect and quirk.
fn general(api: Api, ev: &SseEvent, data: &str) -> EventInfo {
    let parsed = serde_json::from_str::<Value>(data).or_else(|e| {
        // Python servers write NaN / Infinity (e.g. in logprobs): read them as null.
        match sanitize_non_finite(data) {
            Some(clean) => serde_json::from_str(&clean),
            None => Err(e),
        }
    });
    let v: Value = match parsed {
        Ok(v) => v,
        Err(_) => {
            if ev.event.as_deref() == Some("error") {
                return EventInfo {
                    error: Some(error_message(&Value::String(data.to_string()))),
                    ..Default::default()
                };
            }
            return EventInfo {
                malformed: !data.is_empty(),
                ..Default::default()
            };
        }
    };
    let mut info = match api {
        Api::OpenaiChat | Api::OpenaiCompletions => openai(api, &v),
        Api::AnthropicMessages => anthropic(ev.event.as_deref(), &v),
        Api::OpenaiResponses => responses(ev.event.as_deref(), &v),
    };
    info.foreign_api = foreign(api, ev.event.as_deref(), &v);
    if ev.event.as_deref() == Some("error") && info.error.is_none() {
        info.error = Some(error_message(v.get("error").unwrap_or(&v)));
    }
    info
}

/// `data` with bare `NaN`, `Infinity` and `-Infinity` tokens (outside strings) replaced by
/// `null`; `None` when there are none.
pub fn sanitize_non_finite(data: &str) -> Option<String> {
    let mut out = String::with_capacity(data.len());
    let (mut in_str, mut escaped, mut changed) = (false, false, false);
    let mut rest = data;
    while let Some(c) = rest.chars().next() {
        if !in_str {
            if let Some(tok) = ["-Infinity", "Infinity", "NaN"]
                .iter()
                .find(|t| rest.starts_with(**t))
            {
                out.push_str("null");
                rest = &rest[tok.len()..];
                changed = true;
                continue;
            }
            in_str = c == '"';
        } else if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_str = false;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

/// Which other API an event belongs to, if it plainly belongs to another one.
fn foreign(api: Api, event: Option<&str>, v: &Value) -> Option<Api> {
    const ANTHROPIC: [&str; 4] = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
    ];
    let kind = v.get("type").and_then(Value::as_str).or(event);
    let anthropic = (
        kind.is_some_and(|k| ANTHROPIC.contains(&k)),
        Api::AnthropicMessages,
    );
    let responses = (
        kind.is_some_and(|k| k.starts_with("response.")),
        Api::OpenaiResponses,
    );
    let choices = (v.get("choices").is_some(), Api::OpenaiChat);
    // the other dialects' marks an event of `api` must not carry, in the order they are told
    let marks: &[(bool, Api)] = match api {
        Api::OpenaiChat => &[
            anthropic,
            responses,
            (
                v.pointer("/choices/0/text").is_some_and(Value::is_string),
                Api::OpenaiCompletions,
            ),
        ],
        Api::OpenaiCompletions => &[
            anthropic,
            responses,
            (v.pointer("/choices/0/delta").is_some(), Api::OpenaiChat),
        ],
        Api::AnthropicMessages => &[responses, choices],
        Api::OpenaiResponses => &[anthropic, choices],
    };
    marks
        .iter()
        .find(|(seen, _)| *seen)
        .map(|(_, other)| *other)
}

/// Known vendor usage locations (JSON pointers), read when the standard `usage` is absent.
/// Groq puts usage in `x_groq.usage`; Moonshot (Kimi) in the finishing choice.
pub const VENDOR_USAGE: [&str; 2] = ["/x_groq/usage", "/choices/0/usage"];

/// Where chat and completions chunks report cached prompt tokens, most trusted first: the
/// standard usage field (OpenAI, vLLM, SGLang, newer llama.cpp), vendor spellings in `usage`
/// (DeepSeek's `prompt_cache_hit_tokens`, Moonshot's `cached_tokens`), the standard and
/// Moonshot's spelling in the vendor usage places ([`VENDOR_USAGE`]), then llama.cpp's
/// `timings.cache_n`. llama.cpp's native `tokens_cached` is not one: it counts every token in
/// the slot's cache at the end (prompt and output), not the prompt tokens reused.
pub const CHAT_CACHED: [(&str, CachedSource); 7] = [
    (
        "/usage/prompt_tokens_details/cached_tokens",
        CachedSource::Usage,
    ),
    ("/usage/prompt_cache_hit_tokens", CachedSource::VendorUsage),
    ("/usage/cached_tokens", CachedSource::VendorUsage),
    (
        "/x_groq/usage/prompt_tokens_details/cached_tokens",
        CachedSource::VendorUsage,
    ),
    (
        "/choices/0/usage/prompt_tokens_details/cached_tokens",
        CachedSource::VendorUsage,
    ),
    ("/choices/0/usage/cached_tokens", CachedSource::VendorUsage),
    ("/timings/cache_n", CachedSource::ServerTimings),
];

/// The cached prompt tokens at the first of `places` (JSON pointer, source) holding a whole
/// number no larger than [`crate::limits::MAX_FIGURE`]; anything else there (`96.5`, `"96"`,
/// `-1`, null) is not read and the next place is tried.
fn cached_at(v: &Value, places: &[(&str, CachedSource)], within_prompt: bool) -> Option<Cached> {
    places.iter().find_map(|&(p, source)| {
        v.pointer(p)
            .and_then(Value::as_u64)
            .filter(|&n| n as f64 <= crate::limits::MAX_FIGURE)
            .map(|tokens| Cached {
                tokens,
                source,
                within_prompt,
            })
    })
}

/// The `timings` fields kept (llama.cpp's): numbers only, so a record stays small whatever a
/// server puts there (a 4 MB `timings` once made an 80 MB baseline of 20 requests).
pub const TIMINGS_FIELDS: [&str; 11] = [
    "cache_n",
    "draft_n",
    "draft_n_accepted",
    "predicted_ms",
    "predicted_n",
    "predicted_per_second",
    "predicted_per_token_ms",
    "prompt_ms",
    "prompt_n",
    "prompt_per_second",
    "prompt_per_token_ms",
];

/// The known fields of a `timings` object that hold believable numbers: 0 to a day for times
/// (`*_ms`, [`crate::limits::MAX_LATENCY_MS`]), 0 to [`crate::limits::MAX_FIGURE`] for counts
/// and rates. A `prompt_ms` of two days was stored and made the baseline unreadable.
fn known_timings(t: &Value) -> Option<Value> {
    let o = t.as_object()?;
    let believable = |k: &str, v: &Value| {
        let limit = if k.ends_with("_ms") {
            crate::limits::MAX_LATENCY_MS
        } else {
            crate::limits::MAX_FIGURE
        };
        v.as_f64().is_some_and(|x| (0.0..=limit).contains(&x))
    };
    let kept: serde_json::Map<String, Value> = TIMINGS_FIELDS
        .iter()
        .filter_map(|k| {
            o.get(*k)
                .filter(|v| believable(k, v))
                .map(|v| (k.to_string(), v.clone()))
        })
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// A `finish_reason` that ends the choice: not empty and not the string `"null"` (some servers
/// and proxies send those on every intermediate chunk).
fn is_finish(f: &str) -> bool {
    let f = f.trim();
    !f.is_empty() && f != "null"
}

fn nonempty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

fn usage(v: Option<&Value>) -> Option<Usage> {
    usage_named(
        v,
        [
            "prompt_tokens",
            "completion_tokens",
            "completion_tokens_details",
        ],
    )
}

/// A usage object whose prompt, completion and details members (which holds
/// `reasoning_tokens`) have the names given, in that order; `total_tokens` in both APIs.
/// A prompt count above [`crate::limits::MAX_FIGURE`] is not one (left out); the completion count
/// is bounded by the measurement ([`super::measure`]).
fn usage_named(v: Option<&Value>, [prompt, completion, details]: [&str; 3]) -> Option<Usage> {
    let u = v?.as_object()?;
    let prompt = u
        .get(prompt)
        .and_then(Value::as_u64)
        .filter(|&p| p as f64 <= crate::limits::MAX_FIGURE);
    let completion = u.get(completion).and_then(Value::as_u64);
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    Some(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        reasoning_tokens: u
            .get(details)
            .and_then(|d| d.get("reasoning_tokens"))
            .and_then(Value::as_u64),
        total_tokens: u.get("total_tokens").and_then(Value::as_u64),
    })
}

/// The usage object `v` has `key` (its output count), but not as a whole number.
fn not_integer(v: Option<&Value>, key: &str) -> bool {
    v.and_then(|u| u.get(key))
        .is_some_and(|c| !c.is_null() && c.as_u64().is_none())
}

/// A readable message from an error member that may be a string, an object with `message`,
/// or anything else (then [`GENERIC_STREAM_ERROR`] plus its code when present).
pub fn error_message(e: &Value) -> String {
    match e {
        Value::String(s) if !s.is_empty() => clip(s),
        // e.g. {"error": [{"message": "Unrecognized key(s) in object: 'stream_options'"}]}
        Value::Array(items) if !items.is_empty() => error_message(&items[0]),
        Value::Object(o) => {
            let msg = o
                .get("message")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let code = o.get("code").map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            match (msg, code) {
                (Some(m), Some(c)) => clip(&format!("{m} (code {c})")),
                (Some(m), None) => clip(m),
                (None, Some(c)) => format!("{GENERIC_STREAM_ERROR} (code {c})"),
                (None, None) => GENERIC_STREAM_ERROR.to_string(),
            }
        }
        _ => GENERIC_STREAM_ERROR.to_string(),
    }
}

/// An event's type: `type` in its data, else the `event:` name, else empty.
pub(super) fn event_type<'a>(event: Option<&'a str>, v: &'a Value) -> &'a str {
    v.get("type")
        .and_then(Value::as_str)
        .or(event)
        .unwrap_or("")
}

/// The text field `key` of an optional JSON object, [`clip`]ped: a stream's `id` or `model`.
pub(super) fn clipped(o: Option<&Value>, key: &str) -> Option<String> {
    o.and_then(|o| o.get(key)).and_then(Value::as_str).map(clip)
}

/// Shortens server text to at most 300 characters for messages.
/// Control characters (terminal escapes, CR, BEL) are shown escaped (`\u{1b}`), so server text
/// cannot rewrite a terminal or CI log line.
pub fn clip(s: &str) -> String {
    let s = s.trim();
    let mut t = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 300 {
            t.push('…');
            break;
        }
        if c.is_control() {
            t.extend(c.escape_default());
        } else {
            t.push(c);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general_chat(data: &str) -> EventInfo {
        let ev = SseEvent {
            event: None,
            data: data.to_string(),
        };
        general(Api::OpenaiChat, &ev, data)
    }

    #[test]
    fn fast_path_agrees_with_the_general_path() {
        // taken by the fast path: the same result as the general path
        let plain = [
            r#"{"id":"chatcmpl-sim-3","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" tok1"},"finish_reason":null}]}"#,
            r#"{"id":"c","model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
            r#"{"id":"c","model":"m","choices":[{"index":1,"delta":{"content":"x"},"finish_reason":null}]}"#,
            r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":null},"logprobs":null,"finish_reason":null,"stop_reason":null}],"obfuscation":"ab12"}"#,
            r#"{"id":"c","choices":[]}"#,
            r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"é\"\\u00e9 \n"},"finish_reason":null}],"error":null,"timings":null,"type":null}"#,
            r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"a","reasoning_content":null,"tool_calls":null},"finish_reason":null}]}"#,
        ];
        for d in plain {
            let fast = fast_chat(d).unwrap_or_else(|| panic!("fast path refused {d}"));
            assert_eq!(fast, general_chat(d), "{d}");
        }
        // left to the general path
        let general_only: [&str; 24] = [
            // cached prompt tokens live in usage and timings only: never on the fast path
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":96}}}"#,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":120,"prompt_cache_hit_tokens":64}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"cached_tokens":16}}]}"#,
            r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"error"}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"abort"}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"refusal":"no"}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"","reasoning_details":[]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"completion_tokens":3}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"<think>hm"}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"}]}}]}"#,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"text":"completions shape"}]}"#,
            r#"{"id":"c","choices":[{"index":0,"message":{"content":"x"}}]}"#,
            r#"{"error":{"message":"boom"},"choices":[]}"#,
            r#"{"type":"message_start","message":{}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"a"}}],"timings":{"predicted_ms":1}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":["a"]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"logprob":NaN}]}"#,
            r#"{"id":"c","id":"d","choices":[]}"#,
            r#"{"choices":null}"#,
            r#"not json"#,
            &format!(
                r#"{{"choices":[],"x":{}{}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
        ];
        for d in general_only {
            assert!(fast_chat(d).is_none(), "fast path took {d}");
        }
    }

    proptest::proptest! {
        /// Whatever mix of members a chunk has, the fast path either declines or agrees.
        #[test]
        fn fast_path_never_disagrees(
            id in proptest::option::of("[a-z\"\\\\é -]{0,12}"),
            model in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just("\"m\"".to_string()),
                proptest::strategy::Just("3".to_string()),
                proptest::strategy::Just("null".to_string())]),
            index in 0u64..3,
            content in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just("\"\"".to_string()),
                proptest::strategy::Just("\"tok\"".to_string()),
                proptest::strategy::Just("null".to_string()),
                proptest::strategy::Just("7".to_string())]),
            finish in proptest::prop_oneof![
                proptest::strategy::Just("null"), proptest::strategy::Just("\"stop\""),
                proptest::strategy::Just("\"error\""), proptest::strategy::Just("1")],
            extra in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just(r#""usage":null"#),
                proptest::strategy::Just(r#""usage":{"completion_tokens":2}"#),
                proptest::strategy::Just(r#""error":null"#),
                proptest::strategy::Just(r#""error":"x""#),
                proptest::strategy::Just(r#""timings":{}"#),
                proptest::strategy::Just(r#""type":"content_block_delta""#),
                proptest::strategy::Just(r#""object":"chat.completion.chunk""#),
                proptest::strategy::Just(r#""obfuscation":"zz""#),
                proptest::strategy::Just(r#""system_fingerprint":"fp""#)], 0..4),
            reasoning in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just("null"), proptest::strategy::Just("\"r\"")]),
        ) {
            let mut delta = Vec::new();
            if let Some(c) = &content { delta.push(format!(r#""content":{c}"#)); }
            if let Some(r) = reasoning { delta.push(format!(r#""reasoning_content":{r}"#)); }
            let mut top = vec![format!(
                r#""choices":[{{"index":{index},"delta":{{{}}},"finish_reason":{finish}}}]"#,
                delta.join(",")
            )];
            if let Some(i) = &id { top.push(format!("\"id\":{}", serde_json::Value::from(i.as_str()))); }
            if let Some(m) = &model { top.push(format!(r#""model":{m}"#)); }
            top.extend(extra.iter().map(|e| e.to_string()));
            let data = format!("{{{}}}", top.join(","));
            if let Some(fast) = fast_chat(&data) {
                proptest::prop_assert_eq!(fast, general_chat(&data), "{}", data);
            }
        }
    }

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_string(),
        }
    }

    #[test]
    fn clip_escapes_control_characters_and_limits_length() {
        assert_eq!(clip("\u{1b}[2Kok\r\u{7}"), "\\u{1b}[2Kok\\r\\u{7}");
        let long = "x".repeat(400);
        assert_eq!(clip(&long).chars().count(), 301);
    }

    #[test]
    fn non_finite_numbers_become_null_outside_strings() {
        let d = r#"{"logprob":NaN,"x":-Infinity,"s":"NaN Infinity \"NaN\"","y":Infinity}"#;
        assert_eq!(
            sanitize_non_finite(d).unwrap(),
            r#"{"logprob":null,"x":null,"s":"NaN Infinity \"NaN\"","y":null}"#
        );
        assert_eq!(sanitize_non_finite(r#"{"a":"é"}"#), None);
        let t = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"choices":[{"index":0,"delta":{"content":"hi"},"logprobs":{"content":[{"logprob":NaN}]}}]}"#,
            ),
        );
        assert!(t.token && !t.malformed);
    }

    #[test]
    fn chat_token_rules() {
        let role = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#),
        );
        assert!(!role.token);
        let null = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#),
        );
        assert!(!null.token);
        let tok = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":" three"}}]}"#),
        );
        assert!(tok.token && tok.answer);
        let reason = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[{"index":0,"delta":{"reasoning":"hm","content":null}}]}"#),
        );
        assert!(reason.token && !reason.answer);
        let tool = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}}]}"#,
            ),
        );
        assert!(tool.token && tool.answer && !tool.whole);
        // a whole chat.completion: its text, usage and `whole` (a recap after token events)
        let whole = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi there"},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}"#,
            ),
        );
        assert!(whole.whole && whole.token && whole.answer);
        assert_eq!(whole.usage.unwrap().completion_tokens, Some(2));
        let usage = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":6}}"#),
        );
        assert!(!usage.token);
        assert_eq!(usage.usage.unwrap().completion_tokens, Some(6));
        let empty_usage = interpret(Api::OpenaiChat, &ev(r#"{"choices":null,"usage":{}}"#));
        assert_eq!(empty_usage.usage, None);
        assert!(interpret(Api::OpenaiChat, &ev("[DONE]")).done);
    }

    #[test]
    fn in_band_errors_are_readable() {
        let a = interpret(
            Api::OpenaiChat,
            &ev(r#"{"error":"Input validation error","error_type":"validation"}"#),
        );
        assert_eq!(a.error.as_deref(), Some("Input validation error"));
        let b = interpret(
            Api::OpenaiChat,
            &ev(r#"{"error":{"message":"Rate limit exceeded","code":429}}"#),
        );
        assert_eq!(b.error.as_deref(), Some("Rate limit exceeded (code 429)"));
        let c = interpret(Api::OpenaiChat, &ev(r#"{"error":{}}"#));
        assert_eq!(c.error.as_deref(), Some(GENERIC_STREAM_ERROR));
        let d = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"error"}]}"#),
        );
        assert!(d.error.is_some());
        let e = interpret(
            Api::OpenaiChat,
            &SseEvent {
                event: Some("error".into()),
                data: "overloaded".into(),
            },
        );
        assert_eq!(e.error.as_deref(), Some("overloaded"));
    }

    #[test]
    fn completions_and_anthropic() {
        let t = interpret(
            Api::OpenaiCompletions,
            &ev(r#"{"choices":[{"index":0,"text":"hi","finish_reason":null}]}"#),
        );
        assert!(t.token);
        let d = interpret(Api::AnthropicMessages, &SseEvent { event: Some("content_block_delta".into()), data: r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#.into() });
        assert!(d.token && d.answer);
        let th = interpret(
            Api::AnthropicMessages,
            &ev(
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            ),
        );
        assert!(th.token && !th.answer);
        let md = interpret(
            Api::AnthropicMessages,
            &ev(
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}"#,
            ),
        );
        assert_eq!(md.finish.as_deref(), Some("end_turn"));
        assert_eq!(md.usage.unwrap().completion_tokens, Some(15));
        assert!(interpret(Api::AnthropicMessages, &ev(r#"{"type":"message_stop"}"#)).done);
    }

    #[test]
    fn vendor_usage_finish_variants_and_timings() {
        let g = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"prompt_tokens":7,"completion_tokens":4}}}"#,
            ),
        );
        assert_eq!(g.usage, None);
        assert_eq!(
            g.vendor_usage,
            Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(4),
                ..Default::default()
            })
        );
        assert_eq!(g.finish.as_deref(), Some("stop"));
        for f in [r#""""#, r#""null""#, r#"" ""#, "null"] {
            let d = format!(
                r#"{{"choices":[{{"index":0,"delta":{{"content":"a"}},"finish_reason":{f}}}]}}"#
            );
            assert_eq!(interpret(Api::OpenaiChat, &ev(&d)).finish, None, "{d}");
            assert_eq!(general_chat(&d).finish, None, "{d}");
        }
        let t = interpret(
            Api::OpenaiChat,
            &ev(&format!(
                r#"{{"choices":[],"timings":{{"predicted_ms":12.5,"predicted_n":3,"junk":"{}","prompt_n":"x"}}}}"#,
                "z".repeat(10_000)
            )),
        );
        assert_eq!(
            t.timings,
            Some(serde_json::json!({"predicted_ms": 12.5, "predicted_n": 3}))
        );
        // Issue 26: a `prompt_ms` over a day (or negative) was stored, and every later check
        // refused the baseline; such fields are left out.
        let t = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"choices":[],"timings":{"prompt_ms":86400001,"predicted_ms":-1,"prompt_n":1e300,"predicted_n":7,"cache_n":0}}"#,
            ),
        );
        assert_eq!(
            t.timings,
            Some(serde_json::json!({"predicted_n": 7, "cache_n": 0}))
        );
        let obj = interpret(
            Api::OpenaiChat,
            &ev(r#"{"choices":{"index":0,"delta":{"content":"a"}}}"#),
        );
        assert!(obj.choices_not_array && !obj.token);
        let line = interpret(
            Api::OpenaiChat,
            &SseEvent {
                event: Some("error".into()),
                data: r#"{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}"#.into(),
            },
        );
        assert_eq!(
            line.error.as_deref(),
            Some("the request exceeds the available context size (code 400)")
        );
    }

    // One event may report cached prompt tokens in several places: the most trusted one is
    // read (usage > vendor usage > timings); a place without a whole number at most MAX_FIGURE
    // is skipped.
    #[test]
    fn cached_prompt_places_per_event() {
        let cached = |d: &str| interpret(Api::OpenaiChat, &ev(d)).cached;
        let c = |tokens, source| {
            Some(Cached {
                tokens,
                source,
                within_prompt: true,
            })
        };
        assert_eq!(
            cached(
                r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_cache_hit_tokens":5,"prompt_tokens_details":{"cached_tokens":6}},"timings":{"cache_n":7}}"#
            ),
            c(6, CachedSource::Usage)
        );
        assert_eq!(
            cached(
                r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_cache_hit_tokens":5},"timings":{"cache_n":7}}"#
            ),
            c(5, CachedSource::VendorUsage)
        );
        assert_eq!(
            cached(
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}}"#
            ),
            c(8, CachedSource::VendorUsage)
        );
        assert_eq!(
            cached(r#"{"choices":[],"usage":{"prompt_tokens":9,"cached_tokens":4}}"#),
            c(4, CachedSource::VendorUsage)
        );
        assert_eq!(
            cached(
                r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":1e300}},"timings":{"cache_n":7}}"#
            ),
            c(7, CachedSource::ServerTimings)
        );
        assert_eq!(
            cached(r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}"#),
            None
        );
        let a = interpret(
            Api::AnthropicMessages,
            &ev(
                r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"cache_read_input_tokens":2000}}}"#,
            ),
        );
        assert_eq!(
            a.cached,
            Some(Cached {
                tokens: 2000,
                source: CachedSource::Usage,
                within_prompt: true,
            })
        );
        // ... within its whole prompt: 3 + 2000 cache reads
        assert_eq!(a.usage.and_then(|u| u.prompt_tokens), Some(2003));
    }

    fn responses_ev(data: &str) -> EventInfo {
        interpret(Api::OpenaiResponses, &ev(data))
    }

    // Issue 28 findings 3 and 8: Responses output_text deltas are read for <think> tags like
    // chat's content; a response.completed whose response failed is an in-band error.
    #[test]
    fn responses_text_and_failed_completion() {
        let d = responses_ev(r#"{"type":"response.output_text.delta","delta":"<think>hm"}"#);
        assert!(d.token && d.answer);
        assert_eq!(d.text.as_deref(), Some("<think>hm"));
        let f = responses_ev(r#"{"type":"response.function_call_arguments.delta","delta":"{"}"#);
        assert!(f.answer && f.text.is_none());
        let c = responses_ev(
            r#"{"type":"response.completed","response":{"id":"r","status":"failed","error":{"message":"boom"}}}"#,
        );
        assert!(c.done);
        assert!(
            c.error
                .as_deref()
                .is_some_and(|e| e.contains("status \"failed\"") && e.contains("boom")),
            "{:?}",
            c.error
        );
        let ok = responses_ev(
            r#"{"type":"response.completed","response":{"id":"r","status":"completed"}}"#,
        );
        assert_eq!(ok.error, None);
    }

    // Issue 28 findings 6 and 7: an output count that is not a whole number is flagged; a
    // prompt count above MAX_FIGURE is left out; the server's model (5 MB once, stored in the
    // baseline) and system_fingerprint are clipped like the id, on both chat paths.
    #[test]
    fn usage_oddities_and_long_server_strings() {
        for u in [r#"12.5"#, r#""12""#, "-1"] {
            let d = format!(
                r#"{{"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":{u}}}}}"#
            );
            let i = interpret(Api::OpenaiChat, &ev(&d));
            assert!(i.usage_not_integer, "{d}");
            assert_eq!(i.usage.unwrap().completion_tokens, None);
        }
        let r = responses_ev(
            r#"{"type":"response.completed","response":{"usage":{"output_tokens":2.5}}}"#,
        );
        assert!(r.usage_not_integer);
        let big = interpret(
            Api::OpenaiChat,
            &ev(
                r#"{"choices":[],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":2}}"#,
            ),
        );
        assert_eq!(big.usage.unwrap().prompt_tokens, None);
        let long = "m".repeat(100_000);
        let d = format!(
            r#"{{"id":"c","model":"{long}","system_fingerprint":"{long}","choices":[{{"index":0,"delta":{{"content":"a"}}}}]}}"#
        );
        let fast = fast_chat(&d).unwrap();
        assert_eq!(fast.model.as_ref().map(|m| m.chars().count()), Some(301));
        assert_eq!(
            fast.system_fingerprint.as_ref().map(|m| m.chars().count()),
            Some(301)
        );
        assert_eq!(fast, general_chat(&d));
        let r = responses_ev(&format!(
            r#"{{"type":"response.created","response":{{"model":"{long}"}}}}"#
        ));
        assert_eq!(r.model.map(|m| m.chars().count()), Some(301));
    }
}
