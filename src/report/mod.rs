//! Renderers of the one [`crate::results::Results`] model: terminal text and markdown (the PR
//! comment body). Shared number formatting lives here so the renderers agree.

pub mod markdown;
pub mod terminal;

use crate::gate::{Check, CheckKind};

/// A value of a check in its unit: ms for latency quantiles, a percentage for shares.
pub fn fmt_value(c: &Check, v: Option<f64>) -> String {
    match (c.kind, v) {
        (_, None) => "-".into(),
        (CheckKind::Quantile(_), Some(x)) => fmt_ms(x),
        (_, Some(x)) => format!("{:.1}%", x * 100.0),
    }
}

/// Milliseconds with sensible precision (`8.12 ms`, `214 ms`, `1.93 s`).
pub fn fmt_ms(x: f64) -> String {
    if !x.is_finite() {
        "inf".into()
    } else if x >= 10_000.0 {
        format!("{:.2} s", x / 1000.0)
    } else if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 10.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.2} ms")
    }
}

/// The change column: `+30.1% [+25.0%, +35.2%]` for quantiles (ratio with its CI); the
/// difference in percentage points for shares (error rate, requests above the pooled P90).
pub fn fmt_change(c: &Check) -> String {
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    match (c.kind, c.ratio) {
        (CheckKind::ErrorRate, _) | (CheckKind::TailExceedance, _) => {
            match (c.baseline, c.candidate) {
                (Some(b), Some(x)) => format!("{:+.1} pp", (x - b) * 100.0),
                _ => "-".into(),
            }
        }
        (_, None) => "-".into(),
        (_, Some(r)) => {
            let ci = match c.ci {
                Some((lo, hi)) => format!(
                    " [{}, {}]",
                    lo.map(pct).unwrap_or_else(|| "?".into()),
                    hi.map(pct).unwrap_or_else(|| "?".into())
                ),
                None => String::new(),
            };
            format!("{}{ci}", pct(r))
        }
    }
}

/// The tolerance column: `5% / 10%, >0.50 ms`; a fail tolerance widened to the baseline's
/// run-to-run spread is marked `*`.
pub fn fmt_tolerance(c: &Check) -> String {
    let fail = match c.fail_configured {
        Some(_) => format!("{:.1}%*", c.fail * 100.0),
        None => format!("{:.0}%", c.fail * 100.0),
    };
    match c.kind {
        CheckKind::ErrorRate => "significant increase".into(),
        _ if c.min_delta_ms > 0.0 => format!(
            "{:.0}% / {fail}, >{}",
            c.warn * 100.0,
            fmt_ms(c.min_delta_ms)
        ),
        _ => format!("{:.0}% / {fail}", c.warn * 100.0),
    }
}

/// The metric column: `TTFT P50`, `errors`.
pub fn fmt_check_name(c: &Check) -> String {
    match c.metric {
        Some(m) => format!("{} {}", m.label(), c.kind.label()),
        None => c.kind.label().to_string(),
    }
}
