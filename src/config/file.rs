//! The serde shape of a scenario file (`scenarios/*.yaml`), exactly as written by the user.
//!
//! Every struct rejects unknown keys; every field is optional here so that `defaults:` and each
//! scenario can be merged field by field. Validation into checked types happens in
//! [`super::scenario`], once.

use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

/// A whole file: `defaults:` plus a list of `scenarios:`, and any top-level `x-` keys.
#[derive(Debug, Default, Deserialize)]
pub struct RawFile {
    /// Values every scenario inherits unless it overrides them.
    #[serde(default)]
    pub defaults: RawSections,
    /// The scenarios, in order.
    #[serde(default)]
    pub scenarios: Vec<Spanned<RawScenario>>,
    /// Every other top-level key. Only `x-` keys are allowed (and ignored: a place for YAML
    /// anchors, as in docker-compose files); [`super::parse_str`] refuses the rest.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde::de::IgnoredAny>,
}

/// Declares a section of a scenario file: a struct whose keys are all optional (so `defaults:`
/// and each scenario merge field by field) and unknown keys refused. With `: over` (or another
/// name) it also writes that method, the overlay of `defaults:` (`base`) by the scenario's
/// section, each field by its rule after `=`: `or` (the default: the scenario's value when set,
/// else the default's), `keys` (maps merge key by key, the scenario's keys winning), `own` (the
/// scenario's only), `none` (neither inherited nor kept).
macro_rules! section {
    (@rule) => { or };
    (@rule $rule:ident) => { $rule };
    (@over $ty:ident { $($f:ident $(= $rule:ident)?),+ }) => {};
    (@over $ty:ident $over:ident { $($f:ident $(= $rule:ident)?),+ }) => {
        impl $ty {
            /// Field-wise overlay: `self`'s values win over `base`'s, by each field's rule.
            pub fn $over(self, base: &$ty) -> $ty {
                $ty { $($f: section!(@rule $($rule)?)(self.$f, &base.$f)),+ }
            }
        }
    };
    ($(#[$m:meta])* $ty:ident $(: $over:ident)? {
        $($(#[$fm:meta])* $f:ident: $t:ty $(= $rule:ident)?,)+
    }) => {
        $(#[$m])*
        #[derive(Debug, Default, Clone, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $ty {
            $($(#[$fm])* pub $f: Option<$t>,)+
        }
        section!(@over $ty $($over)? { $($f $(= $rule)?),+ });
    };
}

fn or<T: Clone>(mine: Option<T>, base: &Option<T>) -> Option<T> {
    mine.or_else(|| base.clone())
}

fn keys<M, K, V>(mine: Option<M>, base: &Option<M>) -> Option<M>
where
    M: Clone + Extend<(K, V)> + IntoIterator<Item = (K, V)>,
{
    match (mine, base) {
        (Some(m), Some(b)) => {
            let mut all = b.clone();
            all.extend(m);
            Some(all)
        }
        (m, b) => or(m, b),
    }
}

fn own<T>(mine: Option<T>, _: &Option<T>) -> Option<T> {
    mine
}

fn none<T>(_: Option<T>, _: &Option<T>) -> Option<T> {
    None
}

/// The sections shared by `defaults:` and a scenario.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSections {
    /// Where and how to connect.
    pub endpoint: RawEndpoint,
    /// What to send.
    pub request: RawRequest,
    /// How many requests, how concurrently.
    pub load: RawLoad,
    /// How to compare with the baseline.
    pub gate: RawGate,
    /// The server under test, started by perfgate (src/server/).
    pub server: Option<RawServer>,
}

/// One scenario: a name plus the same sections as `defaults:`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawScenario {
    /// Unique, `[A-Za-z0-9._-]`, 1..=64 chars; names the baseline file.
    pub name: Option<String>,
    /// Free text shown in reports.
    pub description: Option<String>,
    pub endpoint: RawEndpoint,
    pub request: RawRequest,
    pub load: RawLoad,
    pub gate: RawGate,
    /// Replaces `defaults.server` as a whole (one block is one server process).
    pub server: Option<RawServer>,
}

section! {
    /// `server:` keys: a server process perfgate starts, waits for and stops. Scenarios with the
    /// same block share one process. `over`: an arm block over the shared block (its
    /// `base_url` is its own; arms are not inherited).
    RawServer: over {
        /// argv words; `${ENV}` expanded in each.
        command: Vec<String>,
        /// Extra environment variables (values may use `${ENV}`; never printed).
        env: BTreeMap<String, String>,
        /// Working directory (relative to perfgate's).
        cwd: String,
        /// How readiness is known (default: `GET <base_url>/models` answers 200).
        ready: RawReady,
        ready_timeout: String,
        stop_timeout: String,
        /// File for the server's stdout and stderr (default: a new file in the temp directory).
        log: String,
        /// Log lines shown when something goes wrong (default 20).
        log_tail: u32,
        /// Prometheus text endpoint scraped before and after each scenario (default
        /// `<origin>/metrics`; `false` turns scraping off).
        metrics: RawMetrics,
        /// Only inside `base:` / `candidate:`: the arm's endpoint (its own port), instead of
        /// `endpoint.base_url`.
        base_url: String = own,
        /// `perfgate ab`: the base arm's server; its keys win over this block's.
        base: Box<RawServer> = none,
        /// `perfgate ab`: the candidate arm's server; its keys win over this block's.
        candidate: Box<RawServer> = none,
    }
}

section! {
    /// `server.ready`: `{url: ...}` (2xx) or `{log: text}` (a log line containing the text).
    RawReady {
        url: String,
        log: String,
    }
}

/// `server.metrics`: a URL, or `false`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RawMetrics {
    On(bool),
    Url(String),
}

section! {
    /// `endpoint:` keys.
    RawEndpoint: over {
        base_url: String,
        api: String,
        model: String,
        api_key_env: String,
        headers: BTreeMap<String, String> = keys,
        connect_timeout: String,
        first_token_timeout: String,
        idle_timeout: String,
        request_timeout: String,
        include_usage: bool,
        /// Poll `<base_url>/models` until the endpoint is ready, for up to this long.
        wait_ready: String,
    }
}

/// One chat message.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMessage {
    pub role: String,
    pub content: String,
}

impl RawMessage {
    /// The roles a message may have.
    pub const ROLES: [&'static str; 4] = ["system", "user", "assistant", "developer"];

    /// A message of `role`.
    pub fn new(role: &str, content: String) -> RawMessage {
        RawMessage {
            role: role.into(),
            content,
        }
    }

    /// The text form of `messages` (`openai-completions`): their contents joined by newlines.
    pub fn text(messages: &[RawMessage]) -> String {
        let parts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        parts.join("\n")
    }
}

section! {
    /// `request:` keys. `fields_over` is each field's overlay; [`RawRequest::over`] keeps the
    /// prompt keys together.
    RawRequest: fields_over {
        prompt: String,
        /// A synthetic prompt of about this many tokens instead of `prompt`/`messages`.
        prompt_tokens: u32,
        messages: Vec<RawMessage>,
        system: String,
        max_tokens: u32,
        /// The body key for `max_tokens`: `max_tokens`, `max_completion_tokens` (OpenAI
        /// reasoning models) or `max_output_tokens` (Responses API); default per dialect.
        max_tokens_field: String,
        temperature: f64,
        seed: i64,
        ignore_eos: bool,
        min_tokens: u32,
        extra_body: serde_json::Map<String, serde_json::Value> = keys,
        cache: String,
        /// Prompts from a file instead of `prompt`/`messages`/`prompt_tokens`
        /// ([`super::prompt_set`]).
        prompt_set: RawPromptSet,
        /// Input and output lengths drawn per request ([`super::generate`]).
        generate: RawGenerate,
        /// Multi-turn conversations ([`super::conversation`]).
        conversation: RawConversation,
    }
}

impl RawRequest {
    /// Field-wise overlay. `prompt`, `prompt_tokens`, `messages`, `prompt_set`, `generate`,
    /// `conversation` and `system` go together: a scenario that sets any of them replaces all
    /// seven.
    pub fn over(self, base: &RawRequest) -> RawRequest {
        let own_prompt = self.prompt.is_some()
            || self.prompt_tokens.is_some()
            || self.messages.is_some()
            || self.system.is_some()
            || self.prompt_set.is_some()
            || self.generate.is_some()
            || self.conversation.is_some();
        let base = match own_prompt {
            true => base.without_prompt(),
            false => base.clone(),
        };
        self.fields_over(&base)
    }

    /// The section without its prompt keys.
    fn without_prompt(&self) -> RawRequest {
        RawRequest {
            prompt: None,
            prompt_tokens: None,
            messages: None,
            system: None,
            prompt_set: None,
            generate: None,
            conversation: None,
            ..self.clone()
        }
    }
}

section! {
    /// `request.conversation` keys.
    RawConversation {
        /// Conversations from a file (ShareGPT, LMSYS-Chat-1M, AIPerf `multi_turn`) instead
        /// of synthetic texts.
        file: String,
        turns: u32,
        system_tokens: u32,
        user_tokens: u32,
        answer_tokens: u32,
        think_time: RawNumber,
        seed: u64,
        reference: u32,
        /// AIPerf `mooncake_trace` sessions: tokens per hash id (AIPerf's `--isl-block-size`).
        block_size: u32,
    }
}

section! {
    /// `request.generate` keys.
    RawGenerate {
        input_tokens: RawDist,
        output_tokens: RawDist,
        seed: u64,
    }
}

section! {
    /// A length distribution: `{distribution: normal, mean: 512, sd: 128, min: 16, max: 2048}`.
    RawDist {
        distribution: String,
        mean: f64,
        sd: f64,
        median: f64,
        sigma: f64,
        min: u32,
        max: u32,
    }
}

section! {
    /// `request.prompt_set` keys.
    RawPromptSet {
        /// The file, relative to the scenario file; its line names it in errors.
        file: Spanned<String>,
        /// `prompts`, `messages` or `sharegpt` (default: told from the first entry).
        format: String,
        /// `shuffled` (default) or `file`.
        order: String,
        /// Seed of the shuffled order (default 0).
        seed: u64,
    }
}

section! {
    /// `load:` keys.
    RawLoad: over {
        /// One level, or a list: one scenario per level (see [`super::sweep`]).
        concurrency: OneOrMany<u32>,
        samples: u32,
        warmup: u32,
        /// One arrival rate, or a list: one scenario per rate (see [`super::sweep`]).
        rate: OneOrMany<f64>,
        seed: u64,
        max_samples: u32,
        /// Closed loop: `steady` (default) or `burst` (see [`crate::config::scenario::Ramp`]).
        ramp: String,
        /// Open loop: arrival times and lengths from a trace file ([`super::trace`]).
        trace: RawTrace,
    }
}

section! {
    /// `load.trace` keys.
    RawTrace {
        /// The file, relative to the scenario file.
        file: String,
        /// `mooncake` or `azure` (default: told from the file).
        format: String,
        /// Tokens per hash id (Mooncake; default 512).
        block_size: u32,
        /// Factor on the trace's times (default 1).
        time_scale: f64,
        /// Mean arrival rate to replay at, requests/s (sets the time scale).
        rate: f64,
        /// Entries skipped before the first measured request (default 0).
        start: usize,
    }
}

/// One value or a list of values: `concurrency: 4` or `concurrency: [1, 4, 16]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "a number or a list of numbers, e.g. 4 or [1, 4, 16]"
)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Copy> OneOrMany<T> {
    /// The single value; `None` for a list (expanded before validation, see
    /// [`super::sweep`]).
    pub fn single(&self) -> Option<T> {
        match self {
            OneOrMany::One(v) => Some(*v),
            OneOrMany::Many(_) => None,
        }
    }
}

section! {
    /// A tolerance band: `{warn: 5%, fail: 10%}`.
    RawBand {
        warn: RawNumber,
        fail: RawNumber,
    }
}

/// A number written as `0.05`, `5%`, `20ms` or `2s`, interpreted by the key it belongs to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RawNumber {
    Num(f64),
    Text(String),
}

section! {
    /// `gate:` keys.
    RawGate: over {
        metrics: Vec<String>,
        quantiles: Vec<String>,
        /// Keys: `p50`, `p90`, `p99`, or metric-specific `ttft_p50`, `tpot_p99`, ...
        tolerances: BTreeMap<String, RawBand> = keys,
        /// Keys: `ttft`, `tpot`; values like `20ms`.
        min_delta: BTreeMap<String, RawNumber> = keys,
        alpha: f64,
        max_error_rate: RawNumber,
        /// Re-measure a failing scenario this many times; it fails only if every re-run fails
        /// too.
        confirm: u32,
        /// Absolute objectives: `ttft_p90: 500ms`, `tpot_p50: 50ms`, `error_rate: 1%`.
        slo: BTreeMap<String, RawNumber> = keys,
        /// The prefix cache: `hit_rate: ">= 40%"`.
        cache: RawCacheGate,
        /// Compare the answers with the reference's (`ab`: the base arm's; `check`: a baseline
        /// blessed at temperature 0; default true; only at temperature 0).
        outputs: bool,
        /// Speculative decoding: `max_drop: 5%` gates a drop of the acceptance rate.
        acceptance: RawAcceptanceGate,
        /// The started server's cold start (docs/gate.md "Cold start"): `{}` or
        /// `{fail: 50%, min_delta: 200ms}`.
        cold_start: RawColdStart,
    }
}

section! {
    /// `gate.acceptance` keys.
    RawAcceptanceGate {
        /// The largest drop of the acceptance rate tolerated, in points: `5%` or `0.05`.
        max_drop: RawNumber,
    }
}

section! {
    /// `gate.cold_start` keys.
    RawColdStart {
        /// Relative tolerance on the times of a start: `50%` or `0.5`.
        fail: RawNumber,
        /// Absolute floor: `200ms`, `1s`.
        min_delta: RawNumber,
    }
}

section! {
    /// `gate.cache` keys.
    RawCacheGate {
        /// The least prefix-cache hit rate: `">= 40%"`, `40%` or `0.4`.
        hit_rate: RawNumber,
    }
}
