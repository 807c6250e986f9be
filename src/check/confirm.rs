//! `gate.confirm: N`: re-measures a scenario with a FAIL and keeps only the FAILs every re-run
//! repeats.

use crate::compare::{compare, Baselines, CheckOptions};
use crate::config::Scenario;
use crate::gate::Verdict;
use crate::results::Results;

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
            crate::assess::gated::confirmed(res, i, &r);
            if !res.checks.iter().any(|c| c.verdict == Verdict::Fail) {
                break;
            }
        }
    }
    // The overall verdict may have changed: decided again over every scenario.
    results.decide();
}
