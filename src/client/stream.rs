//! Folding a 2xx response body into a measurement, one chunk at a time as it arrives: the body
//! size limit, the SSE decoder, each event interpreted by the API dialect and stamped with the
//! arrival time of the read that completed it. Events are folded into the record, never held
//! (memory at 1,024 streams). Pure: bytes and times in, the record out; the HTTP reading is in
//! [`super::http`].
//!
//! No allocation per event on the common path: the decoder hands over events borrowed from the
//! read, a plain chat chunk is read in place ([`super::chunk`]) and folded without building its
//! [`EventInfo`]; any other event goes through [`dialect::interpret`]. The fold as it was before
//! is the oracle of the differential test, in the test crate
//! (`tests/it/differential/reference_fold.rs`).

use super::chunk;
use super::dialect::{self, clip, EventInfo};
use super::http::{ERROR_BODY_BYTES, MAX_BODY_BYTES, MAX_EVENT_BYTES};
use super::measure::{End, Measurer, Stamped};
use super::sse::SseDecoder;
use crate::config::scenario::Api;
use crate::record::{Failure, FailureClass, RequestRecord};

/// The bytes of a non-SSE body kept to judge it once this many were seen (public for the
/// differential test's reference fold).
pub const NOT_SSE_AFTER: usize = 512;

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
    got_token: bool,
    total: u64,
    model: Option<String>,
    fingerprint: Option<String>,
    saw_end_event: bool,
}

/// What a chunk did to the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Keep reading; `event` is whether the chunk completed at least one event (it restarts the
    /// idle timer).
    More { event: bool },
    /// The body is over as far as the measurement goes.
    Done(End),
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
            got_token: false,
            total: 0,
            model: None,
            fingerprint: None,
            saw_end_event: false,
        }
    }

    /// Judges whether the answer parsed as `e` asks ([`Measurer::expect_structured`]).
    pub fn expect_structured(&mut self, e: crate::structured::Expect) {
        self.measurer.expect_structured(e);
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
        let api = self.api;
        let BodyFold {
            dec,
            measurer,
            model,
            fingerprint,
            got_token,
            ..
        } = self;
        let mut done = false;
        let mut event = false;
        let fed = dec.feed_each(chunk, |ev| {
            event = true;
            let data = ev.data.trim();
            if data == "[DONE]" {
                done = true;
                let info = EventInfo {
                    done: true,
                    ..EventInfo::default()
                };
                measurer.push(&Stamped { at_ms, info });
                return;
            }
            if api == Api::OpenaiChat && ev.event.is_none() {
                if let Some(c) = chunk::chat(data) {
                    if model.is_none() {
                        *model = c.model.as_deref().map(clip);
                    }
                    if fingerprint.is_none() {
                        *fingerprint = c.system_fingerprint.as_deref().map(clip);
                    }
                    *got_token |= c.text.is_some();
                    measurer.push_chat(at_ms, &c);
                    return;
                }
            }
            let info = dialect::interpret(api, &ev.owned());
            if model.is_none() {
                model.clone_from(&info.model);
            }
            if fingerprint.is_none() {
                fingerprint.clone_from(&info.system_fingerprint);
            }
            *got_token |= info.token;
            done |= info.done;
            measurer.push(&Stamped { at_ms, info });
        });
        if let Err(e) = fed {
            return Step::Done(failed(
                FailureClass::TooLarge,
                format!("one SSE event exceeded {} bytes", e.limit),
                at_ms,
            ));
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

    /// A token has arrived (the first-token limit no longer applies).
    pub fn got_token(&self) -> bool {
        self.got_token
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

/// A stream's measurement and what it said about the server.
#[derive(Debug, Clone)]
pub struct Folded {
    pub record: RequestRecord,
    /// `model` from the stream.
    pub model: Option<String>,
    /// `system_fingerprint` from the stream.
    pub fingerprint: Option<String>,
}

pub(crate) fn failed(class: FailureClass, message: String, at_ms: f64) -> End {
    End::Failed(
        Failure {
            class,
            status: None,
            message,
        },
        at_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(content: &str) -> String {
        format!(
            "data: {{\"id\":\"c\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}}}}]}}\n\n"
        )
    }

    #[test]
    fn chunks_fold_into_the_record_with_their_arrival_times() {
        let mut f = BodyFold::new(Api::OpenaiChat, true, 0.0);
        // the first token arrives split over two reads: stamped at the read that completed it
        let first = chat("a");
        let (x, y) = first.split_at(10);
        assert_eq!(f.chunk(x.as_bytes(), 30.0), Step::More { event: false });
        assert!(!f.got_token());
        assert_eq!(f.chunk(y.as_bytes(), 40.0), Step::More { event: true });
        assert!(f.got_token());
        assert_eq!(
            f.chunk(chat("b").as_bytes(), 60.0),
            Step::More { event: true }
        );
        assert_eq!(
            f.chunk((chat("c") + "data: [DONE]\n\n").as_bytes(), 80.0),
            Step::Done(End::Eof(80.0))
        );
        assert!(f.saw_end_event());
        let out = f.finish(End::Eof(80.0), Some(3)).unwrap();
        assert_eq!(out.model.as_deref(), Some("m"));
        let r = out.record;
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.ttft_ms, Some(40.0));
        // TPOT = (t_last - t_first) / (tokens - 1) = (80 - 40) / 2
        assert_eq!(r.tpot_ms, Some(20.0));
        assert_eq!(r.itl_ms, vec![20.0, 20.0]);
    }

    #[test]
    fn a_body_that_is_not_a_stream_is_given_back_for_the_message() {
        let mut f = BodyFold::new(Api::OpenaiChat, false, 0.0);
        let html = "<html>".repeat(100);
        // 600 bytes without SSE syntax and no event-stream content type: judged at once
        assert_eq!(f.chunk(html.as_bytes(), 5.0), Step::Done(End::Eof(5.0)));
        let prefix = f.finish(End::Eof(5.0), None).unwrap_err();
        assert_eq!(prefix, html.as_bytes());
    }

    #[test]
    fn the_body_limit_ends_the_stream() {
        let mut f = BodyFold::new(Api::OpenaiChat, true, 0.0);
        f.total = MAX_BODY_BYTES;
        match f.chunk(b"data: x\n\n", 9.0) {
            Step::Done(End::Failed(e, at)) => {
                assert_eq!(e.class, FailureClass::TooLarge);
                assert_eq!(at, 9.0);
            }
            s => panic!("{s:?}"),
        }
    }
}
