//! `gate.slo` objectives: an exact binomial test on the candidate alone.

use super::*;

/// One `gate.slo` objective on the candidate alone (stats::objective): with `over` of `n`
/// requests above the objective (failed requests count as above, as in the tail checks; the
/// error-rate objective counts failed requests), the objective allows a share `allowed` above
/// it (1 - q, or the error rate). Missed (FAIL, through Holm with the other checks) when
/// P(Bin(n, allowed) >= over) is small; met (PASS) when P(Bin(n, allowed) <= over) <= alpha;
/// else WARN with the samples the test would need at the share measured.
pub(super) fn slo_check(scenario: &str, o: Objective, c: &Samples, alpha: f64) -> Draft {
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
            let mut ch = empty_check(Blank {
                scenario,
                metric: Some(metric),
                kind: CheckKind::Slo(quantile),
                band,
                min_delta_ms: 0.0,
                n_baseline: 0,
                n_candidate: n,
            });
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
            ch.ci_level = Some(1.0 - alpha);
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
            let mut ch = empty_check(Blank {
                scenario,
                metric: None,
                kind: CheckKind::ErrorSlo,
                band,
                min_delta_ms: 0.0,
                n_baseline: 0,
                n_candidate: n,
            });
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
pub(super) fn fmt_objective_ms(ms: f64) -> String {
    if ms >= 1000.0 && (ms / 1000.0).fract() == 0.0 {
        format!("{} s", ms / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

/// Stage 3 for an objective: missed when Holm says so; met when its own test shows it;
/// otherwise WARN, never a PASS the data do not show.
pub(super) fn finish(mut c: Check, p: &Pending, sig_reg: bool, reg_h: f64) -> Check {
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
    c
}
