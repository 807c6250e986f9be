//! OpenAI Responses API: typed events (`response.output_text.delta`, ..., `response.completed`),
//! no `[DONE]`.

use super::{
    cached_at, clip, clipped, error_message, event_type, filtered, known_timings, nonempty,
    not_integer, refused, usage_named, EventInfo, Usage, GENERIC_STREAM_ERROR,
};
use crate::record::CachedSource;
use serde_json::Value;

/// Where a Responses stream reports cached prompt tokens, most trusted first: the usage of the
/// `response` (`input_tokens` includes them), then llama.cpp's `timings` beside it.
const RESPONSES_CACHED: [(&str, CachedSource); 2] = [
    (
        "/response/usage/input_tokens_details/cached_tokens",
        CachedSource::Usage,
    ),
    ("/timings/cache_n", CachedSource::ServerTimings),
];

/// One OpenAI Responses API event (`type` in the data, or the `event:` name). Token-bearing:
/// a non-empty `delta` of `response.output_text.delta`, `response.refusal.delta`,
/// `response.function_call_arguments.delta` (answer), `response.reasoning_text.delta`
/// (reasoning) or `response.reasoning_summary_text.delta` (a reasoning summary). The stream ends
/// with `response.completed` (usage), `response.incomplete` (`incomplete_details.reason`:
/// `max_output_tokens` is a normal end, `content_filter` a stop, anything else a failure) or
/// `response.failed`; there is no `[DONE]`. A refusal delta is a stop too
/// ([`crate::record::FailureClass::is_stop`]).
pub(super) fn responses(event: Option<&str>, v: &Value) -> EventInfo {
    let kind = event_type(event, v);
    let mut info = EventInfo::default();
    let delta = nonempty(v.get("delta"));
    match kind {
        "response.output_text.delta" if delta => {
            info.token = true;
            info.answer = true;
            // read for <think> tags like chat's content
            info.text = v.get("delta").and_then(Value::as_str).map(str::to_string);
        }
        "response.refusal.delta" if delta => {
            info.token = true;
            info.answer = true;
            info.stopped = Some(refused("response.refusal.delta"));
        }
        "response.function_call_arguments.delta" if delta => {
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
            info.id = clipped(r, "id");
            info.model = clipped(r, "model");
            info.usage = r.and_then(|r| responses_usage(r.get("usage")));
            info.usage_not_integer = not_integer(r.and_then(|r| r.get("usage")), "output_tokens");
            // llama.cpp puts its `timings` beside `response` in response.completed
            info.timings = v.get("timings").and_then(known_timings);
            info.cached = cached_at(v, &RESPONSES_CACHED, true);
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
                    if why == "content_filter" {
                        info.stopped =
                            Some(filtered("incomplete_details.reason \"content_filter\""));
                    } else if why != "max_output_tokens" {
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
