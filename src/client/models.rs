//! What `GET <base>/models` says the server offers: parsed once before the warmup, so that a
//! wrong model name is named as such (the models the server lists) instead of sending the user
//! to check base_url, and a typo the server accepts anyway is noted rather than measured
//! silently.

/// The most of a `/models` body read. Every id in it is kept (at most ~25,000: `{"id":"a"},`
/// is 11 bytes), so memory is bounded by the body, not by a count of ids: a model listed after
/// the 200th (vLLM with many LoRA adapters) is found. A longer body is cut, no longer JSON,
/// and says nothing: the model is then not checked, never refused on a partial list.
pub const MODELS_BODY_BYTES: usize = 256 * 1024;
/// The longest model id shown in a message, in characters; longer ones are clipped there only
/// (compared whole).
const MAX_ID_CHARS: usize = 200;
/// Model ids shown in a message at most; the rest are counted.
const SHOWN: usize = 8;

/// Model ids from an OpenAI-style list (`{"data": [{"id": ...}]}`, which vLLM, SGLang, TGI,
/// llama.cpp, Ollama's `/v1` and Anthropic serve) or a `{"models": [{"name"|"model"|"id": ...}]}`
/// list. `None` when the body is neither (not JSON, or another shape): then nothing is known.
pub fn parse_ids(body: &str) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let (list, keys): (&Vec<serde_json::Value>, &[&str]) =
        match (v.get("data").and_then(|d| d.as_array()), v.get("models")) {
            (Some(d), _) => (d, &["id"]),
            (None, Some(m)) => (m.as_array()?, &["id", "model", "name"]),
            (None, None) => return None,
        };
    let ids: Vec<String> = list
        .iter()
        .filter_map(|m| keys.iter().find_map(|k| m.get(*k)?.as_str()))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .collect();
    Some(ids)
}

/// `a`, `b`, `c` and N more: ids for a message, backquoted, each clipped to
/// [`MAX_ID_CHARS`].
pub fn shown(ids: &[String]) -> String {
    let mut s: Vec<String> = ids
        .iter()
        .take(SHOWN)
        .map(|i| format!("`{}`", i.chars().take(MAX_ID_CHARS).collect::<String>()))
        .collect();
    if ids.len() > SHOWN {
        s.push(format!("{} more", ids.len() - SHOWN));
    }
    s.join(", ")
}

/// The note for a configured model the server does not list; `None` when it is listed or
/// nothing is known (an empty list says nothing either).
pub fn unlisted_note(model: &str, listed: Option<&[String]>) -> Option<String> {
    let ids = listed.filter(|l| !l.is_empty())?;
    if ids.iter().any(|i| i == model) {
        return None;
    }
    Some(format!(
        "model `{model}` is not among the models the server lists at GET <base_url>/models ({}): a server that accepts any name measures a typo silently; check endpoint.model",
        shown(ids)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_openai_list_and_the_models_list() {
        let openai = r#"{"object":"list","data":[{"id":"gemma-3-270m","object":"model","owned_by":"llamacpp"},{"id":"qwen"}]}"#;
        assert_eq!(parse_ids(openai).unwrap(), ["gemma-3-270m", "qwen"]);
        // llama.cpp's newer servers send both; `data` wins.
        let both = r#"{"models":[{"name":"a.gguf","model":"a.gguf"}],"data":[{"id":"a"}]}"#;
        assert_eq!(parse_ids(both).unwrap(), ["a"]);
        let models = r#"{"models":[{"name":"llama3:8b"},{"model":"m2"},{"x":1}]}"#;
        assert_eq!(parse_ids(models).unwrap(), ["llama3:8b", "m2"]);
        assert_eq!(parse_ids(r#"{"data":[]}"#).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn anything_else_says_nothing() {
        for body in [
            "",
            "not json",
            "[]",
            r#"{"error":"nope"}"#,
            r#"{"data":{"id":"a"}}"#,
        ] {
            assert_eq!(parse_ids(body), None, "{body}");
        }
    }

    #[test]
    fn a_hostile_list_is_bounded() {
        let ids: Vec<String> = (0..400)
            .map(|i| format!("{{\"id\":\"{}{i}\"}}", "m".repeat(500)))
            .collect();
        let body = format!("{{\"data\":[{}]}}", ids.join(","));
        assert!(body.len() < MODELS_BODY_BYTES);
        let got = parse_ids(&body).unwrap();
        assert_eq!(got.len(), 400);
        let text = shown(&got);
        assert_eq!(text.matches('`').count(), 2 * 8);
        assert!(text.ends_with(", 392 more"), "{text}");
        assert!(text.len() < 8 * (MAX_ID_CHARS + 4) + 20, "{}", text.len());
    }

    /// Issue 26: only the first 200 ids were kept, so `--require-listed-model` refused a model
    /// listed 201st (vLLM with many LoRA adapters), and "192 more" undercounted the list.
    #[test]
    fn a_model_listed_after_the_200th_is_found() {
        let ids: Vec<String> = (0..1000)
            .map(|i| format!("{{\"id\":\"lora-{i}\",\"object\":\"model\"}}"))
            .collect();
        let body = format!("{{\"object\":\"list\",\"data\":[{}]}}", ids.join(","));
        let got = parse_ids(&body).unwrap();
        assert_eq!(got.len(), 1000);
        assert_eq!(unlisted_note("lora-999", Some(&got)), None);
        let note = unlisted_note("lora-1000", Some(&got)).unwrap();
        assert!(note.contains("`lora-7`, 992 more)"), "{note}");
        // A model id longer than the shown clip is compared whole.
        let long = "x".repeat(300);
        let got = parse_ids(&format!("{{\"data\":[{{\"id\":\"{long}\"}}]}}")).unwrap();
        assert_eq!(unlisted_note(&long, Some(&got)), None);
        // A body cut at MODELS_BODY_BYTES is not JSON: nothing is known, nothing refused.
        assert_eq!(parse_ids(&body[..body.len() / 2]), None);
    }

    #[test]
    fn the_note_names_the_listed_models_only_when_the_model_is_not_one() {
        let listed = vec!["gemma-3-270m".to_string(), "qwen".to_string()];
        assert_eq!(unlisted_note("gemma-3-270m", Some(&listed)), None);
        assert_eq!(unlisted_note("gema-3-270m", None), None);
        assert_eq!(unlisted_note("gema-3-270m", Some(&[])), None);
        assert_eq!(
            unlisted_note("gema-3-270m", Some(&listed)).unwrap(),
            "model `gema-3-270m` is not among the models the server lists at GET <base_url>/models (`gemma-3-270m`, `qwen`): a server that accepts any name measures a typo silently; check endpoint.model"
        );
    }
}
