//! `gate.confirm: N`: re-measures a scenario with a FAIL and keeps only the FAILs every re-run
//! repeats.

use crate::compare::{compare, Baselines, CheckOptions};
use crate::config::Scenario;
use crate::gate::Verdict;
use crate::results::{Results, Status};

/// `gate.confirm: N`: a scenario with a FAIL is measured N more times; each FAIL holds only if
/// the same check fails in every re-run (compared with the same baseline), otherwise it becomes
/// WARN "not confirmed". The report lists each re-run. Only the candidate is re-measured, so a
/// baseline that was itself unlucky is not refreshed: bless with --runs for that.
pub(super) async fn confirm_failures(
    scenarios: &[Scenario],
    baselines: &Baselines,
    opts: &CheckOptions,
    results: &mut Results,
) {
    for sc in scenarios.iter().filter(|s| s.gate.confirm > 0) {
        let Some(idx) = results.scenarios.iter().position(|r| r.name == sc.name) else {
            continue;
        };
        if !results.scenarios[idx]
            .checks
            .iter()
            .any(|c| c.verdict == Verdict::Fail)
        {
            continue;
        }
        for i in 1..=sc.gate.confirm {
            eprintln!(
                "perfgate: confirming {} (re-run {i} of {})",
                sc.name, sc.gate.confirm
            );
            let again = crate::execute::measure(sc, opts.progress.clone()).await;
            let re = compare(std::slice::from_ref(sc), vec![again], baselines, opts);
            let Some(r) = re.scenarios.into_iter().next() else {
                continue;
            };
            let res = &mut results.scenarios[idx];
            if r.status != Status::Compared {
                // A re-run that could not measure is no evidence against the FAIL.
                let why = if r.status_detail.is_empty() {
                    format!("{:?}", r.status)
                } else {
                    r.status_detail.clone()
                };
                res.notes.push(format!(
                    "confirmation re-run {i} could not be compared ({why}): no evidence against the FAIL, which holds"
                ));
                continue;
            }
            let mut held = Vec::new();
            for c in res.checks.iter_mut().filter(|c| c.verdict == Verdict::Fail) {
                let same = r
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
                        let got =
                            format!("{} {}", crate::report::fmt_change(x), x.verdict.as_str());
                        held.push(format!("{label} {got} (not confirmed)"));
                        c.verdict = Verdict::Warn;
                        c.reason = format!(
                            "not confirmed by re-run {i} ({got}); first run: {}",
                            c.reason
                        );
                    }
                }
            }
            res.notes
                .push(format!("confirmation re-run {i}: {}", held.join("; ")));
            if !res.checks.iter().any(|c| c.verdict == Verdict::Fail) {
                break;
            }
        }
    }
    // The overall verdict may have changed: decided again over every scenario.
    results.decide();
}
