//! The common OpenAI chat chunk read in place: no JSON tree, no allocation (its strings are
//! borrowed from the event unless they hold escapes), only what the measurement needs. The hot
//! path of [`super::stream::BodyFold`] at hundreds of streams (issue 47).
//!
//! It is the dialect's own fast path: it declines everything but the plain chunk with `None`,
//! which [`super::dialect::interpret`] then reads; what it returns is what that interpretation
//! would say (`tests/it/differential.rs` checks it on every replayed case).

use super::think::has_tag;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// Bracket depth above which the chunk is declined (as the dialect's fast path does: skipped
/// members are not depth-limited as a JSON tree is).
const MAX_DEPTH: i32 = 32;

/// What one plain chat chunk says, borrowed from its data.
#[derive(Debug, Default, PartialEq)]
pub struct ChatChunk<'a> {
    /// `id`.
    pub id: Option<Cow<'a, str>>,
    /// `model`.
    pub model: Option<Cow<'a, str>>,
    /// `system_fingerprint`.
    pub system_fingerprint: Option<Cow<'a, str>>,
    /// The choices' answer text: the last non-empty `delta.content`.
    pub text: Option<Cow<'a, str>>,
    /// The last finish_reason that ends a choice (not empty nor `"null"`).
    pub finish: Option<Cow<'a, str>>,
    /// A choice index other than 0 (n > 1).
    pub multi_choice: bool,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Text<'a>>,
    #[serde(borrow, default)]
    model: Option<Text<'a>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Text<'a>>,
    #[serde(borrow)]
    choices: Choices<'a>,
    // present and not null: declined
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
struct Choice<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow)]
    delta: Delta<'a>,
    #[serde(borrow, default)]
    finish_reason: Option<Text<'a>>,
    #[serde(default)]
    text: Option<IgnoredAny>,
    #[serde(default)]
    message: Option<IgnoredAny>,
    #[serde(default)]
    usage: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Text<'a>>,
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

/// A JSON string, borrowed from the data unless it holds escapes (serde reads an
/// `Option<Cow<str>>` always owned); the same strings and errors as a `Cow<str>`.
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// The `choices` array folded as it is read (no vector): whether every choice is plain, and
/// what the plain ones say.
#[derive(Default)]
struct Choices<'a> {
    plain: bool,
    text: Option<Cow<'a, str>>,
    finish: Option<Cow<'a, str>>,
    multi_choice: bool,
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fold<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Fold<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Choices<'a>, S::Error> {
                let mut out = Choices {
                    plain: true,
                    ..Choices::default()
                };
                while let Some(ch) = seq.next_element::<Choice<'a>>()? {
                    out.add(ch);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Fold(std::marker::PhantomData))
    }
}

impl<'a> Choices<'a> {
    fn add(&mut self, ch: Choice<'a>) {
        let d = &ch.delta;
        let plain = ch.text.is_none()
            && ch.message.is_none()
            && ch.usage.is_none()
            && d.reasoning_content.is_none()
            && d.reasoning.is_none()
            && d.tool_calls.is_none()
            && d.refusal.is_none()
            && d.reasoning_details.is_none()
            && !d
                .content
                .as_deref()
                .is_some_and(|t| memchr::memchr(b'<', t.as_bytes()).is_some() && has_tag(t))
            && ch.finish_reason.as_deref().is_none_or(plain_finish);
        if !plain {
            self.plain = false;
            return;
        }
        self.multi_choice |= ch.index != 0;
        if let Some(f) = ch.finish_reason.filter(|f| is_finish(f)) {
            self.finish = Some(f.0);
        }
        if let Some(text) = ch.delta.content.filter(|s| !s.is_empty()) {
            self.text = Some(text.0);
        }
    }
}

/// A finish_reason the plain reading covers: not a failure nor a content filter (those are read
/// by the dialect, which says why).
fn plain_finish(f: &str) -> bool {
    super::dialect::failing_finish(f).is_none() && f.trim() != "content_filter"
}

/// A finish_reason that ends the choice: not empty and not the string `"null"`.
fn is_finish(f: &str) -> bool {
    let f = f.trim();
    !f.is_empty() && f != "null"
}

/// Whether `data` nests brackets deeper than [`MAX_DEPTH`] (brackets inside strings counted
/// too, which only declines more): the fast path leaves such an event to the general one, so
/// both judge it alike (skipped members are not depth-limited as a JSON tree is).
pub fn too_deep(data: &str) -> bool {
    // Depth above MAX_DEPTH needs more than MAX_DEPTH opening brackets in all: counted in
    // byte lanes (a loop the compiler vectorises, 128 bytes per u8 sum), and a chunk has a
    // handful (the exact walk below, a jump per byte, was most of chunk::chat's time at 1,024
    // streams: issue 47).
    let opening: usize = data
        .as_bytes()
        .chunks(128)
        .map(|c| {
            let n = c
                .iter()
                .fold(0u8, |n, &b| n + u8::from(b == b'[' || b == b'{'));
            usize::from(n)
        })
        .sum();
    if opening <= MAX_DEPTH as usize {
        return false;
    }
    too_deep_walk(data)
}

/// [`too_deep`] byte by byte: the depth reached at each bracket.
fn too_deep_walk(data: &str) -> bool {
    let mut depth = 0i32;
    for b in data.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    false
}

/// Reads `data` (an event's trimmed data) as a plain chat chunk; `None` when it is anything
/// else (then the dialect reads it).
pub fn chat(data: &str) -> Option<ChatChunk<'_>> {
    if too_deep(data) {
        return None;
    }
    let c: Chunk = serde_json::from_str(data).ok()?;
    if !c.choices.plain
        || c.usage.is_some()
        || c.error.is_some()
        || c.timings.is_some()
        || c.kind.is_some()
        || c.x_groq.is_some()
    {
        return None;
    }
    Some(ChatChunk {
        id: c.id.map(|t| t.0),
        model: c.model.map(|t| t.0),
        system_fingerprint: c.system_fingerprint.map(|t| t.0),
        text: c.choices.text,
        finish: c.choices.finish,
        multi_choice: c.choices.multi_choice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_chunk_is_read_in_place() {
        let d = r#"{"id":"chatcmpl-sim-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" tok1"},"finish_reason":null}]}"#;
        let c = chat(d).unwrap();
        assert!(matches!(c.text, Some(Cow::Borrowed(" tok1"))));
        assert!(matches!(c.id, Some(Cow::Borrowed("chatcmpl-sim-7"))));
        assert!(c.finish.is_none() && !c.multi_choice);
        let esc = r#"{"choices":[{"delta":{"content":"a\nb"},"finish_reason":"stop"}]}"#;
        let c = chat(esc).unwrap();
        assert_eq!(c.text.as_deref(), Some("a\nb"));
        assert!(c.finish.is_some());
        let two = r#"{"choices":[{"index":1,"delta":{"content":"x"}},{"index":0,"delta":{"content":""}}]}"#;
        let c = chat(two).unwrap();
        assert!(c.multi_choice);
        assert_eq!(c.text.as_deref(), Some("x"));
    }

    #[test]
    fn anything_else_is_left_to_the_dialect() {
        for d in [
            r#"{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":1}}"#,
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"content":"<think>"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"abort"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":" content_filter"}]}"#,
            r#"{"choices":[{"message":{"content":"x"}}]}"#,
            r#"{"choices":{"0":{}}}"#,
            r#"{"choices":[{"delta":{"content":1}}]}"#,
            r#"{"id":"a","id":"b","choices":[]}"#,
            r#"{"type":"message_start","choices":[]}"#,
            r#"{"choices":[]}x"#,
            "[DONE]",
        ] {
            assert!(chat(d).is_none(), "{d}");
        }
        let deep = format!(
            r#"{{"choices":[],"x":{}1{}}}"#,
            "[".repeat(40),
            "]".repeat(40)
        );
        assert!(chat(&deep).is_none());
    }

    #[test]
    fn the_bracket_count_gives_the_walk_s_answer() {
        // 33 nested openings: depth 33 > 32, too deep; 32: not; 40 openings never nested
        // deeper than 1 (`[]` x 40): not, although the count alone exceeds 32; 80 closings first
        // leave the depth at -80, so 34 openings after them reach -46: not
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let cases = [
            nested(33),
            nested(32),
            "[]".repeat(40),
            format!("{{\"a\":{}}}", nested(32)),
            format!("{{\"a\":\"{}\"}}", "{".repeat(40)),
            "]]]]".repeat(20) + &nested(34),
            String::new(),
        ];
        let want = [true, false, false, true, true, false, false];
        for (d, w) in cases.iter().zip(want) {
            assert_eq!(too_deep(d), w, "{d}");
            assert_eq!(too_deep(d), too_deep_walk(d), "{d}");
        }
    }
}
