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
//!   with a Harrell-Davis P90 ratio above 1 + fail(P90).
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

/// Verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// A significant regression beyond the fail tolerance and `min_delta`.
    Fail,
    /// A significant slowdown beyond `warn`, or inconclusive at this n.
    Warn,
    /// A significant improvement beyond the fail tolerance.
    Improved,
    /// The CI rules out a change beyond the fail tolerance.
    Pass,
    /// Reported, not gated (a tail the samples cannot bound).
    Info,
}

impl Verdict {
    /// `FAIL`, `WARN`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Fail => "FAIL",
            Verdict::Warn => "WARN",
            Verdict::Improved => "IMPROVED",
            Verdict::Pass => "PASS",
            Verdict::Info => "INFO",
        }
    }
}

/// What a check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A quantile of a latency metric.
    Quantile(Quantile),
    /// Share of requests above the pooled P90.
    TailExceedance,
    /// Share of failed requests.
    ErrorRate,
    /// `gate.slo`: the quantile of a latency metric against an absolute objective (no
    /// baseline needed).
    Slo(Quantile),
    /// `itl` in `gate.metrics`: a quantile of the inter-token gaps of every request pooled,
    /// tested with requests as the independent units ([`stats::cluster`]).
    ItlTail(Quantile),
    /// `gate.slo.error_rate`: the share of failed requests against an absolute objective.
    ErrorSlo,
}

impl CheckKind {
    /// `P50`, `tail>P90`, `errors`, `P90 SLO`, `errors SLO`.
    pub fn label(self) -> &'static str {
        match self {
            CheckKind::Quantile(q) => q.label(),
            CheckKind::TailExceedance => "tail>P90",
            CheckKind::ErrorRate => "errors",
            CheckKind::Slo(Quantile::P50) => "P50 SLO",
            CheckKind::Slo(Quantile::P90) => "P90 SLO",
            CheckKind::Slo(Quantile::P99) => "P99 SLO",
            CheckKind::ErrorSlo => "errors SLO",
            CheckKind::ItlTail(Quantile::P50) => "ITL P50",
            CheckKind::ItlTail(Quantile::P90) => "ITL P90",
            CheckKind::ItlTail(Quantile::P99) => "ITL P99",
        }
    }

    /// True for the absolute objectives of `gate.slo`.
    pub fn is_slo(self) -> bool {
        matches!(self, CheckKind::Slo(_) | CheckKind::ErrorSlo)
    }
}

/// One metric's samples on one side: successful values (ms) and the number of failed requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// Values of successful requests, ms.
    pub ok: Vec<f64>,
    /// Failed requests (censored above every success in tail checks).
    pub failed: usize,
}

impl Samples {
    /// Total requests.
    pub fn n(&self) -> usize {
        self.ok.len() + self.failed
    }
}

/// Failed requests out of all requests, on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Failures {
    pub failed: usize,
    pub total: usize,
}

/// The error-rate check's input: failures of the baseline and of the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorCounts {
    pub baseline: Failures,
    pub candidate: Failures,
}

impl ErrorCounts {
    /// From (failed, total) of the baseline and of the candidate.
    pub fn new((fb, nb): (usize, usize), (fc, nc): (usize, usize)) -> Self {
        ErrorCounts {
            baseline: Failures {
                failed: fb,
                total: nb,
            },
            candidate: Failures {
                failed: fc,
                total: nc,
            },
        }
    }
}

/// Which side of an A/B run (`perfgate ab`) a block of requests belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Base,
    Candidate,
}

/// One block of a blocked A/B design: the arm that ran in it and, per gated metric, that arm's
/// samples in this block (blocks in the order they ran).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub side: Side,
    pub metrics: Vec<(Metric, Samples)>,
}

/// How the two sides of a comparison were measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Design {
    /// A committed baseline against a run now (`check`): the baseline's run-to-run `spread`
    /// widens the fail tolerance.
    #[default]
    Committed,
    /// Both arms in one run, requests alternating in a random balanced order (`ab`): run drift
    /// reaches both arms alike and cancels, so nothing is widened.
    Interleaved,
    /// One arm at a time, in blocks (ABBA...): `metrics` still holds the pooled samples; the
    /// quantile checks use the blocks so drift between blocks cannot fake a change.
    Blocked(Vec<Block>),
}

/// Everything the gate needs for one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioSamples {
    /// Scenario name.
    pub scenario: String,
    /// Gate settings.
    pub gate: GateSpec,
    /// Per gated metric: (baseline, candidate).
    pub metrics: Vec<(Metric, Samples, Samples)>,
    /// Failed and total requests of each side, for the error-rate check.
    pub errors: ErrorCounts,
    /// Per metric: the run-to-run spread of a k-run baseline.
    pub spread: BTreeMap<Metric, Spread>,
    /// Planned looks of sequential sampling (1 for a fixed sample). The scenario's p-values are
    /// multiplied by it (Bonferroni alpha spending over looks) before Holm.
    pub looks: usize,
    /// `gate.slo`: each objective with the candidate's samples of its metric (the error-rate
    /// objective: every request, values unused). Evaluated with or without a baseline; a
    /// scenario without one has no `metrics` and a baseline error count of 0 of 0.
    pub slo: Vec<(Objective, Samples)>,
    /// How the two sides were measured (`check`: [`Design::Committed`]).
    pub design: Design,
    /// `itl` in `gate.metrics`: every request's inter-token gaps on both sides; `None` when
    /// not gated (or not comparable).
    pub itl: Option<ItlSamples>,
}

/// The ITL P99 check's input: per request, its gaps, on each side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItlSamples {
    pub baseline: Vec<GapCluster>,
    pub candidate: Vec<GapCluster>,
    /// The committed baseline's run-to-run spread that widens the check's fail tolerance
    /// (TPOT's: TPOT is the mean of a request's gaps).
    pub spread: Option<Spread>,
}

/// The run-to-run spread of a k-run baseline for one metric, which widens its fail tolerance
/// ([`stats::spread::widened_fail`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Upper 90 % bound of the run-to-run spread tau, log scale.
    pub tau: f64,
    /// k, the number of runs it was estimated from.
    pub runs: usize,
}

/// The confidence interval of a check's ratio; either bound may be absent (unbounded or not
/// computable). Written as `[lower, upper]`, `null` for an absent bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(
    from = "(Option<f64>, Option<f64>)",
    into = "(Option<f64>, Option<f64>)"
)]
pub struct RatioCi {
    /// Lower bound.
    pub lower: Option<f64>,
    /// Upper bound.
    pub upper: Option<f64>,
}

impl RatioCi {
    /// Both bounds known.
    pub fn bounded(lower: f64, upper: f64) -> RatioCi {
        RatioCi {
            lower: Some(lower),
            upper: Some(upper),
        }
    }
}

impl From<(Option<f64>, Option<f64>)> for RatioCi {
    fn from((lower, upper): (Option<f64>, Option<f64>)) -> RatioCi {
        RatioCi { lower, upper }
    }
}

impl From<RatioCi> for (Option<f64>, Option<f64>) {
    fn from(ci: RatioCi) -> Self {
        (ci.lower, ci.upper)
    }
}

/// One check with the numbers behind its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub scenario: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    pub kind: CheckKind,
    /// Baseline estimate (ms; a share for error/tail checks).
    pub baseline: Option<f64>,
    /// Candidate estimate.
    pub candidate: Option<f64>,
    /// candidate / baseline (HL ratio for P50; Harrell-Davis ratio for tails).
    pub ratio: Option<f64>,
    /// Confidence interval of the ratio, [lower, upper] (either may be absent).
    pub ci: Option<RatioCi>,
    /// One-sided regression p-value, before Holm.
    pub p_value: Option<f64>,
    /// Holm-adjusted regression p-value.
    pub p_holm: Option<f64>,
    /// Tolerance band used.
    pub warn: f64,
    pub fail: f64,
    /// Absolute floor used, ms.
    pub min_delta_ms: f64,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub verdict: Verdict,
    /// Why, in one sentence with the numbers.
    pub reason: String,
    /// For WARN/INFO, and a PASS not settled at this n: samples per side the check would need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_needed: Option<usize>,
    /// Tail checks: the smallest uniform change (fraction, 0.5 = +50 %) this sample size can
    /// detect; INFO checks cannot detect any (see `samples_needed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_detectable_change: Option<f64>,
    /// The configured fail tolerance, when `fail` was widened to the run-to-run spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_configured: Option<f64>,
    /// The baseline's run-to-run spread tau (log scale) behind a widened tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau: Option<f64>,
    /// The family-wise alpha the Holm-adjusted p-value was compared with (kept so that
    /// `perfgate report` can redo Holm over the union of merged shards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

/// A check being built by one of the per-check functions: the check, and what stage 1 keeps
/// beside it ([`Evaluated`]).
#[derive(Debug, Clone, PartialEq)]
struct Draft {
    check: Check,
    p_improve: Option<f64>,
    pending: Option<Pending>,
}

impl std::ops::Deref for Draft {
    type Target = Check;
    fn deref(&self) -> &Check {
        &self.check
    }
}

impl std::ops::DerefMut for Draft {
    fn deref_mut(&mut self) -> &mut Check {
        &mut self.check
    }
}

/// What a quantile check compares: one metric of one scenario, baseline vs candidate, with the
/// band, floor and per-look alpha that apply.
#[derive(Debug, Clone, Copy)]
struct CheckInput<'a> {
    scenario: &'a str,
    metric: Metric,
    baseline: &'a Samples,
    candidate: &'a Samples,
    band: Band,
    /// Absolute floor, ms.
    min_delta: f64,
    alpha: f64,
}

/// What is needed after Holm to settle the verdict.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    beyond_fail: bool,
    beyond_warn: bool,
    improved_beyond_fail: bool,
    pass: bool,
    inconclusive_reason: String,
}

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

/// Stage 1: the checks of one scenario, each evaluated on its own (pure; no other scenario is
/// looked at). With sequential looks, the p-values are multiplied by the number of looks
/// (Bonferroni alpha spending within the scenario).
pub fn evaluate_scenario(s: &ScenarioSamples) -> Vec<Evaluated> {
    let mut checks = Vec::new();
    for (m, b, c) in &s.metrics {
        for q in &s.gate.quantiles {
            let configured = s.gate.band(*m, *q);
            let spread = s.run_spread(*m);
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
            let mut ch = exceedance_check(&s.scenario, *m, b, c, band, s.gate.alpha);
            mark_widened(&mut ch, configured, spread);
            note_design(&mut ch, &s.design);
            checks.push(ch);
        }
    }
    checks.extend(itl_tail_check(s));
    // No baseline requests (a scenario gated by gate.slo alone): no error rate to compare.
    if s.errors.baseline.total > 0 {
        checks.push(error_check(&s.scenario, s.errors, s.gate.max_error_rate));
    }
    let alpha = s.gate.alpha / s.looks.max(1) as f64;
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
/// (unchanged without one). Warn never exceeds fail.
fn widened(configured: Band, spread: Option<Spread>) -> Band {
    let mut band = configured;
    if let Some(s) = spread {
        band.fail = stats::spread::widened_fail(configured.fail, s.tau, s.runs);
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
    }
}

/// Stage 2: Holm over the gated family (the checks with a p-value), regression and improvement
/// p-values adjusted separately.
pub fn correct_family(checks: Vec<Evaluated>) -> Family {
    let gated = |e: &Evaluated| e.check.p_value.is_some();
    let reg: Vec<f64> = checks
        .iter()
        .filter(|e| gated(e))
        .map(|e| e.check.p_value.unwrap_or(1.0))
        .collect();
    let imp: Vec<f64> = checks
        .iter()
        .filter(|e| gated(e))
        .map(|e| e.p_improve.unwrap_or(1.0))
        .collect();
    let size = reg.len();
    let mut adjusted = stats::holm::holm_adjust(&reg)
        .into_iter()
        .zip(stats::holm::holm_adjust(&imp));
    let checks = checks
        .into_iter()
        .map(|e| Corrected {
            holm: if gated(&e) { adjusted.next() } else { None },
            evaluated: e,
        })
        .collect();
    Family { checks, size }
}

impl Corrected {
    /// Stage 3: the final verdict and reason of a check from its Holm-adjusted p-values.
    pub fn finish(self) -> Check {
        let Corrected { evaluated, holm } = self;
        let Evaluated {
            check: mut c,
            pending,
            alpha,
            ..
        } = evaluated;
        let Some((reg_h, imp_h)) = holm else {
            return c;
        };
        c.p_holm = Some(reg_h);
        c.alpha = Some(alpha);
        let Some(p) = pending else { return c };
        let sig_reg = reg_h < alpha;
        let sig_imp = imp_h < alpha;
        let raw_sig = c.p_value.is_some_and(|pv| pv < alpha);
        if c.kind.is_slo() {
            // Missed when Holm says so; met when its own test shows it; otherwise WARN, never
            // a PASS the data do not show.
            let (v, why) = if sig_reg {
                (
                    Verdict::Fail,
                    format!("objective missed, Holm p = {}", fmt_p(reg_h)),
                )
            } else if p.pass {
                (Verdict::Pass, "objective met".to_string())
            } else {
                (Verdict::Warn, p.inconclusive_reason.clone())
            };
            c.verdict = v;
            c.reason = format!("{why}: {}", c.reason);
            if v != Verdict::Warn {
                c.samples_needed = None;
            }
            return c;
        }
        let (v, why) = if sig_reg && p.beyond_fail {
            (
                Verdict::Fail,
                format!(
                    "regression: beyond the {:.0}% fail tolerance, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(reg_h)
                ),
            )
        } else if sig_imp && p.improved_beyond_fail {
            (
                Verdict::Improved,
                format!(
                    "improvement beyond {:.0}%, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(imp_h)
                ),
            )
        } else if raw_sig && p.beyond_warn {
            (Verdict::Warn, format!("significant slowdown beyond the {:.0}% warn tolerance (p = {}), not enough for FAIL", c.warn * 100.0, fmt_p(c.p_value.unwrap_or(1.0))))
        } else if p.pass {
            (
                Verdict::Pass,
                format!(
                    "no change beyond {:.0}% (p = {})",
                    c.fail * 100.0,
                    fmt_p(reg_h)
                ),
            )
        } else if c.ratio.is_some_and(|r| r <= 1.0 + c.warn) {
            // Not settled at this n, but what was measured is no slowdown worth a warning (an
            // improvement never reads WARN); the bound that is missing is said in the reason.
            (
                Verdict::Pass,
                format!(
                    "no slowdown beyond the {:.0}% warn band measured ({:+.1}%), although at this n the bounds cannot yet exclude a change beyond {:.0}%",
                    c.warn * 100.0,
                    (c.ratio.unwrap_or(1.0) - 1.0) * 100.0,
                    c.fail * 100.0
                ),
            )
        } else {
            (Verdict::Warn, p.inconclusive_reason.clone())
        };
        c.verdict = v;
        // Share checks (errors, tail>P90) have no tolerance in percent: say what was tested.
        let why = match (c.kind, v) {
            (CheckKind::ErrorRate, Verdict::Fail) => format!(
                "significantly more failed requests, Holm p = {}",
                fmt_p(reg_h)
            ),
            (CheckKind::ErrorRate, Verdict::Improved) => format!(
                "significantly fewer failed requests, Holm p = {}",
                fmt_p(imp_h)
            ),
            (CheckKind::ErrorRate, _) => format!(
                "no significant increase in failed requests (Holm p = {})",
                fmt_p(reg_h)
            ),
            (CheckKind::TailExceedance, Verdict::Pass) => format!(
                "no significant growth of the tail (Holm p = {})",
                fmt_p(reg_h)
            ),
            _ => why,
        };
        let why = match (c.fail_configured, c.tau) {
            (Some(conf), Some(tau)) => format!(
                "{why} (fail tolerance widened from {:.0}% to {:.1}% because this baseline's run-to-run spread tau is {:.1}%)",
                conf * 100.0,
                c.fail * 100.0,
                tau * 100.0
            ),
            _ => why,
        };
        if c.reason.is_empty() {
            c.reason = why;
        } else {
            c.reason = format!("{why}; {}", c.reason);
        }
        // Kept for WARN and for a PASS not settled at this n (sequential sampling goes on).
        if v != Verdict::Warn && (v != Verdict::Pass || p.pass) {
            c.samples_needed = None;
        }
        c
    }
}

/// Holm over the union of merged shards (`perfgate report` with several results files): each
/// shard adjusted its p-values over its own family only, so a FAIL there may not survive the
/// larger family. Re-adjusts every check's `p_value` over all merged checks (the same family an
/// unsharded check would use), and turns a FAIL whose new Holm p-value is no longer below its
/// `alpha` into WARN, as [`Corrected::finish`] would have (a FAIL was significant before
/// adjustment and beyond its fail band, hence beyond its warn band). Checks without a recorded
/// `alpha` (older files) keep their verdict. IMPROVED is left as it is (its p-value is not saved;
/// it never changes the exit code).
pub fn correct_merged_family<'a>(checks: impl IntoIterator<Item = &'a mut Check>) {
    let mut gated: Vec<&mut Check> = checks.into_iter().filter(|c| c.p_value.is_some()).collect();
    let ps: Vec<f64> = gated.iter().filter_map(|c| c.p_value).collect();
    let adj = stats::holm::holm_adjust(&ps);
    for (c, &p) in gated.iter_mut().zip(adj.iter()) {
        c.p_holm = Some(p);
        if let (Verdict::Fail, Some(alpha)) = (c.verdict, c.alpha) {
            if p >= alpha {
                c.verdict = Verdict::Warn;
                c.reason = format!(
                    "slowdown beyond the {:.0}% fail tolerance, but not significant over the merged shards' Holm family (Holm p = {p:.3} >= alpha {alpha}): WARN, not FAIL",
                    c.fail * 100.0
                );
            }
        }
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

fn fmt_p(p: f64) -> String {
    if p < 0.0001 {
        "<0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

fn empty_check(
    scenario: &str,
    metric: Option<Metric>,
    kind: CheckKind,
    band: Band,
    md: f64,
    nb: usize,
    nc: usize,
) -> Draft {
    let check = Check {
        scenario: scenario.to_string(),
        metric,
        kind,
        baseline: None,
        candidate: None,
        ratio: None,
        ci: None,
        p_value: None,
        p_holm: None,
        warn: band.warn,
        fail: band.fail,
        min_delta_ms: md,
        n_baseline: nb,
        n_candidate: nc,
        verdict: Verdict::Info,
        reason: String::new(),
        samples_needed: None,
        min_detectable_change: None,
        fail_configured: None,
        tau: None,
        alpha: None,
    };
    Draft {
        check,
        p_improve: None,
        pending: None,
    }
}

/// Samples per side needed for a CI of log-half-width `w` at n to shrink to `target`.
fn needed(n: usize, w: f64, target: f64) -> Option<usize> {
    if !(w.is_finite() && target.is_finite()) || target <= 0.0 || w <= 0.0 {
        return None;
    }
    Some(
        ((n as f64) * (w / target).powi(2))
            .ceil()
            .clamp(n as f64 + 1.0, 1e6) as usize,
    )
}

/// A P50 check of `input` with nothing decided yet: the two sides' sample medians shown.
fn p50_draft(input: &CheckInput) -> Draft {
    let mut ch = empty_check(
        input.scenario,
        Some(input.metric),
        CheckKind::Quantile(Quantile::P50),
        input.band,
        input.min_delta,
        input.baseline.ok.len(),
        input.candidate.ok.len(),
    );
    ch.baseline = quantile_type7(&sorted(&input.baseline.ok), 0.5);
    ch.candidate = quantile_type7(&sorted(&input.candidate.ok), 0.5);
    ch
}

fn p50_check(input: &CheckInput) -> Draft {
    let CheckInput {
        baseline: b,
        candidate: c,
        band,
        min_delta: md,
        alpha,
        ..
    } = *input;
    let mut ch = p50_draft(input);
    let bs = sorted(&b.ok);
    let cs = sorted(&c.ok);
    if bs.len() < 2 || cs.len() < 2 {
        ch.reason = format!(
            "not compared: {} baseline and {} candidate values (successful requests where the metric is defined; TPOT needs 2 or more output tokens)",
            bs.len(),
            cs.len()
        );
        return ch;
    }
    let Some(shift) = stats::shift::hodges_lehmann_ratio(&cs, &bs, alpha) else {
        ch.reason = "not compared: no positive values".into();
        return ch;
    };
    let base = ch.baseline.unwrap_or(0.0);
    ch.ratio = Some(shift.ratio);
    ch.ci = Some(RatioCi::bounded(shift.lower, shift.upper));
    ch.p_value = stats::rank::mann_whitney_greater(&cs, &bs);
    ch.p_improve = stats::rank::mann_whitney_less(&cs, &bs);
    // Absolute change of the medians, ms: the min_delta floor. With a baseline at or below the
    // floor (e.g. TPOT 0 when a gateway delivers every token in one chunk) ratios say nothing,
    // so the absolute change alone decides.
    let delta = ch.candidate.unwrap_or(base) - base;
    let tiny_base = base <= md || base <= 0.0;
    let upper_delta = if tiny_base {
        delta
    } else {
        base * (shift.upper - 1.0)
    };
    let lim = (1.0 + band.fail).ln();
    let n = bs.len().min(cs.len());
    let w = shift.upper.ln() - shift.ratio.ln();
    let target = (lim - shift.ratio.ln()).abs();
    ch.samples_needed = needed(n, w, target);
    let inconclusive = match ch.samples_needed {
        // Judged in ms: a ratio bound against a ~0 baseline is no figure.
        _ if tiny_base => format!(
            "inconclusive: the baseline median {} is at or below min_delta {}, so the change is judged in ms: {}{} measured, not significant at n = {n}",
            crate_fmt_ms(base),
            crate_fmt_ms(md),
            if delta >= 0.0 { "+" } else { "-" },
            crate_fmt_ms(delta.abs())
        ),
        Some(k) if k > PRACTICAL_SAMPLES => format!(
            "inconclusive: the {:.0}% upper bound {:+.1}% cannot rule out a change beyond {:.0}% at n = {n}, and the change is so close to the tolerance that no practical number of samples would settle it (over {PRACTICAL_SAMPLES} per side)",
            (1.0 - alpha) * 100.0,
            (shift.upper - 1.0) * 100.0,
            band.fail * 100.0
        ),
        Some(k) => format!(
            "inconclusive: the {:.0}% upper bound {:+.1}% cannot rule out a change beyond {:.0}% at n = {n}; needs ~{k} samples per side",
            (1.0 - alpha) * 100.0,
            (shift.upper - 1.0) * 100.0,
            band.fail * 100.0
        ),
        None => format!("inconclusive at n = {n}"),
    };
    ch.pending = Some(Pending {
        beyond_fail: (tiny_base || shift.ratio > 1.0 + band.fail) && delta > md,
        beyond_warn: (tiny_base || shift.ratio > 1.0 + band.warn) && delta > md,
        improved_beyond_fail: shift.ratio < 1.0 / (1.0 + band.fail) && -delta > md,
        pass: if tiny_base {
            delta <= md
        } else {
            shift.upper <= 1.0 + band.fail || upper_delta <= md
        },
        inconclusive_reason: inconclusive,
    });
    ch
}

/// Sorted values with failures appended as +inf (censored above every success).
fn censored(s: &Samples) -> Vec<f64> {
    let mut v = sorted(&s.ok);
    v.extend(std::iter::repeat_n(f64::INFINITY, s.failed));
    v
}

/// Smallest union-bound p-value for "candidate quantile > (1+fail) x baseline quantile + md"
/// (`hi`: the side claimed higher, `lo`: lower; sorted, censored): O(n log n), in stats/tail.rs.
fn tail_p(hi: &[f64], lo: &[f64], p: f64, fail: f64, md: f64) -> Option<f64> {
    stats::tail::tail_exceedance_p(hi, lo, p, fail, md)
}

fn tail_check(input: &CheckInput, q: Quantile) -> Draft {
    let CheckInput {
        scenario,
        metric: m,
        baseline: b,
        candidate: c,
        band,
        min_delta: md,
        alpha,
    } = *input;
    let p = q.p();
    let mut ch = empty_check(
        scenario,
        Some(m),
        CheckKind::Quantile(q),
        band,
        md,
        b.n(),
        c.n(),
    );
    let bs = sorted(&b.ok);
    let cs = sorted(&c.ok);
    ch.baseline = harrell_davis(&bs, p);
    ch.candidate = harrell_davis(&cs, p);
    if let (Some(x), Some(y)) = (ch.candidate, ch.baseline) {
        if y > 0.0 {
            ch.ratio = Some(x / y);
        }
    }
    let (bc, cc) = (censored(b), censored(c));
    if bc.is_empty() || cc.is_empty() {
        ch.reason = "not compared: no requests on one side".into();
        return ch;
    }
    let nb = bc.len();
    // The baseline cannot bound the quantile from above at 1 - alpha: INFO, never gating.
    if p.powi(nb as i32) >= alpha {
        let need = (alpha.ln() / p.ln()).ceil() as usize;
        ch.samples_needed = Some(need);
        ch.reason = format!(
            "informational: {} baseline samples cannot bound {} at {:.0}% confidence, so no change of it can be detected; needs n >= {need}",
            nb,
            q.label(),
            (1.0 - alpha) * 100.0
        );
        return ch;
    }
    let conf = 1.0 - alpha;
    let lb =
        |v: &[f64]| stats::quantile::order_stat_lower_bound(v.len(), p, conf).map(|k| v[k - 1]);
    let ub =
        |v: &[f64]| stats::quantile::order_stat_upper_bound(v.len(), p, conf).map(|k| v[k - 1]);
    let (c_lo, c_hi, b_lo, b_hi) = (lb(&cc), ub(&cc), lb(&bc), ub(&bc));
    let ratio_lo = match (c_lo, b_hi) {
        (Some(x), Some(y)) if y > 0.0 && y.is_finite() => Some(x / y),
        _ => None,
    };
    let ratio_hi = match (c_hi, b_lo) {
        (Some(x), Some(y)) if y > 0.0 && x.is_finite() => Some(x / y),
        _ => None,
    };
    ch.ci = Some(RatioCi {
        lower: ratio_lo,
        upper: ratio_hi,
    });
    ch.p_value = Some(tail_p(&cc, &bc, p, band.fail, md).unwrap_or(1.0));
    ch.p_improve = Some(tail_p(&bc, &cc, p, band.fail, md).unwrap_or(1.0));
    let pass = match (c_hi, b_lo) {
        (Some(x), Some(y)) => x <= (1.0 + band.fail) * y || x - y <= md,
        _ => false,
    };
    let need_c = stats::quantile::min_n_for_upper_bound(p, conf);
    ch.samples_needed = Some(need_c.max(c.n() + 1));
    // Smallest uniform slowdown this n can flag: the candidate's lower bound must clear
    // (1 + fail) x the baseline's upper bound, so a scaled copy of the baseline needs a ratio
    // of (1 + fail) x upper / lower of the baseline's own bounds.
    if let (Some(hi), Some(lo)) = (b_hi, b_lo) {
        if lo > 0.0 && hi.is_finite() {
            ch.min_detectable_change = Some((1.0 + band.fail) * hi / lo - 1.0);
        }
    }
    if let Some(mdc) = ch.min_detectable_change {
        ch.reason = format!(
            "smallest change these {} baseline samples can detect: {:+.0}%",
            bc.len(),
            mdc * 100.0
        );
    }
    ch.pending = Some(Pending {
        beyond_fail: true, // the p-value itself encodes "beyond (1+fail) and min_delta"
        beyond_warn: false,
        improved_beyond_fail: true,
        pass,
        inconclusive_reason: format!(
            "inconclusive: the candidate's {} bounds cannot rule out a change beyond {:.0}% at n = {}; needs ~{} samples",
            q.label(),
            band.fail * 100.0,
            c.n(),
            need_c.max(c.n() + 1)
        ),
    });
    ch
}

/// Fewest requests per side for the ITL check: its variance is estimated from the spread
/// between requests, and with fewer the estimate (and Student's t on G - 1 degrees of
/// freedom) says too little.
pub const ITL_MIN_REQUESTS: usize = 10;

/// `itl` in `gate.metrics`: the pooled ITL P99 of the candidate against the baseline's, with
/// requests as the independent units (stats::cluster). Widened by the committed baseline's
/// run spread like the other checks; never for an A/B design (drift cancels there).
/// INFO when a side has too few requests or the baseline too few gaps to bound a P99.
fn itl_tail_check(s: &ScenarioSamples) -> Option<Draft> {
    let (itl, configured) = (s.itl.as_ref()?, s.gate.itl?);
    let spread = match s.design {
        Design::Committed => itl.spread,
        Design::Interleaved | Design::Blocked(_) => None,
    };
    let band = widened(configured, spread);
    let alpha = s.gate.alpha / s.looks.max(1) as f64;
    let md = s.gate.min_delta(Metric::Tpot);
    let mut ch = itl_check(&s.scenario, itl, Quantile::P99, band, md, alpha);
    mark_widened(&mut ch, configured, spread);
    Some(ch)
}

fn gaps(c: &[GapCluster]) -> usize {
    c.iter()
        .map(|g| match g.count {
            Some(k) => (k as usize).max(g.points.len()),
            None => g.points.len(),
        })
        .sum()
}

fn itl_check(
    scenario: &str,
    itl: &ItlSamples,
    q: Quantile,
    band: Band,
    md: f64,
    alpha: f64,
) -> Draft {
    let (nb, nc) = (gaps(&itl.baseline), gaps(&itl.candidate));
    let (gb, gc) = (itl.baseline.len(), itl.candidate.len());
    let mut ch = empty_check(scenario, None, CheckKind::ItlTail(q), band, md, nb, nc);
    let p = q.p();
    // As for a per-request P99: a baseline of n gaps bounds it from above only when
    // p^n < alpha (459 gaps for P99 at alpha 0.01).
    let need = (alpha.ln() / p.ln()).ceil() as usize;
    if gb == 0 {
        ch.reason = "not compared: the baseline stores no inter-token gaps (blessed by an older perfgate, or no request streamed two tokens); bless again to gate ITL".into();
        return ch;
    }
    let Some(t) = stats::cluster::compare_tail(
        &itl.baseline,
        &itl.candidate,
        p,
        band.fail,
        md,
        alpha,
        Variance::Clustered,
    ) else {
        ch.reason = format!(
            "not compared: {gb} baseline and {gc} candidate requests with inter-token gaps"
        );
        return ch;
    };
    ch.baseline = Some(t.baseline_q);
    ch.candidate = Some(t.candidate_q);
    ch.ratio = t.ratio.is_finite().then_some(t.ratio);
    ch.ci = Some(RatioCi::from(t.ci));
    if gb.min(gc) < ITL_MIN_REQUESTS || nb < need {
        ch.reason = format!(
            "informational: {gb} baseline / {gc} candidate requests with {nb} / {nc} gaps; gating the pooled {} needs at least {ITL_MIN_REQUESTS} requests a side and {need} baseline gaps",
            q.label()
        );
        return ch;
    }
    ch.p_value = Some(t.p_regress);
    ch.p_improve = Some(t.p_improve);
    ch.reason = format!(
        "{:.2}% of {nc} candidate gaps above {} ({:.0}% over the baseline's pooled {} {}) vs {:.2}% of {nb} baseline gaps above it; {gb} / {gc} requests, design effect {:.1}",
        t.share_candidate * 100.0,
        crate_fmt_ms(t.threshold),
        band.fail * 100.0,
        q.label(),
        crate_fmt_ms(t.baseline_q),
        t.share_baseline * 100.0,
        t.design_effect
    );
    ch.pending = Some(Pending {
        beyond_fail: true, // the p-value tests "beyond (1 + fail) and min_delta" itself
        beyond_warn: false,
        improved_beyond_fail: true,
        pass: t.within_fail,
        inconclusive_reason: format!(
            "inconclusive: with {gc} requests the candidate's pooled ITL {} cannot be bounded within {:.0}% of the baseline's",
            q.label(),
            band.fail * 100.0
        ),
    });
    ch
}

/// `8.12 ms` (the report's format, kept here so the gate does not depend on the renderers).
fn crate_fmt_ms(x: f64) -> String {
    if !x.is_finite() {
        "inf".into()
    } else if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 10.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.2} ms")
    }
}

fn exceedance_check(
    scenario: &str,
    m: Metric,
    b: &Samples,
    c: &Samples,
    band: Band,
    alpha: f64,
) -> Draft {
    let mut ch = empty_check(
        scenario,
        Some(m),
        CheckKind::TailExceedance,
        band,
        0.0,
        b.n(),
        c.n(),
    );
    let pooled = sorted(&[b.ok.clone(), c.ok.clone()].concat());
    let Some(t) = quantile_type7(&pooled, 0.9) else {
        ch.reason = "not compared: no successful requests".into();
        return ch;
    };
    let above = |s: &Samples| s.ok.iter().filter(|&&x| x > t).count() + s.failed;
    let (xb, xc) = (above(b), above(c));
    let (nb, nc) = (b.n(), c.n());
    ch.baseline = Some(xb as f64 / nb.max(1) as f64);
    ch.candidate = Some(xc as f64 / nc.max(1) as f64);
    // A zero baseline P90 with a positive candidate P90 is an unbounded ratio, not "no change".
    let r90 = match (
        harrell_davis(&sorted(&c.ok), 0.9),
        harrell_davis(&sorted(&b.ok), 0.9),
    ) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        (Some(x), Some(_)) if x > 0.0 => Some(f64::INFINITY),
        (Some(_), Some(_)) => Some(1.0),
        _ => None,
    };
    ch.ratio = r90.filter(|r| r.is_finite());
    ch.p_value = Some(fisher_greater(xc as u64, nc as u64, xb as u64, nb as u64));
    ch.p_improve = Some(fisher_less(xc as u64, nc as u64, xb as u64, nb as u64));
    let r = r90.unwrap_or(1.0);
    ch.reason = format!("{xb}/{nb} baseline vs {xc}/{nc} candidate requests above the pooled P90 ({t:.1} ms); HD P90 ratio {r:.3}");
    let _ = alpha;
    ch.pending = Some(Pending {
        beyond_fail: r > 1.0 + band.fail,
        beyond_warn: r > 1.0 + band.warn,
        improved_beyond_fail: r < 1.0 / (1.0 + band.fail),
        pass: true,
        inconclusive_reason: String::new(),
    });
    ch
}

fn error_check(scenario: &str, errors: ErrorCounts, max_rate: f64) -> Draft {
    let Failures {
        failed: fb,
        total: nb,
    } = errors.baseline;
    let Failures {
        failed: fc,
        total: nc,
    } = errors.candidate;
    let band = Band {
        warn: 0.0,
        fail: 0.0,
    };
    let mut ch = empty_check(scenario, None, CheckKind::ErrorRate, band, 0.0, nb, nc);
    let rb = fb as f64 / nb.max(1) as f64;
    let rc = fc as f64 / nc.max(1) as f64;
    ch.baseline = Some(rb);
    ch.candidate = Some(rc);
    ch.p_value = Some(fisher_greater(fc as u64, nc as u64, fb as u64, nb as u64));
    ch.p_improve = Some(fisher_less(fc as u64, nc as u64, fb as u64, nb as u64));
    ch.reason = format!(
        "{fb}/{nb} baseline vs {fc}/{nc} candidate requests failed (max_error_rate {:.1}%)",
        max_rate * 100.0
    );
    ch.pending = Some(Pending {
        beyond_fail: rc > rb,
        beyond_warn: false,
        improved_beyond_fail: rc < rb,
        pass: true,
        inconclusive_reason: String::new(),
    });
    ch
}

/// One `gate.slo` objective on the candidate alone (stats::objective): with `over` of `n`
/// requests above the objective (failed requests count as above, as in the tail checks; the
/// error-rate objective counts failed requests), the objective allows a share `allowed` above
/// it (1 - q, or the error rate). Missed (FAIL, through Holm with the other checks) when
/// P(Bin(n, allowed) >= over) is small; met (PASS) when P(Bin(n, allowed) <= over) <= alpha;
/// else WARN with the samples the test would need at the share measured.
fn slo_check(scenario: &str, o: Objective, c: &Samples, alpha: f64) -> Draft {
    let band = Band {
        warn: 0.0,
        fail: 0.0,
    };
    let n = c.n();
    let (mut ch, over, allowed, objective_text) = match o {
        Objective::Latency {
            metric,
            quantile,
            max_ms,
        } => {
            let mut ch = empty_check(
                scenario,
                Some(metric),
                CheckKind::Slo(quantile),
                band,
                0.0,
                0,
                n,
            );
            let cs = censored(c);
            let p = quantile.p();
            let est = if quantile == Quantile::P50 {
                quantile_type7(&cs, p)
            } else {
                harrell_davis(&sorted(&c.ok), p).filter(|_| c.failed == 0)
            };
            ch.baseline = Some(max_ms);
            ch.candidate = est.filter(|x| x.is_finite());
            ch.ratio = ch.candidate.map(|x| x / max_ms);
            // The quantile's (1 - alpha) order-statistic bounds, relative to the objective.
            let lo = stats::quantile::order_stat_lower_bound(n, p, 1.0 - alpha)
                .and_then(|k| cs.get(k - 1).copied())
                .filter(|x| x.is_finite())
                .map(|x| x / max_ms);
            let hi = stats::quantile::order_stat_upper_bound(n, p, 1.0 - alpha)
                .and_then(|k| cs.get(k - 1).copied())
                .filter(|x| x.is_finite())
                .map(|x| x / max_ms);
            ch.ci = Some(RatioCi {
                lower: lo,
                upper: hi,
            });
            let over = cs.iter().filter(|x| **x > max_ms).count();
            let text = format!(
                "{} {} objective {}",
                metric.label(),
                quantile.label(),
                fmt_objective_ms(max_ms)
            );
            (ch, over, 1.0 - p, text)
        }
        Objective::ErrorRate { max } => {
            let mut ch = empty_check(scenario, None, CheckKind::ErrorSlo, band, 0.0, 0, n);
            ch.baseline = Some(max);
            ch.candidate = Some(c.failed as f64 / n.max(1) as f64);
            (
                ch,
                c.failed,
                max,
                format!("error-rate objective {:.1}%", max * 100.0),
            )
        }
    };
    if n == 0 {
        ch.reason = format!("{objective_text}: no requests");
        return ch;
    }
    let t = stats::objective::share_test(over as u64, n as u64, allowed);
    ch.p_value = Some(t.p_missed);
    let needed = stats::objective::samples_to_decide(
        over as u64,
        n as u64,
        allowed,
        alpha,
        PRACTICAL_SAMPLES as u64,
    );
    ch.samples_needed = needed.map(|k| k as usize).filter(|&k| k > n);
    let shares = format!(
        "{over} of {n} requests ({:.1}%) above the {objective_text}, {:.1}% allowed",
        over as f64 / n as f64 * 100.0,
        allowed * 100.0
    );
    ch.reason = shares.clone();
    ch.pending = Some(Pending {
        beyond_fail: true,
        beyond_warn: false,
        improved_beyond_fail: false,
        pass: t.p_met <= alpha,
        inconclusive_reason: match ch.samples_needed {
            Some(k) => format!("cannot tell at this n; needs ~{k} samples"),
            None => format!(
                "cannot tell at this n: the share sits so close to the objective that no practical number of samples (over {PRACTICAL_SAMPLES}) would settle it"
            ),
        },
    });
    ch
}

/// `500 ms`, `8 s`.
fn fmt_objective_ms(ms: f64) -> String {
    if ms >= 1000.0 && (ms / 1000.0).fract() == 0.0 {
        format!("{} s", ms / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// The blocks' order, base A and candidate B: "ABBA".
fn block_order(blocks: &[Block]) -> String {
    stats::blocked::order_label(
        &blocks
            .iter()
            .map(|b| b.side == Side::Candidate)
            .collect::<Vec<_>>(),
    )
}

/// Says on an A/B check how the arms were compared (the blocked P50 says it itself): interleaved
/// samples as they are, a blocked design's tails and tail>P90 on the pooled blocks.
fn note_design(ch: &mut Draft, design: &Design) {
    let note = match design {
        Design::Committed => return,
        Design::Interleaved => "interleaved A/B (no drift widening)".to_string(),
        Design::Blocked(_) if ch.kind == CheckKind::Quantile(Quantile::P50) => return,
        Design::Blocked(blocks) => format!(
            "blocked {}: compared on the pooled blocks (balanced orders share the drift)",
            block_order(blocks)
        ),
    };
    ch.reason = if ch.reason.is_empty() {
        note
    } else {
        format!("{}; {note}", ch.reason)
    };
}

/// P50 of a blocked A/B design (docs/gate.md "Blocked design"): the drift-corrected
/// Hodges-Lehmann shift of `stats::blocked` over the blocks of this metric, its normal bounds and
/// one-sided p-values, settled as [`p50_check`] settles the pooled shift (the medians shown are
/// the pooled ones).
fn blocked_p50_check(input: &CheckInput, blocks: &[Block]) -> Draft {
    let CheckInput {
        metric: m,
        baseline: b,
        candidate: c,
        band,
        min_delta: md,
        alpha,
        ..
    } = *input;
    let mut ch = p50_draft(input);
    let order = block_order(blocks);
    let values: Vec<stats::blocked::BlockValues> = blocks
        .iter()
        .filter_map(|bl| {
            let (_, smp) = bl.metrics.iter().find(|(mm, _)| *mm == m)?;
            Some(stats::blocked::BlockValues {
                candidate: bl.side == Side::Candidate,
                values: &smp.ok,
                requests: smp.n(),
            })
        })
        .collect();
    let Some(shift) = stats::blocked::blocked_log_shift(&values) else {
        ch.reason = format!(
            "not compared: the blocked order {order} cannot tell the arms from a drift between blocks (needs blocks of both arms, e.g. ABBA, with 2 or more values each)"
        );
        return ch;
    };
    let ratio = shift.ratio();
    let (lower, upper) = shift.bounds(alpha);
    ch.ratio = Some(ratio);
    ch.ci = Some(RatioCi::bounded(lower, upper));
    ch.p_value = Some(shift.p_greater());
    ch.p_improve = Some(shift.p_less());
    let base = ch.baseline.unwrap_or(0.0);
    // As in p50_check: at or below the floor the ratio says nothing and the absolute change of
    // the medians decides; above it the drift-corrected ratio gives the change in ms.
    let tiny_base = base <= md || base <= 0.0;
    let (delta, upper_delta) = if tiny_base {
        let d = ch.candidate.unwrap_or(base) - base;
        (d, d)
    } else {
        (base * (ratio - 1.0), base * (upper - 1.0))
    };
    let lim = (1.0 + band.fail).ln();
    let n = b.ok.len().min(c.ok.len());
    let w = upper.ln() - ratio.ln();
    let target = (lim - ratio.ln()).abs();
    // The between-block part of the variance does not shrink with more requests per block.
    let between = 1.0 - (shift.se_within / shift.se).powi(2);
    ch.samples_needed = if between > 0.5 {
        None
    } else {
        needed(n, w, target)
    };
    let drift = format!(
        "blocked {order}: {} blocks, a drift of {:+.1}% per block removed",
        shift.blocks,
        (shift.drift_per_block.exp() - 1.0) * 100.0
    );
    ch.reason = if shift.heterogeneity > 0.0 {
        format!(
            "{drift}, and {:.1}% of block-to-block noise beyond it counted in the interval",
            shift.heterogeneity * 100.0
        )
    } else {
        drift
    };
    let bound = format!(
        "the {:.0}% upper bound {:+.1}% cannot rule out a change beyond {:.0}% at n = {n}",
        (1.0 - alpha) * 100.0,
        (upper - 1.0) * 100.0,
        band.fail * 100.0
    );
    let inconclusive = match ch.samples_needed {
        _ if between > 0.5 => format!(
            "inconclusive: {bound}, and most of its width is drift between blocks: more blocks (--blocks 4) would narrow it, more requests per block would not"
        ),
        Some(k) if k > PRACTICAL_SAMPLES => format!(
            "inconclusive: {bound}, and the change is so close to the tolerance that no practical number of samples would settle it (over {PRACTICAL_SAMPLES} per side)"
        ),
        Some(k) => format!("inconclusive: {bound}; needs ~{k} samples per side"),
        None => format!("inconclusive at n = {n}"),
    };
    ch.pending = Some(Pending {
        beyond_fail: (tiny_base || ratio > 1.0 + band.fail) && delta > md,
        beyond_warn: (tiny_base || ratio > 1.0 + band.warn) && delta > md,
        improved_beyond_fail: ratio < 1.0 / (1.0 + band.fail) && -delta > md,
        pass: if tiny_base {
            delta <= md
        } else {
            upper <= 1.0 + band.fail || upper_delta <= md
        },
        inconclusive_reason: inconclusive,
    });
    ch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::scenario::default_band;

    fn gate(quantiles: Vec<Quantile>) -> GateSpec {
        let mut bands = BTreeMap::new();
        for m in [Metric::Ttft, Metric::Tpot] {
            for q in [Quantile::P50, Quantile::P90, Quantile::P99] {
                bands.insert((m, q), default_band(q));
            }
        }
        GateSpec {
            metrics: vec![Metric::Tpot],
            quantiles,
            bands,
            min_delta_ms: BTreeMap::from([(Metric::Tpot, 0.5)]),
            alpha: 0.01,
            max_error_rate: 0.0,
            confirm: 0,
            slo: Vec::new(),
            itl: None,
        }
    }

    /// Deterministic pseudo-lognormal sample: median `med`, log-sd ~0.1, via a fixed grid of
    /// normal quantiles (so tests are exact and repeatable).
    fn sample(med: f64, n: usize, phase: f64) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let u = ((i as f64 + 0.5 + phase) / n as f64).clamp(0.001, 0.999);
                med * (0.1 * stats::normal::normal_quantile(u)).exp()
            })
            .collect()
    }

    fn run(b: Vec<f64>, c: Vec<f64>, qs: Vec<Quantile>) -> Vec<Check> {
        let s = ScenarioSamples {
            scenario: "s".into(),
            gate: gate(qs),
            metrics: vec![(
                Metric::Tpot,
                Samples { ok: b, failed: 0 },
                Samples { ok: c, failed: 0 },
            )],
            errors: ErrorCounts::new((0, 20), (0, 20)),
            spread: BTreeMap::new(),
            looks: 1,
            slo: Vec::new(),
            design: Design::Committed,
            itl: None,
        };
        evaluate(&[s]).0
    }

    #[test]
    fn thirty_percent_slower_tpot_fails() {
        let checks = run(
            sample(10.0, 20, 0.0),
            sample(13.0, 20, 0.3),
            vec![Quantile::P50],
        );
        let p50 = &checks[0];
        assert_eq!(p50.verdict, Verdict::Fail, "{p50:?}");
        assert!((p50.ratio.unwrap() - 1.3).abs() < 0.03, "{:?}", p50.ratio);
    }

    #[test]
    fn unchanged_passes_and_p99_is_info_at_n20() {
        let checks = run(
            sample(10.0, 20, 0.0),
            sample(10.0, 20, 0.4),
            vec![Quantile::P50, Quantile::P99],
        );
        assert_eq!(checks[0].verdict, Verdict::Pass, "{:?}", checks[0]);
        assert_eq!(checks[1].verdict, Verdict::Info);
        assert_eq!(checks[1].samples_needed, Some(459)); // ln(0.01)/ln(0.99) = 458.2
        assert!(checks.iter().all(|c| c.verdict != Verdict::Fail));
    }

    #[test]
    fn faster_is_improved() {
        let checks = run(
            sample(10.0, 20, 0.0),
            sample(7.0, 20, 0.2),
            vec![Quantile::P50],
        );
        assert_eq!(checks[0].verdict, Verdict::Improved, "{:?}", checks[0]);
    }

    #[test]
    fn p99_gates_with_large_n() {
        let checks = run(
            sample(10.0, 600, 0.0),
            sample(20.0, 600, 0.1),
            vec![Quantile::P99],
        );
        assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
        // The smallest detectable change is shown: with a log-sd of 0.1 the baseline's 99 %
        // bounds of P99 at n = 600 are close, so it is a little above the 50 % tolerance.
        let mdc = checks[0].min_detectable_change.unwrap();
        assert!((0.5..0.7).contains(&mdc), "{mdc}");
        let same = run(
            sample(10.0, 600, 0.0),
            sample(10.0, 600, 0.5),
            vec![Quantile::P99],
        );
        assert_eq!(same[0].verdict, Verdict::Pass, "{:?}", same[0]);
    }

    #[test]
    fn run_spread_widens_the_fail_tolerance() {
        // +12 % on TPOT: FAIL at the default 10 %; with tau = 0.05 from a 5-run baseline the fail
        // tolerance becomes exp(2.33 * 0.05 * sqrt(1.2)) - 1 = 13.6 %, so it is not a FAIL.
        let mk = |spread: BTreeMap<Metric, Spread>| ScenarioSamples {
            scenario: "s".into(),
            gate: gate(vec![Quantile::P50]),
            metrics: vec![(
                Metric::Tpot,
                Samples {
                    ok: sample(10.0, 100, 0.0),
                    failed: 0,
                },
                Samples {
                    ok: sample(11.2, 100, 0.3),
                    failed: 0,
                },
            )],
            errors: ErrorCounts::new((0, 100), (0, 100)),
            spread,
            looks: 1,
            slo: Vec::new(),
            design: Design::Committed,
            itl: None,
        };
        let (plain, _) = evaluate(&[mk(BTreeMap::new())]);
        assert_eq!(plain[0].verdict, Verdict::Fail, "{:?}", plain[0]);
        let (wide, _) = evaluate(&[mk(BTreeMap::from([(
            Metric::Tpot,
            Spread { tau: 0.05, runs: 5 },
        )]))]);
        assert_ne!(wide[0].verdict, Verdict::Fail, "{:?}", wide[0]);
        assert!((wide[0].fail - 0.1361).abs() < 0.0005);
        assert_eq!(wide[0].fail_configured, Some(0.10));
        assert!(
            wide[0].reason.contains("widened from 10% to 13.6%"),
            "{}",
            wide[0].reason
        );
        // An A/B design measures both arms in one run: drift cancels, nothing is widened even
        // if a spread is passed.
        let mut ab = mk(BTreeMap::from([(
            Metric::Tpot,
            Spread { tau: 0.05, runs: 5 },
        )]));
        ab.design = Design::Interleaved;
        let (ab, _) = evaluate(&[ab]);
        assert_eq!(ab[0].verdict, Verdict::Fail, "{:?}", ab[0]);
        assert_eq!(ab[0].fail, 0.10);
        assert_eq!(ab[0].fail_configured, None);
    }

    #[test]
    fn run_spread_widens_the_tail_exceedance_check_too() {
        // A P90 1.3x the baseline's (every request 1.3x slower): tail>P90 FAILs at its 20 %
        // band; with tau = 0.15 from a 5-run baseline the band is
        // exp(2.33 * 0.15 * sqrt(1.2)) - 1 = 46.6 %, and a drift of 1.3x is not a FAIL there.
        let mk = |spread: BTreeMap<Metric, Spread>| ScenarioSamples {
            scenario: "s".into(),
            gate: gate(vec![Quantile::P50, Quantile::P99]),
            metrics: vec![(
                Metric::Tpot,
                Samples {
                    ok: sample(10.0, 100, 0.0),
                    failed: 0,
                },
                Samples {
                    ok: sample(13.0, 100, 0.3),
                    failed: 0,
                },
            )],
            errors: ErrorCounts::new((0, 100), (0, 100)),
            spread,
            looks: 1,
            slo: Vec::new(),
            design: Design::Committed,
            itl: None,
        };
        let tail = |checks: &[Check]| {
            checks
                .iter()
                .find(|c| c.kind == CheckKind::TailExceedance)
                .cloned()
                .unwrap()
        };
        let plain = tail(&evaluate(&[mk(BTreeMap::new())]).0);
        assert_eq!(plain.verdict, Verdict::Fail, "{plain:?}");
        let wide = tail(
            &evaluate(&[mk(BTreeMap::from([(
                Metric::Tpot,
                Spread { tau: 0.15, runs: 5 },
            )]))])
            .0,
        );
        assert_ne!(wide.verdict, Verdict::Fail, "{wide:?}");
        assert!((wide.fail - 0.4665).abs() < 0.0005, "{}", wide.fail);
        assert_eq!(wide.fail_configured, Some(0.20));
        assert!(wide.reason.contains("widened from 20%"), "{}", wide.reason);
    }

    /// A blocked A/B scenario of TPOT: blocks of `per_block` requests in `order` (A base, B
    /// candidate), the candidate `change` times slower, and a drift that makes the machine
    /// `drift` times slower by the end of the run, linearly in time (request by request).
    fn blocked(order: &str, per_block: usize, change: f64, drift: f64) -> ScenarioSamples {
        let total = (order.len() * per_block) as f64;
        let mut blocks = Vec::new();
        let (mut base, mut cand) = (Vec::new(), Vec::new());
        for (k, side) in order.chars().enumerate() {
            let grid = sample(10.0, per_block, 0.1 * k as f64);
            // A fixed permutation so the grid's order is not the time order.
            let vals: Vec<f64> = (0..per_block)
                .map(|j| {
                    let u = (k * per_block + j) as f64 / total;
                    let x = grid[(j * 7 + 3) % per_block] * drift.powf(u);
                    if side == 'B' {
                        x * change
                    } else {
                        x
                    }
                })
                .collect();
            if side == 'B' {
                cand.extend_from_slice(&vals);
            } else {
                base.extend_from_slice(&vals);
            }
            blocks.push(Block {
                side: if side == 'B' {
                    Side::Candidate
                } else {
                    Side::Base
                },
                metrics: vec![(
                    Metric::Tpot,
                    Samples {
                        ok: vals,
                        failed: 0,
                    },
                )],
            });
        }
        let (nb, nc) = (base.len(), cand.len());
        ScenarioSamples {
            scenario: "s".into(),
            gate: gate(vec![Quantile::P50]),
            metrics: vec![(
                Metric::Tpot,
                Samples {
                    ok: base,
                    failed: 0,
                },
                Samples {
                    ok: cand,
                    failed: 0,
                },
            )],
            errors: ErrorCounts::new((0, nb), (0, nc)),
            spread: BTreeMap::new(),
            looks: 1,
            slo: Vec::new(),
            design: Design::Blocked(blocks),
            itl: None,
        }
    }

    #[test]
    fn blocked_abba_cancels_a_linear_drift() {
        // ABBA, 20 TPOT requests per block (40 per arm), the machine 10 % slower by the end of
        // the run, no change: the drift-corrected ratio is 1.00 and the check is not a FAIL.
        let (checks, _) = evaluate(&[blocked("ABBA", 20, 1.0, 1.10)]);
        let p50 = &checks[0];
        assert!((p50.ratio.unwrap() - 1.0).abs() < 0.005, "{p50:?}");
        assert_eq!(p50.verdict, Verdict::Pass, "{p50:?}");
        assert!(
            p50.reason.contains("blocked ABBA: 4 blocks"),
            "{}",
            p50.reason
        );
        // The same drift with the candidate 20 % slower: FAIL, at 1.20.
        let (checks, _) = evaluate(&[blocked("ABBA", 20, 1.2, 1.10)]);
        let p50 = &checks[0];
        assert_eq!(p50.verdict, Verdict::Fail, "{p50:?}");
        assert!((p50.ratio.unwrap() - 1.2).abs() < 0.01, "{p50:?}");
    }

    #[test]
    fn a_pooled_comparison_of_blocks_is_biased_by_drift() {
        // ABAB, the machine 10 % slower by the end, no change: each candidate block ran one block
        // after its base block, so pooling the blocks sees about a quarter of the drift
        // (ln 1.1 / 4 = +2.4 %); the blocked estimate removes it.
        let mut s = blocked("ABAB", 20, 1.0, 1.10);
        let (blocked_checks, _) = evaluate(std::slice::from_ref(&s));
        s.design = Design::Interleaved;
        let (pooled, _) = evaluate(&[s]);
        let (rb, rp) = (blocked_checks[0].ratio.unwrap(), pooled[0].ratio.unwrap());
        assert!((rb - 1.0).abs() < 0.005, "blocked {rb}");
        assert!((rp - 1.024).abs() < 0.01, "pooled {rp}");
        // A throttling machine, 60 % slower by the end of ABAB: pooling reads it as a +12.5 %
        // regression and FAILs; the blocked estimate says 1.00 and passes.
        let mut s = blocked("ABAB", 20, 1.0, 1.6);
        let (blocked_checks, _) = evaluate(std::slice::from_ref(&s));
        s.design = Design::Interleaved;
        let (pooled, _) = evaluate(&[s]);
        assert_eq!(pooled[0].verdict, Verdict::Fail, "{:?}", pooled[0]);
        assert!(
            (blocked_checks[0].ratio.unwrap() - 1.0).abs() < 0.01,
            "{:?}",
            blocked_checks[0]
        );
        assert_ne!(
            blocked_checks[0].verdict,
            Verdict::Fail,
            "{:?}",
            blocked_checks[0]
        );
    }

    #[test]
    fn a_blocked_order_that_cannot_separate_drift_is_not_compared() {
        let mut s = blocked("ABBA", 20, 1.3, 1.0);
        if let Design::Blocked(b) = &mut s.design {
            b.truncate(2);
        }
        let (checks, _) = evaluate(&[s]);
        assert_eq!(checks[0].verdict, Verdict::Info, "{:?}", checks[0]);
        assert!(checks[0]
            .reason
            .starts_with("not compared: the blocked order AB"));
    }

    #[test]
    fn zero_baseline_cannot_hide_a_regression() {
        // A gateway that delivered every token in one chunk: TPOT 0 in the baseline. 20 ms now.
        let checks = run(
            vec![0.0; 20],
            sample(20.0, 20, 0.3),
            vec![Quantile::P50, Quantile::P99],
        );
        assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
        let same = run(vec![0.0; 20], vec![0.0; 20], vec![Quantile::P50]);
        assert_eq!(same[0].verdict, Verdict::Pass, "{:?}", same[0]);
    }

    #[test]
    fn error_rate_increase_fails_below_max_error_rate_too() {
        let mut g = gate(vec![Quantile::P50]);
        g.max_error_rate = 0.6;
        let s = ScenarioSamples {
            scenario: "s".into(),
            gate: g,
            metrics: vec![],
            errors: ErrorCounts::new((2, 40), (21, 40)),
            spread: BTreeMap::new(),
            looks: 1,
            slo: Vec::new(),
            design: Design::Committed,
            itl: None,
        };
        let (checks, _) = evaluate(&[s]);
        assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
        assert!(
            checks[0]
                .reason
                .starts_with("significantly more failed requests"),
            "{}",
            checks[0].reason
        );
    }

    /// 20 requests of 63 gaps: request speeds exp(0.15 z) on a grid, gap noise log-sd 0.1;
    /// with `stall`, every 16th gap of each request twice as long.
    fn itl_run(phase: f64, stall: bool) -> Vec<GapCluster> {
        (0..20)
            .map(|i| {
                let u = ((i as f64 + 0.5 + phase) / 20.0).clamp(0.01, 0.99);
                let speed = (0.15 * stats::normal::normal_quantile(u)).exp();
                let mut g = sample(20.0 * speed, 63, (i % 7) as f64 * 0.1);
                if stall {
                    g.iter_mut().skip(15).step_by(16).for_each(|x| *x *= 2.0);
                }
                GapCluster::exact(g)
            })
            .collect()
    }

    fn itl_scenario(b: Vec<GapCluster>, c: Vec<GapCluster>, design: Design) -> ScenarioSamples {
        let mut g = gate(vec![Quantile::P50]);
        g.itl = Some(crate::config::scenario::ITL_BAND);
        ScenarioSamples {
            scenario: "s".into(),
            gate: g,
            metrics: vec![],
            errors: ErrorCounts::new((0, 20), (0, 20)),
            spread: BTreeMap::new(),
            looks: 1,
            slo: Vec::new(),
            design,
            itl: Some(ItlSamples {
                baseline: b,
                candidate: c,
                spread: Some(Spread { tau: 0.15, runs: 5 }),
            }),
        }
    }

    fn itl_of(checks: &[Check]) -> Check {
        checks
            .iter()
            .find(|c| c.kind == CheckKind::ItlTail(Quantile::P99))
            .cloned()
            .unwrap()
    }

    #[test]
    fn itl_p99_fails_on_a_stall_every_16th_gap_and_passes_unchanged() {
        // Interleaved: no run-spread widening, the 20 % band as configured.
        let (checks, family) = evaluate(&[itl_scenario(
            itl_run(0.0, false),
            itl_run(0.3, true),
            Design::Interleaved,
        )]);
        let c = itl_of(&checks);
        assert_eq!(family, 2); // ITL P99 and errors
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        assert_eq!(c.kind.label(), "ITL P99");
        assert_eq!((c.n_baseline, c.n_candidate), (1260, 1260));
        assert!(c.ratio.is_some_and(|r| r > 1.3), "{c:?}");
        assert_eq!(c.fail, 0.20);
        assert!(c.reason.contains("design effect"), "{}", c.reason);
        let same = itl_of(
            &evaluate(&[itl_scenario(
                itl_run(0.0, false),
                itl_run(0.3, false),
                Design::Interleaved,
            )])
            .0,
        );
        assert_eq!(same.verdict, Verdict::Pass, "{same:?}");
        // A committed baseline with TPOT's run spread tau 0.15 (k 5) widens the band to 46.6 %.
        let wide = itl_of(
            &evaluate(&[itl_scenario(
                itl_run(0.0, false),
                itl_run(0.3, true),
                Design::Committed,
            )])
            .0,
        );
        assert!((wide.fail - 0.4665).abs() < 0.0005, "{wide:?}");
        assert_eq!(wide.fail_configured, Some(0.20));
    }

    #[test]
    fn itl_p99_is_info_with_too_few_gaps_or_requests() {
        let short = |phase| -> Vec<GapCluster> {
            itl_run(phase, false)
                .into_iter()
                .map(|g| GapCluster::exact(g.points[..10].to_vec()))
                .collect()
        };
        // 200 gaps cannot bound a P99 at alpha 0.01 (459 needed).
        let c = itl_of(&evaluate(&[itl_scenario(short(0.0), short(0.3), Design::Interleaved)]).0);
        assert_eq!(c.verdict, Verdict::Info, "{c:?}");
        assert!(c.p_value.is_none());
        assert!(c.reason.contains("459 baseline gaps"), "{}", c.reason);
        // 8 requests a side: too few to estimate the variance between requests.
        let few = |phase| itl_run(phase, true)[..8].to_vec();
        let c = itl_of(&evaluate(&[itl_scenario(few(0.0), few(0.3), Design::Interleaved)]).0);
        assert_eq!(c.verdict, Verdict::Info, "{c:?}");
        // A baseline without stored gaps: not compared, said so.
        let c = itl_of(
            &evaluate(&[itl_scenario(
                vec![],
                itl_run(0.3, true),
                Design::Interleaved,
            )])
            .0,
        );
        assert_eq!(c.verdict, Verdict::Info, "{c:?}");
        assert!(c.reason.contains("bless again"), "{}", c.reason);
    }

    #[test]
    fn error_rate_increase_fails() {
        let s = ScenarioSamples {
            scenario: "s".into(),
            gate: gate(vec![Quantile::P50]),
            metrics: vec![],
            errors: ErrorCounts::new((0, 100), (12, 100)),
            spread: BTreeMap::new(),
            looks: 1,
            slo: Vec::new(),
            design: Design::Committed,
            itl: None,
        };
        let (checks, fam) = evaluate(&[s]);
        assert_eq!(fam, 1);
        assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
    }
}
