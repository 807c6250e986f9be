//! A whole stream through perfgate's measuring path: arbitrary bytes in arbitrary pieces ->
//! SSE decoder (the `error:` field line included) -> dialect (vendor usage `x_groq.usage`,
//! finish_reason variants "", "null", on every chunk; cumulative usage) -> Measurer -> record.
//!
//! Input layout: byte 0 = API (mod 4: chat, completions, anthropic, responses) and number of
//! cuts (bits 2..6, mod 16); byte 1 =
//! max_tokens (0 = none, else the byte x 64); byte 2 = how the body ends (even: EOF, odd: a
//! reset); then 2 bytes per cut, as in `sse_decoder`; the rest is the stream. Each read is
//! stamped 1 ms after the previous one.
//!
//! Asserts: no panic; the record is bounded and consistent: at most ITL_KEEP ITL values, all
//! finite and >= 0; itl_count (when present) above ITL_KEEP; output_tokens >= 1 for a
//! success and >= token_events when counted from usage; tokens_after_finish <= token_events;
//! TPOT defined exactly when a success has more than one token; a usage figure is never
//! believed above max_tokens or MAX_TOKENS_PER_EVENT per token event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfgate::client::dialect;
use perfgate::client::measure::{End, Measurer, Stamped, MAX_TOKENS_PER_EVENT};
use perfgate::client::sse::SseDecoder;
use perfgate::config::Api;
use perfgate::record::{Failure, FailureClass, TokenSource};
use perfgate::stats::itl::ITL_KEEP;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let api = match data[0] % 4 {
        0 => Api::OpenaiChat,
        1 => Api::OpenaiCompletions,
        2 => Api::AnthropicMessages,
        _ => Api::OpenaiResponses,
    };
    let n = ((data[0] >> 2) % 16) as usize;
    let max_tokens = (data[1] != 0).then(|| data[1] as u64 * 64);
    let reset = data[2] % 2 == 1;
    let rest = &data[3..];
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

    let mut dec = SseDecoder::new(1 << 20);
    let mut m = Measurer::new(0.0);
    let mut at = 0.0;
    let mut done = false;
    for c in &chunks {
        at += 1.0;
        let Ok(out) = dec.feed(c) else { return };
        for ev in out.events {
            let info = dialect::interpret(api, &ev);
            done |= info.done;
            m.push(&Stamped { at_ms: at, info });
        }
        if done {
            break;
        }
    }
    at += 1.0;
    if let Some(ev) = dec.finish() {
        m.push(&Stamped {
            at_ms: at,
            info: dialect::interpret(api, &ev),
        });
    }
    let end = if reset && !done {
        End::Failed(
            Failure {
                class: FailureClass::Truncated,
                status: None,
                message: "reset".into(),
            },
            at,
        )
    } else {
        End::Eof(at)
    };
    let r = m.finish(end, max_tokens);

    assert!(r.itl_ms.len() <= ITL_KEEP, "{} ITL values", r.itl_ms.len());
    assert!(r.itl_ms.iter().all(|x| x.is_finite() && *x >= 0.0), "{:?}", r.itl_ms);
    if let Some(c) = r.itl_count {
        assert!(c > ITL_KEEP as u64 && r.itl_ms.len() == ITL_KEEP, "{c}");
    }
    assert!(r.tokens_after_finish.unwrap_or(0) <= r.token_events);
    if let (Some(tokens), Some(src)) = (r.output_tokens, r.token_source) {
        assert!(tokens >= 1);
        match src {
            TokenSource::Events => assert_eq!(tokens, r.token_events),
            TokenSource::Usage | TokenSource::VendorUsage => {
                assert!(tokens >= r.token_events);
                assert!(tokens <= r.token_events.saturating_mul(MAX_TOKENS_PER_EVENT));
                if let Some(mt) = max_tokens {
                    assert!(tokens <= mt, "{tokens} > max_tokens {mt}");
                }
            }
        }
    }
    if r.ok() {
        let tokens = r.output_tokens.expect("a success has tokens");
        assert_eq!(r.tpot_ms.is_some(), tokens > 1);
        assert!(r.ttft_ms.is_some() && r.e2e_ms >= r.ttft_ms);
    }
});
