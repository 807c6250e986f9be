//! Paired P50 (issue 43): a prompt set sends the same requests in the same order at bless, at
//! check and in both arms of `perfgate ab`, so the TTFT P50 is tested on the per-request log
//! ratios (signed-rank) rather than on two pooled samples whose spread is the prompts' own.
//! 24 prompts of 4 to 300 words on the simulator, TTFT = drawn ~5 ms + 1 ms per prompt word
//! (9 to 305 ms); a prefill 30 % slower (1.3 ms per word) is about +27 % at the median prompt
//! (~45 words: 50 to 63.5 ms, beyond the 5 ms min_delta).

use crate::support::{read_json as json, run_in as run};
use serde_json::Value;

const SIM: &str = "sim://?ttft_ms=5&tpot_ms=1&ttft_per_token_ms=1";
const SLOWER: &str = "sim://?ttft_ms=5&tpot_ms=1&ttft_per_token_ms=1.3";

/// 24 prompts of round(4 x 75^(i/23)) words: 4 ... 300.
fn prompts() -> String {
    (0..24)
        .map(|i| {
            let words = (4.0 * 75f64.powf(i as f64 / 23.0)).round() as usize;
            let text: Vec<String> = (0..words).map(|w| format!("w{i}x{w}")).collect();
            format!("{}\n", serde_json::json!({ "prompt": text.join(" ") }))
        })
        .collect()
}

fn yaml(url: &str) -> String {
    format!(
        "scenarios:\n  - name: mix\n    endpoint: {{base_url: '{url}', model: perfgate-sim}}\n    request:\n      prompt_set: {{file: prompts/mix24.jsonl, seed: 3}}\n      max_tokens: 2\n    load: {{samples: 24, warmup: 2}}\n    gate: {{metrics: [ttft]}}\n"
    )
}

fn project(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios/prompts")).unwrap();
    std::fs::write(dir.path().join("scenarios/prompts/mix24.jsonl"), prompts()).unwrap();
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml(url)).unwrap();
    dir
}

fn ttft_p50(r: &Value) -> Value {
    r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "ttft" && c["kind"]["quantile"] == "p50")
        .unwrap()
        .clone()
}

#[test]
fn a_prompt_mix_is_tested_paired_a_a_passes_and_a_30_percent_slower_prefill_fails() {
    let dir = project(SIM);
    let (code, text) = run(dir.path(), &["bless"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(dir.path(), &["check", "--output", "r.json"]);
    assert_eq!(code, Some(0), "{text}");
    let p50 = ttft_p50(&json(&dir.path().join("r.json")));
    assert_eq!(p50["test"], "paired_signed_rank", "{p50}");
    assert!(
        p50["reason"]
            .as_str()
            .unwrap()
            .contains("paired over 24 matched requests"),
        "{p50}"
    );
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml(SLOWER)).unwrap();
    let (code, text) = run(dir.path(), &["check", "--output", "r.json"]);
    assert_eq!(code, Some(1), "{text}");
    let p50 = ttft_p50(&json(&dir.path().join("r.json")));
    assert_eq!(
        (&p50["verdict"], &p50["test"]),
        (&"FAIL".into(), &"paired_signed_rank".into()),
        "{p50}"
    );
    // The row names the check and says how it was tested.
    assert!(text.contains("TTFT P50"), "{text}");
    assert!(text.contains("] paired"), "{text}");
}

#[test]
fn ab_arms_sending_the_same_prompt_mix_are_tested_paired() {
    let dir = project(SIM);
    let ab = |cand: &str| {
        run(
            dir.path(),
            &[
                "ab",
                "-s",
                "scenarios/s.yaml",
                "--base-url",
                SIM,
                "--candidate-url",
                cand,
                "--output",
                "r.json",
            ],
        )
    };
    // Both arms are in-process simulators, on this machine: they take turns (issue 43).
    let no_overlap = |r: &Value| {
        let o = &r["scenarios"][0]["ab"]["overlap"];
        assert_eq!(
            (&o["alternated"], &o["share"]),
            (&true.into(), &0.0.into()),
            "{o}"
        );
    };
    let (code, text) = ab(SIM);
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    no_overlap(&r);
    let p50 = ttft_p50(&r);
    assert_eq!(p50["test"], "paired_signed_rank", "{p50}");
    let ratio = p50["ratio"].as_f64().unwrap();
    eprintln!("ab A/A: TTFT P50 ratio {ratio:.4}, exit 0");
    assert!((0.95..1.05).contains(&ratio), "A/A: {p50}");
    let (code, text) = ab(SLOWER);
    assert_eq!(code, Some(1), "{text}");
    let r = json(&dir.path().join("r.json"));
    no_overlap(&r);
    let p50 = ttft_p50(&r);
    assert_eq!(
        (&p50["verdict"], &p50["test"]),
        (&"FAIL".into(), &"paired_signed_rank".into()),
        "{p50}"
    );
    // per prompt (5 + 1.3 w) / (5 + w): +8 % at 4 words, +26 % at the middle one (35), +29.5 % at
    // 300; the paired estimate is the typical per-request shift
    let ratio = p50["ratio"].as_f64().unwrap();
    eprintln!(
        "ab +30 % prefill: TTFT P50 ratio {ratio:.4} {}, exit 1",
        p50["ci"]
    );
    assert!((1.18..1.34).contains(&ratio), "+30 % prefill: {p50}");
    assert!(text.contains("FAIL TTFT P50"), "{text}");
}
