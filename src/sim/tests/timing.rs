//! The simulator's schedules served on time: token timing, concurrent streams, seeded
//! schedules, recorded send times, bursts, stalls and varied output lengths.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_timing() {
    serve(
        sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0"),
        |srv| async move {
            let r = one(
                srv.addr(),
                &post("/v1/chat/completions", &chat_body(5, true, true)),
            )
            .await;
            let role_ms = r.chunks[0].0;
            let t = content_times(&r);
            eprintln!(
                "timing: head {:.1} ms, role {role_ms:.1} ms, content [{}] ms, end {:.1} ms",
                r.head_ms,
                fmt_ms(&t),
                r.end_ms
            );
            assert!(role_ms < 40.0, "role chunk at {role_ms} ms");
            assert_eq!(t.len(), 5);
            assert!(near(t[0], 100.0), "first content at {} ms", t[0]);
            assert!(near(t[4], 180.0), "last content at {} ms", t[4]);
            for (i, w) in t.windows(2).enumerate() {
                let gap = w[1] - w[0];
                assert!((0.0..=60.0).contains(&gap), "gap {i} = {gap} ms");
            }
            assert!(near(r.end_ms, 180.0), "end at {} ms", r.end_ms);
        },
    )
    .await;
}

/// A request whose body comes 150 ms after its head arrives when its body does: the schedule
/// starts there, as a server starts work on a request it has read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_arrives_with_the_last_of_its_body() {
    serve(
        sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0"),
        |srv| async move {
            let raw = post("/v1/chat/completions", &chat_body(3, true, false));
            let split = find(&raw, b"\r\n\r\n").unwrap() + 4;
            let mut s = TcpStream::connect(srv.addr()).await.unwrap();
            s.write_all(&raw[..split]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
            // t0 of the exchange: just before the body is written
            let r = exchange(&mut s, &raw[split..]).await;
            let t = content_times(&r);
            eprintln!("body 150 ms after the head: content [{}] ms", fmt_ms(&t));
            assert_eq!(t.len(), 3);
            assert!(near(t[0], 100.0), "first content at {} ms", t[0]);
            assert!(near(t[2], 140.0), "last content at {} ms", t[2]);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_keep_their_timing() {
    serve(
        sim("ttft_ms=100&tpot_ms=20&ttft_sigma=0&tpot_sigma=0"),
        |srv| async move {
            let addr = srv.addr();
            let tasks: Vec<_> = (0..4)
                .map(|_| {
                    tokio::spawn(async move {
                        let r = one(
                            addr,
                            &post("/v1/chat/completions", &chat_body(5, true, true)),
                        )
                        .await;
                        content_times(&r)
                    })
                })
                .collect();
            for task in tasks {
                let t = task.await.unwrap();
                eprintln!("concurrent: content [{}] ms", fmt_ms(&t));
                assert_eq!(t.len(), 5);
                assert!(near(t[0], 100.0), "first content at {} ms", t[0]);
                assert!(near(t[4], 180.0), "last content at {} ms", t[4]);
            }
            assert_eq!(srv.requests_served(), 4);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_schedule() {
    timeout(LIMIT, async {
        let q = "seed=7&ttft_ms=30&tpot_ms=10&ttft_sigma=0.4&tpot_sigma=0.4";
        let cfg = sim(q);
        let planned: Vec<Vec<f64>> = (0..2)
            .map(|n| RequestPlan::new(&cfg, n, 8).collect())
            .collect();
        assert_ne!(planned[0], planned[1], "requests of one server differ");
        let other: Vec<f64> =
            RequestPlan::new(&sim("seed=8&ttft_sigma=0.4&tpot_sigma=0.4"), 0, 8).collect();
        assert_ne!(planned[0], other, "seeds differ");

        let mut measured: Vec<Vec<Vec<f64>>> = Vec::new();
        for _server in 0..2 {
            let srv = SimServer::start(cfg.clone(), 0).await.unwrap();
            // A /v1/models probe does not consume a request number.
            let _ = one(srv.addr(), &get("/v1/models")).await;
            let mut s = TcpStream::connect(srv.addr()).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut per_req = Vec::new();
            for _ in 0..2 {
                // Two requests on one keep-alive connection.
                let r = exchange(
                    &mut s,
                    &post("/v1/chat/completions", &chat_body(8, true, false)),
                )
                .await;
                assert!(r.complete);
                per_req.push(content_times(&r));
            }
            measured.push(per_req);
        }
        for (n, plan) in planned.iter().enumerate() {
            eprintln!("seed 7 request {n}: planned [{}] ms", fmt_ms(plan));
            for (s, m) in measured.iter().enumerate() {
                eprintln!("  server {s} measured [{}] ms", fmt_ms(&m[n]));
                assert_eq!(m[n].len(), 8);
                for (p, t) in plan.iter().zip(&m[n]) {
                    assert!(near(*t, *p), "request {n}: planned {p} ms, measured {t} ms");
                }
            }
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_times_are_recorded_and_served() {
    serve(
        sim("ttft_ms=30&tpot_ms=5&ttft_sigma=0&tpot_sigma=0"),
        |srv| async move {
            let (r, n, t) = chat_with_timings(&srv, 4).await;
            let kinds: Vec<_> = t.events.iter().map(|(_, k)| *k).collect();
            use crate::sim::EventKind::*;
            assert_eq!(
                kinds,
                [Role, Token, Token, Token, Token, Finish, Usage, Done]
            );
            // the first token was sent ~30 ms after arrival and arrived after it was sent
            let first = t.first_token().unwrap();
            let sent_ms = first.duration_since(t.arrival).as_secs_f64() * 1000.0;
            assert!((25.0..200.0).contains(&sent_ms), "{sent_ms}");
            // the client saw it about when it was sent (its t0 is after connecting and writing)
            let seen_ms = content_times(&r)[0];
            assert!((seen_ms - sent_ms).abs() < 25.0, "{seen_ms} vs {sent_ms}");
            assert!(t.events.windows(2).all(|w| w[1].0 >= w[0].0));

            let j = one(srv.addr(), &get(&format!("/sim/timings/{n}"))).await;
            assert_eq!(j.status, 200);
            let v = j.json();
            assert_eq!(v["request"], n);
            let ev = v["events"].as_array().unwrap();
            assert_eq!(ev.len(), 8);
            assert_eq!(ev[1]["kind"], "token");
            let since_arrival = ev[1]["ms_since_arrival"].as_f64().unwrap();
            assert!((since_arrival - sent_ms).abs() < 0.01);
            let o = v["arrival_ms_since_origin"].as_f64().unwrap();
            assert!((ev[1]["ms_since_origin"].as_f64().unwrap() - o - since_arrival).abs() < 0.01);
            assert_eq!(one(srv.addr(), &get("/sim/timings/999")).await.status, 404);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_stalls_and_varied_output() {
    serve(sim("ttft_ms=20&tpot_ms=4&ttft_sigma=0&tpot_sigma=0&burst=3&stall_every=4&stall_ms=60&vary_output=3"), |srv| async move {
        // 7 tokens: token 1 alone at 20 ms, then bursts of 3 sent when their last token is due;
        // gaps 4 ms, with a 60 ms stall after token 4 (stall_every 4).
        // token due times: 20, 24, 28, 32, 96, 100, 104 -> events [1]@20, [2..4]@32, [5..7]@104
        let mut seen_tokens = Vec::new();
        for round in 0..3u64 {
            let r = one(
                srv.addr(),
                &post("/v1/chat/completions", &chat_body(7, true, true)),
            )
            .await;
            assert_eq!(r.status, 200);
            let n: u64 = r
                .header(crate::sim::server::SIM_REQUEST_HEADER)
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(n, round);
            let ev = r.events();
            let usage: Value = ev
                .iter()
                .filter(|(_, p)| p.as_str() != "[DONE]")
                .map(|(_, p)| serde_json::from_str::<Value>(p).unwrap())
                .find(|v| v.get("usage").is_some_and(|u| !u.is_null()))
                .expect("usage chunk");
            // vary_output 3: request n generates 7 - (n mod 3) tokens
            let want = 7 - round;
            assert_eq!(usage["usage"]["completion_tokens"], want);
            let texts: Vec<String> = ev
                .iter()
                .filter(|(_, p)| p.as_str() != "[DONE]")
                .filter_map(|(_, p)| {
                    let v: Value = serde_json::from_str(p).unwrap();
                    v["choices"][0]["delta"]["content"]
                        .as_str()
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                })
                .collect();
            seen_tokens.push(texts.clone());
            let t = srv.timings(n).unwrap();
            assert_eq!(u64::from(t.output_tokens), want);
            let offs: Vec<f64> = t
                .token_times()
                .map(|x| x.duration_since(t.arrival).as_secs_f64() * 1000.0)
                .collect();
            let expect: &[f64] = match round {
                0 => &[20.0, 32.0, 104.0],
                1 => &[20.0, 32.0, 100.0], // 6 tokens: [1], [2..4], [5,6] due at 100
                _ => &[20.0, 32.0, 96.0],  // 5 tokens: [1], [2..4], [5] due at 96
            };
            assert_eq!(offs.len(), expect.len(), "{offs:?}");
            for (o, e) in offs.iter().zip(expect) {
                // sent when due, never early, at most a timer tick or a busy machine late
                assert!(*o >= e - 0.01 && *o < e + 40.0, "sent {o} ms, due {e} ms");
            }
        }
        assert_eq!(
            seen_tokens[0],
            vec![" tok1", " tok2 tok3 tok4", " tok5 tok6 tok7"]
        );
        assert_eq!(seen_tokens[2], vec![" tok1", " tok2 tok3 tok4", " tok5"]);

        // the list endpoint: every kept request, in order, with wall-clock arrival and tokens
        let j = one(srv.addr(), &get("/sim/timings")).await;
        assert_eq!(j.status, 200);
        let list = j.json()["requests"].as_array().unwrap().clone();
        assert_eq!(list.len(), 3);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        for (i, r) in list.iter().enumerate() {
            assert_eq!(r["request"], i as u64);
            assert_eq!(r["output_tokens"], 7 - i as u64);
            let a = r["arrival_unix_ms"].as_f64().unwrap();
            assert!(a <= now_ms && now_ms - a < 10_000.0, "{a} vs {now_ms}");
        }
        let j = one(srv.addr(), &get("/sim/timings?from=2")).await;
        let list = j.json()["requests"].as_array().unwrap().clone();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["request"], 2);
    })
    .await;
}

/// `ttft_per_token_ms`: the first token is planned at ttft_ms + k x prompt tokens (the words of
/// the messages: "Write a short story about a cat" is 7), known by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_grows_with_the_prompt() {
    serve(
        sim("ttft_ms=20&tpot_ms=5&ttft_sigma=0&tpot_sigma=0&ttft_per_token_ms=10"),
        |srv| async move {
            let (r, _, t) = chat_with_timings(&srv, 2).await;
            let sent_ms = t
                .first_token()
                .unwrap()
                .duration_since(t.arrival)
                .as_secs_f64()
                * 1000.0;
            // 20 + 10 x 7 = 90 ms
            assert!(near(sent_ms, 90.0), "first token sent at {sent_ms} ms");
            let usage = r
                .events()
                .iter()
                .filter(|(_, p)| p.as_str() != "[DONE]")
                .map(|(_, p)| serde_json::from_str::<Value>(p).unwrap())
                .find(|v| v["usage"].is_object())
                .unwrap();
            assert_eq!(usage["usage"]["prompt_tokens"], 7);
        },
    )
    .await;
}
