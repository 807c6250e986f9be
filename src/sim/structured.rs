//! Simulated structured output (`malformed`): a chat request that asks for JSON
//! (`response_format` `json_object` / `json_schema`) gets its tokens as the JSON object
//! `{"answer": "tok1 tok2 ..."}` in `delta.content`; one that offers `tools` (and a
//! `tool_choice` other than `none`) gets a call of the first tool with those arguments, streamed
//! in `delta.tool_calls[0].function.arguments` (the name and call id in the first piece). A share
//! `malformed` of them, drawn per request from the seed, is cut before its closing brace. The
//! timing is the text's: one piece per token event.

use crate::seeded::SplitMix64;
use serde_json::{json, Map, Value};

/// What a chat request's answer looks like.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) enum Shape {
    /// Plain text (` tok1 tok2 ...`).
    #[default]
    Text,
    /// A JSON object in the content; `broken`: cut before its closing brace.
    Json { broken: bool },
    /// A call of tool `name`; `broken`: its arguments cut before their closing brace.
    Tool { name: String, broken: bool },
}

/// The shape a request body asks for (`broken` not drawn yet).
pub(super) fn asked(obj: &Map<String, Value>) -> Shape {
    if obj.get("tool_choice").and_then(Value::as_str) != Some("none") {
        let name = obj
            .get("tools")
            .and_then(Value::as_array)
            .and_then(|t| t.first())
            .and_then(|t| t.get("function")?.get("name")?.as_str());
        if let Some(name) = name {
            return Shape::Tool {
                name: name.chars().take(256).collect(),
                broken: false,
            };
        }
    }
    let kind = obj
        .get("response_format")
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str);
    match kind {
        Some("json_object" | "json_schema") => Shape::Json { broken: false },
        _ => Shape::Text,
    }
}

/// `shape` with its `broken` drawn for request `seq`: malformed with chance `share`.
pub(super) fn drawn(shape: Shape, share: f64, seed: u64, seq: u64) -> Shape {
    let broken =
        share > 0.0 && SplitMix64::for_item(seed ^ 0x0b7e_c7ed_0000_0002, seq).next_f64() < share;
    match shape {
        Shape::Text => Shape::Text,
        Shape::Json { .. } => Shape::Json { broken },
        Shape::Tool { name, .. } => Shape::Tool { name, broken },
    }
}

/// The text of tokens `from..=to` of `total` (1-based): `{"answer": "tok1`, ` tok2`, ...,
/// the last closing with `"}` (or only `"` when broken).
fn fragment(from: u32, to: u32, total: u64, broken: bool) -> String {
    let mut s = String::new();
    for i in from..=to {
        if i == 1 {
            s.push_str("{\"answer\": \"tok1");
        } else {
            s.push_str(&format!(" tok{i}"));
        }
        if u64::from(i) == total {
            s.push_str(if broken { "\"" } else { "\"}" });
        }
    }
    s
}

/// The chat choice carrying tokens `from..=to` in `shape` (`None` for plain text).
pub(super) fn choice(shape: &Shape, from: u32, to: u32, total: u64, seq_id: &str) -> Option<Value> {
    match shape {
        Shape::Text => None,
        Shape::Json { broken } => Some(json!({
            "index": 0,
            "delta": {"content": fragment(from, to, total, *broken)},
            "finish_reason": null
        })),
        Shape::Tool { name, broken } => {
            let mut call = json!({
                "index": 0,
                "function": {"arguments": fragment(from, to, total, *broken)}
            });
            if from == 1 {
                call["id"] = json!(format!("call_{seq_id}"));
                call["type"] = json!("function");
                call["function"]["name"] = json!(name);
            }
            Some(json!({"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_into_the_object_or_its_cut() {
        let whole: String = [(1, 1), (2, 3), (4, 4)]
            .iter()
            .map(|&(a, b)| fragment(a, b, 4, false))
            .collect();
        assert_eq!(whole, "{\"answer\": \"tok1 tok2 tok3 tok4\"}");
        assert!(serde_json::from_str::<Value>(&whole).is_ok());
        let cut: String = fragment(1, 4, 4, true);
        assert_eq!(cut, "{\"answer\": \"tok1 tok2 tok3 tok4\"");
        assert!(serde_json::from_str::<Value>(&cut).is_err());
        assert_eq!(fragment(1, 1, 1, false), "{\"answer\": \"tok1\"}");
    }

    #[test]
    fn what_a_body_asks_and_the_seeded_draw() {
        let obj = |v: Value| v.as_object().unwrap().clone();
        let tools = json!({"tools": [{"type": "function", "function": {"name": "weather"}}]});
        assert_eq!(
            asked(&obj(tools.clone())),
            Shape::Tool {
                name: "weather".into(),
                broken: false
            }
        );
        let mut none = tools;
        none["tool_choice"] = json!("none");
        assert_eq!(asked(&obj(none)), Shape::Text);
        assert_eq!(
            asked(&obj(json!({"response_format": {"type": "json_object"}}))),
            Shape::Json { broken: false }
        );
        assert_eq!(asked(&obj(json!({}))), Shape::Text);
        // share 0 and 1 are certain; a share in between is repeatable per request
        let j = || Shape::Json { broken: false };
        assert_eq!(drawn(j(), 0.0, 1, 5), Shape::Json { broken: false });
        assert_eq!(drawn(j(), 1.0, 1, 5), Shape::Json { broken: true });
        assert_eq!(drawn(j(), 0.3, 9, 5), drawn(j(), 0.3, 9, 5));
        let broken = (0..1000)
            .filter(|&i| drawn(j(), 0.3, 9, i) == Shape::Json { broken: true })
            .count();
        assert!((250..350).contains(&broken), "{broken}");
    }
}
