//! Plain-text report for the terminal and CI logs: one table per scenario with baseline,
//! candidate, change with CI, tolerance and verdict, then the overall verdict.

use super::{fmt_change, fmt_check_name, fmt_ms, fmt_tolerance, fmt_value};
use crate::results::{Results, Status};
use comfy_table::{presets, Table};
use std::fmt::Write;

/// Renders the whole report.
pub fn render(r: &Results) -> String {
    let mut out = String::new();
    for s in &r.scenarios {
        let m = &s.measured;
        let _ = writeln!(
            out,
            "\n== {}  ({} {} model {}, concurrency {}, {} requests, {} failed)",
            s.name, s.api, s.endpoint, s.model, s.concurrency, m.requests, m.failed
        );
        if let Some(b) = &s.baseline {
            let _ = writeln!(
                out,
                "   baseline {} from {} ({} requests, perfgate {})",
                b.path, b.created_at, b.requests, b.perfgate_version
            );
        }
        if s.status != Status::Compared {
            let _ = writeln!(out, "   {}: {}", status_label(s.status), s.status_detail);
        }
        if !s.checks.is_empty() {
            let mut t = Table::new();
            t.load_preset(presets::ASCII_BORDERS_ONLY_CONDENSED);
            t.set_header(vec![
                "check",
                "baseline",
                "candidate",
                "change [CI]",
                "tolerance",
                "verdict",
            ]);
            for c in &s.checks {
                t.add_row(vec![
                    fmt_check_name(c),
                    fmt_value(c, c.baseline),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    fmt_tolerance(c),
                    c.verdict.as_str().to_string(),
                ]);
            }
            for line in t.to_string().lines() {
                let _ = writeln!(out, "   {line}");
            }
            for c in s
                .checks
                .iter()
                .filter(|c| c.verdict != crate::gate::Verdict::Pass)
            {
                let _ = writeln!(
                    out,
                    "   {} {}: {}",
                    c.verdict.as_str(),
                    fmt_check_name(c),
                    c.reason
                );
            }
        }
        let sm = |k: &str| m.summary.get(k);
        if m.ok > 0 {
            let q = |k: &str, f: fn(&crate::baseline::MetricSummary) -> f64| {
                sm(k).map(|s| fmt_ms(f(s))).unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                out,
                "   measured (sample quantiles): TTFT P50 {} P99 {} | TPOT P50 {} | ITL P50 {} P99 {} | {:.1} output tokens/s, {:.2} requests/s",
                q("ttft_ms", |s| s.p50),
                q("ttft_ms", |s| s.p99),
                q("tpot_ms", |s| s.p50),
                q("itl_ms", |s| s.p50),
                q("itl_ms", |s| s.p99),
                m.output_tokens_per_s,
                m.requests_per_s
            );
        }
        if m.failed > 0 {
            let classes: Vec<String> = m
                .errors_by_class
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect();
            let _ = writeln!(
                out,
                "   failures: {} (first: {})",
                classes.join(", "),
                m.first_error.as_deref().unwrap_or("-")
            );
        }
        for n in &s.notes {
            let _ = writeln!(out, "   note: {n}");
        }
    }
    let _ = writeln!(
        out,
        "\nperfgate: {} ({} FAIL, {} WARN, {} IMPROVED, {} PASS, {} INFO; Holm family of {} checks)",
        r.verdict,
        r.count(crate::gate::Verdict::Fail),
        r.count(crate::gate::Verdict::Warn),
        r.count(crate::gate::Verdict::Improved),
        r.count(crate::gate::Verdict::Pass),
        r.count(crate::gate::Verdict::Info),
        r.family_size
    );
    let without: Vec<&str> = r
        .scenarios
        .iter()
        .filter(|s| {
            matches!(
                s.status,
                Status::NoBaseline | Status::Stale | Status::InvalidBaseline
            )
        })
        .map(|s| s.name.as_str())
        .collect();
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "perfgate: {} scenario(s) not compared for want of a usable baseline ({}): run `perfgate bless` and commit baselines/",
            without.len(),
            without.join(", ")
        );
    }
    out
}

/// A short label for a non-compared status.
pub fn status_label(s: Status) -> &'static str {
    match s {
        Status::Compared => "compared",
        Status::NoBaseline => "NO BASELINE",
        Status::Stale => "STALE BASELINE",
        Status::InvalidBaseline => "INVALID BASELINE",
        Status::Unmeasurable => "COULD NOT MEASURE",
        Status::Misconfigured => "MISCONFIGURED",
    }
}
