//! The steady state of a closed loop at concurrency c > 1 (docs/scenarios.md "Steady state"),
//! as pure functions: how far apart the ramp-up starts its streams, which requests of a look
//! are the ramp-up, measured or the drain, and the concurrency each request actually ran at.

use std::time::Duration;

/// Longest gap between two streams' starts in the ramp-up: a server whose requests take
/// minutes is ramped over at most c x this.
pub const MAX_RAMP_STEP: Duration = Duration::from_secs(10);

/// Unmeasured drain requests per stream at most: enough to keep c in flight until the last
/// measured request ends when the requests take about as long as each other, bounded when
/// one measured request takes much longer than the rest.
pub const DRAIN_PER_STREAM: usize = 2;

/// The gap between two streams' starts in the ramp-up: the median E2E of the warmup's
/// successful requests over c, so the c streams are spread over one request's duration and
/// their prefills do not come together. Zero (all at once) without a successful warmup
/// request.
pub fn ramp_step(warmup_e2e_ms: &[f64], concurrency: usize) -> Duration {
    let mut ok: Vec<f64> = warmup_e2e_ms
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if ok.is_empty() || concurrency < 2 {
        return Duration::ZERO;
    }
    ok.sort_by(f64::total_cmp);
    let m = ok.len() / 2;
    let median = if ok.len() % 2 == 1 {
        ok[m]
    } else {
        (ok[m - 1] + ok[m]) / 2.0
    };
    Duration::from_secs_f64(median / 1000.0 / concurrency as f64).min(MAX_RAMP_STEP)
}

/// What request `i` (in start order) of a steady look of `measured` requests at concurrency
/// `c` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One of the first c: started while the streams ramp up, not measured.
    RampUp,
    /// Measured, as request `i - c` of the look.
    Measured(usize),
    /// Started after the last measured request, to keep c in flight until it ends.
    Drain,
}

pub fn role(i: usize, concurrency: usize, measured: usize) -> Role {
    if i < concurrency {
        Role::RampUp
    } else if i < concurrency + measured {
        Role::Measured(i - concurrency)
    } else {
        Role::Drain
    }
}

/// The concurrency each request ran at: the number of requests in flight (itself included),
/// averaged over its own duration, from every request's `(start, end)` of the look (ms, any
/// common origin); a request of zero length counts the requests in flight at its start. One
/// sweep over the sorted starts and ends gives the integral of the in-flight count, so n
/// requests cost O(n log n), not the O(n^2) of summing every pair's overlap.
pub fn achieved_all(intervals: &[(f64, f64)]) -> Vec<f64> {
    let mut starts: Vec<f64> = intervals.iter().map(|&(s, _)| s).collect();
    let mut ends: Vec<f64> = intervals.iter().map(|&(_, e)| e).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    // the in-flight count changes only at these times; `area[k]` is its integral up to times[k]
    let mut times: Vec<f64> = starts.iter().chain(&ends).copied().collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    // saturating: an interval that ends before it starts (read from a hostile file) counts as
    // nothing rather than a negative count
    let in_flight_after = |t: f64| {
        starts
            .partition_point(|&x| x <= t)
            .saturating_sub(ends.partition_point(|&x| x <= t)) as f64
    };
    let mut area = Vec::with_capacity(times.len());
    let mut acc = 0.0;
    for (k, &t) in times.iter().enumerate() {
        if k > 0 {
            acc += in_flight_after(times[k - 1]) * (t - times[k - 1]);
        }
        area.push(acc);
    }
    let integral = |t: f64| -> f64 {
        match times.partition_point(|&x| x <= t) {
            0 => 0.0,
            k => area[k - 1] + in_flight_after(times[k - 1]) * (t - times[k - 1]),
        }
    };
    intervals
        .iter()
        .map(|&(s, e)| {
            if e > s {
                (integral(e) - integral(s)) / (e - s)
            } else {
                // started at or before s and not ended before s
                let began = starts.partition_point(|&x| x <= s);
                let ended = ends.partition_point(|&x| x < s);
                began.saturating_sub(ended).max(1) as f64
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_that_ends_before_it_starts_counts_as_nothing() {
        // [20, 5] (a hostile file's; the merge refuses it first) neither panics nor makes a
        // count below zero: the sorted end at 5 ends [0, 10]'s count early, 0.5 on average
        let got = achieved_all(&[(0.0, 10.0), (20.0, 5.0)]);
        assert_eq!(got[0], 0.5);
        assert!(got.iter().all(|c| c.is_finite() && *c >= 0.0), "{got:?}");
    }

    #[test]
    fn the_ramp_spreads_c_streams_over_one_request() {
        // warmup E2Es 300, 340, 320 ms: median 320, over 8 streams 40 ms apart
        assert_eq!(
            ramp_step(&[300.0, 340.0, 320.0], 8),
            Duration::from_millis(40)
        );
        // an even count takes the middle pair's mean: (300 + 340) / 2 / 4 = 80 ms
        assert_eq!(
            ramp_step(&[300.0, 340.0, f64::NAN, 1000.0, 100.0], 4),
            Duration::from_millis(80)
        );
        assert_eq!(ramp_step(&[], 8), Duration::ZERO);
        assert_eq!(ramp_step(&[300.0], 1), Duration::ZERO);
        assert_eq!(ramp_step(&[3_600_000.0], 2), MAX_RAMP_STEP);
    }

    #[test]
    fn roles_of_a_look() {
        let r: Vec<Role> = (0..7).map(|i| role(i, 2, 3)).collect();
        assert_eq!(
            r,
            [
                Role::RampUp,
                Role::RampUp,
                Role::Measured(0),
                Role::Measured(1),
                Role::Measured(2),
                Role::Drain,
                Role::Drain
            ]
        );
    }

    #[test]
    fn achieved_concurrency_by_hand() {
        // request 0 runs 0..100; request 1 runs 50..150; request 2 runs 0..25.
        // Over 0..100: itself 100 + request 1's 50 + request 2's 25 = 175 ms / 100 ms = 1.75
        let iv = [(0.0, 100.0), (50.0, 150.0), (0.0, 25.0)];
        let a = achieved_all(&iv);
        assert!((a[0] - 1.75).abs() < 1e-12);
        // request 1 over 50..150: itself 100 + request 0's 50 = 1.5
        assert!((a[1] - 1.5).abs() < 1e-12);
        // request 2 over 0..25: itself and request 0 all along = 2
        assert!((a[2] - 2.0).abs() < 1e-12);
        // a zero-length request at 60 sees requests 0 and 1 in flight, and itself
        let iv = [(0.0, 100.0), (50.0, 150.0), (60.0, 60.0)];
        assert_eq!(achieved_all(&iv)[2], 3.0);
    }
}
