//! The gate (docs/gate.md): from baseline and candidate samples to verdicts.
//!
//! Pure: takes numbers, returns [`Check`]s. For each scenario and gated metric:
//! - **P50**: Hodges-Lehmann ratio with Moses CI and one-sided Mann-Whitney p-values on
//!   ln(latency) (successes only; failures are gated by the error-rate check).
//! - **P90/P99**: exact distribution-free order-statistic bounds, failures censored above every
//!   success. FAIL needs the candidate's lower bound above (1 + fail) x the baseline's upper
//!   bound; its p-value is the union bound P(Bin(n_c,p) <= k-1) + P(Bin(n_b,p) >= j),
//!   minimised over the order statistics (k, j) that satisfy the condition. INFO when the
//!   baseline's n cannot give a (1 - alpha) upper bound at all (p^n_b >= alpha).
//! - **tail exceedance**: share above the pooled P90, one-sided Fisher exact test, FAIL only
//!   with a Harrell-Davis P90 ratio above 1 + fail(P90). INFO (out of the family) when even the
//!   most extreme split of the requests above the pooled P90 could not reach alpha at this n.
//! - **error rate**: one-sided Fisher exact test on failed/total.
//!
//! Holm (1979) adjusts the regression p-values over every gated check of one `check` (and,
//! separately, the improvement p-values), so an unchanged endpoint fails at most ~alpha of runs.

use crate::config::scenario::{Band, GateSpec, Metric, Objective, Quantile};
use crate::stats;
use crate::stats::cluster::{GapCluster, Variance};
use crate::stats::quantile::{harrell_davis, quantile_type7, sorted};
use crate::stats::tests_exact::{fisher_greater, fisher_less};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod client;
mod draft;
mod errors;
mod family;
mod finish;
mod itl;
mod p50;
pub mod power;
mod quality;
mod slo;
mod tail;
mod types;

pub use client::{Busy, ClientDelay};
use draft::*;
use errors::*;
pub use family::{correct_family, correct_merged_family};
use itl::*;
use p50::*;
use quality::quality_checks;
pub use quality::{AcceptanceSamples, QualitySamples, RequestRate};
use slo::*;
use tail::*;
pub use types::*;

/// A check evaluated on its own (stage 1 of 3): its numbers, and what is needed after the
/// family correction to settle its verdict. Comes from [`evaluate_scenario`].
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    check: Check,
    /// One-sided improvement p-value, before Holm.
    p_improve: Option<f64>,
    /// `None` for a check that is settled already (INFO, not compared).
    pending: Option<Pending>,
    /// The family-wise alpha of the check's scenario.
    alpha: f64,
}

/// A check after the family correction (stage 2 of 3): its Holm-adjusted regression and
/// improvement p-values. Comes from [`correct_family`].
#[derive(Debug, Clone, PartialEq)]
pub struct Corrected {
    evaluated: Evaluated,
    /// (regression, improvement) Holm-adjusted p-values; `None` for a check outside the family.
    holm: Option<(f64, f64)>,
}

/// Every check of a check run after the Holm correction, and the family size.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub checks: Vec<Corrected>,
    /// Number of gated checks (those with a p-value).
    pub size: usize,
}

/// Evaluates every check of every scenario, with Holm over the whole family: the three stages
/// [`evaluate_scenario`], [`correct_family`] and [`Corrected::finish`].
/// Returns the checks and the family size (number of gated checks).
pub fn evaluate(scenarios: &[ScenarioSamples]) -> (Vec<Check>, usize) {
    let family = correct_family(scenarios.iter().flat_map(evaluate_scenario).collect());
    let size = family.size;
    (
        family.checks.into_iter().map(Corrected::finish).collect(),
        size,
    )
}

impl ScenarioSamples {
    /// The run-to-run spread that widens metric `m`'s fail tolerance: the committed baseline's;
    /// none for an A/B design, where drift reaches both arms and cancels.
    fn run_spread(&self, m: Metric) -> Option<Spread> {
        match self.design {
            Design::Committed => self.spread.get(&m).copied(),
            Design::Interleaved | Design::Blocked(_) => None,
        }
    }
}

impl ScenarioSamples {
    /// Metric `m`'s P50 band as its check applies it: the configured band widened by
    /// [`Self::paired_spread`] (what `bless` and `validate` say a check catches).
    pub fn p50_band(&self, m: Metric) -> Band {
        widened(self.gate.band(m, Quantile::P50), self.paired_spread(m))
    }

    /// The spread that widens metric `m`'s P50: when the sides are matched and the bless runs'
    /// tau widens it, the same runs' spread measured request by request
    /// ([`Paired::tau`]: a prompt mix's run medians jump between prompts, its requests do not);
    /// a tau learned from nightly history is kept.
    pub fn paired_spread(&self, m: Metric) -> Option<Spread> {
        let spread = self.run_spread(m)?;
        match &self.pairing {
            Pairing::Matched(p) if spread.nights.is_none() => match p.get(&m).and_then(|p| p.tau) {
                Some(tau) => Some(Spread { tau, ..spread }),
                None => Some(spread),
            },
            _ => Some(spread),
        }
    }
}

/// Stage 1: the checks of one scenario, each evaluated on its own (pure; no other scenario is
/// looked at). With sequential looks, the p-values are multiplied by the number of looks
/// (Bonferroni alpha spending within the scenario).
pub fn evaluate_scenario(s: &ScenarioSamples) -> Vec<Evaluated> {
    let mut checks = Vec::new();
    for (m, b, c) in &s.metrics {
        for q in &s.gate.quantiles {
            let configured = s.gate.band(*m, *q);
            let spread = match q {
                Quantile::P50 => s.paired_spread(*m),
                _ => s.run_spread(*m),
            };
            let band = widened(configured, spread);
            // Confidence bounds at the alpha of one look (alpha spent evenly over looks).
            let input = CheckInput {
                scenario: &s.scenario,
                metric: *m,
                baseline: b,
                candidate: c,
                band,
                min_delta: s.gate.min_delta(*m),
                alpha: s.gate.alpha / s.looks.max(1) as f64,
                pairing: &s.pairing,
            };
            let mut ch = match (q, &s.design) {
                (Quantile::P50, Design::Blocked(blocks)) => blocked_p50_check(&input, blocks),
                (Quantile::P50, _) => p50_check(&input),
                _ => tail_check(&input, *q),
            };
            mark_widened(&mut ch, configured, spread);
            note_design(&mut ch, &s.design);
            checks.push(ch);
        }
        if s.gate.quantiles.iter().any(|q| *q != Quantile::P50) {
            // Run-to-run drift moves the P90 as it moves the median: the same widening as the
            // quantile checks, or an unchanged endpoint on a drifting runner fails here.
            let configured = s.gate.band(*m, Quantile::P90);
            let spread = s.run_spread(*m);
            let band = widened(configured, spread);
            let alpha = s.gate.alpha / s.looks.max(1) as f64;
            let mut ch = exceedance_check(&s.scenario, *m, b, c, band, alpha);
            mark_widened(&mut ch, configured, spread);
            note_design(&mut ch, &s.design);
            checks.push(ch);
        }
    }
    checks.extend(itl_tail_check(s));
    if let Some(delay) = s.client_delay {
        for d in &mut checks {
            client::untrust(d, delay);
        }
    }
    // No baseline requests (a scenario gated by gate.slo alone): no error rate to compare.
    if s.errors.baseline.total > 0 {
        checks.push(error_check(&s.scenario, s.errors, s.gate.max_error_rate));
        // only when a side has a stop: an endpoint that never stops one has no such check
        if s.stopped.baseline.failed + s.stopped.candidate.failed > 0 {
            checks.push(stopped_check(&s.scenario, s.stopped));
        }
    }
    let alpha = s.gate.alpha / s.looks.max(1) as f64;
    checks.extend(quality_checks(s, alpha));
    for (o, c) in &s.slo {
        checks.push(slo_check(&s.scenario, *o, c, alpha));
    }
    let looks = s.looks as f64;
    checks
        .into_iter()
        .map(|d| {
            let mut d = Evaluated {
                check: d.check,
                p_improve: d.p_improve,
                pending: d.pending,
                alpha: s.gate.alpha,
            };
            if s.looks > 1 {
                d.check.p_value = d.check.p_value.map(|p| (p * looks).min(1.0));
                d.p_improve = d.p_improve.map(|p| (p * looks).min(1.0));
            }
            d
        })
        .collect()
}

/// The band after widening its fail tolerance to a k-run baseline's run-to-run spread tau
/// (unchanged without one); a tau learned from the nightly history widens it to at most
/// [`stats::spread::MAX_LEARNED_FACTOR`] times the configured one. Warn never exceeds fail.
fn widened(configured: Band, spread: Option<Spread>) -> Band {
    let mut band = configured;
    if let Some(s) = spread {
        band.fail = stats::spread::widened_fail(configured.fail, s.tau, s.runs);
        if s.nights.is_some() {
            band.fail = band
                .fail
                .min(stats::spread::MAX_LEARNED_FACTOR * configured.fail);
        }
        band.warn = band.warn.min(band.fail);
    }
    band
}

/// Records on a check whose band was widened the configured fail tolerance and the tau behind
/// it (the reason then says so).
fn mark_widened(ch: &mut Draft, configured: Band, spread: Option<Spread>) {
    if ch.check.fail > configured.fail {
        ch.check.fail_configured = Some(configured.fail);
        ch.check.tau = spread.map(|s| s.tau);
        ch.check.tau_nights = spread.and_then(|s| s.nights);
    }
}

/// Above this many samples per side, "needs ~N samples" is no advice anyone can take.
pub const PRACTICAL_SAMPLES: usize = 5000;

/// True when every gated check (one with a p-value) is PASS, FAIL or IMPROVED: sequential
/// sampling can stop.
pub fn all_decided(checks: &[Check]) -> bool {
    checks
        .iter()
        .filter(|c| c.p_value.is_some())
        .all(|c| match c.verdict {
            Verdict::Fail | Verdict::Improved => true,
            // A PASS whose bounds are not settled yet keeps its samples_needed.
            Verdict::Pass => c.samples_needed.is_none(),
            Verdict::Warn | Verdict::Info => false,
        })
}

#[cfg(test)]
mod tests;
