//! `gate.slo`: absolute objectives (a latency quantile at most a time, the error rate at most a
//! share), checked with or without a baseline.

use super::quantile::Quantile;
use crate::config::common::{bail, ensure, parse_metric, parse_quantile, At, Invalid};
use crate::config::metric::Metric;
use crate::config::values::{parse_fraction, parse_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// One absolute objective of `gate.slo`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Objective {
    /// The quantile of a latency metric is at most `max_ms`.
    Latency {
        metric: Metric,
        quantile: Quantile,
        max_ms: f64,
    },
    /// The share of failed requests is at most `max` (0..=1).
    ErrorRate { max: f64 },
}

impl Objective {
    /// The key as written: `ttft_p90`, `error_rate`.
    pub fn key(&self) -> String {
        match self {
            Objective::Latency {
                metric, quantile, ..
            } => format!("{}_{}", metric.as_str(), quantile.as_str()),
            Objective::ErrorRate { .. } => "error_rate".into(),
        }
    }
}

/// `gate.slo`: keys `<metric>_<quantile>` (ttft, tpot, e2e; p50, p90, p99) with a time
/// (`500ms`, `2s`), and `error_rate` with a share (`1%`).
pub(super) fn build_slo(
    raw: Option<&BTreeMap<String, crate::config::file::RawNumber>>,
) -> Result<Vec<Objective>, Invalid> {
    let mut out = Vec::new();
    for (k, v) in raw.into_iter().flatten() {
        if k == "error_rate" {
            let max = parse_fraction(v).at("gate.slo.error_rate")?;
            // P(Bin(n, 0) <= 0) is 1 at every n: no run can show a 0 % objective met, so it
            // could only ever WARN or FAIL (it used to PASS at 0 failures, inconsistently).
            ensure!(max != 0.0, "gate.slo.error_rate is 0%: no number of requests can show a 0% objective met (any share above 0 could explain 0 failures), so it could never PASS; to make any failed request stop the gate, leave error_rate out (gate.max_error_rate defaults to 0%: one failure is could-not-measure, exit 3), or set a share the endpoint must stay below, e.g. 1%");
            ensure!(
                (0.0..1.0).contains(&max),
                "gate.slo.error_rate is {:.1}%: use above 0% up to (not including) 100%",
                max * 100.0
            );
            out.push(Objective::ErrorRate { max });
            continue;
        }
        let parsed = k
            .split_once('_')
            .and_then(|(m, q)| Some((parse_metric(m).ok()?, parse_quantile(q).ok()?)));
        let Some((metric, quantile)) = parsed else {
            bail!("gate.slo: `{k}` is not an objective: use <metric>_<quantile> (metric ttft, tpot or e2e; quantile p50, p90 or p99), e.g. ttft_p90: 500ms, or error_rate: 1%");
        };
        let max_ms = parse_ms(v).at(format!("gate.slo.{k}"))?;
        ensure!(
            max_ms > 0.0 && max_ms.is_finite(),
            "gate.slo.{k} must be a time above 0, e.g. 500ms"
        );
        out.push(Objective::Latency {
            metric,
            quantile,
            max_ms,
        });
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    Ok(out)
}
