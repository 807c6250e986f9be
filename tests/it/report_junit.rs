//! perfgate's JUnit XML read by a real consumer: junitparser (PyPI), the JUnit reader CI result
//! publishers are built on, installed by `scripts/report-tools.sh setup` in a cached venv. The
//! parsed suites, testcases, failures (with their numbers), errors and skips must match the
//! results model they were rendered from.
//!
//! Skips with a message when the venv is missing, unless PERFGATE_REQUIRE_JUNITPARSER=1 (as in
//! scripts/test.sh). PERFGATE_JUNITPARSER_PYTHON names the venv's python.

use perfgate::gate::Verdict;
use perfgate::report::{fmt_change, fmt_check_name, fmt_value, json, junit};
use perfgate::results::{Results, Status};
use serde_json::Value;
use std::path::{Path, PathBuf};

const READER: &str = r#"
import json, sys
import xml.etree.ElementTree as ET
from junitparser import JUnitXml
xml = JUnitXml.fromfile(sys.argv[1])
# junitparser does not expose a suite's own <system-out>; read it with the standard library
suite_out = {s.get("name"): s.findtext("system-out") for s in ET.parse(sys.argv[1]).getroot()}
suites = []
for suite in xml:
    cases = []
    for case in suite:
        cases.append({
            "name": case.name, "classname": case.classname,
            "results": [[type(r).__name__, r.message, r.text] for r in case.result],
            "system_out": case.system_out,
        })
    suites.append({"name": suite.name, "tests": suite.tests, "failures": suite.failures,
                   "errors": suite.errors, "skipped": suite.skipped,
                   "properties": {p.name: p.value for p in suite.properties()},
                   "system_out": suite_out.get(suite.name), "cases": cases})
print(json.dumps({"name": xml.name, "tests": xml.tests, "failures": xml.failures,
                  "errors": xml.errors, "skipped": xml.skipped, "suites": suites}))
"#;

fn python() -> Option<PathBuf> {
    let p = match std::env::var_os("PERFGATE_JUNITPARSER_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("PERFGATE_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/perfgate"))
                })?;
            cache.join("venvs/report-tools/bin/python")
        }
    };
    if p.exists() {
        return Some(p);
    }
    crate::support::missing(
        "PERFGATE_REQUIRE_JUNITPARSER",
        &format!(
            "no junitparser venv at {} (scripts/report-tools.sh setup)",
            p.display()
        ),
    );
    None
}

/// Renders `r` to JUnit XML and returns what junitparser read from it.
fn parse(py: &Path, r: &Results) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let (xml, script) = (dir.path().join("r.xml"), dir.path().join("read.py"));
    std::fs::write(&xml, junit::render(r)).unwrap();
    std::fs::write(&script, READER).unwrap();
    let out = std::process::Command::new(py)
        .arg(&script)
        .arg(&xml)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "junitparser failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixture() -> Results {
    json::load(Path::new("tests/fixtures/results.json")).unwrap()
}

#[test]
fn junitparser_reads_every_check_with_its_numbers() {
    let Some(py) = python() else { return };
    let r = fixture();
    let got = parse(&py, &r);
    let suites = got["suites"].as_array().unwrap();
    assert_eq!(suites.len(), r.scenarios.len());
    let mut total = 0;
    for (s, suite) in r.scenarios.iter().zip(suites) {
        assert_eq!(suite["name"], s.name.as_str());
        let cases = suite["cases"].as_array().unwrap();
        let extra = usize::from(s.status != Status::Compared);
        assert_eq!(cases.len(), s.checks.len() + extra, "{}", s.name);
        assert_eq!(suite["tests"], cases.len());
        total += cases.len();
        assert_eq!(suite["properties"]["model"], s.model.as_str());
        for (c, case) in s.checks.iter().zip(cases) {
            assert_eq!(case["name"], fmt_check_name(c).as_str());
            assert_eq!(case["classname"], format!("perfgate.{}", s.name).as_str());
            let results = case["results"].as_array().unwrap();
            match c.verdict {
                Verdict::Fail => {
                    assert_eq!(results.len(), 1);
                    assert_eq!(results[0][0], "Failure");
                    let msg = results[0][1].as_str().unwrap();
                    let text = results[0][2].as_str().unwrap();
                    assert!(msg.contains(&fmt_change(c)), "{msg}");
                    for n in [fmt_value(c, c.baseline), fmt_value(c, c.candidate)] {
                        assert!(text.contains(&n), "{text} lacks {n}");
                    }
                }
                Verdict::Info => assert_eq!(results[0][0], "Skipped"),
                _ => {
                    assert!(results.is_empty(), "{case}");
                    let out = case["system_out"].as_str().unwrap();
                    assert!(out.contains(c.verdict.as_str()) && out.contains(&fmt_change(c)));
                }
            }
        }
    }
    assert_eq!(got["tests"], total);
    assert_eq!(got["failures"], r.count(Verdict::Fail));
    assert_eq!(got["errors"], 0);
    // the scenario without baseline is one skipped testcase, saying why
    let nb = suites.iter().find(|s| s["name"] == "new-scenario").unwrap();
    assert_eq!(nb["cases"][0]["results"][0][0], "Skipped");
    assert!(nb["cases"][0]["results"][0][1]
        .as_str()
        .unwrap()
        .starts_with("NO BASELINE: no baseline at"));
    // markup in a note comes back as the same text
    let flaky = suites.iter().find(|s| s["name"] == "flaky").unwrap();
    let note = &r
        .scenarios
        .iter()
        .find(|s| s.name == "flaky")
        .unwrap()
        .notes[0];
    assert!(flaky["system_out"]
        .as_str()
        .unwrap()
        .contains(note.text.as_str()));
}

#[test]
fn junitparser_sees_a_scenario_that_could_not_be_measured_as_an_error() {
    let Some(py) = python() else { return };
    let mut r = fixture();
    let s = r.scenarios.iter_mut().find(|s| s.name == "flaky").unwrap();
    s.status = Status::Unmeasurable;
    s.status_detail = "error rate 40.0% is above max_error_rate 30.0%".into();
    let got = parse(&py, &r);
    assert_eq!(got["errors"], 1);
    let flaky = got["suites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "flaky")
        .unwrap();
    let case = &flaky["cases"][0];
    assert_eq!(case["name"], "measure");
    assert_eq!(case["results"][0][0], "Error");
    assert!(case["results"][0][1]
        .as_str()
        .unwrap()
        .contains("above max_error_rate"));
}
