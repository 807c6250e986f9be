//! `gate.outputs` (issue 44 part 1): with deterministic sampling (temperature 0) `perfgate ab`
//! compares the arms' answers request by request against the base arm's own repeats. Two
//! built-in simulators as the arms, the candidate's answers diverging in a known share
//! (`diverge_share`, `diverge_at`), so every figure is computed by hand: a candidate that is
//! faster and wrong FAILs as a functional change (exit 1), never IMPROVED; identical arms PASS;
//! sampling that is not deterministic is not compared, and says why.

use crate::ab::{dir_with, run};
use serde_json::Value;

/// A fixed prompt, greedy, 8 tokens, 20 requests per arm after 2 warmup requests, one at a time.
const GREEDY: &str = "defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 8, temperature: 0}\n  load: {samples: 20, warmup: 2}\nscenarios:\n  - name: answers\n";

const BASE: &str = "sim://?ttft_ms=30&tpot_ms=4&seed=7";

fn outputs_check(r: &Value) -> &Value {
    r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "outputs")
        .unwrap_or_else(|| panic!("no outputs check in {r}"))
}

#[test]
fn a_candidate_faster_and_wrong_fails_as_a_functional_change_not_improved() {
    let d = dir_with(GREEDY);
    // the candidate: half the time per token, and half its answers diverge from token 3 on
    let cand = "sim://?ttft_ms=30&tpot_ms=2&seed=8&diverge_share=0.5&diverge_at=3";
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            cand,
            "--output",
            "r.json",
            "--markdown",
            "r.md",
        ],
    );
    // a functional change exits as a regression does
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(r["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    // the latency is better: TPOT P50 IMPROVED (2 ms against 4)...
    let tpot = crate::support::p50_row(s, "tpot");
    assert_eq!(tpot["verdict"], "IMPROVED", "{tpot}");
    // ...and the answers are not the same. The candidate simulator's measured requests are its
    // generation requests 2..21 (2 warmup before), 20 consecutive ones, of which exactly
    // 20 x 0.5 = 10 diverge. The base answers " tok1 tok2 ... tok8" every time: its 20 requests
    // of the one fixed prompt are 19 pairs of repeats, none differing.
    let o = &s["outputs"];
    assert_eq!(o["pairs"], 20, "{o}");
    assert_eq!(o["differing"], 10, "{o}");
    assert_eq!(o["self_pairs"], 19, "{o}");
    assert_eq!(o["self_differing"], 0, "{o}");
    // " tok1 tok2 tok3" against " tok1 tok2 alt3": the common prefix " tok1 tok2 " is 11
    // characters, so every differing pair first differs at character 11, in the base's third
    // token event (0-based 2: events " tok1" ends at 5, " tok2" at 10, " tok3" at 15)
    assert_eq!(o["first_difference_chars"], serde_json::json!([11, 11, 11]));
    let ex = o["examples"].as_array().unwrap();
    assert_eq!(ex.len(), 5);
    assert_eq!(ex[0]["at_char"], 11);
    assert_eq!(ex[0]["at_token"], 2);
    // the snippets start 20 characters before the difference (0 here): the whole answers
    assert_eq!(ex[0]["base"], " tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8");
    assert_eq!(
        ex[0]["candidate"],
        " tok1 tok2 alt3 alt4 alt5 alt6 alt7 alt8"
    );
    let c = outputs_check(&r);
    assert_eq!(c["verdict"], "FAIL", "{c}");
    // Fisher one-sided, all 10 differing pairs among the candidate's 20 of 39:
    // C(20,10) / C(39,10) = 184756 / 635745396 = 2.906e-4 < alpha 0.01
    let p = c["p_value"].as_f64().unwrap();
    assert!((p - 184_756.0 / 635_745_396.0).abs() < 1e-9, "{p}");
    assert_eq!(c["candidate"], 0.5);
    assert_eq!(c["baseline"], 0.0);
    assert_eq!(
        (c["n_baseline"].as_u64(), c["n_candidate"].as_u64()),
        (Some(19), Some(20))
    );
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains("a functional change, not a speedup"),
        "{reason}"
    );
    // the note says the speedup is not an improvement
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with(
            "functional change: the candidate answers otherwise (10 of 20 requests), so its faster TPOT P50"
        ) && n.ends_with("is not an improvement")),
        "{notes:?}"
    );
    // and shows the first differing pair where every report shows notes (request 0 or 1: every
    // other request diverges, the seed's phase decides which comes first)
    let first = notes
        .iter()
        .find(|n| {
            n.starts_with("outputs: 10 of 20 answers differ between the arms; the first, request ")
        })
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        first.ends_with(", at character 11 (the base's token event 2): base \" tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8\", candidate \" tok1 tok2 alt3 alt4 alt5 alt6 alt7 alt8\""),
        "{first}"
    );
    // each request's answer is in the records as its hash and length: " tok1 ... tok8" is 8 x 5
    // = 40 characters (" tok1" is 5)
    let rec = &s["ab"]["base_records"][0]["output"];
    assert_eq!(rec["chars"], 40, "{rec}");
    assert_eq!(rec["sha256"].as_str().unwrap().len(), 16);
    let md = std::fs::read_to_string(d.path().join("r.md")).unwrap();
    assert!(md.contains("outputs"), "{md}");
}

#[test]
fn identical_arms_give_the_same_answers_and_the_outputs_check_passes() {
    let d = dir_with(GREEDY);
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            "sim://?ttft_ms=30&tpot_ms=4&seed=8",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let o = &r["scenarios"][0]["outputs"];
    assert_eq!(
        (
            &o["pairs"],
            &o["differing"],
            &o["self_pairs"],
            &o["self_differing"]
        ),
        (&20.into(), &0.into(), &19.into(), &0.into()),
        "{o}"
    );
    assert!(o.get("examples").is_none(), "{o}");
    let c = outputs_check(&r);
    assert_eq!(c["verdict"], "PASS", "{c}");
    assert_eq!(
        c["reason"],
        "answers differ in 0 of 20 paired requests (0.0%) against 0 of 19 (0.0%) between two sends of one request on the base arm: the same answers"
    );
}

#[test]
fn a_prompt_set_of_distinct_prompts_sends_base_requests_again_for_their_repeatability() {
    // 20 distinct prompts, 20 requests: no base request repeats another, so 20 / 2 = 10 of them
    // are sent again after the run (ab::measure::self_repeats), all answered alike by the base
    // simulator; the candidate diverges in 20 x 0.3 = 6 of its 20 measured requests (its
    // generation requests 1..20, one warmup before). 6 of 20 against 0 of 10 is suggestive, not
    // significant (Fisher one-sided: all 6 differing pairs among the candidate's 20 of 30,
    // C(20,6) / C(30,6) = 38760 / 593775 = 0.0653, between alpha 0.01 and 0.1): WARN, exit 0
    let d = tempfile::tempdir().unwrap();
    let lines: String = (0..20)
        .map(|i| format!("{{\"prompt\": \"question number {i}\"}}\n"))
        .collect();
    std::fs::write(d.path().join("p.jsonl"), lines).unwrap();
    std::fs::write(
        d.path().join("s.yaml"),
        "defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt_set: {file: p.jsonl, order: file}, max_tokens: 8, temperature: 0}\n  load: {samples: 20, warmup: 1}\nscenarios:\n  - name: set\n",
    )
    .unwrap();
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            "sim://?ttft_ms=30&tpot_ms=4&seed=8&diverge_share=0.3&diverge_at=2",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let o = &r["scenarios"][0]["outputs"];
    assert_eq!(o["pairs"], 20, "{o}");
    assert_eq!(o["differing"], 6, "{o}");
    assert_eq!(o["self_pairs"], 10, "{o}");
    assert_eq!(o["self_differing"], 0, "{o}");
    // " tok1 tok2" against " tok1 alt2": " tok1 " in common, 6 characters
    assert_eq!(o["first_difference_chars"], serde_json::json!([6, 6, 6]));
    let c = outputs_check(&r);
    assert_eq!(c["verdict"], "WARN", "{c}");
    let p = c["p_value"].as_f64().unwrap();
    assert!((p - 38760.0 / 593775.0).abs() < 1e-9, "{p}");
    // the measured records are 20 per arm: the repeats are not among them
    assert_eq!(r["scenarios"][0]["records"].as_array().unwrap().len(), 20);
    assert_eq!(
        r["scenarios"][0]["ab"]["base_records"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
}

#[test]
fn sampling_that_is_not_deterministic_is_not_compared_and_says_why() {
    let d = dir_with(&GREEDY.replace(", temperature: 0", ""));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            "sim://?ttft_ms=30&tpot_ms=4&seed=8&diverge_share=1",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    assert!(s.get("outputs").is_none(), "{s}");
    assert!(s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["kind"] != "outputs"));
    let notes = s["notes"].to_string();
    assert!(
        notes.contains("outputs not compared (gate.outputs is on only with deterministic sampling): request.temperature is not set (the server's default applies)"),
        "{notes}"
    );
    // nor written per request: a hash of a random sample says nothing
    assert!(s["records"][0].get("output").is_none());
}

#[test]
fn gate_outputs_false_turns_the_check_off() {
    let d = dir_with(&GREEDY.replace(
        "  load: {samples: 20, warmup: 2}\n",
        "  load: {samples: 20, warmup: 2}\n  gate: {outputs: false}\n",
    ));
    // every candidate answer diverges, and nothing compares them: exit 0
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            "sim://?ttft_ms=30&tpot_ms=4&seed=8&diverge_share=1",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    assert!(s.get("outputs").is_none(), "{s}");
    assert!(s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["kind"] != "outputs"));
}

#[test]
fn completions_answers_are_compared_too() {
    // /v1/completions streams `choices[].text`: every candidate answer diverges from token 1 on
    // (" alt1" against " tok1": the common prefix " " is 1 character); 20 of 20 against 0 of 19:
    // Fisher p = C(20,20) / C(39,20) = 1 / 68923264410 = 1.45e-11
    let d = dir_with(&GREEDY.replace(
        "model: perfgate-sim}",
        "model: perfgate-sim, api: openai-completions}",
    ));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            BASE,
            "--candidate-url",
            "sim://?ttft_ms=30&tpot_ms=4&seed=8&diverge_share=1",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    let o = &r["scenarios"][0]["outputs"];
    assert_eq!(
        (&o["pairs"], &o["differing"]),
        (&20.into(), &20.into()),
        "{o}"
    );
    assert_eq!(o["first_difference_chars"], serde_json::json!([1, 1, 1]));
    let c = outputs_check(&r);
    assert_eq!(c["verdict"], "FAIL", "{c}");
    let p = c["p_value"].as_f64().unwrap();
    assert!((p - 1.0 / 68_923_264_410.0).abs() < 1e-15, "{p}");
}
