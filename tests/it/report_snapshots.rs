//! Snapshot tests of every renderer on one fixed results file (tests/fixtures/results.json: a
//! FAIL, a WARN with failed requests, PASS and INFO checks, a scenario without baseline, and a
//! hand-added hostile note). All renderers read the same model, so the same numbers must appear
//! in each; `cargo insta review` (or INSTA_UPDATE=always) after an intended change.

use perfgate::config::{Metric, Quantile};
use perfgate::gate::{CheckKind, Verdict};
use perfgate::report::{self, html, json, junit, markdown, terminal, Report};
use perfgate::results::Results;
use std::path::Path;

const FIXTURE: &str = "tests/fixtures/results.json";
const BASELINES: &str = "tests/fixtures/baselines";

/// `insta::assert_snapshot!` into tests/snapshots/report/NAME.snap.
macro_rules! snap {
    ($name:expr, $value:expr) => {{
        let mut s = insta::Settings::clone_current();
        s.set_snapshot_path("../snapshots/report");
        s.set_prepend_module_to_snapshot(false);
        s.bind(|| insta::assert_snapshot!($name, $value));
    }};
}

fn fixture() -> Results {
    json::load(Path::new(FIXTURE)).expect("fixture loads")
}

/// The HTML with each inline SVG reduced to what it says (its texts) and how many lines it
/// draws, so the snapshot shows the page and the plots' labels without plotters' coordinates.
fn html_digest(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    while let Some(i) = rest.find("<svg") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("</svg>").expect("closed svg") + i + "</svg>".len();
        let svg = &rest[i..end];
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|(_, x)| x))
            .filter_map(|t| t.split_once("</text>").map(|(x, _)| x.trim()))
            .collect();
        let lines = svg.matches("<polyline").count() + svg.matches("<path").count();
        out.push_str(&format!(
            "<svg digest: {lines} lines; texts: {}>",
            texts.join(" | ")
        ));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn terminal_snapshot() {
    snap!("terminal", terminal::render(&fixture()));
}

/// Issue 46: a tail>P90 row (a change in points beside a relative tolerance, against a P90
/// pooled per comparison) was explained in the PR comment's legend only; the terminal has the
/// same line, which says what the tolerance applies to.
#[test]
fn terminal_explains_a_tail_row_as_the_markdown_does() {
    let r = fixture();
    let legend = "the share of requests slower than the usual P90 (the P90 of both runs pooled, so the baseline's share moves from one comparison to the next); about 10 % when nothing changed, and its change is in percentage points; its tolerance applies to the ratio of the two P90s (the HD P90 ratio its reason names), not to the points.";
    let md = markdown::render(&r);
    assert!(md.contains(&format!("*tail>P90*: {legend}")), "{md}");
    let text = terminal::render(&r);
    assert!(text.contains(&format!("\ntail>P90: {legend}\n")), "{text}");
}

/// Issue 46: with `--history` a nightly step's PASS row printed no reason (other PASS rows say
/// it all in their columns; this one's reason is where tonight fell in the nights' band).
#[test]
fn terminal_prints_a_nightly_steps_pass_reason() {
    let mut r = fixture();
    let reason = "tonight 15.1 ms is within the band [14.1 ms, 15.8 ms] of 13 night(s) since night 1 of 14 (2020-01-01) (level 15.0 ms; nights move by 2.7%, learned from 13 nights)";
    let (s, c) = r
        .scenarios
        .iter_mut()
        .find_map(|s| {
            let i = s.checks.iter().position(|c| c.verdict == Verdict::Pass)?;
            Some((s.name.to_string(), &mut s.checks[i]))
        })
        .expect("a PASS row");
    c.kind = CheckKind::ChangePoint;
    c.reason = reason.to_string();
    let metric = c.metric.map(|m| m.label()).unwrap_or_default();
    let text = terminal::render(&r);
    assert!(
        text.contains(&format!("\n   PASS {metric} nightly step: {reason}\n")),
        "{s}: {text}"
    );
    // a PASS row of another kind keeps its reason to the JSON and markdown
    assert!(!text.contains("PASS TPOT P50:"), "{text}");
}

#[test]
fn terminal_colour_changes_nothing_but_the_escape_codes() {
    let r = fixture();
    let plain = terminal::render(&r);
    let coloured = terminal::render_styled(&r, true);
    assert!(coloured.contains("\x1b[1;31mFAIL\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[32mPASS\x1b[0m"));
    assert!(coloured.contains("\x1b[33mWARN\x1b[0m"));
    let mut stripped = String::new();
    let mut it = coloured.chars();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for d in it.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            stripped.push(c);
        }
    }
    assert_eq!(stripped, plain);
    assert!(!plain.contains('\x1b'));
}

#[test]
fn markdown_snapshot() {
    let md = markdown::render(&fixture());
    snap!("markdown", md);
}

#[test]
fn markdown_chart_draws_every_compared_scenario_from_the_table_numbers() {
    let r = fixture();
    let chart = markdown::chart(&r).expect("a chart");
    assert_eq!(
        chart.matches("```mermaid\nxychart-beta").count(),
        2,
        "{chart}"
    ); // TTFT, TPOT
       // Only the gated quantiles are drawn: at n = 20 the P99 checks are INFO, so P50 alone.
    assert!(
        chart.contains("x-axis [\"chat-short P50\", \"chat-long P50\", \"flaky P50\"]"),
        "{chart}"
    );
    assert!(!chart.contains("P99"), "{chart}");
    assert!(!chart.contains("new-scenario"), "no baseline, no bar");
    // chat-long's TPOT P50: baseline and candidate as in the results' summaries
    let s = r.scenarios.iter().find(|s| s.name == "chat-long").unwrap();
    let b = s.baseline.as_ref().unwrap().summary["tpot_ms"].p50;
    let c = s.measured.summary["tpot_ms"].p50;
    let tpot = chart.split("```mermaid").nth(2).unwrap();
    assert!(tpot.contains(&format!("{b:.2}")) && tpot.contains(&format!("{c:.2}")));
    // the chart sits under the collapsed table of every row, before the per-scenario details
    let md = markdown::render(&r);
    let (all, c1, d) = (
        md.find("<details><summary>All ").unwrap(),
        md.find("```mermaid").unwrap(),
        md.find("<details><summary>chat-short").unwrap(),
    );
    assert!(all < c1 && c1 < d);
}

#[test]
fn markdown_chart_draws_a_tail_quantile_once_it_is_gated() {
    let mut r = fixture();
    for s in &mut r.scenarios {
        for c in &mut s.checks {
            if c.kind == CheckKind::Quantile(Quantile::P99) && c.metric == Some(Metric::Tpot) {
                c.verdict = Verdict::Pass;
            }
        }
    }
    let chart = markdown::chart(&r).expect("a chart");
    let tpot = chart.split("```mermaid").nth(2).unwrap();
    assert!(
        tpot.contains("x-axis [\"chat-short P50\", \"chat-short P99\", \"chat-long P50\""),
        "{tpot}"
    );
    let s = r.scenarios.iter().find(|s| s.name == "chat-long").unwrap();
    let b = s.baseline.as_ref().unwrap().summary["tpot_ms"].p99;
    assert!(tpot.contains(&format!("{b:.2}")), "{tpot}");
    // TTFT's P99 stays INFO: its chart keeps P50 only.
    let ttft = chart.split("```mermaid").nth(1).unwrap();
    assert!(!ttft.contains("P99"), "{ttft}");
}

#[test]
fn markdown_leads_with_fail_then_warn_and_folds_every_row() {
    let r = fixture();
    let md = markdown::render(&r);
    let folded = md
        .find("<details><summary>All 15 check(s) of 4 scenario(s)</summary>")
        .unwrap();
    let lead: Vec<&str> = md[..folded]
        .lines()
        .filter(|l| l.starts_with("| "))
        .collect();
    assert_eq!(
        lead,
        [
            "| scenario | check | baseline | candidate | change [CI] | verdict |",
            "| chat-long | TPOT P50 | 3.99 ms | 6.00 ms | +49.8% [+47.5%, +52.4%] | ❌ FAIL |",
            "| flaky | TTFT P50 | 64.2 ms | 63.6 ms | +0.1% [-9.5%, +10.6%] | ⚠️ WARN |",
            "| new-scenario | - | - | - | - | NO BASELINE |",
        ]
    );
    // Every row, PASS ones included, is in the folded table, in scenario order.
    let end = folded + md[folded..].find("</details>").unwrap();
    let all: Vec<&str> = md[folded..end]
        .lines()
        .filter(|l| l.starts_with("| "))
        .collect();
    assert_eq!(all.len(), 1 + 15 + 1, "{all:#?}"); // the head, 15 checks, one NO BASELINE
    assert!(all[1].starts_with("| chat-short | TTFT P50 |"), "{all:#?}");
    // The legend explains the tail rows in words; no interval here has an open end.
    assert!(md.contains("*tail>P90*: the share of requests slower than the usual P90"));
    assert!(!md.contains("A `?` end means"));
}

#[test]
fn markdown_explains_an_open_interval_and_says_when_nothing_needs_a_look() {
    let mut r = fixture();
    r.scenarios.retain(|s| s.name != "new-scenario");
    for s in &mut r.scenarios {
        for c in &mut s.checks {
            if matches!(c.verdict, Verdict::Fail | Verdict::Warn) {
                c.verdict = Verdict::Pass;
            }
        }
    }
    let c = r.scenarios[0]
        .checks
        .iter_mut()
        .find(|c| c.ci.is_some())
        .unwrap();
    c.ci = Some(perfgate::gate::RatioCi {
        lower: Some(0.95),
        upper: None,
    });
    let md = markdown::render(&r);
    assert!(md.contains("\nNo check failed or warned.\n"), "{md}");
    assert!(md.contains("[-5.0%, ?]"), "{md}");
    assert!(
        md.contains("A `?` end means this many requests cannot bound that side"),
        "{md}"
    );
}

#[test]
fn json_round_trips_byte_for_byte() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    assert_eq!(json::render(&fixture()), text);
}

#[test]
fn json_snapshot() {
    // The full file is the fixture itself; the snapshot keeps one record per scenario.
    let mut r = fixture();
    for s in &mut r.scenarios {
        s.records.truncate(1);
    }
    snap!("json", json::render(&r));
}

#[test]
fn junit_snapshot() {
    snap!("junit", junit::render(&fixture()));
}

#[test]
fn html_snapshot() {
    let rep = Report::new(fixture(), Some(Path::new(BASELINES)));
    snap!("html", html_digest(&html::render(&rep)));
}

#[test]
fn renderers_agree_on_the_failing_check() {
    let r = fixture();
    let fail = r
        .scenarios
        .iter()
        .flat_map(|s| &s.checks)
        .find(|c| c.verdict == perfgate::gate::Verdict::Fail)
        .expect("the fixture has a FAIL");
    let change = report::fmt_change(fail);
    let cand = report::fmt_value(fail, fail.candidate);
    let rep = Report::new(r.clone(), Some(Path::new(BASELINES)));
    for (name, text) in [
        ("terminal", terminal::render(&r)),
        ("markdown", markdown::render(&r)),
        ("junit", junit::render(&r)),
        ("html", html::render(&rep)),
    ] {
        assert!(text.contains(&change), "{name} lacks {change}");
        assert!(text.contains(&cand), "{name} lacks {cand}");
    }
}

#[test]
fn hostile_text_is_escaped_in_every_markup_renderer() {
    let r = fixture();
    let rep = Report::new(r.clone(), Some(Path::new(BASELINES)));
    for (name, text) in [
        ("markdown", markdown::render(&r)),
        ("junit", junit::render(&r)),
        ("html", html::render(&rep)),
    ] {
        assert!(!text.contains("<script>"), "{name}");
        assert!(text.contains("&lt;script&gt;"), "{name}: shown, escaped");
    }
    assert!(
        !markdown::render(&r).contains("@admin"),
        "a mention in the PR comment"
    );
}

#[test]
fn html_draws_both_distributions_of_every_compared_scenario() {
    let rep = Report::new(fixture(), Some(Path::new(BASELINES)));
    let page = html::render(&rep);
    for s in ["chat-short", "chat-long", "flaky"] {
        let sec = page
            .split(&format!("<section class=\"scenario\" id=\"s-{s}\">"))
            .nth(1)
            .unwrap()
            .split("</section>")
            .next()
            .unwrap();
        assert_eq!(sec.matches("<svg").count(), 3, "{s}: TTFT, TPOT, ITL");
        assert_eq!(sec.matches("baseline (n=").count(), 3, "{s}");
        assert_eq!(sec.matches("candidate (n=").count(), 3, "{s}");
    }
    // no baseline: the candidate alone
    let sec = page.split("id=\"s-new-scenario\"").nth(1).unwrap();
    let sec = sec.split("</section>").next().unwrap();
    assert!(sec.contains("candidate (n=20)") && !sec.contains("baseline (n="));
    // self-contained: nothing to fetch
    for bad in [
        "src=\"http",
        "href=\"http",
        "url(",
        "@import",
        "<script",
        "<link rel=\"stylesheet\"",
    ] {
        assert!(!page.contains(bad), "{bad}");
    }
}

#[test]
fn html_says_why_when_the_baseline_is_not_the_one_compared() {
    // Without --baseline-dir the recorded paths are used (they exist here).
    let rep = Report::new(fixture(), None);
    assert!(rep.baselines.values().all(|b| b.is_ok()));
    // A directory without those files: the page says so and draws the candidate only.
    let dir = tempfile::tempdir().unwrap();
    let rep = Report::new(fixture(), Some(dir.path()));
    let page = html::render(&rep);
    assert!(page.contains("Baseline distributions not drawn"), "{page}");
    // A re-blessed baseline (another created_at) is not used.
    let text = std::fs::read_to_string(format!("{BASELINES}/chat-long.json")).unwrap();
    let mut b: serde_json::Value = serde_json::from_str(&text).unwrap();
    b["created_at"] = "2030-01-01T00:00:00Z".into();
    std::fs::write(
        dir.path().join("chat-long.json"),
        serde_json::to_string(&b).unwrap(),
    )
    .unwrap();
    let rep = Report::new(fixture(), Some(dir.path()));
    let why = rep.baselines["chat-long"].as_ref().unwrap_err();
    assert!(why.contains("2030-01-01T00:00:00Z"), "{why}");
}

#[test]
fn outputs_are_written_from_one_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let rep = Report::new(fixture(), Some(Path::new(BASELINES)));
    let (j, m, x, h) = (p("r.json"), p("sub/r.md"), p("r.xml"), p("r.html"));
    report::write_outputs(
        &rep,
        &report::Outputs {
            json: Some(&j),
            markdown: Some(&m),
            junit: Some(&x),
            html: Some(&h),
        },
    );
    assert_eq!(
        std::fs::read_to_string(&j).unwrap(),
        json::render(&rep.results)
    );
    assert_eq!(
        std::fs::read_to_string(&m).unwrap(),
        markdown::render(&rep.results)
    );
    assert_eq!(
        std::fs::read_to_string(&x).unwrap(),
        junit::render(&rep.results)
    );
    assert_eq!(std::fs::read_to_string(&h).unwrap(), html::render(&rep));
}

#[test]
fn merging_results_keeps_the_worst_verdict_and_refuses_duplicates() {
    let a = fixture();
    let mut b = fixture();
    for s in &mut b.scenarios {
        s.name = perfgate::config::ScenarioName::new(format!("{}-b", s.name)).unwrap();
    }
    b.verdict = perfgate::verdict::Overall::Pass;
    b.exit_code = 0;
    let m = json::merge(vec![b.clone(), a.clone()], &["b".into(), "a".into()]).unwrap();
    assert_eq!((m.verdict.as_str(), m.exit_code), ("FAIL", 1));
    assert_eq!(m.scenarios.len(), 8);
    assert_eq!(m.family_size, a.family_size + b.family_size);
    let e = json::merge(
        vec![a.clone(), a.clone()],
        &["x.json".into(), "y.json".into()],
    )
    .unwrap_err();
    assert!(e.contains("x.json") && e.contains("y.json"), "{e}");
    // The verdict and exit code are decided from the checks, never read from the file: a file
    // claiming PASS with exit code 256 for a FAIL check reads FAIL, exit 1.
    let mut liar = a.clone();
    liar.verdict = perfgate::verdict::Overall::Pass;
    liar.exit_code = 256;
    let m = json::merge(vec![liar], &["liar.json".into()]).unwrap();
    assert_eq!((m.verdict.as_str(), m.exit_code), ("FAIL", 1));
    // Scenarios without a baseline, allowed by --allow-missing-baseline, do not outrank a PASS;
    // under the default policy (in either file) they are exit 2.
    for s in &mut b.scenarios {
        for c in &mut s.checks {
            c.verdict = perfgate::gate::Verdict::Pass;
        }
    }
    b.baseline_policy = perfgate::verdict::BaselinePolicy::AllowMissing;
    let mut n = b.clone();
    for s in &mut n.scenarios {
        s.name = perfgate::config::ScenarioName::new(format!("{}n", s.name)).unwrap();
        s.status = perfgate::results::Status::NoBaseline;
        s.checks.clear();
    }
    let m = json::merge(vec![n.clone(), b.clone()], &["n".into(), "b".into()]).unwrap();
    assert_eq!((m.verdict.as_str(), m.exit_code), ("PASS", 0));
    b.baseline_policy = perfgate::verdict::BaselinePolicy::Required;
    let m = json::merge(vec![n, b], &["n".into(), "b".into()]).unwrap();
    assert_eq!((m.verdict.as_str(), m.exit_code), ("NO_BASELINE", 2));
}

/// Issue 32 item 2: the numbers of a row agree with each other in every renderer. A fail
/// tolerance widened to the drift (`14.2%*`) says from what, to what and why wherever the
/// tolerance appears; a P50 shift far from the ratio of its two P50 columns (406 -> 410 ms is
/// +1.0 %, the shift +12.3 %) shows both figures; the interval has one confidence name, the
/// checks' own 99 %, the level the reasons' "99% upper bound" uses (on main before this the
/// legend said "95 %" and nothing explained `*`).
#[test]
fn a_widened_tolerance_and_a_shift_apart_from_the_columns_are_explained_everywhere() {
    let mut r = fixture();
    let c = r
        .scenarios
        .iter_mut()
        .flat_map(|s| s.checks.iter_mut())
        .find(|c| c.kind == CheckKind::Quantile(Quantile::P50) && c.verdict == Verdict::Fail)
        .expect("a failing P50 check");
    c.baseline = Some(406.0);
    c.candidate = Some(410.0);
    c.ratio = Some(1.123);
    c.min_delta_ms = 5.0;
    c.fail_configured = Some(0.10);
    c.fail = 0.142;
    c.tau = Some(0.041);
    let name = format!("{} P50", c.metric.unwrap().label());
    let widened = format!(
        "* {name}: fail tolerance widened from 10% to 14.2% because the baseline's bless runs differ by tau 4.1% from run to run"
    );
    let apart = format!(
        "{name}: the change +12.3% is the typical per-request shift; the two P50 columns alone differ by +1.0%"
    );
    let level = "Each end of [CI] is a one-sided 99% confidence bound, the bound the reasons name";
    let text = terminal::render(&r);
    let md = markdown::render(&r);
    let page = html::render(&Report::new(r, Some(Path::new(BASELINES))))
        .replace("&#39;", "'")
        .replace("&quot;", "\"");
    assert!(text.contains("14.2%*"), "{text}");
    for (what, out) in [("terminal", &text), ("html", &page)] {
        assert!(out.contains(&widened), "{what}: {out}");
        assert!(out.contains(&apart), "{what}: {out}");
        assert!(out.contains(level), "{what}: {out}");
    }
    // Markdown escapes `*` and `[`: compare with the escapes taken out.
    let plain = md.replace('\\', "");
    assert!(plain.contains(&widened), "{md}");
    assert!(plain.contains(&apart), "{md}");
    assert!(plain.contains(level), "{md}");
    assert!(!md.contains("95 %"), "{md}");
}

/// Issue 32 item 7: a PR comment names no path in perfgate's per-run temp directory (a file
/// on a runner that is gone), and a server's log lines in a reason are lines under the
/// scenario's summary, not one escaped run-on line inside it.
#[test]
fn a_pr_comment_shows_a_servers_log_lines_once_without_runner_paths() {
    let mut r = fixture();
    let tmp = std::env::temp_dir();
    let log = tmp.join("perfgate-4242-0123456789abcdef/server-1-76ec.log");
    let s = &mut r.scenarios[0];
    s.status = perfgate::results::Status::Unmeasurable;
    s.status_detail = format!(
        "candidate arm: the server `srv` (pid 7) exited (exit code 1) before it was ready; log {}, last 2 line(s):\n  | main: loading model\n  | couldn't bind: Address already in use",
        log.display()
    );
    let md = markdown::render(&r);
    assert!(!md.contains("perfgate-4242-0123456789abcdef"), "{md}");
    assert!(
        md.contains("; log &lt;runner temp&gt;/server-1-76ec.log, last 2 line\\(s\\):</summary>"),
        "{md}"
    );
    assert!(
        md.contains("\n- couldn't bind: Address already in use\n"),
        "{md}"
    );
    assert_eq!(md.matches("Address already in use").count(), 1, "{md}");
}
