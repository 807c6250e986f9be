//! `request.generate`: requests whose input and output lengths are drawn from stated
//! distributions (docs/scenarios.md "Generated lengths"). Each request's lengths come from its
//! own seeded stream ([`GenerateSpec::draw`]), so `bless` and `check` send the same lengths in
//! the same order; the prompt of each is the synthetic prompt
//! ([`crate::synthetic_prompt::text_seeded`]) scaled by a line fitted to the server's own
//! count before the warmup ([`crate::synthetic_prompt::Scale`]).

use super::common::{fit_points, Slot};
use super::file::{RawDist, RawGenerate};
use crate::config::common::{bail, ensure, Invalid};
use crate::seeded::SplitMix64;
use serde::Serialize;

/// Largest drawn output length (tokens).
pub const MAX_OUTPUT_TOKENS: u32 = 1_000_000;

/// A length distribution, tokens; every draw is rounded and kept within `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "distribution", rename_all = "lowercase")]
pub enum Dist {
    /// Every whole number from `min` to `max` equally likely.
    Uniform { min: u32, max: u32 },
    /// Normal with `mean` and standard deviation `sd`.
    Normal {
        mean: f64,
        sd: f64,
        min: u32,
        max: u32,
    },
    /// Lognormal with `median` and log-sd `sigma` (a long right tail, as real prompt lengths).
    Lognormal {
        median: f64,
        sigma: f64,
        min: u32,
        max: u32,
    },
}

impl Dist {
    /// The bounds every draw is kept within.
    pub fn bounds(&self) -> (u32, u32) {
        match *self {
            Dist::Uniform { min, max }
            | Dist::Normal { min, max, .. }
            | Dist::Lognormal { min, max, .. } => (min, max),
        }
    }

    /// `normal (mean 512, sd 128, 1..=4096)`.
    pub fn describe(&self) -> String {
        use crate::units::Num;
        match *self {
            Dist::Uniform { min, max } => format!("uniform ({min}..={max})"),
            Dist::Normal { mean, sd, min, max } => {
                format!("normal (mean {}, sd {}, {min}..={max})", Num(mean), Num(sd))
            }
            Dist::Lognormal {
                median,
                sigma,
                min,
                max,
            } => format!(
                "lognormal (median {}, sigma {}, {min}..={max})",
                Num(median),
                Num(sigma)
            ),
        }
    }

    /// One draw from `rng` (one uniform for `uniform`, two for the others: Box-Muller).
    pub fn sample(&self, rng: &mut SplitMix64) -> u32 {
        let (min, max) = self.bounds();
        let x = match *self {
            Dist::Uniform { min, max } => {
                return min + rng.below(u64::from(max - min) + 1) as u32;
            }
            Dist::Normal { mean, sd, .. } => mean + sd * rng.next_normal(),
            Dist::Lognormal { median, sigma, .. } => median * (sigma * rng.next_normal()).exp(),
        };
        x.round().clamp(f64::from(min), f64::from(max)) as u32
    }

    /// The `q` quantile (0 < q < 1) of the distribution as drawn (rounded and kept within the
    /// bounds): where the synthetic prompt is fitted.
    pub fn quantile(&self, q: f64) -> u32 {
        let (min, max) = self.bounds();
        let z = crate::stats::normal::normal_quantile(q);
        let x = match *self {
            Dist::Uniform { min, max } => f64::from(min) + q * f64::from(max - min),
            Dist::Normal { mean, sd, .. } => mean + sd * z,
            Dist::Lognormal { median, sigma, .. } => median * (sigma * z).exp(),
        };
        x.round().clamp(f64::from(min), f64::from(max)) as u32
    }
}

/// The validated `request.generate`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerateSpec {
    /// Prompt tokens per request.
    pub input_tokens: Dist,
    /// Output tokens per request (each request's `max_tokens`); `None`: `request.max_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<Dist>,
    /// Seed of the draws.
    pub seed: u64,
}

/// What one request was drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// Its prompt's length, tokens (by the server's count, as fitted).
    pub input_tokens: u32,
    /// Its output length (`max_tokens`), when `output_tokens` is given.
    pub output_tokens: Option<u32>,
    /// Which filler-word sequence its prompt has ([`crate::synthetic_prompt::text_seeded`]).
    pub text_seed: u64,
}

/// Salt of the unmeasured requests' streams: they draw from the same distributions, other
/// values.
const UNMEASURED: u64 = 0x5741_524D_5550_0001;

impl GenerateSpec {
    /// The lengths of the request in `slot`: measured request g draws from stream (seed, g),
    /// unmeasured request i from another stream (seed ^ salt, i); input first, then output,
    /// then the text's seed. Depends only on the seed and the index, so a load shard that
    /// sends every N-th index draws what one process would.
    pub fn draw(&self, slot: Slot) -> Drawn {
        let mut rng = match slot {
            Slot::Measured(g) => SplitMix64::for_item(self.seed, g as u64),
            Slot::Unmeasured(i) => SplitMix64::for_item(self.seed ^ UNMEASURED, i as u64),
        };
        let input_tokens = self.input_tokens.sample(&mut rng);
        let output_tokens = self.output_tokens.map(|d| d.sample(&mut rng));
        Drawn {
            input_tokens,
            output_tokens,
            text_seed: rng.next_u64(),
        }
    }

    /// A summary for `validate`: `generated lengths: input lognormal (median 200, sigma 0.8,
    /// 20..=2000), output uniform (4..=32), seed 5`.
    pub fn describe(&self) -> String {
        let out = match &self.output_tokens {
            Some(d) => d.describe(),
            None => "request.max_tokens".to_string(),
        };
        format!(
            "generated lengths: input {}, output {out}, seed {}",
            self.input_tokens.describe(),
            self.seed
        )
    }

    /// The prompt lengths the synthetic prompt is fitted at: the 10th and 90th percentiles
    /// ([`fit_points`]).
    pub fn fit_points(&self) -> Vec<u32> {
        fit_points(
            self.input_tokens.quantile(0.1),
            self.input_tokens.quantile(0.9),
        )
    }
}

/// Validates `request.generate`. Errors: the key and what to write.
pub fn build(raw: &RawGenerate) -> Result<GenerateSpec, Invalid> {
    let input = raw.input_tokens.as_ref().ok_or(
        "request.generate.input_tokens is required, e.g. {distribution: normal, mean: 512, sd: 128}",
    )?;
    let input_tokens = dist(
        "request.generate.input_tokens",
        input,
        crate::synthetic_prompt::MAX_PROMPT_TOKENS,
    )?;
    let output_tokens = raw
        .output_tokens
        .as_ref()
        .map(|d| dist("request.generate.output_tokens", d, MAX_OUTPUT_TOKENS))
        .transpose()?;
    Ok(GenerateSpec {
        input_tokens,
        output_tokens,
        seed: raw.seed.unwrap_or(0),
    })
}

fn dist(key: &str, d: &RawDist, limit: u32) -> Result<Dist, Invalid> {
    let min = d.min.unwrap_or(1);
    let max = d.max.unwrap_or(limit);
    ensure!(
        min >= 1 && min <= max && max <= limit,
        "{key}: min {min} and max {max} must satisfy 1 <= min <= max <= {limit}"
    );
    let given = |name: &str, v: Option<f64>| {
        v.filter(|x| x.is_finite())
            .ok_or_else(|| format!("{key}.{name} is required (a number) for this distribution"))
    };
    let unused = |names: &[(&str, bool)]| match names.iter().find(|(_, set)| *set) {
        Some((n, _)) => Err(Invalid::Rule(format!(
            "{key}.{n} does not belong to this distribution"
        ))),
        None => Ok(()),
    };
    match d.distribution.as_deref() {
        Some("uniform") => {
            unused(&[
                ("mean", d.mean.is_some()),
                ("sd", d.sd.is_some()),
                ("median", d.median.is_some()),
                ("sigma", d.sigma.is_some()),
            ])?;
            ensure!(
                d.min.is_some() && d.max.is_some(),
                "{key}: a uniform distribution needs min and max"
            );
            Ok(Dist::Uniform { min, max })
        }
        Some("normal") => {
            unused(&[("median", d.median.is_some()), ("sigma", d.sigma.is_some())])?;
            let mean = given("mean", d.mean)?;
            let sd = given("sd", d.sd)?;
            ensure!(
                mean > 0.0 && sd >= 0.0,
                "{key}: mean must be above 0 and sd at least 0"
            );
            Ok(Dist::Normal { mean, sd, min, max })
        }
        Some("lognormal") => {
            unused(&[("mean", d.mean.is_some()), ("sd", d.sd.is_some())])?;
            let median = given("median", d.median)?;
            let sigma = given("sigma", d.sigma)?;
            ensure!(
                median > 0.0 && (0.0..=5.0).contains(&sigma),
                "{key}: median must be above 0 and sigma within 0..=5"
            );
            Ok(Dist::Lognormal {
                median,
                sigma,
                min,
                max,
            })
        }
        other => bail!(
            "{key}.distribution is {}: use uniform, normal or lognormal",
            other.map_or("missing".to_string(), |o| format!("`{o}`"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(d: &str) -> RawDist {
        serde_saphyr::from_str(d).unwrap()
    }

    #[test]
    fn draws_are_seeded_per_request_and_within_bounds() {
        let g = GenerateSpec {
            input_tokens: Dist::Normal {
                mean: 500.0,
                sd: 50.0,
                min: 1,
                max: 100_000,
            },
            output_tokens: Some(Dist::Uniform { min: 10, max: 20 }),
            seed: 3,
        };
        let a: Vec<Drawn> = (0..50).map(|k| g.draw(Slot::Measured(k))).collect();
        let b: Vec<Drawn> = (0..50).map(|k| g.draw(Slot::Measured(k))).collect();
        assert_eq!(a, b);
        // request k's draw does not depend on the others (a load shard draws the same)
        assert_eq!(g.draw(Slot::Measured(37)), a[37]);
        assert_ne!(g.draw(Slot::Unmeasured(0)), a[0]);
        assert_ne!(
            GenerateSpec {
                seed: 4,
                ..g.clone()
            }
            .draw(Slot::Measured(0)),
            a[0]
        );
        assert!(a
            .iter()
            .all(|d| (10..=20).contains(&d.output_tokens.unwrap())));
        // 20,000 draws: the normal's mean and sd, the uniform's every value
        let xs: Vec<f64> = (0..20_000)
            .map(|k| f64::from(g.draw(Slot::Measured(k)).input_tokens))
            .collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!(
            (mean - 500.0).abs() < 2.0 && (sd - 50.0).abs() < 1.5,
            "{mean} {sd}"
        );
        let mut outs: Vec<u32> = (0..2000)
            .map(|k| g.draw(Slot::Measured(k)).output_tokens.unwrap())
            .collect();
        outs.sort_unstable();
        outs.dedup();
        assert_eq!(outs, (10..=20).collect::<Vec<u32>>());
        // a lognormal's median, and the bounds clip its tail
        let ln = Dist::Lognormal {
            median: 200.0,
            sigma: 1.0,
            min: 50,
            max: 1000,
        };
        let mut rng = SplitMix64::new(1);
        let mut v: Vec<u32> = (0..20_000).map(|_| ln.sample(&mut rng)).collect();
        v.sort_unstable();
        assert!((195..=205).contains(&v[10_000]), "{}", v[10_000]);
        assert_eq!((v[0], v[v.len() - 1]), (50, 1000));
    }

    #[test]
    fn quantiles_and_fit_points_by_hand() {
        let n = Dist::Normal {
            mean: 512.0,
            sd: 100.0,
            min: 1,
            max: 4096,
        };
        // z(0.9) = 1.2816: 512 +- 128.2
        assert_eq!(n.quantile(0.1), 384);
        assert_eq!(n.quantile(0.9), 640);
        let u = Dist::Uniform { min: 100, max: 200 };
        assert_eq!((u.quantile(0.1), u.quantile(0.9)), (110, 190));
        let g = GenerateSpec {
            input_tokens: Dist::Uniform { min: 64, max: 64 },
            output_tokens: None,
            seed: 0,
        };
        assert_eq!(g.fit_points(), vec![32, 64]);
    }

    #[test]
    fn bad_distributions_name_the_key() {
        for (d, want) in [
            ("{distribution: poisson}", "k.distribution is `poisson`"),
            ("{mean: 3}", "k.distribution is missing"),
            ("{distribution: normal, mean: 5}", "k.sd is required"),
            (
                "{distribution: normal, mean: 5, sd: 1, sigma: 2}",
                "k.sigma does not belong",
            ),
            ("{distribution: uniform, min: 5}", "needs min and max"),
            ("{distribution: uniform, min: 5, max: 2000}", "max 2000"),
            (
                "{distribution: lognormal, median: 5, sigma: 9}",
                "sigma within",
            ),
        ] {
            let e = dist("k", &raw(d), 1000).unwrap_err().to_string();
            assert!(e.contains(want), "{d}: {e}");
        }
        assert_eq!(
            dist("k", &raw("{distribution: uniform, min: 5, max: 9}"), 1000),
            Ok(Dist::Uniform { min: 5, max: 9 })
        );
    }
}
