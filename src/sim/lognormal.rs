//! The lognormal simulator: validates a generation request (chat, completions or the Responses
//! API), plans its seeded latencies and streams (or answers) it on schedule.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::chunks::{sse, Api, ChunkCtx, RESPONSES_PREAMBLE};
use super::config::{CacheReport, SimConfig, MAX_DELAY_MS, MAX_OUTPUT_LIMIT};
use super::http_util::ResBody;
use super::http_util::{
    error_response, json_response, method_not_allowed, models, not_found, raw_json_response,
    read_body, Arrival,
};
use super::prefix_cache::{block_keys, prompt_words};
use super::schedule::RequestPlan;
use super::state::Shared;
use super::timed_body::{at, ms, Script, Step, TimedBody};
use super::timing_log::{EventKind, MAX_TIMED_REQUESTS, SIM_REQUEST_HEADER};

/// Output tokens of a request that gives neither `max_tokens` nor `max_completion_tokens` (nor,
/// to the Responses API, `max_output_tokens`), tokens.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

pub(super) async fn handle_sim(
    req: Request<Incoming>,
    arrival: Arrival,
    cfg: &SimConfig,
    shared: &Shared,
) -> Response<ResBody> {
    let path = req.uri().path();
    let method = req.method();
    if path == "/sim/timings" {
        if method != Method::GET {
            return method_not_allowed("GET");
        }
        let mut from = 0;
        for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
            match (k.as_ref(), v.parse::<u64>()) {
                ("from", Ok(n)) => from = n,
                ("from", Err(_)) => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        &format!("from={v:?}: expected a request number (0, 1, 2, ...)"),
                        "invalid_request_error",
                    )
                }
                _ => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        &format!("unknown query parameter `{k}`; /sim/timings takes `from=N`"),
                        "invalid_request_error",
                    )
                }
            }
        }
        return raw_json_response(StatusCode::OK, shared.all_timings_json(from));
    }
    if let Some(n) = path.strip_prefix("/sim/timings/") {
        if method != Method::GET {
            return method_not_allowed("GET");
        }
        let Ok(n) = n.parse::<u64>() else {
            return not_found(path);
        };
        return match shared.timings(n) {
            Some(t) => json_response(StatusCode::OK, &t.to_json()),
            None => error_response(
                StatusCode::NOT_FOUND,
                &format!(
                    "no timings kept for request {n}: not yet received, not streamed, or older than the last {MAX_TIMED_REQUESTS} streamed requests"
                ),
                "not_found_error",
            ),
        };
    }
    match path {
        // vLLM, TGI, SGLang and llama-server answer GET /health; clients probe it (GuideLLM)
        "/health" if method == Method::GET => {
            json_response(StatusCode::OK, &json!({"status": "ok"}))
        }
        "/health" => method_not_allowed("GET"),
        "/v1/models" if method == Method::GET => models(&cfg.model),
        "/v1/models" => method_not_allowed("GET"),
        "/v1/chat/completions" if method == Method::POST => {
            generate(req, arrival, cfg, shared, Api::Chat).await
        }
        "/v1/completions" if method == Method::POST => {
            generate(req, arrival, cfg, shared, Api::Completions).await
        }
        // the Responses API, at both of the paths llama-server answers it on
        "/v1/responses" | "/responses" if method == Method::POST => {
            generate(req, arrival, cfg, shared, Api::Responses).await
        }
        "/v1/chat/completions" | "/v1/completions" | "/v1/responses" | "/responses" => {
            method_not_allowed("POST")
        }
        _ => not_found(path),
    }
}

/// What the simulator reads from a generation request body.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GenRequest {
    stream: bool,
    include_usage: bool,
    max_tokens: Option<u64>,
    prompt_tokens: u64,
    /// A hash of the prompt's text (every message's content, and `prompt`): the exact-repeat
    /// cache's key (`cached_ttft_ms`).
    prompt_hash: u64,
    /// What the answer is asked to look like (chat: `response_format`, `tools`).
    shape: super::structured::Shape,
    /// The keys of the prompt's full blocks for the block prefix cache (`prefix_cache_block`;
    /// empty when it is off).
    block_keys: Vec<u64>,
}

/// `prefix_block`: the prefix cache's block size, tokens (0 = off: no block keys are computed).
/// Errors: the text of the simulator's HTTP 400 answer (the value sent, hence a `String`).
pub(super) fn parse_gen(body: &[u8], api: Api, prefix_block: u32) -> Result<GenRequest, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    let Value::Object(obj) = v else {
        return Err("request body must be a JSON object".to_string());
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`stream` must be a boolean".to_string()),
    };
    let include_usage = obj
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let keys: &[&str] = match api {
        Api::Chat => &["max_completion_tokens", "max_tokens"],
        Api::Completions => &["max_tokens"],
        Api::Responses => &["max_output_tokens"],
    };
    let mut max_tokens = None;
    for &k in keys {
        match obj.get(k) {
            None | Some(Value::Null) => continue,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => {
                    max_tokens = Some(n);
                    break;
                }
                _ => return Err(format!("`{k}` must be a positive integer")),
            },
        }
    }
    Ok(GenRequest {
        stream,
        include_usage,
        max_tokens,
        prompt_tokens: prompt_tokens(&obj),
        prompt_hash: prompt_hash(&obj),
        shape: if api == Api::Chat {
            super::structured::asked(&obj)
        } else {
            super::structured::Shape::Text
        },
        block_keys: if prefix_block == 0 {
            Vec::new()
        } else {
            block_keys(&prompt_words(&obj), prefix_block as usize)
        },
    })
}

/// Approximate prompt tokens: whitespace-separated words in every message's `content`
/// (strings or `{"text": ...}` parts) of `messages` or of the Responses API's `input` (or
/// `input` itself when it is a string), in `prompt` (a string, strings, or token ids) and in
/// the Responses API's `instructions`.
pub(super) fn prompt_tokens(obj: &Map<String, Value>) -> u64 {
    let messages: u64 = ["messages", "input"]
        .iter()
        .map(|k| match obj.get(*k) {
            Some(Value::Array(ms)) => ms
                .iter()
                .map(|m| m.get("content").map_or(0, count_words))
                .sum(),
            Some(s @ Value::String(_)) => count_words(s),
            _ => 0,
        })
        .sum();
    messages
        + obj.get("prompt").map_or(0, count_words)
        + obj.get("instructions").map_or(0, count_words)
}

/// A hash of the prompt's text: every message's `content` (of `messages` or `input`),
/// `prompt`, `input` when it is a string, and `instructions`, as JSON.
fn prompt_hash(obj: &Map<String, Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for k in ["messages", "input"] {
        match obj.get(k) {
            Some(Value::Array(ms)) => {
                for m in ms {
                    m.get("content").map(Value::to_string).hash(&mut h);
                }
            }
            Some(s @ Value::String(_)) => s.to_string().hash(&mut h),
            _ => {}
        }
    }
    obj.get("prompt").map(Value::to_string).hash(&mut h);
    obj.get("instructions").map(Value::to_string).hash(&mut h);
    h.finish()
}

/// A request's TTFT with prefill time, ms: `drawn` plus `per_token_ms` for each prompt token
/// the prefix cache did not serve (`prompt_tokens - cached`), capped at [`MAX_DELAY_MS`].
pub(super) fn prefill_ttft_ms(
    drawn: f64,
    per_token_ms: f64,
    prompt_tokens: u64,
    cached: u64,
) -> f64 {
    let uncached = prompt_tokens.saturating_sub(cached);
    (drawn + per_token_ms * uncached as f64).min(MAX_DELAY_MS)
}

/// The cached prompt tokens usage reports (`None` = no field): `cache_report`'s count of the
/// `cached` tokens really served. Chat and completions usage carry it only when the simulator
/// models a cache (`prefix_cache_block` or `cached_ttft_ms`) or `cache_report` is not
/// `honest`, so a cacheless simulator answers as before; the Responses API always has it, as
/// OpenAI's (unless `cache_report=none`).
pub(super) fn reported_cached_tokens(
    cfg: &SimConfig,
    api: Api,
    cached: u64,
    prompt_tokens: u64,
) -> Option<u64> {
    let modelled = cfg.prefix_cache_block > 0
        || cfg.cached_ttft_ms.is_some()
        || cfg.cache_report != CacheReport::Honest;
    if api != Api::Responses && !modelled {
        return None;
    }
    cfg.cache_report.reported(cached, prompt_tokens)
}

pub(super) fn count_words(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.split_whitespace().count() as u64,
        Value::Array(items) => items.iter().map(count_words).sum(),
        Value::Object(part) => part.get("text").map_or(0, count_words),
        Value::Number(_) => 1,
        _ => 0,
    }
}

pub(super) async fn generate(
    req: Request<Incoming>,
    arrival: Arrival,
    cfg: &SimConfig,
    shared: &Shared,
    api: Api,
) -> Response<ResBody> {
    let gen_seq = &shared.gen_seq;
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let arrival = arrival.read();
    let gen = match parse_gen(&body, api, cfg.prefix_cache_block) {
        Ok(g) => g,
        Err(msg) => return error_response(StatusCode::BAD_REQUEST, &msg, "invalid_request_error"),
    };
    let seq = gen_seq.fetch_add(1, Ordering::Relaxed);
    let max_output = u64::from(cfg.max_output.min(MAX_OUTPUT_LIMIT));
    let requested = gen.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut tokens = requested.min(max_output) as u32;
    if cfg.vary_output > 0 && tokens > 1 {
        let less = (seq % u64::from(cfg.vary_output)) as u32;
        tokens = tokens.saturating_sub(less).max(1);
    }
    let mut plan = RequestPlan::new(cfg, seq, tokens);
    // the block prefix cache: its leading cached blocks are not prefilled again
    let mut cached_tokens = if gen.block_keys.is_empty() {
        0
    } else {
        let blocks = shared.prefix_reuse(&gen.block_keys) as u64;
        (blocks * u64::from(cfg.prefix_cache_block)).min(gen.prompt_tokens)
    };
    if cfg.ttft_per_token_ms > 0.0 {
        // prefill time grows with the uncached prompt
        let ttft = prefill_ttft_ms(
            plan.ttft_ms,
            cfg.ttft_per_token_ms,
            gen.prompt_tokens,
            cached_tokens,
        );
        plan = plan.with_ttft(ttft);
    }
    // the exact-repeat cache applies first: its TTFT, the whole prompt cached
    if let Some(cached) = cfg.cached_ttft_ms {
        if shared.prompt_cached(gen.prompt_hash) {
            plan = plan.with_ttft(cached);
            cached_tokens = gen.prompt_tokens;
        }
    }
    if let (Some(window), false) = (cfg.prefill_window_ms, plan.fails) {
        let ttft = shared
            .prefill
            .ttft(arrival.into_std(), plan.ttft_ms, window)
            .await;
        plan = plan.with_ttft(ttft);
    }
    // CPU-bound prefill: the TTFT's worth of CPU time on the compute thread; the first token
    // goes when it is done, however long the shared cores made it
    if let (Some(cpu), false) = (&shared.cpu, plan.fails) {
        cpu.prefill(plan.ttft_ms).await;
        plan = plan.with_ttft(arrival.elapsed().as_secs_f64() * 1000.0);
    }
    if plan.fails {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!(
                "simulated server error (fault injection, error_rate={})",
                cfg.error_rate
            ),
            "server_error",
        );
    }
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ctx = ChunkCtx {
        api,
        id: match api {
            Api::Chat => format!("chatcmpl-sim-{seq}"),
            Api::Completions => format!("cmpl-sim-{seq}"),
            Api::Responses => format!("resp_sim-{seq}"),
        },
        created,
        model: cfg.model.clone(),
        prompt_tokens: gen.prompt_tokens,
        completion_tokens: u64::from(tokens),
        // The model "ended" before max_tokens only when max_output capped it. A Responses
        // request that set no max_output_tokens asked no limit: its default length is the
        // model ending on its own (response.completed), not an incomplete response.
        finish_reason: if u64::from(tokens) < requested
            || (api == Api::Responses && gen.max_tokens.is_none())
        {
            "stop"
        } else {
            "length"
        },
        cached_tokens: reported_cached_tokens(cfg, api, cached_tokens, gen.prompt_tokens),
        diverge_from: super::diverge::diverge_from(cfg, seq),
        drafts: super::spec::drafts(cfg.draft_n, cfg.accept_rate, cfg.seed, seq, tokens),
        shape: super::structured::drawn(gen.shape.clone(), cfg.malformed, cfg.seed, seq),
    };
    if gen.stream {
        let script = SimScript {
            ctx,
            plan,
            arrival,
            include_usage: gen.include_usage,
            burst: cfg.burst.max(1),
            phase: Phase::Role,
            index: 0,
            sequence: 0,
            finish_from: 0,
            last_at: arrival,
            last_kind: EventKind::Role,
        };
        let record = shared
            .timings
            .lock()
            .ok()
            .map(|mut log| log.start(seq, arrival, tokens));
        let mut body = TimedBody::new(script, arrival);
        body.record = record;
        let mut resp = Response::new(body.boxed_unsync());
        let h = resp.headers_mut();
        h.insert(
            HeaderName::from_static(SIM_REQUEST_HEADER),
            HeaderValue::from(seq),
        );
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        );
        resp
    } else {
        let total_ms = plan.total_ms();
        tokio::time::sleep_until(at(arrival, ms(total_ms))).await;
        json_response(StatusCode::OK, &ctx.full_response())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Role,
    Tokens,
    Finish,
    Usage,
    Done,
    End,
}

/// The event sequence of one simulated stream, generated lazily (a long output is never
/// materialised).
pub(super) struct SimScript {
    ctx: ChunkCtx,
    plan: RequestPlan,
    arrival: Instant,
    include_usage: bool,
    /// Tokens per event after the first.
    burst: u32,
    phase: Phase,
    index: u32,
    /// Events sent so far (the Responses API's `sequence_number` of the next one).
    sequence: u64,
    /// `sequence` when the last token had been sent (the Responses API's events after it).
    finish_from: u64,
    last_at: Instant,
    /// The kind of the step `next_step` returned last.
    last_kind: EventKind,
}

impl SimScript {
    /// The next token-bearing event: (send offset ms = the due time of its last token, number
    /// of its first token). The first token comes alone, later events carry up to `burst`.
    fn next_event(&mut self) -> Option<(f64, u32)> {
        let k = if self.index == 0 { 1 } else { self.burst };
        let from = self.index + 1;
        let mut last = None;
        for _ in 0..k {
            match self.plan.next() {
                Some(off) => {
                    self.index += 1;
                    last = Some(off);
                }
                None => break,
            }
        }
        last.map(|off| (off, from))
    }
}

impl Script for SimScript {
    fn last_kind(&self) -> EventKind {
        self.last_kind
    }

    fn next_step(&mut self) -> Step {
        let step = self.step();
        if matches!(step, Step::Data(..)) {
            self.sequence += 1;
        }
        step
    }
}

impl SimScript {
    /// The next step. A chat stream: the role chunk, token chunks, the finish chunk, the usage
    /// chunk (when asked for) and `[DONE]`; completions: the same without the role chunk. The
    /// Responses API: the 4 events before the answer (recorded as `Role`), the deltas, 3
    /// `*.done` events (`Finish`) and `response.completed` or `response.incomplete` with usage
    /// (`Done`); no `[DONE]`. Events without a token go at the request's arrival (before the
    /// first token) or with the last token (after it).
    fn step(&mut self) -> Step {
        loop {
            match self.phase {
                Phase::Role if self.ctx.api == Api::Responses => {
                    if self.sequence < RESPONSES_PREAMBLE {
                        if let Some(ev) = self.ctx.responses_event(self.sequence, 0) {
                            self.last_kind = EventKind::Role;
                            return Step::Data(self.arrival, ev);
                        }
                    }
                    self.phase = Phase::Tokens;
                }
                Phase::Role => {
                    self.phase = Phase::Tokens;
                    if self.ctx.api == Api::Chat {
                        self.last_kind = EventKind::Role;
                        return Step::Data(self.arrival, sse(&self.ctx.role_chunk()));
                    }
                }
                Phase::Tokens => match self.next_event() {
                    Some((off, from)) => {
                        self.last_at = at(self.arrival, ms(off));
                        self.last_kind = EventKind::Token;
                        let event = self.ctx.token_event(from, self.index, self.sequence);
                        return Step::Data(self.last_at, event);
                    }
                    None => {
                        if self.index == 0 {
                            self.last_at = at(self.arrival, ms(self.plan.ttft_ms));
                        }
                        self.phase = Phase::Finish;
                        self.finish_from = self.sequence;
                    }
                },
                Phase::Finish if self.ctx.api == Api::Responses => {
                    let deltas = self.finish_from.saturating_sub(RESPONSES_PREAMBLE);
                    match self.ctx.responses_event(self.sequence, deltas) {
                        Some(ev) => {
                            // the last one, response.completed / response.incomplete, ends it
                            self.last_kind = if self.sequence - self.finish_from < 3 {
                                EventKind::Finish
                            } else {
                                EventKind::Done
                            };
                            return Step::Data(self.last_at, ev);
                        }
                        None => self.phase = Phase::End,
                    }
                }
                Phase::Finish => {
                    self.phase = Phase::Usage;
                    self.last_kind = EventKind::Finish;
                    let finish = self.ctx.finish_chunk();
                    // llama.cpp's timings ride the last chunk: the usage chunk, or this one
                    let finish = if self.include_usage {
                        finish
                    } else {
                        self.ctx.with_timings(finish)
                    };
                    return Step::Data(self.last_at, sse(&finish));
                }
                Phase::Usage => {
                    self.phase = Phase::Done;
                    if self.include_usage {
                        self.last_kind = EventKind::Usage;
                        let usage = self.ctx.with_timings(self.ctx.usage_chunk());
                        return Step::Data(self.last_at, sse(&usage));
                    }
                }
                Phase::Done => {
                    self.phase = Phase::End;
                    self.last_kind = EventKind::Done;
                    return Step::Data(self.last_at, Bytes::from_static(b"data: [DONE]\n\n"));
                }
                Phase::End => return Step::End(self.last_at),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_gen_fields() {
        let g = parse_gen(
            br#"{"model":"x","messages":[{"role":"user","content":"hello big world"},{"role":"user","content":[{"type":"text","text":"two words"}]}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0,"seed":1}"#,
            Api::Chat,
            0,
        )
        .unwrap();
        assert_eq!(
            (g.stream, g.include_usage, g.max_tokens, g.prompt_tokens),
            (true, true, Some(5), 5)
        );
        // the prefix cache's key: the prompt's text, not the other fields
        let again = parse_gen(
            br#"{"model":"y","messages":[{"role":"user","content":"hello big world"},{"role":"user","content":[{"type":"text","text":"two words"}]}],"max_tokens":9,"stream":false}"#,
            Api::Chat,
            0,
        )
        .unwrap();
        assert_eq!(g.prompt_hash, again.prompt_hash);
        let other = parse_gen(
            br#"{"model":"x","messages":[{"role":"user","content":"[perfgate nonce 1]\nhello big world"}],"max_tokens":5}"#,
            Api::Chat,
            0,
        )
        .unwrap();
        assert_ne!(g.prompt_hash, other.prompt_hash);
        assert!(g.block_keys.is_empty(), "no prefix cache: no block keys");
        // with a prefix cache of 2-word blocks: 5 words, 2 full blocks
        let b = parse_gen(
            br#"{"messages":[{"role":"user","content":"hello big world"},{"role":"user","content":[{"type":"text","text":"two words"}]}]}"#,
            Api::Chat,
            2,
        )
        .unwrap();
        assert_eq!((b.prompt_tokens, b.block_keys.len()), (5, 2));
        let g = parse_gen(
            br#"{"max_completion_tokens":3,"max_tokens":9}"#,
            Api::Chat,
            0,
        )
        .unwrap();
        assert_eq!(g.max_tokens, Some(3));
        let g = parse_gen(
            br#"{"prompt":"a b c","max_tokens":null}"#,
            Api::Completions,
            0,
        )
        .unwrap();
        assert_eq!((g.max_tokens, g.prompt_tokens, g.stream), (None, 3, false));
        let g = parse_gen(br#"{"prompt":[1,2,3,4]}"#, Api::Completions, 0).unwrap();
        assert_eq!(g.prompt_tokens, 4);
        // the Responses API: input messages or a string, instructions, max_output_tokens
        let g = parse_gen(
            br#"{"input":[{"role":"user","content":"hello big world"}],"instructions":"be brief","max_output_tokens":7,"max_tokens":99,"stream":true}"#,
            Api::Responses,
            0,
        )
        .unwrap();
        assert_eq!(
            (g.max_tokens, g.prompt_tokens, g.stream),
            (Some(7), 5, true)
        );
        let s = parse_gen(
            br#"{"input":"hello big world","instructions":"be brief"}"#,
            Api::Responses,
            0,
        )
        .unwrap();
        assert_eq!((s.max_tokens, s.prompt_tokens), (None, 5));
        assert_ne!(g.prompt_hash, s.prompt_hash);
        assert!(parse_gen(br#"{"input":"x","max_output_tokens":0}"#, Api::Responses, 0).is_err());
        for bad in [
            &b"{"[..],
            b"[]",
            b"\"x\"",
            br#"{"stream":"yes"}"#,
            br#"{"max_tokens":0}"#,
            br#"{"max_tokens":-1}"#,
            br#"{"max_tokens":2.5}"#,
            b"\xff\xfe",
        ] {
            assert!(parse_gen(bad, Api::Chat, 0).is_err());
        }
    }

    /// The TTFT formula: drawn + per-token x uncached tokens. 0.5 ms per token, 1000 words: 960
    /// cached is 40 uncached, 20 ms; cold, 500 ms.
    #[test]
    fn prefill_charges_only_uncached_tokens() {
        assert_eq!(prefill_ttft_ms(30.0, 0.5, 1000, 960), 50.0);
        assert_eq!(prefill_ttft_ms(30.0, 0.5, 1000, 0), 530.0);
        assert_eq!(prefill_ttft_ms(30.0, 0.5, 1000, 1000), 30.0);
        assert_eq!(prefill_ttft_ms(30.0, 0.5, 10, 20), 30.0, "never negative");
        assert_eq!(prefill_ttft_ms(10.0, 1000.0, 1 << 40, 0), MAX_DELAY_MS);
    }

    #[test]
    fn reported_cached_tokens_by_setting() {
        let cfg = |q: &str| SimConfig::from_query(q).unwrap();
        // no cache modelled: chat and completions keep their usage as before, Responses says 0
        let plain = cfg("");
        assert_eq!(reported_cached_tokens(&plain, Api::Chat, 0, 100), None);
        assert_eq!(
            reported_cached_tokens(&plain, Api::Completions, 0, 100),
            None
        );
        assert_eq!(
            reported_cached_tokens(&plain, Api::Responses, 0, 100),
            Some(0)
        );
        for api in [Api::Chat, Api::Completions, Api::Responses] {
            let r = |q: &str| reported_cached_tokens(&cfg(q), api, 64, 100);
            assert_eq!(r("prefix_cache_block=16"), Some(64));
            assert_eq!(r("cached_ttft_ms=5"), Some(64));
            assert_eq!(r("prefix_cache_block=16&cache_report=honest"), Some(64));
            assert_eq!(r("prefix_cache_block=16&cache_report=none"), None);
            assert_eq!(r("prefix_cache_block=16&cache_report=all"), Some(100));
            assert_eq!(r("prefix_cache_block=16&cache_report=zero"), Some(0));
            // a misreport is injected even without a cache
            assert_eq!(r("cache_report=all"), Some(100));
            assert_eq!(r("cache_report=zero"), Some(0));
        }
    }
}
