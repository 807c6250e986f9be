//! End to end against a REAL server: llama.cpp's `llama-server` over Gemma 3 270M (built by
//! `scripts/realserver.sh setup`, cached under ~/.cache/perfgate).
//!
//! # What is asserted, and why only that (issue 26)
//! A shared CI machine drifts: the same llama-server moved its own decode speed ~10 % between two
//! runs a minute apart, and a request's TTFT at concurrency 2 holds slot waiting and connection
//! setup that llama.cpp's `prompt_ms` never sees. So no assertion here compares a latency
//! measured at one moment with one measured at another, or a client-side overhead with a model
//! of it: three fresh-machine CI runs failed on such assertions, none on a perfgate defect.
//! What is asserted holds on any machine, however loaded:
//!
//! - [`bless_then_check_against_llama_server`]: `bless` and `check` run end to end against a
//!   server perfgate starts itself (one process for both scenarios, gone afterwards); its
//!   identity (`/props`, `/v1/models`) and `/metrics` land in the results and the baseline;
//!   every request's output tokens come from usage and equal max_tokens; TTFT >= the server's
//!   own `prompt_ms` (the client cannot see the first token before the server computed it); the
//!   measured TPOT agrees with the server's own decode time of the same request (see
//!   [`tpot_agreement`]); `/metrics`' decode time per token agrees with the requests' own
//!   `timings`; the exit code is 1 exactly when a check FAILs. The verdicts are printed, not
//!   asserted: they compare two moments of a drifting machine.
//! - Verdicts come from a design where drift cancels: `perfgate ab` interleaves two servers
//!   request by request, so whatever the machine does reaches both arms.
//!   [`ab_of_two_identical_llama_servers_passes`] (the same model twice) must not FAIL;
//!   [`ab_with_an_f32_candidate_fails_on_tpot`] (the same weights requantized to F32, about
//!   twice the decode time per token on this CPU) must FAIL on TPOT P50 with exit 1, and
//!   perfgate's TPOT change must agree with the servers' own (their `timings`) within 10 %.
//!   A broken comparison (a swapped side, a wrong quantile, a miscomputed ratio) fails the
//!   second on every machine; a slow or drifting machine fails neither.
//! - [`speculative_decoding_against_llama_server`]: `check --allow-missing-baseline` against
//!   llama-server with a draft model (the same model as its own draft, issue 44): every
//!   request's draft counts come from its `timings` (`draft_n`, `draft_n_accepted`), and the
//!   acceptance rate and mean acceptance length perfgate reports are sum(accepted) /
//!   sum(drafted) and sum(output) / sum(output - accepted) of the records.
//! - [`responses_api_against_llama_server`]: `check --allow-missing-baseline` with `api:
//!   openai-responses` (issue 27) against llama-server's `POST /v1/responses`: every request
//!   succeeds with `max_tokens` output tokens from usage (llama.cpp passes `ignore_eos` on to
//!   its chat completion) and the server's own `timings` agree on the count; TTFT > 0 and at
//!   least the server's `prompt_ms`; TPOT finite and > 0; the server gone afterwards.

#[path = "support/mod.rs"]
mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Tokens per request of the bless + check test: 15 decode steps give each request's TPOT its
/// own server-side counterpart to compare with, as in the A/B tests (48 spent 90 s more of CI's
/// real-server chain, its critical path, for no other assertion; 24 until issue 41's warm-CI
/// budget). A TPOT divided by n instead of n - 1 is 16/15 = 6.7 % off per request at 16.
const MAX_TOKENS: u64 = 16;

/// Largest |ln(measured TPOT / the server's own)| accepted for the median request of a run.
/// Both time the same decode steps (see [`tpot_expected`]): they differ only by what the network
/// and the client add to the first and the last event of a stream, measured 0.0 % to 0.3 % at
/// the median on an idle and on a loaded 2-core machine. 10 % leaves room for a neighbour that
/// delays the client, not for a wrong formula: dividing by n instead of n - 1 is off by
/// 1 / (n - 1), 6.7 % per request in one direction at 16 tokens (visible in the printed median),
/// timing from the request instead of the first token by 5 % or more, counting chunks instead of tokens by 2x.
const TPOT_BAND: f64 = 0.10;
/// The same for any single request: one request's first or last event can be delayed by a
/// scheduling hiccup of tens of ms over a decode window of ~0.5 s (15 steps of ~30 ms on one
/// thread: 25 % is ~120 ms).
const TPOT_BAND_ONE: f64 = 0.25;

/// The tests of this binary run one at a time: each starts llama-servers that would otherwise
/// share the machine's two cores with the other test's (cargo runs a binary's tests in parallel).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/realserver.sh")
}

/// The llama-server binary and the model file, when `realserver.sh setup` has built them.
fn built() -> Option<(String, String)> {
    let out = std::process::Command::new("bash")
        .arg(script())
        .arg("path")
        .output()
        .expect("run realserver.sh path");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let paths: Vec<&str> = text.lines().collect();
    (paths.len() == 2 && paths.iter().all(|p| Path::new(p).exists()))
        .then(|| (paths[0].to_string(), paths[1].to_string()))
}

/// [`built`], or the skip rule's message when it is not (a failure under
/// `PERFGATE_REQUIRE_REALSERVER=1`, as scripts/test.sh sets).
fn built_or_skip() -> Option<(String, String)> {
    let b = built();
    if b.is_none() {
        support::missing(
            "PERFGATE_REQUIRE_REALSERVER",
            "llama-server is not built: run `scripts/realserver.sh setup`",
        );
    }
    b
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// True while `pid` runs (a zombie or a missing /proc entry is dead).
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => false,
    }
}

fn perfgate(dir: &Path) -> Command {
    support::perfgate_in(dir, 900)
}

/// Type-7 quantile (as the gate's reports use) of unsorted values.
fn quantile(mut v: Vec<f64>, p: f64) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// The server's own decode time per token of one request, from llama.cpp's `timings`:
/// `predicted_ms / predicted_n`.
fn server_tpot(rec: &Value) -> f64 {
    let t = &rec["server_timings"];
    let num = |k: &str| {
        t[k].as_f64()
            .unwrap_or_else(|| panic!("server_timings.{k} missing: {t}"))
    };
    num("predicted_ms") / num("predicted_n")
}

/// What perfgate's TPOT of a request should be by the server's own clock. llama.cpp counts in
/// `predicted_n` every generated token, the first one (sampled from the prompt's logits, inside
/// `prompt_ms`) included, and times in `predicted_ms` the decode steps after it: n - 1 steps
/// over n tokens. perfgate's TPOT is (t_last - t_first) / (n - 1), the same n - 1 steps seen from
/// the client. So the expectation is `predicted_ms / (predicted_n - 1)`; measured this way the
/// median ratio was 1.000 to 1.003, where `predicted_ms / predicted_n` gives n / (n - 1)
/// (1.021 at 48 tokens, 1.032 at 32).
fn tpot_expected(rec: &Value) -> f64 {
    let n = rec["server_timings"]["predicted_n"].as_f64().unwrap();
    server_tpot(rec) * n / (n - 1.0)
}

/// Measured TPOT against the server's own per-token decode time, request by request: the
/// median ratio within [`TPOT_BAND`] and every request within [`TPOT_BAND_ONE`]. Returns the
/// ratios' median, min and max for the log.
fn tpot_agreement(label: &str, recs: &[Value]) -> (f64, f64, f64) {
    let ratios: Vec<f64> = recs
        .iter()
        .map(|x| x["tpot_ms"].as_f64().unwrap() / tpot_expected(x))
        .collect();
    let median = quantile(ratios.clone(), 0.5);
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    println!("{label}: measured/server TPOT ratio median {median:.4}, min {min:.4}, max {max:.4}");
    assert!(
        median.ln().abs() < TPOT_BAND,
        "{label}: measured TPOT / server's own decode time per token = {median:.4} (median of {} requests), beyond the {TPOT_BAND} band",
        ratios.len()
    );
    for (r, x) in ratios.iter().zip(recs) {
        assert!(
            r.ln().abs() < TPOT_BAND_ONE,
            "{label}: one request's measured TPOT / server's own = {r:.4}: {x}"
        );
    }
    (median, min, max)
}

#[test]
fn bless_then_check_against_llama_server() {
    let _one = serial();
    let Some((llama_server, model)) = built_or_skip() else {
        return;
    };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    let yaml = format!(
        r#"defaults:
  endpoint:
    base_url: http://127.0.0.1:{port}/v1
    model: gemma-3-270m
  request:
    prompt: "Write a short story about a lighthouse keeper."
    max_tokens: {MAX_TOKENS}
    temperature: 0
    ignore_eos: true
  load:
    samples: 20
    warmup: 2
  server:
    # perfgate starts it (issue 16); one thread: the client shares this 2-core machine
    # (shared/realserver/REPORT.md). Both scenarios share the process.
    command: ["{llama_server}", -m, "{model}", --alias, gemma-3-270m, --host, 127.0.0.1,
              --port, "{port}", -t, "1", -np, "4", -c, "8192", --no-webui, --metrics]
    ready_timeout: 2m
    log: llama-server.log
scenarios:
  - name: llama-c1
    load: {{concurrency: 1}}
  - name: llama-c2
    load: {{concurrency: 2}}
"#
    );
    std::fs::write(dir.path().join("scenarios/llama.yaml"), yaml).unwrap();

    // One run: the assertions below do not lean on the tolerance widened to a run-to-run spread
    // (a few runs a minute apart on a shared machine can widen it to anything), and CI time is
    // spent once.
    let o = perfgate(dir.path())
        .args(["bless", "--runs", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "bless failed: {err}");
    println!("{}", String::from_utf8_lossy(&o.stdout));

    let o = perfgate(dir.path())
        .args(["check", "--output", "results.json"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    println!("{out}");
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "check against a working server must compare (exit 0 or 1), got {code:?}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();

    let mut any_fail = false;
    let mut pids = Vec::new();
    for s in r["scenarios"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        assert_eq!(s["status"], "compared", "{name}");
        // Started by perfgate, who says who it is and what it timed itself.
        let srv = &s["server"];
        println!("{name}: server {srv}");
        pids.push(srv["pid"].as_u64().expect("server pid"));
        let ttr = srv["time_to_ready_ms"].as_f64().unwrap();
        assert!(ttr > 0.0 && ttr < 120_000.0, "{name}: time to ready {ttr}");
        assert!(
            srv["identity"]["llama.cpp.build_info"]
                .as_str()
                .is_some_and(|b| !b.is_empty()),
            "{name}: /props build_info: {srv}"
        );
        // the context of one slot: -c 8192 shared by -np 4 slots
        assert_eq!(srv["identity"]["llama.cpp.n_ctx"], "2048", "{name}");
        assert_eq!(srv["identity"]["llama.cpp.total_slots"], "4", "{name}");
        assert_eq!(srv["identity"]["models.id"], "gemma-3-270m", "{name}");
        let fig = |k: &str| {
            srv["metrics"][k]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: server metric {k} missing: {srv}"))
        };
        assert!(fig("llamacpp_prompt_ms_per_token") > 0.0, "{name}");
        assert!(fig("llamacpp_prompt_seconds") > 0.0, "{name}");
        // decode time per token over the measured requests: the weighted mean of the requests'
        // own `timings` (every request decodes MAX_TOKENS tokens), give or take the last request's
        // counters landing after the scrape
        let decode = fig("llamacpp_decode_ms_per_token");
        let per_request: Vec<f64> = s["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(server_tpot)
            .collect();
        let mean = per_request.iter().sum::<f64>() / per_request.len() as f64;
        println!("{name}: /metrics decode {decode:.3} ms/token, records' timings mean {mean:.3}");
        assert!(
            (decode / mean).ln().abs() < 0.10,
            "{name}: /metrics decode {decode} ms/token vs timings {mean}"
        );
        // the scrape spans the measured phase: at concurrency 2 (steady state) it also holds the
        // 2 ramp-up requests and up to 2 per stream of drain (docs/scenarios.md "Steady state")
        let tokens = fig("llamacpp_decode_tokens");
        let unmeasured = if name == "llama-c2" { 2.0 + 4.0 } else { 0.0 };
        assert!(
            (18.0 * MAX_TOKENS as f64..=(22.0 + unmeasured) * MAX_TOKENS as f64).contains(&tokens),
            "{name}: {tokens} decode tokens over 20 requests of {MAX_TOKENS}"
        );
        let recs = s["records"].as_array().unwrap();
        assert_eq!(recs.len(), 20, "{name}");
        for x in recs {
            assert!(x.get("error").is_none(), "{name}: {x}");
            assert_eq!(
                x["output_tokens"].as_u64(),
                Some(MAX_TOKENS),
                "{name}: output tokens"
            );
            assert_eq!(x["token_source"], "usage", "{name}");
            assert_eq!(
                x["server_timings"]["predicted_n"].as_u64(),
                Some(MAX_TOKENS),
                "{name}: the server generated what usage says"
            );
            let ttft = x["ttft_ms"].as_f64().unwrap();
            let prompt_ms = x["server_timings"]["prompt_ms"].as_f64().unwrap();
            assert!(
                ttft >= prompt_ms,
                "{name}: TTFT {ttft} ms < server prompt_ms {prompt_ms}"
            );
        }
        tpot_agreement(name, recs);

        // The baseline's requests, from every blessed run.
        let b: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("baselines/{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(b["environment"]["server"], "llama.cpp");
        assert_eq!(
            b["environment"]["server_identity"]["llama.cpp.build_info"],
            srv["identity"]["llama.cpp.build_info"],
            "{name}: the same build blessed and checked"
        );
        assert!(b["environment"]["server_metrics"]["llamacpp_decode_ms_per_token"].is_number());
        let base: Vec<Value> = b["runs"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|run| run["records"].as_array().unwrap().clone())
            .collect();
        assert_eq!(base.len(), 20, "{name}: 20 requests blessed");
        assert!(base
            .iter()
            .all(|x| x["server_timings"]["predicted_ms"].is_number()));
        tpot_agreement(&format!("{name} (blessed)"), &base);

        // The verdicts compare two moments of a drifting machine: printed, not judged (the
        // ab tests below judge verdicts where drift cancels).
        for c in s["checks"].as_array().unwrap() {
            let verdict = c["verdict"].as_str().unwrap();
            println!(
                "{name}: {} {}: ratio {} fail tolerance {} {verdict}",
                c["metric"], c["kind"], c["ratio"], c["fail"]
            );
            any_fail |= verdict == "FAIL";
        }
    }
    assert_eq!(
        code,
        Some(if any_fail { 1 } else { 0 }),
        "exit code against the verdicts"
    );
    // one process for both scenarios, and gone once perfgate ended
    assert_eq!(pids[0], pids[1], "the scenarios share one server");
    assert!(
        !alive(pids[0]),
        "llama-server {} survived perfgate",
        pids[0]
    );
    assert!(std::fs::read_to_string(dir.path().join("llama-server.log"))
        .unwrap()
        .contains(&format!("listening on http://127.0.0.1:{port}")));
}

/// Output tokens per request of the A/B tests: fewer than the bless/check test's, since the two
/// arms' 40 requests (and the base's repeats) share the machine's two cores and are CI's critical
/// path (32 until issue 41: the F32 test took 167 s of a warm CI run; Q4_K_M and F32 answers
/// part at the first token on these prompts, and 15 decode steps still time TPOT: the measured
/// and the server's own TPOT agreed within 0.6 % per request at 32).
const AB_MAX_TOKENS: u64 = 16;

/// Requests per arm of the Q4_K_M against F32 test: 5 sends of each of the 8 prompts, so that
/// answers changed for 2 of them (10 of 40) against none of the 32 base repeats is a functional
/// change at alpha 0.01 (p 0.0016), where 20 requests (4 of 20 against 0 of 12, p 0.135) could
/// only WARN.
const F32_SAMPLES: u64 = 40;

/// The A/B tests' prompt set (issue 44): 8 short different prompts, sent in file order, so the
/// 20 requests of each arm (40 in the F32 test) send each prompt 2 or 3 times (5 times): the
/// base arm's 12 repeats (20 - 8; 32) are its own repeatability, and `gate.outputs` compares each request's answer between the arms.
const AB_PROMPTS: [&str; 8] = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "To make a cup of tea, first",
    "The largest planet in the solar system is",
    "My favourite thing about autumn is",
    "A good way to learn a new language is",
    "The first rule of programming is",
];

/// The F32 requantization of the model, when `realserver.sh setup` has written it.
fn slow_model() -> Option<String> {
    let out = std::process::Command::new("bash")
        .arg(script())
        .arg("slow-model")
        .output()
        .expect("run realserver.sh slow-model");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && Path::new(&path).exists()).then_some(path)
}

/// One `perfgate ab` run against two llama-servers perfgate starts from the scenario's
/// `server: {base: ..., candidate: ...}` arms (one thread each, two ports), interleaved request
/// by request (issue 17): the base serves `base_model`, the candidate `cand_model`, both under
/// the alias gemma-3-270m. Asserts what holds on any machine: both arms measured every request
/// ([`AB_MAX_TOKENS`] tokens from usage), each arm's TPOT agrees with its own server's `timings`
/// ([`tpot_agreement`]), two processes that are gone afterwards. Returns the exit code, the
/// results, and each arm's server-side TPOT P50 (base, candidate).
fn ab_run(
    llama_server: &str,
    base_model: &str,
    cand_model: &str,
    samples: u64,
) -> (Option<i32>, Value, f64, f64) {
    let (pa, pb) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let arm = |p: u16, model: &str| {
        format!(
            r#"{{base_url: "http://127.0.0.1:{p}/v1", log: llama-{p}.log,
             command: ["{llama_server}", -m, "{model}", --alias, gemma-3-270m, --host, 127.0.0.1,
                       --port, "{p}", -t, "1", -np, "4", -c, "8192", --no-webui, --metrics]}}"#
        )
    };
    let prompts: String = AB_PROMPTS
        .iter()
        .map(|p| format!("{}\n", serde_json::json!({ "prompt": p })))
        .collect();
    std::fs::write(dir.path().join("prompts.jsonl"), prompts).unwrap();
    let yaml = format!(
        r#"defaults:
  endpoint: {{base_url: "http://127.0.0.1:{pa}/v1", model: gemma-3-270m}}
  request:
    prompt_set: {{file: prompts.jsonl, order: file}}
    max_tokens: {AB_MAX_TOKENS}
    temperature: 0
    ignore_eos: true
  load: {{samples: {samples}, warmup: 2, concurrency: 1}}
  server:
    ready_timeout: 2m
    base: {}
    candidate: {}
scenarios:
  - name: llama-ab
"#,
        arm(pa, base_model),
        arm(pb, cand_model)
    );
    std::fs::write(dir.path().join("ab.yaml"), yaml).unwrap();
    let t0 = std::time::Instant::now();
    let o = perfgate(dir.path())
        .args(["ab", "-s", "ab.yaml", "--output", "results.json"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    println!("{out}");
    println!("perfgate ab took {:.1} s", t0.elapsed().as_secs_f64());
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "ab of two working servers must compare (exit 0 or 1), got {code:?}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    let s = &r["scenarios"][0];
    assert_eq!(s["status"], "compared");
    let ab = &s["ab"];
    assert_eq!(ab["design"], "interleaved");
    assert_eq!(ab["alternations"], samples);
    let arms = [
        ("base", &ab["base_records"], &ab["base_server"]),
        ("candidate", &s["records"], &s["server"]),
    ];
    let mut pids = Vec::new();
    let mut own_p50 = Vec::new();
    for (label, recs, srv) in arms {
        let recs = recs.as_array().unwrap();
        assert_eq!(recs.len() as u64, samples, "{label}");
        for x in recs {
            assert!(x.get("error").is_none(), "{label}: {x}");
            assert_eq!(x["output_tokens"].as_u64(), Some(AB_MAX_TOKENS), "{label}");
            assert_eq!(x["token_source"], "usage", "{label}");
        }
        let p50 = |k: &str| quantile(recs.iter().map(|x| x[k].as_f64().unwrap()).collect(), 0.5);
        let own = quantile(recs.iter().map(tpot_expected).collect(), 0.5);
        println!(
            "{label}: TTFT P50 {:.1} ms, TPOT P50 {:.2} ms (server's own {own:.2} ms), server pid {}, ready in {} ms",
            p50("ttft_ms"),
            p50("tpot_ms"),
            srv["pid"],
            srv["time_to_ready_ms"]
        );
        tpot_agreement(label, recs);
        own_p50.push(own);
        pids.push(srv["pid"].as_u64().expect("server pid"));
    }
    assert_ne!(pids[0], pids[1], "two servers side by side");
    assert_eq!(
        ab["base_server"]["identity"]["llama.cpp.build_info"],
        s["server"]["identity"]["llama.cpp.build_info"]
    );
    let mut any_fail = false;
    for c in s["checks"].as_array().unwrap() {
        println!(
            "{} {}: base {} candidate {} ratio {} {}",
            c["metric"], c["kind"], c["baseline"], c["candidate"], c["ratio"], c["verdict"]
        );
        any_fail |= c["verdict"] == "FAIL";
    }
    assert_eq!(
        code,
        Some(i32::from(any_fail)),
        "exit code against the verdicts"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    for p in pids {
        assert!(!alive(p), "llama-server {p} survived perfgate");
    }
    outputs_consistent(&r, samples);
    (code, r, own_p50[0], own_p50[1])
}

/// P(X >= d) for X hypergeometric: `d + s` differing pairs among `n + m`, `n` of them the
/// candidate's (the one-sided Fisher exact test of `gate.outputs`), summed term by term:
/// C(n, x) C(m, k - x) / C(n + m, k) for x = d ..= min(n, k), k = d + s.
fn fisher_upper(d: u64, n: u64, s: u64, m: u64) -> f64 {
    let ln_c = |a: u64, b: u64| -> f64 {
        (0..b)
            .map(|i| ((a - i) as f64).ln() - ((i + 1) as f64).ln())
            .sum()
    };
    let k = d + s;
    if d == 0 {
        return 1.0;
    }
    (d..=n.min(k))
        .filter(|&x| k - x <= m)
        .map(|x| (ln_c(n, x) + ln_c(m, k - x) - ln_c(n + m, k)).exp())
        .sum()
}

/// The `outputs` check of an ab result (`gate.outputs`, temperature 0): printed with the
/// summary, and its figures consistent with each other (issue 44). `samples` requests per arm
/// over the 8 prompts in file order: `samples` pairs, and `samples - 8` pairs of base requests
/// that sent one prompt again (12 of 20, 32 of 40: at least the half of the samples `ab` wants,
/// so none is sent after the run). Its verdict is the one-sided Fisher test's, computed here
/// from the counts ([`fisher_upper`]): FAIL below alpha 0.01, WARN below 0.2 when some differ.
fn outputs_consistent(r: &Value, samples: u64) -> Value {
    let s = &r["scenarios"][0];
    let o = &s["outputs"];
    let c = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "outputs")
        .cloned()
        .expect("an outputs check at temperature 0");
    println!("outputs: {o}");
    println!("outputs check: {} {}", c["verdict"], c["reason"]);
    let n = |k: &str| o[k].as_u64().unwrap_or_else(|| panic!("outputs.{k}: {o}"));
    assert_eq!(n("pairs"), samples, "{o}");
    assert_eq!(n("self_pairs"), samples - 8, "{o}");
    assert!(n("differing") <= n("pairs") && n("self_differing") <= n("self_pairs"));
    let differing = n("differing");
    assert_eq!(
        o["examples"].as_array().map_or(0, Vec::len) as u64,
        differing.min(5),
        "{o}"
    );
    assert_eq!(
        o.get("first_difference_chars").is_some(),
        differing > 0,
        "{o}"
    );
    assert_eq!(c["n_candidate"], samples);
    assert_eq!(c["n_baseline"], samples - 8);
    let share = c["candidate"].as_f64().unwrap();
    assert!(
        (share - differing as f64 / samples as f64).abs() < 1e-12,
        "{c}"
    );
    let self_share = c["baseline"].as_f64().unwrap();
    assert!(
        (self_share - n("self_differing") as f64 / (samples - 8) as f64).abs() < 1e-12,
        "{c}"
    );
    let p = fisher_upper(differing, samples, n("self_differing"), samples - 8);
    assert!(
        (c["p_value"].as_f64().unwrap() - p).abs() < 1e-9 * p.max(1e-12).max(1e-3),
        "Fisher p {p} by hand: {c}"
    );
    let verdict = match () {
        _ if p < 0.01 => "FAIL",
        _ if differing > 0 && p < 0.2 => "WARN",
        _ => "PASS",
    };
    assert_eq!(c["verdict"], verdict, "Fisher p {p} by hand: {c}");
    // every request's answer is kept as its hash and length
    for x in s["records"].as_array().unwrap() {
        assert_eq!(
            x["output"]["sha256"].as_str().map(str::len),
            Some(16),
            "{x}"
        );
    }
    c
}

/// The TPOT P50 check of an ab result.
fn tpot_p50(r: &Value) -> Value {
    r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "tpot" && c["kind"]["quantile"] == "p50")
        .cloned()
        .expect("a TPOT P50 check")
}

/// `perfgate ab` of two identical llama-servers (same model, same flags) must not FAIL: the two
/// arms see the same moments of this shared, drifting machine, so what drifts reaches both and
/// cancels; an identical pair fails only as often as the gate's false-alarm rate (about 1 %
/// per check, measured in docs/accuracy.md).
#[test]
fn ab_of_two_identical_llama_servers_passes() {
    let _one = serial();
    let Some((llama_server, model)) = built_or_skip() else {
        return;
    };
    let (code, r, own_base, own_cand) = ab_run(&llama_server, &model, &model, 20);
    println!(
        "servers' own TPOT P50: base {own_base:.2} ms, candidate {own_cand:.2} ms ({:+.1} %)",
        (own_cand / own_base - 1.0) * 100.0
    );
    assert_eq!(
        code,
        Some(0),
        "two identical servers interleaved must not regress"
    );
    assert_ne!(r["verdict"], "FAIL");
    // the same model answers the same, within its own repeatability: the outputs check PASSes
    let c = outputs_consistent(&r, 20);
    assert_eq!(c["verdict"], "PASS", "{c}");
}

/// `perfgate ab` of the model against the same weights requantized to F32 (a genuinely slower
/// server: about twice the decode time per token with one thread on this CPU, 70.5 vs 36.5
/// ms/token measured standalone, +87 % interleaved) must FAIL on TPOT P50 and exit 1; perfgate's
/// TPOT change must agree with the servers' own (their `timings`) within 10 %. The premise is
/// checked too: the servers' own change is beyond the fail tolerance, or the test says the
/// candidate was not slower on this machine instead of blaming perfgate.
#[test]
fn ab_with_an_f32_candidate_fails_on_tpot() {
    let _one = serial();
    let (Some((llama_server, model)), Some(slow)) = (built(), slow_model()) else {
        support::missing(
            "PERFGATE_REQUIRE_REALSERVER",
            "llama-server or the F32 model is missing: run `scripts/realserver.sh setup`",
        );
        return;
    };
    let (code, r, own_base, own_cand) = ab_run(&llama_server, &model, &slow, F32_SAMPLES);
    let own_ratio = own_cand / own_base;
    let c = tpot_p50(&r);
    let ratio = c["ratio"].as_f64().expect("a TPOT ratio");
    let fail_tol = c["fail"].as_f64().expect("a fail tolerance");
    println!(
        "TPOT P50: servers' own {own_base:.2} -> {own_cand:.2} ms ({:+.1} %), perfgate {:+.1} %, fail tolerance {:.1} %, {}",
        (own_ratio - 1.0) * 100.0,
        (ratio - 1.0) * 100.0,
        fail_tol * 100.0,
        c["verdict"]
    );
    assert!(
        own_ratio > 1.0 + fail_tol,
        "premise: the F32 server was only {:+.1} % slower by its own timings, not beyond the {:.1} % tolerance",
        (own_ratio - 1.0) * 100.0,
        fail_tol * 100.0
    );
    assert!(
        (ratio / own_ratio).ln().abs() < TPOT_BAND,
        "perfgate's TPOT change {:+.1} % disagrees with the servers' own {:+.1} %",
        (ratio - 1.0) * 100.0,
        (own_ratio - 1.0) * 100.0
    );
    assert_eq!(
        c["verdict"], "FAIL",
        "a slower candidate must FAIL TPOT P50: {c}"
    );
    assert_eq!(code, Some(1), "a regression exits 1");
    assert_eq!(r["verdict"], "FAIL");
    // Q4_K_M against F32: the share of requests whose answer differs is reported whatever it is,
    // its verdict the Fisher test's on its counts (`outputs_consistent`). Measured: the same 2
    // of the 8 prompts differ on every send, from character 0, and no base repeat differs: at
    // 20 requests (its first run) 4 of 20 against 0 of 12, p = C(20,4) / C(32,4) = 4845 / 35960
    // = 0.135, a WARN; at 40, 10 of 40 against 0 of 32, p = C(40,10) / C(72,10) = 847660528 /
    // 536830054536 = 0.0016, a functional change (FAIL). Which prompts a requantization changes
    // is the model's, not perfgate's, so the verdict is asserted against the counts, not fixed.
    let c = outputs_consistent(&r, F32_SAMPLES);
    println!(
        "Q4_K_M vs F32: answers differ in {} of {F32_SAMPLES} requests ({} of the {} base repeats), outputs {}: {}",
        r["scenarios"][0]["outputs"]["differing"],
        r["scenarios"][0]["outputs"]["self_differing"],
        F32_SAMPLES - 8,
        c["verdict"],
        c["reason"]
    );
    if c["verdict"] == "FAIL" {
        let reason = c["reason"].as_str().unwrap();
        assert!(reason.contains("a functional change"), "{reason}");
    }
}

/// `perfgate check --allow-missing-baseline --output results.json` in `dir`, whose scenario starts
/// `what`: it must exit 0; returns the first scenario of the results, which must hold 20 records,
/// and what perfgate printed.
fn check_unbaselined(dir: &Path, what: &str) -> (Value, String) {
    let o = perfgate(dir)
        .args([
            "check",
            "--allow-missing-baseline",
            "--output",
            "results.json",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    println!("{out}");
    assert_eq!(
        o.status.code(),
        Some(0),
        "check --allow-missing-baseline against {what}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let s = r["scenarios"][0].clone();
    assert_eq!(s["records"].as_array().map(Vec::len), Some(20), "{s}");
    (s, out)
}

/// Output tokens per request of the Responses API test (32 until issue 41: what it asserts,
/// the count, the server's agreement and TTFT >= prompt_ms, needs no long answer).
const RESPONSES_MAX_TOKENS: u64 = 16;

/// The Responses API (`api: openai-responses`, issue 27) against llama-server's own
/// `POST /v1/responses`, which perfgate starts. llama.cpp's stream differs from OpenAI's (no
/// `sequence_number`, the events before the first delta written with it, `response.completed`
/// also when `max_output_tokens` cut the answer, `timings` beside `response`; the captured stream
/// is tests/cases/54-llamacpp-responses.yaml): perfgate must still read every request right.
/// Only what is physically true is asserted, no latency against another moment.
#[test]
fn responses_api_against_llama_server() {
    let _one = serial();
    let Some((llama_server, model)) = built_or_skip() else {
        return;
    };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    let yaml = format!(
        r#"scenarios:
  - name: llama-responses
    endpoint:
      base_url: http://127.0.0.1:{port}/v1
      model: gemma-3-270m
      api: openai-responses
    request:
      prompt: "Write a short story about a lighthouse keeper."
      max_tokens: {RESPONSES_MAX_TOKENS}
      temperature: 0
      ignore_eos: true
    load:
      samples: 20
      warmup: 2
    server:
      # one thread: the client shares this 2-core machine
      command: ["{llama_server}", -m, "{model}", --alias, gemma-3-270m, --host, 127.0.0.1,
                --port, "{port}", -t, "1", -np, "4", -c, "8192", --no-webui]
      ready_timeout: 2m
      log: llama-server.log
"#
    );
    std::fs::write(dir.path().join("scenarios/llama.yaml"), yaml).unwrap();
    let (s, _) = check_unbaselined(dir.path(), "a working server");
    let s = &s;
    let recs = s["records"].as_array().unwrap();
    for x in recs {
        assert!(x.get("error").is_none(), "{x}");
        assert_eq!(x["token_source"], "usage", "{x}");
        assert_eq!(
            x["output_tokens"].as_u64(),
            Some(RESPONSES_MAX_TOKENS),
            "ignore_eos reaches llama.cpp through /v1/responses: {x}"
        );
        // the server's own count, from the `timings` beside `response` in response.completed
        assert_eq!(
            x["server_timings"]["predicted_n"].as_u64(),
            Some(RESPONSES_MAX_TOKENS),
            "{x}"
        );
        let ttft = x["ttft_ms"].as_f64().unwrap();
        let prompt_ms = x["server_timings"]["prompt_ms"].as_f64().unwrap();
        assert!(
            ttft > 0.0 && ttft >= prompt_ms,
            "TTFT {ttft} ms, prompt_ms {prompt_ms}"
        );
        let tpot = x["tpot_ms"].as_f64().unwrap();
        assert!(tpot.is_finite() && tpot > 0.0, "TPOT {tpot}");
    }
    let p50 = |k: &str| quantile(recs.iter().map(|x| x[k].as_f64().unwrap()).collect(), 0.5);
    println!(
        "llama-responses: TTFT P50 {:.1} ms, TPOT P50 {:.2} ms (server's own {:.2} ms)",
        p50("ttft_ms"),
        p50("tpot_ms"),
        quantile(recs.iter().map(tpot_expected).collect(), 0.5)
    );
    let pid = s["server"]["pid"].as_u64().expect("server pid");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!alive(pid), "llama-server {pid} survived perfgate");
}

/// Tokens per request of the speculative decoding test: a few draft steps each, short enough
/// for the real-server chain (CI's critical path).
const SPEC_MAX_TOKENS: u64 = 12;

#[test]
fn speculative_decoding_against_llama_server() {
    let _one = serial();
    let Some((llama_server, model)) = built_or_skip() else {
        return;
    };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    let yaml = format!(
        r#"scenarios:
  - name: llama-spec
    endpoint:
      base_url: http://127.0.0.1:{port}/v1
      model: gemma-3-270m
    request:
      prompt: "Count from 1 to 40, separated by commas."
      max_tokens: {SPEC_MAX_TOKENS}
      temperature: 0
      ignore_eos: true
    load:
      samples: 20
      warmup: 1
    server:
      # the model as its own draft: one thread each, one slot
      command: ["{llama_server}", -m, "{model}", -md, "{model}", --spec-type, draft-simple,
                --spec-draft-n-max, "4", --alias, gemma-3-270m, --host, 127.0.0.1,
                --port, "{port}", -t, "1", -td, "1", -np, "1", -c, "2048", --no-webui]
      ready_timeout: 2m
      log: llama-server.log
"#
    );
    std::fs::write(dir.path().join("scenarios/llama.yaml"), yaml).unwrap();
    let started = std::time::Instant::now();
    let (s, out) = check_unbaselined(dir.path(), "a drafting server");
    let s = &s;
    let recs = s["records"].as_array().unwrap();
    let (mut drafted, mut accepted, mut output, mut steps) = (0u64, 0u64, 0u64, 0u64);
    for x in recs {
        assert!(x.get("error").is_none(), "{x}");
        let t = &x["server_timings"];
        let (d, a) = (
            t["draft_n"].as_u64().expect("draft_n in timings"),
            t["draft_n_accepted"]
                .as_u64()
                .expect("draft_n_accepted in timings"),
        );
        assert!(d > 0 && a <= d, "{t}");
        // the typed counts are the server's own
        assert_eq!(
            x["draft"],
            serde_json::json!({"drafted": d, "accepted": a}),
            "{x}"
        );
        let n = x["output_tokens"].as_u64().unwrap();
        assert_eq!(n, SPEC_MAX_TOKENS, "{x}");
        drafted += d;
        accepted += a;
        output += n;
        steps += n - a;
    }
    let sp = &s["speculative"]["candidate"];
    assert_eq!(sp["source"], "requests", "{sp}");
    assert_eq!(sp["requests"], 20, "{sp}");
    assert_eq!(
        (sp["drafted"].as_u64(), sp["accepted"].as_u64()),
        (Some(drafted), Some(accepted))
    );
    let rate = sp["rate"].as_f64().unwrap();
    assert!(
        (rate - accepted as f64 / drafted as f64).abs() < 1e-12,
        "{rate} vs {accepted}/{drafted}"
    );
    let len = sp["mean_length"].as_f64().unwrap();
    assert!(
        (len - output as f64 / steps as f64).abs() < 1e-12,
        "{len} vs {output}/{steps}"
    );
    assert!(out.contains("speculative decoding: acceptance"), "{out}");
    println!(
        "llama-spec: {accepted}/{drafted} draft tokens accepted ({:.1}%), {len:.2} tokens a step, in {:.0} s",
        rate * 100.0,
        started.elapsed().as_secs_f64()
    );
    let pid = s["server"]["pid"].as_u64().expect("server pid");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!alive(pid), "llama-server {pid} survived perfgate");
}
