//! The tail checks: P90/P99 by distribution-free order-statistic bounds (failures censored above
//! every success), and tail>P90, the share above the pooled P90 (Fisher exact).

use super::*;

/// Sorted values with failures appended as +inf (censored above every success).
pub(super) fn censored(s: &Samples) -> Vec<f64> {
    let mut v = sorted(&s.ok);
    v.extend(std::iter::repeat_n(f64::INFINITY, s.failed));
    v
}

/// Smallest union-bound p-value for "candidate quantile > (1+fail) x baseline quantile + md"
/// (`hi`: the side claimed higher, `lo`: lower; sorted, censored): O(n log n), in stats/tail.rs.
pub(super) fn tail_p(hi: &[f64], lo: &[f64], p: f64, fail: f64, md: f64) -> Option<f64> {
    stats::tail::tail_exceedance_p(hi, lo, p, fail, md)
}

pub(super) fn tail_check(input: &CheckInput, q: Quantile) -> Draft {
    let CheckInput {
        scenario,
        metric: m,
        baseline: b,
        candidate: c,
        band,
        min_delta: md,
        alpha,
        ..
    } = *input;
    let p = q.p();
    let mut ch = empty_check(Blank {
        scenario,
        metric: Some(m),
        kind: CheckKind::Quantile(q),
        band,
        min_delta_ms: md,
        n_baseline: b.n(),
        n_candidate: c.n(),
    });
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
    ch.ci_level = Some(conf);
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

pub(super) fn exceedance_check(
    scenario: &str,
    m: Metric,
    b: &Samples,
    c: &Samples,
    band: Band,
    alpha: f64,
) -> Draft {
    let mut ch = empty_check(Blank {
        scenario,
        metric: Some(m),
        kind: CheckKind::TailExceedance,
        band,
        min_delta_ms: 0.0,
        n_baseline: b.n(),
        n_candidate: c.n(),
    });
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
    // A row that cannot fail is not gated (issue 32 item 6): when even every request above the
    // pooled P90 on one side could not reach alpha (Holm only raises a p-value), the check is
    // INFO, out of the family, with the requests per side that would let it decide.
    let best = best_exceedance_p(xb + xc, nb, nc).min(best_exceedance_p(xb + xc, nc, nb));
    if best > alpha {
        let need = exceedance_samples_needed(alpha);
        ch.samples_needed = need;
        ch.reason = format!(
            "not gated at n = {}: with {} of {} requests above the pooled P90 ({t:.1} ms), even all of them on one side would give p = {best:.3} > alpha {}{}",
            nb.min(nc),
            xb + xc,
            nb + nc,
            crate::units::Num(alpha),
            need.map(|n| format!("; gating it needs at least {n} requests per side"))
                .unwrap_or_default()
        );
        return ch;
    }
    ch.p_value = Some(fisher_greater(xc as u64, nc as u64, xb as u64, nb as u64));
    ch.p_improve = Some(fisher_less(xc as u64, nc as u64, xb as u64, nb as u64));
    let r = r90.unwrap_or(1.0);
    ch.reason = format!("{xb}/{nb} baseline vs {xc}/{nc} candidate requests above the pooled P90 ({t:.1} ms); HD P90 ratio {r:.3}");
    ch.pending = Some(Pending {
        beyond_fail: r > 1.0 + band.fail,
        beyond_warn: r > 1.0 + band.warn,
        improved_beyond_fail: r < 1.0 / (1.0 + band.fail),
        pass: true,
        inconclusive_reason: String::new(),
    });
    ch
}

/// The smallest one-sided Fisher p-value a tail>P90 exceedance test with `above` requests above
/// the pooled P90 could give for "the candidate's share is larger": all of them (as many as
/// fit) on the candidate side of `nc`, the rest on the baseline side of `nb`.
pub(super) fn best_exceedance_p(above: usize, nb: usize, nc: usize) -> f64 {
    let xc = above.min(nc);
    fisher_greater(xc as u64, nc as u64, (above - xc).min(nb) as u64, nb as u64)
}

/// Requests per side (equal sides, every request successful and distinct) from which the tail>P90
/// exceedance test can reach `alpha` at all: the smallest n whose 2n pooled requests have enough
/// above their type-7 P90 ([`best_exceedance_p`] <= alpha). `None` beyond
/// [`super::PRACTICAL_SAMPLES`].
pub(super) fn exceedance_samples_needed(alpha: f64) -> Option<usize> {
    (2..=super::PRACTICAL_SAMPLES).find(|&n| {
        let pooled: Vec<f64> = (0..2 * n).map(|i| i as f64).collect();
        quantile_type7(&pooled, 0.9).is_some_and(|t| {
            let above = pooled.iter().filter(|&&x| x > t).count();
            best_exceedance_p(above, n, n) <= alpha
        })
    })
}

/// Stage 3's reason for a tail>P90 check that passed (other verdicts keep the generic one).
pub(super) fn exceedance_reason(v: Verdict, reg_h: f64) -> Option<String> {
    (v == Verdict::Pass).then(|| {
        format!(
            "no significant growth of the tail (Holm p = {})",
            fmt_p(reg_h)
        )
    })
}
