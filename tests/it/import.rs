//! `check --from EXPORT --format F` and `bless --from EXPORT --format F` (docs/import.md): each
//! format's documented shape read into records with hand-computed figures; a baseline blessed
//! from an export, a same-distribution export PASSes (exit 0) and a 30 % slower one FAILs
//! (exit 1, naming the metric); a real AIPerf 0.13.0 export against `perfgate sim`; summaries
//! without per-request records and bad lines refused (exit 2).

use crate::support::perfgate_in;
use perfgate::import::{self, Format};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

const SCENARIO: &str = r#"scenarios:
  - name: imported
    endpoint:
      base_url: "http://127.0.0.1:8000/v1"
      model: sim-model
    request:
      prompt: "thirty-two tokens of text"
      max_tokens: 16
    load:
      samples: 20
"#;

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-6)
}

#[test]
fn aiperf_documented_record_reads_as_written() {
    let imp = import::read(&fixture("aiperf-doc.jsonl"), Format::Aiperf).unwrap();
    let r = &imp.run.records;
    // the cancelled request is left out; the 503 is a failure
    assert_eq!(r.len(), 2);
    assert!(close(r[0].ttft_ms, 255.886568));
    assert!(close(r[0].e2e_ms, 297.525228));
    // (297.525228 - 255.886568) / (9 - 1) = 5.2048325, AIPerf's inter_token_latency
    assert!(close(r[0].tpot_ms, 5.2048325));
    assert_eq!(r[0].itl_ms.len(), 8);
    assert_eq!(
        (r[0].prompt_tokens, r[0].output_tokens),
        (Some(550), Some(9))
    );
    assert_eq!(r[1].error.as_ref().unwrap().status, Some(503));
    // 1759813207700000000 ns - 1759813207532900363 ns
    assert!((r[1].start_ms - 167.099637).abs() < 1e-3);
    assert!(imp
        .notes
        .iter()
        .any(|n| n.contains("1 request(s) AIPerf cancelled")));
}

#[test]
fn aiperf_real_export_reads_its_first_record() {
    // AIPerf 0.13.0 against `perfgate sim --ttft-ms 20 --tpot-ms 5`, trimmed of http_req_* metrics
    let imp = import::read(&fixture("aiperf-real.jsonl"), Format::Aiperf).unwrap();
    assert_eq!(imp.run.records.len(), 24);
    let first = imp.run.records.iter().find(|r| r.start_ms == 0.0).unwrap();
    assert!(close(first.ttft_ms, 39.260411999999995));
    assert!(close(first.e2e_ms, 79.00349899999999));
    // (79.003499 - 39.260412) / (11 - 1)
    assert!(close(first.tpot_ms, 3.9743087));
    assert_eq!(first.output_tokens, Some(11));
}

#[test]
fn guidellm_documented_requests_read_as_written() {
    let imp = import::read(&fixture("guidellm-benchmarks.json"), Format::Guidellm).unwrap();
    let r = &imp.run.records;
    assert_eq!(r.len(), 3, "the incomplete request is left out");
    // ordered by request_start_time: 6e1b (.000), 5d0a (.100), the errored 8a3d (.200)
    assert!(close(r[0].ttft_ms, 50.0));
    assert!(close(r[0].tpot_ms, 38.0));
    assert!(close(r[0].e2e_ms, 250.0));
    assert!(close(r[1].ttft_ms, 40.0));
    // inter_token_latency_ms = (0.290 - 0.140) s / (11 - 1) = 15 ms, not time_per_output_token_ms
    assert!(close(r[1].tpot_ms, 15.0));
    assert!(close(r[1].e2e_ms, 200.0));
    assert!((r[1].start_ms - 100.0).abs() < 1e-3);
    assert_eq!(r[2].error.as_ref().unwrap().status, Some(500));
    assert!(imp
        .notes
        .iter()
        .any(|n| n.contains("1 incomplete request(s)")));
}

#[test]
fn vllm_detailed_lists_read_as_written() {
    let imp = import::read(&fixture("vllm-detailed.json"), Format::Vllm).unwrap();
    let r = &imp.run.records;
    assert_eq!(r.len(), 3);
    assert!(close(r[0].ttft_ms, 40.0));
    assert!(close(r[0].e2e_ms, 90.0));
    // (90 - 40) / (5 - 1)
    assert!(close(r[0].tpot_ms, 12.5));
    assert!(close(r[1].tpot_ms, 22.5));
    assert!((r[1].start_ms - 20.0).abs() < 1e-6);
    assert!(r[2].error.is_some());
    assert_eq!(imp.run.model.as_deref(), Some("sim-model"));
}

/// Request i of a generated export: TTFT, TPOT in ms (a fixed multiset of values over every 10
/// requests, in an order set by `phase`), times `scale`.
fn timing(i: usize, phase: usize, scale: f64) -> (f64, f64) {
    let k = (i * 7 + phase) % 10;
    (
        (40.0 + 4.0 * k as f64) * scale,
        (8.0 + 0.4 * ((k * 3) % 10) as f64) * scale,
    )
}

const N: usize = 30;
const OUT: u64 = 16;

fn aiperf_export(phase: usize, scale: f64) -> String {
    (0..N)
        .map(|i| {
            let (ttft, tpot) = timing(i, phase, scale);
            let e2e = ttft + tpot * (OUT - 1) as f64;
            json!({
                "metadata": {"session_num": i, "x_request_id": format!("r{i}"), "turn_index": 0,
                    "request_start_ns": 1_765_000_000_000_000_000u64 + i as u64 * 100_000_000,
                    "benchmark_phase": "profiling", "was_cancelled": false},
                "metrics": {
                    "input_sequence_length": {"value": 32, "unit": "tokens"},
                    "time_to_first_token": {"value": ttft, "unit": "ms"},
                    "request_latency": {"value": e2e, "unit": "ms"},
                    "inter_chunk_latency": {"value": vec![tpot; OUT as usize - 1], "unit": "ms"},
                    "output_sequence_length": {"value": OUT, "unit": "tokens"},
                    "inter_token_latency": {"value": tpot, "unit": "ms"}},
                "error": null
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn guidellm_export(phase: usize, scale: f64) -> String {
    let reqs: Vec<Value> = (0..N)
        .map(|i| {
            let (ttft, tpot) = timing(i, phase, scale);
            let e2e = ttft + tpot * (OUT - 1) as f64;
            json!({"request_id": format!("r{i}"), "response_id": format!("chatcmpl-{i}"),
                "info": {"error": null}, "request_start_time": 1_765_000_000.0 + i as f64 * 0.1,
                "request_latency": e2e / 1000.0, "prompt_tokens": 32, "output_tokens": OUT,
                "time_to_first_token_ms": ttft, "inter_token_latency_ms": tpot})
        })
        .collect();
    json!({"metadata": {"version": 2}, "benchmarks": [{"type_": "generative_benchmark",
        "requests": {"successful": reqs, "incomplete": [], "errored": []}}]})
    .to_string()
}

fn vllm_export(phase: usize, scale: f64) -> String {
    let (mut ttfts, mut itls, mut lat) = (vec![], vec![], vec![]);
    for i in 0..N {
        let (ttft, tpot) = timing(i, phase, scale);
        ttfts.push(ttft / 1000.0);
        itls.push(vec![tpot / 1000.0; OUT as usize - 1]);
        lat.push((ttft + tpot * (OUT - 1) as f64) / 1000.0);
    }
    json!({"backend": "openai-chat", "model_id": "sim-model", "completed": N,
        "input_lens": vec![32; N], "output_lens": vec![OUT; N], "ttfts": ttfts, "itls": itls,
        "latencies": lat, "start_times": (0..N).map(|i| i as f64 * 0.1).collect::<Vec<_>>(),
        "errors": vec![""; N], "mean_ttft_ms": 58.0})
    .to_string()
}

/// Blesses from an export, checks a same-distribution export (exit 0) and a 30 % slower one
/// (exit 1, TTFT and TPOT FAIL), each check's report naming what the tool measured otherwise.
fn bless_then_check(format: &str, file: &str, export: fn(usize, f64) -> String, tool: &str) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.yaml"), SCENARIO).unwrap();
    let run = |args: &[&str]| {
        let o = perfgate_in(d.path(), 60).args(args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        (o.status.code(), out, err)
    };
    std::fs::write(d.path().join(file), export(0, 1.0)).unwrap();
    let (code, out, err) = run(&["bless", "-s", "s.yaml", "--from", file, "--format", format]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("the {tool} export, 30 requests")),
        "{out}"
    );
    assert!(d.path().join("baselines/imported.json").exists());

    std::fs::write(d.path().join(file), export(3, 1.0)).unwrap();
    let (code, out, err) = run(&["check", "-s", "s.yaml", "--from", file, "--format", format]);
    assert_eq!(code, Some(0), "same distribution: {out}{err}");
    assert!(out.contains("perfgate: PASS"), "{out}");
    assert!(
        out.contains(&format!("imported from {tool} export")),
        "{out}"
    );

    std::fs::write(d.path().join(file), export(3, 1.3)).unwrap();
    let (code, out, err) = run(&["check", "-s", "s.yaml", "--from", file, "--format", format]);
    assert_eq!(code, Some(1), "30% slower: {out}{err}");
    let fails: Vec<&str> = out.lines().filter(|l| l.contains("FAIL")).collect();
    assert!(fails.iter().any(|l| l.contains("TTFT P50")), "{out}");
    assert!(fails.iter().any(|l| l.contains("TPOT P50")), "{out}");
    assert!(
        out.contains("TPOT is "),
        "the TPOT definition is said: {out}"
    );
}

#[test]
fn aiperf_export_blesses_and_gates() {
    bless_then_check("aiperf", "profile_export.jsonl", aiperf_export, "AIPerf");
}

#[test]
fn guidellm_export_blesses_and_gates() {
    bless_then_check("guidellm", "benchmarks.json", guidellm_export, "GuideLLM");
}

#[test]
fn vllm_export_blesses_and_gates() {
    bless_then_check("vllm", "result.json", vllm_export, "vllm bench serve");
}

/// The real AIPerf export, each time metric times 1.3 (the request starts kept).
fn slower_aiperf(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            for (_, m) in v["metrics"].as_object_mut().unwrap() {
                if m["unit"] != "ms" {
                    continue;
                }
                m["value"] = match &m["value"] {
                    Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap() * 1.3).collect(),
                    x => json!(x.as_f64().unwrap() * 1.3),
                };
            }
            v.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_real_aiperf_export_gates_its_rerun_and_fails_a_slower_one() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("s.yaml"),
        SCENARIO.replace("max_tokens: 16", "max_tokens: 12"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let o = perfgate_in(d.path(), 60).args(args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        (o.status.code(), out + &String::from_utf8_lossy(&o.stderr))
    };
    let base = fixture("aiperf-real.jsonl");
    let rerun = fixture("aiperf-real-rerun.jsonl");
    let (code, out) = run(&[
        "bless",
        "-s",
        "s.yaml",
        "--from",
        base.to_str().unwrap(),
        "--format",
        "aiperf",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run(&[
        "check",
        "-s",
        "s.yaml",
        "--from",
        rerun.to_str().unwrap(),
        "--format",
        "aiperf",
    ]);
    assert_eq!(
        code,
        Some(0),
        "a second run against the same simulator: {out}"
    );
    assert!(out.contains("(0 FAIL,"), "{out}");
    let slow = d.path().join("slow.jsonl");
    std::fs::write(
        &slow,
        slower_aiperf(&std::fs::read_to_string(&rerun).unwrap()),
    )
    .unwrap();
    let (code, out) = run(&[
        "check",
        "-s",
        "s.yaml",
        "--from",
        slow.to_str().unwrap(),
        "--format",
        "aiperf",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("TPOT P50") && l.contains("FAIL")),
        "{out}"
    );
}

/// Blesses `{stem}-real-base.json` (bless prints `blessed`), checks `{stem}-real-rerun.json`
/// (a second run against the same simulator: PASS, exit 0) and `{stem}-real-slow.json` (the
/// simulator 30 % slower: TTFT P50 and TPOT P50 FAIL, exit 1), all real exports of `format`.
fn real_exports_pass_and_a_30_percent_slower_one_fails(stem: &str, format: &str, blessed: &str) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.yaml"), SCENARIO).unwrap();
    let run = |cmd: &str, which: &str| {
        let from = fixture(&format!("{stem}-real-{which}.json"));
        let o = perfgate_in(d.path(), 60)
            .args([cmd, "-s", "s.yaml", "--from", from.to_str().unwrap()])
            .args(["--format", format])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        (o.status.code(), out + &String::from_utf8_lossy(&o.stderr))
    };
    let (code, out) = run("bless", "base");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(blessed), "{out}");
    let (code, out) = run("check", "rerun");
    assert_eq!(
        code,
        Some(0),
        "a second run against the same simulator: {out}"
    );
    assert!(out.contains("(0 FAIL, 0 WARN,"), "{out}");
    let (code, out) = run("check", "slow");
    assert_eq!(code, Some(1), "{out}");
    for m in ["TTFT P50", "TPOT P50"] {
        assert!(
            out.lines().any(|l| l.contains(m) && l.contains("FAIL")),
            "{m}: {out}"
        );
    }
}

/// Real GuideLLM 0.8.1 exports (`guidellm run --profile kind=synchronous --constraint
/// kind=max_requests,count=30 --data kind=synthetic_text,prompt_tokens=32,output_tokens=16
/// --output kind=json`) against `perfgate sim --ttft-ms 20 --tpot-ms 5` twice and against
/// `--ttft-ms 26 --tpot-ms 6.5` (30 % slower), each with its benchmark's aggregated `metrics`
/// (which perfgate does not read) removed to keep the fixtures small.
#[test]
fn real_guidellm_exports_bless_pass_and_a_30_percent_slower_one_fails() {
    real_exports_pass_and_a_30_percent_slower_one_fails(
        "guidellm",
        "guidellm",
        "(the GuideLLM export, 30 requests; TTFT P50 20.9 ms, TPOT P50 4.99 ms)",
    );
}

/// Real `vllm bench serve` exports (vLLM 0.33.0 on this CPU-only machine, `--backend openai-chat
/// --endpoint /v1/chat/completions --dataset-name random --random-input-len 32
/// --random-output-len 16 --num-prompts 30 --max-concurrency 1 --ignore-eos --save-result
/// --save-detailed`, with a local word-level tokenizer since Hugging Face is out of reach) against
/// `perfgate sim --ttft-ms 20 --tpot-ms 5` twice and against `--ttft-ms 26 --tpot-ms 6.5`. By
/// hand from the base file: the median of `ttfts` is 22.83 ms; each request's TPOT is
/// (latency - ttft) / (16 - 1), median 5.071 ms (the mean of its 15 `itls` alike).
#[test]
fn real_vllm_bench_serve_exports_bless_pass_and_a_30_percent_slower_one_fails() {
    real_exports_pass_and_a_30_percent_slower_one_fails(
        "vllm",
        "vllm",
        "(the vllm bench serve export, 30 requests; TTFT P50 22.8 ms, TPOT P50 5.07 ms)",
    );
}

#[test]
fn summaries_bad_lines_and_several_scenarios_are_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.yaml"), SCENARIO).unwrap();
    let refused = |file: &str, text: &str, format: &str, want: &str| {
        std::fs::write(d.path().join(file), text).unwrap();
        for cmd in ["bless", "check"] {
            let o = perfgate_in(d.path(), 60)
                .args([cmd, "-s", "s.yaml", "--from", file, "--format", format])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd} {file}: {err}");
            assert!(err.contains(want), "{cmd} {file}: {err}");
        }
        assert!(!d.path().join("baselines/imported.json").exists());
    };
    refused(
        "profile_export_aiperf.json",
        "{\n  \"time_to_first_token\": {\"unit\": \"ms\", \"avg\": 41.2, \"p50\": 40.0, \"p99\": 80.1}\n}\n",
        "aiperf",
        "no per-request records to gate: this is AIPerf's aggregated statistics",
    );
    refused(
        "summary.json",
        r#"{"completed": 30, "mean_ttft_ms": 58.0, "p99_ttft_ms": 75.0}"#,
        "vllm",
        "saved without --save-detailed",
    );
    let mut lines = aiperf_export(0, 1.0);
    lines.push_str("\n{\"metadata\": {\"request_start_ns\": \"soon\"}}\n");
    refused(
        "bad.jsonl",
        &lines,
        "aiperf",
        "bad.jsonl:31: not an AIPerf record",
    );
    // --from without --arm or --format
    let o = perfgate_in(d.path(), 60)
        .args(["bless", "-s", "s.yaml", "--from", "bad.jsonl"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format aiperf|guidellm|vllm"));
    // two scenarios: an export is one scenario's requests
    let two = format!(
        "{SCENARIO}{}",
        SCENARIO
            .replace("scenarios:\n", "")
            .replace("name: imported", "name: other")
    );
    std::fs::write(d.path().join("s.yaml"), two).unwrap();
    std::fs::write(d.path().join("ok.jsonl"), aiperf_export(0, 1.0)).unwrap();
    let o = perfgate_in(d.path(), 60)
        .args([
            "check", "-s", "s.yaml", "--from", "ok.jsonl", "--format", "aiperf",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pick one with --only NAME"));
}
