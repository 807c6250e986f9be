//! Reasoning inside answer text: `<think>` / `<thought>` tags in the streamed text (DeepSeek-R1 on
//! some hosts, Groq `reasoning_format: raw`, MiniMax M2, Gemini `include_thoughts`), read piece
//! by piece as the events arrive. Pure: text and arrival times in, what each piece was out.
//!
//! - Text between an opening and a closing tag is reasoning; a tag is reasoning too.
//! - A closing tag never opened (MiniMax M2 streams its reasoning untagged and closes it with
//!   `</think>`) makes the text before it reasoning, but only while nothing told answer text
//!   apart from reasoning: it must be the stream's first tag, come before any other reasoning
//!   channel or non-text answer (tool call, refusal), and start its piece (only whitespace
//!   before it in that piece, as the special token MiniMax emits). Anywhere else it is text the
//!   answer talks about ("use </think> to close"): answer text, noted
//!   ([`Piece::ignored_close`]).
//! - A tag split over pieces (`<thi`, `nk>`) is recognised: the end of a piece that could begin
//!   a tag (at most [`LONGEST_TAG`] - 1 bytes) is held back until the next piece says what it
//!   is; held-back text that was not a tag counts as answer text at the time it arrived.

/// Tags that open reasoning inside answer text.
const OPEN: [&str; 2] = ["<think>", "<thought>"];
/// Tags that close it.
const CLOSE: [&str; 2] = ["</think>", "</thought>"];
/// Bytes of the longest tag: what is held back is shorter.
pub const LONGEST_TAG: usize = 10;

/// The first tag in `s`: its offset, length and whether it opens. Linear in the bytes up to
/// it (each `<` is looked at once), so a piece of many tags costs its length, not its length
/// times its tags.
fn next_tag(s: &str) -> Option<(usize, usize, bool)> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(off) = bytes[from..].iter().position(|&b| b == b'<') {
        let at = from + off;
        let tail = &s[at..];
        if let Some(t) = OPEN.iter().find(|t| tail.starts_with(**t)) {
            return Some((at, t.len(), true));
        }
        if let Some(t) = CLOSE.iter().find(|t| tail.starts_with(**t)) {
            return Some((at, t.len(), false));
        }
        from = at + 1;
    }
    None
}

/// What one piece of answer text was.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Piece {
    /// When the first answer text of this piece arrived (an earlier time when text held back
    /// from an earlier piece turned out not to be a tag); `None`: no answer text.
    pub answer_at: Option<f64>,
    /// It carried reasoning: a tag, or text inside a reasoning span.
    pub reasoning: bool,
    /// A closing tag never opened was honoured: the answer text before it was reasoning, so
    /// the time of the first answer starts over.
    pub restart_answer: bool,
    /// A closing tag never opened was read as answer text (see the module doc).
    pub ignored_close: bool,
}

/// The tag state of one stream's answer text.
#[derive(Debug, Clone, Default)]
pub struct ThinkScanner {
    /// Inside a reasoning span.
    in_think: bool,
    /// A tag was honoured (a later unopened closing tag is then text).
    tag_seen: bool,
    /// Something told answer and reasoning apart before any tag (a reasoning channel, a tool
    /// call, a refusal): an unopened closing tag is then text.
    told_apart: bool,
    /// The end of the text so far that may begin a tag (shorter than [`LONGEST_TAG`]).
    held: String,
    /// When the held text arrived, and whether non-whitespace text came before it in its piece.
    held_at: f64,
    held_after_text: bool,
    /// Reused by [`ThinkScanner::push`] (held text + the piece).
    scratch: String,
}

impl ThinkScanner {
    /// Something other than answer text told answer and reasoning apart (a reasoning field, a
    /// tool call, a refusal): an unopened closing tag can no longer mean MiniMax's.
    pub fn told_apart(&mut self) {
        self.told_apart = true;
    }

    /// Reads one piece of answer text that arrived at `at_ms`.
    pub fn push(&mut self, text: &str, at_ms: f64) -> Piece {
        let mut piece = Piece::default();
        if self.held.is_empty() && memchr::memchr(b'<', text.as_bytes()).is_none() {
            // Nothing held and no `<`: no tag and nothing to hold back (every tag begins with
            // `<`), so the piece is one whole text segment, as the general path below reads it
            // (the common piece, read without copying it: issue 47).
            if !text.is_empty() {
                self.text(text, at_ms, true, &mut piece);
                self.held_at = at_ms;
                self.held_after_text = !text.trim().is_empty();
            }
            return piece;
        }
        self.push_general(text, at_ms)
    }

    /// [`ThinkScanner::push`] without its shortcut for a piece that cannot hold a tag.
    fn push_general(&mut self, text: &str, at_ms: f64) -> Piece {
        let mut piece = Piece::default();
        let (held_at, held_after_text) = (self.held_at, self.held_after_text);
        let held_len = self.held.len();
        // the held text and this piece, in a buffer kept for the stream (no allocation per
        // piece once it has grown to the longest piece)
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.push_str(&self.held);
        buf.push_str(text);
        // whether the piece has a tag at all (old rule: a piece without tags is answer text
        // when not empty, whitespace included)
        let mut pos = 0;
        // non-whitespace text seen before `pos` in this piece (held text counts as its own)
        let mut text_before = false;
        while pos < buf.len() {
            let rest = &buf[pos..];
            let next = next_tag(rest);
            let (seg_end, tag) = match next {
                Some((i, len, open)) => (pos + i, Some((len, open))),
                None => (buf.len() - held_suffix(rest), None),
            };
            // the text before the tag (or before what is held back)
            let at = |from: usize| if from < held_len { held_at } else { at_ms };
            self.text(
                &buf[pos..seg_end],
                at(pos),
                tag.is_none() && pos == 0,
                &mut piece,
            );
            if !buf[pos..seg_end].trim().is_empty() {
                text_before = true;
            }
            let Some((len, open)) = tag else {
                // hold back what may begin a tag
                let started_in_held = seg_end < held_len;
                self.held.clear();
                self.held.push_str(&buf[seg_end..]);
                self.held_at = at(seg_end);
                self.held_after_text = if started_in_held {
                    held_after_text
                } else {
                    text_before
                };
                piece.reasoning |= self.in_think && !self.held.is_empty();
                self.scratch = buf;
                return piece;
            };
            let tag_text_before = if seg_end < held_len {
                held_after_text
            } else {
                text_before
            };
            let tag = &buf[seg_end..seg_end + len];
            // a tag read as text is text before what follows
            text_before |= self.tag(open, tag_text_before, tag, at(seg_end), &mut piece);
            pos = seg_end + len;
        }
        self.held.clear();
        self.scratch = buf;
        piece
    }

    /// The end of the stream: held-back text was not a tag.
    pub fn finish(&mut self) -> Piece {
        let mut piece = Piece::default();
        let held = std::mem::take(&mut self.held);
        self.text(&held, self.held_at, false, &mut piece);
        piece
    }

    /// Plain text (no tag) that arrived at `at`; `whole` when it is a whole piece without tags.
    fn text(&mut self, s: &str, at: f64, whole: bool, piece: &mut Piece) {
        if s.is_empty() {
            return;
        }
        if self.in_think {
            piece.reasoning = true;
        } else if (whole || !s.trim().is_empty()) && piece.answer_at.is_none() {
            piece.answer_at = Some(at);
        }
    }

    /// A tag (`open` or closing) that arrived at `at`; `text_before`: non-whitespace text came
    /// before it in its piece. True when it was read as answer text.
    fn tag(
        &mut self,
        open: bool,
        text_before: bool,
        tag: &str,
        at: f64,
        piece: &mut Piece,
    ) -> bool {
        match (open, self.in_think) {
            (true, false) => {
                self.in_think = true;
                self.tag_seen = true;
                piece.reasoning = true;
            }
            // a nested opening tag is reasoning text
            (true, true) => piece.reasoning = true,
            (false, true) => {
                self.in_think = false;
                self.tag_seen = true;
                piece.reasoning = true;
            }
            (false, false) if !self.tag_seen && !self.told_apart && !text_before => {
                // MiniMax: everything before it was reasoning
                self.tag_seen = true;
                piece.reasoning = true;
                piece.restart_answer = true;
                piece.answer_at = None;
            }
            (false, false) => {
                piece.ignored_close = true;
                self.text(tag, at, false, piece);
                return true;
            }
        }
        false
    }
}

/// Whether `s` holds a whole tag.
pub fn has_tag(s: &str) -> bool {
    OPEN.iter().chain(CLOSE.iter()).any(|t| s.contains(t))
}

/// Bytes at the end of `s` that could begin a tag: the longest suffix that is a proper prefix
/// of one (0 when none).
fn held_suffix(s: &str) -> usize {
    let from = s.len().saturating_sub(LONGEST_TAG - 1);
    (from..s.len())
        .filter(|&i| s.is_char_boundary(i))
        .find(|&i| {
            let tail = &s[i..];
            OPEN.iter()
                .chain(CLOSE.iter())
                .any(|t| t.len() > tail.len() && t.starts_with(tail))
        })
        .map_or(0, |i| s.len() - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortcut_reads_every_piece_as_the_general_path_does() {
        // pieces from an alphabet rich in tag parts, whitespace and `<`, split at random: the
        // scanner with its shortcut and one always on the general path agree on every piece
        // and on their whole state after it (compared through Debug, `scratch` aside)
        let parts = [
            "a", " ", "<", "think>", "</", "thought>", "x y", "\n", "é", "<thi", "nk>", "",
            "</think>", "<think>", "t",
        ];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let state = |s: &ThinkScanner| {
            let mut c = s.clone();
            c.scratch = String::new();
            format!("{c:?}")
        };
        for stream in 0..2_000 {
            let (mut fast, mut general) = (ThinkScanner::default(), ThinkScanner::default());
            if stream % 3 == 0 {
                fast.told_apart();
                general.told_apart();
            }
            for i in 0..next(12) {
                let piece: String = (0..next(4)).map(|_| parts[next(parts.len())]).collect();
                let at = i as f64;
                let f = fast.push(&piece, at);
                let g = general.push_general(&piece, at);
                assert_eq!(f, g, "stream {stream} piece {i} {piece:?}");
                assert_eq!(state(&fast), state(&general), "stream {stream} piece {i}");
            }
            assert_eq!(fast.finish(), general.finish(), "stream {stream}");
        }
    }

    #[test]
    fn next_tag_is_the_first_tag_and_skips_lone_angles() {
        assert_eq!(next_tag("a<b<think>c"), Some((3, 7, true)));
        assert_eq!(next_tag("<</thought>"), Some((1, 10, false)));
        assert_eq!(next_tag("x < y <thin"), None);
        assert_eq!(next_tag(""), None);
    }

    #[test]
    fn a_piece_of_many_tags_is_all_reasoning() {
        // 20,000 opening tags in one piece (an attack took ~2.5 s of CPU per request with a
        // search per tag over the rest of the piece): every tag is reasoning, no answer text
        let mut s = ThinkScanner::default();
        let p = s.push(&"<think>".repeat(20_000), 5.0);
        assert!(p.reasoning);
        assert_eq!(p.answer_at, None);
        let p = s.push("</think>answer", 9.0);
        assert_eq!(p.answer_at, Some(9.0));
    }

    fn scan(pieces: &[(&str, f64)]) -> (Vec<Piece>, ThinkScanner) {
        let mut s = ThinkScanner::default();
        let out = pieces.iter().map(|&(t, at)| s.push(t, at)).collect();
        (out, s)
    }

    #[test]
    fn tags_in_one_piece() {
        let (p, _) = scan(&[
            ("<think>", 1.0),
            ("hm", 2.0),
            ("</think>", 3.0),
            ("Hi", 4.0),
        ]);
        assert_eq!(p[0].answer_at, None);
        assert!(p[0].reasoning && p[1].reasoning && p[2].reasoning);
        assert_eq!(p[1].answer_at, None);
        assert_eq!(p[2].answer_at, None);
        assert_eq!(p[3].answer_at, Some(4.0));
        assert!(!p[3].reasoning);
        let (p, _) = scan(&[("<think>a</think>\n\nHello", 1.0)]);
        assert!(p[0].reasoning);
        assert_eq!(p[0].answer_at, Some(1.0));
        // a piece without tags is answer text even when it is only whitespace (as before)
        let (p, _) = scan(&[(" ", 1.0)]);
        assert_eq!(p[0].answer_at, Some(1.0));
    }

    // MiniMax M2 (case 51-b): untagged reasoning, then `</think>` starting a piece.
    #[test]
    fn an_unopened_close_at_the_start_of_a_piece_ends_reasoning() {
        let (p, _) = scan(&[
            ("The user", 200.0),
            (" says hi.", 220.0),
            ("</think>\n\nHello", 240.0),
            ("!", 260.0),
        ]);
        assert_eq!(p[0].answer_at, Some(200.0));
        assert!(p[2].restart_answer && p[2].reasoning);
        assert_eq!(p[2].answer_at, Some(240.0));
        assert!(!p[2].ignored_close);
    }

    // The attack of issue 28: prose about the tag is answer text, not the end of reasoning.
    #[test]
    fn an_unopened_close_after_text_in_its_piece_is_answer_text() {
        let (p, _) = scan(&[("a1", 10.0), ("use </think> to close", 70.0), ("a8", 80.0)]);
        assert!(!p[1].restart_answer && !p[1].reasoning && p[1].ignored_close);
        assert_eq!(p[1].answer_at, Some(70.0));
        // after a tag, or once something told answer and reasoning apart, likewise
        let (p, _) = scan(&[("<think>x</think>A", 1.0), ("</think>", 2.0)]);
        assert!(p[1].ignored_close && !p[1].reasoning);
        let mut s = ThinkScanner::default();
        s.told_apart();
        let p = s.push("</think>B", 1.0);
        assert!(p.ignored_close && !p.restart_answer);
    }

    // Issue 28 finding 4: "<thi" + "nk>" is a tag; "a <" + "b" is text at the first time.
    #[test]
    fn tags_split_over_pieces_are_recognised() {
        let (p, s) = scan(&[
            ("<thi", 100.0),
            ("nk>hm", 120.0),
            ("</th", 140.0),
            ("ink>Hi", 160.0),
        ]);
        assert_eq!(p[0], Piece::default());
        assert!(p[1].reasoning && p[1].answer_at.is_none());
        assert!(p[2].reasoning && p[2].answer_at.is_none());
        assert!(p[3].reasoning);
        assert_eq!(p[3].answer_at, Some(160.0));
        assert!(s.held.is_empty());
        let (p, _) = scan(&[("x", 5.0), ("<", 10.0), ("b", 20.0)]);
        assert_eq!(p[1].answer_at, None);
        assert_eq!(p[2].answer_at, Some(10.0));
        // held text at the end of the stream is answer text
        let (p, mut s) = scan(&[("<t", 10.0)]);
        assert_eq!(p[0].answer_at, None);
        assert_eq!(s.finish().answer_at, Some(10.0));
        // the held part never exceeds the longest tag
        let (_, s) = scan(&[("abc</though", 1.0)]);
        assert_eq!(s.held, "</though");
        assert!(s.held.len() < LONGEST_TAG);
        // a split unopened close after text in the piece where it began is text
        let (p, _) = scan(&[("use </thi", 1.0), ("nk> ok", 2.0)]);
        assert!(p[1].ignored_close && !p[1].restart_answer);
        // split unopened close starting its piece: MiniMax's
        let (p, _) = scan(&[("reason", 1.0), ("</", 2.0), ("think>A", 3.0)]);
        assert!(p[2].restart_answer);
        assert_eq!(p[2].answer_at, Some(3.0));
    }
}
