//! Known-answer tests of the measurement: arrival times computed by hand.

use super::*;
use crate::client::dialect::Usage;
use crate::record::CachedSource;

fn tok(at: f64) -> Stamped {
    Stamped {
        at_ms: at,
        info: EventInfo {
            token: true,
            answer: true,
            ..Default::default()
        },
    }
}
fn other(at: f64, f: impl FnOnce(&mut EventInfo)) -> Stamped {
    let mut info = EventInfo::default();
    f(&mut info);
    Stamped { at_ms: at, info }
}

// Case 03 (role-only first chunk): role @5, tokens @214 234 254 274, finish @294, [DONE] @295.
// TTFT 214; 4 tokens (events); TPOT (274-214)/3 = 20; ITL [20,20,20]; E2E 274; t_done 295.
#[test]
fn known_answer_role_only_first_chunk() {
    let ev = vec![
        other(5.0, |_| {}),
        tok(214.0),
        tok(234.0),
        tok(254.0),
        tok(274.0),
        other(294.0, |i| i.finish = Some("stop".into())),
        other(295.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(296.0), None);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.ttft_ms, Some(214.0));
    assert_eq!(r.output_tokens, Some(4));
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.tpot_ms, Some(20.0));
    assert_eq!(r.itl_ms, vec![20.0, 20.0, 20.0]);
    assert_eq!(r.e2e_ms, Some(274.0));
    assert_eq!(r.t_done_ms, Some(295.0));
}

// Case 05: tokens @150 170 190 210, usage 6 @260, [DONE] @261 -> TPOT (210-150)/5 = 12.
#[test]
fn known_answer_usage_chunk() {
    let ev = vec![
        other(120.0, |_| {}),
        tok(150.0),
        tok(170.0),
        tok(190.0),
        tok(210.0),
        other(230.0, |i| i.finish = Some("stop".into())),
        other(260.0, |i| {
            i.usage = Some(Usage {
                prompt_tokens: Some(20),
                completion_tokens: Some(6),
                ..Default::default()
            })
        }),
        other(261.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(261.0), None);
    assert!(r.ok());
    assert_eq!(r.output_tokens, Some(6));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    assert_eq!(r.tpot_ms, Some(12.0));
    assert_eq!(r.e2e_ms, Some(210.0));
    assert_eq!(r.t_done_ms, Some(261.0));
    assert_eq!(r.prompt_tokens, Some(20));
}

/// A whole chat completion (`whole`) with text and usage.
fn whole(at: f64, completion_tokens: u64, prompt_tokens: u64) -> Stamped {
    other(at, |i| {
        i.whole = true;
        i.token = true;
        i.answer = true;
        i.text = Some("Hello there friend".into());
        i.finish = Some("stop".into());
        i.usage = Some(Usage {
            prompt_tokens: Some(prompt_tokens),
            completion_tokens: Some(completion_tokens),
            ..Default::default()
        });
    })
}

// Issue 41: tokens @200 220 240, usage 4 (prompt 9) @260, a whole chat.completion recap with
// usage 3 (prompt 7) @300: the recap is no token event and the stream's own usage stands:
// TPOT (240-200)/(4-1) = 13.333, E2E 240, ITL per event [20, 20]. A stream whose only answer
// is one whole completion @150 (usage 3) still measures it: one token event, TTFT = E2E = 150.
#[test]
fn a_whole_completion_after_the_tokens_recaps_them() {
    let usage = other(260.0, |i| {
        i.usage = Some(Usage {
            prompt_tokens: Some(9),
            completion_tokens: Some(4),
            ..Default::default()
        })
    });
    let ev = vec![
        tok(200.0),
        tok(220.0),
        tok(240.0),
        usage,
        whole(300.0, 3, 7),
        other(301.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(301.0), None);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.token_events, 3);
    assert_eq!((r.output_tokens, r.prompt_tokens), (Some(4), Some(9)));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    assert!(
        (r.tpot_ms.unwrap() - 40.0 / 3.0).abs() < 1e-9,
        "{:?}",
        r.tpot_ms
    );
    assert_eq!((r.e2e_ms, r.t_done_ms), (Some(240.0), Some(301.0)));
    assert_eq!(r.itl_ms, vec![20.0, 20.0]);
    assert_eq!(r.tokens_after_finish, None);
    let alone = measure(
        0.0,
        &[whole(150.0, 3, 7), other(151.0, |i| i.done = true)],
        End::Eof(151.0),
        None,
    );
    assert!(alone.ok(), "{:?}", alone.error);
    assert_eq!(alone.token_events, 1);
    assert_eq!((alone.ttft_ms, alone.e2e_ms), (Some(150.0), Some(150.0)));
    assert_eq!(alone.output_tokens, Some(3));
}

#[test]
fn zero_usage_is_distrusted() {
    let ev = vec![
        tok(10.0),
        tok(20.0),
        other(30.0, |i| {
            i.finish = Some("stop".into());
            i.usage = Some(Usage {
                prompt_tokens: Some(0),
                completion_tokens: Some(0),
                ..Default::default()
            })
        }),
    ];
    let r = measure(0.0, &ev, End::Eof(31.0), None);
    assert_eq!(r.output_tokens, Some(2));
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.tpot_ms, Some(10.0));
    assert_eq!(r.usage_distrusted, Some(0));
}

#[test]
fn per_token_itl_with_cumulative_usage() {
    let with = |at: f64, c: u64| {
        let mut s = tok(at);
        s.info.usage = Some(Usage {
            prompt_tokens: None,
            completion_tokens: Some(c),
            ..Default::default()
        });
        s
    };
    let ev = vec![
        with(100.0, 1),
        with(130.0, 4),
        with(140.0, 5),
        other(141.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(141.0), None);
    assert_eq!(r.itl_ms, vec![10.0, 10.0, 10.0, 10.0]);
    assert_eq!(r.output_tokens, Some(5));
    assert_eq!(r.tpot_ms, Some(10.0));
}

#[test]
fn failures_are_classified() {
    let err = vec![
        tok(540.0),
        other(2500.0, |i| i.error = Some("Provider disconnected".into())),
    ];
    let r = measure(0.0, &err, End::Eof(2501.0), None);
    assert_eq!(r.error.as_ref().unwrap().class, FailureClass::InBandError);
    assert!(r.error.unwrap().message.contains("Provider disconnected"));
    let none = vec![
        other(5.0, |i| i.finish = Some("stop".into())),
        other(6.0, |i| i.done = true),
    ];
    assert_eq!(
        measure(0.0, &none, End::Eof(6.0), None)
            .error
            .unwrap()
            .class,
        FailureClass::NoToken
    );
    let cut = vec![tok(100.0), tok(120.0)];
    let r = measure(0.0, &cut, End::Eof(170.0), None);
    assert_eq!(r.error.unwrap().class, FailureClass::Truncated);
    let finished_no_done = vec![
        tok(100.0),
        tok(120.0),
        tok(140.0),
        other(150.0, |i| i.finish = Some("stop".into())),
    ];
    let r = measure(0.0, &finished_no_done, End::Eof(170.0), None);
    assert!(r.ok());
    assert_eq!(r.t_done_ms, Some(170.0));
    assert_eq!(r.tpot_ms, Some(20.0));
}

fn fin(mut s: Stamped, f: &str) -> Stamped {
    s.info.finish = Some(f.into());
    s
}
fn usage(c: u64) -> Option<Usage> {
    Some(Usage {
        prompt_tokens: Some(9),
        completion_tokens: Some(c),
        ..Default::default()
    })
}

// Groq: x_groq.usage 4 on the finish chunk @40, tokens @10 20 30, [DONE] @41.
// TPOT = (30-10)/(4-1) = 6.667; source vendor_usage; with a standard usage 5 too, it wins.
#[test]
fn vendor_usage_counts_under_the_same_rules_and_standard_wins() {
    let ev = |std: Option<u64>, vendor: u64| {
        vec![
            tok(10.0),
            tok(20.0),
            tok(30.0),
            other(40.0, |i| {
                i.finish = Some("stop".into());
                i.vendor_usage = usage(vendor);
                i.usage = std.and_then(usage);
            }),
            other(41.0, |i| i.done = true),
        ]
    };
    let r = measure(0.0, &ev(None, 4), End::Eof(41.0), None);
    assert!(r.ok());
    assert_eq!(r.output_tokens, Some(4));
    assert_eq!(r.token_source, Some(TokenSource::VendorUsage));
    assert_eq!(r.tpot_ms, Some(20.0 / 3.0));
    assert_eq!(r.prompt_tokens, Some(9));
    let r = measure(0.0, &ev(Some(5), 4), End::Eof(41.0), None);
    assert_eq!(r.output_tokens, Some(5));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    // same trust rules: 2 < 3 token events is distrusted, events counted
    let r = measure(0.0, &ev(None, 2), End::Eof(41.0), None);
    assert_eq!(r.output_tokens, Some(3));
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.usage_distrusted, Some(2));
    // above max_tokens: distrusted
    let r = measure(0.0, &ev(None, 4), End::Eof(41.0), Some(3));
    assert_eq!(r.token_source, Some(TokenSource::Events));
}

// finish_reason "stop" on every chunk: tokens @10 20 30 all count. TPOT (30-10)/2 = 10,
// E2E 30, 2 tokens after the finish noted. Today's code stopped at the first: 1 token.
#[test]
fn tokens_after_a_finish_reason_count_and_are_noted() {
    let ev = vec![
        fin(tok(10.0), "stop"),
        fin(tok(20.0), "stop"),
        fin(tok(30.0), "stop"),
        other(31.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(31.0), None);
    assert!(r.ok());
    assert_eq!(r.output_tokens, Some(3));
    assert_eq!(r.tpot_ms, Some(10.0));
    assert_eq!(r.e2e_ms, Some(30.0));
    assert_eq!(r.itl_ms, vec![10.0, 10.0]);
    assert_eq!(r.tokens_after_finish, Some(2));
}

// Cumulative usage 1, 2, 2^40 on successive token events (today: an 8 TB allocation in
// the ITL split, exit 134). 2^40 > 3 x MAX_TOKENS_PER_EVENT: distrusted, events counted,
// ITL per event: gaps 10, 10. A believable jump (1, 2, 30000 over 3 events) splits into
// 30000 - 2 gaps, kept as ITL_KEEP points.
#[test]
fn cumulative_usage_jumps_are_bounded() {
    let with = |at: f64, c: u64| {
        let mut s = tok(at);
        s.info.usage = usage(c);
        s
    };
    let ev = vec![
        with(10.0, 1),
        with(20.0, 2),
        with(30.0, 1 << 40),
        other(31.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(31.0), None);
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.output_tokens, Some(3));
    assert_eq!(r.usage_distrusted, Some(1 << 40));
    assert_eq!(r.itl_ms, vec![10.0, 10.0]);
    let ev = vec![
        with(10.0, 1),
        with(20.0, 2),
        with(30.0, 20_000),
        other(31.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(31.0), None);
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    assert_eq!(r.itl_ms.len(), crate::stats::itl::ITL_KEEP);
    assert_eq!(r.itl_count, Some(1 + 19_998));
    assert_eq!(r.itl_ms.last(), Some(&10.0));
}

// Hidden reasoning (issue 27): tokens @300 320 340 360 380, usage 60 of which 55 reasoning
// never streamed. TPOT (380-300)/(5-1) = 20, not (380-300)/59 = 1.36; the 55 are recorded.
// The same usage with the reasoning streamed counts all 60; xAI's usage (completion 5,
// reasoning 55 apart: total = prompt + completion + reasoning) with reasoning streamed: 60.
#[test]
fn hidden_reasoning_tokens_leave_the_tpot_denominator() {
    let ev = |reasoning_event: bool, u: Usage| {
        let mut v = vec![];
        if reasoning_event {
            v.push(other(290.0, |i| {
                i.token = true;
                i.reasoning = true;
            }));
        }
        v.extend([300.0, 320.0, 340.0, 360.0, 380.0].map(tok));
        v.push(other(391.0, |i| {
            i.finish = Some("stop".into());
            i.usage = Some(u);
        }));
        v
    };
    let openai = Usage {
        prompt_tokens: Some(10),
        completion_tokens: Some(60),
        reasoning_tokens: Some(55),
        total_tokens: Some(70),
    };
    let r = measure(0.0, &ev(false, openai), End::Eof(392.0), None);
    assert_eq!(r.output_tokens, Some(5));
    assert_eq!(r.tpot_ms, Some(20.0));
    assert_eq!(r.hidden_reasoning_tokens, Some(55));
    assert_eq!(r.reasoning_tokens, Some(55));
    let r = measure(0.0, &ev(true, openai), End::Eof(392.0), None);
    assert_eq!(r.output_tokens, Some(60));
    assert_eq!(r.hidden_reasoning_tokens, None);
    assert_eq!(r.ttft_ms, Some(290.0));
    assert_eq!(r.ttfot_ms, Some(300.0));
    let xai = Usage {
        prompt_tokens: Some(10),
        completion_tokens: Some(5),
        reasoning_tokens: Some(55),
        total_tokens: Some(70),
    };
    let r = measure(0.0, &ev(true, xai), End::Eof(392.0), None);
    assert_eq!(r.output_tokens, Some(60));
    let r = measure(0.0, &ev(false, xai), End::Eof(392.0), None);
    assert_eq!(r.output_tokens, Some(5));
    assert_eq!(r.hidden_reasoning_tokens, Some(55));
}

#[test]
fn done_before_any_token_says_so() {
    let ev = vec![other(5.0, |_| {}), other(6.0, |i| i.done = true)];
    let r = measure(0.0, &ev, End::Eof(6.0), None);
    let e = r.error.unwrap();
    assert_eq!(e.class, FailureClass::NoToken);
    assert!(
        e.message
            .contains("[DONE] arrived before any token and without a finish_reason"),
        "{}",
        e.message
    );
    let ev = vec![
        other(5.0, |i| i.choices_not_array = true),
        other(6.0, |i| i.done = true),
    ];
    let e = measure(0.0, &ev, End::Eof(6.0), None).error.unwrap();
    assert!(
        e.message.contains("`choices` is an object"),
        "{}",
        e.message
    );
}

// Tokens @100 120 140, finish_reason @150, then a connection reset @170 before [DONE]: the
// answer was complete (README: a finish_reason is a normal end). TPOT (140-100)/2 = 20.
#[test]
fn a_reset_after_finish_reason_is_a_normal_end() {
    let ev = vec![
        tok(100.0),
        tok(120.0),
        tok(140.0),
        other(150.0, |i| i.finish = Some("stop".into())),
    ];
    let reset = Failure {
        class: FailureClass::Truncated,
        status: None,
        message: "connection reset".into(),
    };
    let r = measure(0.0, &ev, End::Failed(reset.clone(), 170.0), None);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.tpot_ms, Some(20.0));
    assert_eq!(r.t_done_ms, Some(170.0));
    // before any finish_reason it is still truncated
    let r = measure(0.0, &ev[..3], End::Failed(reset, 170.0), None);
    assert_eq!(r.error.unwrap().class, FailureClass::Truncated);
}

fn text(at: f64, t: &str) -> Stamped {
    let mut s = tok(at);
    s.info.text = Some(t.into());
    s
}
fn with_usage(at: f64, u: Usage) -> Stamped {
    other(at, |i| {
        i.finish = Some("stop".into());
        i.usage = Some(u);
    })
}

// Issue 28 finding 1: answer text a1..a6 @10..60, "use </think> to close" @70, a8 @80, usage
// 60 of which 52 hidden reasoning. The unopened </think> comes after answer text in its own
// event: it is answer text, not MiniMax's end of reasoning, so the 52 stay hidden: 8 streamed
// tokens, TPOT (80 - 10) / 7 = 10 (was output 60, TPOT 70 / 59 = 1.19 and TTFOT 70).
#[test]
fn a_think_close_in_answer_prose_does_not_cancel_hidden_reasoning() {
    let mut ev: Vec<Stamped> = (1..=6).map(|k| text(10.0 * k as f64, "a")).collect();
    ev.push(text(70.0, "use </think> to close"));
    ev.push(text(80.0, "a8"));
    ev.push(with_usage(
        90.0,
        Usage {
            prompt_tokens: Some(10),
            completion_tokens: Some(60),
            reasoning_tokens: Some(52),
            total_tokens: Some(70),
        },
    ));
    let r = measure(0.0, &ev, End::Eof(91.0), None);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.output_tokens, Some(8));
    assert_eq!(r.hidden_reasoning_tokens, Some(52));
    assert_eq!(r.tpot_ms, Some(10.0));
    assert_eq!(r.ttfot_ms, None);
    assert_eq!(r.stream_notes, vec![StreamNote::ThinkCloseInAnswer]);
    // MiniMax's own shape (the tag starts its event) still ends the reasoning: TTFOT 70
    ev[6] = text(70.0, "</think>\n\nHello");
    let r = measure(0.0, &ev, End::Eof(91.0), None);
    assert_eq!(r.ttfot_ms, Some(70.0));
    assert_eq!(r.output_tokens, Some(60));
    assert!(r.stream_notes.is_empty());
}

// Issue 28 finding 4: "<thi" @100 "nk>hm" @120 "</think>" @140 "Hi" @160 " there" @180: the
// split tag opens reasoning, TTFOT 160 (was 100 = TTFT, so none); 5 events, TPOT 80 / 4 = 20.
#[test]
fn a_think_tag_split_over_events_is_read() {
    let ev = vec![
        text(100.0, "<thi"),
        text(120.0, "nk>hm"),
        text(140.0, "</think>"),
        text(160.0, "Hi"),
        text(180.0, " there"),
        other(190.0, |i| i.finish = Some("stop".into())),
    ];
    let r = measure(0.0, &ev, End::Eof(191.0), None);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.ttft_ms, Some(100.0));
    assert_eq!(r.ttfot_ms, Some(160.0));
    assert_eq!(r.tpot_ms, Some(20.0));
    // "a <" then "b": not a tag, answer text from the first event
    let ev = vec![
        text(100.0, "<"),
        text(120.0, "b"),
        other(130.0, |i| i.done = true),
    ];
    let r = measure(0.0, &ev, End::Eof(130.0), None);
    assert_eq!((r.ttft_ms, r.ttfot_ms), (Some(100.0), None));
}

// Issue 28 finding 6: reasoning_tokens above completion_tokens (which includes them) is
// impossible usage: distrusted like other impossible counts, events counted; 2^64 - 1 is not
// recorded; an output count that is not a whole number is noted.
#[test]
fn impossible_reasoning_counts_are_distrusted() {
    let ev = |r: u64| {
        vec![
            other(5.0, |i| {
                i.token = true;
                i.reasoning = true;
            }),
            tok(10.0),
            tok(20.0),
            with_usage(
                30.0,
                Usage {
                    prompt_tokens: Some(5),
                    completion_tokens: Some(6),
                    reasoning_tokens: Some(r),
                    total_tokens: None,
                },
            ),
        ]
    };
    let r = measure(0.0, &ev(20), End::Eof(31.0), None);
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.output_tokens, Some(3));
    assert_eq!(r.usage_distrusted, Some(6));
    assert_eq!(r.reasoning_tokens, None);
    let r = measure(0.0, &ev(u64::MAX), End::Eof(31.0), None);
    assert_eq!(r.reasoning_tokens, None);
    assert_eq!(r.usage_distrusted, Some(6));
    // a possible one is kept
    let r = measure(0.0, &ev(2), End::Eof(31.0), None);
    assert_eq!(r.reasoning_tokens, Some(2));
    assert_eq!(r.output_tokens, Some(6));
    let mut bad = ev(2);
    bad[3] = other(30.0, |i| {
        i.finish = Some("stop".into());
        i.usage_not_integer = true;
    });
    let r = measure(0.0, &bad, End::Eof(31.0), None);
    assert_eq!(r.token_source, Some(TokenSource::Events));
    assert_eq!(r.stream_notes, vec![StreamNote::UsageNotInteger]);
}

// Issue 28 finding 8: a Responses stream ends normally only with response.completed /
// response.incomplete (a finish): a bare [DONE] after tokens is a truncation, and an empty
// one says what it lacked, not "[DONE]".
#[test]
fn a_responses_stream_needs_its_completion_event() {
    let run = |ev: &[Stamped]| {
        let mut m = Measurer::for_api(0.0, Api::OpenaiResponses);
        for e in ev {
            m.push(e);
        }
        m.finish(End::Eof(50.0), None)
    };
    let done = other(40.0, |i| i.done = true);
    let r = run(&[tok(10.0), tok(20.0), done.clone()]);
    let e = r.error.unwrap();
    assert_eq!(e.class, FailureClass::Truncated);
    assert!(
        e.message.contains("without response.completed"),
        "{}",
        e.message
    );
    // the same stream is a success in chat ([DONE] ends it)
    assert!(measure(
        0.0,
        &[tok(10.0), tok(20.0), done.clone()],
        End::Eof(50.0),
        None
    )
    .ok());
    let e = run(&[done]).error.unwrap();
    assert_eq!(e.class, FailureClass::NoToken);
    assert!(
        e.message.contains("without response.completed"),
        "{}",
        e.message
    );
    let completed = other(40.0, |i| {
        i.finish = Some("completed".into());
        i.done = true;
    });
    let e = run(std::slice::from_ref(&completed)).error.unwrap();
    assert!(
        e.message
            .contains("response.completed arrived without any output delta"),
        "{}",
        e.message
    );
    assert!(run(&[tok(10.0), completed]).ok());
}

/// Interprets raw `(at_ms, event name, data)` events of `api` as the client does (the fast
/// path included) and measures them; the body ends 1 ms after the last event.
fn measure_raw(api: Api, events: &[(f64, Option<&str>, &str)]) -> RequestRecord {
    let mut m = Measurer::for_api(0.0, api);
    for &(at_ms, name, data) in events {
        let ev = crate::client::sse::SseEvent {
            event: name.map(str::to_string),
            data: data.to_string(),
        };
        let info = crate::client::dialect::interpret(api, &ev);
        m.push(&Stamped { at_ms, info });
    }
    let end = events.last().map_or(0.0, |e| e.0) + 1.0;
    m.finish(End::Eof(end), None)
}

/// A plain chat token chunk (the fast path's kind).
fn chat_token(k: usize) -> String {
    format!(
        r#"{{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":"t{k}"}},"finish_reason":null}}]}}"#
    )
}

/// Role chunk @100, 8 token chunks @110..180, finish @185, then `tail` @190 and [DONE] @191.
fn chat_with_tail(tail: &[&str]) -> RequestRecord {
    let tokens: Vec<String> = (0..8).map(chat_token).collect();
    let mut ev: Vec<(f64, Option<&str>, &str)> = vec![(
        100.0,
        None,
        r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
    )];
    for (k, t) in tokens.iter().enumerate() {
        ev.push((110.0 + 10.0 * k as f64, None, t));
    }
    ev.push((
        185.0,
        None,
        r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ));
    for t in tail {
        ev.push((190.0, None, t));
    }
    ev.push((191.0, None, "[DONE]"));
    measure_raw(Api::OpenaiChat, &ev)
}

// OpenAI / vLLM / SGLang: the usage chunk's prompt_tokens_details.cached_tokens 96 of 120. The
// token chunks take the fast path, the usage chunk the general one. 8 tokens from usage, TPOT
// (180 - 110) / 7 = 10.
#[test]
fn cached_tokens_from_the_standard_usage() {
    assert!(
        crate::client::dialect::interpret(
            Api::OpenaiChat,
            &crate::client::sse::SseEvent {
                event: None,
                data: chat_token(0),
            }
        )
        .token
    );
    let r = chat_with_tail(&[
        r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":96}}}"#,
    ]);
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.cached_tokens, Some(96));
    assert_eq!(r.cached_source, Some(CachedSource::Usage));
    assert_eq!(r.prompt_tokens, Some(120));
    assert_eq!(r.output_tokens, Some(8));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    assert_eq!(r.tpot_ms, Some(10.0));
    assert!(r.stream_notes.is_empty());
    // a cache miss is reported as 0, and recorded as such
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}}"#,
    ]);
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(0), Some(CachedSource::Usage))
    );
    // no cached count anywhere: none
    let r =
        chat_with_tail(&[r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8}}"#]);
    assert_eq!((r.cached_tokens, r.cached_source), (None, None));
}

// DeepSeek: usage.prompt_cache_hit_tokens 64 (+ miss 56 = prompt 120), on the finish chunk;
// Moonshot: cached_tokens 16 in the finishing choice's usage (case 50's shape). Both
// vendor_usage; with the standard field beside DeepSeek's, the standard one wins.
#[test]
fn cached_tokens_from_vendor_spellings() {
    let r = chat_with_tail(&[
        r#"{"id":"c","object":"chat.completion.chunk","model":"deepseek-chat","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"total_tokens":128,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":56}}"#,
    ]);
    assert_eq!(r.cached_tokens, Some(64));
    assert_eq!(r.cached_source, Some(CachedSource::VendorUsage));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_cache_hit_tokens":64,"prompt_tokens_details":{"cached_tokens":96}}}"#,
    ]);
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(96), Some(CachedSource::Usage))
    );
    let r = chat_with_tail(&[
        r#"{"id":"chatcmpl-P50","object":"chat.completion.chunk","created":1700000000,"model":"moonshot-v1-8k","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":19,"completion_tokens":8,"total_tokens":27,"cached_tokens":16}}]}"#,
    ]);
    assert_eq!(r.cached_tokens, Some(16));
    assert_eq!(r.cached_source, Some(CachedSource::VendorUsage));
    assert_eq!(r.prompt_tokens, Some(19));
    assert_eq!(r.token_source, Some(TokenSource::VendorUsage));
}

// llama.cpp: a usage chunk without prompt_tokens_details and `timings` with cache_n 44 of
// prompt 50 (prompt_n 6 evaluated): 44 from server_timings, timings kept as before. Its
// native `tokens_cached` (the slot's whole cache after the answer, prompt and output) is not
// read as cached prompt tokens.
#[test]
fn cached_tokens_from_llama_cpp_timings() {
    let r = chat_with_tail(&[
        r#"{"choices":[],"created":1,"id":"chatcmpl-l","model":"gemma-3-270m","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk","usage":{"completion_tokens":8,"prompt_tokens":50,"total_tokens":58},"timings":{"cache_n":44,"prompt_n":6,"prompt_ms":20.1,"prompt_per_token_ms":3.35,"prompt_per_second":298.5,"predicted_n":8,"predicted_ms":80.0,"predicted_per_token_ms":10.0,"predicted_per_second":100.0}}"#,
    ]);
    assert_eq!(r.cached_tokens, Some(44));
    assert_eq!(r.cached_source, Some(CachedSource::ServerTimings));
    assert_eq!(r.prompt_tokens, Some(50));
    assert_eq!(
        r.server_timings.as_ref().and_then(|t| t.get("cache_n")),
        Some(&serde_json::json!(44))
    );
    // newer llama.cpp also writes the standard field: it wins
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"completion_tokens":8,"prompt_tokens":50,"total_tokens":58,"prompt_tokens_details":{"cached_tokens":44}},"timings":{"cache_n":44,"prompt_n":6}}"#,
    ]);
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(44), Some(CachedSource::Usage))
    );
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"completion_tokens":8,"prompt_tokens":50},"tokens_cached":58}"#,
    ]);
    assert_eq!((r.cached_tokens, r.cached_source), (None, None));
}

// Cached 130 of prompt 120 is impossible: not recorded, noted once; output tokens still come
// from the usage. 120 of 120 is possible. A count that is not a whole number (96.5, "96", -1)
// is not read: the next place that has one is (here llama.cpp's cache_n 90), or none.
#[test]
fn impossible_or_non_integer_cached_counts_are_not_recorded() {
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":130}}}"#,
    ]);
    assert_eq!((r.cached_tokens, r.cached_source), (None, None));
    assert_eq!(r.stream_notes, vec![StreamNote::CachedAbovePrompt]);
    assert_eq!(r.output_tokens, Some(8));
    assert_eq!(r.token_source, Some(TokenSource::Usage));
    let r = chat_with_tail(&[
        r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":120}}}"#,
    ]);
    assert_eq!(r.cached_tokens, Some(120));
    assert!(r.stream_notes.is_empty());
    for bad in ["96.5", r#""96""#, "-1", "null"] {
        let with_timings = format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{{"cached_tokens":{bad}}}}},"timings":{{"cache_n":90}}}}"#
        );
        let r = chat_with_tail(&[&with_timings]);
        assert_eq!(
            (r.cached_tokens, r.cached_source),
            (Some(90), Some(CachedSource::ServerTimings)),
            "{bad}"
        );
        let alone = format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{{"cached_tokens":{bad}}}}}}}"#
        );
        let r = chat_with_tail(&[&alone]);
        assert_eq!((r.cached_tokens, r.stream_notes.len()), (None, 0), "{bad}");
    }
}

/// An Anthropic stream: message_start @100 (its usage `start_usage`), text deltas @150 170 190,
/// message_delta @195 (its usage `delta_usage`), message_stop @196.
fn anthropic_stream(start_usage: &str, delta_usage: &str) -> RequestRecord {
    let start = format!(
        r#"{{"type":"message_start","message":{{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{start_usage}}}}}"#
    );
    let delta = format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"end_turn","stop_sequence":null}},"usage":{delta_usage}}}"#
    );
    let text = |t: &str| {
        format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{t}"}}}}"#
        )
    };
    let (a, b, c) = (text("Hi"), text(" there"), text("!"));
    measure_raw(
        Api::AnthropicMessages,
        &[
            (100.0, Some("message_start"), &start),
            (
                101.0,
                Some("content_block_start"),
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            (150.0, Some("content_block_delta"), &a),
            (170.0, Some("content_block_delta"), &b),
            (190.0, Some("content_block_delta"), &c),
            (
                191.0,
                Some("content_block_stop"),
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (195.0, Some("message_delta"), &delta),
            (196.0, Some("message_stop"), r#"{"type":"message_stop"}"#),
        ],
    )
}

// Anthropic: cache_read_input_tokens 1800 in message_start's message.usage, input_tokens 24
// (the tokens after the cache breakpoint): the prompt is counted whole, 24 + 0 + 1800 = 1824, as
// the OpenAI APIs count prompt_tokens, so 1800 of 1824 were cached; from message_delta's usage
// alone too. 3 tokens from usage, TPOT (190 - 150) / 2 = 20.
#[test]
fn cached_tokens_from_anthropic_cache_reads() {
    let r = anthropic_stream(
        r#"{"input_tokens":24,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":1}"#,
        r#"{"output_tokens":3}"#,
    );
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.cached_tokens, Some(1800));
    assert_eq!(r.cached_source, Some(CachedSource::Usage));
    assert_eq!(r.prompt_tokens, Some(1824));
    assert_eq!(r.output_tokens, Some(3));
    assert_eq!(r.tpot_ms, Some(20.0));
    assert!(r.stream_notes.is_empty());
    let r = anthropic_stream(
        r#"{"input_tokens":24,"output_tokens":1}"#,
        r#"{"input_tokens":24,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":3}"#,
    );
    assert_eq!(
        (r.cached_tokens, r.cached_source, r.prompt_tokens),
        (Some(1800), Some(CachedSource::Usage), Some(1824))
    );
    let r = anthropic_stream(
        r#"{"input_tokens":1824,"output_tokens":1}"#,
        r#"{"output_tokens":3}"#,
    );
    assert_eq!(r.cached_tokens, None);
}

// Responses API: response.completed's usage input_tokens_details.cached_tokens 1920 of input
// 2048; llama.cpp's Responses stream (case 54's shape: cached_tokens 0 in usage, `timings`
// beside `response`): the usage's 0 wins over timings.
#[test]
fn cached_tokens_from_a_responses_stream() {
    let run = |completed: &str| {
        measure_raw(
            Api::OpenaiResponses,
            &[
                (
                    50.0,
                    None,
                    r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress","model":"gpt-5-mini","usage":null}}"#,
                ),
                (
                    100.0,
                    None,
                    r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"Hi"}"#,
                ),
                (
                    120.0,
                    None,
                    r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":" there"}"#,
                ),
                (130.0, None, completed),
            ],
        )
    };
    let r = run(
        r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","model":"gpt-5-mini","usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2050}}}"#,
    );
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.cached_tokens, Some(1920));
    assert_eq!(r.cached_source, Some(CachedSource::Usage));
    assert_eq!(r.prompt_tokens, Some(2048));
    assert_eq!(r.output_tokens, Some(2));
    let r = run(
        r#"{"type":"response.completed","response":{"id":"resp_2","object":"response","status":"completed","model":"gemma-3-270m","output":[],"usage":{"input_tokens":30,"output_tokens":2,"total_tokens":32,"input_tokens_details":{"cached_tokens":0}}},"timings":{"cache_n":0,"prompt_n":30,"predicted_n":2}}"#,
    );
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(0), Some(CachedSource::Usage))
    );
    let r = run(
        r#"{"type":"response.completed","response":{"id":"resp_3","status":"completed","usage":{"input_tokens":30,"output_tokens":2,"total_tokens":32}},"timings":{"cache_n":29,"prompt_n":1}}"#,
    );
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(29), Some(CachedSource::ServerTimings))
    );
}

// Across events the most trusted place wins whatever the order: usage's 96 over a later (or
// earlier) timings-only chunk's cache_n 50; from the same place, the latest.
#[test]
fn the_most_trusted_cached_place_wins_across_events() {
    let usage = r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":96}}}"#;
    let timings = |n: u64| format!(r#"{{"choices":[],"timings":{{"cache_n":{n}}}}}"#);
    for tail in [[usage, &timings(50)], [&timings(50), usage]] {
        let r = chat_with_tail(&tail);
        assert_eq!(
            (r.cached_tokens, r.cached_source),
            (Some(96), Some(CachedSource::Usage))
        );
    }
    let r = chat_with_tail(&[&timings(50), &timings(60)]);
    assert_eq!(
        (r.cached_tokens, r.cached_source),
        (Some(60), Some(CachedSource::ServerTimings))
    );
}
