//! The SSE decoder as it was before issue 47: every event copied into owned strings. The oracle
//! of this differential test: `perfgate::client::sse::SseDecoder` must dispatch the same events
//! on any input in any split. Moved here from `src/client/sse/reference.rs` (issue 42): nothing
//! in perfgate uses it. Its `pending_bytes` (read by nothing here) was left out.

use perfgate::client::sse::{Decoded, EventTooLarge, SseEvent};

/// The decoder state. Memory is bounded by `max_event_bytes` (plus one line).
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    last_was_cr: bool,
    started: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    max_event_bytes: usize,
    /// Bytes of any kind fed so far.
    pub bytes_seen: u64,
    /// True once any line looked like an SSE field or comment.
    pub saw_sse_syntax: bool,
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
            event: None,
            max_event_bytes,
            bytes_seen: 0,
            saw_sse_syntax: false,
        }
    }

    /// Feeds one read's bytes; returns the events it completed.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Decoded, EventTooLarge> {
        let mut out = Decoded::default();
        self.bytes_seen += bytes.len() as u64;
        if bytes.is_empty() {
            // An empty read (a decoder or proxy can produce one) must not clear a pending CR:
            // a CRLF split as "\r" | "" | "\n" is still one line ending (found by cargo fuzz).
            return Ok(out);
        }
        if !self.started {
            // Strip a UTF-8 BOM at the very start (possibly split: handled by buffering 3 bytes).
            let have = self.line.len() + bytes.len();
            if have < 3 && b"\xEF\xBB\xBF".starts_with(&[self.line.as_slice(), bytes].concat()) {
                self.line.extend_from_slice(bytes);
                return Ok(out);
            }
            let mut head = std::mem::take(&mut self.line);
            head.extend_from_slice(bytes);
            self.started = true;
            let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head).to_vec();
            return self.feed_started(&body, out);
        }
        if self.last_was_cr {
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
            self.last_was_cr = false;
        }
        out = self.feed_started(bytes, out)?;
        Ok(out)
    }

    fn feed_started(&mut self, bytes: &[u8], mut out: Decoded) -> Result<Decoded, EventTooLarge> {
        let mut i = 0;
        while i < bytes.len() {
            match memchr_eol(&bytes[i..]) {
                None => {
                    self.line.extend_from_slice(&bytes[i..]);
                    break;
                }
                Some(off) => {
                    self.line.extend_from_slice(&bytes[i..i + off]);
                    let eol = bytes[i + off];
                    i += off + 1;
                    if eol == b'\r' {
                        if i < bytes.len() {
                            if bytes[i] == b'\n' {
                                i += 1;
                            }
                        } else {
                            self.last_was_cr = true;
                        }
                    }
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, &mut out);
                }
            }
            if self.line.len() + self.data.len() > self.max_event_bytes {
                return Err(EventTooLarge {
                    limit: self.max_event_bytes,
                });
            }
        }
        if self.line.len() + self.data.len() > self.max_event_bytes {
            return Err(EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(out)
    }

    fn process_line(&mut self, line: &[u8], out: &mut Decoded) {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                out.events.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            }
            self.data.clear();
            self.has_data = false;
            self.event = None;
            return;
        }
        let text = String::from_utf8_lossy(line);
        if text.starts_with(':') {
            out.comments += 1;
            self.saw_sse_syntax = true;
            return;
        }
        let (field, value) = match text.find(':') {
            Some(p) => {
                let v = &text[p + 1..];
                (&text[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                self.saw_sse_syntax = true;
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => {
                self.saw_sse_syntax = true;
                self.event = Some(value.to_string());
            }
            "id" | "retry" => self.saw_sse_syntax = true,
            // Not an SSE field (the standard ignores it), but older llama.cpp servers report a
            // streaming failure under HTTP 200 as one line `error: {"code":400,"message":...}`:
            // it becomes an event of its own named `error`, at once, so the failure is read.
            "error" => {
                self.saw_sse_syntax = true;
                out.events.push(SseEvent {
                    event: Some("error".to_string()),
                    data: value.to_string(),
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
            let mut out = Decoded::default();
            self.process_line(&line, &mut out);
        }
        if self.has_data {
            let mut data = std::mem::take(&mut self.data);
            if data.ends_with('\n') {
                data.pop();
            }
            self.has_data = false;
            return Some(SseEvent {
                event: self.event.take(),
                data,
            });
        }
        None
    }
}

fn memchr_eol(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n' || c == b'\r')
}
