//! `request.conversation` against a REAL server: llama.cpp's `llama-server` over Gemma 3 270M
//! (`scripts/realserver.sh setup`, cached under ~/.cache/perfgate), one thread and ONE slot, so
//! its per-slot prompt cache is deterministic: each turn of a conversation reuses the previous
//! turn's prompt held in the slot, each conversation's first turn the shared system prompt.
//!
//! The Done-when item: the hit rate the server REPORTS (`usage.prompt_tokens_details.
//! cached_tokens`, which this llama.cpp sends beside `timings.cache_n`, the same count) and the
//! one the cold reference MEASURES from TTFTs (`sum(cold - warm) / sum(cold - floor)`, the floor
//! being the cold line and two words) agree on the same requests within perfgate's own
//! [`AGREE_WITHIN`] (15 points).
//!
//! Why they should agree here, and what llama.cpp does to the counts (b1-0c1e570):
//! - Gemma 3 uses sliding-window attention, so llama.cpp cannot truncate a slot's cache at any
//!   position: it restores a context checkpoint it took 4 tokens before the end of the last
//!   prompt, and re-evaluates the last 5 tokens of whatever it reuses. The next turn reports the
//!   previous turn's whole prompt minus 5: the slot also holds the generated answer, but the
//!   history keeps perfgate's fixed answer text instead, so only the common prefix (the previous
//!   prompt, up to `<start_of_turn>model`) is reused. Those 5 tokens and the first decode step
//!   are in the warm TTFT; the floor pays the decode step and a few tokens too.
//! - The cold reference's cache-busting first line goes into the system message, which Gemma's
//!   template puts right after `<bos><start_of_turn>user\n`: no checkpoint lies within those 4
//!   shared tokens, so llama.cpp recomputes the cold prompt in full (its log: 326 of 326, 408 of
//!   408, 490 of 490 tokens evaluated).
//! - Prefill on one CPU thread is linear in the tokens computed plus ~40 ms a decode call
//!   (measured with curl: 5 tokens 63-73 ms, 55 tokens 308 ms): a few x 40 ms against a span
//!   (cold - floor) of 2-7 s, 1-2 points either way.
//!
//! The one weakness: the warm TTFT is timed during the run, cold and floor after it, so a load
//! that changes between the two moves the measured rate by about (slowdown) x warm / span. The
//! tolerance stays perfgate's own 15 points (what it uses to call a server's counts not
//! believable): the test asserts that an honest server is never called so. The per-request
//! check below (a turn reuses the previous turn's prompt and no more than the slot holds) is
//! what pins llama.cpp's counts. Measured figures: the stop note of issue 31.

#[path = "support/mod.rs"]
mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// perfgate's own tolerance (src/stats/cache.rs `AGREE_WITHIN`): beyond it the results carry a
/// note that the server's cached-token counts are not believable.
const AGREE_WITHIN: f64 = 0.15;
/// The least measured reuse: every request here reuses at least the shared system prompt (~88 %
/// of turn 1's prompt) and turns 2 and 3 their whole previous prompt (~84-86 %); a cache that
/// reused nothing measures ~0 (one that kept only the system prompt ~75 %: the per-request
/// check tells that one apart).
const MIN_MEASURED: f64 = 0.5;
const TURNS: usize = 3;
/// Tokens generated a request: the slot holds the previous prompt and these.
const MAX_TOKENS: u64 = 4;
const SAMPLES: usize = 21;
/// Reference pairs: 3 of the 21 requests are requests 0, 8 and 16, turns 1, 3 and 2 (src/
/// runner/reference.rs `spread`), each turn position once. (With 4 pairs `spread` picks
/// 0, 6, 12, 15, all turn 1; with 6, turns 1 and 2 only: a perfgate bug, see the commit.)
const REFERENCE: usize = 3;
/// Tokens llama.cpp re-evaluates of a reused prefix (its SWA checkpoint 4 tokens before the
/// end, plus the one token every prompt computes), with room: a turn's reported reuse is at
/// least its previous turn's prompt minus this.
const REEVALUATED: u64 = 16;

/// The llama-server process, killed by its PID when the test ends (pass or panic).
struct Server {
    pid: u32,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.pid.to_string())
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/realserver.sh")
}

fn built() -> bool {
    let out = std::process::Command::new("bash")
        .arg(script())
        .arg("path")
        .output()
        .expect("run realserver.sh path");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let paths: Vec<&str> = text.lines().collect();
    paths.len() == 2 && paths.iter().all(|p| Path::new(p).exists())
}

/// One thread, ONE slot (its prompt cache holds the last request's prompt and answer), 2048
/// tokens of context (the longest prompt here, turn 3 with the cold line, is under 500).
fn start() -> Server {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = std::process::Command::new("timeout")
        .args(["180", "bash"])
        .arg(script())
        .args(["start", &port.to_string()])
        .env("THREADS", "1")
        .env("PARALLEL", "1")
        .env("CTX", "2048")
        .stderr(Stdio::inherit())
        .output()
        .expect("start llama-server");
    assert!(out.status.success(), "llama-server did not start");
    let pid: u32 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("pid");
    Server { pid, port }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn reported_and_measured_prefix_reuse_agree_on_llama_server() {
    if !built() {
        support::missing(
            "PERFGATE_REQUIRE_REALSERVER",
            "llama-server is not built: run `scripts/realserver.sh setup`",
        );
        return;
    }
    let t0 = std::time::Instant::now();
    let server = start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    let yaml = format!(
        "scenarios:\n  - name: chat-{TURNS}turn\n    endpoint: {{base_url: 'http://127.0.0.1:{}/v1', model: gemma-3-270m, first_token_timeout: 120s, idle_timeout: 120s, request_timeout: 300s}}\n    request:\n      max_tokens: {MAX_TOKENS}\n      temperature: 0\n      ignore_eos: true\n      conversation: {{turns: {TURNS}, system_tokens: 300, user_tokens: 12, think_time: 10ms, reference: {REFERENCE}}}\n    load: {{concurrency: 1, samples: {SAMPLES}, warmup: 1}}\n",
        server.port
    );
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).unwrap();
    let o = support::perfgate_in(dir.path(), 600)
        .args(["check", "--allow-missing-baseline", "--output", "r.json"])
        .output()
        .unwrap();
    let text = support::output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &r["scenarios"][0];
    let c = &s["cache"];
    eprintln!(
        "conversation on llama-server ({:.0} s): reported {:.3} (on the reference {:.3}), measured {:.3} over {} pairs; span {:.0} ms; TTFT warm {:.0} cold {:.0} floor {:.0} ms",
        t0.elapsed().as_secs_f64(),
        f(&c["reported_hit_rate"]),
        f(&c["reported_on_reference"]),
        f(&c["measured_hit_rate"]),
        c["reference_pairs"],
        f(&c["span_ms"]),
        f(&c["warm_ttft_ms"]),
        f(&c["cold_ttft_ms"]),
        f(&c["floor_ttft_ms"]),
    );

    // every measured request succeeded and the server said what it reused
    let recs = s["records"].as_array().unwrap();
    assert_eq!(recs.len(), SAMPLES, "{text}");
    let mut by_index: Vec<&Value> = recs.iter().collect();
    by_index.sort_by_key(|x| x["work"]["index"].as_u64());
    for (g, rec) in by_index.iter().enumerate() {
        let prompt = rec["prompt_tokens"].as_u64().expect("usage.prompt_tokens");
        let cached = rec["cached_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("request {g}: no cached tokens reported\n{text}"));
        let turn = rec["work"]["turn"].as_u64().expect("work.turn");
        eprintln!(
            "request {g} (turn {turn}, via {}): {cached} of {prompt} prompt tokens cached",
            rec["cached_source"]
        );
        assert_eq!(turn as usize, g % TURNS + 1, "request {g}");
        if g % TURNS > 0 {
            // the previous turn's whole prompt, but for what llama.cpp re-evaluates; never
            // more than the slot holds (that prompt and its generated answer)
            let before = by_index[g - 1]["prompt_tokens"].as_u64().unwrap();
            assert!(
                cached + REEVALUATED >= before && cached <= before + MAX_TOKENS,
                "request {g} (turn {turn}) reused {cached}; the turn before was {before} tokens\n{text}"
            );
        } else {
            // the shared system prompt (~340 tokens with the template)
            assert!(
                cached >= 200 && cached < prompt,
                "request {g} (turn 1) reused {cached} of {prompt}\n{text}"
            );
        }
    }

    assert_eq!(c["requests"].as_u64(), Some(SAMPLES as u64), "{c}");
    assert_eq!(c["reported_requests"].as_u64(), Some(SAMPLES as u64), "{c}");
    assert_eq!(c["reference_pairs"].as_u64(), Some(REFERENCE as u64), "{c}");
    assert!(c["unmeasured"].is_null(), "{c}");
    let reported = f(&c["reported_on_reference"]);
    let measured = f(&c["measured_hit_rate"]);
    assert!(
        (reported - measured).abs() <= AGREE_WITHIN,
        "reported {reported:.3} vs measured {measured:.3} on the same requests\n{c}\n{text}"
    );
    assert!(
        measured >= MIN_MEASURED,
        "measured reuse {measured:.3}\n{c}\n{text}"
    );
    // a whole prompt's prefill is visible, and the cold prompt slowest
    let (warm, cold, floor) = (
        f(&c["warm_ttft_ms"]),
        f(&c["cold_ttft_ms"]),
        f(&c["floor_ttft_ms"]),
    );
    assert!(
        f(&c["span_ms"]) >= 100.0 && floor < warm && warm < cold,
        "{c}"
    );
    // perfgate itself found no disagreement to note
    let notes = s["notes"].to_string();
    assert!(!notes.contains("not believable"), "{notes}");

    let by_turn = c["by_turn"].as_array().unwrap();
    assert_eq!(by_turn.len(), TURNS, "{c}");
    for (k, t) in by_turn.iter().enumerate() {
        assert_eq!(t["turn"].as_u64(), Some(k as u64 + 1), "{t}");
        assert_eq!(
            t["requests"].as_u64(),
            Some((SAMPLES / TURNS) as u64),
            "{t}"
        );
        assert!(f(&t["reported_hit_rate"]) >= MIN_MEASURED, "{t}");
    }
}
