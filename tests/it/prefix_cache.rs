//! `cache: cold` is cold for every request (issue 32 item 1), on a simulator that models a
//! prefix cache (`cached_ttft_ms`: a prompt it served before gets that TTFT instead of the drawn
//! one). Before the fix, the nonce was "<run>-<index in the phase>": the warmup's request i and
//! the measured request i shared a prompt, so the first `warmup` measured requests hit the
//! cache (measured: TTFT 21.9 ms for the first 3 of 20, 301-306 ms for the rest, in `check` and
//! in both arms of `ab`). Now the nonce counts every request of the session.
//!
//! Known answers, by hand: the simulator sends the first token `ttft_ms` = 300 ms after the
//! request arrives (sigma 0), or 20 ms on a cache hit; loopback, timer lateness and a busy
//! machine only add to that, so a request measured under 299 ms was a hit and one at 299 ms or
//! more was not (a hit would need 279 ms of lateness to pass for cold: it measures ~21 ms
//! idle). `cache: warm` (no nonce) is the control: every measured request after the warmup is a
//! hit.

use crate::support::perfgate_in;
use serde_json::Value;

const SIM: &str = "sim://?ttft_ms=300&ttft_sigma=0&tpot_ms=2&tpot_sigma=0&cached_ttft_ms=20&seed=1";
/// A TTFT at or above this was not a cache hit; below it, it was (see the module doc).
const COLD_FROM_MS: f64 = 299.0;

fn ttfts(records: &Value) -> Vec<f64> {
    records
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["ttft_ms"].as_f64().expect("a TTFT"))
        .collect()
}

/// `perfgate <args>` in a directory holding `s.yaml` (one scenario on [`SIM`] with `cache`):
/// the results JSON.
fn run(cache: &str, args: &[&str]) -> Value {
    let d = tempfile::tempdir().unwrap();
    let yaml = format!(
        "defaults:\n  endpoint: {{base_url: '{SIM}', model: perfgate-sim}}\n  request: {{prompt: 'Say something.', max_tokens: 4, ignore_eos: true, cache: {cache}}}\n  load: {{samples: 20, warmup: 3, concurrency: 1}}\nscenarios:\n  - name: c\n"
    );
    std::fs::write(d.path().join("s.yaml"), yaml).unwrap();
    let o = perfgate_in(d.path(), 180).args(args).output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(d.path().join("r.json")).unwrap()).unwrap()
}

fn check(cache: &str) -> Vec<f64> {
    let r = run(
        cache,
        &[
            "check",
            "-s",
            "s.yaml",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ],
    );
    ttfts(&r["scenarios"][0]["records"])
}

#[test]
fn cold_cache_measured_requests_never_hit_the_warmups_prompts() {
    let t = check("cold");
    assert_eq!(t.len(), 20);
    for (i, x) in t.iter().enumerate() {
        assert!(
            *x >= COLD_FROM_MS,
            "measured request {i}: TTFT {x} ms, a cache hit (cold is >= {COLD_FROM_MS} ms): {t:?}"
        );
    }
}

#[test]
fn warm_cache_measured_requests_all_hit() {
    // the control: without a nonce the warmup filled the cache for every measured request
    let t = check("warm");
    assert_eq!(t.len(), 20);
    for (i, x) in t.iter().enumerate() {
        assert!(
            *x < COLD_FROM_MS,
            "measured request {i}: TTFT {x} ms, not a hit (< {COLD_FROM_MS} ms): {t:?}"
        );
    }
}

#[test]
fn cold_cache_ab_arms_never_repeat_a_prompt() {
    // interleaved A/B: one request per arm at a time, each a separate measure call
    let r = run(
        "cold",
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            SIM,
            "--candidate-url",
            &SIM.replace("seed=1", "seed=2"),
            "--output",
            "r.json",
        ],
    );
    let s = &r["scenarios"][0];
    for (arm, recs) in [
        ("base", &s["ab"]["base_records"]),
        ("candidate", &s["records"]),
    ] {
        let t = ttfts(recs);
        assert_eq!(t.len(), 20, "{arm}");
        for (i, x) in t.iter().enumerate() {
            assert!(
                *x >= COLD_FROM_MS,
                "{arm} request {i}: TTFT {x} ms, a cache hit (cold is >= {COLD_FROM_MS} ms): {t:?}"
            );
        }
    }
}
