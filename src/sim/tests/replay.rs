//! Replayed stream cases: bytes delivered on time, an aborted body, an error status.

use super::*;

const REPLAY_CASE: &str = r#"
source: inline-test.md
api: openai-chat
status: 200
headers:
  content-type: text/event-stream
  x-case: inline
  content-length: "999"
reads:
  - at_ms: 10
    text: "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
  - at_ms: 60
    text: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\u00e9\"}}]}\n\n"
  - at_ms: 120
    hex: "e4bd"
  - at_ms: 121
    hex: "a0"
close_at_ms: 150
expect:
  success: true
  ttft_ms: 60
  output_tokens: 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_delivers_bytes_on_time() {
    timeout(LIMIT, async {
        let case = ReplayCase::from_yaml(REPLAY_CASE).unwrap();
        let want = case.read_bytes().unwrap();
        let srv = SimServer::start_replay(case, 0).await.unwrap();
        let r = one(srv.addr(), &post("/anything", "not even json")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("x-case"), Some("inline"));
        assert_eq!(r.header("content-length"), None, "body is chunked");
        assert!(r.complete);
        let got: Vec<f64> = r.chunks.iter().map(|c| c.0).collect();
        eprintln!(
            "replay: chunks at [{}] ms (planned 10, 60, 120, 121), end {:.1} ms (planned 150)",
            fmt_ms(&got),
            r.end_ms
        );
        assert_eq!(r.chunks.len(), want.len());
        for ((t, bytes), (at, want_bytes)) in r.chunks.iter().zip(&want) {
            assert_eq!(bytes, want_bytes);
            assert!(near(*t, *at), "read planned at {at} ms arrived at {t} ms");
        }
        assert!(near(r.end_ms, 150.0), "end at {} ms", r.end_ms);
        let r = one(srv.addr(), &get("/v1/models")).await;
        assert_eq!(r.json()["data"][0]["id"], "perfgate-replay");
        assert_eq!(srv.requests_served(), 2);
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_abort_leaves_body_incomplete() {
    timeout(LIMIT, async {
        for close in ["close_at_ms: 80\n", ""] {
            let yaml = format!(
                "status: 200\nheaders:\n  content-type: text/event-stream\nreads:\n  - at_ms: 10\n    text: \"data: {{}}\\n\\n\"\n  - at_ms: 40\n    text: \"data: {{\\\"x\\\":1}}\\n\\n\"\n{close}abort: true\n"
            );
            let case = ReplayCase::from_yaml(&yaml).unwrap();
            let srv = SimServer::start_replay(case, 0).await.unwrap();
            let r = one(srv.addr(), &post("/v1/chat/completions", "{}")).await;
            let got: Vec<f64> = r.chunks.iter().map(|c| c.0).collect();
            eprintln!(
                "replay abort ({}): chunks at [{}] ms, connection closed at {:.1} ms",
                close.trim(),
                fmt_ms(&got),
                r.end_ms
            );
            assert_eq!(r.status, 200);
            assert!(!r.complete, "abort must leave the chunked body unfinished");
            assert_eq!(r.chunks.len(), 2, "both reads arrive before the abort");
            assert_eq!(r.chunks[1].1, b"data: {\"x\":1}\n\n");
            let planned_end = if close.is_empty() { 40.0 } else { 80.0 };
            assert!(near(r.end_ms, planned_end), "closed at {} ms", r.end_ms);
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_error_status_and_empty_body() {
    timeout(LIMIT, async {
        let case = ReplayCase::from_yaml(
            "status: 503\nheaders:\n  content-type: text/html\nreads:\n  - at_ms: 0\n    text: \"<html><title>Busy</title></html>\"\n",
        )
        .unwrap();
        let srv = SimServer::start_replay(case, 0).await.unwrap();
        let r = one(srv.addr(), &post("/v1/chat/completions", "{}")).await;
        assert_eq!(r.status, 503);
        assert!(r.complete);
        assert_eq!(r.chunks.len(), 1);
        let h = one(srv.addr(), &get("/health")).await;
        assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
        let bad = ReplayCase {
            status: 42,
            ..ReplayCase::from_yaml("status: 200").unwrap()
        };
        let e = SimServer::start_replay(bad, 0).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    })
    .await
    .expect("test timed out");
}
