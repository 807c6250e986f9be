//! JUnit XML (`--junit`), for CI systems other than GitHub (GitLab, Jenkins, Azure Pipelines,
//! Buildkite): one `<testsuite>` per scenario and one `<testcase>` per check (scenario, metric,
//! quantile; plus the tail and error-rate checks). FAIL is a `<failure>` carrying the numbers;
//! WARN, PASS and IMPROVED pass with the numbers in `<system-out>`; INFO (never gating) is
//! `<skipped>`. A scenario that was not compared gets one testcase: `<error>` when it could not be
//! measured or is misconfigured, `<skipped>` when it has no usable baseline.

use super::escape::xml as escape;
use super::{fmt_baseline, fmt_change, fmt_check_name, fmt_n, fmt_tolerance, fmt_value};
use crate::gate::{Check, Verdict};
use crate::results::{Results, ScenarioResult, Status};
use std::fmt::Write;

/// The numbers behind a verdict, one line.
pub fn numbers(c: &Check, word: &str) -> String {
    let mut s = format!(
        "{}: {word} {}, candidate {}, change {}, tolerance warn/fail {}, n {}",
        fmt_check_name(c),
        fmt_baseline(c),
        fmt_value(c, c.candidate),
        fmt_change(c),
        fmt_tolerance(c),
        fmt_n(c)
    );
    match c.p_holm {
        Some(p) if p < 1e-4 => s.push_str(", Holm-adjusted p < 0.0001"),
        Some(p) => {
            let _ = write!(s, ", Holm-adjusted p {p:.4}");
        }
        None => {}
    }
    let _ = write!(s, ". {}: {}", c.verdict.as_str(), c.reason);
    s
}

/// The extra testcase of a scenario that was not (fully) compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusCase {
    /// An `<error>`: the scenario could not be measured or is misconfigured.
    Error,
    /// A `<skipped>`: there was no usable baseline.
    Skipped,
}

/// The extra testcase of a scenario, if it was not (fully) compared.
fn status_case(s: &ScenarioResult) -> Option<StatusCase> {
    match s.status {
        Status::Compared => None,
        Status::Unmeasurable | Status::Misconfigured => Some(StatusCase::Error),
        Status::NoBaseline | Status::Stale | Status::InvalidBaseline | Status::LoadShard => {
            Some(StatusCase::Skipped)
        }
    }
}

/// The testcase counts of a `<testsuite>` (one scenario) or of `<testsuites>` (their sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.tests += o.tests;
        self.failures += o.failures;
        self.errors += o.errors;
        self.skipped += o.skipped;
    }
}

/// The counts of one scenario.
fn counts(s: &ScenarioResult) -> Counts {
    let n = |v: Verdict| s.checks.iter().filter(|c| c.verdict == v).count();
    let (e, sk) = match status_case(s) {
        Some(StatusCase::Error) => (1, 0),
        Some(StatusCase::Skipped) => (0, 1),
        None => (0, 0),
    };
    Counts {
        tests: s.checks.len() + e + sk,
        failures: n(Verdict::Fail),
        errors: e,
        skipped: n(Verdict::Info) + sk,
    }
}

/// Renders the whole report.
pub fn render(r: &Results) -> String {
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let mut all = Counts::default();
    for s in &r.scenarios {
        all += counts(s);
    }
    let Counts {
        tests: t,
        failures: f,
        errors: e,
        skipped: sk,
    } = all;
    let total_s: f64 = r.scenarios.iter().map(|s| s.measured.wall_ms).sum::<f64>() / 1000.0;
    let _ = writeln!(
        o,
        "<testsuites name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{sk}\" time=\"{total_s:.3}\">",
        escape(r.id.as_str())
    );
    for s in &r.scenarios {
        let Counts {
            tests,
            failures,
            errors,
            skipped,
        } = counts(s);
        let _ = writeln!(
            o,
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\" timestamp=\"{}\">",
            escape(&s.name),
            s.measured.wall_ms / 1000.0,
            escape(r.created_at.trim_end_matches('Z'))
        );
        let _ = writeln!(o, "    <properties>");
        let mut props = vec![
            ("endpoint", s.endpoint.clone()),
            ("api", s.api.clone()),
            ("model", s.model.clone()),
            ("concurrency", s.concurrency.to_string()),
            ("requests", s.measured.requests.to_string()),
            ("failed", s.measured.failed.to_string()),
            ("verdict", r.verdict.as_str().to_string()),
        ];
        if let Some(b) = &s.baseline {
            props.push(("baseline", b.path.clone()));
            props.push(("baseline_created_at", b.created_at.clone()));
        }
        if let Some(ab) = &s.ab {
            props.push(("ab_design", ab.design.as_str().to_string()));
            props.push(("ab_order", ab.order.clone()));
            props.push(("ab_alternations", ab.alternations.to_string()));
            props.push(("base_endpoint", ab.base_endpoint.clone()));
            props.push(("base_model", ab.base_model.clone()));
        }
        for (k, v) in props {
            let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", escape(&v));
        }
        let _ = writeln!(o, "    </properties>");
        let class = format!("perfgate.{}", s.name);
        if let Some(case) = status_case(s) {
            let (name, tag) = match case {
                StatusCase::Error => ("measure", "error"),
                StatusCase::Skipped => ("baseline", "skipped"),
            };
            let _ = writeln!(
                o,
                "    <testcase name=\"{name}\" classname=\"{}\" time=\"0\">\n      <{tag} message=\"{}: {}\"/>\n    </testcase>",
                escape(&class),
                super::terminal::status_label(s.status),
                escape(&s.status_detail)
            );
        }
        for c in &s.checks {
            let line = numbers(c, super::base_word(r));
            let _ = write!(
                o,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"0\">",
                escape(&fmt_check_name(c)),
                escape(&class)
            );
            match c.verdict {
                Verdict::Fail => {
                    let _ = write!(
                        o,
                        "\n      <failure message=\"{} {} regressed: {}\" type=\"perfgate.FAIL\">{}</failure>\n    ",
                        escape(&s.name),
                        escape(&fmt_check_name(c)),
                        escape(&fmt_change(c)),
                        escape(&line)
                    );
                }
                Verdict::Info => {
                    let _ = write!(o, "\n      <skipped message=\"{}\"/>\n    ", escape(&line));
                }
                _ => {
                    let _ = write!(
                        o,
                        "\n      <system-out>{}</system-out>\n    ",
                        escape(&line)
                    );
                }
            }
            let _ = writeln!(o, "</testcase>");
        }
        if !s.notes.is_empty() || s.measured.first_error.is_some() {
            let mut text: Vec<String> = s.notes.iter().map(|n| format!("note: {n}")).collect();
            if let Some(e) = &s.measured.first_error {
                text.push(format!("first failure: {e}"));
            }
            let _ = writeln!(
                o,
                "    <system-out>{}</system-out>",
                escape(&text.join("\n"))
            );
        }
        let _ = writeln!(o, "  </testsuite>");
    }
    let _ = writeln!(o, "</testsuites>");
    o
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(
            escape("a<b>&\"c'\u{1b}[31m\u{0}"),
            "a&lt;b&gt;&amp;&quot;c&apos;[31m"
        );
    }
}
