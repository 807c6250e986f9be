//! Checks of what the server produced, beside how fast: the speculative-decoding acceptance
//! rate (`gate.acceptance`, docs/gate.md "Acceptance rate") and the share of structured outputs
//! or tool calls that did not parse (tested as the error rate is).

use super::*;

/// The inputs of the output checks of one scenario; empty (nothing checked) by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QualitySamples {
    /// `gate.acceptance`: the per-request acceptance rates of both sides.
    pub acceptance: Option<AcceptanceSamples>,
    /// Requests whose structured output or tool call did not parse, of the requests checked,
    /// on each side (`None`: the scenario asks for no structured output).
    pub parse: Option<ErrorCounts>,
}

/// One request's acceptance rate (accepted / drafted draft tokens) and, when recorded, its
/// index in the run (`work.index`), which pairs it with the other side's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRate {
    pub index: Option<u64>,
    pub rate: f64,
}

/// The acceptance check's input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AcceptanceSamples {
    pub baseline: Vec<RequestRate>,
    pub candidate: Vec<RequestRate>,
    /// Pooled rates (sum accepted / sum drafted) of each side, shown beside the test.
    pub pooled: (Option<f64>, Option<f64>),
    /// The largest drop of the rate tolerated (absolute: 0.05 = 5 points).
    pub max_drop: f64,
}

/// Per-request differences candidate - reference over the indices both sides have (a reference
/// index measured in several runs: their mean); `None` unless every request on both sides has
/// an index and at least one index is on both.
pub(super) fn paired_differences(b: &[RequestRate], c: &[RequestRate]) -> Option<Vec<f64>> {
    let mut base: BTreeMap<u64, (f64, usize)> = BTreeMap::new();
    for r in b {
        let e = base.entry(r.index?).or_insert((0.0, 0));
        e.0 += r.rate;
        e.1 += 1;
    }
    let mut d = Vec::new();
    for r in c {
        if let Some((sum, n)) = base.get(&r.index?) {
            d.push(r.rate - sum / *n as f64);
        }
    }
    (!d.is_empty()).then_some(d)
}

/// `gate.acceptance`: a drop of the acceptance rate. Paired (the Wilcoxon signed-rank test on
/// the per-request differences, the estimate the median of their Walsh averages) when the
/// sides' requests pair by index, else unpaired (one-sided Mann-Whitney on the per-request
/// rates, the estimate the difference of the medians). FAIL needs a significant drop (Holm)
/// whose estimate exceeds `max_drop`; IMPROVED the mirror.
pub(super) fn acceptance_check(scenario: &str, a: &AcceptanceSamples, alpha: f64) -> Draft {
    let mut ch = empty_check(Blank {
        scenario,
        metric: None,
        kind: CheckKind::AcceptanceRate,
        band: Band {
            warn: a.max_drop,
            fail: a.max_drop,
        },
        min_delta_ms: 0.0,
        n_baseline: a.baseline.len(),
        n_candidate: a.candidate.len(),
    });
    ch.baseline = a.pooled.0;
    ch.candidate = a.pooled.1;
    let rates = |s: &[RequestRate]| s.iter().map(|r| r.rate).collect::<Vec<f64>>();
    let (b, c) = (rates(&a.baseline), rates(&a.candidate));
    if b.is_empty() || c.is_empty() {
        ch.reason = format!(
            "no acceptance counts on the {} side: speculative decoding not reported",
            if b.is_empty() {
                "reference"
            } else {
                "candidate"
            }
        );
        return ch;
    }
    let (drop, p_drop, p_rise, how) = match paired_differences(&a.baseline, &a.candidate) {
        Some(d) => match stats::signed_rank::signed_rank_log_shift(&d, alpha.clamp(1e-9, 0.5)) {
            // the differences are not logs here: ln of the "ratio" is the Walsh median itself
            Some(s) => (
                -s.shift.ratio.ln(),
                s.p_less,
                s.p_greater,
                format!("{} requests paired, signed-rank", s.n),
            ),
            None => return ch,
        },
        None => {
            let med = |x: &[f64]| quantile_type7(&sorted(x), 0.5).unwrap_or(f64::NAN);
            (
                med(&b) - med(&c),
                stats::rank::mann_whitney_less(&c, &b).unwrap_or(1.0),
                stats::rank::mann_whitney_greater(&c, &b).unwrap_or(1.0),
                "unpaired, rank-sum".to_string(),
            )
        }
    };
    ch.ratio = match a.pooled {
        (Some(pb), Some(pc)) if pb > 0.0 => Some(pc / pb),
        _ => None,
    };
    ch.p_value = Some(p_drop);
    ch.p_improve = Some(p_rise);
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0));
    ch.reason = format!(
        "acceptance rate {} reference vs {} candidate, estimated drop {:+.1} points ({how})",
        pct(a.pooled.0),
        pct(a.pooled.1),
        drop * 100.0
    );
    ch.pending = Some(Pending {
        beyond_fail: drop > a.max_drop,
        beyond_warn: false,
        improved_beyond_fail: -drop > a.max_drop,
        pass: true,
        inconclusive_reason: String::new(),
    });
    ch
}

/// Stage 3's reason for the acceptance check with verdict `v` (Holm-adjusted p-values), the
/// tolerance `max_drop` in points.
pub(super) fn reason(v: Verdict, max_drop: f64, reg_h: f64, imp_h: f64) -> String {
    let pts = max_drop * 100.0;
    match v {
        Verdict::Fail => format!(
            "the acceptance rate dropped beyond {pts:.0} points, Holm p = {}",
            fmt_p(reg_h)
        ),
        Verdict::Improved => format!(
            "the acceptance rate rose beyond {pts:.0} points, Holm p = {}",
            fmt_p(imp_h)
        ),
        _ => format!(
            "no significant drop of the acceptance rate beyond {pts:.0} points (Holm p = {})",
            fmt_p(reg_h)
        ),
    }
}

/// The parse-failure share: a significant increase of the requests whose structured output or
/// tool call did not parse FAILs, as more failed requests do (the error-rate check's test).
pub(super) fn parse_check(scenario: &str, parse: ErrorCounts) -> Draft {
    super::errors::share(
        scenario,
        CheckKind::ParseRate,
        parse,
        "gave output that did not parse",
    )
}

/// The output checks of a scenario's samples.
pub(super) fn quality_checks(s: &ScenarioSamples, alpha: f64) -> Vec<Draft> {
    let mut out = Vec::new();
    if let Some(a) = &s.quality.acceptance {
        out.push(acceptance_check(&s.scenario, a, alpha));
    }
    if let Some(p) = s
        .quality
        .parse
        .filter(|p| p.baseline.total > 0 && p.candidate.total > 0)
    {
        out.push(parse_check(&s.scenario, p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unindexed(rates: &[f64]) -> Vec<RequestRate> {
        rates
            .iter()
            .map(|&rate| RequestRate { index: None, rate })
            .collect()
    }

    /// Unpaired: every candidate rate below every reference rate, 5 and 5: the one-sided
    /// Mann-Whitney p = 1 / C(10, 5) = 1 / 252; the drop estimate is the difference of the
    /// medians, 0.84 - 0.54 = 0.30 > max_drop 0.05.
    #[test]
    fn an_unpaired_drop_known_answer() {
        let a = AcceptanceSamples {
            baseline: unindexed(&[0.80, 0.82, 0.84, 0.86, 0.88]),
            candidate: unindexed(&[0.50, 0.52, 0.54, 0.56, 0.58]),
            pooled: (Some(0.84), Some(0.54)),
            max_drop: 0.05,
        };
        let d = acceptance_check("s", &a, 0.01);
        assert!(
            (d.p_value.unwrap() - 1.0 / 252.0).abs() < 1e-12,
            "{:?}",
            d.p_value
        );
        assert!((d.p_improve.unwrap() - 1.0).abs() < 1e-12);
        let p = d.pending.clone().unwrap();
        assert!(p.beyond_fail && !p.improved_beyond_fail);
        assert!(
            d.reason.contains("84.0% reference vs 54.0% candidate"),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("+30.0 points (unpaired"), "{}", d.reason);
        // a drop of 2 points only: significant, within max_drop
        let small = AcceptanceSamples {
            candidate: unindexed(&[0.78, 0.80, 0.82, 0.84, 0.86]),
            ..a.clone()
        };
        assert!(
            !acceptance_check("s", &small, 0.01)
                .pending
                .unwrap()
                .beyond_fail
        );
    }

    /// Paired: 6 requests, each 0.10 to 0.15 lower on the candidate (no ties): every signed
    /// rank negative, exact P(T+ <= 0) = 1 / 2^6 = 1 / 64.
    #[test]
    fn a_paired_drop_known_answer() {
        let r = |index, rate| RequestRate {
            index: Some(index),
            rate,
        };
        let b: Vec<RequestRate> = (0..6).map(|i| r(i, 0.9)).collect();
        let c: Vec<RequestRate> = (0..6).map(|i| r(i, 0.8 - 0.01 * i as f64)).collect();
        let a = AcceptanceSamples {
            baseline: b,
            candidate: c,
            pooled: (Some(0.9), Some(0.775)),
            max_drop: 0.05,
        };
        let d = acceptance_check("s", &a, 0.01);
        assert!(
            (d.p_value.unwrap() - 1.0 / 64.0).abs() < 1e-12,
            "{:?}",
            d.p_value
        );
        assert!(d.reason.contains("6 requests paired"), "{}", d.reason);
        assert!(d.pending.unwrap().beyond_fail);
    }

    #[test]
    fn pairs_by_index_and_averages_repeated_reference_runs() {
        let r = |index, rate| RequestRate {
            index: Some(index),
            rate,
        };
        // index 0: reference runs 0.5 and 0.7 (mean 0.6), candidate 0.4 -> -0.2;
        // index 1: 0.8 vs 0.9 -> +0.1; index 2 only on the candidate
        let d = paired_differences(
            &[r(0, 0.5), r(1, 0.8), r(0, 0.7)],
            &[r(0, 0.4), r(1, 0.9), r(2, 1.0)],
        )
        .unwrap();
        assert_eq!(d.len(), 2);
        assert!((d[0] + 0.2).abs() < 1e-12 && (d[1] - 0.1).abs() < 1e-12);
        let none = RequestRate {
            index: None,
            rate: 0.5,
        };
        assert_eq!(paired_differences(&[none], &[r(0, 0.4)]), None);
    }
}
