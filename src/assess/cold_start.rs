//! `gate.cold_start` (docs/gate.md "Cold start"): the started server's time to ready, and the
//! TTFT of its first request, over the starts this run made, against the reference's starts
//! (a baseline's stored `server_starts`, or an A/B base arm's). One check per time, out of the
//! Holm family (as `gate.cache.hit_rate`), at the scenario's `gate.alpha`; a check that cannot
//! compare is INFO and says what it would need, never a silent PASS.

use crate::config::scenario::ColdStartGate;
use crate::config::Scenario;
use crate::gate::{Check, CheckKind, StartFigure, Verdict};
use crate::results::{Note, NoteKind, ScenarioResult};
use crate::server::start::ServerStart;
use crate::stats::cold_start::{compare, rank_starts_needed, StartTest, TooFew};

/// Where the reference's starts come from, for the notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartsOf {
    /// A committed baseline's `environment.server_starts`.
    Baseline,
    /// The base arm of an A/B run.
    BaseArm,
}

/// The cold-start checks of `sc` (none unless `gate.cold_start` is set), pushed on `res` with
/// a note when they are not gated.
pub fn judge(
    sc: &Scenario,
    reference: &[ServerStart],
    of: StartsOf,
    candidate: &[ServerStart],
    res: &mut ScenarioResult,
) {
    let Some(g) = sc.gate.cold_start else {
        return;
    };
    if sc.server.is_none() {
        res.notes.push(Note::new(NoteKind::Server, "gate.cold_start: not gated: the scenario has no server: block, so perfgate starts no server to time"));
        return;
    }
    if reference.is_empty() {
        let why = match of {
            StartsOf::Baseline => "the baseline stores no server starts (blessed without gate.cold_start, or by an older perfgate); bless again to gate it",
            StartsOf::BaseArm => "the base arm made no server start of its own",
        };
        res.notes.push(Note::new(
            NoteKind::Server,
            format!("gate.cold_start: not gated: {why}"),
        ));
    }
    let ready = |s: &[ServerStart]| s.iter().map(|x| x.time_to_ready_ms).collect::<Vec<_>>();
    let first = |s: &[ServerStart]| s.iter().filter_map(|x| x.first_ttft_ms).collect::<Vec<_>>();
    res.checks.push(check(
        &sc.name,
        StartFigure::Ready,
        &ready(reference),
        &ready(candidate),
        g,
        sc.gate.alpha,
    ));
    res.checks.push(check(
        &sc.name,
        StartFigure::FirstToken,
        &first(reference),
        &first(candidate),
        g,
        sc.gate.alpha,
    ));
}

/// One cold-start check: `base` and `cand` the reference's and this run's times, ms. Pure.
pub fn check(
    scenario: &str,
    figure: StartFigure,
    base: &[f64],
    cand: &[f64],
    g: ColdStartGate,
    alpha: f64,
) -> Check {
    let what = match figure {
        StartFigure::Ready => "time to ready",
        StartFigure::FirstToken => "first-request TTFT",
    };
    let geo = |v: &[f64]| {
        let l: Vec<f64> = v.iter().filter(|x| **x > 0.0).map(|x| x.ln()).collect();
        (!l.is_empty()).then(|| (l.iter().sum::<f64>() / l.len() as f64).exp())
    };
    let mut c = Check {
        baseline: geo(base).map(crate::units::round3),
        candidate: geo(cand).map(crate::units::round3),
        min_delta_ms: g.min_delta_ms,
        n_baseline: base.len(),
        n_candidate: cand.len(),
        verdict: Verdict::Info,
        alpha: Some(alpha),
        ..Check::blank(scenario, None, CheckKind::ColdStart(figure), g.fail)
    };
    let rank_needed = rank_starts_needed(cand.len().max(1), alpha);
    let cmp = match compare(base, cand, alpha) {
        Ok(x) => x,
        Err(TooFew::NoCandidate) => {
            c.reason = format!("{what}: not compared: this run made no server start with one (the server was shared with an earlier scenario, or its first request failed)");
            return c;
        }
        Err(TooFew::Baseline { have, needed }) => {
            c.samples_needed = Some(needed);
            c.reason = format!(
                "{what}: cannot compare: the reference has {have} start(s); the band from their spread needs at least {needed} (bless with --runs {needed} or more), the rank test {rank_needed}"
            );
            return c;
        }
    };
    c.ratio = Some(cmp.ratio);
    c.ci = Some(crate::gate::RatioCi {
        lower: Some(cmp.lower).filter(|x| *x > 0.0),
        upper: Some(cmp.upper).filter(|x| x.is_finite()),
    });
    c.ci_level = Some(1.0 - alpha);
    let how = match cmp.test {
        StartTest::Rank => "exact rank test".to_string(),
        StartTest::Band { df } => format!(
            "band from the starts' spread (sd {:.1}% on the log scale, t with {df} df; rank test at {rank_needed} reference starts)",
            cmp.sd_log.unwrap_or(0.0) * 100.0
        ),
    };
    // the smallest slowdown this comparison could call significant, or the tolerance
    c.min_detectable_change =
        Some(((cmp.upper / cmp.ratio) - 1.0).max(g.fail)).filter(|x| x.is_finite());
    let delta = match (c.candidate, c.baseline) {
        (Some(a), Some(b)) => a - b,
        _ => 0.0,
    };
    let beyond = cmp.ratio > 1.0 + g.fail && delta > g.min_delta_ms;
    let better = cmp.ratio < 1.0 / (1.0 + g.fail) && -delta > g.min_delta_ms;
    let p = |x: f64| {
        if x < 0.0001 {
            "<0.0001".to_string()
        } else {
            format!("{x:.4}")
        }
    };
    let (v, why) = if beyond && cmp.p_slower < alpha {
        (
            Verdict::Fail,
            format!(
                "slower beyond the {:.0}% tolerance and {} (p = {} < alpha {alpha})",
                g.fail * 100.0,
                crate::units::fmt_ms(g.min_delta_ms),
                p(cmp.p_slower)
            ),
        )
    } else if better && cmp.p_faster < alpha {
        (
            Verdict::Improved,
            format!(
                "faster beyond the {:.0}% tolerance (p = {})",
                g.fail * 100.0,
                p(cmp.p_faster)
            ),
        )
    } else if beyond {
        (Verdict::Warn, format!("slower beyond the {:.0}% tolerance but within the reference starts' spread (p = {} >= alpha {alpha}); more bless runs narrow it", g.fail * 100.0, p(cmp.p_slower)))
    } else {
        (
            Verdict::Pass,
            format!(
                "within the {:.0}% tolerance or {} (p = {})",
                g.fail * 100.0,
                crate::units::fmt_ms(g.min_delta_ms),
                p(cmp.p_slower)
            ),
        )
    };
    c.verdict = v;
    c.reason = format!(
        "{what} {} over {} start(s) vs {} over {} reference start(s), ratio {:.2}: {why}; {how}",
        c.candidate.map_or("-".into(), crate::units::fmt_ms),
        cand.len(),
        c.baseline.map_or("-".into(), crate::units::fmt_ms),
        base.len(),
        cmp.ratio
    );
    c
}

/// What `bless` prints about the starts it stored under `gate.cold_start`: each start's times,
/// and what a check can do with that many (one start has no spread: every check would be INFO).
pub fn bless_lines(sc: &Scenario, starts: &[ServerStart]) -> Vec<String> {
    if sc.gate.cold_start.is_none() || sc.server.is_none() {
        return Vec::new();
    }
    let ms = |v: Vec<Option<f64>>| {
        v.into_iter()
            .map(|x| x.map_or("-".to_string(), crate::units::fmt_ms))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = vec![format!(
        "gate.cold_start: {} server start(s) stored: time to ready {}; first-request TTFT {}",
        starts.len(),
        ms(starts.iter().map(|s| Some(s.time_to_ready_ms)).collect()),
        ms(starts.iter().map(|s| s.first_ttft_ms).collect()),
    )];
    if starts.len() < 2 {
        out.push("gate.cold_start: a check cannot compare a start with fewer than 2 stored ones (no spread): bless with --runs 2 or more".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: ColdStartGate = ColdStartGate {
        fail: 0.5,
        min_delta_ms: 100.0,
    };

    /// Stored starts 1000 ms x exp(0, +0.1, -0.1): mean log ln 1000, sum of squares 0.02, sd
    /// sqrt(0.02 / 2) = 0.1; one start now: se = 0.1 sqrt(1/3 + 1) = 0.11547, t with 2 df,
    /// p = (1 - t / sqrt(t^2 + 2)) / 2.
    fn base(scale: f64) -> Vec<f64> {
        [0.0f64, 0.1, -0.1]
            .iter()
            .map(|z| scale * z.exp())
            .collect()
    }

    fn verdict(b: &[f64], c: f64) -> Check {
        check("s", StartFigure::Ready, b, &[c], G, 0.01)
    }

    #[test]
    fn verdicts_by_hand() {
        // 3000 ms: t = ln 3 / 0.11547 = 9.514, p = 0.00543 < 0.01; ratio 3 > 1.5; +2000 ms > 100
        let c = verdict(&base(1000.0), 3000.0);
        assert_eq!(c.verdict, Verdict::Fail, "{}", c.reason);
        assert!((c.baseline.unwrap() - 1000.0).abs() < 1e-6);
        assert!((c.ratio.unwrap() - 3.0).abs() < 1e-9);
        assert!(c.reason.contains("p = 0.0054"), "{}", c.reason);
        // 1600 ms: t = 4.070, p = 0.0277 >= 0.01: beyond the tolerance, not beyond the spread
        let c = verdict(&base(1000.0), 1600.0);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.reason);
        assert!(c.reason.contains("p = 0.0277"), "{}", c.reason);
        // 1100 ms: within 50 %
        assert_eq!(verdict(&base(1000.0), 1100.0).verdict, Verdict::Pass);
        // 300 ms: t = -10.43, P(faster) = 1 - 0.99546 = 0.00454 < 0.01; -700 ms
        assert_eq!(verdict(&base(1000.0), 300.0).verdict, Verdict::Improved);
        // 10 ms starts, 30 ms now: 3x and significant, but +20 ms is under the 100 ms floor
        let c = verdict(&base(10.0), 30.0);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
    }

    #[test]
    fn too_few_starts_are_info_with_what_is_needed() {
        let c = verdict(&[1000.0], 3000.0);
        assert_eq!(c.verdict, Verdict::Info);
        assert_eq!(c.samples_needed, Some(2));
        // one start now: the rank test needs 99 stored ones at alpha 0.01
        assert!(
            c.reason.contains("needs at least 2") && c.reason.contains("the rank test 99"),
            "{}",
            c.reason
        );
        let c = check("s", StartFigure::FirstToken, &base(1000.0), &[], G, 0.01);
        assert_eq!(c.verdict, Verdict::Info);
        assert!(c.reason.contains("made no server start"), "{}", c.reason);
    }
}
