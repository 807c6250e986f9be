//! The Responses API (`POST /v1/responses`): the typed event stream and its known answer.

use super::*;

/// A Responses API request body (`POST /v1/responses`).
fn responses_body(max_output_tokens: u64, stream: bool) -> String {
    json!({
        "model": "whatever",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Write a short story about a cat"}],
        "max_output_tokens": max_output_tokens,
        "stream": stream,
    })
    .to_string()
}

/// The typed events of a Responses API stream: (arrival ms, `event:` name, data JSON); asserts
/// each HTTP chunk is exactly one `event: ...\ndata: ...\n\n` event whose name is its `type`.
fn typed_events(resp: &RawResponse) -> Vec<(f64, String, Value)> {
    resp.chunks
        .iter()
        .map(|(t, c)| {
            let s = std::str::from_utf8(c).expect("UTF-8 chunk");
            let rest = s.strip_prefix("event: ").unwrap_or_else(|| panic!("{s:?}"));
            let (name, rest) = rest.split_once('\n').unwrap();
            let data = rest
                .strip_prefix("data: ")
                .and_then(|d| d.strip_suffix("\n\n"))
                .unwrap_or_else(|| panic!("{s:?}"));
            assert!(
                !data.contains('\n'),
                "more than one event in a chunk: {s:?}"
            );
            let v: Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["type"], name, "{s:?}");
            (*t, name.to_string(), v)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_responses_shape_and_known_answer() {
    serve(
        sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0&model=m3"),
        |srv| async move {
            // Known answer, sigma 0: the first delta at ttft_ms = 100 ms, then one every tpot_ms =
            // 20 ms: 100, 120, 140, 160, 180; TPOT = (180 - 100) / (5 - 1) = 20 ms.
            for path in ["/v1/responses", "/responses"] {
                let r = one(srv.addr(), &post(path, &responses_body(5, true))).await;
                assert_eq!(r.status, 200, "{path}");
                assert_eq!(r.header("content-type"), Some("text/event-stream"));
                assert!(r.complete, "body must end with the final chunk");
                let ev = typed_events(&r);
                let names: Vec<&str> = ev.iter().map(|(_, n, _)| n.as_str()).collect();
                let mut want = vec![
                    "response.created",
                    "response.in_progress",
                    "response.output_item.added",
                    "response.content_part.added",
                ];
                want.extend(["response.output_text.delta"; 5]);
                want.extend([
                    "response.output_text.done",
                    "response.content_part.done",
                    "response.output_item.done",
                    // max_output_tokens (5) cut the answer, as OpenAI reports it
                    "response.incomplete",
                ]);
                assert_eq!(names, want, "{path}");
                for (i, (_, _, v)) in ev.iter().enumerate() {
                    assert_eq!(v["sequence_number"], i as u64, "{path}");
                }
                let id = &ev[0].2["response"]["id"];
                assert_eq!(ev[0].2["response"]["status"], "in_progress");
                assert_eq!(ev[0].2["response"]["model"], "m3");
                let deltas: Vec<&str> = ev[4..9]
                    .iter()
                    .map(|(_, _, v)| v["delta"].as_str().unwrap())
                    .collect();
                assert_eq!(deltas, [" tok1", " tok2", " tok3", " tok4", " tok5"]);
                assert_eq!(ev[9].2["text"], " tok1 tok2 tok3 tok4 tok5");
                let last = &ev[12].2["response"];
                assert_eq!(&last["id"], id);
                assert_eq!(last["status"], "incomplete");
                assert_eq!(
                    last["incomplete_details"],
                    json!({"reason": "max_output_tokens"})
                );
                // input: "Be brief." 2 words + the 7 words of the message
                assert_eq!(
                    last["usage"],
                    json!({"input_tokens": 9, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 14})
                );
                assert_eq!(last["output"][0]["status"], "incomplete");
                // timing: the events before the answer at once, the deltas on schedule, the rest
                // with the last delta
                let t: Vec<f64> = ev[4..9].iter().map(|(t, _, _)| *t).collect();
                eprintln!(
                    "{path}: deltas at [{}] ms, end {:.1} ms",
                    fmt_ms(&t),
                    r.end_ms
                );
                assert!(ev[3].0 < 40.0, "content_part.added at {} ms", ev[3].0);
                for (i, planned) in [100.0, 120.0, 140.0, 160.0, 180.0].iter().enumerate() {
                    assert!(near(t[i], *planned), "delta {i} at {} ms", t[i]);
                }
                assert!(
                    near(ev[12].0, 180.0),
                    "response.incomplete at {} ms",
                    ev[12].0
                );
                assert!(near(r.end_ms, 180.0), "end at {} ms", r.end_ms);

                // the timing log names each event's kind
                let n: u64 = r
                    .header(crate::sim::server::SIM_REQUEST_HEADER)
                    .unwrap()
                    .parse()
                    .unwrap();
                let kinds: Vec<_> = srv.timings(n).unwrap().events.iter().map(|e| e.1).collect();
                use crate::sim::EventKind::*;
                assert_eq!(
                    kinds,
                    [
                        Role, Role, Role, Role, Token, Token, Token, Token, Token, Finish, Finish,
                        Finish, Done
                    ]
                );
                assert_eq!(srv.timings(n).unwrap().output_tokens, 5);
            }
            // a cap below max_output_tokens: the model "ended" on its own, response.completed
            let srv = SimServer::start(sim("ttft_ms=5&tpot_ms=1&max_output=3&burst=2"), 0)
                .await
                .unwrap();
            let r = one(
                srv.addr(),
                &post("/v1/responses", &responses_body(10, true)),
            )
            .await;
            let ev = typed_events(&r);
            // burst 2: token 1 alone, then tokens 2-3 in one delta
            let deltas: Vec<&str> = ev
                .iter()
                .filter(|(_, n, _)| n == "response.output_text.delta")
                .map(|(_, _, v)| v["delta"].as_str().unwrap())
                .collect();
            assert_eq!(deltas, [" tok1", " tok2 tok3"]);
            let (_, name, last) = ev.last().unwrap();
            assert_eq!(name, "response.completed");
            assert_eq!(last["sequence_number"], 9);
            assert_eq!(last["response"]["status"], "completed");
            assert_eq!(last["response"]["incomplete_details"], Value::Null);
            assert_eq!(last["response"]["usage"]["output_tokens"], 3);
            // not streamed: the final response object; a GET is refused
            let r = one(
                srv.addr(),
                &post("/v1/responses", &responses_body(2, false)),
            )
            .await;
            assert_eq!(r.status, 200);
            let v = r.json();
            assert_eq!(
                (v["object"].as_str(), v["status"].as_str()),
                (Some("response"), Some("incomplete"))
            );
            assert_eq!(v["output"][0]["content"][0]["text"], " tok1 tok2");
            assert_eq!(v["usage"]["output_tokens"], 2);
            assert_eq!(one(srv.addr(), &get("/v1/responses")).await.status, 405);
            let bad = one(
                srv.addr(),
                &post("/v1/responses", r#"{"input":"x","max_output_tokens":0}"#),
            )
            .await;
            assert_eq!(bad.status, 400);
        },
    )
    .await;
}

// Issue 28: a Responses request without max_output_tokens asked no limit, yet the simulator
// reported `response.incomplete` (reason max_output_tokens) at its default 16 tokens. Now the
// default length (the chat default, DEFAULT_MAX_TOKENS) ends with response.completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_without_a_limit_complete_at_the_default_length() {
    serve(sim("ttft_ms=1&tpot_ms=1&burst=4"), |srv| async move {
        let body = json!({"model": "m", "input": "hi", "stream": true}).to_string();
        let r = one(srv.addr(), &post("/v1/responses", &body)).await;
        let ev = typed_events(&r);
        let (_, name, last) = ev.last().unwrap();
        assert_eq!(name, "response.completed");
        assert_eq!(last["response"]["status"], "completed");
        assert_eq!(
            last["response"]["usage"]["output_tokens"],
            crate::sim::server::DEFAULT_MAX_TOKENS
        );
        // with the limit asked, the cap is still reported as OpenAI does
        let r = one(
            srv.addr(),
            &post("/v1/responses", &responses_body(16, true)),
        )
        .await;
        let ev = typed_events(&r);
        assert_eq!(ev.last().unwrap().1, "response.incomplete");
    })
    .await;
}
