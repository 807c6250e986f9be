//! The share checks of requests that did not succeed: failed/total (the error rate) and
//! stopped/total (requests the provider completed but stopped on purpose: a refusal, a content
//! filter), each a one-sided Fisher exact test.

use super::*;

pub(super) fn error_check(scenario: &str, errors: ErrorCounts, max_rate: f64) -> Draft {
    share(
        scenario,
        CheckKind::ErrorRate,
        errors,
        &format!("failed (max_error_rate {:.1}%)", max_rate * 100.0),
    )
}

/// The stopped share: a significant increase of requests a provider stopped on purpose (a
/// safety filter that got stricter, a prompt that now trips it) FAILs as more failures do, but
/// apart from them: a stop never makes a run unmeasurable (docs/metrics.md).
pub(super) fn stopped_check(scenario: &str, stopped: ErrorCounts) -> Draft {
    share(
        scenario,
        CheckKind::StoppedRate,
        stopped,
        "were stopped by the provider (a refusal or a content filter)",
    )
}

pub(super) fn share(scenario: &str, kind: CheckKind, counts: ErrorCounts, what: &str) -> Draft {
    let Failures {
        failed: fb,
        total: nb,
    } = counts.baseline;
    let Failures {
        failed: fc,
        total: nc,
    } = counts.candidate;
    let band = Band {
        warn: 0.0,
        fail: 0.0,
    };
    let mut ch = empty_check(Blank {
        scenario,
        metric: None,
        kind,
        band,
        min_delta_ms: 0.0,
        n_baseline: nb,
        n_candidate: nc,
    });
    let rb = fb as f64 / nb.max(1) as f64;
    let rc = fc as f64 / nc.max(1) as f64;
    ch.baseline = Some(rb);
    ch.candidate = Some(rc);
    ch.p_value = Some(fisher_greater(fc as u64, nc as u64, fb as u64, nb as u64));
    ch.p_improve = Some(fisher_less(fc as u64, nc as u64, fb as u64, nb as u64));
    ch.reason = format!("{fb}/{nb} baseline vs {fc}/{nc} candidate requests {what}");
    ch.pending = Some(Pending {
        beyond_fail: rc > rb,
        beyond_warn: false,
        improved_beyond_fail: rc < rb,
        pass: true,
        inconclusive_reason: String::new(),
    });
    ch
}

/// Stage 3's reason for an error-rate or stopped-share check (`kind`) with verdict `v`
/// (Holm-adjusted p-values).
pub(super) fn reason(kind: CheckKind, v: Verdict, reg_h: f64, imp_h: f64) -> String {
    let what = match kind {
        CheckKind::StoppedRate => "requests stopped by the provider",
        CheckKind::ParseRate => "outputs that did not parse",
        _ => "failed requests",
    };
    match v {
        Verdict::Fail => format!("significantly more {what}, Holm p = {}", fmt_p(reg_h)),
        Verdict::Improved => format!("significantly fewer {what}, Holm p = {}", fmt_p(imp_h)),
        _ => format!(
            "no significant increase in {what} (Holm p = {})",
            fmt_p(reg_h)
        ),
    }
}
