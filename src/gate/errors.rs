//! The error-rate check: failed/total, one-sided Fisher exact test.

use super::*;

pub(super) fn error_check(scenario: &str, errors: ErrorCounts, max_rate: f64) -> Draft {
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
    let mut ch = empty_check(Blank {
        scenario,
        metric: None,
        kind: CheckKind::ErrorRate,
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

/// Stage 3's reason for an error-rate check with verdict `v` (Holm-adjusted p-values).
pub(super) fn reason(v: Verdict, reg_h: f64, imp_h: f64) -> String {
    match v {
        Verdict::Fail => format!(
            "significantly more failed requests, Holm p = {}",
            fmt_p(reg_h)
        ),
        Verdict::Improved => format!(
            "significantly fewer failed requests, Holm p = {}",
            fmt_p(imp_h)
        ),
        _ => format!(
            "no significant increase in failed requests (Holm p = {})",
            fmt_p(reg_h)
        ),
    }
}
