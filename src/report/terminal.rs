//! Plain-text report for the terminal and CI logs: one table per scenario with baseline,
//! candidate, change with CI, tolerance and verdict, then the overall verdict. Verdicts are
//! coloured only on a terminal ([`use_color`]: stdout is a TTY, `NO_COLOR` unset, `TERM` not
//! `dumb`); the text is otherwise identical. Every string taken from the results goes through
//! [`safe`] (a results file given to `perfgate report` may hold terminal escapes, workflow
//! commands or megabytes in one field).

use super::safe_text::field as safe;
use super::{fmt_baseline, fmt_change, fmt_check_name, fmt_ms, fmt_tolerance, fmt_value};
use crate::gate::Verdict;
use crate::results::{Results, Status};
use crate::summary::SummaryKey;
use crate::verdict::Overall;
use comfy_table::{presets, Table};
use std::fmt::Write;
use std::io::IsTerminal;

/// True when stdout is an interactive terminal and colour is not turned off (`NO_COLOR`, see
/// no-color.org; `TERM=dumb`).
pub fn use_color() -> bool {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    std::io::stdout().is_terminal()
        && var("NO_COLOR").is_none()
        && var("TERM").is_none_or(|t| t != "dumb")
}

/// The ANSI SGR code of a verdict: red, yellow, blue, green, dim.
fn sgr(v: Verdict) -> &'static str {
    match v {
        Verdict::Fail => "1;31",
        Verdict::Warn => "33",
        Verdict::Improved => "36",
        Verdict::Pass => "32",
        Verdict::Info => "2",
    }
}

/// `text` in the colour of `v` when `color`.
fn paint(text: &str, v: Verdict, color: bool) -> String {
    if color {
        format!("\x1b[{}m{text}\x1b[0m", sgr(v))
    } else {
        text.to_string()
    }
}

/// Colours the last occurrence of `word` in `line`.
fn paint_last(line: &str, word: &str, v: Verdict, color: bool) -> String {
    match line.rfind(word) {
        Some(i) if color => format!(
            "{}{}{}",
            &line[..i],
            paint(word, v, true),
            &line[i + word.len()..]
        ),
        _ => line.to_string(),
    }
}

/// Renders the whole report as plain text (logs, files, snapshots).
pub fn render(r: &Results) -> String {
    render_styled(r, false)
}

/// The check verdict whose colour the overall verdict is painted in: FAIL's for FAIL and
/// ERROR; none for NO_BASELINE and INTERRUPTED (printed plain).
fn overall_colour(verdict: Overall) -> Option<Verdict> {
    match verdict {
        Overall::Fail | Overall::Error => Some(Verdict::Fail),
        Overall::Warn => Some(Verdict::Warn),
        Overall::Improved => Some(Verdict::Improved),
        Overall::Pass => Some(Verdict::Pass),
        Overall::NoBaseline | Overall::Interrupted | Overall::Measured => None,
    }
}

/// Renders the whole report; with `color`, verdicts carry ANSI colours.
pub fn render_styled(r: &Results, color: bool) -> String {
    let mut out = String::new();
    for s in &r.scenarios {
        let m = &s.measured;
        let _ = writeln!(
            out,
            "\n== {}  ({} {} model {}, concurrency {}, {} requests, {} failed)",
            safe(&s.name),
            safe(&s.api),
            safe(&s.endpoint),
            safe(&s.model),
            s.concurrency,
            m.requests,
            m.failed
        );
        if let Some(b) = &s.baseline {
            let _ = writeln!(
                out,
                "   baseline {} from {} ({} requests, perfgate {})",
                safe(&b.path),
                safe(&b.created_at),
                b.requests,
                safe(&b.perfgate_version)
            );
        }
        if let Some(line) = crate::report::ab_line(s) {
            let _ = writeln!(out, "   {line}");
        }
        if s.status != Status::Compared {
            let _ = writeln!(
                out,
                "   {}: {}",
                status_label(s.status),
                safe(&s.status_detail)
            );
        }
        // Tails that cannot be judged at this n: one line, not a row per metric.
        let (info, shown): (Vec<&crate::gate::Check>, Vec<&crate::gate::Check>) = s
            .checks
            .iter()
            .partition(|c| c.verdict == crate::gate::Verdict::Info);
        if !shown.is_empty() {
            let mut t = Table::new();
            t.load_preset(presets::ASCII_BORDERS_ONLY_CONDENSED);
            t.set_header(vec![
                "check",
                crate::report::base_word(r),
                "candidate",
                "change [CI]",
                "tolerance",
                "verdict",
            ]);
            for c in &shown {
                t.add_row(vec![
                    fmt_check_name(c),
                    fmt_baseline(c),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    fmt_tolerance(c),
                    c.verdict.as_str().to_string(),
                ]);
            }
            // Header, separator, then one line per check in order (cells never wrap: the table
            // has no width limit), so the verdict of line i + 3 is that of check i.
            for (i, line) in t.to_string().lines().enumerate() {
                let line = match i.checked_sub(3).and_then(|k| shown.get(k)) {
                    Some(c) => paint_last(line, c.verdict.as_str(), c.verdict, color),
                    None => line.to_string(),
                };
                let _ = writeln!(out, "   {line}");
            }
            for c in shown.iter().filter(|c| reason_shown(c)) {
                let _ = writeln!(
                    out,
                    "   {} {}: {}",
                    paint(c.verdict.as_str(), c.verdict, color),
                    fmt_check_name(c),
                    safe(&c.reason)
                );
            }
            for line in crate::report::footnotes::notes(&shown) {
                let _ = writeln!(out, "   {line}");
            }
        }
        if let Some(line) = crate::report::info_line(&info, crate::report::base_word(r)) {
            let _ = writeln!(out, "   {line}");
        }
        let sm = |k: SummaryKey| m.summary.get(&k);
        if m.ok > 0 {
            let q = |k: SummaryKey, f: fn(&crate::summary::MetricSummary) -> f64| {
                sm(k).map(|s| fmt_ms(f(s))).unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                out,
                "   measured (sample quantiles): TTFT P50 {} P99 {} | TPOT P50 {} | ITL P50 {} P99 {} | {:.1} output tokens/s, {:.2} requests/s",
                q(SummaryKey::Ttft, |s| s.p50),
                q(SummaryKey::Ttft, |s| s.p99),
                q(SummaryKey::Tpot, |s| s.p50),
                q(SummaryKey::Itl, |s| s.p50),
                q(SummaryKey::Itl, |s| s.p99),
                m.output_tokens_per_s,
                m.requests_per_s
            );
        }
        for line in s.cache.iter().flat_map(crate::report::cache_lines) {
            let _ = writeln!(out, "   {line}");
        }
        if let Some(sp) = &s.speculative {
            let _ = writeln!(out, "   {}", crate::report::speculative_line(sp));
        }
        if let Some(st) = &s.structured {
            let _ = writeln!(out, "   {}", crate::report::structured_line(st));
        }
        if m.failed > 0 {
            let _ = writeln!(
                out,
                "   failures: {} (first: {})",
                crate::report::failure_classes(m),
                m.first_error.as_deref().map_or_else(|| "-".into(), safe)
            );
        }
        for n in &s.notes {
            let _ = writeln!(out, "   note: {}", safe(&n.text));
        }
        if let Some(ns) = &s.nightly {
            for line in crate::report::nightly_lines(ns) {
                let _ = writeln!(out, "   nights: {line}");
            }
        }
    }
    if let Some(line) = crate::report::footnotes::results_legend(r) {
        let _ = writeln!(out, "\n{line}");
    }
    if let Some(line) = crate::report::footnotes::results_tail_legend(r) {
        let _ = writeln!(out, "{line}");
    }
    let overall = overall_colour(r.verdict);
    if let Some(blind) = crate::report::drift_blind(r) {
        let _ = write!(
            out,
            "\nperfgate: {}",
            paint("WARNING", crate::gate::Verdict::Warn, color)
        );
        let _ = write!(out, ": {blind}");
    }
    let _ = writeln!(
        out,
        "\nperfgate: {} ({} FAIL, {} WARN, {} IMPROVED, {} PASS, {} INFO; Holm family of {} checks)",
        match overall {
            Some(v) => paint(r.verdict.as_str(), v, color),
            None => r.verdict.as_str().to_string(),
        },
        r.count(crate::gate::Verdict::Fail),
        r.count(crate::gate::Verdict::Warn),
        r.count(crate::gate::Verdict::Improved),
        r.count(crate::gate::Verdict::Pass),
        r.count(crate::gate::Verdict::Info),
        r.family_size
    );
    let without: Vec<String> = r
        .scenarios
        .iter()
        .filter(|s| {
            matches!(
                s.status,
                Status::NoBaseline | Status::Stale | Status::InvalidBaseline
            )
        })
        .map(|s| safe(&s.name))
        .collect();
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "perfgate: {} scenario(s) not compared for want of a usable baseline ({}): each one's reason above says what to do",
            without.len(),
            without.join(", ")
        );
    }
    out
}

/// A short label for a non-compared status.
/// Whether a row's reason is printed under the table: every verdict but PASS, whose row says it
/// all, except a nightly step's PASS, which says where tonight fell in the nights' band.
fn reason_shown(c: &crate::gate::Check) -> bool {
    c.verdict != Verdict::Pass || c.kind == crate::gate::CheckKind::ChangePoint
}

pub fn status_label(s: Status) -> &'static str {
    match s {
        Status::Compared => "compared",
        Status::NoBaseline => "NO BASELINE",
        Status::Stale => "STALE BASELINE",
        Status::InvalidBaseline => "INVALID BASELINE",
        Status::Unmeasurable => "COULD NOT MEASURE",
        Status::Misconfigured => "MISCONFIGURED",
        Status::LoadShard => "LOAD SHARD",
    }
}
