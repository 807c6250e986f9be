//! `gate.outputs` in `perfgate check` (issue 44 part 1): a baseline blessed at temperature 0
//! keeps each answer's hash and length, and a check compares its answers with them, request by
//! request, against the baseline's own repeatability (its runs against each other). The
//! built-in simulator as the server, the check's answers diverging in a known share
//! (`diverge_share`), so every figure is computed by hand.

use crate::ab::{dir_with, run};
use serde_json::Value;

/// A fixed prompt, greedy, 8 tokens, 20 requests after 2 warmup requests, one at a time; `T`
/// sets the TPOT (4 ms), `D` adds keys to the simulator's URL.
const GREEDY: &str = "defaults:\n  endpoint: {base_url: 'sim://?ttft_ms=30&tpot_ms=${T:-4}&seed=7${D:-}', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 8, temperature: 0}\n  load: {samples: 20, warmup: 2}\nscenarios:\n  - name: answers\n";

/// [`GREEDY`] whose latency rows cannot FAIL (a 1 s floor): a machine busy with other tests
/// slows a check beside its bless, and these tests are about the answers.
fn loose() -> String {
    GREEDY.replace(
        "  load: {samples: 20, warmup: 2}\n",
        "  load: {samples: 20, warmup: 2}\n  gate: {min_delta: {ttft: 1000ms, tpot: 1000ms}}\n",
    )
}

/// `bless --runs 2`, stable or not: two runs' medians on a machine busy with other tests can
/// spread beyond what bless accepts (TPOT 4.12 vs 3.93 ms read as tau 27 % once, exit 3), and
/// these tests are about the answers, not the speed.
fn bless(d: &std::path::Path) {
    let (code, text, _) = run(
        d,
        &["bless", "-s", "s.yaml", "--runs", "2", "--allow-unstable"],
    );
    assert_eq!(code, Some(0), "{text}");
}

/// `perfgate check` with `env` set: exit code, output, results.
fn check(d: &std::path::Path, env: &[(&str, &str)]) -> (Option<i32>, String, Value) {
    let _ = std::fs::remove_file(d.join("r.json"));
    let mut c = crate::support::perfgate_in(d, 180);
    c.env_remove("T").env_remove("D");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c
        .args(["check", "-s", "s.yaml", "--output", "r.json"])
        .output()
        .unwrap();
    let text = crate::support::output_text(&o);
    eprintln!("{text}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    // the results against their schema, as `ab`'s tests do
    let errors = crate::ab::schema_errors(&r);
    assert!(errors.is_empty(), "{errors:?}");
    (o.status.code(), text, r)
}

fn outputs_check(r: &Value) -> Option<&Value> {
    r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "outputs")
}

/// The first scenario's notes with their kinds (none: the results leave both lists out).
fn notes(r: &Value) -> Vec<(String, String)> {
    let s = &r["scenarios"][0];
    let none = Vec::new();
    s["notes"]
        .as_array()
        .unwrap_or(&none)
        .iter()
        .zip(s["note_kinds"].as_array().unwrap_or(&none))
        .map(|(n, k)| (k.as_str().unwrap().into(), n.as_str().unwrap().into()))
        .collect()
}

#[test]
fn a_check_on_the_server_it_was_blessed_on_gives_the_same_answers_and_passes() {
    let d = dir_with(&loose());
    bless(d.path());
    // the baseline keeps each answer's hash and length: " tok1 ... tok8" is 8 x 5 = 40
    // characters; never its text
    let text = std::fs::read_to_string(d.path().join("baselines/answers.json")).unwrap();
    assert!(!text.contains("tok1"));
    let b: Value = serde_json::from_str(&text).unwrap();
    let o = &b["runs"][1]["records"][19]["output"];
    assert_eq!(o["chars"], 40, "{o}");
    assert_eq!(o["sha256"].as_str().unwrap().len(), 16);
    let (code, text, r) = check(d.path(), &[]);
    assert_eq!(code, Some(0), "{text}");
    // 20 check requests paired with bless run 1's of the same place; the baseline's repeats:
    // run 2's 20 against run 1's (by place) + 19 + 19 consecutive sends of the one prompt
    // within each run = 58, none differing
    let o = &r["scenarios"][0]["outputs"];
    assert_eq!(o["reference"], "baseline", "{o}");
    assert_eq!(
        (
            &o["pairs"],
            &o["differing"],
            &o["self_pairs"],
            &o["self_differing"]
        ),
        (&20.into(), &0.into(), &58.into(), &0.into()),
        "{o}"
    );
    let c = outputs_check(&r).unwrap();
    assert_eq!(c["verdict"], "PASS", "{c}");
    assert_eq!(
        c["reason"],
        "answers differ in 0 of 20 paired requests (0.0%) against 0 of 58 (0.0%) between two sends of one request in the baseline's runs: the same answers"
    );
    assert_eq!(
        (c["n_baseline"].as_u64(), c["n_candidate"].as_u64()),
        (Some(58), Some(20))
    );
}

#[test]
fn a_check_that_is_faster_and_answers_otherwise_fails_as_a_functional_change() {
    let d = dir_with(GREEDY);
    bless(d.path());
    // half the time per token, and half the answers diverge from token 3 on
    let (code, text, r) = check(
        d.path(),
        &[("T", "2"), ("D", "&diverge_share=0.5&diverge_at=3")],
    );
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(r["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    let tpot = crate::support::p50_row(s, "tpot");
    assert_eq!(tpot["verdict"], "IMPROVED", "{tpot}");
    // the simulator's 20 measured requests are 20 consecutive generation requests, of which
    // exactly 20 x 0.5 = 10 diverge; the baseline's 58 repeats (as above) none
    let o = &s["outputs"];
    assert_eq!(
        (
            &o["pairs"],
            &o["differing"],
            &o["self_pairs"],
            &o["self_differing"]
        ),
        (&20.into(), &10.into(), &58.into(), &0.into()),
        "{o}"
    );
    // the baseline keeps no text: where they differ is not known, and not invented
    assert!(o.get("first_difference_chars").is_none(), "{o}");
    let ex = o["examples"].as_array().unwrap();
    assert_eq!(ex.len(), 5);
    assert!(ex[0].get("at_char").is_none() && ex[0].get("at_token").is_none());
    assert!(ex[0].get("base").is_none(), "{}", ex[0]);
    assert_eq!(
        ex[0]["candidate"],
        " tok1 tok2 alt3 alt4 alt5 alt6 alt7 alt8"
    );
    let c = outputs_check(&r).unwrap();
    assert_eq!(c["verdict"], "FAIL", "{c}");
    // Fisher one-sided, all 10 differing pairs among the check's 20 of 20 + 58 = 78:
    // P(X >= 10) = C(20,10) / C(78,10) = 184756 / 1258315963905 = 1.468e-7 < alpha 0.01
    let p = c["p_value"].as_f64().unwrap();
    assert!((p - 184_756.0 / 1_258_315_963_905.0).abs() < 1e-12, "{p}");
    assert_eq!(c["candidate"], 0.5);
    assert_eq!(c["baseline"], 0.0);
    assert_eq!(
        (c["n_baseline"].as_u64(), c["n_candidate"].as_u64()),
        (Some(58), Some(20))
    );
    assert_eq!(
        c["reason"],
        "answers differ in 10 of 20 paired requests (50.0%) against 0 of 58 (0.0%) between two sends of one request in the baseline's runs: more than the baseline's own repeatability (one-sided Fisher p 1.47e-7 < alpha 0.01): a functional change, not a speedup"
    );
    let notes = notes(&r);
    assert!(
        notes.iter().any(|(k, n)| k == "outputs"
            && n.starts_with(
                "functional change: the candidate answers otherwise (10 of 20 requests), so its faster TPOT P50"
            )),
        "{notes:?}"
    );
    let first = notes
        .iter()
        .find(|(_, n)| {
            n.starts_with(
                "outputs: 10 of 20 answers differ from the baseline's; the first, request ",
            )
        })
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert_eq!(first.0, "outputs");
    assert!(
        first.1.ends_with(", where is unknown (the baseline keeps each answer's hash and length, not its text): candidate \" tok1 tok2 alt3 alt4 alt5 alt6 alt7 alt8\""),
        "{}",
        first.1
    );
}

#[test]
fn a_baseline_without_outputs_is_not_compared_and_says_to_rebless() {
    let d = dir_with(&loose());
    bless(d.path());
    // as blessed before baselines kept answers: every record's `output` removed
    let path = d.path().join("baselines/answers.json");
    let mut b: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for run in b["runs"].as_array_mut().unwrap() {
        for rec in run["records"].as_array_mut().unwrap() {
            rec.as_object_mut().unwrap().remove("output");
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&b).unwrap()).unwrap();
    // every answer diverges now, and nothing can see it: exit 0 as before, with the note
    let (code, text, r) = check(d.path(), &[("D", "&diverge_share=1")]);
    assert_eq!(code, Some(0), "{text}");
    assert!(outputs_check(&r).is_none(), "{r}");
    assert!(r["scenarios"][0].get("outputs").is_none());
    let notes = notes(&r);
    assert!(
        notes.contains(&(
            "outputs".into(),
            "outputs not compared: the baseline keeps no answers (blessed before baselines kept each answer's hash), so a changed answer cannot be seen; re-bless at request.temperature: 0 (`perfgate bless`) to compare them".into()
        )),
        "{notes:?}"
    );
}

#[test]
fn sampling_that_is_not_deterministic_keeps_no_outputs_and_says_nothing_of_them() {
    let d = dir_with(&loose().replace(", temperature: 0", ", temperature: 0.7"));
    bless(d.path());
    let text = std::fs::read_to_string(d.path().join("baselines/answers.json")).unwrap();
    assert!(!text.contains("\"output\""));
    let (code, text, r) = check(d.path(), &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(outputs_check(&r).is_none(), "{r}");
    // nothing asked for the answers to be compared: no note of them either
    assert!(
        notes(&r).iter().all(|(kind, _)| kind != "outputs"),
        "{:?}",
        notes(&r)
    );
}

/// Every answer a tool call (the simulator answers a request that offers `tools` with one): no
/// answer has text on either side, so nothing is compared, and the note says that rather than
/// advising a re-bless that would change nothing (a hostile tester's finding).
#[test]
fn answers_that_are_all_tool_calls_are_not_compared_and_say_why() {
    let tools = "{tools: [{type: function, function: {name: weather, parameters: {type: object, required: [answer], properties: {answer: {type: string}}}}}]}";
    let d = dir_with(&loose().replace(
        "temperature: 0}",
        &format!("temperature: 0, extra_body: {tools}}}"),
    ));
    bless(d.path());
    let text = std::fs::read_to_string(d.path().join("baselines/answers.json")).unwrap();
    assert!(!text.contains("\"output\""), "no answer has text to keep");
    let (code, text, r) = check(d.path(), &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(outputs_check(&r).is_none(), "{r}");
    assert!(
        notes(&r).contains(&(
            "outputs".into(),
            "outputs not compared: no request answered with text, in the baseline or in this check (an answer that is only a tool call or reasoning has no text to compare: see the structured-output row for tool calls)".into()
        )),
        "{:?}",
        notes(&r)
    );
}
