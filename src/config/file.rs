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

/// The sections shared by `defaults:` and a scenario.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSections {
    /// Where and how to connect.
    #[serde(default)]
    pub endpoint: RawEndpoint,
    /// What to send.
    #[serde(default)]
    pub request: RawRequest,
    /// How many requests, how concurrently.
    #[serde(default)]
    pub load: RawLoad,
    /// How to compare with the baseline.
    #[serde(default)]
    pub gate: RawGate,
    /// The server under test, started by perfgate (src/server/).
    #[serde(default)]
    pub server: Option<RawServer>,
}

/// One scenario: a name plus the same sections as `defaults:`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Unique, `[A-Za-z0-9._-]`, 1..=64 chars; names the baseline file.
    pub name: Option<String>,
    /// Free text shown in reports.
    pub description: Option<String>,
    #[serde(default)]
    pub endpoint: RawEndpoint,
    #[serde(default)]
    pub request: RawRequest,
    #[serde(default)]
    pub load: RawLoad,
    #[serde(default)]
    pub gate: RawGate,
    /// Replaces `defaults.server` as a whole (one block is one server process).
    #[serde(default)]
    pub server: Option<RawServer>,
}

/// `server:` keys: a server process perfgate starts, waits for and stops. Scenarios with the
/// same block share one process.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// argv words; `${ENV}` expanded in each.
    pub command: Option<Vec<String>>,
    /// Extra environment variables (values may use `${ENV}`; never printed).
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (relative to perfgate's).
    pub cwd: Option<String>,
    /// How readiness is known (default: `GET <base_url>/models` answers 200).
    pub ready: Option<RawReady>,
    pub ready_timeout: Option<String>,
    pub stop_timeout: Option<String>,
    /// File for the server's stdout and stderr (default: a new file in the temp directory).
    pub log: Option<String>,
    /// Log lines shown when something goes wrong (default 20).
    pub log_tail: Option<u32>,
    /// Prometheus text endpoint scraped before and after each scenario (default
    /// `<origin>/metrics`; `false` turns scraping off).
    pub metrics: Option<RawMetrics>,
    /// Only inside `base:` / `candidate:`: the arm's endpoint (its own port), instead of
    /// `endpoint.base_url`.
    pub base_url: Option<String>,
    /// `perfgate ab`: the base arm's server; its keys win over this block's.
    pub base: Option<Box<RawServer>>,
    /// `perfgate ab`: the candidate arm's server; its keys win over this block's.
    pub candidate: Option<Box<RawServer>>,
}

impl RawServer {
    /// Field-wise overlay of an arm block over the shared block: `self`'s values win (the
    /// arms themselves are not inherited).
    pub fn over(self, base: &RawServer) -> RawServer {
        let b = base.clone();
        RawServer {
            command: self.command.or(b.command),
            env: self.env.or(b.env),
            cwd: self.cwd.or(b.cwd),
            ready: self.ready.or(b.ready),
            ready_timeout: self.ready_timeout.or(b.ready_timeout),
            stop_timeout: self.stop_timeout.or(b.stop_timeout),
            log: self.log.or(b.log),
            log_tail: self.log_tail.or(b.log_tail),
            metrics: self.metrics.or(b.metrics),
            base_url: self.base_url,
            base: None,
            candidate: None,
        }
    }
}

/// `server.ready`: `{url: ...}` (2xx) or `{log: text}` (a log line containing the text).
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawReady {
    pub url: Option<String>,
    pub log: Option<String>,
}

/// `server.metrics`: a URL, or `false`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum RawMetrics {
    On(bool),
    Url(String),
}

/// `endpoint:` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    pub base_url: Option<String>,
    pub api: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub connect_timeout: Option<String>,
    pub first_token_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub request_timeout: Option<String>,
    pub include_usage: Option<bool>,
    /// Poll `<base_url>/models` until the endpoint is ready, for up to this long.
    pub wait_ready: Option<String>,
}

/// One chat message.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMessage {
    pub role: String,
    pub content: String,
}

/// `request:` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    pub prompt: Option<String>,
    /// A synthetic prompt of about this many tokens instead of `prompt`/`messages`.
    pub prompt_tokens: Option<u32>,
    pub messages: Option<Vec<RawMessage>>,
    pub system: Option<String>,
    pub max_tokens: Option<u32>,
    /// The body key for `max_tokens`: `max_tokens`, `max_completion_tokens` (OpenAI reasoning
    /// models) or `max_output_tokens` (Responses API); default per dialect.
    pub max_tokens_field: Option<String>,
    pub temperature: Option<f64>,
    pub seed: Option<i64>,
    pub ignore_eos: Option<bool>,
    pub min_tokens: Option<u32>,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub cache: Option<String>,
    /// Prompts from a file instead of `prompt`/`messages`/`prompt_tokens`
    /// ([`super::prompt_set`]).
    pub prompt_set: Option<RawPromptSet>,
    /// Input and output lengths drawn per request ([`super::generate`]).
    pub generate: Option<RawGenerate>,
    /// Multi-turn conversations ([`super::conversation`]).
    pub conversation: Option<RawConversation>,
}

/// `request.conversation` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConversation {
    pub turns: Option<u32>,
    pub system_tokens: Option<u32>,
    pub user_tokens: Option<u32>,
    pub answer_tokens: Option<u32>,
    pub think_time: Option<RawNumber>,
    pub seed: Option<u64>,
    pub reference: Option<u32>,
}

/// `request.generate` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGenerate {
    pub input_tokens: Option<RawDist>,
    pub output_tokens: Option<RawDist>,
    pub seed: Option<u64>,
}

/// A length distribution: `{distribution: normal, mean: 512, sd: 128, min: 16, max: 2048}`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDist {
    pub distribution: Option<String>,
    pub mean: Option<f64>,
    pub sd: Option<f64>,
    pub median: Option<f64>,
    pub sigma: Option<f64>,
    pub min: Option<u32>,
    pub max: Option<u32>,
}

/// `request.prompt_set` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPromptSet {
    /// The file, relative to the scenario file.
    pub file: Option<String>,
    /// `prompts`, `messages` or `sharegpt` (default: told from the first entry).
    pub format: Option<String>,
    /// `shuffled` (default) or `file`.
    pub order: Option<String>,
    /// Seed of the shuffled order (default 0).
    pub seed: Option<u64>,
}

/// `load:` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    /// One level, or a list: one scenario per level (see [`super::sweep`]).
    pub concurrency: Option<OneOrMany<u32>>,
    pub samples: Option<u32>,
    pub warmup: Option<u32>,
    /// One arrival rate, or a list: one scenario per rate (see [`super::sweep`]).
    pub rate: Option<OneOrMany<f64>>,
    pub seed: Option<u64>,
    pub max_samples: Option<u32>,
    /// Closed loop: `steady` (default) or `burst` (see [`crate::config::scenario::Ramp`]).
    pub ramp: Option<String>,
    /// Open loop: arrival times and lengths from a trace file ([`super::trace`]).
    pub trace: Option<RawTrace>,
}

/// `load.trace` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrace {
    /// The file, relative to the scenario file.
    pub file: Option<String>,
    /// `mooncake` or `azure` (default: told from the file).
    pub format: Option<String>,
    /// Tokens per hash id (Mooncake; default 512).
    pub block_size: Option<u32>,
    /// Factor on the trace's times (default 1).
    pub time_scale: Option<f64>,
    /// Mean arrival rate to replay at, requests/s (sets the time scale).
    pub rate: Option<f64>,
    /// Entries skipped before the first measured request (default 0).
    pub start: Option<usize>,
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

/// A tolerance band: `{warn: 5%, fail: 10%}`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBand {
    pub warn: Option<RawNumber>,
    pub fail: Option<RawNumber>,
}

/// A number written as `0.05`, `5%`, `20ms` or `2s`, interpreted by the key it belongs to.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawNumber {
    Num(f64),
    Text(String),
}

/// `gate:` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    pub metrics: Option<Vec<String>>,
    pub quantiles: Option<Vec<String>>,
    /// Keys: `p50`, `p90`, `p99`, or metric-specific `ttft_p50`, `tpot_p99`, ...
    pub tolerances: Option<BTreeMap<String, RawBand>>,
    /// Keys: `ttft`, `tpot`; values like `20ms`.
    pub min_delta: Option<BTreeMap<String, RawNumber>>,
    pub alpha: Option<f64>,
    pub max_error_rate: Option<RawNumber>,
    /// Re-measure a failing scenario this many times; it fails only if every re-run fails too.
    pub confirm: Option<u32>,
    /// Absolute objectives: `ttft_p90: 500ms`, `tpot_p50: 50ms`, `error_rate: 1%`.
    pub slo: Option<BTreeMap<String, RawNumber>>,
    /// The prefix cache: `hit_rate: ">= 40%"`.
    pub cache: Option<RawCacheGate>,
}

/// `gate.cache` keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCacheGate {
    /// The least prefix-cache hit rate: `">= 40%"`, `40%` or `0.4`.
    pub hit_rate: Option<RawNumber>,
}

impl RawEndpoint {
    /// Field-wise overlay: `self`'s values win over `base`'s.
    pub fn over(self, base: &RawEndpoint) -> RawEndpoint {
        RawEndpoint {
            base_url: self.base_url.or_else(|| base.base_url.clone()),
            api: self.api.or_else(|| base.api.clone()),
            model: self.model.or_else(|| base.model.clone()),
            api_key_env: self.api_key_env.or_else(|| base.api_key_env.clone()),
            headers: match (self.headers, &base.headers) {
                (Some(mine), Some(theirs)) => {
                    let mut all = theirs.clone();
                    all.extend(mine);
                    Some(all)
                }
                (mine, theirs) => mine.or_else(|| theirs.clone()),
            },
            connect_timeout: self
                .connect_timeout
                .or_else(|| base.connect_timeout.clone()),
            first_token_timeout: self
                .first_token_timeout
                .or_else(|| base.first_token_timeout.clone()),
            idle_timeout: self.idle_timeout.or_else(|| base.idle_timeout.clone()),
            request_timeout: self
                .request_timeout
                .or_else(|| base.request_timeout.clone()),
            include_usage: self.include_usage.or(base.include_usage),
            wait_ready: self.wait_ready.or_else(|| base.wait_ready.clone()),
        }
    }
}

impl RawRequest {
    /// Field-wise overlay. `prompt`, `prompt_tokens`, `messages`, `prompt_set`, `generate`,
    /// `conversation` and `system` go together: a scenario that sets any of them replaces all
    /// seven.
    pub fn over(self, base: &RawRequest) -> RawRequest {
        let own_text = self.prompt.is_some()
            || self.prompt_tokens.is_some()
            || self.messages.is_some()
            || self.system.is_some()
            || self.prompt_set.is_some()
            || self.generate.is_some()
            || self.conversation.is_some();
        RawRequest {
            prompt: if own_text {
                self.prompt
            } else {
                base.prompt.clone()
            },
            prompt_tokens: if own_text {
                self.prompt_tokens
            } else {
                base.prompt_tokens
            },
            messages: if own_text {
                self.messages
            } else {
                base.messages.clone()
            },
            system: if own_text {
                self.system
            } else {
                base.system.clone()
            },
            max_tokens: self.max_tokens.or(base.max_tokens),
            max_tokens_field: self.max_tokens_field.or(base.max_tokens_field.clone()),
            temperature: self.temperature.or(base.temperature),
            seed: self.seed.or(base.seed),
            ignore_eos: self.ignore_eos.or(base.ignore_eos),
            min_tokens: self.min_tokens.or(base.min_tokens),
            extra_body: match (self.extra_body, &base.extra_body) {
                (Some(mine), Some(theirs)) => {
                    let mut all = theirs.clone();
                    all.extend(mine);
                    Some(all)
                }
                (mine, theirs) => mine.or_else(|| theirs.clone()),
            },
            cache: self.cache.or_else(|| base.cache.clone()),
            prompt_set: if own_text {
                self.prompt_set
            } else {
                base.prompt_set.clone()
            },
            generate: if own_text {
                self.generate
            } else {
                base.generate.clone()
            },
            conversation: if own_text {
                self.conversation
            } else {
                base.conversation.clone()
            },
        }
    }
}

impl RawLoad {
    /// Field-wise overlay.
    pub fn over(self, base: &RawLoad) -> RawLoad {
        RawLoad {
            concurrency: self.concurrency.or_else(|| base.concurrency.clone()),
            samples: self.samples.or(base.samples),
            warmup: self.warmup.or(base.warmup),
            rate: self.rate.or_else(|| base.rate.clone()),
            seed: self.seed.or(base.seed),
            max_samples: self.max_samples.or(base.max_samples),
            ramp: self.ramp.or_else(|| base.ramp.clone()),
            trace: self.trace.or_else(|| base.trace.clone()),
        }
    }
}

impl RawGate {
    /// Field-wise overlay; `tolerances` and `min_delta` merge key by key.
    pub fn over(self, base: &RawGate) -> RawGate {
        fn merge<V: Clone>(
            mine: Option<BTreeMap<String, V>>,
            theirs: &Option<BTreeMap<String, V>>,
        ) -> Option<BTreeMap<String, V>> {
            match (mine, theirs) {
                (Some(m), Some(t)) => {
                    let mut all = t.clone();
                    all.extend(m);
                    Some(all)
                }
                (m, t) => m.or_else(|| t.clone()),
            }
        }
        RawGate {
            metrics: self.metrics.or_else(|| base.metrics.clone()),
            quantiles: self.quantiles.or_else(|| base.quantiles.clone()),
            tolerances: merge(self.tolerances, &base.tolerances),
            min_delta: merge(self.min_delta, &base.min_delta),
            alpha: self.alpha.or(base.alpha),
            max_error_rate: self.max_error_rate.or_else(|| base.max_error_rate.clone()),
            confirm: self.confirm.or(base.confirm),
            slo: merge(self.slo, &base.slo),
            cache: self.cache.or_else(|| base.cache.clone()),
        }
    }
}
