//! The body fold as it was before issue 47 (the [`super::reference_sse`] decoder, every event
//! interpreted by `dialect::interpret` into owned values). The oracle of this differential test:
//! `perfgate::client::stream::BodyFold` must give the same steps and the same record on any
//! input in any split. Moved here from `src/client/stream/reference.rs` (issue 42): nothing in
//! perfgate uses it. Its `got_token` (read by nothing here, and not compared) was left out.

use super::reference_sse::SseDecoder;
use perfgate::client::dialect;
use perfgate::client::http::{ERROR_BODY_BYTES, MAX_BODY_BYTES, MAX_EVENT_BYTES};
use perfgate::client::measure::{End, Measurer, Stamped};
use perfgate::client::stream::{Folded, Step, NOT_SSE_AFTER};
use perfgate::config::scenario::Api;
use perfgate::record::{Failure, FailureClass};

/// `client::stream`'s failure end (crate-private there): a failure of `class` at `at_ms`.
fn failed(class: FailureClass, message: String, at_ms: f64) -> End {
    End::Failed(
        Failure {
            class,
            status: None,
            message,
        },
        at_ms,
    )
}

/// One streamed response being read.
pub struct BodyFold {
    api: Api,
    /// The `Content-Type` says `text/event-stream`.
    declared_sse: bool,
    dec: SseDecoder,
    /// The body's first bytes, to quote when it turns out not to be a stream; freed once SSE
    /// syntax was seen (64 KiB x 1,024 streams would be 64 MB).
    raw_prefix: Vec<u8>,
    measurer: Measurer,
    total: u64,
    model: Option<String>,
    fingerprint: Option<String>,
    saw_end_event: bool,
}

impl BodyFold {
    /// A fold for a request started `start_ms` into the run, whose response declared
    /// `declared_sse`.
    pub fn new(api: Api, declared_sse: bool, start_ms: f64) -> BodyFold {
        BodyFold {
            api,
            declared_sse,
            dec: SseDecoder::new(MAX_EVENT_BYTES),
            raw_prefix: Vec::new(),
            measurer: Measurer::for_api(start_ms, api),
            total: 0,
            model: None,
            fingerprint: None,
            saw_end_event: false,
        }
    }

    /// Folds one chunk that arrived `at_ms` after the send.
    pub fn chunk(&mut self, chunk: &[u8], at_ms: f64) -> Step {
        self.total += chunk.len() as u64;
        if self.total > MAX_BODY_BYTES {
            return Step::Done(failed(
                FailureClass::TooLarge,
                format!("response body exceeded {MAX_BODY_BYTES} bytes"),
                at_ms,
            ));
        }
        if self.dec.saw_sse_syntax {
            if self.raw_prefix.capacity() > 0 {
                self.raw_prefix = Vec::new();
            }
        } else if self.raw_prefix.len() < ERROR_BODY_BYTES {
            let take = (ERROR_BODY_BYTES - self.raw_prefix.len()).min(chunk.len());
            self.raw_prefix.extend_from_slice(&chunk[..take]);
        }
        let decoded = match self.dec.feed(chunk) {
            Ok(d) => d,
            Err(e) => {
                return Step::Done(failed(
                    FailureClass::TooLarge,
                    format!("one SSE event exceeded {} bytes", e.limit),
                    at_ms,
                ))
            }
        };
        let mut done = false;
        let event = !decoded.events.is_empty();
        for ev in decoded.events {
            let info = dialect::interpret(self.api, &ev);
            if self.model.is_none() {
                self.model = info.model.clone();
            }
            if self.fingerprint.is_none() {
                self.fingerprint = info.system_fingerprint.clone();
            }
            done |= info.done;
            self.measurer.push(&Stamped { at_ms, info });
        }
        if done {
            self.saw_end_event = true;
            return Step::Done(End::Eof(at_ms));
        }
        if !self.declared_sse && !self.dec.saw_sse_syntax && self.raw_prefix.len() >= NOT_SSE_AFTER
        {
            return Step::Done(End::Eof(at_ms)); // clearly not a stream: judged by `finish`
        }
        Step::More { event }
    }

    /// The stream's end event (`[DONE]`, `message_stop`) was seen.
    pub fn saw_end_event(&self) -> bool {
        self.saw_end_event
    }

    /// Ends the fold: an unfinished final event is dispatched at a clean end. `Err` with the
    /// body's first bytes when it held no event and no SSE syntax at all (not a stream).
    pub fn finish(mut self, end: End, max_tokens: Option<u64>) -> Result<Folded, Vec<u8>> {
        if let Some(ev) = self.dec.finish() {
            if let End::Eof(at) = end {
                self.measurer.push(&Stamped {
                    at_ms: at,
                    info: dialect::interpret(self.api, &ev),
                });
            }
        }
        if self.measurer.events() == 0
            && !self.dec.saw_sse_syntax
            && !matches!(end, End::Failed(..))
        {
            return Err(self.raw_prefix);
        }
        Ok(Folded {
            record: self.measurer.finish(end, max_tokens),
            model: self.model,
            fingerprint: self.fingerprint,
        })
    }
}
