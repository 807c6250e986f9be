//! The gate's public values: verdicts, check kinds, the samples a scenario gives the gate, and
//! the checks it returns.

use super::*;

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
    /// Share of requests the provider completed but stopped on purpose (a refusal, a content
    /// filter), tested as the error rate is; present when either side has one.
    StoppedRate,
    /// `gate.slo`: the quantile of a latency metric against an absolute objective (no
    /// baseline needed).
    Slo(Quantile),
    /// `itl` in `gate.metrics`: a quantile of the inter-token gaps of every request pooled,
    /// tested with requests as the independent units ([`stats::cluster`]).
    ItlTail(Quantile),
    /// `gate.slo.error_rate`: the share of failed requests against an absolute objective.
    ErrorSlo,
    /// The nightly history's change-point rule on a metric's nightly medians
    /// ([`crate::stats::changepoint`], docs/history.md): not in the Holm family (its p-value is
    /// already Bonferroni-adjusted per night).
    ChangePoint,
    /// `gate.cache.hit_rate`: the prefix cache's hit rate (measured by the cold reference, or
    /// the server's own when none was measured) against a least share; not in the Holm family.
    CacheHitRate,
    /// `gate.outputs` (`ab`): the share of paired requests whose answers differ between the
    /// arms, against the base's own share between two sends of one request (Fisher's exact
    /// test, one-sided); not in the Holm family. A FAIL is a functional change.
    Outputs,
    /// `gate.acceptance`: the speculative-decoding acceptance rate (accepted / drafted draft
    /// tokens) per request, a drop against the reference tested.
    AcceptanceRate,
    /// Share of structured outputs or tool calls that did not parse, tested as the error rate
    /// is; present when the scenario asks for structured output.
    ParseRate,
    /// `gate.cold_start`: one time of the started server's starts (docs/gate.md "Cold start"),
    /// against the baseline's stored starts; not in the Holm family.
    ColdStart(StartFigure),
}

/// Which time of a server start a `gate.cold_start` check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartFigure {
    /// From the process start to the first ready answer.
    Ready,
    /// TTFT of the first request sent after ready.
    FirstToken,
}

impl CheckKind {
    /// `P50`, `tail>P90`, `errors`, `P90 SLO`, `errors SLO`.
    pub fn label(self) -> &'static str {
        match self {
            CheckKind::Quantile(q) => q.label(),
            CheckKind::TailExceedance => "tail>P90",
            CheckKind::ErrorRate => "errors",
            CheckKind::StoppedRate => "stopped",
            CheckKind::Slo(Quantile::P50) => "P50 SLO",
            CheckKind::Slo(Quantile::P90) => "P90 SLO",
            CheckKind::Slo(Quantile::P99) => "P99 SLO",
            CheckKind::ErrorSlo => "errors SLO",
            CheckKind::ItlTail(Quantile::P50) => "ITL P50",
            CheckKind::ItlTail(Quantile::P90) => "ITL P90",
            CheckKind::ItlTail(Quantile::P99) => "ITL P99",
            CheckKind::ChangePoint => "nightly step",
            CheckKind::CacheHitRate => "cache hit rate",
            CheckKind::Outputs => "outputs",
            CheckKind::AcceptanceRate => "acceptance",
            CheckKind::ParseRate => "parse failures",
            CheckKind::ColdStart(StartFigure::Ready) => "cold start: time to ready",
            CheckKind::ColdStart(StartFigure::FirstToken) => "cold start: first token",
        }
    }

    /// True for the absolute objectives of `gate.slo`.
    pub fn is_slo(self) -> bool {
        matches!(
            self,
            CheckKind::Slo(_) | CheckKind::ErrorSlo | CheckKind::CacheHitRate
        )
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
    /// Requests the provider stopped on purpose (a refusal, a content filter) and total
    /// requests of each side, for the stopped-share check (the error-rate check's test).
    pub stopped: ErrorCounts,
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
    /// perfgate's own delay while measuring (the lag probe's, beyond the timer granularity);
    /// a latency check it could account for is not gated ([`super::client`]). `None`: not
    /// probed (a simulation, an older results file).
    pub client_delay: Option<super::ClientDelay>,
    /// Whether the two sides sent the same requests (docs/gate.md "Paired requests"): when they
    /// did, each metric's per-request log differences, which the P50 check tests paired.
    pub pairing: Pairing,
    /// What the server produced, beside how fast: the acceptance rate and the parse-failure
    /// share ([`QualitySamples`]; empty: neither checked).
    pub quality: QualitySamples,
}

/// Whether the reference and the candidate sent the same requests, request by request.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Pairing {
    /// No request identities recorded (a fixed prompt: every request is the same request, so
    /// pairing by index would gain nothing): the unpaired test, said nowhere.
    #[default]
    NoIdentities,
    /// Identities recorded, but the sides did not send the same requests: the unpaired test,
    /// and the row says why.
    Unmatched(Unmatched),
    /// Per gated metric, the matched requests' log differences and the reference runs' paired
    /// spread.
    Matched(BTreeMap<Metric, Paired>),
}

/// One metric's matched requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paired {
    /// One log difference per matched request with the metric on both sides (and in every
    /// reference run): ln(candidate) - the mean of ln(reference) over the reference's runs.
    pub d: Vec<f64>,
    /// The upper 90 % bound of the reference runs' run-to-run spread measured request by
    /// request ([`crate::stats::spread::paired_spread_upper`]), which replaces the bless runs'
    /// tau (measured on run medians, which jump between the prompts of a mix) in the paired
    /// P50's widening; `None` with one reference run.
    pub tau: Option<f64>,
}

/// Why two sides' requests could not be paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// One side has a request without a recorded identity.
    Unidentified,
    /// The candidate's request `index` was not sent by every reference run.
    Missing { index: u64 },
    /// The candidate's request `index` sent another prompt (or lengths) than the reference's.
    Differs { index: u64 },
    /// Request `index` appears twice on one side.
    Repeated { index: u64 },
}

impl std::fmt::Display for Unmatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmatched::Unidentified => write!(f, "a request has no recorded identity"),
            Unmatched::Missing { index } => {
                write!(f, "request {index} is not in every reference run")
            }
            Unmatched::Differs { index } => {
                write!(f, "request {index} sent another prompt than the reference")
            }
            Unmatched::Repeated { index } => write!(f, "request {index} appears twice"),
        }
    }
}

/// Which test a P50 check ran (docs/gate.md "Paired requests").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum P50Test {
    /// The sides sent the same requests: Wilcoxon signed-rank on the per-request log ratios,
    /// Hodges-Lehmann estimate from the Walsh averages.
    PairedSignedRank,
    /// Mann-Whitney rank sum on the pooled values, Hodges-Lehmann shift with the Moses interval.
    UnpairedRankSum,
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
    /// k, the number of bless runs the baseline pooled (the widening's sqrt(1 + 1/k)).
    pub runs: usize,
    /// Where tau came from: `None` for the baseline's bless runs, `Some(n)` for n nights of the
    /// nightly history (docs/history.md "A tolerance learned from real nights").
    pub nights: Option<usize>,
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
    /// The one-sided confidence of each end of `ci` (0.99 at gate.alpha 0.01; lower under
    /// sequential sampling, which spends alpha over its looks): the level the reports name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_level: Option<f64>,
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
    /// What kind of reason it is, for the reports and JSON readers (absent: the measurement's).
    #[serde(default, skip_serializing_if = "ReasonKind::is_measured")]
    pub reason_kind: ReasonKind,
    /// For WARN/INFO, and a PASS not settled at this n: samples per side the check would need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_needed: Option<usize>,
    /// The smallest change (fraction, 0.5 = +50 %) this check could have caught at its n and
    /// (widened) tolerance: P50, (1 + fail) x the bound's half-width; tails, the uniform change
    /// the baseline's bounds allow. INFO checks cannot detect any (see `samples_needed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_detectable_change: Option<f64>,
    /// The configured fail tolerance, when `fail` was widened to the run-to-run spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_configured: Option<f64>,
    /// The baseline's run-to-run spread tau (log scale) behind a widened tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau: Option<f64>,
    /// Nights of the nightly history that tau was learned from (absent: the bless runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau_nights: Option<usize>,
    /// P50: which test ran (absent on other checks and on the blocked design's P50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<P50Test>,
    /// The family-wise alpha the Holm-adjusted p-value was compared with (kept so that
    /// `perfgate report` can redo Holm over the union of merged shards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// `gate.cache.hit_rate`: the baseline's (or the base arm's) hit rate, measured as the
    /// candidate's is (`baseline` holds the least rate, the objective); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_hit_rate: Option<f64>,
    /// `gate.cache.hit_rate`: the cold-reference pairs the candidate's measured rate comes
    /// from (absent when the rate is the server's reported one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_pairs: Option<usize>,
}

/// What a check's reason says: what was measured, or why the check was taken out of the gate
/// or changed after it (the reports group and word these by kind, never by the words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// What the check measured and decided.
    #[default]
    Measured,
    /// Not gated: perfgate's own delay could account for the move that would fail it.
    ClientBusy,
    /// A FAIL that a `gate.confirm` re-run did not repeat, now WARN.
    NotConfirmed,
    /// A `nightly step` row whose step up is still in force while tonight is back nearer the
    /// level before it (WARN; restored if the next night is too): the tracking issue stays as
    /// it is.
    StepBack,
    /// A `nightly step` row whose step up, confirmed (and red) on an earlier night, is still in
    /// force tonight (WARN): the tracking issue stays open and is updated.
    StepInForce,
}

impl ReasonKind {
    /// The default, which the results JSON leaves out.
    pub fn is_measured(&self) -> bool {
        *self == ReasonKind::Measured
    }
}

/// How many times its configured fail tolerance the drift widening may take a check's before
/// the check is nearly blind (docs/gate.md "Detection limits").
pub const BLIND_WIDENING: f64 = 2.0;

impl Check {
    /// The configured fail tolerance, when the drift widening took this gated check's past
    /// [`BLIND_WIDENING`] times it (the check is then nearly blind).
    pub fn nearly_blind(&self) -> Option<f64> {
        let conf = self.fail_configured?;
        (self.verdict != Verdict::Info && self.fail > BLIND_WIDENING * conf).then_some(conf)
    }

    /// A check with nothing measured or decided yet: no estimate, interval or p-value,
    /// tolerances `band`, PASS, no reason. Every kind starts from it (the gate's drafts, the
    /// nightly step rule, `gate.cache.hit_rate`) and sets what it measured.
    pub fn blank(scenario: &str, metric: Option<Metric>, kind: CheckKind, band: f64) -> Check {
        Check {
            scenario: scenario.to_string(),
            metric,
            kind,
            baseline: None,
            candidate: None,
            ratio: None,
            ci: None,
            ci_level: None,
            p_value: None,
            p_holm: None,
            warn: band,
            fail: band,
            min_delta_ms: 0.0,
            n_baseline: 0,
            n_candidate: 0,
            verdict: Verdict::Pass,
            reason: String::new(),
            reason_kind: ReasonKind::Measured,
            samples_needed: None,
            min_detectable_change: None,
            fail_configured: None,
            tau: None,
            tau_nights: None,
            test: None,
            alpha: None,
            baseline_hit_rate: None,
            reference_pairs: None,
        }
    }
}
