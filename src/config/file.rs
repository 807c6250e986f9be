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

/// Writes `over(self, base)`, the field-wise overlay of `defaults:` (`base`) by a scenario's
/// section, once for every section, each field by its rule: `or` (the scenario's value when set,
/// else the default's), `keys` (maps merge key by key, the scenario's keys winning), `own` (the
/// scenario's only), `none` (never inherited, nor kept).
macro_rules! overlay {
    ($ty:ident { $($field:ident: $rule:ident),+ $(,)? }) => {
        overlay!($ty as over { $($field: $rule),+ });
    };
    ($ty:ident as $over:ident { $($field:ident: $rule:ident),+ $(,)? }) => {
        impl $ty {
            /// Field-wise overlay: `self`'s values win over `base`'s.
            pub fn $over(self, base: &$ty) -> $ty {
                $ty { $($field: $rule(self.$field, &base.$field)),+ }
            }
        }
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

// An arm block over the shared block: its values win; its `base_url` is its own, and arms are
// not inherited.
overlay!(RawServer {
    command: or,
    env: or,
    cwd: or,
    ready: or,
    ready_timeout: or,
    stop_timeout: or,
    log: or,
    log_tail: or,
    metrics: or,
    base_url: own,
    base: none,
    candidate: none,
});

overlay!(RawEndpoint {
    base_url: or,
    api: or,
    model: or,
    api_key_env: or,
    headers: keys,
    connect_timeout: or,
    first_token_timeout: or,
    idle_timeout: or,
    request_timeout: or,
    include_usage: or,
    wait_ready: or,
});

overlay!(RawLoad {
    concurrency: or,
    samples: or,
    warmup: or,
    rate: or,
    seed: or,
    max_samples: or,
    ramp: or,
    trace: or,
});

overlay!(RawGate {
    metrics: or,
    quantiles: or,
    tolerances: keys,
    min_delta: keys,
    alpha: or,
    max_error_rate: or,
    confirm: or,
    slo: keys,
    cache: or,
});

overlay!(RawRequest as fields_over {
    prompt: or, prompt_tokens: or, messages: or, system: or, max_tokens: or,
    max_tokens_field: or, temperature: or, seed: or, ignore_eos: or, min_tokens: or,
    extra_body: keys, cache: or, prompt_set: or, generate: or, conversation: or,
});

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
        let base = if own_text {
            RawRequest {
                prompt: None,
                prompt_tokens: None,
                messages: None,
                system: None,
                prompt_set: None,
                generate: None,
                conversation: None,
                ..base.clone()
            }
        } else {
            base.clone()
        };
        self.fields_over(&base)
    }
}
