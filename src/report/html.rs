//! The HTML report (`--html`): one self-contained page, no script and no external request (a
//! Content-Security-Policy forbids them), readable offline or as a CI artifact. A verdict banner,
//! a summary table linking to each scenario, and per scenario the baseline and candidate
//! distributions of TTFT, TPOT and ITL drawn over each other (ECDFs, inline SVG), then the
//! verdict table with the numbers behind each verdict. Text from servers and files is escaped.

use super::escape::html as escape;
use super::plot::{self, BASELINE, CANDIDATE};
use super::{
    fmt_baseline, fmt_change, fmt_check_name, fmt_ms, fmt_n, fmt_tolerance, fmt_value,
    Distributions, Report,
};
use crate::gate::Verdict;
use crate::results::{ScenarioResult, Status};
use crate::summary::SummaryKey;
use crate::verdict::Overall;
use std::fmt::Write;

/// The CSS class of a verdict badge.
fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Fail => "fail",
        Verdict::Warn => "warn",
        Verdict::Improved => "improved",
        Verdict::Pass => "pass",
        Verdict::Info => "info",
    }
}

fn badge(v: Verdict) -> String {
    format!("<span class=\"badge {}\">{}</span>", class(v), v.as_str())
}

/// The badge of a scenario: its worst verdict, or its status when it was not compared.
fn scenario_badge(s: &ScenarioResult) -> String {
    match (s.status, s.worst()) {
        (Status::Compared, Some(v)) => badge(v),
        (Status::Compared, None) => "<span class=\"badge info\">NO CHECKS</span>".into(),
        (Status::Unmeasurable | Status::Misconfigured, _) => format!(
            "<span class=\"badge fail\">{}</span>",
            super::terminal::status_label(s.status)
        ),
        // Not compared with a baseline but gated all the same (gate.slo, the nightly steps): a
        // missed objective is a red FAIL, not a grey NO BASELINE (issue 32 item 7).
        (other, Some(v @ (Verdict::Fail | Verdict::Warn))) => format!(
            "{} <span class=\"badge info\">{}</span>",
            badge(v),
            super::terminal::status_label(other)
        ),
        (other, _) => format!(
            "<span class=\"badge info\">{}</span>",
            super::terminal::status_label(other)
        ),
    }
}

/// An element id for a scenario (names are `[A-Za-z0-9._-]`; anything else is replaced).
fn anchor(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("s-{safe}")
}

const CSS: &str = r#"
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--fg); background: #fff; }
main { max-width: 1320px; margin: 0 auto; padding: 20px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; display: flex; align-items: center; gap: 12px; }
h2 { font-size: 18px; margin: 0 0 6px; display: flex; align-items: center; gap: 10px; }
.banner { border: 1px solid var(--line); border-left-width: 6px; border-radius: 6px; padding: 14px 18px; margin-bottom: 20px; background: var(--bg); }
.blind { color: #9a6700; }
.banner.fail { border-left-color: #cf222e; } .banner.warn { border-left-color: #bf8700; }
.banner.pass { border-left-color: #1a7f37; } .banner.improved { border-left-color: #0969da; }
.banner.info { border-left-color: #8c959f; }
.muted, .meta { color: var(--muted); }
.meta { margin: 2px 0; font-size: 13px; }
.badge { display: inline-block; font-size: 12px; font-weight: 600; letter-spacing: .02em; padding: 2px 8px; border-radius: 10px; color: #fff; white-space: nowrap; }
.badge.fail { background: #cf222e; } .badge.warn { background: #9a6700; } .badge.pass { background: #1a7f37; }
.badge.improved { background: #0969da; } .badge.info { background: #6e7781; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; white-space: nowrap; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
td.why { color: var(--muted); min-width: 260px; }
table.checks td:first-child { white-space: nowrap; }
tr.fail td { background: #ffebe9; } tr.warn td { background: #fff8c5; }
section.scenario { border-top: 1px solid var(--line); padding-top: 18px; margin-top: 22px; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 12px; margin: 10px 0 4px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px; background: #fff; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 12px; color: var(--muted); padding: 2px 6px 4px; }
.read { font-size: 13px; color: var(--muted); margin: 4px 0; }
.legend { display: inline-flex; gap: 14px; font-size: 13px; color: var(--muted); }
.swatch { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin-right: 5px; }
.callout { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; background: var(--bg); margin: 8px 0; }
.callout.bad { border-color: #ff818266; background: #ffebe9; }
ul.notes { margin: 6px 0; padding-left: 20px; color: var(--muted); }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
footer { margin-top: 30px; font-size: 12px; color: var(--muted); border-top: 1px solid var(--line); padding-top: 10px; }
"#;

/// The overall verdict's headline and CSS class.
fn headline(verdict: Overall) -> (&'static str, &'static str) {
    match verdict {
        Overall::Fail => ("latency regression", "fail"),
        Overall::Error => ("could not measure", "fail"),
        Overall::Interrupted => ("interrupted, partial results", "warn"),
        Overall::NoBaseline => ("no usable baseline", "info"),
        Overall::Warn => ("no regression, with warnings", "warn"),
        Overall::Improved => ("no regression, improved", "improved"),
        Overall::Pass => ("no regression", "pass"),
        Overall::Measured => ("measured as a load shard, not gated", "info"),
    }
}

/// Renders the whole page.
pub fn render(rep: &Report) -> String {
    let r = &rep.results;
    let (head, cls) = headline(r.verdict);
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
<link rel=\"icon\" href=\"data:,\">\n<title>perfgate: {} ({} scenario(s))</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        escape(r.verdict.as_str()),
        r.scenarios.len()
    );
    let _ = writeln!(
        o,
        "<div class=\"banner {cls}\">\n<h1>perfgate: {head} <span class=\"badge {cls}\">{}</span></h1>",
        escape(r.verdict.as_str())
    );
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} FAIL, {} WARN, {} IMPROVED, {} PASS, {} INFO over {} scenario(s); Holm family of {} gated checks. Exit code {}.</p>",
        r.count(Verdict::Fail),
        r.count(Verdict::Warn),
        r.count(Verdict::Improved),
        r.count(Verdict::Pass),
        r.count(Verdict::Info),
        r.scenarios.len(),
        r.family_size,
        r.exit_code
    );
    if let Some(blind) = crate::report::drift_blind(r) {
        let _ = writeln!(
            o,
            "<p class=\"blind\"><strong>{}</strong></p>",
            escape(&blind)
        );
    }
    let _ = writeln!(
        o,
        "<p class=\"meta\">Check <code>{}</code>, measured {} with perfgate {}.</p>\n</div>",
        escape(r.id.as_str()),
        escape(&r.created_at),
        escape(&r.perfgate_version)
    );
    summary_table(&mut o, rep);
    sweeps(&mut o, r);
    for s in &r.scenarios {
        scenario(&mut o, rep, s);
    }
    let _ = writeln!(
        o,
        "<footer>How to read the plots: each curve is an empirical CDF, the share of requests (y) that took at most x ms; \
the y value 50% is the median and the top of the curve the slowest requests. A candidate curve to the right of the {} is slower. \
TTFT is the time to the first token, TPOT the time per output token after the first, and the ITL panel each request's 99th-percentile gap between tokens (its stalls). \
The verdicts come from the statistics in the tables, not from the plots. Generated by perfgate {}.</footer>\n</main>\n</body>\n</html>",
        super::base_word(r),
        escape(&r.perfgate_version)
    );
    o
}

/// One section per load sweep (a scenario written with a list of concurrency levels or rates,
/// at least two of them measured): P50 latency against output token throughput per level.
fn sweeps(o: &mut String, r: &crate::results::Results) {
    let mut families: Vec<(&str, Vec<&ScenarioResult>)> = Vec::new();
    for s in &r.scenarios {
        let Some(f) = s.family.as_deref() else {
            continue;
        };
        match families.iter_mut().find(|(name, _)| *name == f) {
            Some((_, members)) => members.push(s),
            None => families.push((f, vec![s])),
        }
    }
    for (family, members) in families.iter().filter(|(_, m)| m.len() >= 2) {
        let _ = writeln!(
            o,
            "<section class=\"scenario\">\n<h2>Load sweep: {}</h2>\n<p class=\"meta\">{} levels ({}); each point is one level's P50 against its output token throughput. Where latency rises and throughput stops growing, the server is saturated.</p>\n<div class=\"plots\">",
            escape(family),
            members.len(),
            escape(
                &members
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
        for (key, title) in [
            (SummaryKey::Ttft, "TTFT P50 against throughput"),
            (SummaryKey::Tpot, "TPOT P50 against throughput"),
        ] {
            let pts: Vec<super::sweep_plot::Point> = members
                .iter()
                .filter_map(|s| {
                    Some(super::sweep_plot::Point {
                        label: s
                            .name
                            .strip_prefix(*family)
                            .map(|l| l.trim_start_matches('-'))
                            .unwrap_or(&s.name)
                            .to_string(),
                        tokens_per_s: s.measured.output_tokens_per_s,
                        p50_ms: s.measured.summary.get(&key)?.p50,
                    })
                })
                .collect();
            if let Some(svg) =
                super::sweep_plot::sweep_svg(title, super::base_word(r), &[], &pts, 420, 280)
            {
                let _ = writeln!(o, "<figure>{svg}</figure>");
            }
        }
        let _ = writeln!(o, "</div>\n</section>");
    }
}

/// A scenario's nightly series (`check --history`): one panel per gated metric.
fn nightly(o: &mut String, ns: &crate::results::NightlySeries) {
    let first = ns.first_shown();
    let mut figs = String::new();
    for m in ns.metrics() {
        let v = ns.values(m);
        let steps: Vec<(usize, bool)> = ns
            .steps
            .iter()
            .filter(|s| s.metric == m)
            .map(|s| (s.night, s.up))
            .collect();
        let title = format!("{} P50, night by night", m.label());
        if let Some(svg) = super::series_plot::series_svg(&title, &v, first, &steps, 420, 280) {
            let _ = writeln!(
                figs,
                "<figure role=\"img\" aria-label=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
                escape(&title),
                escape(&format!(
                    "nights {first} to {} of branch {}; red line: a step up starts, green: a step down; the large point is tonight",
                    ns.total, ns.branch
                ))
            );
        }
    }
    if !figs.is_empty() {
        let _ = writeln!(o, "<div class=\"plots\">\n{figs}</div>");
    }
}

/// One ECDF panel of values in `unit` (`ms`, `tokens`), the `word` side's (`b`, when there is
/// one) over the candidate's (`c`), with the medians (shown by `show`) as its caption, into
/// `figs`; nothing when there is nothing to draw.
fn figure(
    figs: &mut String,
    title: &str,
    unit: &str,
    b: Option<&Vec<f64>>,
    c: &[f64],
    word: &str,
    show: fn(f64) -> String,
) {
    let Some(svg) = plot::ecdf_svg_in(title, unit, word, b.map(Vec::as_slice), c, 420, 280) else {
        return;
    };
    let med = |xs: &[f64]| {
        let s = crate::stats::quantile::sorted(xs);
        crate::stats::quantile::quantile_type7(&s, 0.5)
            .map(show)
            .unwrap_or_else(|| "&ndash;".into())
    };
    let cap = match b {
        Some(b) if !b.is_empty() => format!("median: {word} {}, candidate {}", med(b), med(c)),
        _ => format!("median: candidate {}", med(c)),
    };
    let _ = writeln!(
        figs,
        "<figure role=\"img\" aria-label=\"{}, {word} and candidate distributions\">{svg}<figcaption>{cap}</figcaption></figure>",
        escape(title)
    );
}

/// A conversation scenario's prefix cache: the reported and measured hit rates, then TTFT by
/// turn position (P50 and P90, the baseline's P50 beside it) with each turn's reported reuse.
fn cache(
    o: &mut String,
    c: &crate::stats::cache::CacheSummary,
    bd: Option<&super::Distributions>,
    word: &str,
) {
    let _ = writeln!(
        o,
        "<p class=\"meta\">Prefix cache: {}.</p>",
        escape(&c.describe())
    );
    if c.by_turn.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<table class=\"checks turns\">\n<caption>TTFT by turn position</caption>\n<tr><th>turn</th><th>requests</th><th>TTFT P50</th><th>TTFT P90</th><th>{word} P50</th><th>reported cached</th></tr>"
    );
    for t in &c.by_turn {
        let base = bd
            .and_then(|d| d.ttft_by_turn.get(&t.turn))
            .and_then(|v| {
                let s = crate::stats::quantile::sorted(v);
                crate::stats::quantile::quantile_type7(&s, 0.5)
            })
            .map_or_else(|| "&ndash;".into(), fmt_ms);
        let _ = writeln!(
            o,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{base}</td><td class=\"num\">{}</td></tr>",
            t.turn,
            t.requests,
            fmt_ms(t.ttft_p50_ms),
            fmt_ms(t.ttft_p90_ms),
            t.reported_hit_rate
                .map_or_else(|| "&ndash;".into(), |h| format!("{:.0}%", h * 100.0))
        );
    }
    let _ = writeln!(o, "</table>");
}

fn summary_table(o: &mut String, rep: &Report) {
    let r = &rep.results;
    let word = super::base_word(r);
    let _ = writeln!(
        o,
        "<table class=\"summary\">\n<tr><th>scenario</th><th>verdict</th><th>TTFT P50 {word} &rarr; candidate</th><th>TPOT P50 {word} &rarr; candidate</th><th>requests (failed)</th><th>checks not passing</th></tr>"
    );
    for s in &r.scenarios {
        let p50 = |k: SummaryKey| {
            let b = match &s.ab {
                Some(ab) => ab.base_measured.summary.get(&k),
                None => s.baseline.as_ref().and_then(|b| b.summary.get(&k)),
            }
            .map(|m| fmt_ms(m.p50));
            let c = s.measured.summary.get(&k).map(|m| fmt_ms(m.p50));
            match (b, c) {
                (Some(b), Some(c)) => format!("{b} &rarr; {c}"),
                (None, Some(c)) => format!("&ndash; &rarr; {c}"),
                (Some(b), None) => format!("{b} &rarr; &ndash;"),
                (None, None) => "&ndash;".into(),
            }
        };
        let flagged: Vec<String> = s
            .checks
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::Warn))
            .map(|c| format!("{} {}", fmt_check_name(c), c.verdict.as_str()))
            .collect();
        let _ = writeln!(
            o,
            "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} ({})</td><td>{}</td></tr>",
            anchor(&s.name),
            escape(&s.name),
            scenario_badge(s),
            p50(SummaryKey::Ttft),
            p50(SummaryKey::Tpot),
            s.measured.requests,
            s.measured.failed,
            if flagged.is_empty() {
                "&ndash;".to_string()
            } else {
                escape(&flagged.join(", "))
            }
        );
    }
    let _ = writeln!(o, "</table>");
    if let Some(line) = crate::report::footnotes::results_legend(r) {
        let _ = writeln!(o, "<p class=\"read\">{}</p>", escape(&line));
    }
}

fn scenario(o: &mut String, rep: &Report, s: &ScenarioResult) {
    let m = &s.measured;
    let word = super::base_word(&rep.results);
    let _ = writeln!(
        o,
        "<section class=\"scenario\" id=\"{}\">\n<h2>{} {}</h2>",
        anchor(&s.name),
        escape(&s.name),
        scenario_badge(s)
    );
    let _ = writeln!(
        o,
        "<p class=\"meta\">{} <code>{}</code>, model {}, concurrency {}; {} requests, {} failed; {:.1} output tokens/s, {:.2} requests/s. Defined at {}.</p>",
        escape(&s.api),
        escape(&s.endpoint),
        escape(&s.model),
        s.concurrency,
        m.requests,
        m.failed,
        m.output_tokens_per_s,
        m.requests_per_s,
        escape(&s.source)
    );
    if let Some(b) = &s.baseline {
        let _ = writeln!(
            o,
            "<p class=\"meta\">Baseline <code>{}</code>, blessed {} with perfgate {} ({} requests).</p>",
            escape(&b.path),
            escape(&b.created_at),
            escape(&b.perfgate_version),
            b.requests
        );
    }
    if let Some(line) = super::ab_line(s) {
        let _ = writeln!(o, "<p class=\"meta\">{}.</p>", escape(&line));
    }
    if s.status != Status::Compared {
        let bad = matches!(s.status, Status::Unmeasurable | Status::Misconfigured);
        let _ = writeln!(
            o,
            "<div class=\"callout{}\"><strong>{}</strong>: {}</div>",
            if bad { " bad" } else { "" },
            super::terminal::status_label(s.status),
            escape(&s.status_detail)
        );
    }
    let cand = Distributions::from_records(&s.records);
    let base = rep.baselines.get(&s.name);
    let bd = base.and_then(|b| b.as_ref().ok());
    if let Some(Err(why)) = base {
        let _ = writeln!(
            o,
            "<div class=\"callout\">Baseline distributions not drawn: {}</div>",
            escape(why)
        );
    }
    // (title, baseline values when available, candidate values)
    let panels = [
        (
            "TTFT: time to first token",
            bd.map(|d| &d.ttft_ms),
            &cand.ttft_ms,
        ),
        (
            "TPOT: time per output token",
            bd.map(|d| &d.tpot_ms),
            &cand.tpot_ms,
        ),
        (
            "ITL: each request's P99 gap",
            bd.map(|d| &d.itl_p99_ms),
            &cand.itl_p99_ms,
        ),
    ];
    let mut figs = String::new();
    for (title, b, c) in panels {
        figure(&mut figs, title, "ms", b, c, word, fmt_ms);
    }
    // A varied workload (prompt set, generated lengths, trace): what lengths were sent.
    if s.records.iter().any(|r| r.work.is_some()) {
        let lengths = [
            (
                "Prompt tokens per request",
                bd.map(|d| &d.prompt_tokens),
                &cand.prompt_tokens,
            ),
            (
                "Output tokens per request",
                bd.map(|d| &d.output_tokens),
                &cand.output_tokens,
            ),
        ];
        for (title, b, c) in lengths {
            figure(&mut figs, title, "tokens", b, c, word, |m| {
                format!("{m:.0} tokens")
            });
        }
    }
    if !figs.is_empty() {
        let swatch = |c, label: &str| {
            format!(
                "<span><span class=\"swatch\" style=\"background:{}\"></span>{label}</span>",
                plot::css(c)
            )
        };
        let mut legend = String::new();
        if bd.is_some_and(|d| !d.ttft_ms.is_empty()) {
            legend.push_str(&swatch(BASELINE, word));
        }
        legend.push_str(&swatch(CANDIDATE, "candidate (this run)"));
        let _ = writeln!(
            o,
            "<div class=\"legend\">{legend}</div>\n<div class=\"plots\">\n{figs}</div>"
        );
    }
    if let Some(c) = &s.cache {
        cache(o, c, bd, word);
    }
    let lines = s.speculative.iter().map(crate::report::speculative_line);
    for line in lines.chain(s.structured.iter().map(crate::report::structured_line)) {
        let _ = writeln!(o, "<p>{}.</p>", escape(&line));
    }
    if let Some(ns) = &s.nightly {
        nightly(o, ns);
    }
    if !s.checks.is_empty() {
        let _ = writeln!(
            o,
            "<table class=\"checks\">\n<tr><th>check</th><th>{word}</th><th>candidate</th><th>change [CI]</th><th>tolerance warn / fail</th><th>n (b/c)</th><th>verdict</th><th>why</th></tr>"
        );
        for c in &s.checks {
            let _ = writeln!(
                o,
                "<tr class=\"{}\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"why\">{}</td></tr>",
                class(c.verdict),
                escape(&fmt_check_name(c)),
                fmt_baseline(c),
                fmt_value(c, c.candidate),
                escape(&fmt_change(c)),
                escape(&fmt_tolerance(c)),
                fmt_n(c),
                badge(c.verdict),
                escape(&c.reason)
            );
        }
        let _ = writeln!(o, "</table>");
        let checks: Vec<&crate::gate::Check> = s.checks.iter().collect();
        for line in crate::report::footnotes::notes(&checks) {
            let _ = writeln!(o, "<p class=\"read\">{}</p>", escape(&line));
        }
    }
    let mut notes: Vec<String> = Vec::new();
    if m.failed > 0 {
        notes.push(format!("failures: {}", crate::report::failure_classes(m)));
    }
    if let Some(e) = &m.first_error {
        notes.push(format!("first failure: {e}"));
    }
    notes.extend(s.notes.iter().map(|n| format!("note: {n}")));
    if !notes.is_empty() {
        let _ = writeln!(o, "<ul class=\"notes\">");
        for n in notes {
            let _ = writeln!(o, "<li>{}</li>", escape(&n));
        }
        let _ = writeln!(o, "</ul>");
    }
    let _ = writeln!(o, "</section>");
}

#[cfg(test)]
mod tests {
    use super::{anchor, escape};

    #[test]
    fn hostile_text_is_inert() {
        let e = escape("<script>alert('x')</script>&\"");
        assert!(!e.contains('<') && !e.contains('"') && !e.contains('\''));
        assert_eq!(anchor("a b<c"), "s-a_b_c");
    }
}
