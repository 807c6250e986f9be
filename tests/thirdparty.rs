//! End to end against third-party OpenAI-compatible servers from PyPI (installed by
//! `scripts/thirdparty.sh setup` into ~/.cache/perfgate/venvs, pinned): xpyd-sim 0.5.0,
//! fakellm 0.3.5, mockllm 0.0.8, llm-mock-api 0.1.2 and LiteLLM's proxy 1.82.6 (with a mock model,
//! and as a gateway in front of xpyd-sim). The real llama.cpp server has its own test
//! (tests/realserver.rs).
//!
//! Each test starts its server(s) on a free 127.0.0.1 port (bounded wait for readiness, the
//! process group killed on drop), runs `perfgate bless` then `perfgate check` (20 samples, 1
//! warmup, small max_tokens, generous tolerances: this is about measuring right, not about the
//! gate's sensitivity), and asserts sane numbers per record: success, output_tokens > 0 and
//! exact where the server is deterministic, TTFT in a window around the configured delay, TPOT
//! near the per-token delay where the server has one, and the token source (usage vs events).
//! Where a server's stream is not what its API promises (mockllm's /v1/messages, LiteLLM's mock
//! /v1/messages), the test asserts the classified failure and its message instead.
//!
//! Numbers measured here are in README.md ("Supported servers and quirks"). The tests run one at
//! a time (a 2-core machine; Python servers are CPU-bound). When a server is not installed, the
//! test fails if PERFGATE_REQUIRE_THIRDPARTY=1 (as in CI, via scripts/test.sh) and is skipped
//! with a message otherwise.

#[path = "support/mod.rs"]
mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One server at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The text every mock is configured to answer with.
const STORY: &str = "Once upon a time a small robot found a brush and began to paint the sky in slow careful strokes until the whole wall glowed.";
/// Its words: fakellm streams one per event.
const STORY_WORDS: u64 = 25;
/// The prompt every scenario sends (the mocks' rules match on "story").
const PROMPT: &str = "Tell me a story";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv bin directory of a server, or None (skip) when it is not installed.
fn venv_bin(name: &str) -> Option<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/thirdparty.sh"))
        .args(["bin", name])
        .output()
        .expect("run scripts/thirdparty.sh");
    if out.status.success() {
        return Some(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        ));
    }
    support::missing(
        "PERFGATE_REQUIRE_THIRDPARTY",
        &format!(
            "{name} is not installed: run `scripts/thirdparty.sh setup`\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    None
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A started server: its own process group, killed (TERM, then KILL) on drop.
struct Server {
    name: String,
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    /// Starts `program args` with `envs` in `dir` and waits (at most 180 s) until
    /// `GET ready_path` gets any HTTP answer.
    fn start(
        name: &str,
        dir: &Path,
        program: &Path,
        args: &[String],
        envs: &[(&str, &str)],
        port: u16,
    ) -> Server {
        use std::os::unix::process::CommandExt;
        let log = dir.join(format!("{name}.log"));
        let f = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {}: {e}", program.display()));
        let mut s = Server {
            name: name.to_string(),
            child,
            port,
            log,
        };
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(180);
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!(
                    "{name} exited ({st}) before it was ready:\n{}",
                    s.log_tail()
                );
            }
            if http_answers(port) {
                break;
            }
            if Instant::now() > deadline {
                panic!("{name} not ready after 180 s:\n{}", s.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!(
            "{name}: ready on 127.0.0.1:{port} after {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        s
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn log_tail(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pgid = format!("-{}", self.child.id());
        let kill = |sig: &str| {
            let _ = std::process::Command::new("kill")
                .args([sig, "--", &pgid])
                .stderr(Stdio::null())
                .status();
        };
        kill("-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                // the group leader is gone; make sure no worker of it stays behind
                kill("-KILL");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{}: did not stop on TERM; killing", self.name);
        kill("-KILL");
        let _ = self.child.wait();
    }
}

/// True when something on the port answers an HTTP GET with a status line.
fn http_answers(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 12];
    matches!(s.read(&mut buf), Ok(n) if n >= 8 && buf.starts_with(b"HTTP/1."))
}

/// POSTs `body` as HTTP/1.0 (no chunking, the server closes at the end) and returns the
/// response body: the raw SSE a server sends, to compare with what perfgate made of it.
fn raw_post(port: u16, path: &str, headers: &[(&str, &str)], body: &Value) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.to_string();
    let mut req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "{head}"
    );
    body.to_string()
}

/// The last integer value of `"key": N` in `text` (JSON with or without spaces).
fn last_number(text: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let mut last = None;
    for (i, _) in text.match_indices(&pat) {
        let rest = text[i + pat.len()..].trim_start();
        let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(v) = n.parse() {
            last = Some(v);
        }
    }
    last
}

/// xpyd-sim's API key (`--require-api-key`), and a wrong one.
const KEY: &str = "sk-perfgate-test";
const WRONG_KEY: &str = "sk-wrong";

fn perfgate(dir: &Path, args: &[&str]) -> std::process::Output {
    support::perfgate()
        .current_dir(dir)
        .args(args)
        .env("PG_TP_KEY", KEY)
        .env("PG_TP_WRONG_KEY", WRONG_KEY)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap()
}

/// A scenario file for one server: `scenarios` is the YAML list body (already indented).
fn write_scenarios(dir: &Path, file: &str, base_url: &str, model: &str, scenarios: &str) {
    let yaml = format!(
        r#"defaults:
  endpoint:
    base_url: {base_url}
    model: {model}
    first_token_timeout: 30s
    idle_timeout: 10s
    request_timeout: 60s
  request:
    prompt: "{PROMPT}"
    max_tokens: 16
    temperature: 0
  load:
    samples: 20
    warmup: 1
  gate:
    tolerances:
      p50: {{warn: 50%, fail: 100%}}
      p90: {{warn: 100%, fail: 200%}}
      p99: {{warn: 200%, fail: 400%}}
    min_delta: {{ttft: 50ms, tpot: 5ms, e2e: 100ms}}
scenarios:
{scenarios}"#
    );
    let d = dir.join("scenarios");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(file), yaml).unwrap();
}

/// `perfgate bless` then `perfgate check --output results.json` on `only`; both must exit 0.
/// Returns the results' scenarios by name.
fn bless_then_check(dir: &Path, only: &[&str]) -> Vec<(String, Value)> {
    let mut sel = Vec::new();
    for o in only {
        sel.push("--only");
        sel.push(o);
    }
    let mut args = vec!["bless", "--runs", "1"];
    args.extend(&sel);
    let o = perfgate(dir, &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "bless {only:?}:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut args = vec!["check", "--output", "results.json"];
    args.extend(&sel);
    let o = perfgate(dir, &args);
    let out = String::from_utf8_lossy(&o.stdout);
    println!("{out}");
    assert_eq!(
        o.status.code(),
        Some(0),
        "check {only:?} against an unchanged server:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    results(dir)
}

fn results(dir: &Path) -> Vec<(String, Value)> {
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    r["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

fn scenario<'a>(res: &'a [(String, Value)], name: &str) -> &'a Value {
    &res.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no scenario {name} in the results"))
        .1
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What a scenario's successful records must show.
struct Expect {
    /// Exact output_tokens of every record, when the server is deterministic.
    tokens: Option<u64>,
    /// `usage` or `events`.
    source: &'static str,
    /// Window for the median TTFT, and a ceiling for every record's TTFT, ms.
    ttft_median: (f64, f64),
    ttft_max: f64,
    /// Window for the median TPOT, ms.
    tpot_median: (f64, f64),
}

/// Checks every record of a compared scenario; prints and returns (TTFT p50, TPOT p50).
fn assert_sane(s: &Value, e: &Expect) -> (f64, f64) {
    let name = s["name"].as_str().unwrap();
    assert_eq!(s["status"], "compared", "{name}: {s}");
    assert_eq!(s["measured"]["failed"], 0, "{name}: {}", s["measured"]);
    assert_eq!(s["measured"]["token_source"], e.source, "{name}");
    let recs = s["records"].as_array().unwrap();
    assert_eq!(recs.len(), 20, "{name}");
    let (mut ttft, mut tpot) = (Vec::new(), Vec::new());
    for r in recs {
        assert!(r.get("error").is_none(), "{name}: {r}");
        let n = r["output_tokens"].as_u64().unwrap();
        assert!(n > 0, "{name}: {r}");
        if let Some(t) = e.tokens {
            assert_eq!(n, t, "{name}: output tokens: {r}");
        }
        assert_eq!(r["token_source"], e.source, "{name}: {r}");
        if e.source == "events" {
            assert_eq!(Some(n), r["token_events"].as_u64(), "{name}: {r}");
        }
        let t = r["ttft_ms"].as_f64().unwrap();
        assert!(t > 0.0 && t < e.ttft_max, "{name}: TTFT {t} ms: {r}");
        ttft.push(t);
        tpot.push(r["tpot_ms"].as_f64().unwrap());
    }
    let (t50, p50) = (median(ttft), median(tpot));
    println!(
        "{name}: {} records, output_tokens {} ({}), TTFT p50 {t50:.1} ms, TPOT p50 {p50:.2} ms",
        recs.len(),
        recs[0]["output_tokens"],
        e.source
    );
    assert!(
        (e.ttft_median.0..=e.ttft_median.1).contains(&t50),
        "{name}: median TTFT {t50} ms outside {:?}",
        e.ttft_median
    );
    assert!(
        (e.tpot_median.0..=e.tpot_median.1).contains(&p50),
        "{name}: median TPOT {p50} ms outside {:?}",
        e.tpot_median
    );
    (t50, p50)
}

/// `perfgate check` on a scenario whose every request must fail with `class`; returns the
/// scenario's first error message. Exit 3 (could not measure) or 2 (misconfigured: bad input).
fn check_fails(dir: &Path, only: &str, class: &str) -> String {
    let o = perfgate(
        dir,
        &[
            "check",
            "--allow-missing-baseline",
            "--output",
            "results.json",
            "--only",
            only,
        ],
    );
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{out}");
    assert!(
        matches!(o.status.code(), Some(2) | Some(3)),
        "{only}: exit {:?}: {out}",
        o.status.code()
    );
    let res = results(dir);
    let s = scenario(&res, only);
    let m = &s["measured"];
    assert_eq!(m["ok"], 0, "{only}: {m}");
    assert!(m["requests"].as_u64().unwrap() > 0, "{only}: {m}");
    assert_eq!(m["failed"], m["requests"], "{only}: {m}");
    let classes = m["errors_by_class"].as_object().unwrap();
    assert_eq!(
        classes.keys().collect::<Vec<_>>(),
        [class],
        "{only}: every request fails as {class}: {m}\n{}",
        s["records"]
    );
    s["measured"]["first_error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// xpyd-sim (vLLM-like): prefill 50 ms, 10 ms per token, honours max_tokens with ignore_eos,
/// usage with include_usage. Chat and completions, behind an API key; a wrong key is exit 3
/// with a message naming the variable.
#[test]
fn xpyd_sim_chat_and_completions() {
    let _g = serial();
    let Some(bin) = venv_bin("xpyd-sim") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let args: Vec<String> = [
        "serve",
        "--mode",
        "dual",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--model",
        "sim-model",
        "--prefill-delay-ms",
        "50",
        "--decode-delay-per-token-ms",
        "10",
        "--require-api-key",
        KEY,
    ]
    .map(String::from)
    .to_vec();
    let server = Server::start(
        "xpyd-sim",
        dir.path(),
        &bin.join("xpyd-sim"),
        &args,
        &[],
        port,
    );
    write_scenarios(
        dir.path(),
        "xpyd.yaml",
        &server.base(),
        "sim-model",
        r#"  - name: xpyd-chat
    endpoint: {api_key_env: PG_TP_KEY}
    request: {ignore_eos: true}
  - name: xpyd-completions
    endpoint: {api: openai-completions, api_key_env: PG_TP_KEY}
    request: {ignore_eos: true}
  - name: xpyd-wrong-key
    endpoint: {api_key_env: PG_TP_WRONG_KEY}
"#,
    );
    let res = bless_then_check(dir.path(), &["xpyd-chat", "xpyd-completions"]);
    let e = Expect {
        tokens: Some(16),
        source: "usage",
        ttft_median: (50.0, 400.0),
        ttft_max: 2000.0,
        tpot_median: (9.0, 25.0),
    };
    assert_sane(scenario(&res, "xpyd-chat"), &e);
    assert_sane(scenario(&res, "xpyd-completions"), &e);

    let msg = check_fails(dir.path(), "xpyd-wrong-key", "http_status");
    assert!(msg.contains("401"), "{msg}");
    assert!(msg.contains("PG_TP_WRONG_KEY"), "names the variable: {msg}");
    assert!(!msg.contains(WRONG_KEY), "never prints the key: {msg}");
    drop(server);
}

/// fakellm: no TTFT knob, a hard-coded 10 ms per word, one word per event, ignores max_tokens;
/// chat has no usage at all (events are counted); /v1/messages (Anthropic's format) reports
/// `output_tokens` = characters / 4 (31 here), which is above max_tokens 16, so perfgate
/// distrusts it and counts the 25 events there too.
#[test]
fn fakellm_chat_and_anthropic() {
    let _g = serial();
    let Some(bin) = venv_bin("fakellm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fakellm.yaml"),
        format!(
            "version: 1\ndefaults:\n  fallback: deterministic_echo\nrules:\n  - name: story\n    when:\n      messages_contain: \"story\"\n    respond:\n      content: \"{STORY}\"\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let args: Vec<String> = [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--config",
        "fakellm.yaml",
    ]
    .map(String::from)
    .to_vec();
    let server = Server::start(
        "fakellm",
        dir.path(),
        &bin.join("fakellm"),
        &args,
        &[],
        port,
    );
    write_scenarios(
        dir.path(),
        "fakellm.yaml",
        &server.base(),
        "m",
        r#"  - name: fakellm-chat
  - name: fakellm-anthropic
    endpoint: {api: anthropic-messages}
"#,
    );
    let res = bless_then_check(dir.path(), &[]);
    let e = Expect {
        tokens: Some(STORY_WORDS),
        source: "events",
        ttft_median: (0.1, 100.0),
        ttft_max: 1000.0,
        tpot_median: (9.5, 25.0),
    };
    assert_sane(scenario(&res, "fakellm-chat"), &e);
    assert_sane(scenario(&res, "fakellm-anthropic"), &e);
    // what the server claimed on /v1/messages
    let raw = raw_post(
        port,
        "/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        &serde_json::json!({"model": "m", "max_tokens": 16, "stream": true,
            "messages": [{"role": "user", "content": PROMPT}]}),
    );
    assert_eq!(last_number(&raw, "output_tokens"), Some(31), "{raw}");
    drop(server);
}

/// mockllm: about 10 ms (±50 %) per character, one character per event, no usage (events are
/// counted). Its /v1/messages stream is not Anthropic's format (`data:` lines of
/// `{"type":"message_delta","delta":{"type":"content_block_delta",...}}`, no `event:` fields, no
/// message_start, `[DONE]` at the end): perfgate must not turn that into a success.
#[test]
fn mockllm_chat_and_anthropic() {
    let _g = serial();
    let Some(bin) = venv_bin("mockllm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let answer = "Once upon a time a small robot found a brush.";
    std::fs::write(
        dir.path().join("responses.yml"),
        format!(
            "responses:\n  \"{PROMPT}\": \"{answer}\"\ndefaults:\n  unknown_response: \"{answer}\"\nsettings:\n  lag_enabled: true\n  lag_factor: 10\n"
        ),
    )
    .unwrap();
    let port = free_port();
    // Its own CLI forces --reload and 0.0.0.0; uvicorn directly binds loopback only.
    let args: Vec<String> = [
        "-m",
        "uvicorn",
        "mockllm.server:app",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ]
    .map(String::from)
    .to_vec();
    let responses = dir.path().join("responses.yml");
    let server = Server::start(
        "mockllm",
        dir.path(),
        &bin.join("python"),
        &args,
        &[("MOCKLLM_RESPONSES_FILE", responses.to_str().unwrap())],
        port,
    );
    write_scenarios(
        dir.path(),
        "mockllm.yaml",
        &server.base(),
        "m",
        r#"  - name: mockllm-chat
  - name: mockllm-anthropic
    endpoint: {api: anthropic-messages}
"#,
    );
    let res = bless_then_check(dir.path(), &["mockllm-chat"]);
    assert_sane(
        scenario(&res, "mockllm-chat"),
        &Expect {
            tokens: Some(answer.chars().count() as u64),
            source: "events",
            ttft_median: (3.0, 150.0),
            ttft_max: 1000.0,
            tpot_median: (8.0, 30.0),
        },
    );
    let msg = check_fails(dir.path(), "mockllm-anthropic", "no_token");
    println!("mockllm /v1/messages: {msg}");
    drop(server);
}

/// llm-mock-api: `-l 20` ms per chunk of `-c 4` characters (the first chunk too), and usage on
/// every stream whose completion_tokens / output_tokens is an estimate far below the number of
/// events (5 both for a 96-character reply in 24 chunks and for the 45-character reply in 12
/// chunks used here): perfgate must distrust it and count events, in both formats.
#[test]
fn llm_mock_api_distrusted_usage() {
    let _g = serial();
    let Some(bin) = venv_bin("llm-mock-api") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let reply = "Once upon a time a small robot found a brush.";
    std::fs::write(
        dir.path().join("rules.json5"),
        format!("{{ rules: [ {{ when: \"story\", reply: \"{reply}\" }} ] }}\n"),
    )
    .unwrap();
    let chunks = reply.len().div_ceil(4) as u64;
    let port = free_port();
    let args: Vec<String> = [
        "--config",
        "/nonexistent.json",
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-r",
        "rules.json5",
        "-l",
        "20",
        "-c",
        "4",
    ]
    .map(String::from)
    .to_vec();
    let server = Server::start(
        "llm-mock-api",
        dir.path(),
        &bin.join("llm-mock-api"),
        &args,
        &[],
        port,
    );
    write_scenarios(
        dir.path(),
        "llm-mock-api.yaml",
        &server.base(),
        "m",
        r#"  - name: llm-mock-api-chat
  - name: llm-mock-api-anthropic
    endpoint: {api: anthropic-messages}
"#,
    );
    let res = bless_then_check(dir.path(), &[]);
    let e = Expect {
        tokens: Some(chunks),
        source: "events",
        ttft_median: (15.0, 200.0),
        ttft_max: 1500.0,
        tpot_median: (18.0, 60.0),
    };
    assert_sane(scenario(&res, "llm-mock-api-chat"), &e);
    assert_sane(scenario(&res, "llm-mock-api-anthropic"), &e);
    // The usage the server sent is below the event count perfgate used.
    let body = |extra: Value| {
        let mut b = serde_json::json!({"model": "m", "max_tokens": 16, "stream": true,
            "messages": [{"role": "user", "content": PROMPT}]});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let chat = raw_post(
        port,
        "/v1/chat/completions",
        &[],
        &body(serde_json::json!({"stream_options": {"include_usage": true}})),
    );
    let anth = raw_post(
        port,
        "/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        &body(serde_json::json!({})),
    );
    for (what, raw, key) in [
        ("chat", &chat, "completion_tokens"),
        ("anthropic", &anth, "output_tokens"),
    ] {
        let usage = last_number(raw, key).unwrap_or_else(|| panic!("{what}: no usage: {raw}"));
        println!("llm-mock-api {what}: usage {key} {usage}, perfgate counted {chunks} events");
        assert!(usage > 0 && usage < chunks, "{what}: usage {usage}");
    }
    drop(server);
}

/// LiteLLM's proxy with `mock_response` and `mock_delay: 0.2`: the whole reply bursts out after
/// the delay in 3-character chunks (TPOT ~0), with usage (tiktoken's count, 27) below the number
/// of chunks (44), so events are counted. Its /v1/messages ignores `stream: true` for a mock
/// model and answers one JSON message: perfgate classifies that as `not_sse`.
#[test]
fn litellm_proxy_mock_model() {
    let _g = serial();
    let Some(bin) = venv_bin("litellm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("litellm.yaml"),
        format!(
            "model_list:\n  - model_name: mock-gpt\n    litellm_params:\n      model: openai/mock-gpt\n      api_key: sk-none\n      mock_response: \"{STORY}\"\n      mock_delay: 0.2\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let server = start_litellm(dir.path(), &bin, port);
    write_scenarios(
        dir.path(),
        "litellm.yaml",
        &server.base(),
        "mock-gpt",
        r#"  - name: litellm-mock-chat
  - name: litellm-mock-anthropic
    endpoint: {api: anthropic-messages}
"#,
    );
    let res = bless_then_check(dir.path(), &["litellm-mock-chat"]);
    assert_sane(
        scenario(&res, "litellm-mock-chat"),
        &Expect {
            tokens: Some(STORY.len().div_ceil(3) as u64),
            source: "events",
            ttft_median: (195.0, 1500.0),
            ttft_max: 5000.0,
            tpot_median: (0.0, 3.0),
        },
    );
    let msg = check_fails(dir.path(), "litellm-mock-anthropic", "not_sse");
    assert!(msg.contains("stream"), "{msg}");
    drop(server);
}

/// LiteLLM's proxy as a gateway in front of xpyd-sim (provider `hosted_vllm`): chat is passed
/// through, and /v1/messages is translated to Anthropic's event stream; both keep xpyd-sim's
/// timing (prefill 50 ms, 10 ms per token) and usage (16 tokens).
#[test]
fn litellm_gateway_to_xpyd_sim() {
    let _g = serial();
    let (Some(bin), Some(xbin)) = (venv_bin("litellm"), venv_bin("xpyd-sim")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let xport = free_port();
    let xargs: Vec<String> = [
        "serve",
        "--mode",
        "dual",
        "--host",
        "127.0.0.1",
        "--port",
        &xport.to_string(),
        "--model",
        "sim-model",
        "--prefill-delay-ms",
        "50",
        "--decode-delay-per-token-ms",
        "10",
    ]
    .map(String::from)
    .to_vec();
    let upstream = Server::start(
        "xpyd-sim",
        dir.path(),
        &xbin.join("xpyd-sim"),
        &xargs,
        &[],
        xport,
    );
    std::fs::write(
        dir.path().join("litellm.yaml"),
        format!(
            "model_list:\n  - model_name: gw\n    litellm_params:\n      model: hosted_vllm/sim-model\n      api_base: http://127.0.0.1:{xport}/v1\n      api_key: sk-none\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let server = start_litellm(dir.path(), &bin, port);
    write_scenarios(
        dir.path(),
        "gateway.yaml",
        &server.base(),
        "gw",
        r#"  - name: litellm-gw-chat
    request: {ignore_eos: true}
  - name: litellm-gw-anthropic
    endpoint: {api: anthropic-messages}
    request: {extra_body: {ignore_eos: true}}
"#,
    );
    let res = bless_then_check(dir.path(), &[]);
    let e = Expect {
        tokens: Some(16),
        source: "usage",
        ttft_median: (50.0, 600.0),
        ttft_max: 3000.0,
        tpot_median: (9.0, 30.0),
    };
    assert_sane(scenario(&res, "litellm-gw-chat"), &e);
    assert_sane(scenario(&res, "litellm-gw-anthropic"), &e);
    drop(server);
    drop(upstream);
}

fn start_litellm(dir: &Path, bin: &Path, port: u16) -> Server {
    let args: Vec<String> = [
        "--config",
        "litellm.yaml",
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--num_workers",
        "1",
    ]
    .map(String::from)
    .to_vec();
    // The bundled model cost map, not a download; no telemetry.
    Server::start(
        "litellm",
        dir,
        &bin.join("litellm"),
        &args,
        &[
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("LITELLM_TELEMETRY", "False"),
            ("DISABLE_SCHEMA_UPDATE", "True"),
        ],
        port,
    )
}
