//! How much of an interleaved A/B run both arms had requests in flight at once (pure), and what
//! a reader is told about it: on one machine, two arms in flight at once slow each other, and a
//! change reads smaller than it is (issue 43: a +44 % TTFT measured +5 %).

use crate::results::AbOverlap;
use crate::runner::Span;

/// Share of the measured time above which overlap on one machine is worth a note: 1 %.
pub const NOTED_SHARE: f64 = 0.01;

/// The arms' overlap from every request's span: the time both arms had at least one request in
/// flight, over the time at least one had.
pub fn of(spans: &[Span], alternated: bool, one_host: bool) -> AbOverlap {
    let t = sweep(spans);
    AbOverlap {
        alternated,
        one_host,
        share: if t.any > 0.0 { t.both / t.any } else { 0.0 },
        both_ms: crate::units::round3(t.both),
        any_ms: crate::units::round3(t.any),
    }
}

/// Per arm, the time it had at least one request in flight, ms: an arm's measured wall time
/// when the arms take turns (its output throughput is over its own turns, as `check`'s is over
/// its run, not over the other arm's turns as well).
pub fn busy_ms(spans: &[Span]) -> [f64; 2] {
    sweep(spans).busy
}

/// In-flight times of a sweep over the spans' ends (O(n log n)).
struct Times {
    /// Both arms in flight.
    both: f64,
    /// At least one arm in flight.
    any: f64,
    /// Each arm in flight.
    busy: [f64; 2],
}

fn sweep(spans: &[Span]) -> Times {
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
    let mut t = Times {
        both: 0.0,
        any: 0.0,
        busy: [0.0; 2],
    };
    let mut last = ev.first().map_or(0.0, |e| e.0);
    for (at, arm, d) in ev {
        let dt = at - last;
        if open[0] > 0 && open[1] > 0 {
            t.both += dt;
        }
        if open[0] > 0 || open[1] > 0 {
            t.any += dt;
        }
        for (b, o) in t.busy.iter_mut().zip(open) {
            if o > 0 {
                *b += dt;
            }
        }
        open[arm] += d;
        last = at;
    }
    t
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
    fn each_arm_is_busy_while_one_of_its_requests_is_in_flight() {
        // A 0-10 and 5-15 (one stretch of 15), then 20-30; B 15-20 and 30-40: A 25, B 15
        let spans = [
            sp(0, 0.0, 10.0),
            sp(0, 5.0, 15.0),
            sp(1, 15.0, 20.0),
            sp(0, 20.0, 30.0),
            sp(1, 30.0, 40.0),
        ];
        assert_eq!(busy_ms(&spans), [25.0, 15.0]);
        assert_eq!(busy_ms(&[]), [0.0, 0.0]);
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
