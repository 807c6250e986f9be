//! The `gate.slo` rows of `calibrate`: an objective on the TTFT profile's P90, with no
//! baseline, at, above and below the true P90 (the mixture's quantile, solved by bisection).

use super::noise::{draw, rates, Change, Profile, TTFT};

/// One SLO experiment: n requests from [`TTFT`], an objective on its P90 at `factor` times
/// the true P90.
#[derive(Debug, Clone)]
pub struct SloExperiment {
    pub label: String,
    pub n: usize,
    pub factor: f64,
}

/// The SLO rows: the objective exactly at the true P90 (the false-FAIL rate must stay at or
/// under alpha), 25 % above it (shown met) and 25 % below it (shown missed).
pub fn slo_experiments() -> Vec<SloExperiment> {
    let mut v = Vec::new();
    for (what, factor) in [
        ("at the true P90", 1.0),
        ("25% above P90", 1.25),
        ("25% below P90", 0.8),
    ] {
        for n in [20, 100, 500] {
            v.push(SloExperiment {
                label: format!("SLO ttft_p90 {what}, n {n}"),
                n,
                factor,
            });
        }
    }
    v
}

/// The p-quantile of a profile's mixture (no drift): the x where
/// (1 - s) Phi((ln x - ln m) / sigma) + s Phi((ln(x / f) - ln m) / sigma) = p, by bisection.
pub fn true_quantile(pr: &Profile, p: f64) -> f64 {
    use crate::stats::normal::normal_cdf;
    let cdf = |x: f64| {
        let z = |y: f64| (y.ln() - pr.median_ms.ln()) / pr.sigma;
        (1.0 - pr.slow_share) * normal_cdf(z(x)) + pr.slow_share * normal_cdf(z(x / pr.slow_factor))
    };
    let (mut lo, mut hi) = (1e-9, pr.median_ms * pr.slow_factor * 1e3);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// [FAIL, PASS, WARN] rates of the SLO check over `reps` replicates.
pub fn run_slo(e: &SloExperiment, reps: usize, seed: u64) -> [f64; 3] {
    use crate::stats::objective::{share_test, Decision};
    let threshold = true_quantile(&TTFT, 0.9) * e.factor;
    rates(reps, seed, |rng| {
        let xs = draw(&TTFT, e.n, 1.0, Change::None, rng);
        let over = xs.iter().filter(|x| **x > threshold).count() as u64;
        match share_test(over, e.n as u64, 0.1).decide(0.01) {
            Decision::Missed => 0,
            Decision::Met => 1,
            Decision::Undecided => 2,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::noise::TPOT;
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn the_true_quantile_is_where_the_mixture_cdf_is_p() {
        // Without a slow path it is the lognormal's: m * exp(sigma * z_p), z_0.9 = 1.281552.
        let q = true_quantile(&TPOT, 0.9);
        assert!(
            (q - 20.0 * (0.10f64 * 1.281_551_565_5).exp()).abs() < 1e-6,
            "{q}"
        );
        // With one: a large sample's share below it is 0.9.
        let q = true_quantile(&TTFT, 0.9);
        let mut rng = StdRng::seed_from_u64(3);
        let xs = draw(&TTFT, 200_000, 1.0, Change::None, &mut rng);
        let below = xs.iter().filter(|x| **x <= q).count() as f64 / xs.len() as f64;
        assert!((below - 0.9).abs() < 0.003, "{below}");
    }

    #[test]
    fn the_slo_check_false_fails_at_most_alpha_at_the_threshold() {
        let rows = slo_experiments();
        let at = rows
            .iter()
            .find(|e| e.label == "SLO ttft_p90 at the true P90, n 100")
            .unwrap();
        let r = run_slo(at, 2000, 11);
        // exact binomial test: at most alpha (0.01) plus Monte-Carlo error (sd 0.0022 at 2000)
        assert!(r[0] <= 0.01 + 3.0 * 0.0023, "{r:?}");
        let below = rows
            .iter()
            .find(|e| e.label == "SLO ttft_p90 25% below P90, n 500")
            .unwrap();
        assert!(run_slo(below, 400, 12)[0] > 0.9);
    }
}
