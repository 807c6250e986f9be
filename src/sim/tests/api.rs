//! The OpenAI-compatible surface: `GET /v1/models`, streamed and non-streamed chat and
//! completions bodies.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_endpoint() {
    serve(sim("model=m1"), |srv| async move {
        assert_eq!(
            srv.base_url(),
            format!("http://127.0.0.1:{}/v1", srv.addr().port())
        );
        let r = one(srv.addr(), &get("/v1/models")).await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.json(),
            json!({"object":"list","data":[{"id":"m1","object":"model","owned_by":"perfgate-sim"}]})
        );
        assert_eq!(srv.requests_served(), 1);
        let h = one(srv.addr(), &get("/health")).await;
        assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_shape() {
    serve(sim("ttft_ms=5&tpot_ms=2&model=m2"), |srv| async move {
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(5, true, true)),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("cache-control"), Some("no-cache"));
        assert_eq!(r.header("content-length"), None);
        assert!(r.complete, "body must end with the final chunk");
        let ev = r.events();
        let payloads: Vec<&str> = ev.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(payloads.len(), 1 + 5 + 1 + 1 + 1, "{payloads:#?}");
        let js: Vec<Value> = payloads[..payloads.len() - 1]
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        // Role-only first chunk.
        assert_eq!(js[0]["object"], "chat.completion.chunk");
        assert_eq!(js[0]["model"], "m2");
        assert_eq!(
            js[0]["choices"][0]["delta"],
            json!({"role":"assistant","content":""})
        );
        assert_eq!(js[0]["choices"][0]["finish_reason"], Value::Null);
        // Exactly five content chunks.
        for (i, j) in js[1..6].iter().enumerate() {
            assert_eq!(
                j["choices"][0]["delta"],
                json!({"content": format!(" tok{}", i + 1)})
            );
            assert_eq!(j["id"], js[0]["id"]);
        }
        // Finish, usage, [DONE].
        assert_eq!(js[6]["choices"][0]["delta"], json!({}));
        assert_eq!(js[6]["choices"][0]["finish_reason"], "length");
        assert_eq!(js[7]["choices"], json!([]));
        assert_eq!(
            js[7]["usage"],
            json!({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12})
        );
        assert_eq!(payloads[8], "[DONE]");
        assert_eq!(content_times(&r).len(), 5);

        // Without include_usage: no usage chunk.
        let r = one(
            srv.addr(),
            &post("/v1/chat/completions", &chat_body(3, true, false)),
        )
        .await;
        let ev = r.events();
        assert_eq!(ev.len(), 1 + 3 + 1 + 1);
        assert!(!ev.iter().any(|(_, p)| p.contains("usage")));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streamed_and_completions() {
    serve(sim("ttft_ms=30&tpot_ms=10&ttft_sigma=0&tpot_sigma=0&max_output=4&model=mm"), |srv| async move {
        // Non-streamed chat: one JSON after the whole generation time (30 + 3 * 10 ms).
        let r = one(srv.addr(), &post("/v1/chat/completions", &chat_body(10, false, false))).await;
        assert_eq!(r.status, 200);
        eprintln!("non-streamed chat answered at {:.1} ms (planned 60)", r.end_ms);
        assert!(near(r.head_ms, 60.0), "answered at {} ms", r.head_ms);
        let v = r.json();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["model"], "mm");
        assert_eq!(v["choices"][0]["message"]["content"], " tok1 tok2 tok3 tok4");
        // max_output (4) capped max_tokens (10): the model "stopped".
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 4);

        // Streamed completions: text chunks, no role chunk.
        let body = r#"{"prompt":"one two three","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}"#;
        let r = one(srv.addr(), &post("/v1/completions", body)).await;
        assert_eq!(r.status, 200);
        assert!(r.complete);
        let ev = r.events();
        assert_eq!(ev.len(), 3 + 1 + 1 + 1);
        for (i, (t, p)) in ev[..3].iter().enumerate() {
            let v: Value = serde_json::from_str(p).unwrap();
            assert_eq!(v["object"], "text_completion");
            assert_eq!(v["choices"][0]["text"], format!(" tok{}", i + 1));
            let planned = 30.0 + 10.0 * i as f64;
            assert!(near(*t, planned), "token {i} at {t} ms, planned {planned}");
        }
        let fin: Value = serde_json::from_str(&ev[3].1).unwrap();
        assert_eq!(fin["choices"][0]["finish_reason"], "length");
        let usage: Value = serde_json::from_str(&ev[4].1).unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["prompt_tokens"], 3);
        assert_eq!(usage["usage"]["completion_tokens"], 3);
        assert_eq!(ev[5].1, "[DONE]");

        // Non-streamed completions.
        let r = one(srv.addr(), &post("/v1/completions", r#"{"prompt":"a","max_tokens":2}"#)).await;
        let v = r.json();
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["choices"][0]["text"], " tok1 tok2");
    })
    .await;
}
