//! The P50 check: Hodges-Lehmann shift with its Moses interval and one-sided Mann-Whitney
//! p-values on ln(latency); the blocked A/B design's P50 from the blocks' within-pair shifts.

use super::*;

/// Samples per side needed for a CI of log-half-width `w` at n to shrink to `target`.
pub(super) fn needed(n: usize, w: f64, target: f64) -> Option<usize> {
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
pub(super) fn p50_draft(input: &CheckInput) -> Draft {
    let mut ch = empty_check(Blank {
        scenario: input.scenario,
        metric: Some(input.metric),
        kind: CheckKind::Quantile(Quantile::P50),
        band: input.band,
        min_delta_ms: input.min_delta,
        n_baseline: input.baseline.ok.len(),
        n_candidate: input.candidate.ok.len(),
    });
    ch.baseline = quantile_type7(&sorted(&input.baseline.ok), 0.5);
    ch.candidate = quantile_type7(&sorted(&input.candidate.ok), 0.5);
    ch
}

pub(super) fn p50_check(input: &CheckInput) -> Draft {
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
    let Some(est) = p50_estimate(input, &cs, &bs, &mut ch) else {
        ch.reason = "not compared: no positive values".into();
        return ch;
    };
    let shift = est.shift;
    let base = ch.baseline.unwrap_or(0.0);
    ch.ratio = Some(shift.ratio);
    ch.ci = Some(RatioCi::bounded(shift.lower, shift.upper));
    ch.ci_level = Some(1.0 - alpha);
    ch.p_value = Some(est.p_greater);
    ch.p_improve = Some(est.p_less);
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
    let n = est.n;
    let w = shift.upper.ln() - shift.ratio.ln();
    // The smallest slowdown this run catches reliably: FAIL needs the estimate beyond the fail
    // tolerance, and the estimate of a true ratio r stays above r / e^w (its one-sided bound's
    // half-width) with probability 1 - alpha, so r = (1 + fail) e^w. Judged in ms below
    // min_delta: no ratio to state.
    if !tiny_base && w.is_finite() && w >= 0.0 {
        ch.min_detectable_change = Some(super::power::min_detectable(band.fail, w));
    }
    let target = (lim - shift.ratio.ln()).abs();
    ch.samples_needed = needed(n, w, target);
    let inconclusive = match ch.samples_needed {
        // Judged in ms: a ratio bound against a ~0 baseline is no figure.
        _ if tiny_base => format!(
            "inconclusive: the baseline median {} is at or below min_delta {}, so the change is judged in ms: {}{} measured, not significant at n = {n}",
            crate::units::fmt_ms_whole(base),
            crate::units::fmt_ms_whole(md),
            if delta >= 0.0 { "+" } else { "-" },
            crate::units::fmt_ms_whole(delta.abs())
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

/// The P50 shift of one check and its one-sided p-values, from whichever test applies.
struct P50Estimate {
    shift: stats::Shift,
    p_greater: f64,
    p_less: f64,
    /// The sample size the bounds rest on: matched requests (paired), else the smaller side.
    n: usize,
}

/// The paired signed-rank test on the per-request log ratios when the sides sent the same
/// requests ([`Pairing::Matched`]), else the unpaired Hodges-Lehmann / Mann-Whitney on the sorted
/// values `cs` and `bs`; records on `ch` which test ran, and (for a paired test, or when request
/// identities were recorded but did not match) says so in its reason.
fn p50_estimate(input: &CheckInput, cs: &[f64], bs: &[f64], ch: &mut Draft) -> Option<P50Estimate> {
    let paired = match input.pairing {
        Pairing::Matched(d) => d.get(&input.metric),
        _ => None,
    };
    if let Some(p) =
        paired.and_then(|p| stats::signed_rank::signed_rank_log_shift(&p.d, input.alpha))
    {
        ch.test = Some(P50Test::PairedSignedRank);
        ch.reason = format!("paired over {} matched requests", p.n);
        return Some(P50Estimate {
            shift: p.shift,
            p_greater: p.p_greater,
            p_less: p.p_less,
            n: p.n,
        });
    }
    let shift = stats::shift::hodges_lehmann_ratio(cs, bs, input.alpha)?;
    ch.test = Some(P50Test::UnpairedRankSum);
    if let Pairing::Unmatched(why) = input.pairing {
        ch.reason = format!("unpaired: {why}");
    }
    Some(P50Estimate {
        shift,
        p_greater: stats::rank::mann_whitney_greater(cs, bs)?,
        p_less: stats::rank::mann_whitney_less(cs, bs)?,
        n: bs.len().min(cs.len()),
    })
}

/// The blocks' order, base A and candidate B: "ABBA".
pub(super) fn block_order(blocks: &[Block]) -> String {
    stats::blocked::order_label(
        &blocks
            .iter()
            .map(|b| b.side == Side::Candidate)
            .collect::<Vec<_>>(),
    )
}

/// Says on an A/B check how the arms were compared (the blocked P50 says it itself): interleaved
/// samples as they are, a blocked design's tails and tail>P90 on the pooled blocks.
pub(super) fn note_design(ch: &mut Draft, design: &Design) {
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
pub(super) fn blocked_p50_check(input: &CheckInput, blocks: &[Block]) -> Draft {
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
    ch.ci_level = Some(1.0 - alpha);
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
