//! The latency plan of one simulated request: whether it fails, its TTFT and the arrival offset
//! of every token, all drawn from an RNG seeded by (config seed, request sequence number), so a
//! seed reproduces the same schedule for the n-th generation request of a server.
//!
//! TTFT = `ttft_ms` * exp(`ttft_sigma` * Z); each gap = `tpot_ms` * exp(`tpot_sigma` * Z), Z
//! standard normal (lognormal with median `*_ms`). Draw order is fixed: one uniform for the
//! fault decision, one Z for TTFT, then one Z per gap, whatever the settings, so changing
//! `error_rate` does not change the latencies.
//!
//! Stalls are deterministic: with `stall_every` N > 0, the gap after token N, 2N, 3N, ... is
//! `stall_ms` longer. (Bursts group these per-token offsets into events: see the server.)

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use super::config::{SimConfig, MAX_DELAY_MS};

/// SplitMix64 finaliser: a bijective 64-bit mix, used to decorrelate consecutive request numbers.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The RNG of generation request number `seq` (0-based) under `seed`.
pub fn request_rng(seed: u64, seq: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ splitmix64(seq))
}

/// The plan of one request. As an iterator it yields each token's arrival offset in ms after
/// the request arrived (non-decreasing), `output_tokens` items in all.
#[derive(Debug, Clone)]
pub struct RequestPlan {
    /// True when fault injection answers this request with HTTP 500.
    pub fails: bool,
    /// Time to first token, ms after arrival.
    pub ttft_ms: f64,
    /// Tokens this request generates.
    pub output_tokens: u32,
    rng: StdRng,
    tpot_ms: f64,
    tpot_sigma: f64,
    stall_every: u32,
    stall_ms: f64,
    emitted: u32,
    offset_ms: f64,
}

impl RequestPlan {
    /// Draws the plan of generation request `seq` producing `output_tokens` tokens.
    pub fn new(cfg: &SimConfig, seq: u64, output_tokens: u32) -> RequestPlan {
        let mut rng = request_rng(cfg.seed, seq);
        let u: f64 = rng.random();
        let fails = u < cfg.error_rate;
        let ttft_ms = lognormal(&mut rng, cfg.ttft_ms, cfg.ttft_sigma);
        RequestPlan {
            fails,
            ttft_ms,
            output_tokens,
            rng,
            tpot_ms: cfg.tpot_ms,
            tpot_sigma: cfg.tpot_sigma,
            stall_every: cfg.stall_every,
            stall_ms: cfg.stall_ms,
            emitted: 0,
            offset_ms: ttft_ms,
        }
    }

    /// The same plan with its first token at `ttft_ms` (a prefix-cache hit): every later token
    /// keeps its gap to the one before.
    pub fn with_ttft(mut self, ttft_ms: f64) -> RequestPlan {
        debug_assert_eq!(self.emitted, 0, "the plan has not started");
        self.ttft_ms = ttft_ms;
        self.offset_ms = ttft_ms;
        self
    }

    /// Arrival offset of the last token, ms (TTFT when there are no tokens). Consumes the
    /// remaining draws.
    pub fn total_ms(self) -> f64 {
        let ttft = self.ttft_ms;
        self.last().unwrap_or(ttft)
    }
}

impl Iterator for RequestPlan {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        if self.emitted >= self.output_tokens {
            return None;
        }
        if self.emitted > 0 {
            self.offset_ms += lognormal(&mut self.rng, self.tpot_ms, self.tpot_sigma);
            if self.stall_every > 0 && self.emitted % self.stall_every == 0 {
                self.offset_ms += self.stall_ms;
            }
        }
        self.emitted += 1;
        Some(self.offset_ms)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.output_tokens - self.emitted) as usize;
        (n, Some(n))
    }
}

/// median * exp(sigma * Z), clamped to [0, MAX_DELAY_MS] ms.
fn lognormal(rng: &mut StdRng, median_ms: f64, sigma: f64) -> f64 {
    let z: f64 = rng.sample(StandardNormal);
    let x = median_ms * (sigma * z).exp();
    if x.is_finite() {
        x.clamp(0.0, MAX_DELAY_MS)
    } else {
        MAX_DELAY_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(q: &str) -> SimConfig {
        SimConfig::from_query(q).unwrap()
    }

    #[test]
    fn fixed_when_sigma_zero() {
        let c = cfg("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0");
        let p = RequestPlan::new(&c, 3, 5);
        assert!(!p.fails);
        assert_eq!(p.ttft_ms, 100.0);
        let offs: Vec<f64> = p.collect();
        assert_eq!(offs, vec![100.0, 120.0, 140.0, 160.0, 180.0]);
        assert_eq!(RequestPlan::new(&c, 0, 5).total_ms(), 180.0);
        assert_eq!(RequestPlan::new(&c, 0, 0).total_ms(), 100.0);
    }

    #[test]
    fn stalls_lengthen_every_nth_gap() {
        let c = cfg("ttft_ms=10&tpot_ms=2&ttft_sigma=0&tpot_sigma=0&stall_every=3&stall_ms=50");
        let offs: Vec<f64> = RequestPlan::new(&c, 0, 8).collect();
        // tokens 1..8: gaps 2,2,(2+50),2,2,(2+50),2
        assert_eq!(offs, vec![10.0, 12.0, 14.0, 66.0, 68.0, 70.0, 122.0, 124.0]);
        // stalls do not shift the random draws: same gaps apart from the stalls
        let r = cfg("seed=3&tpot_sigma=0.4&stall_every=2&stall_ms=7");
        let plain = cfg("seed=3&tpot_sigma=0.4");
        let a: Vec<f64> = RequestPlan::new(&r, 5, 9).collect();
        let b: Vec<f64> = RequestPlan::new(&plain, 5, 9).collect();
        let ga: Vec<f64> = a.windows(2).map(|w| w[1] - w[0]).collect();
        let gb: Vec<f64> = b.windows(2).map(|w| w[1] - w[0]).collect();
        for (i, (x, y)) in ga.iter().zip(&gb).enumerate() {
            let stall = if (i + 1) % 2 == 0 { 7.0 } else { 0.0 };
            assert!((x - y - stall).abs() < 1e-9, "gap {i}: {x} vs {y}");
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let c = cfg("seed=7&ttft_sigma=0.5&tpot_sigma=0.5");
        for seq in 0..5 {
            let a: Vec<f64> = RequestPlan::new(&c, seq, 50).collect();
            let b: Vec<f64> = RequestPlan::new(&c, seq, 50).collect();
            assert_eq!(a, b);
        }
        let a: Vec<f64> = RequestPlan::new(&c, 0, 50).collect();
        let b: Vec<f64> = RequestPlan::new(&c, 1, 50).collect();
        assert_ne!(a, b, "requests differ");
        let d = cfg("seed=8&ttft_sigma=0.5&tpot_sigma=0.5");
        let e: Vec<f64> = RequestPlan::new(&d, 0, 50).collect();
        assert_ne!(a, e, "seeds differ");
        // error_rate does not shift the latency draws.
        let f = cfg("seed=7&ttft_sigma=0.5&tpot_sigma=0.5&error_rate=0.5");
        let g: Vec<f64> = RequestPlan::new(&f, 0, 50).collect();
        assert_eq!(a, g);
    }

    #[test]
    fn lognormal_median_and_spread() {
        let c = cfg("seed=1&ttft_ms=40&ttft_sigma=0.1&tpot_ms=8&tpot_sigma=0.1");
        let mut ttft: Vec<f64> = (0..2001)
            .map(|n| RequestPlan::new(&c, n, 1).ttft_ms)
            .collect();
        ttft.sort_by(f64::total_cmp);
        let med = ttft[1000];
        assert!((med - 40.0).abs() < 1.0, "median {med}");
        let logs: Vec<f64> = ttft.iter().map(|x| x.ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd =
            (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (logs.len() - 1) as f64).sqrt();
        assert!((sd - 0.1).abs() < 0.01, "log-sd {sd}");
        let offs: Vec<f64> = RequestPlan::new(&c, 0, 2001).collect();
        let mut gaps: Vec<f64> = offs.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_by(f64::total_cmp);
        assert!((gaps[1000] - 8.0).abs() < 0.2, "gap median {}", gaps[1000]);
    }

    #[test]
    fn error_rate_share() {
        let c = cfg("error_rate=0.25");
        let fails = (0..4000)
            .filter(|&n| RequestPlan::new(&c, n, 1).fails)
            .count();
        assert!((800..1200).contains(&fails), "{fails}");
        assert!((0..100).all(|n| RequestPlan::new(&cfg("error_rate=1"), n, 1).fails));
        assert!((0..100).all(|n| !RequestPlan::new(&cfg("error_rate=0"), n, 1).fails));
    }
}
