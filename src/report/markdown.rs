//! Markdown report: the PR comment body and the step summary. First line is the hidden marker
//! `<!-- perfgate:ID -->`; then the verdict line, one summary table, and per-scenario details in
//! `<details>`. Text that came from a server or a file (error messages, model names, scenario
//! names) is escaped so it cannot inject markdown, HTML, mentions or links.

use super::{fmt_change, fmt_check_name, fmt_ms, fmt_tolerance, fmt_value};
use crate::gate::Verdict;
use crate::results::{Results, Status};
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

/// Renders the report with the marker for `results.id`.
pub fn render(r: &Results) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<!-- perfgate:{} -->", escape(&r.id));
    let head = match r.verdict.as_str() {
        "FAIL" => "❌ **perfgate: latency regression**",
        "ERROR" => "🛑 **perfgate: could not measure**",
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
    let _ = writeln!(
        o,
        "| scenario | check | baseline | candidate | change [CI] | verdict |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for s in &r.scenarios {
        if s.status != Status::Compared && s.checks.is_empty() {
            let _ = writeln!(
                o,
                "| {} | - | - | - | - | {} |",
                escape(&s.name),
                super::terminal::status_label(s.status)
            );
            continue;
        }
        for c in s.checks.iter().filter(|c| c.verdict != Verdict::Info) {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                escape(&s.name),
                fmt_check_name(c),
                fmt_value(c, c.baseline),
                fmt_value(c, c.candidate),
                fmt_change(c),
                emoji(c.verdict)
            );
        }
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
            let _ = writeln!(
                o,
                "Baseline `{}`, blessed {} with perfgate {} ({} requests).\n",
                b.path.replace('`', "'"),
                escape(&b.created_at),
                escape(&b.perfgate_version),
                b.requests
            );
        }
        if !s.checks.is_empty() {
            let _ = writeln!(o, "| check | baseline | candidate | change [CI] | tolerance | n (b/c) | verdict | why |");
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
            for c in &s.checks {
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
    o
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
