//! The prefix cache of a conversation scenario (docs/scenarios.md "Conversations"), from its
//! records and its cold reference (pure): the hit rate the server reported, the hit rate its
//! TTFTs show with its confidence bounds, and TTFT by turn position.
//!
//! Reported: the prompt tokens the server said it served from its cache over the prompt tokens
//! it counted, summed over the requests that said (`usage...cached_tokens`, llama.cpp's
//! `timings.cache_n`). Never trusted alone: servers misreport it.
//!
//! Measured: each reference pair sends a measured request's prompt again behind a cache-busting
//! first line (cold: nothing of it reused), and that first line alone with a two-word question
//! (floor: the server's fixed costs and an all but empty prefill). If prefill time follows the
//! tokens computed, a request whose share h of its prompt was reused takes
//! `ttft = floor + (1 - h) (cold - floor)`, so over the pairs
//! `h = sum(cold - warm) / sum(cold - floor)` (warm: the request's measured TTFT): weighted by
//! prompt as the reported rate is, free of the fixed costs (the floor pays them too), and
//! whatever the granularity of the cache (an exact repeat of a prompt is not fully reused by a
//! cache of 128-token blocks, so it cannot stand for "everything reused").

use serde::{Deserialize, Serialize};

/// The reported and measured hit rates may differ by this much (absolute) and still agree.
/// Prefill is not quite linear in the tokens not reused (attention grows with the context), the
/// cold line adds a few tokens, and a small reference has sampling noise; 15 points tell a cache
/// that works from one that does not, and a server that reports 100 % from one that reuses
/// nothing.
pub const AGREE_WITHIN: f64 = 0.15;
/// A hit rate that moved this much (absolute) since the baseline is a drift.
pub const DRIFT_AT: f64 = 0.15;
/// The least mean cold - floor TTFT, ms, for the TTFTs to resolve reuse at all.
pub const MIN_SPAN_MS: f64 = 3.0;
/// One-sided confidence of each bound of the measured hit rate.
pub const CONFIDENCE: f64 = 0.95;

/// TTFT and reuse of one turn position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnFigures {
    /// The turn (1-based).
    pub turn: u32,
    /// Successful requests of this turn.
    pub requests: usize,
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    /// The reported hit rate of this turn's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_hit_rate: Option<f64>,
}

/// The prefix cache of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSummary {
    /// Successful measured requests.
    pub requests: usize,
    /// Of them, those whose cached tokens the server reported.
    pub reported_requests: usize,
    /// Cached over prompt tokens, summed over the requests that reported both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_hit_rate: Option<f64>,
    /// The server's own hit rate from `/metrics` (vLLM, SGLang, llama.cpp), when scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_hit_rate: Option<f64>,
    /// Reference pairs sent (`request.conversation.reference`; 0: none ran).
    #[serde(default)]
    pub reference_sent: usize,
    /// Reference pairs with a cold, a floor and a measured TTFT.
    pub reference_pairs: usize,
    /// The hit rate the TTFTs show (module comment), 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_hit_rate: Option<f64>,
    /// Its one-sided [`CONFIDENCE`] bounds [lower, upper], within 0..=1 (from 2 pairs on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ci: Option<[f64; 2]>,
    /// The reported hit rate of the reference's requests (what `measured_hit_rate` checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_on_reference: Option<f64>,
    /// Median measured (warm), cold and floor TTFT of the reference's requests, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_ttft_ms: Option<f64>,
    /// Mean cold - floor TTFT over the reference, ms: the prefill of a whole prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_ms: Option<f64>,
    /// Why there is no measured hit rate, when a reference ran but measured none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmeasured: Option<String>,
    /// TTFT by turn position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_turn: Vec<TurnFigures>,
}

impl CacheSummary {
    /// The hit rate to judge by: the measured one; the reported one only when no reference ran
    /// (`reference: 0`): a reference that could not measure leaves nothing to judge by.
    pub fn hit_rate(&self) -> Option<(f64, HitSource)> {
        match (self.measured_hit_rate, self.reference_sent) {
            (Some(h), _) => Some((h, HitSource::Measured)),
            (None, 0) => self.reported_hit_rate.map(|h| (h, HitSource::Reported)),
            (None, _) => None,
        }
    }

    /// When the reported and measured hit rates of the same requests disagree by more than
    /// [`AGREE_WITHIN`]: both.
    pub fn disagreement(&self) -> Option<(f64, f64)> {
        match (self.reported_on_reference, self.measured_hit_rate) {
            (Some(r), Some(m)) if (r - m).abs() > AGREE_WITHIN => Some((r, m)),
            _ => None,
        }
    }

    /// `reported 87% (24 of 24 requests said), measured 88% [84%, 92%] (TTFT 85.2 ms
    /// warm, 434 ms cold, 26.1 ms for an empty prompt, over 6 requests)`.
    pub fn describe(&self) -> String {
        let mut parts = vec![match self.reported_hit_rate {
            Some(r) => format!(
                "reported {} ({} of {} requests said)",
                pct(r),
                self.reported_requests,
                self.requests
            ),
            None => "not reported by the server".to_string(),
        }];
        if let Some(s) = self.server_hit_rate {
            parts.push(format!("server /metrics {}", pct(s)));
        }
        match (self.measured_hit_rate, &self.unmeasured) {
            (Some(m), _) => {
                parts.push(format!(
                "measured {}{} (TTFT {} warm, {} cold, {} for an empty prompt, over {} requests)",
                pct(m),
                self.measured_ci
                    .map_or(String::new(), |[lo, hi]| format!(" [{}, {}]", pct(lo), pct(hi))),
                ms(self.warm_ttft_ms),
                ms(self.cold_ttft_ms),
                ms(self.floor_ttft_ms),
                self.reference_pairs
            ))
            }
            (None, Some(why)) => parts.push(format!("not measured: {why}")),
            (None, None) => parts.push("not measured (request.conversation.reference: 0)".into()),
        }
        parts.join(", ")
    }
}

/// A share in whole points: `87%`.
pub fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), crate::units::fmt_ms)
}

/// Which hit rate a judgement used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitSource {
    Measured,
    Reported,
}

impl HitSource {
    pub fn as_str(self) -> &'static str {
        match self {
            HitSource::Measured => "measured",
            HitSource::Reported => "reported, unchecked by a cold reference",
        }
    }
}

/// Cached over prompt tokens summed over `pairs` of (prompt, cached) tokens; `None` without any.
pub fn reported_rate(pairs: impl Iterator<Item = (u64, u64)>) -> Option<f64> {
    let (mut p, mut c, mut n) = (0u64, 0u64, 0usize);
    for (prompt, cached) in pairs {
        p = p.saturating_add(prompt);
        c = c.saturating_add(cached.min(prompt));
        n += 1;
    }
    (n > 0 && p > 0).then(|| c as f64 / p as f64)
}

/// One reference request's TTFTs, ms: measured (warm), behind the cold line (cold), and the
/// cold line alone (floor).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Triple {
    pub warm: f64,
    pub cold: f64,
    pub floor: f64,
}

/// The measured hit rate `sum(cold - warm) / sum(cold - floor)` (module comment), clamped to
/// 0..=1, with its one-sided [`CONFIDENCE`] bounds from 2 triples on (the ratio estimator's
/// standard error, `sqrt(sum(e^2) / (n (n - 1))) / mean(cold - floor)` with
/// `e = (cold - warm) - h (cold - floor)`, and Student's t at n - 1 degrees of freedom); the
/// reason when the TTFTs cannot tell (no triple, or a prefill too short to see).
pub fn measured_rate(t: &[Triple]) -> Result<(f64, Option<[f64; 2]>), String> {
    if t.is_empty() {
        return Err("no reference request pair succeeded".into());
    }
    let n = t.len() as f64;
    let span: f64 = t.iter().map(|x| x.cold - x.floor).sum();
    let mean_span = span / n;
    if mean_span < MIN_SPAN_MS {
        return Err(format!(
            "a whole prompt sent cold took only {mean_span:.1} ms longer to its first token than an empty one: its prefill is too short to see what was reused (lengthen the system prompt or the turns)"
        ));
    }
    let saved: f64 = t.iter().map(|x| x.cold - x.warm).sum();
    let h = saved / span;
    let ci = (t.len() >= 2).then(|| {
        let e2: f64 = t
            .iter()
            .map(|x| ((x.cold - x.warm) - h * (x.cold - x.floor)).powi(2))
            .sum();
        let se = (e2 / (n * (n - 1.0))).sqrt() / mean_span;
        let q = t_quantile(CONFIDENCE, n - 1.0);
        [(h - q * se).clamp(0.0, 1.0), (h + q * se).clamp(0.0, 1.0)]
    });
    Ok((h.clamp(0.0, 1.0), ci))
}

fn t_quantile(p: f64, df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df.max(1.0))
        .map(|d| d.inverse_cdf(p))
        .unwrap_or(f64::INFINITY)
}

/// What changed in the prefix cache between the baseline's run (`was`) and this one (`now`),
/// when its hit rate moved by [`DRIFT_AT`] or more: by the measured rates when both runs have
/// one, else by the reported ones. In four pieces, so that the caller names the two runs: the
/// words before the baseline's rate, its rate, the run's rate, the words after it.
pub fn drift(was: &CacheSummary, now: &CacheSummary) -> Option<[String; 4]> {
    let (kind, a, b) = match (was.measured_hit_rate, now.measured_hit_rate) {
        (Some(a), Some(b)) => ("measured", a, b),
        _ => ("reported", was.reported_hit_rate?, now.reported_hit_rate?),
    };
    if (b - a).abs() < DRIFT_AT {
        return None;
    }
    let other = match kind {
        "measured" => match (was.reported_hit_rate, now.reported_hit_rate) {
            (Some(x), Some(y)) => format!("; reported {} -> {}", pct(x), pct(y)),
            (Some(x), None) => format!("; reported {} -> not reported", pct(x)),
            _ => "; not reported by the server".into(),
        },
        _ => match (was.measured_hit_rate, now.measured_hit_rate) {
            (Some(x), Some(y)) => format!("; measured {} -> {}", pct(x), pct(y)),
            _ => String::new(),
        },
    };
    let ratio = |s: &CacheSummary| {
        s.warm_ttft_ms
            .zip(s.cold_ttft_ms)
            .filter(|(_, c)| *c > 0.0)
            .map(|(w, c)| format!("{:.2}", w / c))
    };
    let ratios = match (ratio(was), ratio(now)) {
        (Some(x), Some(y)) => format!(", TTFT warm/cold {x} -> {y}"),
        _ => String::new(),
    };
    Some([
        format!("the prefix cache hit rate changed: {kind} "),
        pct(a),
        pct(b),
        format!("{other}{ratios} (a server configuration or workload change)"),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_by_hand() {
        // d = cold - warm, s = cold - floor: (150, 200), (350, 400); h = 500 / 600 = 5/6.
        // e = d - h s: 150 - 166.67 = -16.67, 350 - 333.33 = 16.67; sum e^2 = 555.56;
        // se = sqrt(555.56 / 2) / 300 = 0.05556; t(0.95, 1 df) = 6.3138:
        // 0.8333 -+ 0.3508 -> [0.4826, 1 (clamped from 1.1841)]
        let t = [
            Triple {
                warm: 60.0,
                cold: 210.0,
                floor: 10.0,
            },
            Triple {
                warm: 60.0,
                cold: 410.0,
                floor: 10.0,
            },
        ];
        let (h, ci) = measured_rate(&t).unwrap();
        let [lo, hi] = ci.unwrap();
        assert!((h - 5.0 / 6.0).abs() < 1e-12);
        assert!(
            (lo - (5.0 / 6.0 - 6.313_751_5 * (555.555_555_6f64 / 2.0).sqrt() / 300.0)).abs() < 1e-6,
            "{lo}"
        );
        assert_eq!(hi, 1.0);
        // one triple: an estimate, no bounds
        assert_eq!(measured_rate(&t[..1]).unwrap(), (0.75, None));
        // the same reuse measured twice exactly: no spread, the bounds close on it
        let (h, ci) = measured_rate(&[t[0], t[0]]).unwrap();
        assert_eq!((h, ci), (0.75, Some([0.75, 0.75])));
    }
}
