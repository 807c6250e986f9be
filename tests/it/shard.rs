//! `check --shard I/N` across a CI matrix, then `perfgate report` merging the shards.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn perfgate(dir: &Path) -> Command {
    crate::support::perfgate_in(dir, 180)
}

/// Four scenarios on the simulator; TPOT comes from T (default 4 ms). Names not in sorted order.
const SIM: &str = r#"
defaults:
  endpoint:
    base_url: "sim://?ttft_ms=10&tpot_ms=${T:-4}&seed=1"
  request: {prompt: "Say something.", max_tokens: 16, ignore_eos: true}
  load: {samples: 20, warmup: 1}
  gate: {metrics: [tpot], quantiles: [p50]}
scenarios:
  - name: delta
  - name: alpha
  - name: charlie
  - name: bravo
"#;

fn names(file: &Path) -> Vec<String> {
    let r: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_shards_cover_each_scenario_once_and_merge_to_the_unsharded_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("scenarios")).unwrap();
    std::fs::write(d.join("scenarios/s.yaml"), SIM).unwrap();
    perfgate(d).arg("bless").assert().code(0);

    // a 50 % slower TPOT: the unsharded check fails
    let whole = perfgate(d)
        .env("T", "6")
        .args(["check", "--output", "whole.json"])
        .output()
        .unwrap();
    assert_eq!(
        whole.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&whole.stdout)
    );

    let mut seen = Vec::new();
    for i in 1..=2 {
        let o = perfgate(d)
            .env("T", "6")
            .args(["check", "--shard", &format!("{i}/2"), "--output"])
            .arg(format!("results-{i}.json"))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        let n = names(&d.join(format!("results-{i}.json")));
        assert_eq!(n.len(), 2, "{n:?}");
        seen.extend(n);
    }
    // sorted-name round robin: alpha, charlie in 1/2; bravo, delta in 2/2
    assert_eq!(names(&d.join("results-1.json")), ["alpha", "charlie"]);
    let all: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), 4);
    assert_eq!(
        all,
        ["alpha", "bravo", "charlie", "delta"]
            .map(String::from)
            .into()
    );

    let merged = perfgate(d)
        .args([
            "report",
            "results-1.json",
            "results-2.json",
            "--output",
            "merged.json",
        ])
        .output()
        .unwrap();
    assert_eq!(merged.status.code(), whole.status.code());
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("merged.json")).unwrap()).unwrap();
    let w: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("whole.json")).unwrap()).unwrap();
    assert_eq!(m["verdict"], w["verdict"]);
    assert_eq!(m["exit_code"], w["exit_code"]);
    assert_eq!(m["family_size"], w["family_size"]);
    assert_eq!(m["scenarios"].as_array().unwrap().len(), 4);
}

#[test]
fn bad_or_empty_shards_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("scenarios")).unwrap();
    std::fs::write(d.join("scenarios/s.yaml"), SIM).unwrap();
    for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
        perfgate(d).args(["check", "--shard", bad]).assert().code(2);
    }
    let o = perfgate(d)
        .args(["check", "--shard", "5/5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no scenario falls in this shard"));
}
