//! Speculative decoding accounting (issue 44 part 2) on the built-in simulator: the per-request
//! draft counts (`draft_n`, `accept_rate`: llama.cpp's `timings.draft_n` / `draft_n_accepted`),
//! the acceptance rate and mean acceptance length a scenario reports, and `gate.acceptance`.

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

/// sum(accepted) / sum(drafted) over a scenario's records, computed here from the records.
fn pooled_from_records(s: &Value) -> (u64, u64) {
    let mut sums = (0, 0);
    for rec in s["records"].as_array().unwrap() {
        let d = &rec["draft"];
        assert!(d.is_object(), "every request has its counts: {rec}");
        sums.0 += d["accepted"].as_u64().unwrap();
        sums.1 += d["drafted"].as_u64().unwrap();
    }
    sums
}

/// 16 tokens a request, 4 draft tokens a step. Every draft accepted: after the prefill's token,
/// steps of 4 + 1 with 15, 10 and 5 tokens to go: 12 drafted, 12 accepted, 16 tokens in
/// 16 - 12 = 4 target steps: rate 100%, mean acceptance length 16 / 4 = 4.00. None accepted:
/// each step drafts min(4, r - 1) with r = 15..=1 to go, 11 x 4 + 3 + 2 + 1 = 50 drafted, 0
/// accepted: rate 0%, mean length 16 / 16 = 1.00. 20 requests each: 240/240 and 0/1000.
#[test]
fn acceptance_rate_and_mean_length_known_answers() {
    let d = tempfile::tempdir().unwrap();
    let yaml = "defaults:\n  request: {prompt: hi, max_tokens: 16}\n  load: {samples: 20, warmup: 1}\nscenarios:\n  - name: all\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&draft_n=4&accept_rate=1'}\n  - name: none\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&draft_n=4&accept_rate=0'}\n  - name: plain\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n";
    let (code, text, r) = run(
        d.path(),
        yaml,
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
    let sc = |i: usize| &r["scenarios"][i];
    let all = &sc(0)["speculative"]["candidate"];
    assert_eq!(all["source"], "requests");
    assert_eq!(all["requests"], 20);
    assert_eq!(
        (all["drafted"].as_u64(), all["accepted"].as_u64()),
        (Some(240), Some(240))
    );
    assert_eq!(all["rate"].as_f64(), Some(1.0));
    assert_eq!(all["mean_length"].as_f64(), Some(4.0));
    for rec in sc(0)["records"].as_array().unwrap() {
        assert_eq!(
            rec["draft"],
            serde_json::json!({"drafted": 12, "accepted": 12})
        );
    }
    let none = &sc(1)["speculative"]["candidate"];
    assert_eq!(
        (none["drafted"].as_u64(), none["accepted"].as_u64()),
        (Some(1000), Some(0))
    );
    assert_eq!(none["rate"].as_f64(), Some(0.0));
    assert_eq!(none["mean_length"].as_f64(), Some(1.0));
    // a server that does not draft: nothing reported, no line
    assert!(sc(2)["speculative"].is_null(), "{}", sc(2));
    assert!(
        text.contains("speculative decoding: acceptance 100.0% (240/240 draft tokens, 20 requests), mean acceptance length 4.00 tokens"),
        "{text}"
    );
}

/// `gate.acceptance`: a candidate whose draft tokens are accepted half as often (0.4 against
/// 0.8, seeded) and that decodes 30 % slower per token FAILs on the acceptance rate, and its
/// TPOT FAIL names the acceptance in "where the time went"; the rate reported is
/// sum(accepted) / sum(drafted) of the records.
#[test]
fn a_drop_of_the_acceptance_rate_fails_gate_acceptance_and_explains_tpot() {
    let d = tempfile::tempdir().unwrap();
    let yaml = "defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 32}\n  load: {samples: 20, warmup: 2}\n  gate: {acceptance: {max_drop: 5%}}\nscenarios:\n  - name: spec\n";
    let (code, text, r) = run(
        d.path(),
        yaml,
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            "sim://?ttft_ms=20&tpot_ms=4&seed=7&draft_n=4&accept_rate=0.8",
            "--candidate-url",
            "sim://?ttft_ms=20&tpot_ms=5.2&seed=8&draft_n=4&accept_rate=0.4",
            "--output",
            "r.json",
            "--markdown",
            "r.md",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    let s = &r["scenarios"][0];
    let acc = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "acceptance_rate")
        .unwrap_or_else(|| panic!("no acceptance check: {s}"));
    assert_eq!(acc["verdict"], "FAIL", "{acc}");
    let (accepted, drafted) = pooled_from_records(s);
    let rate = accepted as f64 / drafted as f64;
    let reported = s["speculative"]["candidate"]["rate"].as_f64().unwrap();
    assert!(
        (reported - rate).abs() < 1e-12,
        "{reported} vs {accepted}/{drafted}"
    );
    assert_eq!(acc["candidate"].as_f64(), Some(reported));
    // a draft token is accepted with chance p when the ones before it were: a step of 4
    // accepts p + p^2 + p^3 + p^4 on average, a rate of 0.65 / 4 = 0.16 at p = 0.4 and
    // 2.36 / 4 = 0.59 at p = 0.8 (fewer drafted at the end of a request)
    assert!((0.08..0.26).contains(&rate), "{rate}");
    let base = s["speculative"]["reference"]["rate"].as_f64().unwrap();
    assert!((0.48..0.72).contains(&base), "{base}");
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("where the time went: TPOT P50 FAIL")
                && n.contains("speculative decoding accepted")),
        "{notes:?}"
    );
    let md = std::fs::read_to_string(d.path().join("r.md")).unwrap();
    assert!(md.contains("speculative decoding: acceptance"), "{md}");
}
