//! Change points in a nightly series: a persistent step in a scenario's per-night value (its
//! P50, say), found online as a nightly job would find it, night by night, with a confirmation
//! rule so that a single outlier night never alerts (docs/gate.md, "Change points").
//!
//! The rule ([`StepRule`]): a rank step test with confirmation. At night t, the candidate first
//! nights k of a new level are those with `confirm..=max_after` nights after them (k..=t) and
//! at least `min_before` nights before them since the last change point. Where: the candidate
//! with the largest CUSUM statistic on ln values (the mean shift weighted by
//! sqrt(mn / (m + n)), the classical change-point location estimate). Whether: that
//! candidate's one-sided exact Mann-Whitney test (Mann & Whitney 1947; ties counted against the
//! step, so rounded medians that tie keep it exact) of its after-nights against
//! up to `window` nights before it, its exact p-value Bonferroni-adjusted over every candidate
//! and both directions, must be at most `alpha`, and the Hodges-Lehmann shift of the two
//! segments (Hodges & Lehmann 1963) must be at least `min_step`. The accepted k is the night
//! the new level starts; the next level is tested from there.
//!
//! Why this rule and not the others a performance team may know:
//! - E-divisive means (Matteson & James 2014; Apache Otava/Hunter) and PELT (Killick et al.
//!   2012) segment a whole series offline and re-segment it when a night is added, so a change
//!   point already reported can move or vanish; both need a permutation test or a penalty tuned
//!   to the noise. The nightly gate needs an online rule whose per-night false-alert rate is
//!   bounded by construction: under exchangeable nights the rank test's p-value is exact, and the
//!   Bonferroni bound keeps each night's false-alert probability <= `alpha` whatever the noise's
//!   shape (heavy tails, outlier nights).
//! - A t-test between a back and a fore window (Mozilla Perfherder: 12 and 12 nights, t > 7) is
//!   moved by one outlier night (a mean and a variance) and needs the whole fore window before
//!   it can speak; the rank test needs `confirm` nights (3) and ignores how far out an outlier is.
//! - A fixed threshold on tonight's value against the recent median alerts on every outlier
//!   night.
//!
//! [`naive_threshold`] and [`perfherder_t`] implement those two for `perfgate calibrate`, which
//! runs all three on the same simulated series.
//!
//! Pure: slices in, steps out; values are positive (latencies in any unit); NaN nights are
//! skipped by the callers (a night that measured nothing has no value).

use super::rank::{mann_whitney_greater_exact_ties_against, mann_whitney_less_exact_ties_against};
use super::shift::{hodges_lehmann_ratio, Shift};

/// The change-point rule's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRule {
    /// Nights before a candidate step needed to test it (since the last change point).
    pub min_before: usize,
    /// Most nights before a candidate step the test uses (the recent level).
    pub window: usize,
    /// Nights at the new level before it can be reported (a single outlier night never is).
    pub confirm: usize,
    /// Most nights after a candidate step (how far back tonight's run looks for its start).
    pub max_after: usize,
    /// Per-night false-alert probability bound (Bonferroni over candidates and directions).
    pub alpha: f64,
    /// Smallest step reported, relative (0.05 = 5 %): smaller persistent shifts are drift.
    pub min_step: f64,
}

impl Default for StepRule {
    fn default() -> Self {
        StepRule {
            min_before: 5,
            window: 20,
            confirm: 3,
            max_after: 10,
            alpha: 0.01,
            min_step: 0.05,
        }
    }
}

/// Which way the level moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Higher values (slower): a regression.
    Up,
    /// Lower values (faster): an improvement, or a regression restored.
    Down,
}

/// A change point: the night the new level starts and how it differs from the level before.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Index of the first night of the new level.
    pub first: usize,
    /// Index of the night whose run found it (the rule needs `confirm` nights: first + confirm - 1
    /// at the earliest).
    pub found_at: usize,
    pub direction: Direction,
    /// New level / old level: Hodges-Lehmann ratio with one-sided (1 - alpha) Moses bounds.
    pub shift: Shift,
    /// The Bonferroni-adjusted p-value.
    pub p: f64,
    /// Nights in the old level's window and in the new level when it was found.
    pub before: usize,
    pub after: usize,
}

/// Every change point of `series` (oldest night first) as a nightly job would have found them,
/// night by night: a step found at night t is reported with the night its level began.
pub fn change_points(series: &[f64], rule: &StepRule) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut level_start = 0;
    for t in 0..series.len() {
        if let Some(s) = step_at(series, level_start, t, rule) {
            level_start = s.first;
            steps.push(s);
        }
    }
    steps
}

/// The step tonight's run (night `t`) finds in the level that began at `level_start`, if any.
pub fn step_at(series: &[f64], level_start: usize, t: usize, rule: &StepRule) -> Option<Step> {
    if t >= series.len() || rule.confirm == 0 || !(rule.alpha > 0.0 && rule.alpha < 1.0) {
        return None;
    }
    // candidate first nights: confirm..=max_after nights up to t, min_before nights before
    let lo = (level_start + rule.min_before).max((t + 1).saturating_sub(rule.max_after));
    let hi = (t + 1).checked_sub(rule.confirm)?;
    if lo > hi {
        return None;
    }
    let candidates = hi - lo + 1;
    // where: the candidate with the largest CUSUM statistic (the rank test's p-value would
    // favour long after-segments, which hold nights of the old level); whether: that
    // candidate's exact rank p-value, Bonferroni-adjusted over every candidate and both
    // directions (valid whatever picked k: it bounds the chance that any candidate's is this low)
    let mut best: Option<(f64, usize)> = None;
    for k in lo..=hi {
        let before = &series[k.saturating_sub(rule.window).max(level_start)..k];
        let after = &series[k..=t];
        let Some(z) = cusum(after, before) else {
            continue;
        };
        // the earliest k wins a tie: the step's start, not a night inside the new level
        if best.is_none_or(|(bz, _)| z.abs() > bz.abs()) {
            best = Some((z, k));
        }
    }
    let (z, k) = best?;
    let (before, after) = (
        &series[k.saturating_sub(rule.window).max(level_start)..k],
        &series[k..=t],
    );
    // Exact with ties counted against the step: nightly medians are rounded to the µs and two
    // nights tie often; the normal approximation ties would switch to cannot reach alpha with a
    // few nights at the new level (the +20 % step of the CI of f8b18f4 went unseen for 4 nights).
    let (direction, p) = if z >= 0.0 {
        (
            Direction::Up,
            mann_whitney_greater_exact_ties_against(after, before)?,
        )
    } else {
        (
            Direction::Down,
            mann_whitney_less_exact_ties_against(after, before)?,
        )
    };
    let p = (p * (2 * candidates) as f64).min(1.0);
    if p > rule.alpha {
        return None;
    }
    let shift = hodges_lehmann_ratio(after, before, rule.alpha.min(0.5))?;
    let big_enough = match direction {
        Direction::Up => shift.ratio >= 1.0 + rule.min_step,
        Direction::Down => shift.ratio <= 1.0 / (1.0 + rule.min_step),
    };
    big_enough.then_some(Step {
        first: k,
        found_at: t,
        direction,
        shift,
        p,
        before: before.len(),
        after: after.len(),
    })
}

/// The nights at its new level a step needs before the rule can confirm it, when `before`
/// nights of the old level precede it (since the last change point): the smallest a in
/// `confirm..=max_after` for which even the most extreme nights (every one after above every
/// one before) reach `alpha` after the Bonferroni factor, 2 x candidates / C(m + a, a) <= alpha,
/// with m = min(before, window) nights tested before and the candidates of night
/// `before + a - 1`. The rule's floor (`confirm`, 3) holds only with a long history: at alpha
/// 0.01, 8 nights before need 5 after, 20 before need 3. `None` when `before < min_before` or
/// even `max_after` nights cannot.
pub fn nights_to_confirm(before: usize, rule: &StepRule) -> Option<usize> {
    if before < rule.min_before || rule.confirm == 0 {
        return None;
    }
    let m = before.min(rule.window) as f64;
    (rule.confirm..=rule.max_after).find(|&a| {
        let t = before + a - 1;
        let lo = rule.min_before.max((t + 1).saturating_sub(rule.max_after));
        let hi = t + 1 - rule.confirm;
        let candidates = (hi + 1).saturating_sub(lo).max(1) as f64;
        // C(m + a, a) as a product, in f64 (a <= max_after, so no overflow)
        let ways: f64 = (1..=a).map(|i| (m + i as f64) / i as f64).product();
        2.0 * candidates / ways <= rule.alpha
    })
}

/// The CUSUM statistic of a step between `before` and `after` on the log scale: (mean ln after -
/// mean ln before) x sqrt(mn / (m + n)), the classical estimate of where a mean shifts
/// (positive: `after` higher). `None` when a side is empty.
fn cusum(after: &[f64], before: &[f64]) -> Option<f64> {
    let mean_ln = |x: &[f64]| -> Option<f64> {
        (!x.is_empty()).then(|| x.iter().map(|v| v.max(1e-300).ln()).sum::<f64>() / x.len() as f64)
    };
    let (m, n) = (after.len() as f64, before.len() as f64);
    Some((mean_ln(after)? - mean_ln(before)?) * (m * n / (m + n)).sqrt())
}

/// The naive rule, for comparison: night t alerts when its value is more than `threshold`
/// (0.10 = 10 %) above the median of up to `window` nights before it. Returns the nights that
/// alert.
pub fn naive_threshold(series: &[f64], window: usize, threshold: f64) -> Vec<usize> {
    (1..series.len())
        .filter(|&t| {
            let before = &series[t.saturating_sub(window)..t];
            let med = median(before);
            series[t] > med * (1.0 + threshold)
        })
        .collect()
}

/// Mozilla Perfherder's rule, for comparison (treeherder `perf/analysis.py`): a Welch t
/// statistic between a back window of up to `back` nights and a fore window of `fore` nights
/// after each night k; k is a change when t exceeds `t_threshold` and is the largest among its
/// neighbours. Online: a change at k can only be found once night k + fore - 1 is in. Returns
/// (first night of the new level, the night it was found).
pub fn perfherder_t(
    series: &[f64],
    back: usize,
    fore: usize,
    t_threshold: f64,
) -> Vec<(usize, usize)> {
    let n = series.len();
    let t_at = |k: usize| -> f64 {
        if k < 2 || k + fore > n {
            return 0.0;
        }
        let b = &series[k.saturating_sub(back)..k];
        let f = &series[k..k + fore];
        welch_t(f, b).unwrap_or(0.0)
    };
    let ts: Vec<f64> = (0..n).map(t_at).collect();
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for k in 0..n {
        if ts[k] <= t_threshold {
            continue;
        }
        let left = if k > 0 { ts[k - 1] } else { 0.0 };
        let right = ts.get(k + 1).copied().unwrap_or(0.0);
        if ts[k] >= left && ts[k] >= right && last.is_none_or(|l| k >= l + fore) {
            out.push((k, k + fore - 1));
            last = Some(k);
        }
    }
    out
}

/// Welch's t statistic of `a` against `b` (mean(a) - mean(b) over the pooled standard error);
/// `None` when a side has fewer than 2 values or both are constant.
fn welch_t(a: &[f64], b: &[f64]) -> Option<f64> {
    let (ma, va) = mean_var(a)?;
    let (mb, vb) = mean_var(b)?;
    let se = (va / a.len() as f64 + vb / b.len() as f64).sqrt();
    (se > 0.0).then(|| (ma - mb) / se)
}

fn mean_var(x: &[f64]) -> Option<(f64, f64)> {
    if x.len() < 2 {
        return None;
    }
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    Some((m, v))
}

fn median(x: &[f64]) -> f64 {
    let mut s: Vec<f64> = x.iter().copied().filter(|v| !v.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed zig-zag noise of +-2 % around 100, plus 0.001 per night so no two nights tie
    /// (the rank tests are then exact; every value known by hand).
    fn flat(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| 100.0 * [1.00, 1.02, 0.98, 1.01, 0.99][i % 5] + 0.001 * i as f64)
            .collect()
    }

    #[test]
    fn a_20_percent_step_is_found_on_its_third_night_naming_its_first() {
        let mut s = flat(40);
        for v in &mut s[29..] {
            *v *= 1.2;
        }
        let steps = change_points(&s, &StepRule::default());
        assert_eq!(steps.len(), 1, "{steps:?}");
        let st = steps[0];
        assert_eq!(st.first, 29);
        assert_eq!(st.found_at, 31); // nights 29, 30, 31: confirm = 3
        assert_eq!(st.direction, Direction::Up);
        // after = [1.02, 0.98, 1.01]*120 vs the 20 nights 9..29 of the zig-zag: every after value
        // above every before value, so U is its maximum and the exact p = 1/C(23,3) = 1/1771;
        // x 8 candidates (k = 22..=29: 3 to 10 nights after, all with >= 5 before) x 2 directions
        assert_eq!(st.before, 20);
        assert_eq!(st.after, 3);
        let candidates = 29 - 22 + 1;
        assert!(
            (st.p - (2 * candidates) as f64 / 1771.0).abs() < 1e-12,
            "{}",
            st.p
        );
        // HL: the median of the 60 differences ln(after) - ln(before) lies within the zig-zag's
        // extremes: 1.2 * (0.98/1.02 .. 1.02/0.98); the Moses lower bound (k = 5 at alpha 0.01:
        // P0(U <= 5) = 16/1771) is the 6th smallest ratio, above 118.8 / 102.1 = 1.16
        assert!(st.shift.ratio > 1.2 * 0.98 / 1.02 && st.shift.ratio < 1.2 * 1.02 / 0.98);
        assert!(st.shift.lower > 1.1, "{:?}", st.shift);
    }

    #[test]
    fn a_single_outlier_night_never_alerts_and_two_steps_are_two_change_points() {
        let mut s = flat(60);
        s[20] *= 1.6; // one bad night
        assert!(change_points(&s, &StepRule::default()).is_empty());
        // a step up at 30 and its restoration at 45
        for v in &mut s[30..45] {
            *v *= 1.3;
        }
        let steps = change_points(&s, &StepRule::default());
        let firsts: Vec<(usize, Direction)> =
            steps.iter().map(|s| (s.first, s.direction)).collect();
        assert_eq!(
            firsts,
            vec![(30, Direction::Up), (45, Direction::Down)],
            "{steps:?}"
        );
    }

    /// Rounded nightly medians tie: two nights before the step with the same value switched the
    /// rank test to its normal approximation (p 0.001 x 16 = 0.016 at 4 nights, over alpha), and a
    /// clean +20 % step went unseen. Ties counted against the step keep the test exact: the same
    /// 1/C(24,4) as without the tie.
    #[test]
    fn ties_before_the_step_keep_the_rank_test_exact() {
        let mut s = flat(33);
        s[12] = s[17]; // a tie in the window before the step
        for v in &mut s[29..] {
            *v *= 1.2;
        }
        // nights 29..=32 (4 after): found on its third night, 31, as without the tie
        let steps = change_points(&s, &StepRule::default());
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!((steps[0].first, steps[0].found_at), (29, 31));
        // the exact p-value of 4 above 20 is 1/C(24,4) = 1/10626, tie or not
        let after = &s[29..33];
        let before = &s[9..29];
        let p = mann_whitney_greater_exact_ties_against(after, before).unwrap();
        assert!((p - 1.0 / 10626.0).abs() < 1e-12, "{p}");
        // a tie across the two sides counts against the step: a before night equal to the lowest
        // after night is one pair of 80 not above, U = 79, P0(U >= 79) = 2/10626 (U = 80 or 79)
        let mut b2 = before.to_vec();
        b2[0] = after.iter().copied().fold(f64::INFINITY, f64::min);
        let p = mann_whitney_greater_exact_ties_against(after, &b2).unwrap();
        assert!((p - 2.0 / 10626.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn a_step_below_min_step_is_drift() {
        let mut s: Vec<f64> = (0..40)
            .map(|i| 100.0 + (i % 2) as f64 * 0.1 + 0.001 * i as f64)
            .collect();
        for v in &mut s[25..] {
            *v *= 1.03; // significant (no overlap), 3 % < 5 %
        }
        assert!(change_points(&s, &StepRule::default()).is_empty());
        let rule = StepRule {
            min_step: 0.02,
            ..StepRule::default()
        };
        assert_eq!(change_points(&s, &rule).len(), 1);
    }

    #[test]
    fn too_little_history_never_alerts() {
        // 4 nights before the step: fewer than min_before
        let s = [100.0, 101.0, 99.0, 100.0, 150.0, 151.0, 149.0, 150.0];
        assert!(change_points(&s, &StepRule::default()).is_empty());
        assert!(change_points(&[], &StepRule::default()).is_empty());
    }

    #[test]
    fn the_comparison_rules_by_hand() {
        // naive: 10 % above the median of the nights before
        let s = [100.0, 100.0, 100.0, 115.0, 100.0, 109.0];
        assert_eq!(naive_threshold(&s, 20, 0.10), vec![3]);
        // Perfherder: a clean step of 20 % at 12 with a zig-zag: found at 12 once 12 fore nights are in
        let mut s = flat(30);
        for v in &mut s[12..] {
            *v *= 1.2;
        }
        assert_eq!(perfherder_t(&s, 12, 12, 7.0), vec![(12, 23)]);
        assert!(perfherder_t(&s[..20], 12, 12, 7.0).is_empty());
        // Welch t by hand: a = [1, 3] (mean 2, var 2), b = [0, 0, 0] is constant (var 0):
        // se = sqrt(2/2 + 0) = 1, t = 2
        assert_eq!(welch_t(&[1.0, 3.0], &[0.0, 0.0, 0.0]), Some(2.0));
    }

    #[test]
    fn nights_to_confirm_by_hand() {
        let r = StepRule::default();
        // 8 before, 3 after: candidates at night 10 are k = 5..=8 (4), p = 1/C(11,3) = 1/165,
        // x 8 = 0.048 > 0.01; 4 after: k = 5..=9 (5), 1/C(12,4) = 1/495, x 10 = 0.020; 5 after:
        // k = 5..=10 (6), 1/C(13,5) = 1/1287, x 12 = 0.0093 <= 0.01 (the walkthrough's night 13)
        assert_eq!(nights_to_confirm(8, &r), Some(5));
        // 20 before, 3 after: k = 13..=20 (8 with max_after 10), 1/C(23,3) = 1/1771, x 16 = 0.009
        assert_eq!(nights_to_confirm(20, &r), Some(3));
        // 15 before: 1/C(18,3) = 1/816 x 16 = 0.0196; 4 after: 1/C(19,4) = 1/3876 x 18 = 0.0046
        assert_eq!(nights_to_confirm(15, &r), Some(4));
        assert_eq!(nights_to_confirm(4, &r), None);
        // the online rule agrees: a clean doubling after 8 nights is found on its 5th night
        let mut series: Vec<f64> = (0..8).map(|i| 10.0 + (i % 3) as f64 * 0.1).collect();
        series.extend((0..5).map(|i| 20.0 + (i % 2) as f64 * 0.1));
        assert!(step_at(&series[..12], 0, 11, &r).is_none());
        assert_eq!(step_at(&series, 0, 12, &r).map(|s| s.first), Some(8));
    }
}
