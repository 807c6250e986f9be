//! End to end against a REAL server: llama.cpp's `llama-server` over Gemma 3 270M (built by
//! `scripts/realserver.sh setup`, cached under ~/.cache/perfgate). `perfgate bless` then
//! `perfgate check` at concurrency 1 and 2, 20 samples, 48 tokens with ignore_eos.
//!
//! perfgate itself starts llama-server (with `--metrics`) from the scenarios' `server:` block for
//! the bless and again for the check, both scenarios sharing one process each time (issue 16).
//!
//! What it proves: perfgate starts, waits for and stops a real server (its PID is gone
//! afterwards), reads its identity from `/props` and `/v1/models`, and its server-side prompt and
//! decode timing from `/metrics` (decode ms/token within 10 % of the requests' own `timings`);
//! bless and check run end to end on a real server; output_tokens come from
//! usage and equal max_tokens; measured TPOT is within 10 % of the server's own figure
//! (`timings.predicted_ms / predicted_n`); TTFT >= the server's `prompt_ms`; the server's timings
//! are kept in the records and the baseline.
//!
//! # Why the verdict is judged against the server's own timings (issue 12)
//! A bless and a check a minute apart on a shared VM do NOT see the same server: on an ordinary
//! CI machine llama-server's own decode speed moved ~10 % between two runs (as much as the 10 %
//! fail tolerance), so "an unchanged server passes" is not a property of the machine and a test
//! asserting exit 0 fails at random. What IS a property of perfgate, whatever the machine does:
//! llama.cpp times every response itself (prompt and decode time, in `timings`), independently
//! of perfgate's clock, so the server's own figures say how much the server really moved between
//! the bless and the check. The test asserts that perfgate's verdicts agree with them:
//! - TPOT: the server's own figure is its decode time per token. perfgate's P50 change (the
//!   gate's Hodges-Lehmann ratio) must match the server's within [`AGREE`] (log scale); a TPOT
//!   FAIL needs the server's own change beyond the fail tolerance minus that margin, and when the
//!   server's own figures show it clearly slower (its P5 beyond its blessed P95 by more than
//!   the tolerance plus the margin) the TPOT P50 check must FAIL. A change just past the
//!   tolerance with overlapping samples may honestly be WARN, so that is not asserted.
//! - TTFT and E2E: the client's figure is the server's (prompt time; prompt plus decode time)
//!   plus a client-side overhead the server cannot see (connection, HTTP, the first token's
//!   sampling, scheduling): 3 ms on an idle machine, tens of ms beside a CPU-bound neighbour,
//!   real latency that moves with the machine. The server's own figure for a request is taken
//!   as its timing plus its side's median overhead; perfgate's P50 change must match it within
//!   [`AGREE_TTFT`], and a FAIL needs it beyond the tolerance minus that margin.
//! - exit 1 exactly when some check FAILs, else 0.
//!
//! Tail checks (share of requests above the pooled P90) have tolerances in percentage points,
//! which the server's timings cannot be set against; their verdicts are printed, not judged.
//!
//! A broken comparison (a wrong quantile, a swapped side, a miscomputed ratio) breaks these on
//! every machine; a slow or drifting machine breaks none. The alternative, a same-job A/B run
//! that cancels the drift (`perfgate ab`, issue 17), runs beside it:
//! [`ab_of_two_identical_llama_servers_passes`] asserts the verdict itself.

#[path = "support/mod.rs"]
mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

const MAX_TOKENS: u64 = 48;
/// Largest |ln(measured change / server's own change)| accepted for TPOT: the client and the
/// server time the same decode, so their changes agree to a few percent.
const AGREE: f64 = 0.05;
/// The same for TTFT and E2E, whose client figure also holds an overhead the server does not
/// time (3 ms of a 37 ms TTFT on an idle machine, 3 to 27 ms of 120 ms on a loaded one, measured
/// on this 2-core machine); each side's median overhead is added to the server's figure, and its
/// request-to-request jitter is what this margin allows.
const AGREE_TTFT: f64 = 0.10;

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

/// The server's own timing for a gated metric of one request, from llama.cpp's `timings`:
/// TPOT = decode time per generated token; TTFT = prompt time (the first token is sampled from
/// the prompt's logits); E2E = prompt plus decode time.
fn server_timing(rec: &Value, metric: &str) -> f64 {
    let t = &rec["server_timings"];
    let num = |k: &str| {
        t[k].as_f64()
            .unwrap_or_else(|| panic!("server_timings.{k} missing: {t}"))
    };
    match metric {
        "tpot" => num("predicted_ms") / num("predicted_n"),
        "ttft" => num("prompt_ms"),
        "e2e" => num("prompt_ms") + num("predicted_ms"),
        other => panic!("no server figure for metric {other}"),
    }
}

/// The server's own figure for each request of one side: its timing, plus (TTFT, E2E) the side's
/// median client-side overhead (measured minus server timing), which the server cannot see.
fn server_figures(recs: &[Value], metric: &str) -> Vec<f64> {
    let timing: Vec<f64> = recs.iter().map(|r| server_timing(r, metric)).collect();
    if metric == "tpot" {
        return timing;
    }
    let overhead = quantile(
        recs.iter()
            .zip(&timing)
            .map(|(r, t)| r[format!("{metric}_ms")].as_f64().unwrap() - t)
            .collect(),
        0.5,
    );
    timing.iter().map(|t| t + overhead).collect()
}

/// Hodges-Lehmann ratio median_{i,j} c_i / b_j, as the gate estimates a P50 change.
fn hl_ratio(c: &[f64], b: &[f64]) -> f64 {
    quantile(
        c.iter()
            .flat_map(|x| b.iter().map(move |y| (x / y).ln()))
            .collect(),
        0.5,
    )
    .exp()
}

/// How much the server's own figure for `metric` moved from the baseline's requests to the
/// check's, as a ratio: the Hodges-Lehmann ratio for P50, the ratio of quantiles for a tail.
fn server_change(base: &[Value], cand: &[Value], metric: &str, p: f64) -> f64 {
    let (b, c) = (server_figures(base, metric), server_figures(cand, metric));
    if p == 0.5 {
        hl_ratio(&c, &b)
    } else {
        quantile(c, p) / quantile(b, p)
    }
}

#[test]
fn bless_then_check_against_llama_server() {
    let _one = serial();
    let Some((llama_server, model)) = built() else {
        support::missing(
            "PERFGATE_REQUIRE_REALSERVER",
            "llama-server is not built: run `scripts/realserver.sh setup`",
        );
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
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
        // own `timings` (every request decodes 48 tokens), give or take the last request's
        // counters landing after the scrape
        let decode = fig("llamacpp_decode_ms_per_token");
        let per_request: Vec<f64> = s["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| server_timing(x, "tpot"))
            .collect();
        let mean = per_request.iter().sum::<f64>() / per_request.len() as f64;
        println!("{name}: /metrics decode {decode:.3} ms/token, records' timings mean {mean:.3}");
        assert!(
            (decode / mean).ln().abs() < 0.10,
            "{name}: /metrics decode {decode} ms/token vs timings {mean}"
        );
        let tokens = fig("llamacpp_decode_tokens");
        assert!(
            (18.0 * MAX_TOKENS as f64..=22.0 * MAX_TOKENS as f64).contains(&tokens),
            "{name}: {tokens} decode tokens over 20 requests of {MAX_TOKENS}"
        );
        let recs = s["records"].as_array().unwrap();
        assert_eq!(recs.len(), 20, "{name}");
        let mut ratios = Vec::new();
        for x in recs {
            assert!(x.get("error").is_none(), "{name}: {x}");
            assert_eq!(
                x["output_tokens"].as_u64(),
                Some(MAX_TOKENS),
                "{name}: output tokens"
            );
            assert_eq!(x["token_source"], "usage", "{name}");
            assert!(
                x["server_timings"].is_object(),
                "{name}: server timings kept"
            );
            ratios.push(x["tpot_ms"].as_f64().unwrap() / server_timing(x, "tpot"));
            let ttft = x["ttft_ms"].as_f64().unwrap();
            let prompt_ms = x["server_timings"]["prompt_ms"].as_f64().unwrap();
            assert!(
                ttft >= prompt_ms,
                "{name}: TTFT {ttft} ms < server prompt_ms {prompt_ms}"
            );
        }
        let median = quantile(ratios.clone(), 0.5);
        println!(
            "{name}: measured/server TPOT ratio median {median:.4}, min {:.4}, max {:.4}",
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratios.iter().copied().fold(0.0, f64::max)
        );
        assert!(
            (0.9..=1.1).contains(&median),
            "{name}: median TPOT ratio {median}"
        );
        assert!(
            ratios.iter().all(|r| (0.8..=1.2).contains(r)),
            "{name}: {ratios:?}"
        );

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

        // The verdicts against the server's own timings.
        for c in s["checks"].as_array().unwrap() {
            let Some(metric) = c["metric"].as_str() else {
                continue; // the error-rate check: no request failed on either side
            };
            let verdict = c["verdict"].as_str().unwrap();
            let fail_tol = c["fail"].as_f64().unwrap();
            let is_p50 = c["kind"]["quantile"] == "p50";
            let p = if is_p50 { 0.5 } else { 0.9 };
            let own = server_change(&base, recs, metric, p);
            let agree = if metric == "tpot" { AGREE } else { AGREE_TTFT };
            println!(
                "{name}: {metric} {}: server's own change {:+.1} %, perfgate {}, fail tolerance {:.1} %, {verdict}",
                c["kind"],
                (own - 1.0) * 100.0,
                c["ratio"]
                    .as_f64()
                    .map(|r| format!("{:+.1} %", (r - 1.0) * 100.0))
                    .unwrap_or_else(|| "-".into()),
                fail_tol * 100.0
            );
            if verdict == "FAIL" {
                any_fail = true;
            }
            // A tail check's tolerance is in percentage points of the share of requests above
            // the pooled P90, not a ratio the server's timings can be set against: printed only.
            if verdict == "FAIL" && is_p50 {
                assert!(
                    own.ln() > (1.0 + fail_tol).ln() - agree,
                    "{name}: perfgate FAILs {metric} {} but the server's own timings moved only {:+.1} % (fail tolerance {:.1} %): a regression the server does not show",
                    c["kind"],
                    (own - 1.0) * 100.0,
                    fail_tol * 100.0
                );
            }
            if is_p50 {
                let measured = c["ratio"].as_f64().unwrap();
                assert!(
                    (measured / own).ln().abs() <= agree,
                    "{name}: {metric} P50 changed {:+.1} % by perfgate's clock but {:+.1} % by the server's own timings",
                    (measured - 1.0) * 100.0,
                    (own - 1.0) * 100.0
                );
                // Clearly slower by the server's own clock: its fastest check requests (P5)
                // slower than its slowest baseline requests (P95) by more than the tolerance
                // and the margin. Then fewer than 10 % of the candidate/baseline pairs fall
                // below the tolerance, and the gate's 99 % Moses bound (an order statistic
                // near the 21st percentile of the 400 pair ratios, after Holm) cannot either.
                let separation = quantile(server_figures(recs, metric), 0.05)
                    / quantile(server_figures(&base, metric), 0.95);
                if metric == "tpot" && separation.ln() > (1.0 + fail_tol).ln() + agree {
                    assert_eq!(
                        verdict, "FAIL",
                        "{name}: the server's own {metric} moved {:+.1} % (its P5 now {:+.1} % above its blessed P95), beyond the {:.1} % tolerance, and perfgate did not FAIL",
                        (own - 1.0) * 100.0,
                        (separation - 1.0) * 100.0,
                        fail_tol * 100.0
                    );
                }
            }
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

/// Output tokens per request of the A/B test: fewer than the bless/check test's, since the two
/// arms' 40 requests share the machine's two cores (CI time).
const AB_MAX_TOKENS: u64 = 32;

/// `perfgate ab` of two identical llama-servers (same model, same flags, one thread each, two
/// ports), both started by perfgate from the scenario's `server: {base: ..., candidate: ...}`
/// arms and interleaved request by request (issue 17). It must not FAIL: the two arms see the
/// same moments of this shared, drifting machine, so what drifts reaches both and cancels; an
/// identical pair fails only as often as the gate's false-alarm rate (about 1 %). What else must
/// hold on any machine: both arms measured every request (32 tokens from usage), each arm's TPOT
/// agrees with its own server's `timings` within 10 %, the two servers are two processes that
/// describe themselves identically, and both are gone afterwards.
#[test]
fn ab_of_two_identical_llama_servers_passes() {
    let _one = serial();
    let Some((llama_server, model)) = built() else {
        support::missing(
            "PERFGATE_REQUIRE_REALSERVER",
            "llama-server is not built: run `scripts/realserver.sh setup`",
        );
        return;
    };
    let port = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (pa, pb) = (port(), port());
    let dir = tempfile::tempdir().unwrap();
    let arm = |p: u16| {
        format!(
            r#"{{base_url: "http://127.0.0.1:{p}/v1", log: llama-{p}.log,
             command: ["{llama_server}", -m, "{model}", --alias, gemma-3-270m, --host, 127.0.0.1,
                       --port, "{p}", -t, "1", -np, "4", -c, "8192", --no-webui, --metrics]}}"#
        )
    };
    let yaml = format!(
        r#"defaults:
  endpoint: {{base_url: "http://127.0.0.1:{pa}/v1", model: gemma-3-270m}}
  request:
    prompt: "Write a short story about a lighthouse keeper."
    max_tokens: {AB_MAX_TOKENS}
    temperature: 0
    ignore_eos: true
  load: {{samples: 20, warmup: 2, concurrency: 1}}
  server:
    ready_timeout: 2m
    base: {}
    candidate: {}
scenarios:
  - name: llama-ab
"#,
        arm(pa),
        arm(pb)
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
    assert_eq!(
        code,
        Some(0),
        "two identical servers interleaved must not regress: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    assert_ne!(r["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    assert_eq!(s["status"], "compared");
    let ab = &s["ab"];
    assert_eq!(ab["design"], "interleaved");
    assert_eq!(ab["alternations"], 20);
    let arms = [
        ("base", &ab["base_records"], &ab["base_server"]),
        ("candidate", &s["records"], &s["server"]),
    ];
    let mut pids = Vec::new();
    for (label, recs, srv) in arms {
        let recs = recs.as_array().unwrap();
        assert_eq!(recs.len(), 20, "{label}");
        for x in recs {
            assert!(x.get("error").is_none(), "{label}: {x}");
            assert_eq!(x["output_tokens"].as_u64(), Some(AB_MAX_TOKENS), "{label}");
            assert_eq!(x["token_source"], "usage", "{label}");
        }
        let tpot: Vec<f64> = recs
            .iter()
            .map(|x| x["tpot_ms"].as_f64().unwrap())
            .collect();
        let own: Vec<f64> = recs.iter().map(|x| server_timing(x, "tpot")).collect();
        let ttft: Vec<f64> = recs
            .iter()
            .map(|x| x["ttft_ms"].as_f64().unwrap())
            .collect();
        let (m, mo) = (quantile(tpot, 0.5), quantile(own, 0.5));
        println!(
            "{label}: TTFT P50 {:.1} ms, TPOT P50 {m:.2} ms (server's own {mo:.2} ms), server pid {}, ready in {} ms",
            quantile(ttft, 0.5),
            srv["pid"],
            srv["time_to_ready_ms"]
        );
        assert!((1.0..1000.0).contains(&m), "{label}: TPOT {m} ms");
        assert!(
            (m / mo).ln().abs() < 0.10,
            "{label}: TPOT {m} vs server's {mo}"
        );
        pids.push(srv["pid"].as_u64().expect("server pid"));
    }
    assert_ne!(pids[0], pids[1], "two servers side by side");
    assert_eq!(
        ab["base_server"]["identity"]["llama.cpp.build_info"],
        s["server"]["identity"]["llama.cpp.build_info"]
    );
    for c in s["checks"].as_array().unwrap() {
        println!(
            "{} {}: base {} candidate {} ratio {} {}",
            c["metric"], c["kind"], c["baseline"], c["candidate"], c["ratio"], c["verdict"]
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    for p in pids {
        assert!(!alive(p), "llama-server {p} survived perfgate");
    }
}
