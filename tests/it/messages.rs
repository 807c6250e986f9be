//! Messages that must point the right way (issue 19): a wrong model name names the models the
//! server lists, never base_url; a model the server does not list is noted even when the server
//! accepts it; `https://` against a plain-http server says so. Real processes, real HTTP over
//! 127.0.0.1; each server thread serves a bounded number of connections for a bounded time.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A server thread that answers `GET .../models` with `models` (a JSON body) and every other
/// request with `other` (a whole HTTP response), for at most `max_conns` connections and 60 s.
fn server(max_conns: usize, models: &'static str, other: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        l.set_nonblocking(true).unwrap();
        let mut n = 0;
        while n < max_conns && Instant::now() < deadline {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            n += 1;
            s.set_nonblocking(false).unwrap();
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 16384];
            let got = s.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..got]);
            let reply = if head.starts_with("GET ") && head.contains("/models ") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{models}",
                    models.len()
                )
            } else {
                other.to_string()
            };
            let _ = s.write_all(reply.as_bytes());
        }
    });
    port
}

use crate::support::check_scenario as check;

const LISTED: &str = r#"{"object":"list","data":[{"id":"gemma-3-270m","object":"model"},{"id":"qwen3-0.6b","object":"model"}]}"#;

#[test]
fn a_wrong_model_name_names_the_served_models_not_base_url() {
    // vLLM's answer to an unknown model.
    const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 97\r\nconnection: close\r\n\r\n{\"error\":{\"message\":\"The model `gema-3-270m` does not exist.\",\"type\":\"NotFoundError\",\"code\":404}}";
    assert_eq!(NOT_FOUND.split("\r\n\r\n").nth(1).unwrap().len(), 97);
    let port = server(20, LISTED, NOT_FOUND);
    let (code, text, _) = check(&format!(
        "scenarios:\n  - name: typo\n    endpoint: {{base_url: 'http://127.0.0.1:{port}/v1', model: gema-3-270m}}\n    request: {{prompt: hi, max_tokens: 4}}\n"
    ));
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("The model `gema-3-270m` does not exist"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "the server lists these models at http://127.0.0.1:{port}/v1/models: `gemma-3-270m`, `qwen3-0.6b`; set endpoint.model to one of them"
        )),
        "{text}"
    );
    assert!(!text.contains("check base_url"), "{text}");
}

#[test]
fn a_model_the_server_does_not_list_is_noted_although_it_is_served() {
    // The simulator lists `served` and answers any model name.
    let (code, text, r) = check(
        "scenarios:\n  - name: typo\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&model=served', model: serevd}\n    request: {prompt: hi, max_tokens: 4}\n    load: {samples: 20, warmup: 1}\n",
    );
    assert_eq!(code, Some(0), "{text}");
    let notes = r["scenarios"][0]["notes"].to_string();
    assert!(
        notes.contains("model `serevd` is not among the models the server lists at GET <base_url>/models (`served`)"),
        "{notes}"
    );
    // --require-listed-model makes it a configuration error: exit 2
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(
        dir.path().join("scenarios/s.yaml"),
        "scenarios:\n  - name: typo\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&model=served', model: serevd}\n    request: {prompt: hi, max_tokens: 4}\n    load: {samples: 20, warmup: 1}\n",
    )
    .unwrap();
    let o = crate::support::perfgate_in(dir.path(), 120)
        .args([
            "check",
            "--allow-missing-baseline",
            "--require-listed-model",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("MISCONFIGURED: model `serevd` is not among the models the server lists"),
        "{out}"
    );
    assert!(out.contains("(--require-listed-model)"), "{out}");
    // the right name: no note
    let (code, text, r) = check(
        "scenarios:\n  - name: right\n    endpoint: {base_url: 'sim://?ttft_ms=5&tpot_ms=1&model=served', model: served}\n    request: {prompt: hi, max_tokens: 4}\n    load: {samples: 20, warmup: 1}\n",
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(!r["scenarios"][0]["notes"]
        .to_string()
        .contains("not among the models"));
}

#[test]
fn https_against_a_plain_http_server_says_use_http() {
    const OK: &str = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    let port = server(20, LISTED, OK);
    let (code, text, _) = check(&format!(
        "scenarios:\n  - name: tls\n    endpoint: {{base_url: 'https://127.0.0.1:{port}/v1', model: gemma-3-270m}}\n    request: {{prompt: hi, max_tokens: 4}}\n"
    ));
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("the server answered plain HTTP, not TLS; use http:// in base_url"),
        "{text}"
    );
}
