//! `check --load-shard I/N` on N workers with one start time against one simulator, then
//! `perfgate report` merging them into one sample and gating it (docs/load-shards.md), and
//! every refusal of a merge that would not be the scenario.
//!
//! Known answers: the simulator sends the first token 30 ms after a request arrives (sigma 0.05)
//! and each next one 4 ms later; loopback and a busy machine only add to that. The scenario runs
//! 8 streams and 80 measured requests; 4 workers each take 2 streams and 20 requests.
//! Four processes at 2 streams load a busy 2-core machine differently from one at 8 (a merged TTFT
//! P90 1.32x the single process's was seen in CI), so the gate's floor is 40 ms TTFT and 10 ms TPOT:
//! the merge must gate and pass, and its TTFT P50 is held to the single process's within 15 ms below.

use crate::support::perfgate_in;
use serde_json::Value;
use std::process::Stdio;

fn scenario(url: &str, prompt: &str) -> String {
    format!(
        "scenarios:\n  - name: shared\n    endpoint: {{base_url: '{url}', model: perfgate-sim}}\n    request: {{prompt: '{prompt}', max_tokens: 8, ignore_eos: true}}\n    load: {{concurrency: 8, samples: 80, warmup: 2}}\n    gate: {{min_delta: {{ttft: 40ms, tpot: 10ms}}}}\n"
    )
}

/// `perfgate sim` on a free port (TTFT 30 ms, sigma 0.05, 4 ms a token), stopped when dropped.
fn sim() -> crate::support::Sim {
    crate::support::Sim::start(
        300,
        &["--ttft-ms", "30", "--ttft-sigma", "0.05", "--tpot-ms", "4"],
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ttfts(s: &Value) -> Vec<f64> {
    s["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["ttft_ms"].as_f64())
        .collect()
}

#[test]
fn four_workers_with_one_start_merge_into_the_scenarios_sample_and_bad_merges_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let simulator = sim();
    let url = simulator.url.clone();
    std::fs::write(d.join("s.yaml"), scenario(&url, "Say something.")).unwrap();
    let pg = || perfgate_in(d, 240);

    // one process at concurrency 8: the baseline
    let o = pg()
        .args(["bless", "-s", "s.yaml", "--runs", "1"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let single = crate::support::read_json(&d.join("baselines/shared.json"));
    let single_ttft_p50 = single["summary"]["ttft_ms"]["p50"].as_f64().unwrap();

    // four workers, one start time a few seconds ahead (after their warmups)
    let workers: Vec<_> = (1..=4)
        .map(|i| {
            let mut c = crate::support::perfgate_process(d, 240);
            c.args([
                "check",
                "-s",
                "s.yaml",
                "--load-shard",
                &format!("{i}/4"),
                "--start-at",
                "+10",
                "--output",
                &format!("w{i}.json"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for i in 1..=4 {
        let r = crate::support::read_json(&d.join(format!("w{i}.json")));
        assert_eq!(
            (r["verdict"].as_str(), r["exit_code"].as_i64()),
            (Some("MEASURED"), Some(0))
        );
        let s = &r["scenarios"][0];
        assert_eq!(s["status"], "load_shard");
        assert_eq!(s["concurrency"], 8, "the scenario's whole concurrency");
        let ls = &s["load_shard"];
        assert_eq!(
            (ls["index"].as_u64(), ls["count"].as_u64()),
            (Some(i), Some(4))
        );
        assert_eq!(
            (ls["concurrency"].as_u64(), ls["samples"].as_u64()),
            (Some(2), Some(20))
        );
        assert_eq!(s["records"].as_array().unwrap().len(), 20);
        assert!(
            s["checks"].as_array().unwrap().is_empty(),
            "a worker does not gate"
        );
    }

    // merged and gated against the single process's baseline
    let files = ["w1.json", "w2.json", "w3.json", "w4.json"];
    let o = pg()
        .args(["report", "-s", "s.yaml", "--output", "merged.json"])
        .args(files)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let m = crate::support::read_json(&d.join("merged.json"));
    let s = &m["scenarios"][0];
    assert_eq!(s["status"], "compared");
    assert!(s.get("load_shard").is_none());
    let windows = s["workers"]["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 4);
    assert!(s["workers"]["overlap"].as_f64().unwrap() >= 0.5);
    let recs = s["records"].as_array().unwrap();
    assert_eq!(recs.len(), 80);
    let starts: Vec<f64> = recs
        .iter()
        .map(|r| r["start_ms"].as_f64().unwrap())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "one clock, in order"
    );
    // every request ran beside the others: 8 in flight (median), counted over all workers
    let conc = median(
        recs.iter()
            .map(|r| r["concurrency"].as_f64().unwrap())
            .collect(),
    );
    assert!((7.0..=8.5).contains(&conc), "median in flight {conc}");
    // the same TTFT as one process: the simulator's 30 ms, within tens of ms of loopback
    let merged_p50 = median(ttfts(s));
    assert!((30.0..60.0).contains(&merged_p50), "{merged_p50}");
    assert!(
        (merged_p50 - single_ttft_p50).abs() < 15.0,
        "{merged_p50} vs {single_ttft_p50}"
    );
    assert!(
        text.contains("4 load-shard workers merged (80 requests)"),
        "{text}"
    );
    assert!(
        !s["checks"].as_array().unwrap().is_empty(),
        "the merge gates"
    );

    // both files as the schema documents them
    let v = crate::report_schema::validator();
    for doc in [&crate::support::read_json(&d.join("w1.json")), &m] {
        let errs = crate::report_schema::errors(&v, doc);
        assert!(errs.is_empty(), "{errs:?}");
    }

    let refused = |args: &[&str], want: &str| {
        let o = pg().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    // a worker missing
    refused(
        &["report", "-s", "s.yaml", "w1.json", "w2.json", "w3.json"],
        "worker 4/4 is missing",
    );
    // workers that did not load the server together: worker 3 moved an hour later
    let mut late = crate::support::read_json(&d.join("w3.json"));
    let at = late["scenarios"][0]["load_shard"]["started_unix_ms"]
        .as_f64()
        .unwrap();
    late["scenarios"][0]["load_shard"]["started_unix_ms"] = (at + 3_600_000.0).into();
    std::fs::write(d.join("late.json"), late.to_string()).unwrap();
    refused(
        &[
            "report",
            "-s",
            "s.yaml",
            "w1.json",
            "w2.json",
            "late.json",
            "w4.json",
        ],
        "the workers did not measure together",
    );
    // the scenario changed since the workers ran
    std::fs::write(d.join("changed.yaml"), scenario(&url, "Something else.")).unwrap();
    let mut args = vec!["report", "-s", "changed.yaml"];
    args.extend(files);
    refused(&args, "merge with the scenario files the workers ran");
    // one worker's file is a quarter of the load, not the scenario: no baseline from it
    refused(
        &[
            "bless",
            "-s",
            "s.yaml",
            "--baselines",
            "other",
            "--from",
            "w1.json",
            "--arm",
            "candidate",
        ],
        "holds load-shard worker 1/4",
    );
    assert!(!d.join("other/shared.json").exists());
    forged_worker_files_are_refused(d);
    // two scenarios in one load-sharded job would start apart
    std::fs::write(
        d.join("two.yaml"),
        scenario(&url, "x").replace(
            "scenarios:\n",
            &format!("scenarios:\n  - name: other\n    endpoint: {{base_url: '{url}', model: perfgate-sim}}\n    request: {{prompt: y, max_tokens: 8}}\n    load: {{concurrency: 8, samples: 80}}\n"),
        ),
    )
    .unwrap();
    refused(
        &["check", "-s", "two.yaml", "--load-shard", "1/4"],
        "--load-shard runs one scenario per job",
    );
    // what cannot be split at all
    std::fs::write(d.join("sim.yaml"), scenario("sim://", "x")).unwrap();
    refused(
        &["check", "-s", "sim.yaml", "--load-shard", "1/4"],
        "perfgate sim --port",
    );
    refused(
        &["check", "-s", "s.yaml", "--load-shard", "1/9"],
        "use at most 8 workers",
    );
    refused(
        &[
            "check",
            "-s",
            "s.yaml",
            "--load-shard",
            "1/4",
            "--start-at",
            "soon",
        ],
        "--start-at `soon`",
    );

    drop(simulator);
}

/// Issue 41 findings 6 and 9: a worker file edited into something no worker wrote crashed the
/// merge (`load_shard.count: 0`, a division by zero, exit 101) or merged and passed (a copy
/// relabelled as another worker: every request twice; records outside the run; an unmeasured
/// span of a day; one record repeated). Each is refused (exit 2), naming the file and what is
/// wrong. `d` holds the four workers' real files `w1.json` .. `w4.json`; each forgery replaces
/// worker 2 by `forged.json`.
fn forged_worker_files_are_refused(d: &std::path::Path) {
    type Forge = fn(&mut Value);
    let cases: [(&str, &str, Forge, &[&str]); 11] = [
        (
            "w2.json",
            "count 0",
            |v| v["load_shard"]["count"] = 0.into(),
            &["forged.json: scenarios[0].load_shard.count is 0"],
        ),
        (
            "w2.json",
            "count 0 alone",
            |v| v["load_shard"]["count"] = 0.into(),
            &["forged.json: scenarios[0].load_shard.count is 0"],
        ),
        (
            "w2.json",
            "index 0",
            |v| v["load_shard"]["index"] = 0.into(),
            &["forged.json: scenarios[0].load_shard.index is 0"],
        ),
        (
            "w2.json",
            "index 5 of 4",
            |v| v["load_shard"]["index"] = 5.into(),
            &["forged.json: scenarios[0].load_shard.index is 5"],
        ),
        (
            "w2.json",
            "count 10^6",
            |v| v["load_shard"]["count"] = 1_000_000.into(),
            &["forged.json: scenarios[0].load_shard.count is 1000000"],
        ),
        (
            "w1.json",
            "worker 1 relabelled 2",
            |v| v["load_shard"]["index"] = 2.into(),
            &[
                "worker 2/4 (forged.json)",
                "response id chatcmpl-sim-",
                "w1.json",
            ],
        ),
        (
            "w2.json",
            "a negative start",
            |v| v["records"][3]["start_ms"] = (-5000.0).into(),
            &["worker 2/4 (forged.json)", "records[3] runs from -5000 ms"],
        ),
        (
            "w2.json",
            "a start 11 days on",
            |v| v["records"][0]["start_ms"] = 1e9.into(),
            &[
                "worker 2/4 (forged.json)",
                "records[0] runs from 1000000000 ms",
            ],
        ),
        (
            "w2.json",
            "an unmeasured day",
            |v| v["load_shard"]["unmeasured_spans"] = serde_json::json!([[0.0, 86_400_000.0]]),
            &["worker 2/4 (forged.json)", "unmeasured span [0, 86400000]"],
        ),
        (
            "w2.json",
            "one record 20 times",
            |v| {
                let r = v["records"][0].clone();
                v["records"] = Value::Array(vec![r; 20]);
            },
            &[
                "worker 2/4 (forged.json)",
                "response id chatcmpl-sim-",
                "records[0] and records[1]",
            ],
        ),
        (
            "w2.json",
            "one record twice, ids dropped",
            |v| {
                let recs = v["records"].as_array_mut().unwrap();
                for r in recs.iter_mut() {
                    r.as_object_mut().unwrap().remove("response_id");
                }
                recs[5] = recs[4].clone();
            },
            &[
                "worker 2/4 (forged.json)",
                "records[4] and records[5] are the same record",
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (from, what, forge, want) in cases {
        let mut v = crate::support::read_json(&d.join(from));
        forge(&mut v["scenarios"][0]);
        std::fs::write(d.join("forged.json"), v.to_string()).unwrap();
        // worker 2 replaced; a count 0 given alone is what divided by zero
        let alone = what == "count 0 alone";
        let files: &[&str] = if alone {
            &["forged.json"]
        } else {
            &["w1.json", "forged.json", "w3.json", "w4.json"]
        };
        let o = perfgate_in(d, 60)
            .args(["report", "-s", "s.yaml"])
            .args(files)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(2) || !want.iter().all(|w| err.contains(w)) {
            wrong.push(format!(
                "{what}: exit {:?}, wanted 2 and {want:?}: {err}",
                o.status.code()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}
