//! The ITL P99 check: the pooled inter-token latency P99 with requests as the independent
//! units (stats::cluster).

use super::*;

/// Fewest requests per side for the ITL check: its variance is estimated from the spread
/// between requests, and with fewer the estimate (and Student's t on G - 1 degrees of
/// freedom) says too little.
pub const ITL_MIN_REQUESTS: usize = 10;

/// `itl` in `gate.metrics`: the pooled ITL P99 of the candidate against the baseline's, with
/// requests as the independent units (stats::cluster). Widened by the committed baseline's
/// run spread like the other checks; never for an A/B design (drift cancels there).
/// INFO when a side has too few requests or the baseline too few gaps to bound a P99.
pub(super) fn itl_tail_check(s: &ScenarioSamples) -> Option<Draft> {
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

pub(super) fn gaps(c: &[GapCluster]) -> usize {
    c.iter()
        .map(|g| match g.count {
            Some(k) => (k as usize).max(g.points.len()),
            None => g.points.len(),
        })
        .sum()
}

pub(super) fn itl_check(
    scenario: &str,
    itl: &ItlSamples,
    q: Quantile,
    band: Band,
    md: f64,
    alpha: f64,
) -> Draft {
    let (nb, nc) = (gaps(&itl.baseline), gaps(&itl.candidate));
    let (gb, gc) = (itl.baseline.len(), itl.candidate.len());
    let mut ch = empty_check(Blank {
        scenario,
        metric: None,
        kind: CheckKind::ItlTail(q),
        band,
        min_delta_ms: md,
        n_baseline: nb,
        n_candidate: nc,
    });
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
    ch.ci_level = Some(1.0 - alpha);
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
        crate::units::fmt_ms_whole(t.threshold),
        band.fail * 100.0,
        q.label(),
        crate::units::fmt_ms_whole(t.baseline_q),
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
