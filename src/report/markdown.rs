//! Markdown report: the PR comment body and the step summary. First line is the hidden marker
//! `<!-- perfgate:ID -->`; then the verdict line, the FAIL and WARN rows, a legend, every row in a
//! collapsed `<details>`, a chart of the gated quantiles, and per-scenario details in
//! `<details>`. Text that came from a server or a file (error messages, model names, scenario
//! names) is escaped so it cannot inject markdown, HTML, mentions or links.

use super::escape::markdown as escape;
use super::{fmt_baseline, fmt_change, fmt_check_name, fmt_ms, fmt_n, fmt_tolerance, fmt_value};
use crate::gate::Verdict;
use crate::results::{Results, Status};
use crate::summary::SummaryKey;
use crate::verdict::Overall;
use std::collections::BTreeMap;
use std::fmt::Write;

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

/// The nightly series of `check --history`: one sparkline line per scenario and metric.
fn nightly(o: &mut String, r: &Results) {
    let with: Vec<&crate::results::ScenarioResult> =
        r.scenarios.iter().filter(|s| s.nightly.is_some()).collect();
    let Some(first) = with.first().and_then(|s| s.nightly.as_ref()) else {
        return;
    };
    let _ = writeln!(
        o,
        "\n**Nightly history** (branch `{}`; each night's P50, tonight last):\n",
        first.branch.replace('`', "'")
    );
    for s in with {
        for line in s
            .nightly
            .as_ref()
            .map(crate::report::nightly_lines)
            .unwrap_or_default()
        {
            let _ = writeln!(o, "- {}: {}", escape(&s.name), escape(&line));
        }
    }
}

/// The report's first line for the overall verdict.
fn headline(verdict: Overall) -> &'static str {
    match verdict {
        Overall::Fail => "❌ **perfgate: latency regression**",
        Overall::Error => "🛑 **perfgate: could not measure**",
        Overall::Interrupted => "⏹️ **perfgate: interrupted, partial results**",
        Overall::NoBaseline => "ℹ️ **perfgate: no usable baseline**",
        Overall::Warn => "⚠️ **perfgate: no regression, with warnings**",
        Overall::Improved | Overall::Pass => "✅ **perfgate: no regression**",
        Overall::Measured => "ℹ️ **perfgate: measured as a load shard, not gated**",
    }
}

/// Each scenario's workload drift notes (what was not compared, and why), by scenario name.
fn drift_notes(r: &Results) -> Vec<(&str, &str)> {
    r.scenarios
        .iter()
        .flat_map(|s| {
            s.notes
                .iter()
                .filter(|n| n.kind == crate::results::NoteKind::WorkloadDrift)
                .map(move |n| (s.name.as_str(), n.text.as_str()))
        })
        .collect()
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
    let word = crate::report::base_word(r);
    let _ = writeln!(o, "<!-- perfgate:{} -->", escape(r.id.as_str()));
    let drifted = drift_notes(r);
    let head = match (r.verdict, crate::report::drift_blind(r)) {
        (Overall::Pass | Overall::Improved | Overall::Warn, Some(_)) => {
            "⚠️ **perfgate: no regression found, but this runner's drift hides small ones**"
        }
        (Overall::Pass | Overall::Improved, None) if !drifted.is_empty() => {
            "⚠️ **perfgate: no regression found, but some metrics were not compared**"
        }
        (v, _) => headline(v),
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
    if let Some(blind) = crate::report::drift_blind(r) {
        let _ = writeln!(o, "⚠️ **{}**\n", escape(&blind));
    }
    if let Some(n) = &x.note {
        let _ = writeln!(o, "{}\n", escape(n));
    }
    // perfgate's own words, numbers and A/B letters only: nothing to escape
    if let Some(line) = crate::report::ab_summary(r) {
        let _ = writeln!(o, "{line}.\n");
    }
    // Lead with what needs a reviewer: FAIL rows, then WARN rows, then scenarios that were not
    // compared; every row, in scenario order, follows inside a collapsed `<details>`.
    let rows = table_rows(r);
    let mut attention: Vec<&Row> = rows.iter().filter(|row| row.rank < 3).collect();
    attention.sort_by_key(|row| row.rank);
    let shown = x.max_rows.filter(|_| x.compact).unwrap_or(usize::MAX);
    if attention.is_empty() {
        let _ = writeln!(o, "No check failed or warned.");
    } else {
        let _ = writeln!(o, "{}", table_head(word));
        for row in attention.iter().take(shown) {
            let _ = writeln!(o, "{}", row.text);
        }
    }
    // what the workload drift took out of the gate (a prefix cache switched off, another
    // tokenizer) is in front of the reviewer, not only inside the scenario's details
    for (name, note) in &drifted {
        let _ = writeln!(o, "\n⚠️ {}: {}", escape(name), escape(note));
    }
    if x.compact {
        let omitted = attention.len().saturating_sub(shown);
        let passing = r.count(Verdict::Pass) + r.count(Verdict::Improved);
        let _ = writeln!(
            o,
            "\n{omitted} more FAIL/WARN row(s), {passing} PASS/IMPROVED row(s) and the per-scenario details are not shown here."
        );
        footer(&mut o, r, x);
        return o;
    }
    if !rows.is_empty() {
        let _ = writeln!(o, "\n{}", legend(&rows, r));
        for s in &r.scenarios {
            let checks: Vec<&crate::gate::Check> = s.checks.iter().collect();
            for line in crate::report::footnotes::notes(&checks) {
                let _ = writeln!(o, "- {}: {}", escape(&s.name), escape(&line));
            }
        }
    }
    let _ = writeln!(
        o,
        "\n<details><summary>All {} check(s) of {} scenario(s)</summary>\n\n{}",
        rows.iter().filter(|row| row.rank != 2).count(),
        r.scenarios.len(),
        table_head(word)
    );
    for row in &rows {
        let _ = writeln!(o, "{}", row.text);
    }
    let _ = writeln!(o, "\n</details>");
    if let Some(c) = chart(r) {
        let _ = write!(o, "\n{c}");
    }
    nightly(&mut o, r);
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
        if let Some(line) = crate::report::ab_line(s) {
            let _ = writeln!(o, "{}.\n", escape(&line));
        }
        for line in s.cache.iter().flat_map(crate::report::cache_lines) {
            let _ = writeln!(o, "{}.\n", escape(&line));
        }
        if let Some(sp) = &s.speculative {
            let _ = writeln!(o, "{}.\n", escape(&crate::report::speculative_line(sp)));
        }
        if let Some(st) = &s.structured {
            let _ = writeln!(o, "{}.\n", escape(&crate::report::structured_line(st)));
        }
        let (info, gated): (Vec<&crate::gate::Check>, Vec<&crate::gate::Check>) =
            s.checks.iter().partition(|c| c.verdict == Verdict::Info);
        if !gated.is_empty() {
            let _ = writeln!(o, "| check | {word} | candidate | change [CI] | tolerance | n (b/c) | verdict | why |");
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
            for c in &gated {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    fmt_check_name(c),
                    fmt_baseline(c),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    fmt_tolerance(c),
                    fmt_n(c),
                    emoji(c.verdict),
                    escape(&c.reason)
                );
            }
            for line in crate::report::footnotes::notes(&gated) {
                let _ = writeln!(o, "\n{}", escape(&line));
            }
        }
        if let Some(line) = crate::report::info_line(&info, crate::report::base_word(r)) {
            let _ = writeln!(o, "\n{}", escape(&line));
        }
        if let Some(itl) = m.summary.get(&SummaryKey::Itl) {
            let _ = writeln!(
                o,
                "\nITL P50 {} / P99 {} (per event).",
                fmt_ms(itl.p50),
                fmt_ms(itl.p99)
            );
        }
        // The reason's further lines (a server's log lines), one per line, under the summary
        // that shows its first.
        let more: Vec<&str> = s.status_detail.lines().skip(1).collect();
        if !more.is_empty() {
            let _ = writeln!(o);
            for l in more.iter().take(40) {
                let _ = writeln!(
                    o,
                    "- {}",
                    escape(&runner_text(l.trim_start_matches([' ', '|'])))
                );
            }
        }
        if let Some(e) = &m.first_error {
            let _ = writeln!(o, "\nFirst failure: {}", escape(&runner_text(e)));
        }
        for n in &s.notes {
            let _ = writeln!(o, "\nNote: {}", escape(&runner_text(&n.text)));
        }
        let _ = writeln!(o, "\n</details>");
    }
    footer(&mut o, r, x);
    o
}

/// The summary table's head; `word` is `baseline` or `base` ([`crate::report::base_word`]).
fn table_head(word: &str) -> String {
    format!("| scenario | check | {word} | candidate | change [CI] | verdict |\n|---|---|---|---|---|---|")
}

/// One row of the summary table.
struct Row {
    /// 0 FAIL, 1 WARN, 2 a scenario that was not compared, 3 anything else.
    rank: u8,
    text: String,
    /// Which explanations in the legend this row needs.
    explained: Option<Legend>,
}

/// What the legend under the table explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Legend {
    tail: bool,
    open_ci: bool,
    slo: bool,
    itl: bool,
}

/// The summary table's rows in scenario order: gated checks (INFO ones are in the details) and
/// one row for each scenario that was not compared.
fn table_rows(r: &Results) -> Vec<Row> {
    let mut rows = Vec::new();
    for s in &r.scenarios {
        if s.status != Status::Compared && s.checks.is_empty() {
            rows.push(Row {
                rank: 2,
                text: format!(
                    "| {} | - | - | - | - | {} |",
                    escape(&s.name),
                    super::terminal::status_label(s.status)
                ),
                explained: None,
            });
            continue;
        }
        for c in s.checks.iter().filter(|c| c.verdict != Verdict::Info) {
            let change = fmt_change(c);
            let tail = c.kind == crate::gate::CheckKind::TailExceedance;
            let open_ci = change.contains('?');
            let slo = c.kind.is_slo();
            let itl = matches!(c.kind, crate::gate::CheckKind::ItlTail(_));
            rows.push(Row {
                rank: match c.verdict {
                    Verdict::Fail => 0,
                    Verdict::Warn => 1,
                    _ => 3,
                },
                text: format!(
                    "| {} | {} | {} | {} | {} | {} |",
                    escape(&s.name),
                    fmt_check_name(c),
                    fmt_baseline(c),
                    fmt_value(c, c.candidate),
                    change,
                    emoji(c.verdict)
                ),
                explained: (tail || open_ci || slo || itl).then_some(Legend {
                    tail,
                    open_ci,
                    slo,
                    itl,
                }),
            });
        }
    }
    rows
}

/// How to read the table, in a reviewer's words: the change column always; a `tail>P90` row
/// and a `?` in an interval only when the table has one.
fn legend(rows: &[Row], r: &Results) -> String {
    let any = |f: fn(&Legend) -> bool| rows.iter().any(|r| r.explained.as_ref().is_some_and(f));
    let mut parts = Vec::new();
    let change = crate::report::footnotes::results_legend(r)
        .map(|l| l.replacen("change [CI]", "*change [CI]*", 1));
    if any(|l| l.open_ci) {
        parts.push(
            "a `?` end means this many requests cannot bound that side of the interval \
             (a tail needs more samples than a median)"
                .to_string(),
        );
    }
    if any(|l| l.slo) {
        parts.push(
            "*SLO* rows (gate.slo): the baseline column is the objective, and the change is the \
             measured quantile against it; FAIL when the data show it missed, PASS when they \
             show it met, WARN when this many requests cannot tell"
                .to_string(),
        );
    }
    if any(|l| l.itl) {
        parts.push(
            "*ITL P99*: the P99 of every gap between tokens of every request pooled (the stutter \
             a reader sees); judged with requests, not gaps, as the independent observations, so \
             one slow request does not fail it but a stall in many requests does"
                .to_string(),
        );
    }
    if any(|l| l.tail) {
        parts.push(format!(
            "*tail>P90*: {}",
            crate::report::footnotes::TAIL_LEGEND
        ));
    }
    let rest = if parts.is_empty() {
        String::new()
    } else {
        format!(" {}.", capitalise(&parts.join("; ")))
    };
    format!("{}{rest}", change.unwrap_or_default())
        .trim()
        .to_string()
}

/// `text` with its first letter upper-cased (a sentence that follows another).
fn capitalise(text: &str) -> String {
    let mut c = text.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Scenarios drawn in the chart at most (one category per gated quantile each).
const CHART_MAX_SCENARIOS: usize = 12;

/// A compact chart GitHub renders (mermaid `xychart-beta`): per gated metric (TTFT, TPOT,
/// E2E), the baseline (bars) and candidate (line) value of each quantile that is gated for it
/// (P50, P90, P99), for every scenario that has both, from the same summaries as the tables.
/// `None` when no scenario has both.
pub fn chart(r: &Results) -> Option<String> {
    use crate::config::{Metric, Quantile};
    use crate::gate::CheckKind;
    let mut metrics: Vec<(Metric, Vec<Quantile>)> = Vec::new();
    for c in r.scenarios.iter().flat_map(|s| &s.checks) {
        let (Some(m), CheckKind::Quantile(q)) = (c.metric, c.kind) else {
            continue;
        };
        if c.verdict == Verdict::Info {
            continue;
        }
        match metrics.iter_mut().find(|(x, _)| *x == m) {
            Some((_, qs)) if !qs.contains(&q) => qs.push(q),
            Some(_) => {}
            None => metrics.push((m, vec![q])),
        }
    }
    metrics.sort();
    for (_, qs) in &mut metrics {
        qs.sort();
    }
    let mut out = String::new();
    for (m, quantiles) in metrics {
        let key = SummaryKey::from(m);
        let mut cats = Vec::new();
        let (mut base, mut cand) = (Vec::new(), Vec::new());
        for s in r.scenarios.iter().take(CHART_MAX_SCENARIOS) {
            let b = match &s.ab {
                Some(ab) => ab.base_measured.summary.get(&key),
                None => s.baseline.as_ref().and_then(|b| b.summary.get(&key)),
            };
            let c = s.measured.summary.get(&key);
            let (Some(b), Some(c)) = (b, c) else { continue };
            // Names are [A-Za-z0-9._-]; keep the label safe inside mermaid's quotes anyway.
            let name: String = s
                .name
                .chars()
                .filter(|ch| ch.is_ascii_alphanumeric() || "._-".contains(*ch))
                .collect();
            for q in &quantiles {
                let pick = |s: &crate::summary::MetricSummary| match q {
                    Quantile::P50 => s.p50,
                    Quantile::P90 => s.p90,
                    Quantile::P99 => s.p99,
                };
                let (bv, cv) = (pick(b), pick(c));
                cats.push(format!("\"{name} {}\"", q.label()));
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
            "```mermaid\nxychart-beta\n    title \"{} in ms: {} = bars, candidate = line\"\n    x-axis [{}]\n    y-axis \"{} (ms)\"\n    bar [{}]\n    line [{}]\n```",
            m.label(),
            crate::report::base_word(r),
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
            escape(&runner_text(
                s.status_detail.lines().next().unwrap_or_default()
            ))
        ),
    }
}

/// Text for a PR comment: paths in perfgate's per-run temp directory (gone with the runner)
/// shortened ([`super::safe_text::without_this_run_dir`]).
fn runner_text(text: &str) -> String {
    super::safe_text::without_this_run_dir(text)
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
