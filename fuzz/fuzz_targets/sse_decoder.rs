//! The SSE decoder on arbitrary bytes fed in arbitrary pieces.
//!
//! Input layout: byte 0 = number of cuts (mod 16); then 2 bytes per cut (a little-endian offset
//! into the stream, reduced modulo its length + 1; equal offsets give empty reads); the rest is
//! the stream. Asserts: no panic; with a limit no input can reach, feeding the stream whole and
//! feeding it in the pieces give the same events and comment count; with a small limit, a split
//! feed that succeeds implies the whole feed succeeds with the same events (a split can only
//! buffer more, never less).
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfgate::client::sse::{SseDecoder, SseEvent};

fn run(chunks: &[&[u8]], limit: usize) -> Result<(Vec<SseEvent>, u32), ()> {
    let mut d = SseDecoder::new(limit);
    let mut events = Vec::new();
    let mut comments = 0;
    for c in chunks {
        let out = d.feed(c).map_err(|_| ())?;
        events.extend(out.events);
        comments += out.comments;
        assert!(d.pending_bytes() <= limit.max(3), "buffer beyond its bound");
    }
    events.extend(d.finish());
    Ok((events, comments))
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n % 16) as usize;
    if rest.len() < 2 * n {
        return;
    }
    let (cut_bytes, stream) = rest.split_at(2 * n);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize % (stream.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut chunks = Vec::with_capacity(n + 1);
    let mut prev = 0;
    for c in cuts {
        chunks.push(&stream[prev..c]);
        prev = c;
    }
    chunks.push(&stream[prev..]);

    let big = stream.len() + 1024;
    let whole = run(&[stream], big).expect("the limit is above the input size");
    let split = run(&chunks, big).expect("the limit is above the input size");
    assert_eq!(
        whole, split,
        "split feeding changed the events; chunks {chunks:?}"
    );

    let small = 64;
    if let Ok(split) = run(&chunks, small) {
        assert_eq!(run(&[stream], small), Ok(split), "chunks {chunks:?}");
    }
});
