//! The results JSON and its documented schema (schema/results.schema.json) cannot drift apart:
//! real output of `perfgate check` against the built-in simulator (a compared scenario, one
//! without baseline, one that cannot be measured) and the snapshot fixture are validated with the
//! `jsonschema` crate (JSON Schema 2020-12, formats checked). The schema forbids unknown fields,
//! so a new field in `Results` fails here until the schema documents it.

use perfgate::results::RESULTS_SCHEMA_VERSION;
use serde_json::Value;

fn schema() -> Value {
    let text = std::fs::read_to_string("schema/results.schema.json").expect("schema file");
    serde_json::from_str(&text).expect("schema is JSON")
}

pub(crate) fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("a valid JSON Schema 2020-12")
}

pub(crate) fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn the_schema_is_versioned_like_the_results() {
    let s = schema();
    assert_eq!(
        s["properties"]["schema_version"]["const"],
        Value::from(RESULTS_SCHEMA_VERSION)
    );
    let id = s["$id"].as_str().unwrap();
    assert!(
        id.ends_with(&format!(":{RESULTS_SCHEMA_VERSION}")),
        "$id {id} names the version"
    );
}

#[test]
fn the_fixture_validates() {
    let text = std::fs::read_to_string("tests/fixtures/results.json").unwrap();
    let inst: Value = serde_json::from_str(&text).unwrap();
    let errs = errors(&validator(), &inst);
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn the_schema_rejects_what_it_does_not_document() {
    let v = validator();
    let text = std::fs::read_to_string("tests/fixtures/results.json").unwrap();
    let good: Value = serde_json::from_str(&text).unwrap();
    let mut extra = good.clone();
    extra["scenarios"][0]["surprise"] = Value::from(1);
    assert!(!errors(&v, &extra).is_empty(), "an undocumented field");
    let mut verdict = good.clone();
    verdict["scenarios"][1]["checks"][3]["verdict"] = Value::from("MAYBE");
    assert!(!errors(&v, &verdict).is_empty(), "an unknown verdict");
    let mut date = good;
    date["created_at"] = Value::from("yesterday");
    assert!(
        !errors(&v, &date).is_empty(),
        "a created_at that is no date-time"
    );
}

// The prefix-cache fields of a record (src/record.rs `cached_tokens`, `cached_source`) and
// their note are documented; a source perfgate does not write is refused.
#[test]
fn the_cached_prompt_fields_validate() {
    let v = validator();
    let text = std::fs::read_to_string("tests/fixtures/results.json").unwrap();
    let mut inst: Value = serde_json::from_str(&text).unwrap();
    let rec = &mut inst["scenarios"][0]["records"][0];
    rec["cached_tokens"] = Value::from(4);
    rec["cached_source"] = Value::from("server_timings");
    rec["stream_notes"] = serde_json::json!(["cached_above_prompt"]);
    let errs = errors(&v, &inst);
    assert!(errs.is_empty(), "{errs:#?}");
    inst["scenarios"][0]["records"][0]["cached_source"] = Value::from("events");
    assert!(!errors(&v, &inst).is_empty(), "an unknown cached source");
}

// Issue 44: a record's draft counts and parse outcome, a scenario's speculative decoding and
// parse rate are documented; a parse outcome or an acceptance source perfgate does not write is
// refused.
#[test]
fn the_speculative_and_structured_fields_validate() {
    let v = validator();
    let text = std::fs::read_to_string("tests/fixtures/results.json").unwrap();
    let mut inst: Value = serde_json::from_str(&text).unwrap();
    let s = &mut inst["scenarios"][0];
    s["records"][0]["draft"] = serde_json::json!({"drafted": 12, "accepted": 9});
    s["records"][0]["structured"] = Value::from("arguments_not_json");
    let acc = serde_json::json!({"source": "requests", "requests": 20, "without_counts": 1, "drafted": 240, "accepted": 180, "rate": 0.75, "mean_length": 3.1});
    s["speculative"] = serde_json::json!({"candidate": acc, "reference": acc});
    s["structured"] = serde_json::json!({"checked": 20, "parsed": 18, "rate": 0.9, "failures": {"arguments_not_json": 2}});
    let errs = errors(&v, &inst);
    assert!(errs.is_empty(), "{errs:#?}");
    let mut bad = inst.clone();
    bad["scenarios"][0]["records"][0]["structured"] = Value::from("maybe");
    assert!(!errors(&v, &bad).is_empty(), "an unknown parse outcome");
    let mut bad = inst.clone();
    bad["scenarios"][0]["speculative"]["candidate"]["source"] = Value::from("guess");
    assert!(!errors(&v, &bad).is_empty(), "an unknown acceptance source");
    let mut bad = inst;
    bad["scenarios"][0]["structured"]["failures"]["maybe"] = Value::from(1);
    assert!(!errors(&v, &bad).is_empty(), "an unknown failure name");
}

#[test]
fn real_check_output_validates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("s.yaml"),
        r#"
defaults:
  endpoint: {base_url: "sim://?ttft_ms=5&tpot_ms=1&seed=4", model: perfgate-sim}
  request: {prompt: hi, max_tokens: 4, ignore_eos: true}
  load: {samples: 20, warmup: 1}
scenarios:
  - name: compared
  - name: no-baseline
  - name: broken
    endpoint: {base_url: "sim://?ttft_ms=5&tpot_ms=1&error_rate=1"}
"#,
    )
    .unwrap();
    let s = d.join("s.yaml");
    let b = d.join("baselines");
    crate::support::perfgate()
        .args(["bless", "--runs", "1", "--only", "compared", "-s"])
        .arg(&s)
        .arg("--baselines")
        .arg(&b)
        .assert()
        .code(0);
    let out = d.join("out/results.json");
    let (junit, html) = (d.join("out/r.xml"), d.join("out/r.html"));
    crate::support::perfgate()
        .env_remove("GITHUB_ACTIONS")
        .args(["check", "--allow-missing-baseline", "-s"])
        .arg(&s)
        .arg("--baselines")
        .arg(&b)
        .arg("--output")
        .arg(&out)
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&html)
        .assert()
        .code(3); // `broken` could not be measured
    let inst: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let statuses: Vec<&str> = inst["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["compared", "no_baseline", "unmeasurable"]);
    let errs = errors(&validator(), &inst);
    assert!(errs.is_empty(), "{errs:#?}");
    // the other formats came from the same run
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("<testsuite name=\"broken\"")
            && x.contains("<error message=\"COULD NOT MEASURE")
    );
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("id=\"s-compared\"") && h.contains("baseline (n=20)"));
}

/// Writes `yaml` to `dir`/s.yaml and runs perfgate there with `args` (bounded at 180 s); returns
/// the exit code, stdout + stderr, and `r.json` when the run wrote one, validated against the
/// results schema (`Value::Null` when it wrote none).
pub(crate) fn run_validated(
    dir: &std::path::Path,
    yaml: &str,
    args: &[&str],
) -> (Option<i32>, String, Value) {
    std::fs::write(dir.join("s.yaml"), yaml).unwrap();
    let _ = std::fs::remove_file(dir.join("r.json"));
    let o = crate::support::perfgate_in(dir, 180)
        .args(args)
        .output()
        .unwrap();
    let text = crate::support::output_text(&o);
    let r: Value = std::fs::read_to_string(dir.join("r.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    if !r.is_null() {
        let errors = errors(&validator(), &r);
        assert!(errors.is_empty(), "{errors:?}");
    }
    (o.status.code(), text, r)
}
