//! How much of an interleaved A/B run both arms had requests in flight at once (pure), and what
//! a reader is told about it: on one machine, two arms in flight at once slow each other, and a
//! change reads smaller than it is (issue 43: a +44 % TTFT measured +5 %).

use crate::results::AbOverlap;
use crate::runner::Span;

/// Share of the measured time above which overlap on one machine is worth a note: 1 %.
pub const NOTED_SHARE: f64 = 0.01;

/// The arms' overlap from every request's span: the time both arms had at least one request in
/// flight, over the time at least one had (a sweep over the spans' ends; O(n log n)).
pub fn of(spans: &[Span], alternated: bool, one_host: bool) -> AbOverlap {
    // (time, arm, +1 start / -1 end); at equal times ends first, so back-to-back is no overlap
    let mut ev: Vec<(f64, usize, i32)> = spans
        .iter()
        .filter(|s| s.arm < 2 && s.end_ms.is_finite() && s.start_ms.is_finite())
        .flat_map(|s| {
            [
                (s.start_ms, s.arm, 1),
                (s.end_ms.max(s.start_ms), s.arm, -1),
            ]
        })
        .collect();
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut open = [0i32; 2];
    let (mut both, mut any) = (0.0, 0.0);
    let mut last = ev.first().map_or(0.0, |e| e.0);
    for (t, arm, d) in ev {
        let dt = t - last;
        if open[0] > 0 && open[1] > 0 {
            both += dt;
        }
        if open[0] > 0 || open[1] > 0 {
            any += dt;
        }
        open[arm] += d;
        last = t;
    }
    AbOverlap {
        alternated,
        one_host,
        share: if any > 0.0 { both / any } else { 0.0 },
        both_ms: crate::units::round3(both),
        any_ms: crate::units::round3(any),
    }
}

/// The note a run gets when its arms overlapped on one machine; `None` otherwise.
pub fn note(o: &AbOverlap) -> Option<String> {
    (o.one_host && o.share > NOTED_SHARE).then(|| {
        format!(
            "both arms are on this machine and had requests in flight at once {:.0} % of the measured time (--overlap allowed): each arm slowed the other, which draws their figures together, so a change reads smaller than it is; measure with the default --overlap auto (the arms take turns) or --design blocked",
            100.0 * o.share
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(arm: usize, start_ms: f64, end_ms: f64) -> Span {
        Span {
            arm,
            start_ms,
            end_ms,
        }
    }

    #[test]
    fn overlap_is_the_time_both_arms_are_in_flight() {
        // A 0-100, B 50-150: both 50 of 150 ms
        let o = of(&[sp(0, 0.0, 100.0), sp(1, 50.0, 150.0)], false, true);
        assert_eq!((o.both_ms, o.any_ms), (50.0, 150.0));
        assert!((o.share - 1.0 / 3.0).abs() < 1e-12);
        // taking turns back to back, with a gap: none
        let o = of(
            &[sp(0, 0.0, 100.0), sp(1, 100.0, 180.0), sp(0, 190.0, 250.0)],
            true,
            true,
        );
        assert_eq!((o.both_ms, o.any_ms, o.share), (0.0, 240.0, 0.0));
        // two requests of one arm overlapping each other are not the arms overlapping
        let o = of(
            &[sp(0, 0.0, 100.0), sp(0, 20.0, 120.0), sp(1, 110.0, 200.0)],
            false,
            true,
        );
        assert_eq!((o.both_ms, o.any_ms), (10.0, 200.0));
        assert_eq!(of(&[], true, true).share, 0.0);
    }

    #[test]
    fn a_note_only_for_overlap_on_one_machine() {
        let o = of(&[sp(0, 0.0, 100.0), sp(1, 50.0, 150.0)], false, true);
        let n = note(&o).unwrap();
        assert!(n.contains("at once 33 % of the measured time"), "{n}");
        assert_eq!(
            note(&AbOverlap {
                one_host: false,
                ..o.clone()
            }),
            None
        );
        assert_eq!(note(&AbOverlap { share: 0.005, ..o }), None);
    }
}
