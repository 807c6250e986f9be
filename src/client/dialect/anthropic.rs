//! Anthropic Messages: typed events (`message_start`, `content_block_delta`, `message_delta`,
//! `message_stop`).

use super::{
    cached_at, clipped, error_message, event_type, nonempty, not_integer, refused, usage_named,
    EventInfo, Usage,
};
use crate::record::CachedSource;
use serde_json::Value;

/// Where `message_start` reports the prompt tokens read from the cache.
const START_CACHED: [(&str, CachedSource); 1] = [(
    "/message/usage/cache_read_input_tokens",
    CachedSource::Usage,
)];
/// Where `message_delta` reports them (cumulative, like its `output_tokens`).
const DELTA_CACHED: [(&str, CachedSource); 1] =
    [("/usage/cache_read_input_tokens", CachedSource::Usage)];

/// The whole prompt of an Anthropic usage object: `input_tokens` counts only the tokens after the
/// last cache breakpoint, so the cache reads and writes are added (what the OpenAI APIs call
/// `prompt_tokens`, and what a cached share is a share of). `None` without `input_tokens`.
fn whole_prompt(u: &Value) -> Option<u64> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = u.get("input_tokens").and_then(Value::as_u64)?;
    Some(
        input
            .saturating_add(n("cache_read_input_tokens"))
            .saturating_add(n("cache_creation_input_tokens")),
    )
}

pub(super) fn anthropic(event: Option<&str>, v: &Value) -> EventInfo {
    let kind = event_type(event, v);
    let mut info = EventInfo::default();
    match kind {
        "message_start" => {
            let m = v.get("message");
            info.id = clipped(m, "id");
            info.model = clipped(m, "model");
            // the prompt counted whole (whole_prompt), so the cache reads are within it
            info.cached = cached_at(v, &START_CACHED, true);
            if let Some(u) = m.and_then(|m| m.get("usage")) {
                let prompt = whole_prompt(u);
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
                // Claude's streaming classifiers stopped the answer on purpose: a stop
                info.stopped = Some(refused(
                    "stop_reason \"refusal\", a safety classifier ended the answer",
                ));
            }
            info.usage = usage_named(v.get("usage"), ["input_tokens", "output_tokens", ""]);
            if let (Some(u), Some(whole)) =
                (info.usage.as_mut(), v.get("usage").and_then(whole_prompt))
            {
                u.prompt_tokens = Some(whole);
            }
            info.usage_not_integer = not_integer(v.get("usage"), "output_tokens");
            info.cached = cached_at(v, &DELTA_CACHED, true);
        }
        "message_stop" => info.done = true,
        "error" => info.error = Some(error_message(v.get("error").unwrap_or(v))),
        _ => {}
    }
    info
}
