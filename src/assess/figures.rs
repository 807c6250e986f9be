//! The measured figures of a run (throughput, achieved concurrency, the open-loop schedule),
//! shared by the check and bless reports.

use crate::baseline::{self, BaselineRecord};
use crate::record::{FailureClass, RequestRecord};
use crate::results::{measured_summary, Measured};
use crate::runner::RunOutput;
use std::collections::BTreeMap;

/// Measured figures of a run (shared by check and bless reports).
pub fn measured(run: &RunOutput) -> Measured {
    let recs = &run.records;
    let ok: Vec<&RequestRecord> = recs.iter().filter(|r| r.ok()).collect();
    let mut by_class: BTreeMap<FailureClass, usize> = BTreeMap::new();
    for e in recs.iter().filter_map(|r| r.error.as_ref()) {
        *by_class.entry(e.class).or_default() += 1;
    }
    let wall_s = (run.wall_ms / 1000.0).max(1e-9);
    let out_tokens: f64 = ok
        .iter()
        .filter_map(|r| r.output_tokens)
        .map(|t| t as f64)
        .sum();
    let brecs: Vec<BaselineRecord> = recs.iter().map(BaselineRecord::from_record).collect();
    let mut outs: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.output_tokens.map(|x| x as f64))
        .collect();
    outs.sort_by(f64::total_cmp);
    let sched = crate::results::schedule_summaries(recs);
    let stopped = recs.iter().filter(|r| r.stopped()).count();
    Measured {
        requests: recs.len(),
        ok: ok.len(),
        failed: recs.len() - ok.len() - stopped,
        stopped,
        errors_by_class: by_class,
        first_error: run.unreachable.clone().or_else(|| {
            recs.iter()
                .filter(|r| r.failed())
                .find_map(|r| r.error.as_ref().map(|e| e.message.clone()))
        }),
        wall_ms: crate::units::round3(run.wall_ms),
        // + 0.0: never a negative zero (`-0.0 output tokens/s`) when nothing was measured
        output_tokens_per_s: crate::units::round3(out_tokens / wall_s) + 0.0,
        requests_per_s: crate::units::round3(ok.len() as f64 / wall_s),
        summary: measured_summary(recs),
        token_source: baseline::token_source_of(&brecs),
        output_tokens_p50: crate::stats::quantile::quantile_type7(&outs, 0.5),
        prompt_tokens_p50: {
            let mut p: Vec<f64> = ok
                .iter()
                .filter_map(|r| r.prompt_tokens.map(|t| t as f64))
                .collect();
            p.sort_by(f64::total_cmp);
            crate::stats::quantile::quantile_type7(&p, 0.5)
        },
        model: run.model.clone(),
        server: run.server.clone(),
        achieved_concurrency: achieved_concurrency(recs, run.wall_ms),
        target_rate: None,
        schedule_delay_ms: sched.delay,
        ttft_from_schedule_ms: sched.ttft_from_schedule,
        e2e_from_schedule_ms: sched.e2e_from_schedule,
        client_lag_ms: run.client_lag.clone(),
    }
}

/// Mean requests in flight: the sum of request durations (send to stream close, or to the last
/// event) over the wall time of the measured phase. `None` without records.
pub fn achieved_concurrency(recs: &[RequestRecord], wall_ms: f64) -> Option<f64> {
    if recs.is_empty() || wall_ms <= 0.0 {
        return None;
    }
    let busy: f64 = recs.iter().filter_map(|r| r.t_done_ms.or(r.e2e_ms)).sum();
    Some(crate::units::round3(busy / wall_ms))
}
