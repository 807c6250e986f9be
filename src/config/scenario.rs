//! Validated scenario types: the one place raw YAML becomes checked values.
//!
//! Nothing downstream re-validates: a [`Scenario`] always has `samples >= 20`, tolerances in
//! range, a normalised endpoint URL, a resolved API key (kept out of `Debug`), and a fingerprint.
//!
//! One file per section of a scenario, each with its validated type and how it is built:
//! `endpoint` (with `base_url`, the URL's normalisation), `request`, `load`, `gate` (with
//! `objective`, `gate.slo`); `name` is the scenario's name, `quantile` and
//! [`super::metric`] the typed values the gate is keyed by. This file builds a whole
//! [`Scenario`] from them and fingerprints it.

mod base_url;
mod cold_start;
mod endpoint;
mod gate;
mod load;
mod name;
mod objective;
pub(in crate::config) mod quantile;
mod request;

pub use super::common::Secret;
pub use super::metric::Metric;
pub use base_url::normalise_base_url;
pub use cold_start::{ColdStartGate, COLD_START_FAIL, COLD_START_MIN_DELTA_MS};
pub use endpoint::{Endpoint, Header, Target};
pub use gate::{default_band, Band, GateSpec, ITL_BAND};
pub use load::{
    LoadShare, LoadSpec, Ramp, DEFAULT_LOAD_SEED, MAX_RATE, MIN_RATE, MIN_SAMPLES,
    OPEN_LOOP_CONCURRENCY,
};
pub use name::{check_name, ScenarioName};
pub use objective::Objective;
pub use quantile::Quantile;
pub use request::{CachePolicy, MaxTokensField, RequestSpec};

use super::common::short_hash;
pub use super::common::BuildCtx;
use super::file::RawScenario;
use crate::config::common::{bail, ensure, Invalid};
use endpoint::build_endpoint;
use gate::build_gate;
use load::build_load;
use request::build_request;

pub use crate::api::Api;

/// One validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Unique name; names `baselines/<name>.json`.
    pub name: ScenarioName,
    /// Free text.
    pub description: Option<String>,
    /// The file it came from, and the line of its entry.
    pub source: String,
    /// Endpoint.
    pub endpoint: Endpoint,
    /// Request.
    pub request: RequestSpec,
    /// Load.
    pub load: LoadSpec,
    /// Gate.
    pub gate: GateSpec,
    /// Hash of everything that changes what is measured (docs/design.md "Scenarios").
    pub fingerprint: String,
    /// The server perfgate starts for this scenario (`server:`), if any. Not part of the
    /// fingerprint: how the server is started is not what is measured.
    pub server: Option<super::server::ServerSpec>,
    /// `ArmsOnly` when `server:` holds only `perfgate ab` arm blocks (`base:` / `candidate:`)
    /// and no `command:`: read as written, it starts no server, so `check` and `bless` refuse it.
    pub written_server: super::arm::WrittenServer,
    /// The scenario as written, when `load.concurrency` or `load.rate` listed levels and this
    /// is one of them (named `<family>-c<N>` / `<family>-r<R>`).
    pub family: Option<String>,
}

impl Scenario {
    /// What `validate` (and each report's notes) warns about: the endpoint's, the load's
    /// ([`LoadSpec::warnings`]) and the request's against the load ([`request_warnings`]).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.endpoint.warnings.clone();
        out.extend(self.load.warnings());
        out.extend(request_warnings(&self.request, &self.load));
        out
    }
}

/// A prompt set too small for the run: with a prefix cache that reuses prompts, its repeats (and
/// the warmup's prompts measured later) are served from the cache; without, only a mix whose
/// entries are sent unequally often is warned about (issue 46: every set under 20 entries was).
/// A conversation run with fewer conversations than streams (the others stay idle).
fn request_warnings(r: &RequestSpec, l: &LoadSpec) -> Vec<String> {
    let mut out = Vec::new();
    let measured = l.looks().last().copied().unwrap_or(0);
    if let Some(ps) = &r.prompt_set {
        // the warmup's prompts matter only to a prefix cache that reuses them
        let warmup = if r.prefix_cache_reuses() { l.warmup } else { 0 };
        let sent = warmup as usize + measured;
        let n = ps.entries.max(1);
        let (times, more) = (measured / n, measured % n);
        if !r.prefix_cache_reuses() && ps.entries < sent && more > 0 {
            // nothing serves a repeat from a cache: only an uneven mix is worth a warning
            out.push(format!(
                "request.prompt_set: {n} entries for {measured} measured requests: {more} of them are sent {} times, the others {times} (measured request g sends entry g mod {n}), so they weigh unequally in the percentiles; samples: {} sends each equally often, or a set of at least {sent} entries sends each once",
                times + 1,
                (times + 1) * n,
            ));
        } else if r.prefix_cache_reuses() && ps.entries < sent {
            let (requests, cached) = match warmup {
                0 => (format!("{measured} measured requests"), ""),
                w => (
                    format!("{w} warmup + {measured} measured requests"),
                    ", and the warmup sends prompts measured later",
                ),
            };
            out.push(format!(
                "request.prompt_set: {n} entries for {requests}: prompts repeat (measured request g sends entry g mod {n}){cached}, which a prefix cache then serves; a set of at least {sent} entries sends each once, or `request.cache: cold` keeps a repeat from being served from the cache",
            ));
        }
    }
    if let Some(c) = &r.conversation {
        let conversations = c.whole(measured).0;
        if conversations < l.concurrency as usize && c.file.as_ref().is_some_and(|f| f.whole) {
            out.push(format!(
                "load.concurrency {} with {conversations} sessions: only {conversations} streams are busy; use more samples (a session per stream) or a lower concurrency",
                l.concurrency,
            ));
        } else if conversations < l.concurrency as usize {
            out.push(format!(
                "load.concurrency {} with {conversations} conversations of {} turns: only {conversations} streams are busy; use samples >= {} (a conversation per stream) or a lower concurrency",
                l.concurrency,
                c.turns,
                l.concurrency * c.turns
            ));
        }
    }
    out
}

/// What is wrong with one scenario's values: the scenario (by its name, when it has one) and
/// the problem, which names the key and says what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", match scenario { Some(n) => format!("scenario `{n}`: {problem}"), None => problem.to_string() })]
pub struct ScenarioError {
    /// The scenario's `name:` (`None`: it has none, or the name itself is wrong).
    pub scenario: Option<String>,
    /// What was wrong, starting with the key (`endpoint.base_url: ...`).
    pub problem: Invalid,
}

impl ScenarioError {
    /// A problem in the scenario named `name`.
    pub fn named(name: &str, problem: impl Into<Invalid>) -> Self {
        ScenarioError {
            scenario: Some(name.to_string()),
            problem: problem.into(),
        }
    }

    /// The line of the scenario file the problem is at, when it is known: else the scenario's.
    pub fn line(&self) -> Option<usize> {
        self.problem.line()
    }

    /// A problem before the scenario has a usable name.
    pub fn unnamed(problem: impl Into<Invalid>) -> Self {
        ScenarioError {
            scenario: None,
            problem: problem.into(),
        }
    }
}

/// Validates one merged scenario (defaults already overlaid).
///
/// Errors: the scenario (by name, once it has a valid one) and one problem naming the key and
/// what to write instead ([`ScenarioError`]). The helpers below compose that problem as text,
/// from typed value errors ([`super::values::ValueError`]) and the key they belong to: nothing
/// branches on which key failed, and the text is the message.
pub fn build(raw: RawScenario, ctx: &BuildCtx<'_>) -> Result<Scenario, ScenarioError> {
    let name = raw
        .name
        .clone()
        .ok_or_else(|| ScenarioError::unnamed("scenario has no `name:`"))?;
    let name = ScenarioName::new(name).map_err(ScenarioError::unnamed)?;
    build_named(raw, name.clone(), ctx).map_err(|problem| ScenarioError::named(&name, problem))
}

/// [`build`] once the scenario has its `name`: one validation pass over the sections, each
/// built by its own builder, then the rules between sections.
fn build_named(
    raw: RawScenario,
    name: ScenarioName,
    ctx: &BuildCtx<'_>,
) -> Result<Scenario, Invalid> {
    let endpoint = build_endpoint(&raw.endpoint, ctx)?;
    let traced = raw.load.trace.is_some();
    let mut request = build_request(&raw.request, endpoint.api, &ctx.dir, traced)?;
    let load = load::with_trace(build_load(&raw.load)?, &raw.load, &ctx.dir)?;
    if let Some(t) = &load.trace {
        // each request asks its entry's output length; max_tokens is the longest of them
        let needed = load.looks().last().copied().unwrap_or(0);
        request.max_tokens = t.max_output(needed);
    }
    if let Some(c) = &request.conversation {
        conversation_load(c, &load)?;
        if let Some(line) = c.tools_line() {
            ensure!(
                endpoint.api == crate::api::Api::OpenaiChat,
                "request.conversation.file: its line {line} has `tools` (OpenAI chat tool definitions, sent in the turn's body as AIPerf does), which endpoint.api {} does not take in that shape; use api openai-chat, or remove the lines' `tools`",
                endpoint.api.as_str()
            );
        }
    }
    let gate = build_gate(&raw.gate)?;
    let least = request.min_output_tokens();
    ensure!(
        least >= 2 || !gate.metrics.contains(&Metric::Tpot) || load.trace.is_some(),
        "TPOT is undefined for max_tokens {least} (it needs 2 or more output tokens); raise max_tokens (or request.generate.output_tokens.min) or set gate.metrics without tpot"
    );
    let fingerprint = fingerprint(&endpoint, &request, &load);
    let server = match (&raw.server, &endpoint.target) {
        (None, _) => None,
        (Some(rs), Target::Http { base_url }) => {
            let mut s = super::server::build(rs, base_url, &endpoint.secrets(), ctx.env)?;
            // a gated start is timed to within one readiness probe (docs/gate.md "Cold start")
            s.fine_probe = gate.cold_start.is_some();
            Some(s)
        }
        (Some(_), Target::Sim(_)) => bail!("server: the built-in simulator (sim://) needs no server; give an http:// base_url the started server listens on"),
    };
    Ok(Scenario {
        name,
        description: raw.description,
        source: ctx.at.clone(),
        endpoint,
        request,
        load,
        gate,
        fingerprint,
        server,
        written_server: super::arm::WrittenServer::Complete,
        family: None,
    })
}

/// What a conversation scenario's load must be: a closed loop of whole conversations in one
/// look (each stream runs its conversations turn after turn).
fn conversation_load(
    c: &super::conversation::ConversationSpec,
    l: &LoadSpec,
) -> Result<(), Invalid> {
    ensure!(l.rate.is_none() && l.trace.is_none(), "request.conversation runs a closed loop (each stream sends its conversations turn after turn, with the think time between): leave out load.rate and load.trace");
    ensure!(
        l.max_samples.is_none(),
        "request.conversation runs one look of whole conversations: leave out load.max_samples"
    );
    // the longest prompt (the last turn's) within what a synthetic prompt may be (a file's
    // conversations are bounded by the file's size)
    let longest = if c.file.is_some() {
        0
    } else {
        u64::from(c.system_tokens)
            + u64::from(c.turns) * u64::from(c.user_tokens)
            + u64::from(c.turns - 1) * u64::from(c.answer_tokens)
    };
    let most = u64::from(crate::synthetic_prompt::MAX_PROMPT_TOKENS);
    ensure!(
        longest <= most,
        "request.conversation: the last turn's prompt would be about {longest} tokens (system {} + {} turns x user {} + {} kept answers x {}): at most {most}; shorten the turns or the messages",
        c.system_tokens,
        c.turns,
        c.user_tokens,
        c.turns - 1,
        c.answer_tokens
    );
    // AIPerf sessions: their last turns' prompts, from the file's lengths
    let longest_session = c.longest_session_prompt();
    let sessions = longest_session.is_some();
    if let Some((tokens, id)) = longest_session {
        ensure!(
            tokens <= most,
            "request.conversation.file: session `{id}`'s turn {} would send a prompt of about {tokens} tokens (its turns' input_length and the answers kept for the turns before, output_length each): at most {most}; lower request.conversation.turns or shorten the session",
            c.turns
        );
    }
    // the think time a stream spends, bounded as a trace replay's window is
    // (a session file's: the sum of its measured turns' delays)
    let per_stream = f64::from(l.samples) / f64::from(l.concurrency.max(1));
    let think_h = match sessions {
        true => {
            let all: f64 = (0..l.samples as usize)
                .map(|g| c.think_ms(crate::config::common::Slot::Measured(g)))
                .sum();
            all / f64::from(l.concurrency.max(1)) / 3_600_000.0
        }
        false => {
            per_stream * c.think_time_ms * f64::from(c.turns - 1) / f64::from(c.turns) / 3_600_000.0
        }
    };
    let what = match sessions {
        true => "request.conversation.file's delays",
        false => "request.conversation.think_time",
    };
    ensure!(
        think_h <= 24.0,
        "{what}: each stream would think for {think_h:.1} h over its {per_stream:.0} requests: at most 24 h; shorten the think time or the samples, or raise the concurrency"
    );
    // (the warmup may end inside a conversation: it is not measured)
    if c.file.as_ref().is_some_and(|f| f.whole) {
        let n = l.samples as usize;
        if let (whole, Some((down, up))) = c.whole(n) {
            let down = match down {
                0 => String::new(),
                d => format!(" or {d} ({whole} sessions)"),
            };
            bail!("load.samples is {n}, not a whole number of sessions (each replayed whole, in file order, one after the other): use {up} ({} sessions){down}", whole + 1);
        }
        return Ok(());
    }
    let (n, t) = (l.samples, c.turns);
    let up = n.div_ceil(t) * t;
    ensure!(
        n % t == 0,
        "load.samples is {n}, not a whole number of {t}-turn conversations: use {up} ({} conversations){}",
        up / t,
        if n > t { format!(" or {}", n / t * t) } else { String::new() }
    );
    Ok(())
}

/// The scenario fingerprint (docs/design.md "Scenarios"): a hash of endpoint URL, api, model, request and load
/// shape (concurrency). `samples`/`warmup` change precision, not what is measured, so they are
/// excluded; for `sim://` endpoints only the model enters, since the simulator's latency
/// parameters play the part of the server under test.
pub fn fingerprint(e: &Endpoint, r: &RequestSpec, l: &LoadSpec) -> String {
    let url = match &e.target {
        Target::Http { base_url } => base_url.clone(),
        Target::Sim(_) => "sim://".to_string(),
    };
    let v = serde_json::json!({
        "url": url,
        "api": e.api.as_str(),
        "model": e.model,
        "request": r,
        "concurrency": l.concurrency,
    });
    // Open loop: the arrival rate is part of the load shape. Added only when set, so closed-loop
    // fingerprints (and their committed baselines) are unchanged.
    let mut v = v;
    if let Some(rate) = l.rate {
        v["rate"] = serde_json::json!(rate);
    }
    // A steady-state closed loop at concurrency > 1 measures other requests than the start-up
    // burst did before it (issue 30): its baselines are new ones, so a baseline blessed with the
    // burst is stale and says so instead of being compared. `ramp: burst` keeps the old
    // fingerprint, as it keeps the old measurement.
    if l.steady() {
        v["ramp"] = serde_json::json!(l.ramp.as_str());
    }
    // A trace replay: its file's hash and how it is replayed (added only when set).
    if let Some(t) = &l.trace {
        v["trace"] = serde_json::json!(t);
    }
    short_hash(&v.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn tools_of_a_session_line_need_the_chat_api() {
        let y = |api: &str| {
            format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: m, api: {api}}}\n    request: {{max_tokens: 4, conversation: {{file: tests/fixtures/traces/aiperf_messages_sessions.jsonl}}}}\n    load: {{samples: 20}}\n")
        };
        assert!(crate::config::parse_str(&y("openai-chat"), "t.yaml", &|_| None).is_ok());
        let e = crate::config::parse_str(&y("anthropic-messages"), "t.yaml", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("request.conversation.file: its line 1 has `tools`")
                && e.contains("endpoint.api anthropic-messages does not take"),
            "{e}"
        );
    }

    #[test]
    fn fewer_conversations_than_streams_is_warned() {
        let y = "scenarios:\n  - name: a\n    endpoint: {base_url: 'sim://'}\n    request: {max_tokens: 4, conversation: {turns: 4}}\n    load: {concurrency: 8, samples: 24}\n";
        let sc = crate::config::parse_str(y, "t.yaml", &|_| None)
            .unwrap()
            .remove(0);
        let w = sc.warnings();
        assert!(
            w.iter().any(|w| w == "load.concurrency 8 with 6 conversations of 4 turns: only 6 streams are busy; use samples >= 32 (a conversation per stream) or a lower concurrency"),
            "{w:?}"
        );
    }

    /// AIPerf sessions replayed whole: too few sessions for the streams is warned; a last
    /// prompt beyond the synthetic bound and delays beyond 24 h a stream are refused.
    #[test]
    fn aiperf_sessions_are_bounded_and_warned() {
        let dir = tempfile::tempdir().unwrap();
        let at = |f: &str, load: &str| {
            format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://'}}\n    request: {{max_tokens: 4, conversation: {{file: {}}}}}\n    load: {load}\n", dir.path().join(f).display())
        };
        let parse = |y: &str| crate::config::parse_str(y, "t.yaml", &|_| None);
        std::fs::copy(
            "tests/fixtures/traces/aiperf_sessions.jsonl",
            dir.path().join("s.jsonl"),
        )
        .unwrap();
        // 24 requests: 4 passes over the 3 sessions, 12 sessions for 16 streams
        let sc = parse(&at("s.jsonl", "{concurrency: 16, samples: 24}"))
            .unwrap()
            .remove(0);
        let w = sc.warnings();
        assert!(
            w.iter().any(|w| w == "load.concurrency 16 with 12 sessions: only 12 streams are busy; use more samples (a session per stream) or a lower concurrency"),
            "{w:?}"
        );
        // two turns of 200000 tokens and a kept answer of 1: 400001 > 262144
        std::fs::write(
            dir.path().join("big.jsonl"),
            "{\"session_id\": \"x\", \"input_length\": 200000, \"output_length\": 1}\n{\"session_id\": \"x\", \"delay\": 1, \"input_length\": 200000, \"output_length\": 1}\n",
        )
        .unwrap();
        let e = parse(&at("big.jsonl", "{samples: 20}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("session `x`'s turn 2 would send a prompt of about 400001 tokens"),
            "{e}"
        );
        // 1500 sessions of a 60 s delay on one stream: 25 h
        std::fs::write(
            dir.path().join("slow.jsonl"),
            "{\"session_id\": \"x\", \"input_length\": 5, \"output_length\": 1}\n{\"session_id\": \"x\", \"delay\": 60000, \"input_length\": 5, \"output_length\": 1}\n",
        )
        .unwrap();
        let e = parse(&at("slow.jsonl", "{concurrency: 1, samples: 3000}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("request.conversation.file's delays: each stream would think for 25.0 h over its 3000 requests: at most 24 h"),
            "{e}"
        );
    }

    #[test]
    fn rate_enters_the_fingerprint_only_when_set() {
        let fp = |load: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi, max_tokens: 4}}\n    load: {load}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).unwrap()[0]
                .fingerprint
                .clone()
        };
        let closed = fp("{concurrency: 4}");
        assert_eq!(closed, fp("{concurrency: 4, seed: 3}"));
        let open = fp("{concurrency: 4, rate: 10}");
        assert_ne!(closed, open);
        // the steady state at concurrency > 1 is a new measurement; the burst is the old one
        assert_ne!(closed, fp("{concurrency: 4, ramp: burst}"));
        assert_eq!(fp("{concurrency: 1}"), fp("{concurrency: 1, ramp: burst}"));
        assert_ne!(open, fp("{concurrency: 4, rate: 20}"));
    }
}
