//! The bytes of one simulated completion: OpenAI chat and completions chunks, the final
//! response, the usage chunk; token events written without a JSON tree on the hot path.

use bytes::Bytes;
use serde_json::{json, Value};

/// The OpenAI route a generation request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    Chat,
    Completions,
}

/// Fixed fields of one simulated completion.
pub(super) struct ChunkCtx {
    pub(super) api: Api,
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) finish_reason: &'static str,
}

/// Text of token `i` (1-based).
pub(super) fn token_text(i: u32) -> String {
    format!(" tok{i}")
}

impl ChunkCtx {
    pub(super) fn object(&self) -> &'static str {
        match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    pub(super) fn role_chunk(&self) -> Value {
        self.chunk(json!([{
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "finish_reason": null
        }]))
    }

    /// The SSE event carrying tokens `from..=to` (1-based): the bytes of
    /// `sse(&self.token_chunk(from, to))`, written directly (the simulator shares the CPU with
    /// the client it measures, so its per-event cost is kept small).
    pub(super) fn token_event(&self, from: u32, to: u32) -> Bytes {
        use std::fmt::Write;
        let mut text = String::with_capacity(8 * (to + 1 - from) as usize);
        for i in from..=to {
            let _ = write!(text, " tok{i}");
        }
        // token texts are ASCII letters, digits and spaces: no JSON escaping needed
        let (id, model) = (
            Value::from(self.id.as_str()),
            Value::from(self.model.as_str()),
        );
        let choice = match self.api {
            Api::Chat => {
                format!(r#"{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}"#)
            }
            Api::Completions => {
                format!(r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":null}}"#)
            }
        };
        Bytes::from(format!(
            "data: {{\"id\":{id},\"object\":\"{}\",\"created\":{},\"model\":{model},\"choices\":[{choice}]}}\n\n",
            self.object(),
            self.created
        ))
    }

    /// The chunk carrying tokens `from..=to` (1-based).
    #[cfg(test)]
    pub(super) fn token_chunk(&self, from: u32, to: u32) -> Value {
        let text: String = (from..=to).map(token_text).collect();
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]),
            Api::Completions => {
                json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": null}])
            }
        })
    }

    pub(super) fn finish_chunk(&self) -> Value {
        let reason = self.finish_reason;
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {}, "finish_reason": reason}]),
            Api::Completions => {
                json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": reason}])
            }
        })
    }

    pub(super) fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }

    pub(super) fn usage_chunk(&self) -> Value {
        let mut v = self.chunk(json!([]));
        if let Value::Object(o) = &mut v {
            o.insert("usage".to_string(), self.usage());
        }
        v
    }

    pub(super) fn full_response(&self) -> Value {
        let n = self.completion_tokens as u32;
        let text: String = (1..=n).map(token_text).collect();
        let choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self.finish_reason,
            }),
            Api::Completions => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": self.finish_reason,
            }),
        };
        json!({
            "id": self.id,
            "object": match self.api {
                Api::Chat => "chat.completion",
                Api::Completions => "text_completion",
            },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        })
    }
}

pub(super) fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_event_bytes_equal_the_serialized_chunk() {
        for api in [Api::Chat, Api::Completions] {
            let ctx = ChunkCtx {
                api,
                id: "chatcmpl-sim-7".into(),
                created: 1_700_000_000,
                model: "a \"quoted\" model\\".into(),
                prompt_tokens: 3,
                completion_tokens: 9,
                finish_reason: "length",
            };
            for (from, to) in [(1, 1), (2, 5), (9, 9)] {
                let fast = ctx.token_event(from, to);
                let slow = sse(&ctx.token_chunk(from, to));
                assert_eq!(fast, slow, "{api:?} {from}..={to}");
                let v: Value = serde_json::from_slice(&fast[6..]).unwrap();
                assert_eq!(v["model"], "a \"quoted\" model\\");
            }
        }
    }
}
