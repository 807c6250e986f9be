//! How to read a check table, in the same words in every renderer (terminal, PR comment,
//! HTML): what the change column is, the confidence of its interval (the level the reasons
//! name), a P50 row whose change is not the ratio of its two P50 columns, and every fail
//! tolerance marked `*` (widened to the baseline's or the history's drift).

use crate::config::Quantile;
use crate::gate::{Check, CheckKind, Verdict};

/// A confidence as a percentage without a needless decimal: `99%`, `99.5%`.
fn fmt_level(level: f64) -> String {
    let pct = level * 100.0;
    if (pct - pct.round()).abs() < 0.05 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// The one-sided confidence of each end of the rows' intervals, distinct, highest first
/// (`ci_level`, or 1 - alpha for results written before it existed).
fn levels(checks: &[&Check]) -> Vec<String> {
    let mut ls: Vec<f64> = checks
        .iter()
        .filter(|c| c.ci.is_some())
        .filter_map(|c| c.ci_level.or(c.alpha.map(|a| 1.0 - a)))
        .filter(|l| l.is_finite() && *l > 0.0 && *l < 1.0)
        .collect();
    ls.sort_by(|a, b| b.total_cmp(a));
    let mut out: Vec<String> = ls.into_iter().map(fmt_level).collect();
    out.dedup();
    out
}

/// What the change column of a table of `checks` is, and the confidence of its `[CI]` ends;
/// `word` is `baseline` or `base`. `None` for a table without rows.
pub fn change_legend(checks: &[&Check], word: &str) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let level = match levels(checks).as_slice() {
        [] => "a one-sided confidence bound at 1 - gate.alpha".to_string(),
        [one] => format!("a one-sided {one} confidence bound"),
        many => format!(
            "a one-sided confidence bound ({}; sequential looks spend alpha)",
            many.join(" or ")
        ),
    };
    Some(format!(
        "change [CI]: P50 rows show the candidate's typical per-request shift against the {word} \
         (Hodges-Lehmann, the figure the gate tests), which can differ from the ratio of the two \
         P50 columns; P90/P99 rows the ratio of the two quantiles; shares the difference in \
         percentage points (pp). Each end of [CI] is {level}, the bound the reasons name."
    ))
}

/// How to read a `tail>P90` row, after its label (the PR comment's legend and the terminal's):
/// a share in points whose tolerance is on the P90 ratio, against a P90 pooled per comparison.
pub const TAIL_LEGEND: &str = "the share of requests slower than the usual P90 (the P90 of both \
     runs pooled, so the baseline's share moves from one comparison to the next); about 10 % \
     when nothing changed, and its change is in percentage points; its tolerance applies to the \
     ratio of the two P90s (the HD P90 ratio its reason names), not to the points";

/// The terminal's `tail>P90` legend line, when a gated (not INFO) row of `r` is one.
pub fn results_tail_legend(r: &crate::results::Results) -> Option<String> {
    r.scenarios
        .iter()
        .flat_map(|s| s.checks.iter())
        .any(|c| c.verdict != Verdict::Info && c.kind == CheckKind::TailExceedance)
        .then(|| format!("tail>P90: {TAIL_LEGEND}."))
}

/// [`change_legend`] for every gated (not INFO) check of `r`, in the report's own word for
/// the reference (`baseline`, or `base` in an A/B run).
pub fn results_legend(r: &crate::results::Results) -> Option<String> {
    let gated: Vec<&Check> = r
        .scenarios
        .iter()
        .flat_map(|s| s.checks.iter())
        .filter(|c| c.verdict != Verdict::Info)
        .collect();
    change_legend(&gated, super::base_word(r))
}

/// A P50 row whose shift and the ratio of its two P50 columns differ by more than 2
/// percentage points: both figures, so "406 -> 410 ms" beside "+12.3%" is not left unexplained.
pub fn shift_apart(c: &Check) -> Option<String> {
    if c.kind != CheckKind::Quantile(Quantile::P50) || c.verdict == Verdict::Info {
        return None;
    }
    let (b, x, r) = (c.baseline?, c.candidate?, c.ratio?);
    if b <= 0.0 || b <= c.min_delta_ms || !(x.is_finite() && r.is_finite()) {
        return None;
    }
    let columns = x / b;
    ((r - columns).abs() > 0.02).then(|| {
        format!(
            "{}: the change {:+.1}% is the typical per-request shift; the two P50 columns alone differ by {:+.1}% (the requests around the median moved less or more than the rest)",
            super::fmt_check_name(c),
            (r - 1.0) * 100.0,
            (columns - 1.0) * 100.0
        )
    })
}

/// A fail tolerance marked `*`: from what to what, and the drift that widened it.
pub fn widened(c: &Check) -> Option<String> {
    let conf = c.fail_configured?;
    let why = match (c.tau, c.tau_nights) {
        (Some(tau), Some(n)) => format!(
            "{n} nights of history move by tau {:.1}% from night to night",
            tau * 100.0
        ),
        (Some(tau), None) => format!(
            "the baseline's bless runs differ by tau {:.1}% from run to run",
            tau * 100.0
        ),
        (None, _) => "the run-to-run drift".to_string(),
    };
    Some(format!(
        "* {}: fail tolerance widened from {:.0}% to {:.1}% because {why} (a regression smaller than the drift cannot be told from it; docs/gate.md \"Family and bands\")",
        super::fmt_check_name(c),
        conf * 100.0,
        c.fail * 100.0
    ))
}

/// The per-table notes under a table of `checks`: widened tolerances, then P50 rows whose
/// shift is not the ratio of their columns. Each line names its check.
pub fn notes(checks: &[&Check]) -> Vec<String> {
    let shown = || checks.iter().filter(|c| c.verdict != Verdict::Info);
    shown()
        .filter_map(|c| widened(c))
        .chain(shown().filter_map(|c| shift_apart(c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::RatioCi;

    fn p50(base: f64, cand: f64, ratio: f64) -> Check {
        let r = crate::results::fixture();
        let mut c = r
            .scenarios
            .iter()
            .flat_map(|s| s.checks.iter())
            .find(|c| c.kind == CheckKind::Quantile(Quantile::P50))
            .unwrap()
            .clone();
        c.baseline = Some(base);
        c.candidate = Some(cand);
        c.ratio = Some(ratio);
        c.ci = Some(RatioCi::bounded(ratio - 0.05, ratio + 0.05));
        c.min_delta_ms = 5.0;
        c.verdict = Verdict::Fail;
        c.fail_configured = None;
        c.tau = None;
        c.tau_nights = None;
        c
    }

    #[test]
    fn a_shift_far_from_the_columns_is_explained_with_both_figures() {
        // The case: 406 -> 410 ms is +0.99 %, the shift +12.3 %.
        let c = p50(406.0, 410.0, 1.123);
        let line = shift_apart(&c).unwrap();
        assert!(line.contains("+12.3%"), "{line}");
        assert!(line.contains("+1.0%"), "{line}");
        // 2 points or less apart: the columns say the same thing, no note.
        assert_eq!(shift_apart(&p50(400.0, 440.0, 1.119)), None);
        // At or below min_delta the change is shown in ms: no ratio to explain.
        assert_eq!(shift_apart(&p50(4.0, 9.0, 1.5)), None);
    }

    #[test]
    fn the_level_is_the_checks_own_and_a_widened_tolerance_says_why() {
        let mut a = p50(100.0, 101.0, 1.01);
        a.ci_level = Some(0.99);
        let mut b = a.clone();
        b.ci_level = Some(0.995);
        let one = change_legend(&[&a], "baseline").unwrap();
        assert!(one.contains("a one-sided 99% confidence bound"), "{one}");
        let two = change_legend(&[&a, &b], "base").unwrap();
        assert!(two.contains("(99.5% or 99%;"), "{two}");
        assert!(two.contains("against the base"), "{two}");
        // Results from before ci_level: 1 - alpha.
        a.ci_level = None;
        a.alpha = Some(0.05);
        assert!(change_legend(&[&a], "baseline")
            .unwrap()
            .contains("one-sided 95% confidence"));

        a.fail_configured = Some(0.10);
        a.fail = 0.142;
        a.tau = Some(0.041);
        let w = widened(&a).unwrap();
        assert!(
            w.contains("fail tolerance widened from 10% to 14.2% because the baseline's bless runs differ by tau 4.1%"),
            "{w}"
        );
        a.tau_nights = Some(30);
        assert!(widened(&a).unwrap().contains("30 nights of history"));
        assert_eq!(notes(&[&a]).len(), 1);
        a.verdict = Verdict::Info;
        assert!(notes(&[&a]).is_empty());
    }
}
