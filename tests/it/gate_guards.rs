//! Issue 26: what a deliberate attack on perfgate found, end to end on the built-in simulator.
//! A baseline `bless` writes is one `check` reads; `bless --from` refuses an interrupted run,
//! an arm too small to compare with and figures a check refuses; a check that could compare
//! nothing is not PASS; the early stop of a failing endpoint respects what the scenario
//! tolerates, so the same server does not exit 1 or 3 by chance.

use crate::support::{read_json as json, run_in as run};
use serde_json::Value;

fn dir_with(yaml: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.yaml"), yaml).unwrap();
    d
}

const HEALTHY: &str = "scenarios:\n  - name: chat\n    endpoint: {base_url: 'sim://?ttft_ms=30&tpot_ms=4&seed=7'}\n    request: {prompt: hi, max_tokens: 16}\n    load: {samples: 20, warmup: 1}\n";

/// A check's results of [`HEALTHY`] in `r.json`, edited by `edit`, then `bless --from r.json
/// --arm candidate`: its exit code and output.
fn bless_from_edited(edit: impl FnOnce(&mut Value)) -> (Option<i32>, String, tempfile::TempDir) {
    let d = dir_with(HEALTHY);
    let (code, text) = run(
        d.path(),
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
    let mut r = json(&d.path().join("r.json"));
    edit(&mut r);
    std::fs::write(d.path().join("r.json"), r.to_string()).unwrap();
    let (code, text) = run(
        d.path(),
        &[
            "bless",
            "--from",
            "r.json",
            "--arm",
            "candidate",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
        ],
    );
    (code, text, d)
}

/// Item 5: an interrupted run (`incomplete`) was blessed (exit 0), and a 5x slower server then
/// passed against it.
#[test]
fn bless_from_refuses_an_interrupted_run() {
    let (code, text, d) = bless_from_edited(|r| r["incomplete"] = Value::Bool(true));
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("not blessing chat from the candidate arm of r.json: that run was interrupted (the results are marked `incomplete`)"),
        "{text}"
    );
    assert!(!d.path().join("b/chat.json").exists());
}

/// Item 5: an arm of 1 request was blessed (exit 0); no latency check can compare with it.
#[test]
fn bless_from_refuses_an_arm_of_one_request() {
    let (code, text, d) = bless_from_edited(|r| {
        let recs = r["scenarios"][0]["records"].as_array_mut().unwrap();
        recs.truncate(1);
    });
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("the candidate arm measured 1 request(s): a baseline needs at least 20"),
        "{text}"
    );
    assert!(!d.path().join("b/chat.json").exists());
}

/// Item 2: records with `ttft_ms: -1` were copied into a baseline (exit 0) that every later
/// check refused (exit 2). Now the bless refuses, naming the field, and writes nothing.
#[test]
fn bless_from_refuses_figures_a_check_would_refuse() {
    let (code, text, d) =
        bless_from_edited(|r| r["scenarios"][0]["records"][3]["ttft_ms"] = Value::from(-1.0));
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("scenario chat: the candidate arm of r.json holds figures a baseline cannot: the baseline would not read back: runs[0].records[3].ttft_ms is -1: it must be a number of ms >= 0"),
        "{text}"
    );
    assert!(!d.path().join("b/chat.json").exists());
}

/// Item 5: a baseline with 1 successful request made every latency check INFO ("not
/// compared") and the check PASS (exit 0). A gate that cannot compare never passes silently.
#[test]
fn a_check_that_could_compare_nothing_is_not_pass() {
    let d = dir_with(HEALTHY);
    let (code, text) = run(
        d.path(),
        &["bless", "-s", "s.yaml", "--baselines", "b", "--runs", "1"],
    );
    assert_eq!(code, Some(0), "{text}");
    // Hand-edit it to one successful request of 20 (the others failed), summary to match.
    let path = d.path().join("b/chat.json");
    let mut b = perfgate::baseline::parse(
        &std::fs::read_to_string(&path).unwrap(),
        &Default::default(),
    )
    .unwrap();
    for r in b.runs[0].records.iter_mut().skip(1) {
        r.error = Some(perfgate::record::FailureClass::HttpStatus);
    }
    let all: Vec<_> = b.records().cloned().collect();
    b.summary = perfgate::baseline::summaries(&all);
    std::fs::write(&path, perfgate::baseline::encode(&b).unwrap()).unwrap();
    let (code, text) = run(
        d.path(),
        &[
            "check",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
            "--output",
            "r.json",
        ],
    );
    let r = json(&d.path().join("r.json"));
    assert_eq!(code, Some(3), "{text}");
    assert_eq!(r["verdict"], "ERROR", "{text}");
    let s = &r["scenarios"][0];
    assert_eq!(s["status"], "unmeasurable");
    assert_eq!(
        s["status_detail"],
        "no latency check could compare, so nothing was gated (TTFT P50: not compared: 1 baseline and 20 candidate values (successful requests where the metric is defined; TPOT needs 2 or more output tokens))"
    );
}

/// The first seed under which the simulator fails its generation requests 0..6 at
/// `error_rate` (so whatever order 4 concurrent requests arrive in, the first 6 all fail).
fn seed_failing_first(error_rate: f64, n: u64) -> u64 {
    (0..10_000)
        .find(|&seed| {
            let cfg = perfgate::sim::config::SimConfig::from_query(&format!(
                "error_rate={error_rate}&seed={seed}"
            ))
            .unwrap();
            (0..n).all(|seq| perfgate::sim::schedule::RequestPlan::new(&cfg, seq, 8).fails)
        })
        .expect("a seed")
}

/// Item 4: the run stopped as unreachable after its first `concurrency + 2` failures
/// whatever the scenario tolerated, so a server failing 60 % of requests under an error-rate
/// objective exited 3 when its first 6 failures came together and 1 otherwise. It is now
/// measured to the end and judged by the objective (exit 1); with the default
/// `max_error_rate` 0 it still stops early (any failure is could-not-measure either way).
/// `ramp: burst`: every request sent is measured, so the seed's first 6 failing requests are
/// the first 6 measured (the steady state's ramp-up would send, and not measure, 4 of them).
#[test]
fn the_early_stop_respects_what_the_scenario_tolerates() {
    let seed = seed_failing_first(0.6, 6);
    let yaml = |gate: &str| {
        format!(
            "scenarios:\n  - name: flaky\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1&error_rate=0.6&seed={seed}'}}\n    request: {{prompt: hi, max_tokens: 8}}\n    load: {{samples: 20, warmup: 0, concurrency: 4, ramp: burst}}\n{gate}"
        )
    };
    let d = dir_with(&yaml("    gate: {slo: {error_rate: 10%}}\n"));
    let (code, text) = run(
        d.path(),
        &[
            "check",
            "-s",
            "s.yaml",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ],
    );
    let r = json(&d.path().join("r.json"));
    let s = &r["scenarios"][0];
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(s["records"].as_array().unwrap().len(), 20, "{text}");
    let errors = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "error_slo")
        .unwrap();
    assert_eq!(errors["verdict"], "FAIL", "{errors}");

    let d = dir_with(&yaml(""));
    let (code, text) = run(
        d.path(),
        &[
            "check",
            "-s",
            "s.yaml",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ],
    );
    let r = json(&d.path().join("r.json"));
    let s = &r["scenarios"][0];
    assert_eq!(code, Some(3), "{text}");
    // Stopped after the first 6 failures (requests in flight then still end).
    let n = s["records"].as_array().unwrap().len();
    assert!((6..=10).contains(&n), "{n} requests");
    assert_eq!(s["status"], "unmeasurable");
}
