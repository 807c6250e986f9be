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
/// the baseline's or base arm's server-side figures by scenario), and the overall verdict.
pub fn gated_results(
    mut results: Vec<ScenarioResult>,
    inputs: &[gate::ScenarioSamples],
    base_figures: &BTreeMap<ScenarioName, BTreeMap<String, f64>>,
    id: &CheckId,
    policy: crate::verdict::BaselinePolicy,
) -> Results {
    let (checks, family) = gate::evaluate(inputs);
    for c in checks {
        if let Some(r) = results.iter_mut().find(|r| r.name == c.scenario) {
            r.checks.push(c);
        }
    }
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
    }
    let mut out = Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: crate::clock::now_rfc3339(),
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
