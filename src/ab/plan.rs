//! The order of an A/B run (pure): which arm each request (interleaved) or block (blocked) goes
//! to, and how an arm's samples are split over its blocks (docs/design.md "A/B runs").

use super::OverlapChoice;
use crate::gate::Side;
use crate::runner::InFlight;

/// Interleaved order of `per_arm` requests per arm: `per_arm` consecutive pairs, each AB or BA
/// by a coin of the seeded generator. Balanced by construction: after every pair both arms have
/// sent the same number, so a slow minute of the machine reaches both arms alike, and a
/// fixed-position effect (the first of a pair waits less) goes to either arm at random.
pub fn interleaved(per_arm: usize, seed: u64) -> Vec<Side> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(2 * per_arm);
    for _ in 0..per_arm {
        if rng.random::<bool>() {
            out.extend([Side::Base, Side::Candidate]);
        } else {
            out.extend([Side::Candidate, Side::Base]);
        }
    }
    out
}

/// Interleaved order when the arms take turns ([`InFlight::OneArm`]): pairs of turns, each AB
/// or BA by a coin of the seeded generator, a turn `width` requests of one arm (the arm's
/// concurrency, so a turn fills its slots; the last turns shorter when `per_arm` is not a
/// multiple). With `width` 1 it is [`interleaved`]'s order.
pub fn turns(per_arm: usize, width: usize, seed: u64) -> Vec<Side> {
    let width = width.max(1);
    let coins = interleaved(per_arm.div_ceil(width), seed);
    let mut out = Vec::with_capacity(2 * per_arm);
    let mut done = 0;
    for pair in coins.chunks(2) {
        let n = width.min(per_arm - done);
        for &side in pair {
            out.extend(std::iter::repeat_n(side, n));
        }
        done += n;
    }
    out
}

/// How the arms' requests may overlap: `--overlap auto` keeps them apart when both arms are on
/// this machine (where they would slow each other) and lets them overlap otherwise.
pub fn in_flight(choice: OverlapChoice, one_host: bool) -> InFlight {
    match (choice, one_host) {
        (OverlapChoice::Never, _) | (OverlapChoice::Auto, true) => InFlight::OneArm,
        (OverlapChoice::Allowed, _) | (OverlapChoice::Auto, false) => InFlight::BothArms,
    }
}

/// Blocked order of `k` blocks per arm: the first 2k letters of the Thue-Morse sequence
/// (ABBA BAAB ABBA ...). Each group of four is ABBA or BAAB, which cancels a drift that is
/// linear over the group; for k a power of two the whole order also cancels drift up to degree
/// log2(k) (ABBABAAB: quadratic). An odd k ends with one pair (AB or BA) that a linear drift
/// reaches unevenly, by one block's step.
pub fn blocked(k: usize) -> Vec<Side> {
    (0..2 * k)
        .map(|i| {
            if (i as u64).count_ones() % 2 == 0 {
                Side::Base
            } else {
                Side::Candidate
            }
        })
        .collect()
}

/// `n` requests split over `k` blocks: as equal as possible, the earlier blocks one larger.
pub fn split(n: usize, k: usize) -> Vec<usize> {
    let k = k.max(1);
    (0..k).map(|i| n / k + usize::from(i < n % k)).collect()
}

/// The order as letters, `A` = base, `B` = candidate (`ABBA`).
pub fn letters(order: &[Side]) -> String {
    order
        .iter()
        .map(|s| match s {
            Side::Base => 'A',
            Side::Candidate => 'B',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_pairs_are_balanced_and_seeded() {
        let o = interleaved(40, 7);
        assert_eq!(o.len(), 80);
        assert_eq!(o, interleaved(40, 7));
        assert_ne!(o, interleaved(40, 8));
        for p in o.chunks(2) {
            assert_ne!(p[0], p[1], "every pair is AB or BA");
        }
        let ab = o.chunks(2).filter(|p| p[0] == Side::Base).count();
        assert!(
            (10..=30).contains(&ab),
            "both pair orders occur: {ab} of 40 AB"
        );
    }

    #[test]
    fn turns_of_one_are_the_interleaved_pairs() {
        assert_eq!(turns(40, 1, 7), interleaved(40, 7));
        // seed 7's first coins, by hand from interleaved(): the pairs' orders
        let pairs = letters(&interleaved(3, 7));
        let t = letters(&turns(6, 2, 7));
        assert_eq!(t.len(), 12);
        let want: String = pairs.chars().flat_map(|c| [c, c]).collect();
        assert_eq!(t, want, "each letter of the pairs doubled");
        // 5 per arm in turns of 2: 2 + 2 + 1 each
        let t = turns(5, 2, 7);
        assert_eq!(t.len(), 10);
        assert_eq!(t.iter().filter(|&&s| s == Side::Base).count(), 5);
        assert_eq!(&letters(&t)[8..], &letters(&interleaved(3, 7))[4..]);
    }

    #[test]
    fn arms_on_one_machine_take_turns_by_default() {
        use OverlapChoice::*;
        assert_eq!(in_flight(Auto, true), InFlight::OneArm);
        assert_eq!(in_flight(Auto, false), InFlight::BothArms);
        assert_eq!(in_flight(Never, false), InFlight::OneArm);
        assert_eq!(in_flight(Allowed, true), InFlight::BothArms);
    }

    #[test]
    fn blocks_follow_thue_morse() {
        assert_eq!(letters(&blocked(2)), "ABBA");
        assert_eq!(letters(&blocked(3)), "ABBABA");
        assert_eq!(letters(&blocked(4)), "ABBABAAB");
        // a linear drift reaches both arms equally for even k
        for k in [2, 4, 6, 8] {
            let o = blocked(k);
            let pos = |s: Side| -> usize { (0..o.len()).filter(|&i| o[i] == s).sum() };
            assert_eq!(pos(Side::Base), pos(Side::Candidate), "k = {k}");
        }
    }

    #[test]
    fn samples_split_over_blocks() {
        assert_eq!(split(20, 2), [10, 10]);
        assert_eq!(split(21, 2), [11, 10]);
        assert_eq!(split(20, 3), [7, 7, 6]);
        assert_eq!(split(20, 3).iter().sum::<usize>(), 20);
    }
}
