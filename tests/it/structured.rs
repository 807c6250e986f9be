//! Structured output and tool calls under load (issue 44 part 4) on the built-in simulator: a
//! scenario that offers `tools` or asks for `response_format` records per request whether the
//! answer parsed; the parse rate is reported, and a significant increase of the answers that do
//! not parse FAILs like more failed requests do, whatever the latency says.

use crate::support::perfgate_in;
use serde_json::Value;
use std::path::Path;

fn run(dir: &Path, yaml: &str, args: &[&str]) -> (Option<i32>, String, Value) {
    std::fs::write(dir.join("s.yaml"), yaml).unwrap();
    let _ = std::fs::remove_file(dir.join("r.json"));
    let o = perfgate_in(dir, 180).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = std::fs::read_to_string(dir.join("r.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    if !r.is_null() {
        let v = crate::report_schema::validator();
        let errors = crate::report_schema::errors(&v, &r);
        assert!(errors.is_empty(), "{errors:?}");
    }
    (o.status.code(), text, r)
}

const TOOLS: &str = "{tools: [{type: function, function: {name: weather, parameters: {type: object, required: [answer], properties: {answer: {type: string}}}}}]}";

/// Every answer a tool call with whole arguments: 20 of 20 parsed (100%). Every one cut before
/// its closing brace (`malformed=1`): 0 of 20, all `arguments_not_json`. A JSON schema whose
/// required key the simulator's `{"answer": ...}` lacks: 0 of 20, `schema_mismatch`; one it
/// has: 20 of 20. TTFT and TPOT are measured on those requests all the same.
#[test]
fn parse_rate_known_answers() {
    let d = tempfile::tempdir().unwrap();
    let yaml = format!(
        "defaults:\n  request: {{prompt: hi, max_tokens: 8}}\n  load: {{samples: 20, warmup: 1}}\nscenarios:\n  - name: tools-ok\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1'}}\n    request: {{extra_body: {TOOLS}}}\n  - name: tools-cut\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1&malformed=1'}}\n    request: {{extra_body: {TOOLS}}}\n  - name: schema-missing\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1'}}\n    request: {{extra_body: {{response_format: {{type: json_schema, json_schema: {{name: r, schema: {{type: object, required: [city]}}}}}}}}}}\n  - name: schema-ok\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1'}}\n    request: {{extra_body: {{response_format: {{type: json_schema, json_schema: {{name: r, schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}}}}}}}}}}}}}\n"
    );
    let (code, text, r) = run(
        d.path(),
        &yaml,
        &[
            "check",
            "-s",
            "s.yaml",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let st = |i: usize| &r["scenarios"][i]["structured"];
    let counts = |i: usize| {
        (
            st(i)["parsed"].as_u64(),
            st(i)["checked"].as_u64(),
            st(i)["rate"].as_f64(),
        )
    };
    assert_eq!(counts(0), (Some(20), Some(20), Some(1.0)), "{}", st(0));
    assert_eq!(counts(1), (Some(0), Some(20), Some(0.0)), "{}", st(1));
    assert_eq!(st(1)["failures"]["arguments_not_json"], 20);
    assert_eq!(counts(2), (Some(0), Some(20), Some(0.0)), "{}", st(2));
    assert_eq!(st(2)["failures"]["schema_mismatch"], 20);
    assert_eq!(counts(3), (Some(20), Some(20), Some(1.0)), "{}", st(3));
    for i in 0..4 {
        let s = &r["scenarios"][i];
        for rec in s["records"].as_array().unwrap() {
            assert!(rec["structured"].is_string(), "{rec}");
            assert!(rec["tpot_ms"].as_f64().unwrap() > 0.0, "{rec}");
        }
    }
    assert_eq!(
        r["scenarios"][1]["records"][0]["structured"],
        "arguments_not_json"
    );
    assert!(
        text.contains(
            "structured output: 0 of 20 answers parsed (0.0%); not: arguments_not_json 20"
        ),
        "{text}"
    );
}

/// A candidate twice as fast per token whose tool calls break (80 % of them cut, seeded) must
/// not PASS as IMPROVED: TPOT is IMPROVED, the parse-failure check FAILs (0 of 20 against about
/// 16 of 20, one-sided Fisher p ~ 1e-8), and the run FAILs with exit 1.
#[test]
fn a_faster_candidate_with_broken_tool_calls_fails() {
    let d = tempfile::tempdir().unwrap();
    let yaml = format!(
        "defaults:\n  endpoint: {{base_url: 'sim://?seed=1', model: perfgate-sim}}\n  request: {{prompt: hi, max_tokens: 16, extra_body: {TOOLS}}}\n  load: {{samples: 20, warmup: 2}}\nscenarios:\n  - name: tools\n"
    );
    let (code, text, r) = run(
        d.path(),
        &yaml,
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            "sim://?ttft_ms=20&tpot_ms=6&seed=7",
            "--candidate-url",
            "sim://?ttft_ms=20&tpot_ms=3&seed=8&malformed=0.8",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(r["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    let check = |pred: &dyn Fn(&Value) -> bool| {
        s["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| pred(c))
            .cloned()
            .unwrap_or_else(|| panic!("no such check in {s}"))
    };
    let tpot = check(&|c| c["metric"] == "tpot" && c["kind"]["quantile"] == "p50");
    assert_eq!(tpot["verdict"], "IMPROVED", "{tpot}");
    let parse = check(&|c| c["kind"] == "parse_rate");
    assert_eq!(parse["verdict"], "FAIL", "{parse}");
    assert_eq!(parse["baseline"].as_f64(), Some(0.0));
    // the share it reports is the records' own
    let recs = s["records"].as_array().unwrap();
    let broken = recs.iter().filter(|x| x["structured"] != "ok").count();
    assert_eq!(parse["candidate"].as_f64(), Some(broken as f64 / 20.0));
    assert!((10..=20).contains(&broken), "{broken}");
    assert_eq!(s["structured"]["parsed"].as_u64(), Some(20 - broken as u64));
}

/// Against a committed baseline: `bless` keeps each request's parse outcome (`structured` in the
/// baseline's records), and a `check` whose tool calls now break (80 % cut, seeded) FAILs on
/// parse failures, 0 of 20 against about 16 of 20.
#[test]
fn a_baseline_keeps_the_outcomes_and_check_gates_them() {
    let d = tempfile::tempdir().unwrap();
    let yaml = format!(
        "scenarios:\n  - name: tools\n    endpoint: {{base_url: 'sim://?ttft_ms=10&tpot_ms=2&seed=3&malformed=${{M}}', model: perfgate-sim}}\n    request: {{prompt: hi, max_tokens: 8, extra_body: {TOOLS}}}\n    load: {{samples: 20, warmup: 1}}\n"
    );
    std::fs::write(d.path().join("s.yaml"), &yaml).unwrap();
    let o = perfgate_in(d.path(), 180)
        .args(["bless", "-s", "s.yaml", "--runs", "1"])
        .env("M", "0")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let b: Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("baselines/tools.json")).unwrap(),
    )
    .unwrap();
    let recs = b["runs"][0]["records"].as_array().unwrap();
    assert_eq!(recs.len(), 20);
    assert!(recs.iter().all(|r| r["structured"] == "ok"), "{recs:?}");
    let o = perfgate_in(d.path(), 180)
        .args(["check", "-s", "s.yaml", "--output", "r.json"])
        .env("M", "0.8")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(1), "{text}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("r.json")).unwrap()).unwrap();
    let parse = r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "parse_rate")
        .cloned()
        .unwrap_or_else(|| panic!("no parse check: {text}"));
    assert_eq!(parse["verdict"], "FAIL", "{parse}");
    assert_eq!(parse["baseline"].as_f64(), Some(0.0));
}
