//! The end of every judgement over a family of scenarios: the gate, each check on its scenario,
//! a compared scenario that nothing could gate made could-not-measure, the overall verdict.

use crate::config::ScenarioName;
use crate::exit;
use crate::gate;
use crate::results::{CheckId, Results, ScenarioResult, Status, RESULTS_SCHEMA_VERSION};
use crate::verdict::Overall;
use std::collections::BTreeMap;

/// The end of `check` and `ab` alike: the gate over every scenario's input (one Holm family),
/// each check put on its scenario with the "where the time went" notes of a FAIL (`base_figures`:
/// the baseline's or base arm's server-side figures by scenario), each scenario's answers
/// compared with its reference's and tonight judged against its nights (`last`, in the order of
/// `results`; outside the family), and the overall verdict. `created_at`: the results' time
/// when it was fixed before measuring (`check --history`: the night's), else now.
pub fn gated_results(
    mut results: Vec<ScenarioResult>,
    inputs: &[gate::ScenarioSamples],
    base_figures: &BTreeMap<ScenarioName, BTreeMap<String, f64>>,
    last: Vec<Last>,
    id: &CheckId,
    policy: crate::verdict::BaselinePolicy,
    created_at: Option<String>,
) -> Results {
    let (checks, family) = gate::evaluate(inputs);
    for c in checks {
        if let Some(r) = results.iter_mut().find(|r| r.name == c.scenario) {
            r.checks.push(c);
        }
    }
    let mut last = last.into_iter();
    for r in results.iter_mut() {
        if r.status == Status::Compared {
            if let Some(why) = nothing_gated(&r.checks) {
                r.status = Status::Unmeasurable;
                r.status_detail = why;
            }
        }
        if let Some(base) = base_figures.get(&r.name) {
            let notes = super::server_notes::fail_notes(r, base);
            let kind = crate::results::NoteKind::ServerFigures;
            r.notes.extend(
                notes
                    .into_iter()
                    .map(|n| crate::results::Note::new(kind, n)),
            );
        }
        if let Some(n) = super::quality::tpot_fail_note(r) {
            r.notes.push(crate::results::Note::new(
                crate::results::NoteKind::ServerFigures,
                n,
            ));
        }
        let Last { answers, night } = last.next().unwrap_or_default();
        // the answers (gate.outputs), once the latency verdicts are known
        if let Some(a) = answers {
            super::outputs::settle(r, a);
        }
        // the nights, once the committed baseline's rows are known (they decide some of them)
        if let Some(n) = night {
            super::nightly::settle(r, n);
        }
    }
    let mut out = Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: created_at.unwrap_or_else(crate::clock::now_rfc3339),
        id: id.clone(),
        verdict: Overall::Pass,
        exit_code: exit::OK,
        family_size: family,
        // set by the caller once every measurement (and confirmation) is over
        incomplete: false,
        baseline_policy: policy,
        scenarios: results,
    };
    out.decide();
    out
}

/// What the judgement's last stage settles on a scenario once its latency verdicts are known.
#[derive(Debug, Default)]
pub struct Last {
    /// Its answers against its reference's (`gate.outputs`).
    pub answers: Option<super::outputs::Answers>,
    /// Tonight against its nights (`check --history`).
    pub night: Option<super::nightly::JudgedNight>,
}

/// `gate.confirm`, after re-run `i` of a scenario with a FAIL was judged (`rerun`): each FAIL of
/// `res` that the re-run repeats holds, one it does not becomes WARN, not confirmed
/// ([`gate::ReasonKind::NotConfirmed`]); a re-run that could not be compared is no evidence
/// against the FAILs. A note says which.
pub fn confirmed(res: &mut ScenarioResult, i: u32, rerun: &ScenarioResult) {
    use crate::results::{Note, NoteKind};
    use gate::Verdict;
    if rerun.status != Status::Compared {
        let why = if rerun.status_detail.is_empty() {
            crate::report::terminal::status_label(rerun.status)
        } else {
            &rerun.status_detail
        };
        res.notes.push(Note::new(NoteKind::Confirmation, format!(
            "confirmation re-run {i} could not be compared ({why}): no evidence against the FAIL, which holds"
        )));
        return;
    }
    let mut held = Vec::new();
    for c in res.checks.iter_mut().filter(|c| c.verdict == Verdict::Fail) {
        let same = rerun
            .checks
            .iter()
            .find(|x| x.metric == c.metric && x.kind == c.kind);
        let label = crate::report::fmt_check_name(c);
        match same {
            Some(x) if x.verdict == Verdict::Fail => held.push(format!(
                "{label} {} (FAIL, holds)",
                crate::report::fmt_change(x)
            )),
            None => held.push(format!("{label} not compared in the re-run (FAIL holds)")),
            Some(x) => {
                let got = format!("{} {}", crate::report::fmt_change(x), x.verdict.as_str());
                held.push(format!("{label} {got} (not confirmed)"));
                c.verdict = Verdict::Warn;
                c.reason_kind = gate::ReasonKind::NotConfirmed;
                c.reason = format!(
                    "not confirmed by re-run {i} ({got}); first run: {}",
                    c.reason
                );
            }
        }
    }
    res.notes.push(Note::new(
        NoteKind::Confirmation,
        format!("confirmation re-run {i}: {}", held.join("; ")),
    ));
}

/// Why a compared scenario's gate could not compare any latency, if it could not: it has
/// latency quantile checks (P50, P90, P99, ITL) and every one is INFO, not compared (a baseline
/// or run of one successful request, TPOT of 1-token streams). The share checks (errors,
/// tail>P90) do not count: they count failed requests as slow, so against a baseline of 19
/// failures in 20 they PASS whatever the latency. A gate that cannot compare never passes
/// silently: the scenario is then could-not-measure (exit 3), the first check's reason kept.
fn nothing_gated(checks: &[gate::Check]) -> Option<String> {
    use gate::{CheckKind, Verdict};
    let latency: Vec<&gate::Check> = checks
        .iter()
        .filter(|c| matches!(c.kind, CheckKind::Quantile(_) | CheckKind::ItlTail(_)))
        .collect();
    if latency.is_empty() || latency.iter().any(|c| c.verdict != Verdict::Info) {
        return None;
    }
    let first = latency
        .iter()
        .find(|c| c.kind == CheckKind::Quantile(crate::config::Quantile::P50))
        .unwrap_or(&latency[0]);
    Some(format!(
        "no latency check could compare, so nothing was gated ({} {}: {})",
        first.metric.map_or("-", |m| m.label()),
        first.kind.label(),
        first.reason
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{ReasonKind, Verdict};

    /// The fixture's `chat-long` scenario (one FAIL check).
    fn chat_long() -> ScenarioResult {
        let r = crate::results::fixture();
        r.scenarios
            .into_iter()
            .find(|s| s.name == "chat-long")
            .unwrap()
    }

    /// Issue 42: confirmation is a stage of the judgement, given the re-run's judgement.
    #[test]
    fn a_fail_a_rerun_does_not_repeat_is_a_warn_not_confirmed() {
        let first = chat_long();
        let fails = |r: &ScenarioResult| {
            r.checks
                .iter()
                .filter(|c| c.verdict == Verdict::Fail)
                .count()
        };
        assert_eq!(fails(&first), 1);
        let mut rerun = first.clone();
        for c in rerun.checks.iter_mut() {
            c.verdict = Verdict::Pass;
        }
        let mut res = first.clone();
        confirmed(&mut res, 1, &rerun);
        let c = res
            .checks
            .iter()
            .find(|c| c.verdict == Verdict::Warn && c.reason_kind == ReasonKind::NotConfirmed);
        assert!(
            c.unwrap().reason.starts_with("not confirmed by re-run 1 ("),
            "{:?}",
            c
        );
        assert_eq!(fails(&res), 0);
        let note = res.notes.last().unwrap();
        assert_eq!(note.kind, crate::results::NoteKind::Confirmation);
        assert!(
            note.text.starts_with("confirmation re-run 1: ")
                && note.text.ends_with("PASS (not confirmed)"),
            "{note}"
        );
        // a re-run that could not be compared: the FAIL holds, said in the status's words
        rerun.status = Status::Unmeasurable;
        rerun.status_detail.clear();
        let mut res = first.clone();
        confirmed(&mut res, 2, &rerun);
        assert_eq!(fails(&res), 1);
        assert_eq!(
            res.notes.last().unwrap().text,
            "confirmation re-run 2 could not be compared (COULD NOT MEASURE): no evidence against the FAIL, which holds"
        );
    }
}
