//! Open-loop load (`load.rate`): Poisson arrivals on the built-in simulator, schedule delay
//! reported, and a warning when the client falls behind its schedule.

use serde_json::Value;

fn check(yaml: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).unwrap();
    let out = crate::support::perfgate()
        .current_dir(dir.path())
        .env_remove("PERFGATE_SIM_TPOT_MS")
        .timeout(std::time::Duration::from_secs(120))
        .args(["check", "--allow-missing-baseline", "--output", "r.json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    (r["scenarios"][0].clone(), stdout)
}

#[test]
fn rate_50_per_second_is_kept() {
    let (s, stdout) = check(
        "scenarios:\n  - name: open\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&seed=3'}\n    request: {prompt: hi, max_tokens: 8}\n    load: {rate: 50, samples: 40, warmup: 0, seed: 7}\n",
    );
    let m = &s["measured"];
    assert_eq!(m["requests"], 40);
    assert_eq!(m["target_rate"], 50.0);
    // The schedule itself (seeded, independent of how fast this machine sends): 39 Poisson gaps
    // of mean 20 ms. The achieved rate is printed, not asserted: a stalled machine sends late.
    let mut sched: Vec<f64> = s["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sched_ms"].as_f64().unwrap())
        .collect();
    sched.sort_by(f64::total_cmp);
    let scheduled = 39.0 / ((sched[39] - sched[0]) / 1000.0);
    println!(
        "scheduled {scheduled:.1}/s, achieved {}/s",
        m["requests_per_s"]
    );
    assert!(
        (35.0..=70.0).contains(&scheduled),
        "the seeded schedule's rate {scheduled}/s"
    );
    let d = &m["schedule_delay_ms"];
    assert_eq!(d["n"], 40);
    assert!(
        m["ttft_from_schedule_ms"]["p50"].as_f64().unwrap()
            >= m["summary"]["ttft_ms"]["p50"].as_f64().unwrap()
    );
    for r in s["records"].as_array().unwrap() {
        let (start, sched) = (
            r["start_ms"].as_f64().unwrap(),
            r["sched_ms"].as_f64().unwrap(),
        );
        assert!(start + 0.01 >= sched, "{r}");
    }
    // Nothing caps the requests in flight, so the delay is the client's own (~1 ms idle, more
    // beside a busy neighbour): the note follows it, whatever it was.
    let p50 = d["p50"].as_f64().unwrap();
    assert_eq!(
        stdout.contains("fell behind"),
        p50 > perfgate::results::SCHEDULE_DELAY_WARN_MS,
        "median schedule delay {p50} ms: {stdout}"
    );
}

#[test]
fn a_capped_open_loop_with_slow_requests_shows_schedule_delay() {
    // 50/s arrivals but one request in flight, each taking ~75 ms: requests queue behind the cap
    let (s, stdout) = check(
        "scenarios:\n  - name: behind\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=10&seed=3'}\n    request: {prompt: hi, max_tokens: 8}\n    load: {rate: 50, concurrency: 1, samples: 20, warmup: 0, seed: 7}\n",
    );
    let m = &s["measured"];
    let d = &m["schedule_delay_ms"];
    assert!(d["p50"].as_f64().unwrap() > 100.0, "{d}");
    assert!(d["max"].as_f64().unwrap() > 300.0, "{d}");
    // latency from the schedule shows what latency from the send hides
    let from_sched = m["ttft_from_schedule_ms"]["p50"].as_f64().unwrap();
    let from_send = m["summary"]["ttft_ms"]["p50"].as_f64().unwrap();
    assert!(
        from_sched > from_send + 100.0,
        "{from_sched} vs {from_send}"
    );
    assert!(m["achieved_concurrency"].as_f64().unwrap() <= 1.05);
    assert!(
        stdout.contains("fell behind its arrival schedule"),
        "{stdout}"
    );
    let notes = s["notes"].to_string();
    assert!(notes.contains("fell behind"), "{notes}");
}

#[test]
fn closed_loop_reports_achieved_concurrency_and_no_schedule() {
    let (s, _) = check(
        "scenarios:\n  - name: closed\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=2&seed=3'}\n    request: {prompt: hi, max_tokens: 8}\n    load: {concurrency: 4, samples: 20, warmup: 0}\n",
    );
    let m = &s["measured"];
    assert!(m.get("schedule_delay_ms").is_none());
    assert!(m.get("target_rate").is_none());
    let c = m["achieved_concurrency"].as_f64().unwrap();
    assert!(c > 1.0 && c <= 4.05, "achieved concurrency {c}");
}
