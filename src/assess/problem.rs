//! Why a measured run cannot be compared at all, whatever it would be compared with.

use super::UnlistedModel;
use crate::config::Scenario;
use crate::results::Status;
use crate::runner::RunOutput;

/// Why a measured run cannot be compared, if it cannot: every request rejected as unauthorised
/// or not found (misconfigured), the endpoint unreachable or dropping requests, a model the
/// server does not list under `--require-listed-model`, or no successful request. `m` is the
/// run's [`super::measured`] figures.
pub fn run_problem(
    sc: &Scenario,
    run: &RunOutput,
    m: &crate::results::Measured,
    unlisted_model: UnlistedModel,
) -> Option<(Status, String)> {
    if m.ok == 0 && misconfigured(run) {
        // Every request was refused as unauthorised or not found: the scenario is wrong,
        // not the server slow (tests/cases/35-base-url-joining.yaml).
        let first = run
            .records
            .iter()
            .chain(&run.warmup_records)
            .find_map(|r| r.error.as_ref().map(|e| e.message.clone()));
        Some((
            Status::Misconfigured,
            format!("every request was rejected: {}", first.unwrap_or_default()),
        ))
    } else if let Some(why) = &run.unreachable {
        Some((
            Status::Unmeasurable,
            format!("{why}{}", not_ready_hint(sc, run)),
        ))
    } else if let Some(why) = run.resent_problem() {
        Some((Status::Unmeasurable, why))
    } else if let (UnlistedModel::Refuse, Some(why)) = (
        unlisted_model,
        crate::client::models::unlisted_note(&sc.endpoint.model, run.listed_models.as_deref()),
    ) {
        // --require-listed-model: a model the server does not list is a configuration error.
        Some((
            Status::Misconfigured,
            format!("{why} (--require-listed-model)"),
        ))
    } else if m.requests == 0 {
        Some((
            Status::Unmeasurable,
            "no measured request was sent (the run stopped before this one began)".to_string(),
        ))
    } else if m.ok == 0 && m.failed == 0 {
        // a stop is not a failure, but it has no latency of the workload to compare
        let first = run
            .records
            .iter()
            .filter(|r| r.stopped())
            .find_map(|r| r.error.as_ref().map(|e| e.message.clone()));
        Some((
            Status::Unmeasurable,
            format!(
                "every request was stopped by the provider on purpose (a refusal or a content filter), so no latency of the workload was measured; first: {}",
                first.as_deref().unwrap_or("(no reason recorded)")
            ),
        ))
    } else if m.ok == 0 {
        Some((
            Status::Unmeasurable,
            format!(
                "every request failed; first: {}{}",
                m.first_error.as_deref().unwrap_or("(no reason recorded)"),
                not_ready_hint(sc, run)
            ),
        ))
    } else {
        None
    }
}

/// True when every failure is an HTTP 401/403/404/405: a wrong key or URL, not a slow server.
fn misconfigured(run: &RunOutput) -> bool {
    let recs = if run.records.is_empty() {
        &run.warmup_records
    } else {
        &run.records
    };
    !recs.is_empty()
        && recs.iter().all(|r| {
            r.error.as_ref().is_some_and(|e| {
                e.class == crate::record::FailureClass::HttpStatus
                    && matches!(e.status, Some(401 | 403 | 404 | 405))
            })
        })
}

/// When every request was refused at connect or answered 503 (a server still loading its
/// model looks like this) and perfgate was not told to wait: how to make it wait. Empty
/// otherwise (a `server:` block or `endpoint.wait_ready` already waits).
fn not_ready_hint(sc: &Scenario, run: &RunOutput) -> String {
    use crate::record::FailureClass;
    if sc.server.is_some() || sc.endpoint.wait_ready.is_some() {
        return String::new();
    }
    let mut errors = run
        .records
        .iter()
        .chain(&run.warmup_records)
        .filter_map(|r| r.error.as_ref())
        .peekable();
    let not_ready = errors.peek().is_some()
        && errors.all(|e| {
            matches!(
                e.class,
                FailureClass::Connect | FailureClass::TimeoutConnect
            ) || (e.class == FailureClass::HttpStatus && e.status == Some(503))
        });
    if not_ready {
        " (if the server is still starting or loading its model, set endpoint.wait_ready, e.g. `wait_ready: 5m`, and perfgate waits until GET <base_url>/models answers before measuring)".to_string()
    } else {
        String::new()
    }
}
