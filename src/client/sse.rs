//! Incremental Server-Sent Events decoder (WHATWG HTML "event stream interpretation").
//!
//! Feed it bytes as they arrive, in any split; it hands over each event when its terminating
//! blank line has arrived. Handles LF, CRLF and bare CR line endings (mixed, and a CRLF split
//! across reads), `data:` with or without the space, multi-line `data:`, `event:`/`id:` fields,
//! comment lines, a leading BOM, and UTF-8 split across reads (lines are decoded only once
//! complete). One non-standard field is read: an `error:` line (older llama.cpp) is an `error`
//! event. Pure: no I/O, no clock; the caller stamps each event with the arrival time of the
//! read that completed it.
//!
//! No allocation per event ([`SseDecoder::feed_each`]): an event whose lines all arrived in one
//! read is handed over as a slice of that read; only a line or an event split across reads is
//! copied, into buffers kept for the stream (sized by its largest event). The decoder as it was
//! before (owned strings) is the oracle of the differential test, in the test crate
//! (`tests/it/differential/reference_sse.rs`).

/// One dispatched event, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when given (e.g. `error`, `message_start`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// One dispatched event, borrowed from the read or the decoder's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    /// The `event:` field, when given.
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
}

impl SseEventRef<'_> {
    /// The event, owned.
    pub fn owned(self) -> SseEvent {
        SseEvent {
            event: self.event.map(str::to_string),
            data: self.data.to_string(),
        }
    }
}

/// What one `feed` call produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Complete events, in order.
    pub events: Vec<SseEvent>,
    /// Comment lines (`: keep-alive`) seen.
    pub comments: u32,
}

/// Error: one event grew beyond the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTooLarge {
    /// The limit, bytes.
    pub limit: usize,
}

/// The decoder state. Memory is bounded by `max_event_bytes` (plus one line).
#[derive(Debug)]
pub struct SseDecoder {
    /// A line begun in an earlier read.
    line: Vec<u8>,
    last_was_cr: bool,
    started: bool,
    /// The pending event's `data:` lines, each followed by `\n` (when not borrowed from the
    /// read, see [`Pass::borrowed`]).
    data: String,
    has_data: bool,
    event: String,
    has_event: bool,
    max_event_bytes: usize,
    /// Bytes of any kind fed so far.
    pub bytes_seen: u64,
    /// True once any line looked like an SSE field or comment.
    pub saw_sse_syntax: bool,
}

/// One read being decoded.
struct Pass<'i, F> {
    /// The pending event's only `data:` value so far, borrowed from the read (not yet copied
    /// to [`SseDecoder::data`]).
    borrowed: Option<&'i str>,
    comments: u32,
    on_event: F,
}

impl SseDecoder {
    /// A decoder that fails when one event exceeds `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            last_was_cr: false,
            started: false,
            data: String::new(),
            has_data: false,
            event: String::new(),
            has_event: false,
            max_event_bytes,
            bytes_seen: 0,
            saw_sse_syntax: false,
        }
    }

    /// Feeds one read's bytes; returns the events it completed, owned.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Decoded, EventTooLarge> {
        let mut events = Vec::new();
        let comments = self.feed_each(bytes, |e| events.push(e.owned()))?;
        Ok(Decoded { events, comments })
    }

    /// Feeds one read's bytes and hands each event it completes to `on_event`, in order;
    /// returns the number of comment lines. On `Err` no event of this read was handed over.
    pub fn feed_each<F: FnMut(SseEventRef<'_>)>(
        &mut self,
        bytes: &[u8],
        mut on_event: F,
    ) -> Result<u32, EventTooLarge> {
        // a line's bytes decode to at most 3 times as many (U+FFFD for each invalid byte)
        let most = 3 * (self.line.len() + bytes.len()) + self.data.len();
        if most <= self.max_event_bytes {
            // the limit cannot be reached within this read
            return self.feed_checked(bytes, on_event);
        }
        // it may be: the events are handed over only when the whole read was decoded
        let mut held = Vec::new();
        let comments = self.feed_checked(bytes, |e| held.push(e.owned()))?;
        for e in &held {
            on_event(SseEventRef {
                event: e.event.as_deref(),
                data: &e.data,
            });
        }
        Ok(comments)
    }

    fn feed_checked<F: FnMut(SseEventRef<'_>)>(
        &mut self,
        mut bytes: &[u8],
        on_event: F,
    ) -> Result<u32, EventTooLarge> {
        self.bytes_seen += bytes.len() as u64;
        if bytes.is_empty() {
            // An empty read (a decoder or proxy can produce one) must not clear a pending CR:
            // a CRLF split as "\r" | "" | "\n" is still one line ending (found by cargo fuzz).
            return Ok(0);
        }
        if !self.started {
            // Strip a UTF-8 BOM at the very start (possibly split: handled by buffering 3 bytes).
            let have = self.line.len() + bytes.len();
            if have < 3 && b"\xEF\xBB\xBF".starts_with(&[self.line.as_slice(), bytes].concat()) {
                self.line.extend_from_slice(bytes);
                return Ok(0);
            }
            let mut head = std::mem::take(&mut self.line);
            head.extend_from_slice(bytes);
            self.started = true;
            let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
            return self.feed_started(body, on_event);
        }
        if self.last_was_cr {
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
            self.last_was_cr = false;
        }
        self.feed_started(bytes, on_event)
    }

    fn feed_started<F: FnMut(SseEventRef<'_>)>(
        &mut self,
        bytes: &[u8],
        on_event: F,
    ) -> Result<u32, EventTooLarge> {
        let mut pass = Pass {
            borrowed: None,
            comments: 0,
            on_event,
        };
        let mut i = 0;
        while i < bytes.len() {
            let Some(off) = memchr::memchr2(b'\n', b'\r', &bytes[i..]) else {
                self.line.extend_from_slice(&bytes[i..]);
                break;
            };
            let (start, end) = (i, i + off);
            i = end + 1;
            if bytes[end] == b'\r' {
                if i < bytes.len() {
                    if bytes[i] == b'\n' {
                        i += 1;
                    }
                } else {
                    self.last_was_cr = true;
                }
            }
            if self.line.is_empty() {
                match std::str::from_utf8(&bytes[start..end]) {
                    Ok(text) => self.process_line(text, Some(text), &mut pass),
                    Err(_) => {
                        let text = String::from_utf8_lossy(&bytes[start..end]);
                        self.process_line(&text, None, &mut pass);
                    }
                }
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[start..end]);
                self.process_line(&String::from_utf8_lossy(&line), None, &mut pass);
                line.clear();
                self.line = line;
            }
            self.check(&pass)?;
        }
        // a data line whose event goes on in the next read: copied
        self.keep_borrowed(&mut pass);
        self.check(&pass)?;
        Ok(pass.comments)
    }

    fn check<F>(&self, pass: &Pass<'_, F>) -> Result<(), EventTooLarge> {
        let borrowed = pass.borrowed.map_or(0, |v| v.len() + 1);
        if self.line.len() + self.data.len() + borrowed > self.max_event_bytes {
            return Err(EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(())
    }

    fn keep_borrowed<F>(&mut self, pass: &mut Pass<'_, F>) {
        if let Some(v) = pass.borrowed.take() {
            self.data.push_str(v);
            self.data.push('\n');
        }
    }

    /// One complete line, decoded; `in_read`: the same text when it is borrowed from the read
    /// (then a `data:` value may be handed over without a copy).
    fn process_line<'i, F: FnMut(SseEventRef<'_>)>(
        &mut self,
        text: &str,
        in_read: Option<&'i str>,
        pass: &mut Pass<'i, F>,
    ) {
        if text.is_empty() {
            if self.has_data {
                let event = self.has_event.then_some(self.event.as_str());
                let data = match pass.borrowed.take() {
                    Some(v) => v,
                    None => self.data.strip_suffix('\n').unwrap_or(&self.data),
                };
                (pass.on_event)(SseEventRef { event, data });
            }
            self.data.clear();
            self.has_data = false;
            self.has_event = false;
            return;
        }
        if text.starts_with(':') {
            pass.comments += 1;
            self.saw_sse_syntax = true;
            return;
        }
        let (field, value_at) = match text.find(':') {
            Some(p) if text[p + 1..].starts_with(' ') => (&text[..p], p + 2),
            Some(p) => (&text[..p], p + 1),
            None => (text, text.len()),
        };
        let value = &text[value_at..];
        match field {
            "data" => {
                self.saw_sse_syntax = true;
                match in_read {
                    Some(t) if !self.has_data => pass.borrowed = Some(&t[value_at..]),
                    _ => {
                        self.keep_borrowed(pass);
                        self.data.push_str(value);
                        self.data.push('\n');
                    }
                }
                self.has_data = true;
            }
            "event" => {
                self.saw_sse_syntax = true;
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            "id" | "retry" => self.saw_sse_syntax = true,
            // Not an SSE field (the standard ignores it), but older llama.cpp servers report a
            // streaming failure under HTTP 200 as one line `error: {"code":400,"message":...}`:
            // it becomes an event of its own named `error`, at once, so the failure is read.
            "error" => {
                self.saw_sse_syntax = true;
                (pass.on_event)(SseEventRef {
                    event: Some("error"),
                    data: value,
                });
            }
            _ => {}
        }
    }

    /// At end of body: an event whose blank line never came is dispatched too (the WHATWG rule
    /// discards it; servers that end with `data: [DONE]\n` and no blank line are common, so
    /// perfgate keeps it and the caller treats the end as the close time).
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut pass = Pass {
                borrowed: None,
                comments: 0,
                on_event: |_: SseEventRef<'_>| {},
            };
            self.process_line(&String::from_utf8_lossy(&line), None, &mut pass);
        }
        if self.has_data {
            let mut data = std::mem::take(&mut self.data);
            if data.ends_with('\n') {
                data.pop();
            }
            self.has_data = false;
            let has_event = std::mem::take(&mut self.has_event);
            return Some(SseEvent {
                event: has_event.then(|| std::mem::take(&mut self.event)),
                data,
            });
        }
        None
    }

    /// Bytes buffered in an incomplete event.
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(chunks: &[&[u8]]) -> (Vec<SseEvent>, u32) {
        let mut d = SseDecoder::new(1 << 20);
        let mut ev = Vec::new();
        let mut c = 0;
        for ch in chunks {
            let o = d.feed(ch).unwrap();
            ev.extend(o.events);
            c += o.comments;
        }
        ev.extend(d.finish());
        (ev, c)
    }

    fn data(ev: &[SseEvent]) -> Vec<&str> {
        ev.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn line_endings_lf_crlf_cr_mixed() {
        let (e, _) = all(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\r\n\n"]);
        assert_eq!(data(&e), ["a", "b", "c", "d"]);
    }

    #[test]
    fn crlf_split_across_reads() {
        let (e, _) = all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(data(&e), ["a", "b"]);
    }

    #[test]
    fn fields_comments_bom_multiline() {
        let (e, c) = all(&[
            b"\xEF\xBB",
            b"\xBF: keep-alive\n\nevent: error\ndata:{\"x\":1}\nid: 7\n\ndata: l1\ndata: l2\n\n",
        ]);
        assert_eq!(c, 1);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].event.as_deref(), Some("error"));
        assert_eq!(e[0].data, "{\"x\":1}");
        assert_eq!(e[1].data, "l1\nl2");
    }

    #[test]
    fn empty_read_between_cr_and_lf() {
        // fuzz/artifacts crash (minimised): "data:\r" | "" | "\n..." counted the LF as a blank
        // line, dispatching an event early and losing the `event:` field of the next lines.
        let whole = all(&[b"data: a\r\ndata: b\n\n"]);
        assert_eq!(data(&whole.0), ["a\nb"]);
        assert_eq!(all(&[b"data: a\r", b"", b"\ndata: b\n\n"]), whole);
        assert_eq!(
            all(&[b"data: a\r", b"", b"", b"\n", b"", b"data: b\n\n"]),
            whole
        );
        let minimised: &[&[u8]] = &[b"v\rdata:\r", b"", b"", b"\nevent:\xFFvent:\xFF"];
        let joined = minimised.concat();
        assert_eq!(all(minimised), all(&[&joined]));
    }

    #[test]
    fn utf8_split_inside_character() {
        let (e, _) = all(&[b"data: \xE4\xBD", b"\xA0\xE5\xA5\xBD\n", b"\n"]);
        assert_eq!(data(&e), ["你好"]);
    }

    #[test]
    fn event_completes_only_at_blank_line() {
        let mut d = SseDecoder::new(1 << 20);
        assert!(d.feed(b"data: x\n").unwrap().events.is_empty());
        assert_eq!(d.feed(b"\n").unwrap().events.len(), 1);
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut d = SseDecoder::new(16);
        assert_eq!(
            d.feed(b"data: 0123456789abcdefXYZ").unwrap_err(),
            EventTooLarge { limit: 16 }
        );
    }

    #[test]
    fn error_field_line_is_an_error_event() {
        let (e, _) =
            all(&[b"data: a\n\nerror: {\"code\":400,\"message\":\"too long\"}\ndata: [DONE]\n\n"]);
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].event.as_deref(), Some("error"));
        assert_eq!(e[1].data, "{\"code\":400,\"message\":\"too long\"}");
        assert_eq!(e[2].data, "[DONE]");
    }

    #[test]
    fn missing_final_blank_line_kept_at_finish() {
        let (e, _) = all(&[b"data: a\n\ndata: [DONE]\n"]);
        assert_eq!(data(&e), ["a", "[DONE]"]);
    }

    proptest! {
        #[test]
        fn any_split_gives_same_events(cuts in proptest::collection::vec(0usize..200, 0..12)) {
            let stream: &[u8] = "\u{feff}data: {\"a\":\"héllo 你好\"}\r\n\r\n: ping\n\ndata:x\rdata: y\r\revent: e\ndata: z\n\ndata: [DONE]\n\n".as_bytes();
            let (want, want_c) = all(&[stream]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cuts { chunks.push(&stream[prev..c]); prev = c; }
            chunks.push(&stream[prev..]);
            let (got, got_c) = all(&chunks);
            prop_assert_eq!(got, want);
            prop_assert_eq!(got_c, want_c);
        }
    }
}
