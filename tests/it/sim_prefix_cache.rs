//! The simulator's block prefix cache (`perfgate sim --prefix-cache-block N`) over real
//! loopback HTTP: a conversation's next turn reuses the full blocks of the turn before, reports
//! them in usage and is not charged their prefill time; `--cache-report` misreports on purpose.
//!
//! Known answers, by hand, with 16-word blocks: turn 1 is a 200-word system message and a
//! 20-word user message, 220 words = 13 full blocks (208 words) and 12 over. Turn 2 repeats
//! turn 1's messages and adds a 30-word assistant and a 10-word user message, 260 words = 16
//! full blocks; its first 13 are turn 1's (block 13 holds turn 1's last 12 words and the
//! assistant's first 4), so 13 x 16 = 208 words are cached and 52 are not.

use crate::support::Sim;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One answer: the ms from writing the request to the arrival of its first token (` tok1`),
/// and its JSON objects (the SSE events of a stream, else the body).
struct Answer {
    ttft_ms: f64,
    objects: Vec<Value>,
}

impl Answer {
    /// The `usage` object (the last event's that has one, or the body's; the Responses API's
    /// in its `response`).
    fn usage(&self) -> &Value {
        self.objects
            .iter()
            .rev()
            .find_map(|o| {
                [&o["usage"], &o["response"]["usage"]]
                    .into_iter()
                    .find(|u| u.is_object())
            })
            .expect("a usage object")
    }
}

/// POSTs `body` to `path` on one connection closed after the answer.
fn post(addr: SocketAddr, path: &str, body: &Value) -> Answer {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let t0 = Instant::now();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let mut ttft_ms = None;
    let mut buf = [0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if ttft_ms.is_none() && raw.windows(5).any(|w| w == b" tok1") {
            ttft_ms = Some(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let objects = if head.contains("text/event-stream") {
        // each HTTP chunk is one event: its `data:` line, between chunk-size lines
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    } else {
        vec![serde_json::from_str(body).unwrap()]
    };
    Answer {
        ttft_ms: ttft_ms.expect("a first token"),
        objects,
    }
}

/// `n` words `{prefix}0 {prefix}1 ...`.
fn words(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{prefix}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn streamed_chat(messages: &[Value]) -> Value {
    json!({
        "model": "perfgate-sim",
        "messages": messages,
        "max_tokens": 2,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

/// `ttft_ms` 20 (sigma 0) + 2 ms per uncached word (see the module doc): turn 1 is cold,
/// 20 + 2 x 220 = 460 ms; turn 2 reuses 208 words, 20 + 2 x 52 = 124 ms; the same turn 2 with
/// another system prompt (its first word changed) is cold, 20 + 2 x 260 = 540 ms. So cold minus
/// warm is 2 x 208 = 416 ms.
#[test]
fn sim_prefix_cache_reuses_the_previous_turns_blocks() {
    let sim = Sim::start(
        120,
        &[
            "--ttft-ms",
            "20",
            "--ttft-sigma",
            "0",
            "--tpot-ms",
            "1",
            "--tpot-sigma",
            "0",
            "--ttft-per-token-ms",
            "2",
            "--prefix-cache-block",
            "16",
        ],
    );
    let system = json!({"role": "system", "content": words("s", 200)});
    let turn1 = vec![system, json!({"role": "user", "content": words("u", 20)})];
    let mut turn2 = turn1.clone();
    turn2.push(json!({"role": "assistant", "content": words("a", 30)}));
    turn2.push(json!({"role": "user", "content": words("v", 10)}));
    let mut other = turn2.clone();
    other[0]["content"] = json!(format!("x{}", words("s", 200).trim_start_matches("s0")));

    let r1 = post(sim.addr, "/v1/chat/completions", &streamed_chat(&turn1));
    let r2 = post(sim.addr, "/v1/chat/completions", &streamed_chat(&turn2));
    let cold = post(sim.addr, "/v1/chat/completions", &streamed_chat(&other));
    for (name, r, prompt, cached) in [
        ("turn 1", &r1, 220, 0),
        ("turn 2", &r2, 260, 208),
        ("turn 2, other system prompt", &cold, 260, 0),
    ] {
        let u = r.usage();
        assert_eq!(u["prompt_tokens"], prompt, "{name}: {u}");
        assert_eq!(
            u["prompt_tokens_details"],
            json!({"cached_tokens": cached}),
            "{name}: {u}"
        );
    }
    eprintln!(
        "TTFT: turn 1 {:.1} ms, turn 2 {:.1} ms, cold turn 2 {:.1} ms",
        r1.ttft_ms, r2.ttft_ms, cold.ttft_ms
    );
    // measured from the request's write: never early, at most tens of ms late
    for (name, got, want) in [
        ("turn 1", r1.ttft_ms, 460.0),
        ("turn 2", r2.ttft_ms, 124.0),
        ("cold turn 2", cold.ttft_ms, 540.0),
    ] {
        assert!(
            got >= want - 3.0 && got <= want + 60.0,
            "{name}: TTFT {got:.1} ms, planned {want} ms"
        );
    }
    let saved = cold.ttft_ms - r2.ttft_ms;
    assert!(
        (saved - 416.0).abs() <= 40.0,
        "cold - warm TTFT = {saved:.1} ms, expected 2 ms x 208 cached words = 416 ms"
    );
}

/// `--cache-report` on chat, completions and the Responses API (not streamed): each API's
/// 40-word prompt sent twice, so the second reuses 2 blocks of 16 = 32 words. `honest` reports
/// 0 then 32; `all` the whole prompt, 40, both times; `zero` 0 both times; `none` no field
/// (chat and completions: no `prompt_tokens_details`; Responses: no `input_tokens_details`).
#[test]
fn sim_cache_report_misreports_on_purpose() {
    for (mode, first, second) in [
        ("honest", Some(0), Some(32)),
        ("all", Some(40), Some(40)),
        ("zero", Some(0), Some(0)),
        ("none", None, None),
    ] {
        let sim = Sim::start(
            120,
            &[
                "--ttft-ms",
                "5",
                "--tpot-ms",
                "1",
                "--prefix-cache-block",
                "16",
                "--cache-report",
                mode,
            ],
        );
        let requests = [
            (
                "/v1/chat/completions",
                json!({"messages": [{"role": "user", "content": words("c", 40)}], "max_tokens": 2}),
                "prompt_tokens_details",
            ),
            (
                "/v1/completions",
                json!({"prompt": words("p", 40), "max_tokens": 2}),
                "prompt_tokens_details",
            ),
            (
                "/v1/responses",
                json!({"input": [{"role": "user", "content": words("r", 40)}], "max_output_tokens": 2}),
                "input_tokens_details",
            ),
        ];
        for (path, body, details) in requests {
            for (turn, want) in [(1, first), (2, second)] {
                let r = post(sim.addr, path, &body);
                let u = r.usage();
                let got = &u[details];
                match want {
                    Some(n) => assert_eq!(
                        *got,
                        json!({"cached_tokens": n}),
                        "{mode} {path} request {turn}: {u}"
                    ),
                    None => assert!(
                        u.get(details).is_none(),
                        "{mode} {path} request {turn}: {u}"
                    ),
                }
            }
        }
    }
}

/// A bad `--cache-report` is refused (exit 2) naming the modes.
#[test]
fn sim_cache_report_refuses_an_unknown_mode() {
    let o = crate::support::perfgate()
        .args(["sim", "--cache-report", "lying"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("honest, none, all, zero"), "{e}");
}
