//! Trace replay (issue 31, `load.trace`): an open loop whose arrival times and per-request
//! lengths come from a Mooncake JSONL, an Azure CSV (2023 and 2024 releases) or a BurstGPT CSV
//! trace, on the built-in simulator (issue 45: the fixtures are in the shapes the releases
//! publish). The
//! schedule is deterministic (each request's due time is its trace time, scaled), so it is
//! compared with the trace exactly; how late each request was actually sent is the open loop's
//! schedule delay, reported (and printed here), not asserted.

use crate::support::{read_json as json, run_in as run};
use serde_json::Value;
use std::path::Path;

const FIXTURES: &str = "tests/fixtures/traces";

fn project(yaml: &str) -> tempfile::TempDir {
    crate::support::project(
        yaml,
        FIXTURES,
        "traces",
        &[
            "mooncake.jsonl",
            "azure.csv",
            "azure2024.csv",
            "burstgpt.csv",
            "mooncake_fast25.jsonl",
        ],
    )
}

/// The records by request index.
fn by_index(s: &Value) -> Vec<Value> {
    let mut v: Vec<Value> = s["records"].as_array().unwrap().clone();
    v.sort_by_key(|r| r["work"]["index"].as_u64().unwrap());
    v
}

fn mooncake() -> Vec<Value> {
    std::fs::read_to_string(Path::new(FIXTURES).join("mooncake.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each request's due time, relative to the first's, against the trace's (times `scale`), and
/// the schedule delay the results report; returns the delay's P50 and P99.
fn schedule_matches(s: &Value, trace_ms: &[f64], scale: f64) -> (f64, f64) {
    let recs = by_index(s);
    let sched0 = recs[0]["sched_ms"].as_f64().unwrap();
    let entry0 = recs[0]["work"]["entry"].as_u64().unwrap() as usize;
    for (g, r) in recs.iter().enumerate() {
        let e = r["work"]["entry"].as_u64().unwrap() as usize;
        let due = r["sched_ms"].as_f64().unwrap() - sched0;
        let want = (trace_ms[e] - trace_ms[entry0]) * scale;
        // sched_ms is written to µs
        assert!(
            (due - want).abs() <= 0.002,
            "request {g}: due {due} ms, trace {want} ms"
        );
        let delay = r["sched_delay_ms"].as_f64().unwrap();
        let late = r["start_ms"].as_f64().unwrap() - r["sched_ms"].as_f64().unwrap();
        assert!((delay - late.max(0.0)).abs() <= 0.002, "request {g}");
    }
    let d = &s["measured"]["schedule_delay_ms"];
    assert_eq!(d["n"].as_u64(), Some(recs.len() as u64));
    (d["p50"].as_f64().unwrap(), d["p99"].as_f64().unwrap())
}

#[test]
fn a_mooncake_trace_is_replayed_at_its_arrival_times_with_its_lengths() {
    let dir = project("scenarios:\n  - name: mooncake\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request: {ignore_eos: true}\n    load: {samples: 20, warmup: 2, trace: {file: traces/mooncake.jsonl, start: 2}}\n");
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{text}");
    // 20 requests from entry 2: 19 gaps (60, 10, 15, 40, 25 ms, cycling) summing to 575 ms by
    // hand: 19 / 0.575 s = 33.04 requests/s
    assert!(
        text.contains("trace traces/mooncake.jsonl (mooncake, 24 entries, sha256 ")
            && text.contains(
                "from entry 2, time x 1, blocks of 512 tokens); mean rate 33.04 requests/s"
            ),
        "{text}"
    );
    let (code, text) = run(
        dir.path(),
        &["check", "--allow-missing-baseline", "--output", "r.json"],
    );
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    let errors = crate::report_schema::errors(&crate::report_schema::validator(), &r);
    assert!(errors.is_empty(), "{errors:?}");
    let s = &r["scenarios"][0];
    assert!(
        s["notes"]
            .to_string()
            .contains("workload: trace traces/mooncake.jsonl (mooncake, 24 entries, sha256 ")
            && s["notes"]
                .to_string()
                .contains("replayed at a mean 33.04 requests/s"),
        "{}",
        s["notes"]
    );
    let trace = mooncake();
    let at: Vec<f64> = trace
        .iter()
        .map(|t| t["timestamp"].as_f64().unwrap())
        .collect();
    let (p50, p99) = schedule_matches(s, &at, 1.0);
    println!("mooncake replay: schedule delay P50 {p50} ms, P99 {p99} ms");
    for (g, rec) in by_index(s).iter().enumerate() {
        let t = &trace[g + 2];
        assert_eq!(rec["work"]["entry"].as_u64(), Some(g as u64 + 2));
        // the simulator counts words: the fitted prompt has the trace's length exactly ...
        assert_eq!(rec["prompt_tokens"], t["input_length"], "request {g}");
        // ... and generates the trace's output length
        assert_eq!(rec["output_tokens"], t["output_length"], "request {g}");
        assert_eq!(rec["work"]["max_tokens"], t["output_length"]);
    }
    assert_eq!(
        s["measured"]["target_rate"]
            .as_f64()
            .map(|x| (x * 100.0).round()),
        Some(3304.0)
    );
}

#[test]
fn time_scale_and_rate_scale_the_trace() {
    let dir = project("scenarios:\n  - name: half\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request: {ignore_eos: true}\n    load: {samples: 20, warmup: 1, trace: {file: traces/mooncake.jsonl, time_scale: 0.5}}\n  - name: rate\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request: {ignore_eos: true}\n    load: {samples: 20, warmup: 1, trace: {file: traces/mooncake.jsonl, rate: 20}}\n");
    let (code, text) = run(
        dir.path(),
        &["check", "--allow-missing-baseline", "--output", "r.json"],
    );
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    let at: Vec<f64> = mooncake()
        .iter()
        .map(|t| t["timestamp"].as_f64().unwrap())
        .collect();
    schedule_matches(&r["scenarios"][0], &at, 0.5);
    // rate 20: 19 gaps over 0.95 s; the trace's first 20 span 585 ms, so times x 950/585
    schedule_matches(&r["scenarios"][1], &at, 950.0 / 585.0);
    let rate = r["scenarios"][1]["measured"]["target_rate"]
        .as_f64()
        .unwrap();
    assert!((rate - 20.0).abs() < 1e-9, "{rate}");
}

#[test]
fn an_azure_trace_is_replayed_and_bless_and_check_send_the_same_requests() {
    let dir = project("scenarios:\n  - name: azure\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1'}\n    request: {ignore_eos: true}\n    load: {samples: 20, warmup: 1, trace: {file: traces/azure.csv}}\n");
    let (code, text) = run(dir.path(), &["bless", "--runs", "1", "--allow-unstable"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(dir.path(), &["check", "--output", "r.json"]);
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    let b = json(&dir.path().join("baselines/azure.json"));
    let ids = |recs: &Value| {
        let mut v: Vec<(u64, String)> = recs
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["work"]["index"].as_u64().unwrap(),
                    x["work"]["prompt_id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        ids(&r["scenarios"][0]["records"]),
        ids(&b["runs"][0]["records"])
    );
    // the CSV's times by hand: seconds after 18:15:46.1
    let rows: Vec<Vec<String>> = std::fs::read_to_string(Path::new(FIXTURES).join("azure.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let at: Vec<f64> = rows
        .iter()
        .map(|c| {
            let sec: f64 = c[0].rsplit(':').next().unwrap().parse().unwrap();
            (sec - 46.1) * 1000.0
        })
        .collect();
    let s = &r["scenarios"][0];
    let (p50, p99) = schedule_matches(s, &at, 1.0);
    println!("azure replay: schedule delay P50 {p50} ms, P99 {p99} ms");
    for (g, rec) in by_index(s).iter().enumerate() {
        assert_eq!(rec["prompt_tokens"].as_u64(), rows[g][1].parse().ok());
        assert_eq!(rec["output_tokens"].as_u64(), rows[g][2].parse().ok());
    }
    // an edited trace is a stale baseline that names it
    let f = dir.path().join("scenarios/traces/azure.csv");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("2023-11-16 18:15:59.0000000,100,10\n");
    std::fs::write(&f, text).unwrap();
    let (code, out) = run(dir.path(), &["check"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains(
            "the trace file traces/azure.csv changed since its baseline was blessed (sha256 "
        ) && out.contains(", 24 -> 25 entries)"),
        "{out}"
    );
}

#[test]
fn bad_traces_are_named_with_exit_2() {
    let yaml = "scenarios:\n  - name: t\n    endpoint: {base_url: 'sim://'}\n    request: {ignore_eos: true}\n    load: {samples: 20, trace: {file: traces/bad.jsonl}}\n";
    let dir = project(yaml);
    let bad = dir.path().join("scenarios/traces/bad.jsonl");
    let line =
        |t: u64| format!("{{\"timestamp\": {t}, \"input_length\": 10, \"output_length\": 2}}\n");
    std::fs::write(&bad, format!("{}{}{}", line(5), line(9), line(7))).unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "scenarios/traces/bad.jsonl:3: the time goes back (2 ms before the line above)"
        ),
        "{text}"
    );
    // arrivals a day apart: the replay would take 19 days, not hang (by hand: 19 gaps of
    // 86,400,000 ms = 1,641,600 s; 19 / 1,641,600 s = 1.16e-5 requests/s)
    std::fs::write(
        &bad,
        (0..20).map(|i| line(i * 86_400_000)).collect::<String>(),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("its 20 measured requests would arrive at 1.157e-5 requests/s over 456.0 h"),
        "{text}"
    );
    // a rate the open loop cannot keep is refused, not clamped
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        yaml.replace(
            "{file: traces/bad.jsonl}",
            "{file: traces/bad.jsonl, rate: 1e30}",
        ),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "load.trace.rate is 1000000000000000000000000000000: use 0.01..=100000 requests/s"
        ),
        "{text}"
    );
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).unwrap();
    // too short for the samples
    std::fs::write(&bad, (0..10).map(line).collect::<String>()).unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("has 10 entries; from entry 0 the run needs 20"),
        "{text}"
    );
    // a prompt of its own, or a rate, conflicts with the trace
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        yaml.replace("{ignore_eos: true}", "{prompt: hi, max_tokens: 4}"),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("load.trace gives each request's prompt length"),
        "{text}"
    );
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        yaml.replace("samples: 20,", "samples: 20, rate: 5,"),
    )
    .unwrap();
    let (code, text) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("load.trace sets the arrival times: leave load.rate out"),
        "{text}"
    );
}

/// The data rows of a CSV fixture, split on commas.
fn csv_rows(file: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(Path::new(FIXTURES).join(file))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// Validates and replays `file` (20 measured requests after 1 warmup, times x `scale`) and
/// checks every request against `want`, the trace's (arrival ms, prompt tokens, output tokens)
/// read by hand: due times, and the simulator's word count and generated tokens. Returns
/// `validate`'s text.
fn replays_as_published(file: &str, scale: f64, want: &[(f64, u64, u64)]) -> String {
    let yaml = format!("scenarios:\n  - name: t\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1'}}\n    request: {{ignore_eos: true}}\n    load: {{samples: 20, warmup: 1, trace: {{file: traces/{file}, time_scale: {scale}}}}}\n");
    let dir = project(&yaml);
    let (code, validated) = run(dir.path(), &["validate"]);
    assert_eq!(code, Some(0), "{validated}");
    let (code, text) = run(
        dir.path(),
        &["check", "--allow-missing-baseline", "--output", "r.json"],
    );
    assert_eq!(code, Some(0), "{text}");
    let r = json(&dir.path().join("r.json"));
    let s = &r["scenarios"][0];
    let at: Vec<f64> = want.iter().map(|w| w.0).collect();
    let (p50, p99) = schedule_matches(s, &at, scale);
    println!("{file} replay: schedule delay P50 {p50} ms, P99 {p99} ms");
    let recs = by_index(s);
    assert_eq!(recs.len(), 20);
    for (g, rec) in recs.iter().enumerate() {
        assert_eq!(rec["work"]["entry"].as_u64(), Some(g as u64));
        let (_, input, output) = want[g];
        assert_eq!(
            rec["prompt_tokens"].as_u64(),
            Some(input),
            "{file} request {g}"
        );
        // a trace's 0 output tokens asks 1
        assert_eq!(
            rec["output_tokens"].as_u64(),
            Some(output.max(1)),
            "{file} request {g}"
        );
    }
    validated
}

#[test]
fn an_azure_2024_trace_with_utc_offsets_is_replayed() {
    // AzureLLMInferenceTrace_code_1week.csv's shape: `2024-05-10 00:00:00.009930+00:00`, some
    // times without a fraction. Before issue 45: `traces/azure2024.csv:2: TIMESTAMP
    // `2024-05-10 00:00:00.009930+00:00` is not like 2023-11-16 18:15:46.6805900`.
    let rows = csv_rows("azure2024.csv");
    let want: Vec<(f64, u64, u64)> = rows
        .iter()
        .map(|c| {
            // the seconds within minute 00:00 (all rows), the offset +00:00 taken off
            let sec: f64 = c[0]["2024-05-10 00:00:".len()..]
                .trim_end_matches("+00:00")
                .parse()
                .unwrap();
            (sec * 1000.0, c[1].parse().unwrap(), c[2].parse().unwrap())
        })
        .collect();
    // by hand: row 6 (`00:00:01+00:00`) is 1 s - 9.930 ms after row 1
    assert!((want[5].0 - want[0].0 - 990.07).abs() < 1e-6);
    let text = replays_as_published("azure2024.csv", 1.0, &want);
    // 19 gaps over 2.560101 - 0.009930 = 2.550171 s: 7.45 requests/s
    assert!(
        text.contains("(azure, 22 entries, sha256 ") && text.contains("mean rate 7.45 requests/s"),
        "{text}"
    );
}

#[test]
fn a_burstgpt_trace_is_replayed_without_its_failed_requests() {
    // BurstGPT_1.csv's shape: seconds from the first day's midnight, failed requests with
    // `Response tokens` 0. Before issue 45: `traces/burstgpt.csv:1: the header has no
    // `contexttokens` column; an Azure trace starts with TIMESTAMP,ContextTokens,GeneratedTokens`.
    let want: Vec<(f64, u64, u64)> = csv_rows("burstgpt.csv")
        .iter()
        .filter(|c| c[3] != "0")
        .map(|c| {
            let t: f64 = c[0].parse().unwrap();
            (t * 1000.0, c[2].parse().unwrap(), c[3].parse().unwrap())
        })
        .collect();
    // by hand: rows 2, 10 and 18 failed; the first three replayed at 5, 7 and 14 s
    assert_eq!(want.len(), 21);
    assert_eq!(
        want[..3],
        [(5000.0, 373, 287), (7000.0, 708, 94), (14000.0, 223, 206)]
    );
    let text = replays_as_published("burstgpt.csv", 0.01, &want);
    assert!(
        text.contains(
            "(burstgpt, 21 entries (3 failed requests, `Response tokens` 0, left out), sha256 "
        ),
        "{text}"
    );
}

#[test]
fn a_mooncake_fast25_trace_is_replayed() {
    // conversation_trace.jsonl's shape (FAST'25 release): many requests at one timestamp, a
    // shared first block (hash id 0)
    let want: Vec<(f64, u64, u64)> =
        std::fs::read_to_string(Path::new(FIXTURES).join("mooncake_fast25.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["timestamp"].as_f64().unwrap(),
                    v["input_length"].as_u64().unwrap(),
                    v["output_length"].as_u64().unwrap(),
                )
            })
            .collect();
    assert_eq!(
        want[..5].iter().map(|w| w.0).collect::<Vec<_>>(),
        [0.0, 0.0, 0.0, 0.0, 3000.0]
    );
    let text = replays_as_published("mooncake_fast25.jsonl", 0.05, &want);
    assert!(text.contains("(mooncake, 22 entries, sha256 "), "{text}");
}
