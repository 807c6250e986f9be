//! The differential test of issue 47: the fast measuring path (`client::stream::BodyFold`: the
//! borrowing SSE decoder, plain chat chunks read in place) against the reference path it
//! replaced (`reference_fold::BodyFold`: owned events from `reference_sse::SseDecoder`, every one
//! through `dialect::interpret`; both kept here, in the test crate, as the oracle). Both must
//! give the same steps and the same record, model and fingerprint on every replayed case in
//! `tests/cases` (as recorded, whole, split in two at hundreds of places and in random reads), on
//! the fuzz seeds of `fuzz/seeds`, and on random chunkings.

mod reference_fold;
mod reference_sse;
mod transport;

use perfgate::client::measure::End;
use perfgate::client::sse::{SseDecoder, SseEvent};
use perfgate::client::stream::{BodyFold, Step};
use perfgate::config::scenario::Api;
use perfgate::record::{Failure, FailureClass};
use perfgate::sim::ReplayCase;
use proptest::prelude::*;
use reference_sse::SseDecoder as RefDecoder;
use std::path::{Path, PathBuf};

/// One stream: its api, whether it declared `text/event-stream`, its reads.
#[derive(Debug, Clone)]
struct Stream {
    name: String,
    api: Api,
    declared_sse: bool,
    reads: Vec<(f64, Vec<u8>)>,
    max_tokens: Option<u64>,
}

/// What a fold made of a stream: each read's step, then the outcome.
#[derive(Debug, PartialEq)]
struct Outcome {
    steps: Vec<Step>,
    end_event: bool,
    result: Result<
        (
            perfgate::record::RequestRecord,
            Option<String>,
            Option<String>,
        ),
        Vec<u8>,
    >,
}

macro_rules! fold_with {
    ($fold:expr, $s:expr, $end:expr) => {{
        let mut f = $fold;
        let mut steps = Vec::new();
        let mut end = None;
        for (at, bytes) in &$s.reads {
            let step = f.chunk(bytes, *at);
            steps.push(step.clone());
            if let Step::Done(e) = step {
                end = Some(e);
                break;
            }
        }
        let last = $s.reads.last().map_or(0.0, |r| r.0);
        let end = end.unwrap_or_else(|| $end(last));
        let end_event = f.saw_end_event();
        let result = f
            .finish(end, $s.max_tokens)
            .map(|o| (o.record, o.model, o.fingerprint));
        Outcome {
            steps,
            end_event,
            result,
        }
    }};
}

fn eof(at: f64) -> End {
    End::Eof(at)
}

fn reset(at: f64) -> End {
    End::Failed(
        Failure {
            class: FailureClass::Truncated,
            status: None,
            message: "connection reset".into(),
        },
        at + 1.0,
    )
}

/// Both folds agree on `s`, ending at EOF and with a reset.
fn agree(s: &Stream) -> Result<(), String> {
    for end in [eof as fn(f64) -> End, reset] {
        let fast = fold_with!(BodyFold::new(s.api, s.declared_sse, 3.0), s, end);
        let slow = fold_with!(
            reference_fold::BodyFold::new(s.api, s.declared_sse, 3.0),
            s,
            end
        );
        if fast != slow {
            return Err(format!(
                "{}: the fast path differs from the reference\nfast: {fast:?}\nreference: {slow:?}",
                s.name
            ));
        }
    }
    Ok(())
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Every replayed case with an api perfgate speaks (read once).
fn cases() -> &'static [Stream] {
    static CASES: std::sync::OnceLock<Vec<Stream>> = std::sync::OnceLock::new();
    CASES.get_or_init(read_cases)
}

fn read_cases() -> Vec<Stream> {
    let mut out = Vec::new();
    for path in files(&root().join("tests/cases")) {
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        // a case of an api perfgate does not speak is a test of the config (tests/it/cases.rs)
        let case = match ReplayCase::load(&path) {
            Ok(c) => c,
            Err(e) if e.contains("is not known") => continue,
            Err(e) => panic!("{e}"),
        };
        let api = case
            .api
            .as_deref()
            .unwrap_or("openai-chat")
            .parse::<Api>()
            .unwrap();
        let declared_sse = case
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("event-stream"));
        out.push(Stream {
            name: path.file_name().unwrap().to_string_lossy().into_owned(),
            api,
            declared_sse,
            reads: case.read_bytes().unwrap(),
            max_tokens: None,
        });
    }
    out
}

/// The whole body of `s` cut at `cuts` (sorted offsets), each read 1 ms after the previous.
fn rechunk(s: &Stream, cuts: &[usize]) -> Stream {
    let body: Vec<u8> = s.reads.iter().flat_map(|r| r.1.clone()).collect();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut reads = Vec::new();
    let mut prev = 0;
    for c in cuts.into_iter().chain([body.len()]) {
        reads.push((reads.len() as f64 + 1.0, body[prev..c].to_vec()));
        prev = c;
    }
    Stream { reads, ..s.clone() }
}

#[test]
fn every_replayed_case_gives_the_same_record() {
    let all = cases();
    assert!(all.len() >= 90, "only {} cases found", all.len());
    for s in all {
        agree(s).unwrap();
        agree(&rechunk(s, &[])).unwrap();
    }
}

/// Each case cut in two at about 256 places spread over its body (every byte of the shorter
/// ones), the offset of the first cut moving from case to case.
#[test]
fn every_replayed_case_split_in_two_gives_the_same_record() {
    for (k, s) in cases().iter().enumerate() {
        let len: usize = s.reads.iter().map(|r| r.1.len()).sum();
        let step = len.div_ceil(256).max(1);
        for cut in (k % step..=len).step_by(step) {
            agree(&rechunk(s, &[cut])).unwrap();
        }
    }
}

/// A fuzz seed of `stream_measure` in its input layout (see that target's doc).
fn fuzz_stream(name: String, data: &[u8]) -> Option<Stream> {
    if data.len() < 3 {
        return None;
    }
    let api = match data[0] % 4 {
        0 => Api::OpenaiChat,
        1 => Api::OpenaiCompletions,
        2 => Api::AnthropicMessages,
        _ => Api::OpenaiResponses,
    };
    let n = ((data[0] >> 2) % 16) as usize;
    let max_tokens = (data[1] != 0).then(|| data[1] as u64 * 64);
    let rest = &data[3..];
    if rest.len() < 2 * n {
        return None;
    }
    let (cut_bytes, stream) = rest.split_at(2 * n);
    let cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize)
        .collect();
    let whole = Stream {
        name,
        api,
        declared_sse: data[2] % 4 < 2,
        reads: vec![(1.0, stream.to_vec())],
        max_tokens,
    };
    Some(rechunk(&whole, &cuts))
}

#[test]
fn every_fuzz_seed_gives_the_same_record() {
    let mut n = 0;
    for dir in ["fuzz/seeds/stream_measure", "fuzz/corpus/stream_measure"] {
        let dir = root().join(dir);
        if !dir.is_dir() {
            continue;
        }
        for path in files(&dir) {
            let data = std::fs::read(&path).unwrap();
            let name = path.display().to_string();
            if let Some(s) = fuzz_stream(name, &data) {
                for api in Api::ALL {
                    agree(&Stream { api, ..s.clone() }).unwrap();
                }
                n += 1;
            }
        }
    }
    assert!(n >= 50, "only {n} fuzz seeds read");
}

fn decode_new(chunks: &[&[u8]], limit: usize) -> Result<(Vec<SseEvent>, u32), ()> {
    let mut d = SseDecoder::new(limit);
    let mut events = Vec::new();
    let mut comments = 0;
    for c in chunks {
        let out = d.feed(c).map_err(|_| ())?;
        events.extend(out.events);
        comments += out.comments;
    }
    events.extend(d.finish());
    Ok((events, comments))
}

fn decode_ref(chunks: &[&[u8]], limit: usize) -> Result<(Vec<SseEvent>, u32), ()> {
    let mut d = RefDecoder::new(limit);
    let mut events = Vec::new();
    let mut comments = 0;
    for c in chunks {
        let out = d.feed(c).map_err(|_| ())?;
        events.extend(out.events);
        comments += out.comments;
    }
    events.extend(d.finish());
    Ok((events, comments))
}

#[test]
fn every_sse_fuzz_seed_decodes_the_same() {
    let dir = root().join("fuzz/seeds/sse_decoder");
    for path in files(&dir) {
        let data = std::fs::read(&path).unwrap();
        for limit in [16, 64, 1 << 20] {
            for cut in 0..=data.len() {
                let chunks = [&data[..cut], &data[cut..]];
                assert_eq!(
                    decode_new(&chunks, limit),
                    decode_ref(&chunks, limit),
                    "{} cut at {cut}, limit {limit}",
                    path.display()
                );
            }
        }
    }
}

/// Pieces SSE streams are made of, for random streams.
const PIECES: &[&str] = &[
    "data: ",
    "data:",
    "event: error\n",
    "event: message_start\n",
    ": ping\n",
    "id: 7\n",
    "error: {\"code\":400,\"message\":\"x\"}\n",
    "\n",
    "\r\n",
    "\r",
    "\u{feff}",
    "[DONE]",
    "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"finish_reason\":null}]}",
    "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}",
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}",
    "{\"choices\":[{\"delta\":{\"content\":\"<think>a</think>b\\n\"}}]}",
    "{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}",
    "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}",
    "{\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}",
    "{\"choices\":[{\"text\":\"a\"}]}",
    "h\u{e9}llo \u{4f60}\u{597d}",
    "\u{ff}",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A replayed case read in random pieces.
    #[test]
    fn random_chunkings_of_the_cases_give_the_same_record(
        which in 0usize..1000,
        cuts in proptest::collection::vec(0usize..8192, 0..16),
    ) {
        let all = cases();
        let s = &all[which % all.len()];
        prop_assert_eq!(agree(&rechunk(s, &cuts)), Ok(()));
    }

    /// Random streams of SSE pieces, in random reads, for every api.
    #[test]
    fn random_streams_give_the_same_record(
        pieces in proptest::collection::vec(0usize..PIECES.len(), 0..40),
        cuts in proptest::collection::vec(0usize..4096, 0..12),
        invalid in proptest::bool::ANY,
    ) {
        let mut body: Vec<u8> = pieces.iter().flat_map(|&i| PIECES[i].bytes()).collect();
        if invalid {
            body.extend_from_slice(b"data: \xff\xfe\n\n");
        }
        for api in Api::ALL {
            let s = Stream {
                name: format!("{api} random"),
                api,
                declared_sse: true,
                reads: vec![(1.0, body.clone())],
                max_tokens: Some(64),
            };
            prop_assert_eq!(agree(&rechunk(&s, &cuts)), Ok(()));
        }
        let chunks: Vec<&[u8]> = {
            let mut c: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
            c.sort_unstable();
            let mut v = Vec::new();
            let mut prev = 0;
            for x in c.into_iter().chain([body.len()]) {
                v.push(&body[prev..x]);
                prev = x;
            }
            v
        };
        for limit in [8, 40, 200, 1 << 20] {
            prop_assert_eq!(decode_new(&chunks, limit), decode_ref(&chunks, limit));
        }
    }
}
