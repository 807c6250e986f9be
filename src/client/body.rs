//! The JSON request body per API dialect (pure).
//!
//! OpenAI chat/completions: `stream: true`, `max_tokens` (or the scenario's
//! `request.max_tokens_field`, e.g. `max_completion_tokens`), optional sampling keys and
//! `stream_options: {include_usage: true}`; Anthropic messages: `system` at the top level and
//! `max_tokens` required; OpenAI Responses: `input` messages, `instructions` for the system
//! prompt, `max_output_tokens` (usage always arrives in `response.completed`), `ignore_eos` and
//! `min_tokens` when set (llama.cpp honours them there), no `seed`. `extra_body` is merged
//! last, verbatim.

use crate::config::scenario::{Api, CachePolicy, RequestSpec};
use serde_json::{json, Map, Value};

/// Builds the body for one request. `nonce` is prepended as its own line to the prompt when the
/// cache policy is `cold` (so no prefix cache can serve it); `include_usage` adds
/// `stream_options` for the OpenAI dialects.
pub fn build(
    api: Api,
    model: &str,
    r: &RequestSpec,
    include_usage: bool,
    nonce: Option<&str>,
) -> Value {
    let nonce_line = match (r.cache, nonce) {
        (CachePolicy::Cold, Some(n)) => format!("[perfgate nonce {n}]\n"),
        _ => String::new(),
    };
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    match api {
        Api::OpenaiCompletions => {
            b.insert("prompt".into(), json!(format!("{nonce_line}{}", r.prompt)));
        }
        Api::OpenaiChat => {
            let mut msgs = Vec::new();
            if let Some(s) = &r.system {
                msgs.push(json!({"role": "system", "content": s}));
            }
            msgs.extend(with_nonce(r, &nonce_line));
            b.insert("messages".into(), Value::Array(msgs));
        }
        Api::OpenaiResponses => {
            let system: Vec<&str> = r.system.iter().map(String::as_str).collect();
            if !system.is_empty() {
                b.insert("instructions".into(), json!(system.join("\n")));
            }
            b.insert("input".into(), Value::Array(with_nonce(r, &nonce_line)));
        }
        Api::AnthropicMessages => {
            let system: Vec<&str> = r
                .system
                .iter()
                .map(String::as_str)
                .chain(
                    r.messages
                        .iter()
                        .filter(|m| m.role == "system")
                        .map(|m| m.content.as_str()),
                )
                .collect();
            if !system.is_empty() {
                b.insert("system".into(), json!(system.join("\n")));
            }
            let msgs: Vec<Value> = with_nonce(r, &nonce_line)
                .into_iter()
                .filter(|m| m["role"] != "system")
                .collect();
            b.insert("messages".into(), Value::Array(msgs));
        }
    }
    b.insert(r.max_tokens_key(api).into(), json!(r.max_tokens));
    b.insert("stream".into(), json!(true));
    let keys = OptionalKeys::of(api);
    if include_usage && keys.stream_options {
        b.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(t) = r.temperature {
        b.insert("temperature".into(), json!(t));
    }
    if keys.seed {
        if let Some(s) = r.seed {
            b.insert("seed".into(), json!(s));
        }
    }
    // Length controls of the local servers; llama.cpp's /v1/responses passes its body's
    // unknown keys on to its chat completion, so they work there too. OpenAI's own Responses
    // API has no `seed`, so it is left out of that body.
    if keys.length_controls {
        if let Some(i) = r.ignore_eos {
            b.insert("ignore_eos".into(), json!(i));
        }
        if let Some(m) = r.min_tokens {
            b.insert("min_tokens".into(), json!(m));
        }
    }
    for (k, v) in &r.extra_body {
        b.insert(k.clone(), v.clone());
    }
    Value::Object(b)
}

/// Which optional keys a dialect's body carries.
struct OptionalKeys {
    /// `stream_options: {include_usage: true}` (when the endpoint asks for usage).
    stream_options: bool,
    /// `seed`.
    seed: bool,
    /// `ignore_eos` and `min_tokens` (the local servers' length controls).
    length_controls: bool,
}

impl OptionalKeys {
    fn of(api: Api) -> OptionalKeys {
        let (stream_options, seed, length_controls) = match api {
            Api::OpenaiChat | Api::OpenaiCompletions => (true, true, true),
            Api::OpenaiResponses => (false, false, true),
            Api::AnthropicMessages => (false, false, false),
        };
        OptionalKeys {
            stream_options,
            seed,
            length_controls,
        }
    }
}

fn with_nonce(r: &RequestSpec, nonce_line: &str) -> Vec<Value> {
    let first_user = r.messages.iter().position(|m| m.role == "user");
    r.messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let content = if Some(i) == first_user {
                format!("{nonce_line}{}", m.content)
            } else {
                m.content.clone()
            };
            json!({"role": m.role, "content": content})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::RawMessage;

    fn spec(cache: CachePolicy) -> RequestSpec {
        RequestSpec {
            messages: vec![RawMessage {
                role: "user".into(),
                content: "Hi".into(),
            }],
            prompt: "Hi".into(),
            system: Some("Be brief".into()),
            max_tokens: 32,
            max_tokens_field: None,
            temperature: Some(0.0),
            seed: Some(1),
            ignore_eos: Some(true),
            min_tokens: None,
            extra_body: serde_json::from_str(r#"{"cache_prompt": false}"#).unwrap(),
            cache,
            prompt_tokens: None,
            prompt_set: None,
            generate: None,
            conversation: None,
        }
    }

    /// [`build`] of [`spec`] with `cache`.
    fn build_with(
        api: Api,
        model: &str,
        cache: CachePolicy,
        usage: bool,
        nonce: Option<&str>,
    ) -> Value {
        build(api, model, &spec(cache), usage, nonce)
    }

    #[test]
    fn chat_body() {
        let b = build_with(Api::OpenaiChat, "m", CachePolicy::Warm, true, Some("n1"));
        assert_eq!(
            b,
            json!({"model":"m","messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"Hi"}],
                   "max_tokens":32,"stream":true,"stream_options":{"include_usage":true},"temperature":0.0,
                   "seed":1,"ignore_eos":true,"cache_prompt":false})
        );
    }

    #[test]
    fn cold_cache_prepends_nonce_and_anthropic_moves_system() {
        let b = build_with(
            Api::AnthropicMessages,
            "claude",
            CachePolicy::Cold,
            true,
            Some("abc"),
        );
        assert_eq!(b["system"], "Be brief");
        assert_eq!(b["messages"][0]["content"], "[perfgate nonce abc]\nHi");
        assert!(b.get("stream_options").is_none());
        assert!(b.get("ignore_eos").is_none());
        let c = build_with(
            Api::OpenaiCompletions,
            "m",
            CachePolicy::Cold,
            false,
            Some("x"),
        );
        assert_eq!(c["prompt"], "[perfgate nonce x]\nHi");
        assert!(c.get("stream_options").is_none());
    }

    #[test]
    fn max_tokens_field_and_responses_body() {
        let mut r = spec(CachePolicy::Warm);
        r.max_tokens_field = Some(crate::config::scenario::MaxTokensField::MaxCompletionTokens);
        let b = build(Api::OpenaiChat, "o3", &r, true, None);
        assert_eq!(b["max_completion_tokens"], 32);
        assert!(b.get("max_tokens").is_none());
        let b = build_with(Api::OpenaiResponses, "m", CachePolicy::Warm, true, None);
        assert_eq!(b["max_output_tokens"], 32);
        assert_eq!(b["instructions"], "Be brief");
        assert_eq!(b["input"], json!([{"role": "user", "content": "Hi"}]));
        assert!(b.get("stream_options").is_none() && b.get("seed").is_none());
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream"], true);
    }
}
