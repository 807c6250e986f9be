//! Server identity: which server, which version, which model, asked once per start from the
//! endpoints each server documents. Whatever answers 200 with JSON is read; the others are
//! skipped (a server answers only its own):
//! - llama.cpp `GET /props`: `build_info`, `model_path`, `default_generation_settings.n_ctx`,
//!   `total_slots`;
//! - vLLM `GET /version`: `version`;
//! - SGLang `GET /get_server_info`: `version`, `model_path`, `context_length`;
//! - TGI `GET /info`: `model_id`, `version`, `sha`, `max_total_tokens`;
//! - `GET <base_url>/models`: the first model's `id`, `owned_by`, `max_model_len`.

use crate::client::http::StreamClient;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => {
            Some(super::log::printable(s).chars().take(200).collect())
        }
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Picks `(key, pointer)` pairs from a JSON answer into `out` as `prefix.key`.
fn pick(out: &mut BTreeMap<String, String>, prefix: &str, v: &Value, keys: &[(&str, &str)]) {
    for (k, ptr) in keys {
        if let Some(s) = v.pointer(ptr).and_then(text) {
            out.insert(format!("{prefix}.{k}"), s);
        }
    }
}

/// Identity facts from a set of answers (path -> JSON body), e.g. `llama.cpp.build_info`.
pub fn from_answers(answers: &[(&str, Value)]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (path, v) in answers {
        match *path {
            "/props" => pick(
                &mut out,
                "llama.cpp",
                v,
                &[
                    ("build_info", "/build_info"),
                    ("model_path", "/model_path"),
                    ("n_ctx", "/default_generation_settings/n_ctx"),
                    ("total_slots", "/total_slots"),
                ],
            ),
            "/version" => pick(&mut out, "vllm", v, &[("version", "/version")]),
            "/get_server_info" => pick(
                &mut out,
                "sglang",
                v,
                &[
                    ("version", "/version"),
                    ("model_path", "/model_path"),
                    ("context_length", "/context_length"),
                ],
            ),
            "/info" => pick(
                &mut out,
                "tgi",
                v,
                &[
                    ("model_id", "/model_id"),
                    ("version", "/version"),
                    ("sha", "/sha"),
                    ("max_total_tokens", "/max_total_tokens"),
                ],
            ),
            _ => pick(
                &mut out,
                "models",
                v,
                &[
                    ("id", "/data/0/id"),
                    ("owned_by", "/data/0/owned_by"),
                    ("max_model_len", "/data/0/max_model_len"),
                ],
            ),
        }
    }
    out
}

/// Asks the server at `origin` (and its `models_url`) who it is; secrets are redacted.
pub async fn probe(
    client: &StreamClient,
    origin: &str,
    models_url: &str,
    secrets: &[String],
) -> BTreeMap<String, String> {
    let mut answers: Vec<(&str, Value)> = Vec::new();
    for path in ["/props", "/version", "/get_server_info", "/info"] {
        if let Ok((200, body)) = client.get(&format!("{origin}{path}"), PROBE_TIMEOUT).await {
            if let Ok(v) = serde_json::from_str::<Value>(&body) {
                if v.is_object() {
                    answers.push((path, v));
                }
            }
        }
    }
    if let Ok((200, body)) = client.get(models_url, PROBE_TIMEOUT).await {
        if let Ok(v) = serde_json::from_str::<Value>(&body) {
            answers.push(("models", v));
        }
    }
    from_answers(&answers)
        .into_iter()
        .map(|(k, v)| (k, crate::redact::redact(&v, secrets)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_each_servers_own_facts() {
        let props = serde_json::json!({"build_info": "b6666-0c1e570", "model_path": "/m/g.gguf", "total_slots": 4, "default_generation_settings": {"n_ctx": 8192}});
        let models = serde_json::json!({"data": [{"id": "gemma", "owned_by": "llamacpp"}]});
        let v = serde_json::json!({"version": "0.11.0"});
        let id = from_answers(&[("/props", props), ("models", models), ("/version", v)]);
        assert_eq!(id["llama.cpp.build_info"], "b6666-0c1e570");
        assert_eq!(id["llama.cpp.n_ctx"], "8192");
        assert_eq!(id["llama.cpp.total_slots"], "4");
        assert_eq!(id["models.owned_by"], "llamacpp");
        assert_eq!(id["vllm.version"], "0.11.0");
        assert!(!id.contains_key("models.max_model_len"));
    }
}
