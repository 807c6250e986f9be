//! The validated `gate:` section: the gated metrics and quantiles, their tolerance bands and
//! absolute floors, alpha, the error-rate limit, confirmation re-runs, the opt-in ITL P99 check
//! and the `gate.slo` objectives ([`super::objective`]).

use super::objective::{build_slo, Objective};
use super::quantile::Quantile;
use crate::config::common::{bail, ensure, parse_metric, parse_quantile, At, Invalid, Named};
use crate::config::file::{RawBand, RawGate, RawNumber};
use crate::config::metric::Metric;
use crate::config::values::{parse_fraction, parse_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// Relative tolerance band (fractions: 0.10 = 10 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Band {
    /// Above this (and significant): WARN.
    pub warn: f64,
    /// Above this (and significant, and above `min_delta`): FAIL.
    pub fail: f64,
}

/// The validated `gate:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateSpec {
    /// Gated metrics.
    pub metrics: Vec<Metric>,
    /// Gated quantiles.
    pub quantiles: Vec<Quantile>,
    /// Band per (metric, quantile).
    pub bands: BTreeMap<(Metric, Quantile), Band>,
    /// Absolute floor per metric, ms.
    pub min_delta_ms: BTreeMap<Metric, f64>,
    /// Family-wise error rate for the whole check (Holm).
    pub alpha: f64,
    /// Highest acceptable share of failed requests (0..=1).
    pub max_error_rate: f64,
    /// Confirmation re-runs of a failing scenario (0 = none).
    pub confirm: u32,
    /// Absolute objectives (`gate.slo`), in the order metric, quantile; the error rate last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<Objective>,
    /// `itl` in `gate.metrics`: the pooled P99 of inter-token gaps is gated with this band
    /// (`gate.tolerances.itl_p99`; docs/gate.md "ITL P99"). `None`: not gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl: Option<Band>,
    /// `gate.cache.hit_rate`: the least prefix-cache hit rate (0..=1), checked on its own
    /// (docs/scenarios.md "Conversations"). `None`: a changed hit rate is only a drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hit_rate: Option<f64>,
    /// `gate.acceptance`: the speculative-decoding acceptance rate is gated; its value is the
    /// largest drop tolerated (absolute, 0.05 = 5 points; docs/gate.md "Acceptance rate").
    /// `None`: reported, not gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<f64>,
    /// `gate.cold_start`: the started server's time to ready and first token, gated against
    /// the baseline's starts (docs/gate.md "Cold start"). `None`: reported, not gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<super::ColdStartGate>,
    /// `gate.outputs` (temperature 0): compare the answers with the reference's, `perfgate ab`'s
    /// base arm or `check`'s baseline (docs/ab.md "Outputs that changed"); `false` turns it off. Left out of the serialized spec when on
    /// (the default), so fingerprints do not move.
    #[serde(skip_serializing_if = "is_on")]
    pub outputs: bool,
}

fn is_on(b: &bool) -> bool {
    *b
}

/// The default band of the ITL P99 check: warn 10 %, fail 20 % (docs/gate.md "ITL P99").
pub const ITL_BAND: Band = Band {
    warn: 0.10,
    fail: 0.20,
};

impl Default for GateSpec {
    /// The defaults (docs/gate.md): TTFT and TPOT at P50 and P99, bands 5/10 % (P50), 10/20 %
    /// (P90), 25/50 % (P99), min_delta 5 ms (TTFT) and 0.5 ms (TPOT), alpha 0.01,
    /// max_error_rate 0.
    fn default() -> Self {
        build_gate(&RawGate::default()).unwrap_or_else(|_| GateSpec {
            metrics: vec![Metric::Ttft, Metric::Tpot],
            quantiles: vec![Quantile::P50, Quantile::P99],
            bands: BTreeMap::new(),
            min_delta_ms: BTreeMap::new(),
            alpha: 0.01,
            max_error_rate: 0.0,
            confirm: 0,
            slo: Vec::new(),
            itl: None,
            cache_hit_rate: None,
            outputs: true,
            acceptance: None,
            cold_start: None,
        })
    }
}

impl GateSpec {
    /// Whether it checks absolute objectives that need no baseline: `gate.slo`, or
    /// `gate.cache.hit_rate`.
    pub fn has_objectives(&self) -> bool {
        !self.slo.is_empty() || self.cache_hit_rate.is_some()
    }
    /// The band for a metric and quantile.
    pub fn band(&self, m: Metric, q: Quantile) -> Band {
        self.bands.get(&(m, q)).copied().unwrap_or(default_band(q))
    }
    /// The absolute floor for a metric, ms.
    pub fn min_delta(&self, m: Metric) -> f64 {
        self.min_delta_ms.get(&m).copied().unwrap_or(0.0)
    }
}

/// The default band for a quantile (5 %/10 % for P50, 25 %/50 % for P99; docs/gate.md).
pub fn default_band(q: Quantile) -> Band {
    match q {
        Quantile::P50 => Band {
            warn: 0.05,
            fail: 0.10,
        },
        Quantile::P90 => Band {
            warn: 0.10,
            fail: 0.20,
        },
        Quantile::P99 => Band {
            warn: 0.25,
            fail: 0.50,
        },
    }
}

fn band_from(raw: &RawBand, base: Band, key: &str) -> Result<Band, Invalid> {
    let share = |v: &Option<RawNumber>, side: &str, or: f64| {
        let key = format!("gate.tolerances.{key}.{side}");
        Ok::<_, Invalid>(
            v.as_ref()
                .map(parse_fraction)
                .transpose()
                .at(key)?
                .unwrap_or(or),
        )
    };
    let b = Band {
        warn: share(&raw.warn, "warn", base.warn)?,
        fail: share(&raw.fail, "fail", base.fail)?,
    };
    ensure!(
        b.warn <= b.fail,
        "gate.tolerances.{key}: warn ({:.0}%) is above fail ({:.0}%)",
        b.warn * 100.0,
        b.fail * 100.0
    );
    Ok(b)
}

/// Why a metric or quantile is gated once.
const HOLM: &str = "a duplicate would add rows and inflate the Holm family";

/// The first value listed twice, if any.
fn first_duplicate<T: PartialEq + Copy>(v: &[T]) -> Option<T> {
    v.iter()
        .enumerate()
        .find(|(i, x)| v[..*i].contains(x))
        .map(|(_, x)| *x)
}

pub(super) fn build_gate(g: &RawGate) -> Result<GateSpec, Invalid> {
    let (metrics, itl_listed) = gated_metrics(g.metrics.as_deref())?;
    let quantiles = gated_quantiles(g.quantiles.as_deref())?;
    let tol = g.tolerances.clone().unwrap_or_default();
    check_tolerance_keys(&tol, itl_listed)?;
    let bands = bands(&tol)?;
    let min_delta_ms = min_deltas(g.min_delta.clone().unwrap_or_default())?;
    let alpha = g.alpha.unwrap_or(0.01);
    ensure!(alpha > 0.0 && alpha <= 0.2, "gate.alpha {} is outside (0, 0.2]: the default 0.01 fails an unchanged endpoint about 1% of the time", crate::units::Num(alpha));
    let slo = build_slo(g.slo.as_ref())?;
    // With an error-rate objective the SLO check judges failed requests (FAIL, exit 1), so by
    // default they do not stop the scenario as unmeasurable first.
    let default_max_error_rate = if slo.iter().any(|o| matches!(o, Objective::ErrorRate { .. })) {
        1.0
    } else {
        0.0
    };
    let max_error_rate = g
        .max_error_rate
        .as_ref()
        .map(parse_fraction)
        .transpose()
        .at("gate.max_error_rate")?
        .unwrap_or(default_max_error_rate);
    ensure!(
        max_error_rate <= 1.0,
        "gate.max_error_rate must be between 0% and 100%"
    );
    let confirm = g.confirm.unwrap_or(0);
    ensure!(
        confirm <= 5,
        "gate.confirm is {confirm}: use 0 to 5 confirmation runs"
    );
    let itl = match (itl_listed, tol.get("itl_p99")) {
        (false, _) => None,
        (true, None) => Some(ITL_BAND),
        (true, Some(r)) => Some(band_from(r, ITL_BAND, "itl_p99")?),
    };
    let cache_hit_rate = g
        .cache
        .as_ref()
        .map(|c| {
            c.hit_rate
                .as_ref()
                .ok_or_else(|| "gate.cache.hit_rate is missing: the least prefix-cache hit rate, e.g. \">= 40%\"".into())
                .and_then(parse_hit_rate)
        })
        .transpose()?;
    let acceptance = g
        .acceptance
        .as_ref()
        .map(|a| {
            a.max_drop
                .as_ref()
                .map(parse_fraction)
                .transpose()
                .at("gate.acceptance.max_drop")
                .map(|d| d.unwrap_or(DEFAULT_MAX_DROP))
        })
        .transpose()?;
    if let Some(d) = acceptance {
        ensure!(
            d < 1.0,
            "gate.acceptance.max_drop must be below 100%: it is the drop of the acceptance rate tolerated"
        );
    }
    let cold_start = g
        .cold_start
        .as_ref()
        .map(super::cold_start::build_cold_start)
        .transpose()?;
    Ok(GateSpec {
        metrics,
        quantiles,
        bands,
        min_delta_ms,
        alpha,
        max_error_rate,
        confirm,
        slo,
        itl,
        cache_hit_rate,
        outputs: g.outputs.unwrap_or(true),
        acceptance,
        cold_start,
    })
}

/// `gate.acceptance` without `max_drop`: a drop of 5 points of the acceptance rate is tolerated.
pub const DEFAULT_MAX_DROP: f64 = 0.05;

/// `gate.cache.hit_rate`: `">= 40%"`, `40%` or `0.4` (an optional `>=` first), above 0 and at
/// most 100 %.
fn parse_hit_rate(v: &RawNumber) -> Result<f64, Invalid> {
    let v = match v {
        RawNumber::Text(t) => {
            let t = t.trim();
            let share = t.strip_prefix(">=").unwrap_or(t).trim();
            ensure!(
                !share.is_empty() && !share.starts_with(['<', '>', '=']),
                "gate.cache.hit_rate `{t}`: it is the least hit rate, written \">= 40%\" (or 40%, 0.4)"
            );
            ensure!(
                !share.parse::<f64>().is_ok_and(|x| x > 1.0),
                "gate.cache.hit_rate `{t}`: write a share, \">= {share}%\" or 0.4"
            );
            RawNumber::Text(share.to_string())
        }
        RawNumber::Num(x) if *x > 1.0 => {
            bail!(
                "gate.cache.hit_rate is {}: write a share, 40% or 0.4",
                crate::units::Num(*x)
            )
        }
        n => n.clone(),
    };
    let x = parse_fraction(&v).at("gate.cache.hit_rate")?;
    ensure!(
        x > 0.0 && x <= 1.0,
        "gate.cache.hit_rate is {:.1}%: use above 0% up to 100%, e.g. \">= 40%\"",
        x * 100.0
    );
    Ok(x)
}

/// `gate.metrics`: the per-request metrics gated, and whether `itl` is listed.
fn gated_metrics(listed: Option<&[String]>) -> Result<(Vec<Metric>, bool), Invalid> {
    // `itl` is listed among the metrics but is not a per-request value: the pooled gaps of
    // every request are gated by their own check (gate::itl_check). Opt-in: the tail of the
    // gaps also measures the client's scheduling jitter, which drifts between runs on a busy
    // runner more than TPOT's run spread shows (docs/gate.md "ITL P99").
    let itl_listed = listed.is_some_and(|v| v.iter().any(|s| s == "itl"));
    ensure!(
        listed.is_none_or(|v| v.iter().filter(|s| *s == "itl").count() <= 1),
        "gate.metrics lists itl twice: each metric is gated once ({HOLM})"
    );
    let metrics = match listed {
        None => vec![Metric::Ttft, Metric::Tpot],
        Some(v) => v
            .iter()
            .filter(|s| *s != "itl")
            .map(|s| parse_metric(s))
            .collect::<Result<Vec<_>, _>>()?,
    };
    ensure!(!metrics.is_empty() || !itl_listed, "gate.metrics lists only itl: gate at least one of ttft, tpot, e2e beside it (the ITL tail alone would pass a server whose every request is slower to start)");
    ensure!(
        !metrics.is_empty(),
        "gate.metrics is empty: gate at least one of ttft, tpot, e2e"
    );
    if let Some(d) = first_duplicate(&metrics) {
        bail!(
            "gate.metrics lists {} twice: each metric is gated once ({HOLM})",
            d.as_str()
        );
    }
    Ok((metrics, itl_listed))
}

/// `gate.quantiles`: the quantiles gated.
fn gated_quantiles(listed: Option<&[String]>) -> Result<Vec<Quantile>, Invalid> {
    let quantiles = match listed {
        None => vec![Quantile::P50, Quantile::P99],
        Some(v) => v
            .iter()
            .map(|s| parse_quantile(s))
            .collect::<Result<Vec<_>, _>>()?,
    };
    ensure!(!quantiles.is_empty(), "gate.quantiles is empty: then only the error rate would be gated and a 10x slower server would pass; list at least p50 (default [p50, p99])");
    if let Some(d) = first_duplicate(&quantiles) {
        bail!(
            "gate.quantiles lists {} twice: each quantile is gated once ({HOLM})",
            d.as_str()
        );
    }
    Ok(quantiles)
}

/// Every key of `gate.tolerances` is a quantile, a metric's quantile, or `itl_p99` (with `itl`
/// listed among the metrics).
fn check_tolerance_keys(tol: &BTreeMap<String, RawBand>, itl_listed: bool) -> Result<(), Invalid> {
    for key in tol.keys() {
        if key == "itl_p99" {
            ensure!(itl_listed, "gate.tolerances.itl_p99 is set but gate.metrics does not list itl: add itl to gate.metrics to gate the ITL P99 (docs/gate.md \"ITL P99\")");
            continue;
        }
        let ok = match key.split_once('_') {
            None => parse_quantile(key).is_ok(),
            Some((m, q)) => parse_metric(m).is_ok() && parse_quantile(q).is_ok(),
        };
        ensure!(ok, "gate.tolerances: `{key}` is not a key: use p50, p90, p99, a metric-specific key like ttft_p50 or tpot_p99, or itl_p99");
    }
    Ok(())
}

/// The band of every (metric, quantile): the default, overridden by the quantile's key, then by
/// the metric's own key.
fn bands(tol: &BTreeMap<String, RawBand>) -> Result<BTreeMap<(Metric, Quantile), Band>, Invalid> {
    let mut bands = BTreeMap::new();
    for m in Metric::ALL {
        for &q in Quantile::ALL {
            let mut b = default_band(q);
            if let Some(r) = tol.get(q.as_str()) {
                b = band_from(r, b, q.as_str())?;
            }
            let specific = format!("{}_{}", m.as_str(), q.as_str());
            if let Some(r) = tol.get(&specific) {
                b = band_from(r, b, &specific)?;
            }
            bands.insert((m, q), b);
        }
    }
    Ok(bands)
}

/// `gate.min_delta`: the absolute floor of each metric, ms, over the defaults.
fn min_deltas(raw: BTreeMap<String, RawNumber>) -> Result<BTreeMap<Metric, f64>, Invalid> {
    let mut min_delta_ms: BTreeMap<Metric, f64> = Metric::ALL
        .into_iter()
        .map(|m| (m, m.default_min_delta_ms()))
        .collect();
    for (k, v) in raw {
        let m = parse_metric(&k)
            .map_err(|_| format!("gate.min_delta: `{k}` is not a metric: use ttft, tpot or e2e"))?;
        min_delta_ms.insert(m, parse_ms(&v).at(format!("gate.min_delta.{k}"))?);
    }
    Ok(min_delta_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itl_is_opt_in_and_listed_like_a_metric() {
        let gate = |g: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi, max_tokens: 4}}\n    gate: {g}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].gate.clone())
        };
        let d = gate("{}").unwrap();
        assert_eq!(d.itl, None);
        assert_eq!(d.metrics, vec![Metric::Ttft, Metric::Tpot]);
        let g = gate("{metrics: [ttft, tpot, itl]}").unwrap();
        assert_eq!(g.itl, Some(ITL_BAND));
        assert_eq!(g.metrics, vec![Metric::Ttft, Metric::Tpot]);
        let g = gate("{metrics: [tpot, itl], tolerances: {itl_p99: {fail: 30%}}}").unwrap();
        assert_eq!(g.metrics, vec![Metric::Tpot]);
        assert_eq!(
            g.itl,
            Some(Band {
                warn: 0.10,
                fail: 0.30
            })
        );
        for (bad, want) in [
            ("{metrics: [itl]}", "lists only itl"),
            ("{metrics: [ttft, itl, itl]}", "lists itl twice"),
            (
                "{metrics: [ttft], tolerances: {itl_p99: {fail: 30%}}}",
                "does not list itl",
            ),
            ("{metrics: [ttfb]}", "ttft, tpot, e2e or itl"),
        ] {
            let e = gate(bad).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
