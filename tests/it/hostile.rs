//! Endpoints that misbehave (issue 8): each gives a classified failure, bounded time and
//! memory, and leaves other scenarios unaffected. Every server here is a thread on 127.0.0.1
//! that serves a bounded number of connections for a bounded time.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// Starts a server thread: for each of at most `max_conns` connections (for at most 60 s),
/// reads the request head and calls `answer` with the stream.
fn server(max_conns: usize, answer: fn(TcpStream)) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        l.set_nonblocking(true).unwrap();
        let mut n = 0;
        while n < max_conns && Instant::now() < deadline {
            match l.accept() {
                Ok((mut s, _)) => {
                    n += 1;
                    s.set_nonblocking(false).unwrap();
                    let mut buf = [0u8; 16384];
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = s.read(&mut buf);
                    std::thread::spawn(move || answer(s));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    port
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

fn token(s: &mut TcpStream, text: &str) -> std::io::Result<()> {
    write!(
        s,
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
    )
}

fn run(yaml: &str) -> (Option<i32>, Value, String, Duration) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).unwrap();
    let t = Instant::now();
    let o = crate::support::perfgate()
        .current_dir(dir.path())
        .args(["check", "--allow-missing-baseline", "--output", "r.json"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let took = t.elapsed();
    let r: Value = read_json(&dir.path().join("r.json"));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code(), r, err, took)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|_| "null".into())).unwrap()
}

/// A scenario against `port` with short timeouts; `request_timeout` as given (e.g. "3s").
fn scenario(port: u16, request_timeout: &str) -> String {
    format!(
        "scenarios:\n  - name: hostile\n    endpoint: {{base_url: 'http://127.0.0.1:{port}/v1', model: m, first_token_timeout: 2s, idle_timeout: 2s, request_timeout: {request_timeout}}}\n    request: {{prompt: hi, max_tokens: 4}}\n    load: {{warmup: 0}}\n"
    )
}

fn classes(r: &Value) -> Vec<String> {
    r["scenarios"][0]["records"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["error"]["class"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn endless_stream_is_stopped_by_request_timeout() {
    let port = server(30, |mut s| {
        let _ = s.write_all(SSE_HEAD.as_bytes());
        for _ in 0..3000 {
            if token(&mut s, "x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let (code, r, _, took) = run(&scenario(port, "3s"));
    assert_eq!(code, Some(3));
    let c = classes(&r);
    assert!(
        !c.is_empty() && c.iter().all(|c| c == "timeout_request"),
        "{c:?}"
    );
    assert!(
        took < Duration::from_secs(30),
        "{took:?}: stopped early after the first failures"
    );
}

#[test]
fn one_huge_event_is_too_large_with_bounded_memory() {
    let port = server(30, |mut s| {
        let _ = s.write_all(SSE_HEAD.as_bytes());
        let _ = s.write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..100 {
            if s.write_all(&chunk).is_err() {
                return; // the client gave up: good
            }
        }
    });
    let (code, r, _, _) = run(&scenario(port, "30s"));
    assert_eq!(code, Some(3));
    let c = classes(&r);
    assert!(!c.is_empty() && c.iter().all(|c| c == "too_large"), "{c:?}");
}

#[test]
fn slowloris_is_an_idle_timeout() {
    let port = server(30, |mut s| {
        let _ = s.write_all(SSE_HEAD.as_bytes());
        for b in b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n".iter() {
            if s.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1000));
        }
    });
    let (code, r, _, took) = run(&scenario(port, "30s"));
    assert_eq!(code, Some(3));
    let c = classes(&r);
    assert!(
        !c.is_empty()
            && c.iter()
                .all(|c| c == "timeout_first_token" || c == "timeout_idle"),
        "{c:?}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn invalid_utf8_in_a_stream_is_measured_not_a_crash() {
    let port = server(30, |mut s| {
        let _ = s.write_all(SSE_HEAD.as_bytes());
        let _ = s.write_all(
            b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n",
        );
        let _ = token(&mut s, "b");
        let _ = s.write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    });
    let (code, r, err, _) = run(&scenario(port, "3s"));
    assert_eq!(code, Some(0), "{err}");
    let rec = &r["scenarios"][0]["records"][0];
    assert_eq!(rec["output_tokens"], 2, "{rec}");
}

#[test]
fn json_nested_ten_thousand_deep_is_a_malformed_event() {
    let port = server(30, |mut s| {
        let _ = s.write_all(SSE_HEAD.as_bytes());
        let _ = token(&mut s, "a");
        let deep = format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"b\"}}}}],\"x\":{}{}}}\n\n", "[".repeat(10_000), "]".repeat(10_000));
        let _ = s.write_all(deep.as_bytes());
        let _ = s.write_all(b"data: [DONE]\n\n");
    });
    let (code, r, _, _) = run(&scenario(port, "3s"));
    assert_eq!(code, Some(3));
    let c = classes(&r);
    assert!(
        !c.is_empty() && c.iter().all(|c| c == "malformed_event"),
        "{c:?}"
    );
}

#[test]
fn a_redirect_to_another_host_is_not_followed_and_the_key_stays_home() {
    // The "other host": records whether anything ever connects to it.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    other.set_nonblocking(true).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming().take(10) {
            let Ok(mut s) = conn else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = write!(s, "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{other_port}/v1/chat/completions\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        format!("scenarios:\n  - name: redirect\n    endpoint: {{base_url: 'http://127.0.0.1:{port}/v1', model: m, api_key_env: PG_KEY}}\n    request: {{prompt: hi, max_tokens: 4}}\n"),
    )
    .unwrap();
    let o = crate::support::perfgate()
        .current_dir(dir.path())
        .args(["check", "--allow-missing-baseline"])
        .env("PG_KEY", "sk-redirect-canary-123")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 307") && err.contains("does not follow redirects"),
        "{err}"
    );
    assert!(
        other.accept().is_err(),
        "nothing may connect to the redirect target"
    );
}

#[test]
fn a_thousand_refused_connections_fail_fast_and_spare_the_other_scenario() {
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = format!(
        "scenarios:\n  - name: refused\n    endpoint: {{base_url: 'http://127.0.0.1:{dead}/v1', model: m}}\n    request: {{prompt: hi, max_tokens: 4}}\n    load: {{concurrency: 1000, samples: 1000, warmup: 0}}\n  - name: healthy\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1'}}\n    request: {{prompt: hi, max_tokens: 4}}\n    load: {{warmup: 0}}\n"
    );
    let (code, r, _, took) = run(&yaml);
    assert_eq!(code, Some(3));
    assert_eq!(r["scenarios"][0]["status"], "unmeasurable");
    let n = r["scenarios"][0]["records"].as_array().unwrap().len();
    assert!(
        n >= 1000 - 8,
        "the whole first wave failed and was recorded: {n}"
    );
    assert!(classes(&r).iter().all(|c| c == "connect"));
    assert_eq!(
        r["scenarios"][1]["measured"]["ok"], 20,
        "the healthy scenario is unaffected"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}
