//! The gate (DESIGN s4): from baseline and candidate samples to verdicts.
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

use crate::config::scenario::{Band, GateSpec, Metric, Quantile};
use crate::stats;
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
}

impl CheckKind {
    /// `P50`, `tail>P90`, `errors`.
    pub fn label(self) -> &'static str {
        match self {
            CheckKind::Quantile(q) => q.label(),
            CheckKind::TailExceedance => "tail>P90",
            CheckKind::ErrorRate => "errors",
        }
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

/// Everything the gate needs for one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioSamples {
    /// Scenario name.
    pub scenario: String,
    /// Gate settings.
    pub gate: GateSpec,
    /// Per gated metric: (baseline, candidate).
    pub metrics: Vec<(Metric, Samples, Samples)>,
    /// (failed, total) for baseline and candidate.
    pub errors: ((usize, usize), (usize, usize)),
    /// Per metric: run-to-run spread tau (log scale) of a k-run baseline, and k.
    pub spread: BTreeMap<Metric, (f64, usize)>,
    /// Planned looks of sequential sampling (1 for a fixed sample). The scenario's p-values are
    /// multiplied by it (Bonferroni alpha spending over looks) before Holm.
    pub looks: usize,
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
    pub ci: Option<(Option<f64>, Option<f64>)>,
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
    #[serde(skip)]
    p_improve: Option<f64>,
    #[serde(skip)]
    pending: Option<Pending>,
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

/// Evaluates every check of every scenario, with Holm over the whole family.
/// Returns the checks and the family size (number of gated checks).
pub fn evaluate(scenarios: &[ScenarioSamples]) -> (Vec<Check>, usize) {
    let mut checks = Vec::new();
    for s in scenarios {
        for (m, b, c) in &s.metrics {
            for q in &s.gate.quantiles {
                let configured = s.gate.band(*m, *q);
                let mut band = configured;
                let spread = s.spread.get(m).copied();
                if let Some((tau, k)) = spread {
                    band.fail = stats::spread::widened_fail(configured.fail, tau, k);
                    band.warn = band.warn.min(band.fail);
                }
                let md = s.gate.min_delta(*m);
                // Confidence bounds at the alpha of one look (alpha spent evenly over looks).
                let alpha = s.gate.alpha / s.looks.max(1) as f64;
                let mut ch = match q {
                    Quantile::P50 => p50_check(&s.scenario, *m, b, c, band, md, alpha),
                    _ => tail_check(&s.scenario, *m, *q, b, c, band, md, alpha),
                };
                if band.fail > configured.fail {
                    ch.fail_configured = Some(configured.fail);
                    ch.tau = spread.map(|(t, _)| t);
                }
                checks.push(ch);
            }
            if s.gate.quantiles.iter().any(|q| *q != Quantile::P50) {
                checks.push(exceedance_check(
                    &s.scenario,
                    *m,
                    b,
                    c,
                    s.gate.band(*m, Quantile::P90),
                    s.gate.alpha,
                ));
            }
        }
        checks.push(error_check(
            &s.scenario,
            s.errors.0,
            s.errors.1,
            s.gate.max_error_rate,
        ));
    }
    // Alpha spending over sequential looks: Bonferroni within the scenario.
    for s in scenarios.iter().filter(|s| s.looks > 1) {
        for c in checks.iter_mut().filter(|c| c.scenario == s.scenario) {
            c.p_value = c.p_value.map(|p| (p * s.looks as f64).min(1.0));
            c.p_improve = c.p_improve.map(|p| (p * s.looks as f64).min(1.0));
        }
    }
    // Holm over the gated family (checks with a p-value).
    let idx: Vec<usize> = (0..checks.len())
        .filter(|&i| checks[i].p_value.is_some())
        .collect();
    let family = idx.len();
    let reg: Vec<f64> = idx
        .iter()
        .map(|&i| checks[i].p_value.unwrap_or(1.0))
        .collect();
    let imp: Vec<f64> = idx
        .iter()
        .map(|&i| checks[i].p_improve.unwrap_or(1.0))
        .collect();
    let reg_h = stats::holm::holm_adjust(&reg);
    let imp_h = stats::holm::holm_adjust(&imp);
    let alphas: Vec<f64> = scenarios.iter().map(|s| s.gate.alpha).collect();
    let alpha_of = |name: &str| {
        scenarios
            .iter()
            .position(|s| s.scenario == name)
            .map(|i| alphas[i])
            .unwrap_or(0.01)
    };
    for (j, &i) in idx.iter().enumerate() {
        let alpha = alpha_of(&checks[i].scenario);
        let c = &mut checks[i];
        c.p_holm = Some(reg_h[j]);
        c.alpha = Some(alpha);
        let Some(p) = c.pending.take() else { continue };
        let sig_reg = reg_h[j] < alpha;
        let sig_imp = imp_h[j] < alpha;
        let raw_sig = c.p_value.is_some_and(|pv| pv < alpha);
        let (v, why) = if sig_reg && p.beyond_fail {
            (
                Verdict::Fail,
                format!(
                    "regression: beyond the {:.0}% fail tolerance, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(reg_h[j])
                ),
            )
        } else if sig_imp && p.improved_beyond_fail {
            (
                Verdict::Improved,
                format!(
                    "improvement beyond {:.0}%, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(imp_h[j])
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
                    fmt_p(reg_h[j])
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
                fmt_p(reg_h[j])
            ),
            (CheckKind::ErrorRate, Verdict::Improved) => format!(
                "significantly fewer failed requests, Holm p = {}",
                fmt_p(imp_h[j])
            ),
            (CheckKind::ErrorRate, _) => format!(
                "no significant increase in failed requests (Holm p = {})",
                fmt_p(reg_h[j])
            ),
            (CheckKind::TailExceedance, Verdict::Pass) => format!(
                "no significant growth of the tail (Holm p = {})",
                fmt_p(reg_h[j])
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
    }
    (checks, family)
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
) -> Check {
    Check {
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

fn p50_check(
    scenario: &str,
    m: Metric,
    b: &Samples,
    c: &Samples,
    band: Band,
    md: f64,
    alpha: f64,
) -> Check {
    let mut ch = empty_check(
        scenario,
        Some(m),
        CheckKind::Quantile(Quantile::P50),
        band,
        md,
        b.ok.len(),
        c.ok.len(),
    );
    let bs = sorted(&b.ok);
    let cs = sorted(&c.ok);
    ch.baseline = quantile_type7(&bs, 0.5);
    ch.candidate = quantile_type7(&cs, 0.5);
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
    ch.ci = Some((Some(shift.lower), Some(shift.upper)));
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

#[allow(clippy::too_many_arguments)]
fn tail_check(
    scenario: &str,
    m: Metric,
    q: Quantile,
    b: &Samples,
    c: &Samples,
    band: Band,
    md: f64,
    alpha: f64,
) -> Check {
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
    ch.ci = Some((ratio_lo, ratio_hi));
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

fn exceedance_check(
    scenario: &str,
    m: Metric,
    b: &Samples,
    c: &Samples,
    band: Band,
    alpha: f64,
) -> Check {
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

fn error_check(
    scenario: &str,
    (fb, nb): (usize, usize),
    (fc, nc): (usize, usize),
    max_rate: f64,
) -> Check {
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
            errors: ((0, 20), (0, 20)),
            spread: BTreeMap::new(),
            looks: 1,
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
        let mk = |spread: BTreeMap<Metric, (f64, usize)>| ScenarioSamples {
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
            errors: ((0, 100), (0, 100)),
            spread,
            looks: 1,
        };
        let (plain, _) = evaluate(&[mk(BTreeMap::new())]);
        assert_eq!(plain[0].verdict, Verdict::Fail, "{:?}", plain[0]);
        let (wide, _) = evaluate(&[mk(BTreeMap::from([(Metric::Tpot, (0.05, 5))]))]);
        assert_ne!(wide[0].verdict, Verdict::Fail, "{:?}", wide[0]);
        assert!((wide[0].fail - 0.1361).abs() < 0.0005);
        assert_eq!(wide[0].fail_configured, Some(0.10));
        assert!(
            wide[0].reason.contains("widened from 10% to 13.6%"),
            "{}",
            wide[0].reason
        );
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
            errors: ((2, 40), (21, 40)),
            spread: BTreeMap::new(),
            looks: 1,
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

    #[test]
    fn error_rate_increase_fails() {
        let s = ScenarioSamples {
            scenario: "s".into(),
            gate: gate(vec![Quantile::P50]),
            metrics: vec![],
            errors: ((0, 100), (12, 100)),
            spread: BTreeMap::new(),
            looks: 1,
        };
        let (checks, fam) = evaluate(&[s]);
        assert_eq!(fam, 1);
        assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
    }
}
