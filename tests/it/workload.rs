//! Workload that is quick to write (issue 19): `request.prompt_tokens: N` on the built-in
//! simulator, whose token count is known by hand (it counts the whitespace-separated words of
//! every message), so the fitting steps can be computed exactly. The real tokenizer case is
//! tests/realserver_prompt.rs.

use serde_json::Value;

use crate::support::check_scenario as check;

#[test]
fn prompt_tokens_are_fitted_to_the_servers_count() {
    let (code, text, r) = check(
        "defaults:\n  endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n  load: {samples: 20, warmup: 1}\nscenarios:\n  - name: p20\n    request: {prompt_tokens: 20, max_tokens: 4}\n  - name: p1024\n    request: {prompt_tokens: 1024, max_tokens: 4}\n",
    );
    assert_eq!(code, Some(0), "{text}");
    // The prompt is a 10-word instruction plus filler words. N = 20: the first guess, 20 - 16
    // = 4 words, counts 14; proportional 4 * 20 / 14 = 5.7 -> 6 words count 16; the secant
    // (16 - 14) / (6 - 4) = 1 token a word gives 6 + 4 = 10 words: 20 tokens, in 3 requests.
    // N = 1024: 1008 words count 1018, within 5 % at once.
    for (i, (tokens, words, requests)) in [(20u64, 10, 3), (1018, 1008, 1)].iter().enumerate() {
        let s = &r["scenarios"][i];
        let recs = s["records"].as_array().unwrap();
        assert_eq!(recs.len(), 20);
        assert!(
            recs.iter()
                .all(|x| x["prompt_tokens"].as_u64() == Some(*tokens)),
            "{}",
            s["name"]
        );
        let target = [20, 1024][i];
        let note = format!(
            "synthetic prompt: {words} filler words = {tokens} prompt tokens by the server's count (prompt_tokens {target}, within 5 %; {requests} fitting request(s), not measured)"
        );
        assert!(s["notes"].to_string().contains(&note), "{}", s["notes"]);
    }
}

#[test]
fn prompt_tokens_is_one_of_three_ways_to_give_the_prompt() {
    let (code, text, _) = check(
        "scenarios:\n  - name: both\n    endpoint: {base_url: 'sim://'}\n    request: {prompt: hi, prompt_tokens: 64, max_tokens: 4}\n",
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("request: give one of `prompt`, `messages`, `prompt_tokens`, `prompt_set`, `generate` or `conversation`"),
        "{text}"
    );
    let (code, text, _) = check(
        "scenarios:\n  - name: zero\n    endpoint: {base_url: 'sim://'}\n    request: {prompt_tokens: 0, max_tokens: 4}\n",
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("request.prompt_tokens is 0: use 1..=262144"),
        "{text}"
    );
}

#[test]
fn a_concurrency_list_is_one_scenario_and_baseline_per_level_drawn_as_one_sweep() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        "x-request: &req {prompt: hi, max_tokens: 8}\nscenarios:\n  - name: sweep\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request: *req\n    load: {concurrency: [1, 2, 4], samples: 20, warmup: 1}\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        crate::support::perfgate()
            .current_dir(dir.path())
            .args(args)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap()
    };
    // One run, stability not judged: this test is about levels, names and files.
    let o = run(&["bless", "--runs", "1", "--allow-unstable"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for level in [1, 2, 4] {
        let b: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("baselines/sweep-c{level}.json")))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(b["scenario"]["name"], format!("sweep-c{level}"));
    }
    let o = run(&["check", "--output", "r.json", "--html", "r.html"]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let got: Vec<(String, u64, String)> = r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["concurrency"].as_u64().unwrap(),
                s["family"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("sweep-c1".to_string(), 1, "sweep".to_string()),
            ("sweep-c2".to_string(), 2, "sweep".to_string()),
            ("sweep-c4".to_string(), 4, "sweep".to_string()),
        ]
    );
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    let sweep = html
        .split("<h2>Load sweep: sweep</h2>")
        .nth(1)
        .expect("a sweep section");
    let sweep = sweep.split("</section>").next().unwrap();
    assert!(
        sweep.contains("3 levels (sweep-c1, sweep-c2, sweep-c4)"),
        "{sweep}"
    );
    assert_eq!(sweep.matches("<svg").count(), 2); // TTFT and TPOT
    for l in ["c1", "c2", "c4"] {
        assert_eq!(sweep.matches(&format!("\n{l}\n</text>")).count(), 2, "{l}");
    }
}
