//! The server's own behaviour: injected errors, bad requests answered (never a panic), refused
//! settings and non-loopback addresses, shutdown, checked `timings` queries.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_rate_one_gives_500() {
    serve(sim("error_rate=1"), |srv| async move {
        for stream in [true, false] {
            let r = one(
                srv.addr(),
                &post("/v1/chat/completions", &chat_body(5, stream, true)),
            )
            .await;
            assert_eq!(r.status, 500);
            assert_eq!(r.header("content-type"), Some("application/json"));
            let v = r.json();
            assert_eq!(v["error"]["type"], "server_error");
            assert!(v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("fault injection"));
        }
        let r = one(srv.addr(), &post("/v1/completions", r#"{"prompt":"x"}"#)).await;
        assert_eq!(r.status, 500);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_answered_not_panicked() {
    serve(sim("ttft_ms=1&tpot_ms=1"), |srv| async move {
        let addr = srv.addr();

        let r = one(addr, &post("/v1/chat/completions", "{not json")).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON"));

        let r = one(
            addr,
            &post("/v1/chat/completions", r#"{"max_tokens":"five"}"#),
        )
        .await;
        assert_eq!(r.status, 400);
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"));

        let r = one(addr, &post("/v2/nothing", "{}")).await;
        assert_eq!(r.status, 404);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        let r = one(addr, &get("/")).await;
        assert_eq!(r.status, 404);
        let r = one(addr, &get("/v1/chat/completions")).await;
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("POST"));

        // Declared too large: 413 without reading the body.
        let raw =
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2000000\r\n\r\n{}";
        let r = one(addr, raw).await;
        assert_eq!(r.status, 413);
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");

        // Actually too large, chunked upload without a length: 413 once 1 MiB is exceeded.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head =
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
        let piece = vec![b' '; 64 * 1024];
        let mut raw = head.to_vec();
        for _ in 0..17 {
            raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            raw.extend_from_slice(&piece);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        let r = exchange(&mut s, &raw).await;
        assert_eq!(r.status, 413);

        // Garbage that is not HTTP: the connection is closed, the server lives on.
        let r = one(addr, b"\x00\x01garbage\r\n\r\n").await;
        assert!(r.status == 0 || r.status == 400, "status {}", r.status);

        // Keep-alive: two requests on one connection, then the server still answers.
        let mut s = TcpStream::connect(addr).await.unwrap();
        for _ in 0..2 {
            let r = exchange(&mut s, &get("/v1/models")).await;
            assert_eq!(r.status, 200);
        }
        let r = one(
            addr,
            &post("/v1/chat/completions", &chat_body(2, true, true)),
        )
        .await;
        assert_eq!(r.status, 200);
        assert!(r.complete);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_non_loopback_and_bad_config() {
    timeout(LIMIT, async {
        let e = SimServer::start_at(SimConfig::default(), "0.0.0.0:0".parse().unwrap())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("loopback"), "{e}");
        let bad = SimConfig {
            ttft_ms: f64::NAN,
            ..SimConfig::default()
        };
        let e = SimServer::start(bad, 0).await.unwrap_err();
        assert!(e.to_string().contains("ttft_ms"), "{e}");
        let e = SimConfig::from_query("tpot=3").unwrap_err().to_string();
        assert!(
            e.contains("tpot") && e.contains("tpot_ms") && e.contains("ttft_sigma"),
            "{e}"
        );
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_aborts_streams_and_stops_accepting() {
    serve(
        sim("ttft_ms=50&tpot_ms=50&ttft_sigma=0&tpot_sigma=0"),
        |srv| async move {
            let addr = srv.addr();
            let client = tokio::spawn(async move {
                one(
                    addr,
                    &post("/v1/chat/completions", &chat_body(100, true, true)),
                )
                .await
            });
            tokio::time::sleep(Duration::from_millis(120)).await;
            srv.shutdown();
            let r = client.await.unwrap();
            assert_eq!(r.status, 200);
            assert!(!r.complete, "stream must be cut");
            assert!(r.end_ms < 1000.0, "cut at {} ms", r.end_ms);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timings_queries_are_checked() {
    serve(sim("ttft_ms=1&tpot_ms=1"), |srv| async move {
        for q in ["from=abc", "from=-1", "from=", "since=3"] {
            let r = one(srv.addr(), &get(&format!("/sim/timings?{q}"))).await;
            assert_eq!(r.status, 400, "{q}");
            let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(msg.contains("from"), "{q}: {msg}");
        }
        let r = one(srv.addr(), &get("/sim/timings/12")).await;
        assert_eq!(r.status, 404);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("no timings kept for request 12"), "{msg}");
        let r = one(srv.addr(), &get("/nope")).await;
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            msg.contains("GET /health") && msg.contains("/sim/timings"),
            "{msg}"
        );
        assert_eq!(
            one(srv.addr(), &get("/sim/timings")).await.json(),
            json!({"requests": []})
        );
    })
    .await;
}
