//! The bytes of one simulated completion: OpenAI chat and completions chunks, the final
//! response, the usage chunk, and the typed events of the Responses API (`event:` line, `data:`
//! JSON with `type` and `sequence_number`); token events written without a JSON tree on the hot
//! path.

use bytes::Bytes;
use serde_json::{json, Value};

/// The OpenAI route a generation request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    Chat,
    Completions,
    /// The Responses API (`POST /v1/responses`).
    Responses,
}

/// Events of a Responses API stream before its first delta: `response.created`,
/// `response.in_progress`, `response.output_item.added`, `response.content_part.added`.
pub(super) const RESPONSES_PREAMBLE: u64 = 4;

/// Fixed fields of one simulated completion.
pub(super) struct ChunkCtx {
    pub(super) api: Api,
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) finish_reason: &'static str,
    /// Cached prompt tokens to report (`cache_report` applied): chat's and completions'
    /// `usage.prompt_tokens_details.cached_tokens`, the Responses API's
    /// `usage.input_tokens_details.cached_tokens`. `None` = no such field.
    pub(super) cached_tokens: Option<u64>,
    /// The first token (1-based) of a diverging answer ([`super::diverge`]); `None`: the
    /// answer is ` tok1 tok2 ...`.
    pub(super) diverge_from: Option<u32>,
    /// Speculative decoding (`draft_n`): (drafted, accepted), written as llama.cpp's
    /// `timings.draft_n` / `draft_n_accepted` on the last chunk ([`ChunkCtx::with_timings`]).
    pub(super) drafts: Option<(u64, u64)>,
    /// What the answer looks like: text, a JSON object or a tool call ([`super::structured`]).
    pub(super) shape: super::structured::Shape,
}

impl ChunkCtx {
    /// Text of token `i` (1-based): ` tok{i}`, or ` alt{i}` once the answer diverged.
    pub(super) fn token_text(&self, i: u32) -> String {
        format!(" {}{i}", super::diverge::word(i, self.diverge_from))
    }

    pub(super) fn object(&self) -> &'static str {
        match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
            Api::Responses => "response",
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
    /// the client it measures, so its per-event cost is kept small). For the Responses API, the
    /// `response.output_text.delta` event with sequence number `n` ([`ChunkCtx::delta_event`]);
    /// the other APIs have no sequence numbers and ignore `n`.
    pub(super) fn token_event(&self, from: u32, to: u32, n: u64) -> Bytes {
        use std::fmt::Write;
        let mut text = String::with_capacity(8 * (to + 1 - from) as usize);
        for i in from..=to {
            let _ = write!(text, " {}{i}", super::diverge::word(i, self.diverge_from));
        }
        // token texts are ASCII letters, digits and spaces: no JSON escaping needed
        let (id, model) = (
            Value::from(self.id.as_str()),
            Value::from(self.model.as_str()),
        );
        if self.api == Api::Chat {
            let total = self.completion_tokens;
            if let Some(c) = super::structured::choice(&self.shape, from, to, total, &self.id) {
                return sse(&self.chunk(json!([c])));
            }
        }
        let choice = match self.api {
            Api::Chat => {
                format!(r#"{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}"#)
            }
            Api::Completions => {
                format!(r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":null}}"#)
            }
            Api::Responses => return self.delta_event(from, to, n),
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
        let text: String = (from..=to).map(|i| self.token_text(i)).collect();
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]),
            Api::Completions | Api::Responses => {
                json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": null}])
            }
        })
    }

    pub(super) fn finish_chunk(&self) -> Value {
        let reason = self.finish_reason;
        self.chunk(match self.api {
            Api::Chat => json!([{"index": 0, "delta": {}, "finish_reason": reason}]),
            Api::Completions | Api::Responses => {
                json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": reason}])
            }
        })
    }

    /// Chat and completions usage; with a cached count, vLLM's and OpenAI's
    /// `prompt_tokens_details: {cached_tokens}`.
    pub(super) fn usage(&self) -> Value {
        let mut u = json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        });
        if let (Some(n), Value::Object(o)) = (self.cached_tokens, &mut u) {
            o.insert(
                "prompt_tokens_details".to_string(),
                json!({"cached_tokens": n}),
            );
        }
        u
    }

    /// `v` with llama.cpp's `timings` (its draft counts) when the request drafted; unchanged
    /// otherwise.
    pub(super) fn with_timings(&self, mut v: Value) -> Value {
        if let (Some((drafted, accepted)), Value::Object(o)) = (self.drafts, &mut v) {
            o.insert(
                "timings".to_string(),
                json!({
                    "predicted_n": self.completion_tokens,
                    "draft_n": drafted,
                    "draft_n_accepted": accepted,
                }),
            );
        }
        v
    }

    pub(super) fn usage_chunk(&self) -> Value {
        let mut v = self.chunk(json!([]));
        if let Value::Object(o) = &mut v {
            o.insert("usage".to_string(), self.usage());
        }
        v
    }

    pub(super) fn full_response(&self) -> Value {
        if self.api == Api::Responses {
            return self.response_object(true);
        }
        let text = self.full_text();
        let choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self.finish_reason,
            }),
            Api::Completions | Api::Responses => json!({
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
                Api::Completions | Api::Responses => "text_completion",
            },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
        })
    }

    /// The whole generated text.
    fn full_text(&self) -> String {
        (1..=self.completion_tokens as u32)
            .map(|i| self.token_text(i))
            .collect()
    }

    /// The Responses API ended the answer at `max_output_tokens` (OpenAI's `status:
    /// "incomplete"`, `incomplete_details.reason: "max_output_tokens"`), not on its own.
    fn incomplete(&self) -> bool {
        self.finish_reason == "length"
    }

    /// The id of the one output item (a message).
    fn item_id(&self) -> String {
        format!("msg_{}", self.id.trim_start_matches("resp_"))
    }

    /// Responses API usage, as OpenAI sends it (without `input_tokens_details` when no cached
    /// count is reported).
    fn responses_usage(&self) -> Value {
        let mut u = serde_json::Map::new();
        u.insert("input_tokens".into(), self.prompt_tokens.into());
        if let Some(n) = self.cached_tokens {
            u.insert("input_tokens_details".into(), json!({"cached_tokens": n}));
        }
        u.insert("output_tokens".into(), self.completion_tokens.into());
        u.insert(
            "output_tokens_details".into(),
            json!({"reasoning_tokens": 0}),
        );
        u.insert(
            "total_tokens".into(),
            (self.prompt_tokens + self.completion_tokens).into(),
        );
        Value::Object(u)
    }

    /// The output message item; `done` = with its text and final status.
    fn message_item(&self, done: bool) -> Value {
        let (status, content) = if !done {
            ("in_progress", json!([]))
        } else {
            (
                if self.incomplete() {
                    "incomplete"
                } else {
                    "completed"
                },
                json!([self.text_part(true)]),
            )
        };
        json!({
            "id": self.item_id(),
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        })
    }

    fn text_part(&self, done: bool) -> Value {
        let text = if done {
            self.full_text()
        } else {
            String::new()
        };
        json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
    }

    /// The `response` object: `done` = the final one (status, output, usage), else the one of
    /// `response.created` / `response.in_progress`.
    fn response_object(&self, done: bool) -> Value {
        let status = match (done, self.incomplete()) {
            (false, _) => "in_progress",
            (true, true) => "incomplete",
            (true, false) => "completed",
        };
        let (output, usage) = if done {
            (json!([self.message_item(true)]), self.responses_usage())
        } else {
            (json!([]), Value::Null)
        };
        let incomplete_details = if done && self.incomplete() {
            json!({"reason": "max_output_tokens"})
        } else {
            Value::Null
        };
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": null,
            "incomplete_details": incomplete_details,
            "model": self.model,
            "output": output,
            "usage": usage,
        })
    }

    /// Event `n` (0-based, its `sequence_number`) of a streamed Responses API answer that is not
    /// a delta: 0-3 before the first token (`response.created`, `response.in_progress`,
    /// `response.output_item.added`, `response.content_part.added`), then after the last
    /// token, with `deltas` delta events in between: `response.output_text.done`,
    /// `response.content_part.done`, `response.output_item.done` and `response.completed` (or
    /// `response.incomplete` when `max_output_tokens` cut the answer). `None` past the end.
    pub(super) fn responses_event(&self, n: u64, deltas: u64) -> Option<Bytes> {
        let item = |extra: Value| {
            let mut v = json!({"item_id": self.item_id(), "output_index": 0, "content_index": 0});
            if let (Value::Object(o), Value::Object(e)) = (&mut v, extra) {
                o.extend(e);
            }
            v
        };
        let (kind, body) = match n {
            0 => (
                "response.created",
                json!({"response": self.response_object(false)}),
            ),
            1 => (
                "response.in_progress",
                json!({"response": self.response_object(false)}),
            ),
            2 => (
                "response.output_item.added",
                json!({"output_index": 0, "item": self.message_item(false)}),
            ),
            3 => (
                "response.content_part.added",
                item(json!({"part": self.text_part(false)})),
            ),
            _ => match n.checked_sub(RESPONSES_PREAMBLE + deltas)? {
                0 => (
                    "response.output_text.done",
                    item(json!({"text": self.full_text(), "logprobs": []})),
                ),
                1 => (
                    "response.content_part.done",
                    item(json!({"part": self.text_part(true)})),
                ),
                2 => (
                    "response.output_item.done",
                    json!({"output_index": 0, "item": self.message_item(true)}),
                ),
                3 => (
                    if self.incomplete() {
                        "response.incomplete"
                    } else {
                        "response.completed"
                    },
                    json!({"response": self.response_object(true)}),
                ),
                _ => return None,
            },
        };
        let mut v = json!({"type": kind, "sequence_number": n});
        if let (Value::Object(o), Value::Object(b)) = (&mut v, body) {
            o.extend(b);
        }
        Some(typed_sse(&v))
    }

    /// The `response.output_text.delta` event carrying tokens `from..=to` (1-based) with
    /// sequence number `n`: the bytes of `typed_sse(&self.delta_value(from, to, n))`, written
    /// directly.
    pub(super) fn delta_event(&self, from: u32, to: u32, n: u64) -> Bytes {
        use std::fmt::Write;
        let mut text = String::with_capacity(8 * (to + 1 - from) as usize);
        for i in from..=to {
            let _ = write!(text, " {}{i}", super::diverge::word(i, self.diverge_from));
        }
        let item = Value::from(self.item_id());
        Bytes::from(format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{n},\"item_id\":{item},\"output_index\":0,\"content_index\":0,\"delta\":\"{text}\",\"logprobs\":[]}}\n\n"
        ))
    }

    /// The delta event of [`ChunkCtx::delta_event`] as a JSON tree.
    #[cfg(test)]
    pub(super) fn delta_value(&self, from: u32, to: u32, n: u64) -> Value {
        let text: String = (from..=to).map(|i| self.token_text(i)).collect();
        json!({
            "type": "response.output_text.delta",
            "sequence_number": n,
            "item_id": self.item_id(),
            "output_index": 0,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        })
    }
}

/// A Responses API event: `event: TYPE` and the data line.
pub(super) fn typed_sse(v: &Value) -> Bytes {
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    Bytes::from(format!("event: {kind}\ndata: {v}\n\n"))
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
                cached_tokens: None,
                diverge_from: None,
                drafts: None,
                shape: Default::default(),
            };
            for (from, to) in [(1, 1), (2, 5), (9, 9)] {
                let fast = ctx.token_event(from, to, 0);
                let slow = sse(&ctx.token_chunk(from, to));
                assert_eq!(fast, slow, "{api:?} {from}..={to}");
                let v: Value = serde_json::from_slice(&fast[6..]).unwrap();
                assert_eq!(v["model"], "a \"quoted\" model\\");
            }
        }
    }

    #[test]
    fn responses_events_in_order() {
        let ctx = ChunkCtx {
            api: Api::Responses,
            id: "resp_sim-7".into(),
            created: 1_700_000_000,
            model: "a \"quoted\" model\\".into(),
            prompt_tokens: 3,
            completion_tokens: 2,
            finish_reason: "length",
            cached_tokens: Some(0),
            diverge_from: None,
            drafts: None,
            shape: Default::default(),
        };
        for (from, to, n) in [(1, 1, 4), (2, 2, 5), (1, 2, 9)] {
            let fast = ctx.delta_event(from, to, n);
            assert_eq!(fast, typed_sse(&ctx.delta_value(from, to, n)));
            assert_eq!(fast, ctx.token_event(from, to, n));
        }
        // 4 before the deltas, 2 deltas, 4 after
        let parse = |b: Bytes| {
            let s = String::from_utf8(b.to_vec()).unwrap();
            let (ev, data) = s.split_once('\n').unwrap();
            let v: Value =
                serde_json::from_str(data.strip_prefix("data: ").unwrap().trim()).unwrap();
            assert_eq!(ev, format!("event: {}", v["type"].as_str().unwrap()));
            v
        };
        let kinds: Vec<String> = [0, 1, 2, 3, 6, 7, 8, 9]
            .into_iter()
            .map(|n| {
                let v = parse(ctx.responses_event(n, 2).unwrap());
                assert_eq!(v["sequence_number"], n);
                v["type"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.incomplete",
            ]
        );
        assert!(ctx.responses_event(10, 2).is_none());
        let last = parse(ctx.responses_event(9, 2).unwrap());
        assert_eq!(last["response"]["status"], "incomplete");
        assert_eq!(
            last["response"]["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(last["response"]["usage"]["output_tokens"], 2);
        assert_eq!(last["response"]["model"], "a \"quoted\" model\\");
        assert_eq!(
            last["response"]["output"][0]["content"][0]["text"],
            " tok1 tok2"
        );
        let done = ChunkCtx {
            finish_reason: "stop",
            ..ctx
        };
        let last = parse(done.responses_event(9, 2).unwrap());
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["status"], "completed");
        assert_eq!(last["response"]["incomplete_details"], Value::Null);
    }
}
