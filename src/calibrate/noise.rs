//! The latency model of `calibrate`: a metric's noise profile (lognormal around a median, a
//! share of requests on a slow path), the change applied to the candidate, and drawing a run's
//! samples under a per-run drift.

use crate::config::scenario::Metric;
use crate::stats::quantile::{quantile_type7, sorted};
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::StandardNormal;

/// A noise profile of one metric.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Which metric it models.
    pub metric: Metric,
    /// Median, ms.
    pub median_ms: f64,
    /// Lognormal log-sd within a run.
    pub sigma: f64,
    /// Share of requests on the slow path.
    pub slow_share: f64,
    /// Slow-path multiplier.
    pub slow_factor: f64,
}

/// TTFT: lognormal sigma 0.35 around 200 ms, 5 % of requests 3x slower.
pub const TTFT: Profile = Profile {
    metric: Metric::Ttft,
    median_ms: 200.0,
    sigma: 0.35,
    slow_share: 0.05,
    slow_factor: 3.0,
};
/// TPOT: lognormal sigma 0.10 around 20 ms.
pub const TPOT: Profile = Profile {
    metric: Metric::Tpot,
    median_ms: 20.0,
    sigma: 0.10,
    slow_share: 0.0,
    slow_factor: 1.0,
};

/// A change applied to the candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// No change.
    None,
    /// Every request slower by this factor (1.2 = +20 %).
    Uniform(f64),
    /// The slow-path share becomes this (tail-only regression).
    SlowShare(f64),
}

/// `n` requests of `p` in a run at `drift` (a factor), the candidate's `change` applied.
pub(super) fn draw(
    p: &Profile,
    n: usize,
    drift: f64,
    change: Change,
    rng: &mut StdRng,
) -> Vec<f64> {
    let (factor, slow) = match change {
        Change::None => (1.0, p.slow_share),
        Change::Uniform(f) => (f, p.slow_share),
        Change::SlowShare(s) => (1.0, s),
    };
    (0..n)
        .map(|_| {
            let z: f64 = rng.sample(StandardNormal);
            let mut x = p.median_ms * (p.sigma * z).exp() * drift * factor;
            if slow > 0.0 && rng.random::<f64>() < slow {
                x *= p.slow_factor;
            }
            x
        })
        .collect()
}

/// One run's drift factor, exp(tau * Z).
pub(super) fn drift(tau: f64, rng: &mut StdRng) -> f64 {
    let z: f64 = rng.sample(StandardNormal);
    (tau * z).exp()
}

/// The share of `reps` replicates in each of `N` outcomes: `one` draws a replicate from the
/// seeded generator and names its outcome's index.
pub(super) fn rates<const N: usize>(
    reps: usize,
    seed: u64,
    mut one: impl FnMut(&mut StdRng) -> usize,
) -> [f64; N] {
    let mut rng = <StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let mut counts = [0usize; N];
    for _ in 0..reps {
        counts[one(&mut rng)] += 1;
    }
    counts.map(|c| c as f64 / reps.max(1) as f64)
}

/// The sample q-quantile (type 7) of `v`; NaN when empty.
pub(super) fn p(v: &[f64], q: f64) -> f64 {
    quantile_type7(&sorted(v), q).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn draws_follow_the_profile() {
        let mut rng = StdRng::seed_from_u64(1);
        let x = draw(&TPOT, 20_000, 1.0, Change::None, &mut rng);
        let med = p(&x, 0.5);
        assert!((med / 20.0 - 1.0).abs() < 0.01, "median {med}");
        let y = draw(&TPOT, 20_000, 1.0, Change::Uniform(1.2), &mut rng);
        assert!((p(&y, 0.5) / med - 1.2).abs() < 0.02);
        let t = draw(&TTFT, 40_000, 1.0, Change::None, &mut rng);
        // 5 % of requests 3x slower: P99 well above the lognormal's own 200 * e^(2.326 * 0.35).
        assert!(p(&t, 0.99) > 200.0 * (2.326f64 * 0.35).exp() * 1.5);
    }
}
