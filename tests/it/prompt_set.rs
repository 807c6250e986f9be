//! Prompt sets (issue 31, `request.prompt_set`): prompts from a file in the repository, one
//! entry per request in a seeded order, on the built-in simulator (which counts a prompt's
//! whitespace-separated words as its tokens and generates exactly `max_tokens`), so every
//! request's lengths are known by hand from the fixture.

use crate::support::{read_json as json, run_in as run};
use serde_json::Value;
use std::path::Path;

const FIXTURES: &str = "tests/fixtures/prompts";

/// A project with `scenarios/s.yaml` = `yaml` and the fixture prompt files in
/// `scenarios/prompts/`.
fn project(yaml: &str) -> tempfile::TempDir {
    crate::support::project(
        yaml,
        FIXTURES,
        "prompts",
        &[
            "mixed.jsonl",
            "chat.jsonl",
            "sharegpt.json",
            "sharegpt_v3.json",
            "lmsys.jsonl",
            "openai_messages.jsonl",
            "vllm_custom.jsonl",
            "aiperf_single_turn.jsonl",
            "guidellm.jsonl",
        ],
    )
}

/// (index, entry, prompt id, prompt tokens, output tokens) of each record, by index.
fn requests(records: &Value) -> Vec<(u64, u64, String, u64, u64)> {
    let mut v: Vec<_> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let w = &r["work"];
            (
                w["index"].as_u64().unwrap(),
                w["entry"].as_u64().unwrap(),
                w["prompt_id"].as_str().unwrap().to_string(),
                r["prompt_tokens"].as_u64().unwrap(),
                r["output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

const MIXED: &str = "scenarios:\n  - name: mixed\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request:\n      prompt_set: {file: prompts/mixed.jsonl, seed: 7}\n      max_tokens: 24\n    load: {samples: 24, warmup: 2}\n";

#[test]
fn a_prompt_set_blesses_and_checks_the_same_requests() {
    let dir = project(MIXED);
    let (code, text) = run(dir.path(), &["bless", "--runs", "2", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(
        dir.path(),
        &["check", "--output", "r.json", "--html", "report.html"],
    );
    assert_eq!(code, Some(0), "{text}");
    // The HTML report draws the length distributions. By hand: the 12 entries have 4, 6, 8,
    // 12, 16, 24, 40, 60, 90, 160, 200 and 300 words, each sent twice: median (24 + 40) / 2;
    // their output lengths 8, 8, 16, 16, 16, 24, 24, 24, 24, 32, 32, 64: median 24.
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("Prompt tokens per request")
            && html.contains("median: baseline 32 tokens, candidate 32 tokens")
            && html.contains("median: baseline 24 tokens, candidate 24 tokens"),
        "the length plots"
    );
    let b = json(&dir.path().join("baselines/mixed.json"));
    let r = json(&dir.path().join("r.json"));
    let errors = crate::report_schema::errors(&crate::report_schema::validator(), &r);
    assert!(errors.is_empty(), "{errors:?}");
    let notes = r["scenarios"][0]["notes"].to_string();
    assert!(
        notes.contains("workload: prompt set prompts/mixed.jsonl (prompts, 12 entries, sha256 ")
            && notes.contains("shuffled order, seed 7)"),
        "{notes}"
    );
    let checked = requests(&r["scenarios"][0]["records"]);
    // the same requests in each bless run and in the check, request by request
    for run in b["runs"].as_array().unwrap() {
        assert_eq!(requests(&run["records"]), checked);
    }
    // By hand: request g sends entry perm[g mod 12] of the seed-7 permutation; the simulator
    // counts the entry's words and generates its max_tokens (24 when the line gives none).
    let lines: Vec<Value> = std::fs::read_to_string(Path::new(FIXTURES).join("mixed.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let perm = perfgate::seeded::permutation(12, 7);
    assert_eq!(checked.len(), 24);
    for (g, (index, entry, _, prompt, output)) in checked.iter().enumerate() {
        let e = perm[g % 12] as usize;
        assert_eq!((*index, *entry), (g as u64, e as u64));
        let words = lines[e]["prompt"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count();
        assert_eq!(*prompt, words as u64, "request {g}");
        assert_eq!(*output, lines[e]["max_tokens"].as_u64().unwrap_or(24));
    }
    // every entry twice: 24 requests over 12 entries
    let mut entries: Vec<u64> = checked.iter().map(|c| c.1).collect();
    entries.sort_unstable();
    entries.dedup();
    assert_eq!(entries.len(), 12);
    println!(
        "request prompt ids (bless = check): {:?}",
        checked.iter().map(|c| &c.2[..8]).collect::<Vec<_>>()
    );
}

#[test]
fn a_changed_prompt_file_is_a_stale_baseline_that_names_it() {
    let dir = project(MIXED);
    let (code, text) = run(dir.path(), &["bless", "--runs", "1", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    let b = json(&dir.path().join("baselines/mixed.json"));
    let was = b["scenario"]["config"]["request"]["prompt_set"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let file = dir.path().join("scenarios/prompts/mixed.jsonl");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"prompt\": \"one more prompt\"}\n");
    std::fs::write(&file, &text).unwrap();
    let (code, out) = run(dir.path(), &["check"]);
    assert_eq!(code, Some(2), "{out}");
    let want = format!(
        "the prompt set file prompts/mixed.jsonl changed since its baseline was blessed (sha256 {was} -> "
    );
    assert!(out.contains(&want), "{out}");
    assert!(out.contains(", 12 -> 13 entries)"), "{out}");
    assert!(
        out.contains("the requests are not the ones blessed"),
        "{out}"
    );
}

#[test]
fn sharegpt_and_chat_message_files_send_their_prompts() {
    let dir = project(
        "defaults:\n  endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n  request: {max_tokens: 8}\n  load: {samples: 20, warmup: 1}\nscenarios:\n  - name: sharegpt\n    request: {prompt_set: {file: prompts/sharegpt.json, order: file}, max_tokens: 8}\n  - name: chat\n    request: {prompt_set: {file: prompts/chat.jsonl}, system: Be kind., max_tokens: 8}\n",
    );
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("prompt set prompts/sharegpt.json (sharegpt, 4 entries, sha256 ")
            && text.contains(
                "file order, seed 0, 1 conversation(s) without a non-empty human turn left out)"
            ),
        "{text}"
    );
    assert!(
        text.contains("prompt set prompts/chat.jsonl (messages, 6 entries"),
        "{text}"
    );
    let (code, text) = run(
        dir.path(),
        &["check", "--allow-missing-baseline", "--output", "r.json"],
    );
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    // ShareGPT, file order, c2 (no human turn) left out: c0 (5 words), c1 (its system turn, 4
    // words, and its first human turn, 5), c3 (11), c4 (5).
    let sg = requests(&r["scenarios"][0]["records"]);
    let by_hand = [5u64, 9, 11, 5];
    let usable = [0u64, 1, 2, 3];
    for (g, (_, entry, _, prompt, output)) in sg.iter().enumerate() {
        assert_eq!(*entry, usable[g % 4], "request {g}");
        assert_eq!(*prompt, by_hand[g % 4], "request {g}");
        assert_eq!(*output, 8);
    }
    // chat messages: the scenario's system line (2 words) + the entry's system (3) + "What is
    // <topic>?"
    let topics = [
        "latency",
        "batching",
        "a prefix cache",
        "speculative decoding",
        "a scheduler",
        "tokenizers",
    ];
    for (_, entry, _, prompt, _) in requests(&r["scenarios"][1]["records"]) {
        let t = topics[entry as usize].split_whitespace().count() as u64;
        assert_eq!(prompt, 2 + 3 + 2 + t, "entry {entry}");
    }
}

#[test]
fn a_bad_prompt_file_line_is_named_and_exits_2() {
    let dir = project("scenarios:\n  - name: bad\n    endpoint: {base_url: 'sim://'}\n    request: {prompt_set: {file: prompts/bad.jsonl}, max_tokens: 8}\n");
    std::fs::write(
        dir.path().join("scenarios/prompts/bad.jsonl"),
        "{\"prompt\": \"fine\"}\n{\"prompt\": \"fine too\"}\n{\"prompt\": [1, 2]}\n",
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("scenarios/prompts/bad.jsonl:3: needs `prompt`, a string"),
        "{text}"
    );
    // a missing file names the path it looked for, relative to the scenario file
    std::fs::remove_file(dir.path().join("scenarios/prompts/bad.jsonl")).unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "request.prompt_set.file scenarios/prompts/bad.jsonl: cannot read (no such file)"
        ),
        "{text}"
    );
}

/// The gate on a prompt set: a prefill four times as slow per prompt token (the simulator's
/// `ttft_per_token_ms`, not part of the fingerprint) fails TTFT. By hand: the entries' median
/// prompt is 32 words, so TTFT P50 goes from about 5 + 0.25 x 32 = 13 ms to 5 + 1 x 32 = 37 ms,
/// and the requests are the same ones (no workload drift), so the P50 is tested paired
/// (tests/it/paired.rs: a 30 % slower prefill fails too).
#[test]
fn a_slower_prefill_fails_the_prompt_set_scenario() {
    let yaml = MIXED.replace(
        "sim://?ttft_ms=5&tpot_ms=1",
        "sim://?ttft_ms=5&tpot_ms=1&ttft_sigma=0&tpot_sigma=0&ttft_per_token_ms=0.25",
    );
    let dir = project(&yaml);
    let (code, text) = run(dir.path(), &["bless", "--runs", "1", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        yaml.replace("ttft_per_token_ms=0.25", "ttft_per_token_ms=1"),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["check", "--output", "r.json"]);
    assert_eq!(code, Some(1), "{text}");
    let r = json(&dir.path().join("r.json"));
    let checks = r["scenarios"][0]["checks"].as_array().unwrap();
    let ttft = checks
        .iter()
        .find(|c| c["metric"] == "ttft" && c["kind"]["quantile"] == "p50")
        .unwrap();
    assert_eq!(ttft["verdict"], "FAIL", "{ttft}");
    assert!(
        !r["scenarios"][0]["notes"].to_string().contains("drift"),
        "{}",
        r["scenarios"][0]["notes"]
    );
}

#[test]
fn a_prompt_set_smaller_than_the_run_is_warned_with_the_size_that_would_do() {
    // 12 entries, 2 warmup + 24 measured requests
    let dir = project(MIXED);
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("warning: request.prompt_set: 12 entries for 2 warmup + 24 measured requests: prompts repeat (measured request g sends entry g mod 12), and the warmup sends prompts measured later, which a prefix cache then serves; a set of at least 26 entries sends each once, or `request.cache: cold` keeps a repeat from being served from the cache"),
        "{text}"
    );
}

/// Issue 46: with the prefix cache kept from reusing prompts (llama.cpp's per-request
/// `cache_prompt: false`, or `cache: cold`), the warmup's prompts do not matter: 21 entries for
/// 2 warmup + 20 measured requests are no warning (with the cache on they are); 10 entries for
/// 20 requests send each twice, an even mix, no warning either; 12 entries for 20 requests send
/// 8 entries twice (20 = 1 x 12 + 8) and 4 once, warned with the samples that even it out
/// (2 x 12 = 24) and the set size that sends each once (20).
#[test]
fn a_prompt_set_the_cache_cannot_reuse_is_not_warned_about_the_warmup() {
    let warnings = |how: &str, file: &str| {
        let yaml = MIXED
            .replace("max_tokens: 24", &format!("max_tokens: 24\n      {how}"))
            .replace("samples: 24", "samples: 20")
            .replace("mixed.jsonl", file);
        let dir = project(&yaml);
        let p21: String = (0..21)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        std::fs::write(dir.path().join("scenarios/prompts/p21.jsonl"), p21).unwrap();
        let p10: String = (0..10)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        std::fs::write(dir.path().join("scenarios/prompts/p10.jsonl"), p10).unwrap();
        let (code, text) = run(dir.path(), &["validate"]);
        assert_eq!(code, Some(0), "{text}");
        text.lines()
            .filter_map(|l| l.split_once("warning: request.prompt_set: "))
            .map(|(_, w)| w.to_string())
            .collect::<Vec<_>>()
    };
    for how in ["extra_body: {cache_prompt: false}", "cache: cold"] {
        assert_eq!(warnings(how, "p21.jsonl"), Vec::<String>::new(), "{how}");
        assert_eq!(warnings(how, "p10.jsonl"), Vec::<String>::new(), "{how}");
        assert_eq!(
            warnings(how, "mixed.jsonl"),
            ["12 entries for 20 measured requests: 8 of them are sent 2 times, the others 1 (measured request g sends entry g mod 12), so they weigh unequally in the percentiles; samples: 24 sends each equally often, or a set of at least 20 entries sends each once"],
            "{how}"
        );
    }
    // the cache on (llama.cpp's default, said explicitly): the warmup is warned about
    assert_eq!(
        warnings("extra_body: {cache_prompt: true}", "p21.jsonl"),
        ["21 entries for 2 warmup + 20 measured requests: prompts repeat (measured request g sends entry g mod 21), and the warmup sends prompts measured later, which a prefix cache then serves; a set of at least 22 entries sends each once, or `request.cache: cold` keeps a repeat from being served from the cache"]
    );
}

#[test]
fn a_fifo_as_the_prompt_set_is_refused_not_waited_on() {
    let dir = project(MIXED);
    let fifo = dir.path().join("scenarios/prompts/mixed.jsonl");
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // (run_in kills perfgate after 180 s: a wait on the FIFO would fail the test, not hang it)
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("mixed.jsonl: cannot read (not a regular file (a FIFO, socket or device): give a file kept in the repository)"),
        "{text}"
    );
}

/// Issue 45: each published shape validated and replayed on the simulator, in file order, the
/// words of every request's prompt and its output length by hand (the simulator counts
/// whitespace words and generates `max_tokens`; 16 when the line gives none).
#[test]
fn files_as_the_field_publishes_them_are_replayed() {
    // (file, validate's summary, words of each entry's prompt, each entry's output length)
    let cases: [(&str, &str, &[u64], &[u64]); 6] = [
        // ShareGPT_V3: "Summarize the plot of Hamlet in two sentences." (8); a conversation
        // cut to start with a reply: its human turn "Go on with the list please." (6); `system`
        // (5) + `user` "Name three rivers in Europe." (5); an empty human turn passed over for
        // "Sorry: what is a haiku?" (5). Left out: empty values only, no turns, a reply only.
        // Before issue 45: "(sharegpt, 2 entries, ..., 5 conversation(s) without a human turn
        // left out)", two of which had one.
        (
            "sharegpt_v3.json",
            "(sharegpt, 4 entries, sha256 ",
            &[8, 6, 10, 5],
            &[16; 4],
        ),
        // LMSYS-Chat-1M: the first user turn of `conversation`. Before: "lmsys.jsonl:1: an
        // entry needs `prompt`, `messages` or `conversations` (ShareGPT); set
        // request.prompt_set.format to say which".
        (
            "lmsys.jsonl",
            "(conversation, 3 entries, sha256 ",
            &[11, 5, 5],
            &[16; 3],
        ),
        // OpenAI: developer 3 + parts "What is the capital" / "of Italy?" 6; system parts 3 +
        // user 3 + (a tool call and its result left out) + user 2; text part 4 (the image
        // part is not text); 2 + 1 + 2. Before: "openai_messages.jsonl:1: messages[1].content
        // must be a string".
        (
            "openai_messages.jsonl",
            "(messages, 4 entries, sha256 ",
            &[9, 8, 4, 5],
            &[16, 16, 12, 5],
        ),
        // vLLM `custom`: `output_tokens`. Before: valid, but every request asked 16 (output
        // tokens 16, 16, 16 measured).
        (
            "vllm_custom.jsonl",
            "(prompts, 3 entries, sha256 ",
            &[6, 6, 6],
            &[10, 152, 16],
        ),
        // AIPerf `single_turn`: `text`, `texts`, `output_length`. Before:
        // "aiperf_single_turn.jsonl:1: an entry needs `prompt`, `messages` or `conversations`
        // (ShareGPT)".
        (
            "aiperf_single_turn.jsonl",
            "(prompts, 5 entries, sha256 ",
            &[5, 5, 3, 3, 11],
            &[50, 500, 10, 16, 20],
        ),
        // GuideLLM: `prompt` or `question`, `output_tokens_count`. Before: "guidellm.jsonl:3:
        // needs `prompt`, a string (format prompts: {"prompt": "..."})".
        (
            "guidellm.jsonl",
            "(prompts, 3 entries, sha256 ",
            &[5, 7, 5],
            &[6, 40, 64],
        ),
    ];
    for (file, summary, words, outputs) in cases {
        let yaml = format!("scenarios:\n  - name: p\n    endpoint: {{base_url: 'sim://?ttft_ms=2&tpot_ms=0'}}\n    request: {{prompt_set: {{file: prompts/{file}, order: file}}, max_tokens: 16, ignore_eos: true}}\n    load: {{samples: 20, warmup: 1}}\n");
        let dir = project(&yaml);
        let (code, text) = run(dir.path(), &["validate"]);
        assert_eq!(code, Some(0), "{file}: {text}");
        assert!(
            text.contains(&format!("prompt set prompts/{file} {summary}")),
            "{file}: {text}"
        );
        let (code, text) = run(
            dir.path(),
            &["check", "--allow-missing-baseline", "--output", "r.json"],
        );
        assert_eq!(code, Some(0), "{file}: {text}");
        let r = json(&dir.path().join("r.json"));
        let got = requests(&r["scenarios"][0]["records"]);
        assert_eq!(got.len(), 20, "{file}");
        let n = words.len();
        for (g, (_, entry, _, prompt, output)) in got.iter().enumerate() {
            assert_eq!(*entry, (g % n) as u64, "{file} request {g}");
            assert_eq!(
                (*prompt, *output),
                (words[g % n], outputs[g % n]),
                "{file} request {g}"
            );
        }
    }
    // ShareGPT_V3's left-out count says why, in the format's words
    let dir = project("scenarios:\n  - name: p\n    endpoint: {base_url: 'sim://'}\n    request: {prompt_set: {file: prompts/sharegpt_v3.json}, max_tokens: 16}\n");
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("3 conversation(s) without a non-empty human turn left out)"),
        "{text}"
    );
}
