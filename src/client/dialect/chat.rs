//! OpenAI chat completions and legacy completions: `choices[]` chunks (`delta` or `text`), with
//! the vendor shapes met on them (typed content parts, `reasoning_details`, Groq's and
//! Moonshot's usage), and a fast path for the common chat chunk.

use super::{
    cached_at, clip, clipped, error_message, filtered, is_finish, known_timings, nonempty,
    not_integer, refused, usage, EventInfo, CHAT_CACHED, VENDOR_USAGE,
};
use crate::config::Api;
use serde_json::Value;
use std::borrow::Cow;

pub(super) fn openai(api: Api, v: &Value) -> EventInfo {
    let mut info = EventInfo {
        model: clipped(Some(v), "model"),
        id: clipped(Some(v), "id"),
        system_fingerprint: clipped(Some(v), "system_fingerprint"),
        timings: v.get("timings").and_then(known_timings),
        usage: usage(v.get("usage")),
        vendor_usage: VENDOR_USAGE.iter().find_map(|p| usage(v.pointer(p))),
        usage_not_integer: std::iter::once("/usage")
            .chain(VENDOR_USAGE)
            .any(|p| not_integer(v.pointer(p), "completion_tokens")),
        cached: cached_at(v, &CHAT_CACHED, true),
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
                } else if is_content_filter(f) {
                    info.stopped
                        .get_or_insert_with(|| filtered("finish_reason \"content_filter\""));
                }
            }
            match api {
                Api::OpenaiCompletions => {
                    if nonempty(c.get("text")) {
                        info.token = true;
                        info.answer = true;
                        info.completion_text =
                            c.get("text").and_then(Value::as_str).map(String::from);
                    }
                }
                _ => {
                    let d = match (c.get("delta"), c.get("message")) {
                        (Some(d), _) => d,
                        (None, Some(m)) => {
                            info.whole = true;
                            m
                        }
                        (None, None) => continue,
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
/// time) by [`crate::client::chunk::chat`]. Members the general path ([`openai`], `foreign`)
/// does not read are skipped; when one it reads for anything but the plain case is present and
/// not null (a usage object, `error`, `timings`, `type`; a choice's `text` or `message`; a
/// delta's reasoning or tool calls), or a member has another type than expected (non-string
/// content, a duplicate key, NaN), [`fast_chat`] returns `None` and the general path decides.
/// Same result as the general path (`fast_path_agrees_with_the_general_path`).
pub(super) fn fast_chat(data: &str) -> Option<EventInfo> {
    let c = crate::client::chunk::chat(data)?;
    Some(EventInfo {
        model: c.model.as_deref().map(clip),
        system_fingerprint: c.system_fingerprint.as_deref().map(clip),
        id: c.id.as_deref().map(clip),
        multi_choice: c.multi_choice,
        finish: c.finish.as_deref().map(clip),
        token: c.text.is_some(),
        answer: c.text.is_some(),
        text: c.text.map(Cow::into_owned),
        ..Default::default()
    })
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
    if nonempty(d.get("refusal")) {
        answer = true;
        info.stopped.get_or_insert_with(|| refused("delta.refusal"));
    }
    if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        info.tool_calls = calls
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let f = t.get("function");
                crate::structured::ToolDelta {
                    index: t.get("index").and_then(Value::as_u64).unwrap_or(k as u64),
                    name: s(f.and_then(|f| f.get("name"))),
                    arguments: s(f.and_then(|f| f.get("arguments"))),
                }
            })
            .collect();
    }
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

/// `finish_reason: "content_filter"` (OpenAI, Azure): the provider's filter ended the answer on
/// purpose, a stop ([`crate::record::FailureClass::is_stop`]), not a failure.
fn is_content_filter(f: &str) -> bool {
    f.trim() == "content_filter"
}

/// Why a finish reason means the request did not complete normally, or `None` for a normal end
/// (`stop`, `length`, `tool_calls`, `end_turn`, ...). `abort`: vLLM and SGLang end an
/// engine-aborted request this way, with HTTP 200 and `[DONE]` (vllm-project/vllm#57082);
/// `insufficient_system_resource`: DeepSeek interrupted the request. `content_filter` is not a
/// failure but a stop ([`is_content_filter`]).
pub fn failing_finish(f: &str) -> Option<&'static str> {
    match f.trim() {
        "error" => Some("the server ended the choice with finish_reason \"error\""),
        "abort" => Some(
            "the server aborted the request (finish_reason \"abort\"): the engine stopped it before the answer was complete",
        ),
        "insufficient_system_resource" => Some(
            "the server interrupted the request for lack of resources (finish_reason \"insufficient_system_resource\")",
        ),
        _ => None,
    }
}
