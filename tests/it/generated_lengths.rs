//! Generated lengths (issue 31, `request.generate`): input and output lengths drawn per request
//! from stated distributions, each request's prompt the synthetic prompt scaled by a line
//! fitted to the server's count. On the built-in simulator (one token a word, exactly
//! `max_tokens` generated) every request's counts equal its drawn lengths.

use crate::support::{read_json as json, run_in as run};
use serde_json::Value;

const GEN: &str = "scenarios:\n  - name: gen\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request:\n      generate:\n        input_tokens: {distribution: lognormal, median: 200, sigma: 0.8, min: 20, max: 2000}\n        output_tokens: {distribution: uniform, min: 4, max: 32}\n        seed: 5\n      ignore_eos: true\n    load: {samples: 20, warmup: 2}\n";

fn project(yaml: &str) -> tempfile::TempDir {
    crate::support::project(yaml, "", "", &[])
}

/// (index, prompt id, drawn input, max_tokens, prompt tokens, output tokens), by index.
fn requests(records: &Value) -> Vec<(u64, String, u64, u64, u64, u64)> {
    let mut v: Vec<_> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let w = &r["work"];
            assert!(w.get("entry").is_none());
            (
                w["index"].as_u64().unwrap(),
                w["prompt_id"].as_str().unwrap().to_string(),
                w["input_tokens"].as_u64().unwrap(),
                w["max_tokens"].as_u64().unwrap(),
                r["prompt_tokens"].as_u64().unwrap(),
                r["output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn generated_lengths_bless_and_check_the_same_requests() {
    let dir = project(GEN);
    let (code, text) = run(dir.path(), &["bless", "--runs", "2", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(dir.path(), &["check", "--output", "r.json"]);
    assert_eq!(code, Some(0), "{text}");
    let b = json(&dir.path().join("baselines/gen.json"));
    let r = json(&dir.path().join("r.json"));
    let errors = crate::report_schema::errors(&crate::report_schema::validator(), &r);
    assert!(errors.is_empty(), "{errors:?}");
    let s = &r["scenarios"][0];
    let checked = requests(&s["records"]);
    for run in b["runs"].as_array().unwrap() {
        assert_eq!(requests(&run["records"]), checked);
    }
    // request g's lengths are the seed's draw for index g
    let sc = perfgate::config::parse_str(GEN, "s.yaml", &|_| None).unwrap();
    let g = sc[0].request.generate.clone().unwrap();
    assert_eq!(checked.len(), 20);
    for (k, (index, _, input, max_tokens, prompt, output)) in checked.iter().enumerate() {
        let d = g.draw(perfgate::config::common::Slot::Measured(k));
        assert_eq!(*index, k as u64);
        assert_eq!(
            (*input, *max_tokens),
            (
                u64::from(d.input_tokens),
                u64::from(d.output_tokens.unwrap())
            )
        );
        assert!((20..=2000).contains(input) && (4..=32).contains(max_tokens));
        // the simulator's count: the fitted prompt has exactly the drawn length
        assert_eq!(*prompt, *input, "request {k}");
        assert_eq!(*output, *max_tokens, "request {k}");
    }
    // By hand on the simulator: the prompt is a 10-word head plus filler words, one token each,
    // so the line through the two fits is 10 + 1 x words.
    let notes = s["notes"].to_string();
    assert!(
        notes.contains("each request's prompt has (tokens - 10.0) / 1.000 filler words"),
        "{notes}"
    );
    assert!(
        notes.contains("prompt lengths: the server counted each request's prompt length within 0.0 % (median), 0.0 % (P90), 0.0 % (max) over 20 requests (20 exactly)"),
        "{notes}"
    );
    assert!(
        !notes.contains("different number of output tokens"),
        "{notes}"
    );
    println!(
        "drawn (input, output) per request, bless = check: {:?}",
        checked.iter().map(|c| (c.2, c.3)).collect::<Vec<_>>()
    );
}

#[test]
fn a_changed_distribution_is_a_stale_baseline_and_bad_keys_are_named() {
    let dir = project(GEN);
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("generated lengths: input lognormal (median 200, sigma 0.8, 20..=2000), output uniform (4..=32), seed 5"),
        "{text}"
    );
    let (code, text) = run(dir.path(), &["bless", "--runs", "1", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        GEN.replace("max: 2000", "max: 4000"),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["check"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("request.generate.input_tokens.max: 2000 -> 4000"),
        "{text}"
    );
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        GEN.replace("sigma: 0.8", "sd: 0.8"),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("request.generate.input_tokens.sd does not belong to this distribution"),
        "{text}"
    );
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        GEN.replace(
            "      ignore_eos: true\n",
            "      ignore_eos: true\n      max_tokens: 16\n",
        ),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "request.generate.output_tokens draws up to 32 tokens, above request.max_tokens 16"
        ),
        "{text}"
    );
}
