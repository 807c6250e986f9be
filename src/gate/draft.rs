//! A check being built: the draft each per-kind constructor returns, the input of the quantile
//! checks, what stays pending until the family correction, and the empty check every kind
//! starts from.

use super::*;

/// A check being built by one of the per-check functions: the check, and what stage 1 keeps
/// beside it ([`Evaluated`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Draft {
    pub(super) check: Check,
    pub(super) p_improve: Option<f64>,
    pub(super) pending: Option<Pending>,
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
pub(super) struct CheckInput<'a> {
    pub(super) scenario: &'a str,
    pub(super) metric: Metric,
    pub(super) baseline: &'a Samples,
    pub(super) candidate: &'a Samples,
    pub(super) band: Band,
    /// Absolute floor, ms.
    pub(super) min_delta: f64,
    pub(super) alpha: f64,
    /// Whether the sides sent the same requests (the P50 check then tests them paired).
    pub(super) pairing: &'a Pairing,
}

/// What is needed after Holm to settle the verdict.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pending {
    pub(super) beyond_fail: bool,
    pub(super) beyond_warn: bool,
    pub(super) improved_beyond_fail: bool,
    pub(super) pass: bool,
    pub(super) inconclusive_reason: String,
}

pub(super) fn fmt_p(p: f64) -> String {
    if p < 0.0001 {
        "<0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

/// What every check starts from: its identity, band, floor and sample sizes, by name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Blank<'a> {
    pub(super) scenario: &'a str,
    pub(super) metric: Option<Metric>,
    pub(super) kind: CheckKind,
    pub(super) band: Band,
    /// Absolute floor, ms (0 where none applies).
    pub(super) min_delta_ms: f64,
    pub(super) n_baseline: usize,
    pub(super) n_candidate: usize,
}

/// A check with nothing measured yet (INFO, no reason): each kind's constructor fills it.
pub(super) fn empty_check(b: Blank) -> Draft {
    let Blank {
        scenario,
        metric,
        kind,
        band,
        min_delta_ms: md,
        n_baseline: nb,
        n_candidate: nc,
    } = b;
    let check = Check {
        warn: band.warn,
        min_delta_ms: md,
        n_baseline: nb,
        n_candidate: nc,
        verdict: Verdict::Info,
        ..Check::blank(scenario, metric, kind, band.fail)
    };
    Draft {
        check,
        p_improve: None,
        pending: None,
    }
}
