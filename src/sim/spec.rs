//! Simulated speculative decoding (`draft_n`, `accept_rate`): how many draft tokens a request's
//! decode proposed and accepted, as llama.cpp drafts: after the first token (the prefill's),
//! each step drafts `min(draft_n, remaining - 1)` tokens, accepts each in turn with probability
//! `accept_rate` until the first rejection, and adds one token of the target model's own. The
//! draws are seeded by the simulator's seed and the request's number, so a run is repeatable.
//! Only the counts are simulated (llama.cpp's `timings.draft_n` / `draft_n_accepted` in the
//! usage chunk); the token timing is `tpot_ms`'s.

use crate::seeded::SplitMix64;

/// (drafted, accepted) for a request of `tokens` output tokens; `None` when `draft_n` is 0 (no
/// speculative decoding) or nothing was drafted.
pub(super) fn drafts(
    draft_n: u32,
    accept_rate: f64,
    seed: u64,
    seq: u64,
    tokens: u32,
) -> Option<(u64, u64)> {
    if draft_n == 0 {
        return None;
    }
    // a stream of its own: the latency draws of request `seq` are not shifted by these
    let mut rng = SplitMix64::for_item(seed ^ 0x5eed_d4af_7000_0001, seq);
    let (mut generated, mut drafted, mut accepted) = (1u64, 0u64, 0u64);
    let total = u64::from(tokens);
    while generated < total {
        let d = u64::from(draft_n).min(total - generated - 1);
        let mut a = 0;
        while a < d && (accept_rate >= 1.0 || rng.next_f64() < accept_rate) {
            a += 1;
        }
        drafted += d;
        accepted += a;
        generated += a + 1;
    }
    (drafted > 0).then_some((drafted, accepted))
}

#[cfg(test)]
mod tests {
    use super::drafts;

    /// 16 tokens, draft 4, every draft accepted: the prefill's token, then steps of 4 + 1 with
    /// 15, 10, 5 tokens to go: 12 drafted, 12 accepted (4 target steps: 16 / 4 = 4 tokens a step).
    /// Nothing accepted: a step drafts min(4, r - 1) with r = 15..=1 tokens to go:
    /// 11 x 4 + 3 + 2 + 1 + 0 = 50 drafted, 0 accepted.
    #[test]
    fn known_answers() {
        assert_eq!(drafts(4, 1.0, 42, 0, 16), Some((12, 12)));
        assert_eq!(drafts(4, 0.0, 42, 0, 16), Some((50, 0)));
        assert_eq!(drafts(0, 0.5, 42, 0, 16), None);
        assert_eq!(drafts(4, 0.5, 42, 0, 1), None);
        // seeded: the same request gives the same counts, another request others
        assert_eq!(drafts(4, 0.7, 7, 3, 64), drafts(4, 0.7, 7, 3, 64));
        let (d, a) = drafts(4, 0.7, 7, 3, 64).unwrap();
        assert!(a <= d && a < 64);
    }
}
