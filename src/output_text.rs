//! The answer text of one request, kept bounded (docs/ab.md "Outputs that changed"): a hash of
//! the whole text, its length in characters, and only its first [`KEEP_CHARS`] characters (with
//! where each token event ended in them), so that two arms' answers to the same request can be
//! compared and their first difference shown without holding a long answer in memory or in the
//! results file (only the hash and the length are written per request). Pure.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Characters of an answer kept in memory to locate a first difference (2 KiB to 8 KiB of
/// UTF-8, per request in flight or recorded): a difference beyond it is known only as "after
/// character 2048" (the hashes differ).
pub const KEEP_CHARS: usize = 2048;

/// An answer's text as streamed (the answer channel: chat `delta.content`, completions `text`,
/// Responses `output_text`; reasoning fields and tool calls are not in it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OutputText {
    /// sha256 of the whole text, its first 16 hex characters.
    pub sha256: String,
    /// The whole text's length in characters (Unicode scalar values).
    pub chars: u64,
    /// The text's first [`KEEP_CHARS`] characters: in memory only, never written.
    #[serde(skip)]
    pub head: String,
    /// Where each token event ended in `head`, in characters (cumulative), while inside it: in
    /// memory only.
    #[serde(skip)]
    pub event_ends: Vec<u32>,
}

/// Builds an [`OutputText`] one streamed piece at a time.
#[derive(Debug, Clone, Default)]
pub struct OutputBuilder {
    hasher: Sha256,
    chars: u64,
    head: String,
    head_chars: usize,
    event_ends: Vec<u32>,
    pieces: u64,
}

impl OutputBuilder {
    /// Adds the text one token event carried.
    pub fn push(&mut self, text: &str) {
        self.pieces += 1;
        self.hasher.update(text.as_bytes());
        let n = text.chars().count();
        self.chars += n as u64;
        if self.head_chars < KEEP_CHARS {
            let room = KEEP_CHARS - self.head_chars;
            // the first `room` characters, as a slice (no allocation per event)
            let take = if n <= room {
                text
            } else {
                text.char_indices()
                    .nth(room)
                    .map_or(text, |(end, _)| &text[..end])
            };
            self.head_chars += n.min(room);
            self.head.push_str(take);
            if n <= room {
                self.event_ends.push(self.head_chars as u32);
            }
        }
    }

    /// The text, or `None` when no token event carried any.
    pub fn finish(self) -> Option<OutputText> {
        if self.pieces == 0 {
            return None;
        }
        let d = self.hasher.finalize();
        Some(OutputText {
            sha256: d.iter().take(8).map(|b| format!("{b:02x}")).collect(),
            chars: self.chars,
            head: self.head,
            event_ends: self.event_ends,
        })
    }
}

impl OutputText {
    /// Drops the kept text (the hash and length stay): a request whose answer will not be
    /// compared (sampling that is not deterministic) holds no text in memory.
    pub fn forget_text(&mut self) {
        self.head = String::new();
        self.event_ends = Vec::new();
    }

    /// The text of `s` as one piece (tests, and answers read whole).
    pub fn of(s: &str) -> OutputText {
        let mut b = OutputBuilder::default();
        b.push(s);
        b.finish().unwrap_or_default()
    }
}

/// Where two answers first differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstDifference {
    /// The answers are the same (same hash and length).
    Same,
    /// At this character (0-based: the length of their common prefix).
    At(u64),
    /// After the kept heads (both [`KEEP_CHARS`] long and equal): the exact place is not kept.
    Beyond(u64),
    /// They differ, but at least one was written without its text (read back from a file).
    Unknown,
}

/// Where `a` and `b` first differ, in characters.
pub fn first_difference(a: &OutputText, b: &OutputText) -> FirstDifference {
    if a.sha256 == b.sha256 && a.chars == b.chars {
        return FirstDifference::Same;
    }
    if !text_kept(a) || !text_kept(b) {
        return FirstDifference::Unknown;
    }
    let common = a
        .head
        .chars()
        .zip(b.head.chars())
        .take_while(|(x, y)| x == y)
        .count() as u64;
    let (ha, hb) = (
        a.chars.min(KEEP_CHARS as u64),
        b.chars.min(KEEP_CHARS as u64),
    );
    if common == ha.min(hb) && ha == KEEP_CHARS as u64 && hb == KEEP_CHARS as u64 {
        FirstDifference::Beyond(KEEP_CHARS as u64)
    } else {
        FirstDifference::At(common)
    }
}

/// The token event (0-based) of `o` whose text holds character `at`, when the event ends were
/// kept that far: with one token per event (llama.cpp, vLLM's default) the token position.
pub fn event_at(o: &OutputText, at: u64) -> Option<u64> {
    let i = o.event_ends.partition_point(|&end| u64::from(end) <= at);
    (i < o.event_ends.len()).then_some(i as u64)
}

/// Whether `o`'s text was kept as far as it goes (up to [`KEEP_CHARS`]): not for an answer read
/// back from a file, which holds its hash and length only.
pub fn text_kept(o: &OutputText) -> bool {
    o.head.chars().count() as u64 == o.chars.min(KEEP_CHARS as u64)
}

/// At most `width` characters of `o`'s kept text from character `from` (a snippet for the
/// reader; empty when nothing is kept there).
pub fn snippet(o: &OutputText, from: u64, width: usize) -> String {
    o.head.chars().skip(from as usize).take(width).collect()
}

/// What a run's answers were compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputsReference {
    /// `perfgate ab`'s base arm, measured now: its answers' text is in memory, so where a pair
    /// first differs and both snippets are known.
    #[default]
    BaseArm,
    /// `perfgate check`'s committed baseline, which keeps each answer's hash and length only:
    /// that a pair differs is known, where it differs is not (no `at_char`, `at_token` or base
    /// snippet).
    Baseline,
}

/// The comparison of a run's answers with its reference's (docs/ab.md "Outputs that changed":
/// `perfgate ab`'s two arms, or `perfgate check` against a baseline that keeps them), the
/// figures behind the `outputs` check; written per scenario in the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputsSummary {
    /// What the answers were compared with (results written before it: the base arm).
    #[serde(default)]
    pub reference: OutputsReference,
    /// Candidate requests whose answer was compared with the reference's answer to the same
    /// request (both succeeded and carried answer text): the base arm's, or the first bless
    /// run's that answered it.
    pub pairs: u64,
    /// Of those, the ones whose answers differ.
    pub differing: u64,
    /// The reference's own repeatability: pairs of its requests that sent the same request
    /// (the same prompt-set entry and limit, or the one fixed prompt; in a baseline also each
    /// later bless run's request against the first run's of its index), compared alike.
    pub self_pairs: u64,
    /// Of those, the ones whose answers differ (a server that is not batch-invariant).
    pub self_differing: u64,
    /// Where the differing pairs first differ, in characters (0-based: the common prefix's
    /// length): the smallest, the median (lower middle) and the largest; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_difference_chars: Option<[u64; 3]>,
    /// The first differing pairs (at most [`EXAMPLES`]), with what each arm wrote there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<OutputDiff>,
}

/// Differing pairs shown in [`OutputsSummary::examples`].
pub const EXAMPLES: usize = 5;

/// Characters of each arm's answer shown from a first difference on (and a few before it).
pub const SNIPPET_CHARS: usize = 60;

/// Characters of common text shown before a first difference.
pub const CONTEXT_CHARS: u64 = 20;

/// One differing pair of answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputDiff {
    /// The request's index in the run (its `work.index`; its place in start order for a fixed
    /// prompt).
    pub index: u64,
    /// Where the answers first differ, characters (0-based); absent when only their hashes are
    /// known to differ (beyond the kept text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_char: Option<u64>,
    /// The base answer's token event holding that character (0-based): the token position when
    /// the server streams one token per event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_token: Option<u64>,
    /// The base answer from up to [`CONTEXT_CHARS`] before the difference, [`SNIPPET_CHARS`]
    /// after it at most; absent when the reference kept no text (a baseline keeps the hash and
    /// length only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The candidate's answer over the same span (from its start when where they differ is
    /// unknown).
    pub candidate: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_the_common_prefix_length_in_characters() {
        // " tok1 tok2 tok3" against " tok1 alt2 alt3": the common prefix " tok1 " is 6 chars
        let mut a = OutputBuilder::default();
        let mut b = OutputBuilder::default();
        for (x, y) in [(" tok1", " tok1"), (" tok2", " alt2"), (" tok3", " alt3")] {
            a.push(x);
            b.push(y);
        }
        let (a, b) = (a.finish().unwrap(), b.finish().unwrap());
        assert_eq!(a.chars, 15);
        assert_eq!(a.event_ends, [5, 10, 15]);
        assert_eq!(a.sha256.len(), 16);
        assert_eq!(first_difference(&a, &b), FirstDifference::At(6));
        // character 6 ('t' of tok2) is in the second event (0-based 1), which ends at 10
        assert_eq!(event_at(&a, 6), Some(1));
        assert_eq!(event_at(&a, 15), None);
        assert_eq!(snippet(&a, 6, 4), "tok2");
        assert_eq!(snippet(&b, 6, 100), "alt2 alt3");
        assert_eq!(first_difference(&a, &a.clone()), FirstDifference::Same);
        // one is a prefix of the other: the difference is where the shorter ends
        assert_eq!(
            first_difference(&OutputText::of("abc"), &OutputText::of("abcd")),
            FirstDifference::At(3)
        );
        // multi-byte characters count once: "é" is one character
        assert_eq!(
            first_difference(&OutputText::of("héllo"), &OutputText::of("hélo")),
            FirstDifference::At(3)
        );
    }

    #[test]
    fn only_the_head_is_kept_and_a_late_difference_is_beyond_it() {
        let long_a = "a".repeat(KEEP_CHARS + 10);
        let long_b = format!("{}b", "a".repeat(KEEP_CHARS + 9));
        let (a, b) = (OutputText::of(&long_a), OutputText::of(&long_b));
        assert_eq!(a.head.chars().count(), KEEP_CHARS);
        assert_eq!(a.chars, KEEP_CHARS as u64 + 10);
        // one event longer than the head: its end is not inside it
        assert!(a.event_ends.is_empty());
        assert_eq!(
            first_difference(&a, &b),
            FirstDifference::Beyond(KEEP_CHARS as u64)
        );
        // read back from JSON: the hash and length only
        let back: OutputText = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert!(back.head.is_empty());
        assert_eq!(first_difference(&back, &b), FirstDifference::Unknown);
        assert_eq!(first_difference(&back, &a), FirstDifference::Same);
        assert_eq!(OutputBuilder::default().finish(), None);
    }

    #[test]
    fn a_piece_that_crosses_the_head_s_end_keeps_whole_characters() {
        // KEEP_CHARS - 2 ASCII characters, then a piece of 4 two-byte characters: 2 of them fit
        // (the head ends at KEEP_CHARS characters, KEEP_CHARS - 2 + 4 bytes), the piece's end is
        // not inside it, and a later piece adds to the length only
        let mut b = OutputBuilder::default();
        b.push(&"a".repeat(KEEP_CHARS - 2));
        b.push("éééé");
        b.push("xy");
        let o = b.finish().unwrap();
        assert_eq!(o.head, format!("{}éé", "a".repeat(KEEP_CHARS - 2)));
        assert_eq!(o.head.len(), KEEP_CHARS - 2 + 4);
        assert_eq!(o.chars, KEEP_CHARS as u64 + 4);
        assert_eq!(o.event_ends, vec![KEEP_CHARS as u32 - 2]);
        // the same text as one piece: the same hash and length
        let whole = OutputText::of(&format!("{}ééééxy", "a".repeat(KEEP_CHARS - 2)));
        assert_eq!((whole.sha256, whole.chars), (o.sha256, o.chars));
    }
}
