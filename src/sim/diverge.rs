//! Answers that diverge (`diverge_share`, `diverge_at`; docs/ab.md "Outputs that changed"): a
//! share of the simulator's generation requests answer ` alt{i}` instead of ` tok{i}` from
//! token `diverge_at` on, so that `perfgate ab` can be shown a candidate that is faster and
//! wrong, or a base that is not batch-invariant. Which requests diverge is spread evenly over
//! the request sequence, from a phase set by the seed, so a test knows their number by hand:
//! any N consecutive requests hold floor(N x share) or ceil(N x share) of them, exactly N x
//! share when that is whole. Pure.

use super::schedule::splitmix64;

/// The seed's phase in [0, 1): where the evenly spread divergences start.
fn phase(seed: u64) -> f64 {
    // a constant apart from the latency draws' streams (request_rng mixes seq, not this)
    (splitmix64(seed ^ 0xD17E_46E5_0000_0001) >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether generation request `seq` (0-based) diverges at `share`: the integer part of
/// `seq x share + phase` steps up between `seq` and `seq + 1`.
pub(super) fn diverges(seed: u64, seq: u64, share: f64) -> bool {
    if share <= 0.0 {
        return false;
    }
    if share >= 1.0 {
        return true;
    }
    let p = phase(seed);
    let at = |k: u64| (k as f64 * share + p).floor();
    at(seq + 1) > at(seq)
}

/// The first token (1-based) whose text changes in request `seq`, when it diverges.
pub(super) fn diverge_from(cfg: &super::config::SimConfig, seq: u64) -> Option<u32> {
    diverges(cfg.seed, seq, cfg.diverge_share).then_some(cfg.diverge_at.max(1))
}

/// The word of token `i` (1-based) of an answer that diverges `from` that token (`None`: it does
/// not): `alt` from it on, `tok` before.
pub(super) fn word(i: u32, from: Option<u32>) -> &'static str {
    match from {
        Some(f) if i >= f => "alt",
        _ => "tok",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_n_consecutive_requests_hold_n_times_the_share() {
        for seed in [0, 7, 42, 1234] {
            for (share, n) in [(0.25, 20u64), (0.5, 40), (0.05, 100), (0.2, 10)] {
                for start in [0u64, 3, 11] {
                    let k = (start..start + n)
                        .filter(|&s| diverges(seed, s, share))
                        .count() as f64;
                    // N x share whole: exactly it (20 x 0.25 = 5, 40 x 0.5 = 20, ...)
                    assert_eq!(
                        k,
                        n as f64 * share,
                        "seed {seed} share {share} start {start}"
                    );
                }
            }
        }
        assert!((0..50).all(|s| !diverges(1, s, 0.0)));
        assert!((0..50).all(|s| diverges(1, s, 1.0)));
        assert_eq!(word(1, Some(2)), "tok");
        assert_eq!(word(2, Some(2)), "alt");
        assert_eq!(word(9, None), "tok");
    }
}
