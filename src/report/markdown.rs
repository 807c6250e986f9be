//! Markdown report: the PR comment body and the step summary. First line is the hidden marker
//! `<!-- perfgate:ID -->`; then the verdict line, one summary table, and per-scenario details in
//! `<details>`. Text that came from a server or a file (error messages, model names, scenario
//! names) is escaped so it cannot inject markdown, HTML, mentions or links.

use super::{fmt_change, fmt_check_name, fmt_ms, fmt_tolerance, fmt_value};
use crate::gate::Verdict;
use crate::results::{Results, Status};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Escapes text for a markdown table cell or paragraph: HTML-significant characters become
/// entities, markdown punctuation is backslash-escaped, `@` cannot start a mention, and newlines
/// become spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '@' => out.push_str("&#64;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '!' | '~' | '{' | '}' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn emoji(v: Verdict) -> &'static str {
    match v {
        Verdict::Fail => "❌ FAIL",
        Verdict::Warn => "⚠️ WARN",
        Verdict::Improved => "🚀 IMPROVED",
        Verdict::Pass => "✅ PASS",
        Verdict::Info => "ℹ️ INFO",
    }
}

/// What the GitHub integration adds to the report; the default adds nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra {
    /// Link to the workflow run, whose page shows the full report (the step summary).
    pub run_url: Option<String>,
    /// The commit that was measured (hex).
    pub commit: Option<String>,
    /// Per baseline file path as in the results: the commit that last changed it (hex) and a
    /// link to that commit.
    pub baseline_commits: BTreeMap<String, (String, String)>,
    /// A line printed under the verdict line (plain text; escaped).
    pub note: Option<String>,
    /// The short form for size limits: only FAIL and WARN rows (FAIL first) and scenarios that
    /// were not compared, no per-scenario details.
    pub compact: bool,
    /// With `compact`: at most this many table rows; the rest are counted.
    pub max_rows: Option<usize>,
}

/// Renders the report with the marker for `results.id`.
pub fn render(r: &Results) -> String {
    render_with(r, &Extra::default())
}

fn short_sha(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// Renders the report with the marker for `results.id` and the GitHub context in `x`.
pub fn render_with(r: &Results, x: &Extra) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<!-- perfgate:{} -->", escape(&r.id));
    let head = match r.verdict.as_str() {
        "FAIL" => "❌ **perfgate: latency regression**",
        "ERROR" => "🛑 **perfgate: could not measure**",
        "INTERRUPTED" => "⏹️ **perfgate: interrupted, partial results**",
        "NO_BASELINE" => "ℹ️ **perfgate: no usable baseline**",
        "WARN" => "⚠️ **perfgate: no regression, with warnings**",
        _ => "✅ **perfgate: no regression**",
    };
    let _ = writeln!(
        o,
        "{head} — {} FAIL, {} WARN, {} IMPROVED, {} PASS over {} scenario(s); Holm family of {} checks\n",
        r.count(Verdict::Fail),
        r.count(Verdict::Warn),
        r.count(Verdict::Improved),
        r.count(Verdict::Pass),
        r.scenarios.len(),
        r.family_size
    );
    if let Some(n) = &x.note {
        let _ = writeln!(o, "{}\n", escape(n));
    }
    let _ = writeln!(
        o,
        "| scenario | check | baseline | candidate | change [CI] | verdict |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    // (sort key, row): FAIL rows first in the compact form.
    let mut rows: Vec<(u8, String)> = Vec::new();
    for s in &r.scenarios {
        if s.status != Status::Compared && s.checks.is_empty() {
            rows.push((
                0,
                format!(
                    "| {} | - | - | - | - | {} |",
                    escape(&s.name),
                    super::terminal::status_label(s.status)
                ),
            ));
            continue;
        }
        for c in s.checks.iter().filter(|c| c.verdict != Verdict::Info) {
            if x.compact && !matches!(c.verdict, Verdict::Fail | Verdict::Warn) {
                continue;
            }
            rows.push((
                u8::from(c.verdict != Verdict::Fail),
                format!(
                    "| {} | {} | {} | {} | {} | {} |",
                    escape(&s.name),
                    fmt_check_name(c),
                    fmt_value(c, c.baseline),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    emoji(c.verdict)
                ),
            ));
        }
    }
    if x.compact {
        rows.sort_by_key(|(k, _)| *k);
    }
    let shown = x.max_rows.filter(|_| x.compact).unwrap_or(usize::MAX);
    for (_, row) in rows.iter().take(shown) {
        let _ = writeln!(o, "{row}");
    }
    if x.compact {
        let omitted = rows.len().saturating_sub(shown);
        let passing = r.count(Verdict::Pass) + r.count(Verdict::Improved);
        let _ = writeln!(
            o,
            "\n{omitted} more FAIL/WARN row(s), {passing} PASS/IMPROVED row(s) and the per-scenario details are not shown here."
        );
        footer(&mut o, r, x);
        return o;
    }
    if let Some(c) = chart(r) {
        let _ = write!(o, "\n{c}");
    }
    for s in &r.scenarios {
        let _ = writeln!(
            o,
            "\n<details><summary>{}: {}</summary>\n",
            escape(&s.name),
            status_text(s)
        );
        let m = &s.measured;
        let _ = writeln!(
            o,
            "Endpoint `{}` ({}), model {}, concurrency {}; {} requests, {} failed; {:.1} output tokens/s.\n",
            s.endpoint.replace('`', "'"),
            escape(&s.api),
            escape(&s.model),
            s.concurrency,
            m.requests,
            m.failed,
            m.output_tokens_per_s
        );
        if let Some(b) = &s.baseline {
            let commit = match x.baseline_commits.get(&b.path) {
                Some((sha, url)) => format!(" (commit [`{}`]({url}))", short_sha(sha)),
                None => String::new(),
            };
            let _ = writeln!(
                o,
                "Baseline `{}`{commit}, blessed {} with perfgate {} ({} requests).\n",
                b.path.replace('`', "'"),
                escape(&b.created_at),
                escape(&b.perfgate_version),
                b.requests
            );
        }
        let (info, gated): (Vec<&crate::gate::Check>, Vec<&crate::gate::Check>) =
            s.checks.iter().partition(|c| c.verdict == Verdict::Info);
        if !gated.is_empty() {
            let _ = writeln!(o, "| check | baseline | candidate | change [CI] | tolerance | n (b/c) | verdict | why |");
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
            for c in &gated {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {}/{} | {} | {} |",
                    fmt_check_name(c),
                    fmt_value(c, c.baseline),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    fmt_tolerance(c),
                    c.n_baseline,
                    c.n_candidate,
                    emoji(c.verdict),
                    escape(&c.reason)
                );
            }
        }
        if let Some(line) = crate::report::info_line(&info) {
            let _ = writeln!(o, "\n{}", escape(&line));
        }
        if let Some(itl) = m.summary.get("itl_ms") {
            let _ = writeln!(
                o,
                "\nITL P50 {} / P99 {} (per event).",
                fmt_ms(itl.p50),
                fmt_ms(itl.p99)
            );
        }
        if let Some(e) = &m.first_error {
            let _ = writeln!(o, "\nFirst failure: {}", escape(e));
        }
        for n in &s.notes {
            let _ = writeln!(o, "\nNote: {}", escape(n));
        }
        let _ = writeln!(o, "\n</details>");
    }
    footer(&mut o, r, x);
    o
}

/// Scenarios drawn in the chart at most (two categories each).
const CHART_MAX_SCENARIOS: usize = 12;

/// A compact chart GitHub renders (mermaid `xychart-beta`): per gated metric (TTFT, TPOT,
/// E2E), the baseline (bars) and candidate (line) P50 and P99 of every scenario that has both,
/// from the same summaries as the tables. `None` when no scenario has both.
pub fn chart(r: &Results) -> Option<String> {
    use crate::config::Metric;
    let mut metrics: Vec<Metric> = Vec::new();
    for m in r
        .scenarios
        .iter()
        .flat_map(|s| s.checks.iter().filter_map(|c| c.metric))
    {
        if !metrics.contains(&m) {
            metrics.push(m);
        }
    }
    metrics.sort();
    let mut out = String::new();
    for m in metrics {
        let key = format!("{}_ms", m.as_str());
        let mut cats = Vec::new();
        let (mut base, mut cand) = (Vec::new(), Vec::new());
        for s in r.scenarios.iter().take(CHART_MAX_SCENARIOS) {
            let b = s.baseline.as_ref().and_then(|b| b.summary.get(&key));
            let c = s.measured.summary.get(&key);
            let (Some(b), Some(c)) = (b, c) else { continue };
            // Names are [A-Za-z0-9._-]; keep the label safe inside mermaid's quotes anyway.
            let name: String = s
                .name
                .chars()
                .filter(|ch| ch.is_ascii_alphanumeric() || "._-".contains(*ch))
                .collect();
            for (q, bv, cv) in [("P50", b.p50, c.p50), ("P99", b.p99, c.p99)] {
                cats.push(format!("\"{name} {q}\""));
                base.push(format!("{:.2}", bv));
                cand.push(format!("{:.2}", cv));
            }
        }
        if cats.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "```mermaid\nxychart-beta\n    title \"{} in ms: baseline = bars, candidate = line\"\n    x-axis [{}]\n    y-axis \"{} (ms)\"\n    bar [{}]\n    line [{}]\n```",
            m.label(),
            cats.join(", "),
            m.label(),
            base.join(", "),
            cand.join(", ")
        );
    }
    let skipped = r.scenarios.len().saturating_sub(CHART_MAX_SCENARIOS);
    if skipped > 0 && !out.is_empty() {
        let _ = writeln!(
            out,
            "\nThe chart shows the first {CHART_MAX_SCENARIOS} scenarios; {skipped} more are in the table."
        );
    }
    (!out.is_empty()).then_some(out)
}

/// The run link and the measured commit, when known.
fn footer(o: &mut String, r: &Results, x: &Extra) {
    let mut parts = Vec::new();
    if let Some(u) = &x.run_url {
        parts.push(format!("[workflow run]({u})"));
    }
    if let Some(c) = &x.commit {
        parts.push(format!("commit `{}`", short_sha(c)));
    }
    if parts.is_empty() {
        return;
    }
    parts.push(format!("perfgate {}", escape(&r.perfgate_version)));
    let _ = writeln!(o, "\n{}", parts.join(" · "));
}

fn status_text(s: &crate::results::ScenarioResult) -> String {
    match s.status {
        Status::Compared => s.worst().map(emoji).unwrap_or("✅ PASS").to_string(),
        other => format!(
            "{}: {}",
            super::terminal::status_label(other),
            escape(&s.status_detail)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn hostile_text_cannot_break_out() {
        let e = escape("<img src=x onerror=alert(1)> @admin [link](http://evil) ```\n</details>|");
        assert!(!e.contains('<') && !e.contains('\n'));
        assert!(!e.contains("@admin"));
        assert!(e.contains("\\[link\\]\\(http://evil\\)"));
        assert!(e.contains("\\`\\`\\`"));
        assert!(e.ends_with("\\|"));
    }
}
