//! What one SSE event means, per API dialect: does it carry generated tokens, usage, a finish,
//! an error, the end of the stream? Pure functions over the event's `event:` name and `data:`.
//!
//! Token-bearing rules follow docs/design.md ("Metrics") and `tests/cases/README.md`: non-empty
//! `delta.content`, `delta.reasoning_content` / `delta.reasoning`, a `tool_calls` entry with a
//! function name or argument text (chat); non-empty `text` (completions); a
//! `content_block_delta` with text, thinking or JSON (Anthropic). Role-only, empty or null
//! content, usage-only chunks, `prompt_filter_results` chunks and `[DONE]` are not.

use super::sse::SseEvent;
use crate::config::Api;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

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
    /// A usage object with at least one figure.
    pub usage: Option<Usage>,
    /// A usage's output count was there but not a whole number (`12.5`, `"12"`, `-1`): not
    /// read.
    pub usage_not_integer: bool,
    /// Usage in a known vendor location (Groq's `x_groq.usage`), when the standard `usage` is
    /// not there: recorded as its own source; a standard usage wins when both come.
    pub vendor_usage: Option<Usage>,
    /// `choices` is present but is an object, not the array the OpenAI API defines.
    pub choices_not_array: bool,
    /// `finish_reason` / `stop_reason` when present.
    pub finish: Option<String>,
    /// An in-band error message.
    pub error: Option<String>,
    /// `[DONE]` or Anthropic `message_stop`.
    pub done: bool,
    /// llama.cpp's `timings` object.
    pub timings: Option<Value>,
    /// The `model` the server reported.
    pub model: Option<String>,
    /// `system_fingerprint` the server reported.
    pub system_fingerprint: Option<String>,
    /// The completion's id (OpenAI `id`, Anthropic `message.id`), clipped to 300 characters.
    pub id: Option<String>,
    /// More than one choice index was seen (n > 1), which perfgate does not measure.
    pub multi_choice: bool,
    /// The data was not JSON (and not `[DONE]`).
    pub malformed: bool,
    /// The event belongs to another API's protocol (e.g. an Anthropic `message_start` read as
    /// OpenAI chat): the API the stream looks like.
    pub foreign_api: Option<Api>,
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
    if api == Api::OpenaiChat && ev.event.is_none() {
        if let Some(info) = fast_chat(data) {
            return info;
        }
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

fn openai(api: Api, v: &Value) -> EventInfo {
    let mut info = EventInfo {
        model: v.get("model").and_then(Value::as_str).map(clip),
        id: v.get("id").and_then(Value::as_str).map(clip),
        system_fingerprint: v
            .get("system_fingerprint")
            .and_then(Value::as_str)
            .map(clip),
        timings: v.get("timings").and_then(known_timings),
        usage: usage(v.get("usage")),
        vendor_usage: VENDOR_USAGE.iter().find_map(|p| usage(v.pointer(p))),
        usage_not_integer: std::iter::once("/usage")
            .chain(VENDOR_USAGE)
            .any(|p| not_integer(v.pointer(p), "completion_tokens")),
        choices_not_array: v.get("choices").is_some_and(Value::is_object),
        ..Default::default()
    };
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        info.error = Some(error_message(e));
    }
    if let Some(choices) = v.get("choices").and_then(Value::as_array) {
        for c in choices {
            if c.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                info.multi_choice = true;
            }
            if let Some(f) = c
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|f| is_finish(f))
            {
                info.finish = Some(clip(f));
                if let Some(why) = failing_finish(f) {
                    info.error.get_or_insert_with(|| why.to_string());
                }
            }
            match api {
                Api::OpenaiCompletions => {
                    if nonempty(c.get("text")) {
                        info.token = true;
                        info.answer = true;
                    }
                }
                _ => {
                    let Some(d) = c.get("delta").or_else(|| c.get("message")) else {
                        continue;
                    };
                    chat_delta(d, &mut info);
                }
            }
        }
    }
    info
}

/// The common OpenAI chat chunk, read without building a JSON tree (most of the per-event CPU of
/// the general path, which matters at hundreds of streams: the client must keep up to stamp on
/// time). Members the general path ([`openai`], [`foreign`]) does not read are skipped; when one
/// it reads for anything but the plain case is present and not null (a usage object, `error`,
/// `timings`, `type`; a choice's `text` or `message`; a delta's reasoning or tool calls), or a
/// member has another type than expected (non-string content, a duplicate key, NaN),
/// [`fast_chat`] returns `None` and the general path decides. Same result as the general path
/// (`fast_path_agrees_with_the_general_path`).
/// Bracket depth above which [`fast_chat`] declines.
const FAST_MAX_DEPTH: i32 = 32;

#[derive(Deserialize)]
struct FastChunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow)]
    choices: Vec<FastChoice<'a>>,
    // present and not null: the general path
    #[serde(default)]
    usage: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    timings: Option<IgnoredAny>,
    #[serde(default, rename = "type")]
    kind: Option<IgnoredAny>,
    #[serde(default)]
    x_groq: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct FastChoice<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow)]
    delta: FastDelta<'a>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    text: Option<IgnoredAny>,
    #[serde(default)]
    message: Option<IgnoredAny>,
    #[serde(default)]
    usage: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct FastDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    reasoning_content: Option<IgnoredAny>,
    #[serde(default)]
    reasoning: Option<IgnoredAny>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
    #[serde(default)]
    refusal: Option<IgnoredAny>,
    #[serde(default)]
    reasoning_details: Option<IgnoredAny>,
}

fn fast_chat(data: &str) -> Option<EventInfo> {
    // Skipped members are not depth-limited as a JSON tree is (128 levels): leave anything
    // nested deeply (brackets inside strings counted too, which only declines more) to the
    // general path, so both paths judge such an event alike.
    let mut depth = 0i32;
    for b in data.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > FAST_MAX_DEPTH {
                    return None;
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    let c: FastChunk = serde_json::from_str(data).ok()?;
    let plain_choices = c.choices.iter().all(|ch| {
        ch.text.is_none()
            && ch.message.is_none()
            && ch.delta.reasoning_content.is_none()
            && ch.delta.reasoning.is_none()
            && ch.delta.tool_calls.is_none()
            && ch.delta.refusal.is_none()
            && ch.delta.reasoning_details.is_none()
            && ch.usage.is_none()
            && !ch.delta.content.as_deref().is_some_and(has_think_tag)
            && ch
                .finish_reason
                .as_deref()
                .is_none_or(|f| failing_finish(f).is_none())
    });
    if c.usage.is_some()
        || c.error.is_some()
        || c.timings.is_some()
        || c.kind.is_some()
        || c.x_groq.is_some()
        || !plain_choices
    {
        return None;
    }
    let mut info = EventInfo {
        model: c.model.as_deref().map(clip),
        system_fingerprint: c.system_fingerprint.as_deref().map(clip),
        id: c.id.as_deref().map(clip),
        ..Default::default()
    };
    for ch in &c.choices {
        if ch.index != 0 {
            info.multi_choice = true;
        }
        if let Some(f) = ch.finish_reason.as_deref().filter(|f| is_finish(f)) {
            info.finish = Some(clip(f));
        }
        if let Some(text) = ch.delta.content.as_deref().filter(|s| !s.is_empty()) {
            info.token = true;
            info.answer = true;
            info.text = Some(text.to_string());
        }
    }
    Some(info)
}

fn anthropic(event: Option<&str>, v: &Value) -> EventInfo {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .or(event)
        .unwrap_or("");
    let mut info = EventInfo::default();
    match kind {
        "message_start" => {
            let m = v.get("message");
            info.id = m
                .and_then(|m| m.get("id"))
                .and_then(Value::as_str)
                .map(clip);
            info.model = m
                .and_then(|m| m.get("model"))
                .and_then(Value::as_str)
                .map(clip);
            if let Some(u) = m.and_then(|m| m.get("usage")) {
                let prompt = u.get("input_tokens").and_then(Value::as_u64);
                if prompt.is_some() {
                    info.usage = Some(Usage {
                        prompt_tokens: prompt,
                        completion_tokens: None,
                        ..Default::default()
                    });
                }
            }
        }
        "content_block_delta" => {
            let d = v.get("delta");
            let t = d
                .and_then(|d| d.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let text = match t {
                "text_delta" => d.and_then(|d| d.get("text")),
                "thinking_delta" => d.and_then(|d| d.get("thinking")),
                "input_json_delta" => d.and_then(|d| d.get("partial_json")),
                _ => None,
            };
            if nonempty(text) {
                info.token = true;
                info.answer = t != "thinking_delta";
                info.reasoning = t == "thinking_delta";
            }
        }
        "message_delta" => {
            info.finish = v
                .get("delta")
                .and_then(|d| d.get("stop_reason"))
                .and_then(Value::as_str)
                .map(str::to_string);
            if info.finish.as_deref() == Some("refusal") {
                // Claude's streaming classifiers stopped the answer: the output is partial
                info.error = Some(
                    "the model stopped with stop_reason \"refusal\" (a safety classifier ended the answer; the output is partial)".into(),
                );
            }
            info.usage = usage_named(v.get("usage"), ["input_tokens", "output_tokens", ""]);
            info.usage_not_integer = not_integer(v.get("usage"), "output_tokens");
        }
        "message_stop" => info.done = true,
        "error" => info.error = Some(error_message(v.get("error").unwrap_or(v))),
        _ => {}
    }
    info
}

/// What a chat `delta` carries: answer text (a string, or typed parts as Mistral's
/// `[{"type":"text","text":..}]`), a refusal, tool calls, or reasoning (`reasoning_content`,
/// `reasoning`, OpenRouter's `reasoning_details`, Mistral's `thinking` parts).
fn chat_delta(d: &Value, info: &mut EventInfo) {
    let mut answer = false;
    let mut reasoning = false;
    let mut summary = false;
    match d.get("content") {
        Some(Value::String(s)) if !s.is_empty() => {
            answer = true;
            info.text = Some(s.clone());
        }
        Some(Value::Array(parts)) => {
            for p in parts {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "thinking" | "reasoning" => {
                        reasoning |= nonempty_text(p.get("thinking").or_else(|| p.get("text")))
                    }
                    _ => answer |= nonempty(p.get("text")),
                }
            }
        }
        _ => {}
    }
    answer |= nonempty(d.get("refusal"));
    answer |= d
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| {
            calls.iter().any(|t| {
                let f = t.get("function");
                nonempty(f.and_then(|f| f.get("name")))
                    || nonempty(f.and_then(|f| f.get("arguments")))
            })
        });
    let details = d
        .get("reasoning_details")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    // OpenRouter repeats reasoning_details' text in `reasoning`: the typed entries say whether
    // it is the reasoning or only its summary
    if details.is_none() {
        reasoning |= nonempty(d.get("reasoning_content")) || nonempty(d.get("reasoning"));
    }
    if let Some(details) = details {
        for r in details {
            match r.get("type").and_then(Value::as_str).unwrap_or("") {
                "reasoning.summary" if nonempty(r.get("summary")) => summary = true,
                // encrypted reasoning is an opaque blob, not streamed tokens
                "reasoning.encrypted" => {}
                _ => reasoning |= nonempty(r.get("text")),
            }
        }
    }
    info.answer |= answer;
    info.reasoning |= reasoning || summary;
    info.reasoning_summary |= summary && !reasoning;
    info.token |= answer || reasoning || summary;
}

/// Text that is a non-empty string, or an array of parts one of which has non-empty `text`
/// (Mistral's `"thinking": [{"type": "text", "text": ".."}]`).
fn nonempty_text(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(parts)) => parts.iter().any(|p| nonempty(p.get("text"))),
        other => nonempty(other),
    }
}

/// A whole `<think>`-style tag in `s` (the fast path leaves such text to the general one).
fn has_think_tag(s: &str) -> bool {
    super::think::has_tag(s)
}

/// Why a finish reason means the request did not complete normally, or `None` for a normal end
/// (`stop`, `length`, `tool_calls`, `end_turn`, ...). `abort`: vLLM and SGLang end an
/// engine-aborted request this way, with HTTP 200 and `[DONE]` (vllm-project/vllm#57082);
/// `content_filter`: the answer was cut by a content filter (OpenAI, Azure);
/// `insufficient_system_resource`: DeepSeek interrupted the request.
pub fn failing_finish(f: &str) -> Option<&'static str> {
    match f.trim() {
        "error" => Some("the server ended the choice with finish_reason \"error\""),
        "abort" => Some(
            "the server aborted the request (finish_reason \"abort\"): the engine stopped it before the answer was complete",
        ),
        "content_filter" => Some(
            "a content filter stopped the answer (finish_reason \"content_filter\"); the output is partial",
        ),
        "insufficient_system_resource" => Some(
            "the server interrupted the request for lack of resources (finish_reason \"insufficient_system_resource\")",
        ),
        _ => None,
    }
}

/// One OpenAI Responses API event (`type` in the data, or the `event:` name). Token-bearing:
/// a non-empty `delta` of `response.output_text.delta`, `response.refusal.delta`,
/// `response.function_call_arguments.delta` (answer), `response.reasoning_text.delta`
/// (reasoning) or `response.reasoning_summary_text.delta` (a reasoning summary). The stream ends
/// with `response.completed` (usage), `response.incomplete` (`incomplete_details.reason`:
/// `max_output_tokens` is a normal end, `content_filter` is not) or `response.failed`; there is
/// no `[DONE]`.
fn responses(event: Option<&str>, v: &Value) -> EventInfo {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .or(event)
        .unwrap_or("");
    let mut info = EventInfo::default();
    let delta = nonempty(v.get("delta"));
    match kind {
        "response.output_text.delta" if delta => {
            info.token = true;
            info.answer = true;
            // read for <think> tags like chat's content
            info.text = v.get("delta").and_then(Value::as_str).map(str::to_string);
        }
        "response.refusal.delta" | "response.function_call_arguments.delta" if delta => {
            info.token = true;
            info.answer = true;
        }
        "response.reasoning_text.delta" if delta => {
            info.token = true;
            info.reasoning = true;
        }
        "response.reasoning_summary_text.delta" if delta => {
            info.token = true;
            info.reasoning = true;
            info.reasoning_summary = true;
        }
        "response.created"
        | "response.in_progress"
        | "response.completed"
        | "response.incomplete"
        | "response.failed" => {
            let r = v.get("response");
            info.id = r
                .and_then(|r| r.get("id"))
                .and_then(Value::as_str)
                .map(clip);
            info.model = r
                .and_then(|r| r.get("model"))
                .and_then(Value::as_str)
                .map(clip);
            info.usage = r.and_then(|r| responses_usage(r.get("usage")));
            info.usage_not_integer = not_integer(r.and_then(|r| r.get("usage")), "output_tokens");
            // llama.cpp puts its `timings` beside `response` in response.completed
            info.timings = v.get("timings").and_then(known_timings);
            match kind {
                "response.completed" => {
                    info.finish = Some("completed".into());
                    info.done = true;
                    // a completed event whose response says it failed is not a success
                    let status = r.and_then(|r| r.get("status")).and_then(Value::as_str);
                    if let Some(s) = status.filter(|s| matches!(*s, "failed" | "cancelled")) {
                        let why = r
                            .and_then(|r| r.get("error"))
                            .filter(|e| !e.is_null())
                            .map(error_message)
                            .unwrap_or_else(|| GENERIC_STREAM_ERROR.to_string());
                        info.error = Some(clip(&format!(
                            "response.completed carries status \"{s}\": {why}"
                        )));
                    }
                }
                "response.incomplete" => {
                    let why = r
                        .and_then(|r| r.pointer("/incomplete_details/reason"))
                        .and_then(Value::as_str)
                        .unwrap_or("unknown");
                    info.finish = Some(clip(why));
                    info.done = true;
                    if why != "max_output_tokens" {
                        info.error = Some(clip(&format!(
                            "the response ended incomplete (incomplete_details.reason \"{why}\"); the output is partial"
                        )));
                    }
                }
                "response.failed" => {
                    info.done = true;
                    info.error = Some(
                        r.and_then(|r| r.get("error"))
                            .filter(|e| !e.is_null())
                            .map(error_message)
                            .unwrap_or_else(|| "the response failed (response.failed)".into()),
                    );
                }
                _ => {}
            }
        }
        "error" => info.error = Some(error_message(v.get("error").unwrap_or(v))),
        _ => {}
    }
    info
}

/// Responses API usage: `input_tokens`, `output_tokens` (reasoning included),
/// `output_tokens_details.reasoning_tokens`.
fn responses_usage(v: Option<&Value>) -> Option<Usage> {
    usage_named(
        v,
        ["input_tokens", "output_tokens", "output_tokens_details"],
    )
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
    match api {
        Api::OpenaiChat | Api::OpenaiCompletions | Api::OpenaiResponses
            if kind.is_some_and(|k| ANTHROPIC.contains(&k)) =>
        {
            Some(Api::AnthropicMessages)
        }
        Api::OpenaiChat | Api::OpenaiCompletions | Api::AnthropicMessages
            if kind.is_some_and(|k| k.starts_with("response.")) =>
        {
            Some(Api::OpenaiResponses)
        }
        Api::OpenaiResponses if v.get("choices").is_some() => Some(Api::OpenaiChat),
        Api::OpenaiChat if v.pointer("/choices/0/text").is_some_and(Value::is_string) => {
            Some(Api::OpenaiCompletions)
        }
        Api::OpenaiCompletions if v.pointer("/choices/0/delta").is_some() => Some(Api::OpenaiChat),
        Api::AnthropicMessages if v.get("choices").is_some() => Some(Api::OpenaiChat),
        _ => None,
    }
}

/// Known vendor usage locations (JSON pointers), read when the standard `usage` is absent.
/// Groq puts usage in `x_groq.usage`; Moonshot (Kimi) in the finishing choice.
pub const VENDOR_USAGE: [&str; 2] = ["/x_groq/usage", "/choices/0/usage"];

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
        let general_only: [&str; 21] = [
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
        assert!(tool.token && tool.answer);
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
