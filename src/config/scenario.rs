//! Validated scenario types: the one place raw YAML becomes checked values.
//!
//! Nothing downstream re-validates: a [`Scenario`] always has `samples >= 20`, tolerances in
//! range, a normalised endpoint URL, a resolved API key (kept out of `Debug`), and a fingerprint.

use super::file::{RawBand, RawEndpoint, RawGate, RawLoad, RawMessage, RawRequest, RawScenario};
use super::values::{expand_env, parse_fraction, parse_ms, parse_timeout};
use crate::sim::SimConfig;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The smallest allowed `load.samples` (docs/design.md "Scenarios").
pub const MIN_SAMPLES: u32 = 20;

pub use crate::api::Api;

/// A gated latency metric.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token, ms.
    Ttft,
    /// Time per output token, ms.
    Tpot,
    /// End-to-end latency (t_last - t0), ms.
    E2e,
}

impl Metric {
    /// Lower-case name (`ttft`).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::E2e => "e2e",
        }
    }
    /// Upper-case label for reports (`TTFT`).
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
        }
    }
}

/// A gated quantile.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Quantile {
    /// The median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
}

impl Quantile {
    /// As a probability (0.5, 0.9, 0.99).
    pub fn p(self) -> f64 {
        match self {
            Quantile::P50 => 0.5,
            Quantile::P90 => 0.9,
            Quantile::P99 => 0.99,
        }
    }
    /// `p50`.
    pub fn as_str(self) -> &'static str {
        match self {
            Quantile::P50 => "p50",
            Quantile::P90 => "p90",
            Quantile::P99 => "p99",
        }
    }
    /// `P50`.
    pub fn label(self) -> &'static str {
        match self {
            Quantile::P50 => "P50",
            Quantile::P90 => "P90",
            Quantile::P99 => "P99",
        }
    }
}

/// Relative tolerance band (fractions: 0.10 = 10 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Band {
    /// Above this (and significant): WARN.
    pub warn: f64,
    /// Above this (and significant, and above `min_delta`): FAIL.
    pub fail: f64,
}

/// A secret value (API key, header from env). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: String) -> Self {
        Secret(s)
    }
    /// The value, for sending it where it belongs. Never log this.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A request header; values that came from `${ENV}` are secret.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Header name as written.
    pub name: String,
    /// The value after `${ENV}` expansion.
    pub value: Secret,
    /// True when the value used `${ENV}`: it is redacted in every output.
    pub from_env: bool,
}

/// Where requests go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A real HTTP(S) endpoint; `base_url` normalised (no trailing slash, single `/v1`).
    Http {
        /// e.g. `http://127.0.0.1:8080/v1` (query string kept).
        base_url: String,
    },
    /// The built-in simulator, started in-process on a loopback port.
    Sim(SimConfig),
}

/// The validated `endpoint:` section.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Where to send requests.
    pub target: Target,
    /// The URL as written after `${ENV}` expansion (for messages; secrets are not allowed in it).
    pub display_url: String,
    /// Dialect.
    pub api: Api,
    /// Model id sent in the body.
    pub model: String,
    /// Name of the variable that holds the API key.
    pub api_key_env: Option<String>,
    /// The key itself (never printed).
    pub api_key: Option<Secret>,
    /// Extra headers.
    pub headers: Vec<Header>,
    /// TCP/TLS connect limit.
    pub connect_timeout: Duration,
    /// Limit from t0 to the first token-bearing event.
    pub first_token_timeout: Duration,
    /// Longest gap between data events (comments do not reset it).
    pub idle_timeout: Duration,
    /// Limit for the whole request.
    pub request_timeout: Duration,
    /// Send `stream_options: {include_usage: true}` (OpenAI APIs).
    pub include_usage: bool,
    /// Things the user should know about this endpoint (e.g. a base_url without a path).
    pub warnings: Vec<String>,
    /// `${VAR}` values placed in the URL's query or userinfo: secrets, redacted in all output.
    pub url_secrets: Vec<Secret>,
    /// Poll `<base_url>/models` until the endpoint is ready, for up to this long, before the
    /// warmup (`endpoint.wait_ready`); `None`: measure at once.
    pub wait_ready: Option<Duration>,
}

impl Endpoint {
    /// The URL to show in reports, baselines and messages: the normalised base URL (or the
    /// `sim://` URL) with every URL secret replaced by `<redacted>`.
    pub fn shown_url(&self) -> String {
        let u = match &self.target {
            Target::Http { base_url } => base_url.clone(),
            Target::Sim(_) => self.display_url.clone(),
        };
        self.url_secrets
            .iter()
            .fold(super::values::mask_userinfo(&u), |u, s| {
                u.replace(s.expose(), "<redacted>")
            })
    }

    /// Every secret value this endpoint sends: the API key, `${ENV}` header values, and
    /// `${ENV}` values in the URL's query or userinfo. Redacted from everything written.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .api_key
            .iter()
            .map(|k| k.expose().to_string())
            .collect();
        out.extend(
            self.headers
                .iter()
                .filter(|h| h.from_env)
                .map(|h| h.value.expose().to_string()),
        );
        out.extend(self.url_secrets.iter().map(|s| s.expose().to_string()));
        out.retain(|s| s.len() >= 4);
        out
    }
}

/// Prefix-cache policy (docs/design.md "Scenarios").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// The same prompt every time.
    Warm,
    /// A unique nonce line prepended to every request.
    Cold,
}

/// The body key that limits the output length (`request.max_tokens_field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: every OpenAI-compatible server and Anthropic.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models (o-series, gpt-5) reject `max_tokens`.
    MaxCompletionTokens,
    /// `max_output_tokens`: the Responses API.
    MaxOutputTokens,
}

impl MaxTokensField {
    /// Every key, in the order messages list them.
    pub const ALL: [MaxTokensField; 3] = [
        MaxTokensField::MaxTokens,
        MaxTokensField::MaxCompletionTokens,
        MaxTokensField::MaxOutputTokens,
    ];

    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxOutputTokens => "max_output_tokens",
        }
    }

    /// The keys `api` accepts.
    pub fn allowed(api: Api) -> &'static [MaxTokensField] {
        match api {
            Api::OpenaiChat => &[
                MaxTokensField::MaxTokens,
                MaxTokensField::MaxCompletionTokens,
            ],
            Api::OpenaiCompletions | Api::AnthropicMessages => &[MaxTokensField::MaxTokens],
            Api::OpenaiResponses => &[MaxTokensField::MaxOutputTokens],
        }
    }
}

impl std::str::FromStr for MaxTokensField {
    type Err = String;
    fn from_str(s: &str) -> Result<MaxTokensField, String> {
        MaxTokensField::ALL
            .into_iter()
            .find(|f| f.key() == s)
            .ok_or_else(|| {
                format!("request.max_tokens_field `{s}`: use max_tokens, max_completion_tokens or max_output_tokens")
            })
    }
}

impl RequestSpec {
    /// The body key that carries `max_tokens` for `api`.
    pub fn max_tokens_key(&self, api: Api) -> &'static str {
        self.max_tokens_field
            .map(MaxTokensField::key)
            .unwrap_or_else(|| api.default_max_tokens_field())
    }
}

/// The validated `request:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestSpec {
    /// Chat messages (a `prompt` becomes one user message for chat APIs).
    pub messages: Vec<RawMessage>,
    /// Plain prompt text (used as-is by `openai-completions`).
    pub prompt: String,
    /// Anthropic `system` or an extra system message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Maximum output tokens.
    pub max_tokens: u32,
    /// `request.max_tokens_field`: the body key that carries `max_tokens`; `None` is the
    /// dialect's default ([`Api::default_max_tokens_field`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<MaxTokensField>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// Merged verbatim into the JSON body.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Prefix-cache policy.
    pub cache: CachePolicy,
    /// `prompt_tokens: N`: `prompt` and `messages` hold a synthetic prompt, calibrated during
    /// the warmup to about N tokens by the server's own count (crate::synthetic_prompt).
    /// Part of the fingerprint (the text is not: the calibrated text follows the tokenizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
}

impl RequestSpec {
    /// sha256 (hex, 16 chars) of the prompt text: messages, prompt and system; for a
    /// synthetic prompt, of `prompt_tokens` and system (its text follows the tokenizer).
    pub fn prompt_hash(&self) -> String {
        let v = match self.prompt_tokens {
            Some(n) => serde_json::json!({"prompt_tokens": n, "system": self.system}),
            None => {
                serde_json::json!({"messages": self.messages, "prompt": self.prompt, "system": self.system})
            }
        };
        short_hash(&v.to_string())
    }
    /// True when the request asks for a fixed output length.
    pub fn fixed_length(&self) -> bool {
        self.ignore_eos == Some(true) || self.min_tokens.is_some_and(|m| m >= self.max_tokens)
    }
}

/// The validated `load:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSpec {
    /// Closed-loop concurrency (in-flight requests).
    pub concurrency: u32,
    /// Measured requests (>= 20).
    pub samples: u32,
    /// Requests sent first and discarded.
    pub warmup: u32,
    /// Sequential sampling: measure up to this many requests, stopping early at a look where
    /// every gated check is decided (PASS, FAIL or IMPROVED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_samples: Option<u32>,
    /// Open loop: requests per second, Poisson arrivals (`concurrency` then caps the requests
    /// in flight). `None` = closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Seed of the open-loop arrival schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl LoadSpec {
    /// The sample counts at which a sequential run is evaluated: `samples`, then 50, then
    /// doubling, ending at `max_samples` (e.g. 20, 50, 100, 200, 300). One look without
    /// `max_samples`. The family-wise alpha is spent evenly over the looks (Bonferroni).
    pub fn looks(&self) -> Vec<usize> {
        let first = self.samples as usize;
        let Some(max) = self.max_samples.map(|m| m as usize).filter(|&m| m > first) else {
            return vec![first];
        };
        let mut looks = vec![first];
        let mut n = first;
        while n < max {
            n = if n < 50 { 50 } else { n * 2 }.min(max);
            looks.push(n);
        }
        looks
    }
}

/// The validated `gate:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateSpec {
    /// Gated metrics.
    pub metrics: Vec<Metric>,
    /// Gated quantiles.
    pub quantiles: Vec<Quantile>,
    /// Band per (metric, quantile).
    pub bands: BTreeMap<(Metric, Quantile), Band>,
    /// Absolute floor per metric, ms.
    pub min_delta_ms: BTreeMap<Metric, f64>,
    /// Family-wise error rate for the whole check (Holm).
    pub alpha: f64,
    /// Highest acceptable share of failed requests (0..=1).
    pub max_error_rate: f64,
    /// Confirmation re-runs of a failing scenario (0 = none).
    pub confirm: u32,
    /// Absolute objectives (`gate.slo`), in the order metric, quantile; the error rate last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<Objective>,
    /// `itl` in `gate.metrics`: the pooled P99 of inter-token gaps is gated with this band
    /// (`gate.tolerances.itl_p99`; docs/gate.md "ITL P99"). `None`: not gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub itl: Option<Band>,
}

/// The default band of the ITL P99 check: warn 10 %, fail 20 % (docs/gate.md "ITL P99").
pub const ITL_BAND: Band = Band {
    warn: 0.10,
    fail: 0.20,
};

/// One absolute objective of `gate.slo`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Objective {
    /// The quantile of a latency metric is at most `max_ms`.
    Latency {
        metric: Metric,
        quantile: Quantile,
        max_ms: f64,
    },
    /// The share of failed requests is at most `max` (0..=1).
    ErrorRate { max: f64 },
}

impl Objective {
    /// The key as written: `ttft_p90`, `error_rate`.
    pub fn key(&self) -> String {
        match self {
            Objective::Latency {
                metric, quantile, ..
            } => format!("{}_{}", metric.as_str(), quantile.as_str()),
            Objective::ErrorRate { .. } => "error_rate".into(),
        }
    }
}

impl Default for GateSpec {
    /// The defaults (docs/gate.md): TTFT and TPOT at P50 and P99, bands 5/10 % (P50), 10/20 %
    /// (P90), 25/50 % (P99), min_delta 5 ms (TTFT) and 0.5 ms (TPOT), alpha 0.01,
    /// max_error_rate 0.
    fn default() -> Self {
        build_gate(&RawGate::default()).unwrap_or_else(|_| GateSpec {
            metrics: vec![Metric::Ttft, Metric::Tpot],
            quantiles: vec![Quantile::P50, Quantile::P99],
            bands: BTreeMap::new(),
            min_delta_ms: BTreeMap::new(),
            alpha: 0.01,
            max_error_rate: 0.0,
            confirm: 0,
            slo: Vec::new(),
            itl: None,
        })
    }
}

impl GateSpec {
    /// The band for a metric and quantile.
    pub fn band(&self, m: Metric, q: Quantile) -> Band {
        self.bands.get(&(m, q)).copied().unwrap_or(default_band(q))
    }
    /// The absolute floor for a metric, ms.
    pub fn min_delta(&self, m: Metric) -> f64 {
        self.min_delta_ms.get(&m).copied().unwrap_or(0.0)
    }
}

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

/// The default band for a quantile (5 %/10 % for P50, 25 %/50 % for P99; docs/gate.md).
pub fn default_band(q: Quantile) -> Band {
    match q {
        Quantile::P50 => Band {
            warn: 0.05,
            fail: 0.10,
        },
        Quantile::P90 => Band {
            warn: 0.10,
            fail: 0.20,
        },
        Quantile::P99 => Band {
            warn: 0.25,
            fail: 0.50,
        },
    }
}

/// First 16 hex chars of sha256(s).
pub fn short_hash(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Checks a scenario name: `[A-Za-z0-9._-]`, 1..=64 chars, not only dots.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!("scenario name `{name}` must be 1 to 64 characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "scenario name `{name}` contains {c:?}: use only letters, digits, `.`, `_` and `-` (it names a file)"
        ));
    }
    if name.chars().all(|c| c == '.') || name.starts_with('.') {
        return Err(format!(
            "scenario name `{name}` must not start with `.` (it names a file)"
        ));
    }
    Ok(())
}

/// A scenario's name, checked once where it is read ([`ScenarioName::new`], [`check_name`]):
/// `[A-Za-z0-9._-]`, 1 to 64 characters, not starting with `.`, so it can name a file
/// (`baselines/<name>.json`). Written as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ScenarioName(String);

impl ScenarioName {
    /// Checks `name` ([`check_name`]); the error is the message for the user.
    pub fn new(name: impl Into<String>) -> Result<ScenarioName, String> {
        let name = name.into();
        check_name(&name)?;
        Ok(ScenarioName(name))
    }
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for ScenarioName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ScenarioName::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ScenarioName {
    /// The name, honouring width and alignment (`{:<24}` in aligned listings).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::ops::Deref for ScenarioName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ScenarioName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ScenarioName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ScenarioName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ScenarioName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ScenarioName {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl From<ScenarioName> for String {
    fn from(n: ScenarioName) -> String {
        n.0
    }
}

/// Normalises an HTTP base URL (OpenAI-SDK convention, tests/cases/35-base-url-joining.yaml): the base includes
/// the version segment and perfgate appends the API route. Trailing slashes are removed, a
/// doubled `/v1/v1` is collapsed, and a pasted full URL ending in `api`'s own route is cut back
/// to its base; a route of another API is an error. No `/v1` is ever inserted: a URL without a
/// path gets a warning. Query strings are kept.
///
/// Returns the normalised URL and warnings for the user.
pub fn normalise_base_url(raw: &str, api: Api) -> Result<(String, Vec<String>), String> {
    let mut url = url::Url::parse(raw).map_err(|e| {
        format!("base_url `{raw}` is not a URL ({e}); write it like `http://127.0.0.1:8000/v1`")
    })?;
    match url.scheme() {
        "http" | "https" => {}
        s => {
            return Err(format!(
                "base_url `{raw}` has scheme `{s}`: use http://, https:// or sim:// (the built-in simulator)"
            ))
        }
    }
    if url.host_str().is_none() {
        return Err(format!("base_url `{raw}` has no host"));
    }
    let mut warnings = Vec::new();
    let mut path = url.path().trim_end_matches('/').to_string();
    for route in Api::ALL.map(Api::path) {
        if path.ends_with(route) {
            let base = path[..path.len() - route.len()].to_string();
            if route != api.path() {
                let mut b = url.clone();
                b.set_path(&base);
                return Err(format!(
                    "base_url `{raw}` ends with the route `{route}`, but api is {} (route `{}`): write the base only (`{}`)",
                    api.as_str(),
                    api.path(),
                    b.as_str().trim_end_matches('/')
                ));
            }
            warnings.push(format!(
                "base_url ends with the API route `{route}`; perfgate uses it as given (the base is `{}`)",
                if base.is_empty() { "/" } else { &base }
            ));
            path = base;
            break;
        }
    }
    while path.contains("/v1/v1") {
        path = path.replace("/v1/v1", "/v1");
    }
    if path.is_empty() {
        warnings.push(format!(
            "base_url `{raw}` has no path, so requests go to `{}`; most OpenAI-compatible servers expect `/v1` at the end",
            api.path()
        ));
    }
    let tracking: Vec<String> = url
        .query_pairs()
        .map(|(k, _)| k.into_owned())
        .filter(|k| is_tracking_param(k))
        .collect();
    if !tracking.is_empty() {
        warnings.push(format!(
            "base_url carries tracking parameter{} `{}` (copied from a link?): they are sent with every request and change the scenario fingerprint; remove them",
            if tracking.len() == 1 { "" } else { "s" },
            tracking.join("`, `")
        ));
    }
    url.set_path(&path);
    let mut out = url.to_string();
    if path.is_empty() && url.query().is_none() {
        out = out.trim_end_matches('/').to_string();
    }
    Ok((out, warnings))
}

/// A well-known marketing/click tracking query parameter (`utm_*`, `gclid`, `fbclid`, ...):
/// never part of an API's URL, so a base_url carrying one was most likely pasted from a link.
fn is_tracking_param(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.starts_with("utm_")
        || [
            "gclid", "gbraid", "wbraid", "dclid", "fbclid", "msclkid", "yclid", "twclid", "igshid",
            "mc_cid", "mc_eid", "_ga", "_gl",
        ]
        .contains(&k.as_str())
}

/// Everything needed to validate one scenario.
pub struct BuildCtx<'a> {
    /// Looks up environment variables.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `file:line` of the scenario entry, for messages.
    pub at: String,
}

fn dur(v: &Option<String>, key: &str, default: Duration) -> Result<Duration, String> {
    match v {
        None => Ok(default),
        Some(s) => parse_timeout(s).map_err(|e| format!("endpoint.{key}: {e}")),
    }
}

/// What is wrong with one scenario's values: the scenario (by its name, when it has one) and
/// the problem, which names the key and says what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", match scenario { Some(n) => format!("scenario `{n}`: {problem}"), None => problem.clone() })]
pub struct ScenarioError {
    /// The scenario's `name:` (`None`: it has none, or the name itself is wrong).
    pub scenario: Option<String>,
    /// What was wrong, starting with the key (`endpoint.base_url: ...`).
    pub problem: String,
}

impl ScenarioError {
    /// A problem in the scenario named `name`.
    pub fn named(name: &str, problem: impl Into<String>) -> Self {
        ScenarioError {
            scenario: Some(name.to_string()),
            problem: problem.into(),
        }
    }

    /// A problem before the scenario has a usable name.
    pub fn unnamed(problem: impl Into<String>) -> Self {
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
    let here = |problem: String| ScenarioError::named(&name, problem);
    let endpoint = build_endpoint(&raw.endpoint, ctx).map_err(here)?;
    let request = build_request(&raw.request, endpoint.api).map_err(here)?;
    let load = build_load(&raw.load).map_err(here)?;
    let gate = build_gate(&raw.gate).map_err(here)?;
    if request.max_tokens < 2 && gate.metrics.contains(&Metric::Tpot) {
        return Err(here(format!(
            "TPOT is undefined for max_tokens {} (it needs 2 or more output tokens); raise max_tokens or set gate.metrics without tpot",
            request.max_tokens
        )));
    }
    let fingerprint = fingerprint(&endpoint, &request, &load);
    let server = match (&raw.server, &endpoint.target) {
        (None, _) => None,
        (Some(rs), Target::Http { base_url }) => Some(
            super::server::build(rs, base_url, &endpoint.secrets(), ctx.env).map_err(here)?,
        ),
        (Some(_), Target::Sim(_)) => {
            return Err(here(
                "server: the built-in simulator (sim://) needs no server; give an http:// base_url the started server listens on".into(),
            ))
        }
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

/// The APIs the built-in simulator serves (`src/sim`): chat, completions and the Responses API;
/// not Anthropic's messages.
pub const SIM_APIS: [Api; 3] = [
    Api::OpenaiChat,
    Api::OpenaiCompletions,
    Api::OpenaiResponses,
];

fn build_endpoint(e: &RawEndpoint, ctx: &BuildCtx<'_>) -> Result<Endpoint, String> {
    let mut warnings = Vec::new();
    let raw_url = e
        .base_url
        .as_deref()
        .ok_or("endpoint.base_url is required (e.g. `http://127.0.0.1:8000/v1`, or `sim://` for the built-in simulator)")?;
    let url = expand_env(raw_url, ctx.env).map_err(|m| format!("endpoint.base_url: {m}"))?;
    // The simulator's query holds latency settings, not keys.
    let url_secrets = if url.starts_with("sim://") {
        Vec::new()
    } else {
        let mut v = super::values::url_secret_values(raw_url, ctx.env);
        // a literal `user:pw@` is a credential too, wherever it came from
        v.extend(super::values::userinfo_password(&url).filter(|p| p.len() >= 4));
        v
    };
    // What perfgate shows: the URL with its userinfo and query secrets masked.
    let display_url = url_secrets
        .iter()
        .fold(super::values::mask_userinfo(&url), |u, s| {
            u.replace(s.as_str(), "<redacted>")
        });
    let api = match &e.api {
        None => Api::OpenaiChat,
        Some(name) => name
            .parse::<Api>()
            .map_err(|why| format!("endpoint.api {why}"))?,
    };
    let (target, default_model) = if let Some(rest) = url.strip_prefix("sim://") {
        let query = rest.split_once('?').map(|(_, q)| q).unwrap_or("");
        let cfg =
            SimConfig::from_query(query).map_err(|m| format!("endpoint.base_url `{url}`: {m}"))?;
        let model = cfg.model.clone();
        if !SIM_APIS.contains(&api) {
            return Err(format!(
                "endpoint.api {}: the built-in simulator (sim://) serves {} only; measure {} against a server that speaks it (an http:// or https:// base_url)",
                api.as_str(),
                SIM_APIS.map(Api::as_str).join(", "),
                api.as_str()
            ));
        }
        (Target::Sim(cfg), Some(model))
    } else {
        let (base_url, w) = normalise_base_url(&url, api).map_err(|m| format!("endpoint.{m}"))?;
        warnings.extend(w);
        (Target::Http { base_url }, None)
    };
    let model = match (&e.model, default_model) {
        (Some(m), _) => expand_env(m, ctx.env).map_err(|m| format!("endpoint.model: {m}"))?,
        (None, Some(m)) => m,
        (None, None) => {
            return Err("endpoint.model is required (the model id the server serves)".into())
        }
    };
    let api_key = match &e.api_key_env {
        None => None,
        Some(var) => {
            // Never echo the value when it may be a pasted key.
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "endpoint.api_key_env is not a variable name (a value of {} characters, not shown in case it is a key): write the NAME of the variable that holds the key (e.g. OPENAI_API_KEY), never the key itself",
                    var.chars().count()
                ));
            }
            match (ctx.env)(var) {
                Some(v) if !v.is_empty() => Some(Secret::new(v)),
                Some(_) => return Err(format!("endpoint.api_key_env: environment variable {var} is set but empty; export the API key in it")),
                None if looks_like_a_key(var) => return Err(format!(
                    "endpoint.api_key_env: no environment variable has this name, and the value ({} characters, not shown) looks like a key itself: write the NAME of the variable that holds the key (e.g. OPENAI_API_KEY), never the key, and revoke the key if this file was shared",
                    var.chars().count()
                )),
                None => return Err(format!("endpoint.api_key_env: environment variable {var} is not set; export the API key in it")),
            }
        }
    };
    let mut headers = Vec::new();
    for (k, v) in e.headers.clone().unwrap_or_default() {
        if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
            return Err(format!(
                "endpoint.headers: `{k}` is not a valid header name"
            ));
        }
        let value = expand_env(&v, ctx.env).map_err(|m| format!("endpoint.headers.{k}: {m}"))?;
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err(format!(
                "endpoint.headers.{k}: the value is not a valid header value"
            ));
        }
        headers.push(Header {
            name: k,
            from_env: v.contains("${"),
            value: Secret::new(value),
        });
    }
    Ok(Endpoint {
        target,
        display_url,
        api,
        model,
        api_key_env: e.api_key_env.clone(),
        api_key,
        headers,
        connect_timeout: dur(
            &e.connect_timeout,
            "connect_timeout",
            Duration::from_secs(10),
        )?,
        first_token_timeout: dur(
            &e.first_token_timeout,
            "first_token_timeout",
            Duration::from_secs(60),
        )?,
        idle_timeout: dur(&e.idle_timeout, "idle_timeout", Duration::from_secs(30))?,
        request_timeout: dur(
            &e.request_timeout,
            "request_timeout",
            Duration::from_secs(300),
        )?,
        include_usage: e.include_usage.unwrap_or(true),
        wait_ready: match &e.wait_ready {
            None => None,
            Some(_) => Some(dur(&e.wait_ready, "wait_ready", Duration::from_secs(300))?),
        },
        warnings,
        url_secrets: url_secrets.into_iter().map(Secret::new).collect(),
    })
}

fn build_request(r: &RawRequest, api: Api) -> Result<RequestSpec, String> {
    let given = [
        r.prompt.is_some(),
        r.messages.is_some(),
        r.prompt_tokens.is_some(),
    ];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err("request: give one of `prompt`, `messages` or `prompt_tokens`".into());
    }
    let (messages, prompt) = match (&r.prompt, &r.messages, r.prompt_tokens) {
        (None, None, None) => {
            return Err(
                "request.prompt (or request.messages, or request.prompt_tokens) is required".into(),
            )
        }
        (_, _, Some(n)) => {
            if !(1..=crate::synthetic_prompt::MAX_PROMPT_TOKENS).contains(&n) {
                return Err(format!(
                    "request.prompt_tokens is {n}: use 1..={}",
                    crate::synthetic_prompt::MAX_PROMPT_TOKENS
                ));
            }
            // The first guess; the runner calibrates it against the server's count.
            let p = crate::synthetic_prompt::text(crate::synthetic_prompt::first_guess(n));
            (
                vec![RawMessage {
                    role: "user".into(),
                    content: p.clone(),
                }],
                p,
            )
        }
        (Some(p), _, _) => {
            if p.is_empty() {
                return Err("request.prompt is empty".into());
            }
            (
                vec![RawMessage {
                    role: "user".into(),
                    content: p.clone(),
                }],
                p.clone(),
            )
        }
        (None, Some(ms), _) => {
            if ms.is_empty() {
                return Err("request.messages is empty: give at least one {role, content}".into());
            }
            for m in ms {
                if !matches!(
                    m.role.as_str(),
                    "system" | "user" | "assistant" | "developer"
                ) {
                    return Err(format!(
                        "request.messages: role `{}` is not one of system, user, assistant, developer",
                        m.role
                    ));
                }
            }
            let text = ms
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            (ms.clone(), text)
        }
    };
    if api == Api::OpenaiCompletions && r.messages.is_some() {
        return Err("request.messages needs a chat API; openai-completions takes `prompt`".into());
    }
    let max_tokens = r
        .max_tokens
        .ok_or("request.max_tokens is required (a fixed output length makes TPOT comparable)")?;
    if max_tokens == 0 {
        return Err("request.max_tokens must be at least 1".into());
    }
    let max_tokens_field = match r.max_tokens_field.as_deref() {
        None => None,
        Some(k) => {
            let f: MaxTokensField = k.parse()?;
            let ok = MaxTokensField::allowed(api);
            if !ok.contains(&f) {
                let names: Vec<&str> = ok.iter().map(|f| f.key()).collect();
                return Err(format!(
                    "request.max_tokens_field `{k}` is not a key of {api}: use {}",
                    names.join(" or ")
                ));
            }
            Some(f)
        }
    };
    if let Some(t) = r.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(format!("request.temperature {t} is outside 0..=2"));
        }
    }
    let cache = match r.cache.as_deref().unwrap_or("warm") {
        "warm" => CachePolicy::Warm,
        "cold" => CachePolicy::Cold,
        other => return Err(format!("request.cache `{other}`: use `warm` or `cold`")),
    };
    if let Some(n) = r.extra_body.as_ref().and_then(|b| b.get("n")) {
        if n.as_u64().is_none_or(|n| n != 1) {
            return Err(format!(
                "request.extra_body.n is {n}: perfgate measures one choice per request (n: 1); run more samples instead"
            ));
        }
    }
    for reserved in ["stream", "model"] {
        if r.extra_body
            .as_ref()
            .is_some_and(|b| b.contains_key(reserved))
        {
            return Err(format!(
                "request.extra_body must not set `{reserved}`: perfgate sets it"
            ));
        }
    }
    // A limit in extra_body would silently replace request.max_tokens (and the bound perfgate
    // checks usage against).
    for key in MaxTokensField::ALL.map(MaxTokensField::key) {
        if r.extra_body.as_ref().is_some_and(|b| b.contains_key(key)) {
            return Err(format!(
                "request.extra_body must not set `{key}`: set the output limit with request.max_tokens (and the body key that carries it with request.max_tokens_field)"
            ));
        }
    }
    Ok(RequestSpec {
        messages,
        prompt,
        system: r.system.clone(),
        max_tokens,
        max_tokens_field,
        temperature: r.temperature,
        seed: r.seed,
        ignore_eos: r.ignore_eos,
        min_tokens: r.min_tokens,
        extra_body: r.extra_body.clone().unwrap_or_default(),
        cache,
        prompt_tokens: r.prompt_tokens,
    })
}

fn build_load(l: &RawLoad) -> Result<LoadSpec, String> {
    // Lists were expanded into one scenario per level before this (config::sweep).
    let single = |what: &str, many: bool| {
        if many {
            Err(format!("load.{what}: a list is not allowed here"))
        } else {
            Ok(())
        }
    };
    single(
        "concurrency",
        l.concurrency.as_ref().is_some_and(|c| c.single().is_none()),
    )?;
    single(
        "rate",
        l.rate.as_ref().is_some_and(|r| r.single().is_none()),
    )?;
    let rate = l.rate.as_ref().and_then(|r| r.single());
    let samples = l.samples.unwrap_or(MIN_SAMPLES);
    if samples < MIN_SAMPLES {
        return Err(format!(
            "load.samples is {samples}: at least {MIN_SAMPLES} measured requests are needed for a P50 comparison"
        ));
    }
    if samples > 100_000 {
        return Err(format!("load.samples is {samples}: at most 100000"));
    }
    if let Some(r) = rate {
        if !(r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r)) {
            return Err(format!(
                "load.rate is {}: use {MIN_RATE}..={MAX_RATE} requests per second",
                crate::units::Num(r)
            ));
        }
    }
    // Open loop without a cap: at most OPEN_LOOP_CONCURRENCY requests in flight.
    let default_concurrency = if rate.is_some() {
        OPEN_LOOP_CONCURRENCY
    } else {
        1
    };
    let concurrency = l
        .concurrency
        .as_ref()
        .and_then(|c| c.single())
        .unwrap_or(default_concurrency);
    if concurrency == 0 || concurrency > 4096 {
        return Err(format!("load.concurrency is {concurrency}: use 1..=4096"));
    }
    if let Some(m) = l.max_samples {
        if m < samples || m > 100_000 {
            return Err(format!(
                "load.max_samples is {m}: it must be between load.samples ({samples}) and 100000"
            ));
        }
    }
    Ok(LoadSpec {
        concurrency,
        samples,
        warmup: l.warmup.unwrap_or(2).min(10_000),
        max_samples: l.max_samples.filter(|&m| m > samples),
        rate,
        seed: rate.map(|_| l.seed.unwrap_or(DEFAULT_LOAD_SEED)),
    })
}

/// Lowest accepted `load.rate`, requests/s (a run of 20 requests then lasts about 33 minutes).
pub const MIN_RATE: f64 = 0.01;
/// Highest accepted `load.rate`, requests/s.
pub const MAX_RATE: f64 = 100_000.0;
/// In-flight cap of an open-loop scenario that sets no `load.concurrency`.
pub const OPEN_LOOP_CONCURRENCY: u32 = 1024;
/// Arrival-schedule seed when `load.seed` is not set.
pub const DEFAULT_LOAD_SEED: u64 = 1;

fn parse_metric(s: &str) -> Result<Metric, String> {
    match s {
        "ttft" => Ok(Metric::Ttft),
        "tpot" => Ok(Metric::Tpot),
        "e2e" => Ok(Metric::E2e),
        o => Err(format!(
            "gate.metrics: `{o}` is not a metric: use ttft, tpot, e2e or itl"
        )),
    }
}

fn parse_quantile(s: &str) -> Result<Quantile, String> {
    match s {
        "p50" => Ok(Quantile::P50),
        "p90" => Ok(Quantile::P90),
        "p99" => Ok(Quantile::P99),
        o => Err(format!(
            "gate.quantiles: `{o}` is not a quantile: use p50, p90 or p99"
        )),
    }
}

fn band_from(raw: &RawBand, base: Band, key: &str) -> Result<Band, String> {
    let warn = raw
        .warn
        .as_ref()
        .map(parse_fraction)
        .transpose()
        .map_err(|e| format!("gate.tolerances.{key}.warn: {e}"))?;
    let fail = raw
        .fail
        .as_ref()
        .map(parse_fraction)
        .transpose()
        .map_err(|e| format!("gate.tolerances.{key}.fail: {e}"))?;
    let b = Band {
        warn: warn.unwrap_or(base.warn),
        fail: fail.unwrap_or(base.fail),
    };
    if b.warn > b.fail {
        return Err(format!(
            "gate.tolerances.{key}: warn ({:.0}%) is above fail ({:.0}%)",
            b.warn * 100.0,
            b.fail * 100.0
        ));
    }
    Ok(b)
}

/// A variable name that is really a pasted key: long, and either a known key prefix or mixed
/// lower-case letters and digits (variable names are conventionally UPPER_SNAKE_CASE).
fn looks_like_a_key(v: &str) -> bool {
    let lower = v.chars().any(|c| c.is_ascii_lowercase());
    let digit = v.chars().any(|c| c.is_ascii_digit());
    v.len() >= 20 && (v.starts_with("sk") || v.starts_with("hf_") || (lower && digit))
}

/// The first value listed twice, if any.
fn first_duplicate<T: PartialEq + Copy>(v: &[T]) -> Option<T> {
    v.iter()
        .enumerate()
        .find(|(i, x)| v[..*i].contains(x))
        .map(|(_, x)| *x)
}

fn build_gate(g: &RawGate) -> Result<GateSpec, String> {
    // `itl` is listed among the metrics but is not a per-request value: the pooled gaps of
    // every request are gated by their own check (gate::itl_check). Opt-in: the tail of the
    // gaps also measures the client's scheduling jitter, which drifts between runs on a busy
    // runner more than TPOT's run spread shows (docs/gate.md "ITL P99").
    let itl_listed = g
        .metrics
        .as_ref()
        .is_some_and(|v| v.iter().any(|s| s == "itl"));
    if g.metrics
        .as_ref()
        .is_some_and(|v| v.iter().filter(|s| *s == "itl").count() > 1)
    {
        return Err("gate.metrics lists itl twice: each metric is gated once (a duplicate would add rows and inflate the Holm family)".into());
    }
    let metrics = match &g.metrics {
        None => vec![Metric::Ttft, Metric::Tpot],
        Some(v) => v
            .iter()
            .filter(|s| *s != "itl")
            .map(|s| parse_metric(s))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if metrics.is_empty() {
        return Err(if itl_listed {
            "gate.metrics lists only itl: gate at least one of ttft, tpot, e2e beside it (the ITL tail alone would pass a server whose every request is slower to start)".into()
        } else {
            "gate.metrics is empty: gate at least one of ttft, tpot, e2e".into()
        });
    }
    if let Some(d) = first_duplicate(&metrics) {
        return Err(format!(
            "gate.metrics lists {} twice: each metric is gated once (a duplicate would add rows and inflate the Holm family)",
            d.as_str()
        ));
    }
    let quantiles = match &g.quantiles {
        None => vec![Quantile::P50, Quantile::P99],
        Some(v) => v
            .iter()
            .map(|s| parse_quantile(s))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if quantiles.is_empty() {
        return Err("gate.quantiles is empty: then only the error rate would be gated and a 10x slower server would pass; list at least p50 (default [p50, p99])".into());
    }
    if let Some(d) = first_duplicate(&quantiles) {
        return Err(format!(
            "gate.quantiles lists {} twice: each quantile is gated once (a duplicate would add rows and inflate the Holm family)",
            d.as_str()
        ));
    }
    let tol = g.tolerances.clone().unwrap_or_default();
    for key in tol.keys() {
        if key == "itl_p99" {
            if !itl_listed {
                return Err("gate.tolerances.itl_p99 is set but gate.metrics does not list itl: add itl to gate.metrics to gate the ITL P99 (docs/gate.md \"ITL P99\")".into());
            }
            continue;
        }
        let ok = match key.split_once('_') {
            None => parse_quantile(key).is_ok(),
            Some((m, q)) => parse_metric(m).is_ok() && parse_quantile(q).is_ok(),
        };
        if !ok {
            return Err(format!(
                "gate.tolerances: `{key}` is not a key: use p50, p90, p99, a metric-specific key like ttft_p50 or tpot_p99, or itl_p99"
            ));
        }
    }
    let mut bands = BTreeMap::new();
    for m in [Metric::Ttft, Metric::Tpot, Metric::E2e] {
        for q in [Quantile::P50, Quantile::P90, Quantile::P99] {
            let mut b = default_band(q);
            if let Some(r) = tol.get(q.as_str()) {
                b = band_from(r, b, q.as_str())?;
            }
            let specific = format!("{}_{}", m.as_str(), q.as_str());
            if let Some(r) = tol.get(&specific) {
                b = band_from(r, b, &specific)?;
            }
            bands.insert((m, q), b);
        }
    }
    let mut min_delta_ms = BTreeMap::from([
        (Metric::Ttft, 5.0),
        (Metric::Tpot, 0.5),
        (Metric::E2e, 10.0),
    ]);
    for (k, v) in g.min_delta.clone().unwrap_or_default() {
        let m = parse_metric(&k)
            .map_err(|_| format!("gate.min_delta: `{k}` is not a metric: use ttft, tpot or e2e"))?;
        min_delta_ms.insert(
            m,
            parse_ms(&v).map_err(|e| format!("gate.min_delta.{k}: {e}"))?,
        );
    }
    let alpha = g.alpha.unwrap_or(0.01);
    if !(alpha > 0.0 && alpha <= 0.2) {
        return Err(format!("gate.alpha {} is outside (0, 0.2]: the default 0.01 fails an unchanged endpoint about 1% of the time", crate::units::Num(alpha)));
    }
    let slo = build_slo(g.slo.as_ref())?;
    // With an error-rate objective the SLO check judges failed requests (FAIL, exit 1), so by
    // default they do not stop the scenario as unmeasurable first.
    let default_max_error_rate = if slo.iter().any(|o| matches!(o, Objective::ErrorRate { .. })) {
        1.0
    } else {
        0.0
    };
    let max_error_rate = g
        .max_error_rate
        .as_ref()
        .map(parse_fraction)
        .transpose()
        .map_err(|e| format!("gate.max_error_rate: {e}"))?
        .unwrap_or(default_max_error_rate);
    if max_error_rate > 1.0 {
        return Err("gate.max_error_rate must be between 0% and 100%".into());
    }
    let confirm = g.confirm.unwrap_or(0);
    if confirm > 5 {
        return Err(format!(
            "gate.confirm is {confirm}: use 0 to 5 confirmation runs"
        ));
    }
    let itl = match (itl_listed, tol.get("itl_p99")) {
        (false, _) => None,
        (true, None) => Some(ITL_BAND),
        (true, Some(r)) => Some(band_from(r, ITL_BAND, "itl_p99")?),
    };
    Ok(GateSpec {
        metrics,
        quantiles,
        bands,
        min_delta_ms,
        alpha,
        max_error_rate,
        confirm,
        slo,
        itl,
    })
}

/// `gate.slo`: keys `<metric>_<quantile>` (ttft, tpot, e2e; p50, p90, p99) with a time
/// (`500ms`, `2s`), and `error_rate` with a share (`1%`).
fn build_slo(
    raw: Option<&BTreeMap<String, crate::config::file::RawNumber>>,
) -> Result<Vec<Objective>, String> {
    let mut out = Vec::new();
    for (k, v) in raw.into_iter().flatten() {
        if k == "error_rate" {
            let max = parse_fraction(v).map_err(|e| format!("gate.slo.error_rate: {e}"))?;
            if max == 0.0 {
                // P(Bin(n, 0) <= 0) is 1 at every n: no run can show a 0 % objective met, so it
                // could only ever WARN or FAIL (it used to PASS at 0 failures, inconsistently).
                return Err("gate.slo.error_rate is 0%: no number of requests can show a 0% objective met (any share above 0 could explain 0 failures), so it could never PASS; to make any failed request stop the gate, leave error_rate out (gate.max_error_rate defaults to 0%: one failure is could-not-measure, exit 3), or set a share the endpoint must stay below, e.g. 1%".into());
            }
            if !(0.0..1.0).contains(&max) {
                return Err(format!(
                    "gate.slo.error_rate is {:.1}%: use above 0% up to (not including) 100%",
                    max * 100.0
                ));
            }
            out.push(Objective::ErrorRate { max });
            continue;
        }
        let parsed = k
            .split_once('_')
            .and_then(|(m, q)| Some((parse_metric(m).ok()?, parse_quantile(q).ok()?)));
        let Some((metric, quantile)) = parsed else {
            return Err(format!(
                "gate.slo: `{k}` is not an objective: use <metric>_<quantile> (metric ttft, tpot or e2e; quantile p50, p90 or p99), e.g. ttft_p90: 500ms, or error_rate: 1%"
            ));
        };
        let max_ms = parse_ms(v).map_err(|e| format!("gate.slo.{k}: {e}"))?;
        if !(max_ms > 0.0 && max_ms.is_finite()) {
            return Err(format!("gate.slo.{k} must be a time above 0, e.g. 500ms"));
        }
        out.push(Objective::Latency {
            metric,
            quantile,
            max_ms,
        });
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    Ok(out)
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
    short_hash(&v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::OneOrMany;

    #[test]
    fn names_are_checked() {
        assert!(check_name("short-prompt_v1.2").is_ok());
        assert!(check_name("../x").unwrap_err().contains("'/'"));
        assert!(check_name("..").is_err());
        assert!(check_name("").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
        // aligned listings (`validate`, `bless`) pad a name like a string
        let n = ScenarioName::new("alpha").unwrap();
        assert_eq!(format!("{n:<8}|{n}|"), "alpha   |alpha|");
        assert!(check_name("a b").is_err());
    }

    #[test]
    fn open_loop_rate() {
        let raw = |rate: Option<f64>, conc: Option<u32>, seed: Option<u64>| RawLoad {
            rate: rate.map(OneOrMany::One),
            concurrency: conc.map(OneOrMany::One),
            seed,
            ..RawLoad::default()
        };
        let l = build_load(&raw(Some(50.0), None, None)).unwrap();
        assert_eq!(l.rate, Some(50.0));
        assert_eq!(l.concurrency, OPEN_LOOP_CONCURRENCY);
        assert_eq!(l.seed, Some(DEFAULT_LOAD_SEED));
        let l = build_load(&raw(Some(5.0), Some(2), Some(9))).unwrap();
        assert_eq!((l.concurrency, l.seed), (2, Some(9)));
        let closed = build_load(&raw(None, None, Some(9))).unwrap();
        assert_eq!(
            (closed.rate, closed.seed, closed.concurrency),
            (None, None, 1)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            let e = build_load(&raw(Some(bad), None, None)).unwrap_err();
            assert!(e.contains("load.rate"), "{e}");
        }
    }

    #[test]
    fn itl_is_opt_in_and_listed_like_a_metric() {
        let gate = |g: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi, max_tokens: 4}}\n    gate: {g}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].gate.clone())
        };
        let d = gate("{}").unwrap();
        assert_eq!(d.itl, None);
        assert_eq!(d.metrics, vec![Metric::Ttft, Metric::Tpot]);
        let g = gate("{metrics: [ttft, tpot, itl]}").unwrap();
        assert_eq!(g.itl, Some(ITL_BAND));
        assert_eq!(g.metrics, vec![Metric::Ttft, Metric::Tpot]);
        let g = gate("{metrics: [tpot, itl], tolerances: {itl_p99: {fail: 30%}}}").unwrap();
        assert_eq!(g.metrics, vec![Metric::Tpot]);
        assert_eq!(
            g.itl,
            Some(Band {
                warn: 0.10,
                fail: 0.30
            })
        );
        for (bad, want) in [
            ("{metrics: [itl]}", "lists only itl"),
            ("{metrics: [ttft, itl, itl]}", "lists itl twice"),
            (
                "{metrics: [ttft], tolerances: {itl_p99: {fail: 30%}}}",
                "does not list itl",
            ),
            ("{metrics: [ttfb]}", "ttft, tpot, e2e or itl"),
        ] {
            let e = gate(bad).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
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
        assert_ne!(open, fp("{concurrency: 4, rate: 20}"));
    }

    #[test]
    fn sequential_looks() {
        let l = |samples, max| LoadSpec {
            concurrency: 1,
            samples,
            warmup: 0,
            max_samples: max,
            rate: None,
            seed: None,
        };
        assert_eq!(l(20, None).looks(), vec![20]);
        assert_eq!(l(20, Some(300)).looks(), vec![20, 50, 100, 200, 300]);
        assert_eq!(l(100, Some(150)).looks(), vec![100, 150]);
        assert_eq!(
            l(60, Some(1000)).looks(),
            vec![60, 120, 240, 480, 960, 1000]
        );
    }

    #[test]
    fn the_simulator_serves_openai_apis_only() {
        let parse = |api: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://?ttft_ms=5', api: {api}}}\n    request: {{prompt: hi, max_tokens: 4}}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].endpoint.api)
        };
        for api in SIM_APIS {
            assert_eq!(parse(api.as_str()).unwrap(), api);
        }
        let e = parse("anthropic-messages").unwrap_err().to_string();
        assert!(
            e.contains("endpoint.api anthropic-messages: the built-in simulator (sim://) serves openai-chat, openai-completions, openai-responses only"),
            "{e}"
        );
    }

    #[test]
    fn max_tokens_field_is_checked_per_api() {
        let parse = |api: &str, field: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: m, api: {api}}}\n    request: {{prompt: hi, max_tokens: 4{field}}}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].request.clone())
        };
        let r = parse("openai-chat", ", max_tokens_field: max_completion_tokens").unwrap();
        assert_eq!(r.max_tokens_key(Api::OpenaiChat), "max_completion_tokens");
        let r = parse("openai-responses", "").unwrap();
        assert_eq!(r.max_tokens_key(Api::OpenaiResponses), "max_output_tokens");
        let e = parse(
            "anthropic-messages",
            ", max_tokens_field: max_completion_tokens",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("use max_tokens"), "{e}");
        let e = parse("openai-chat", ", max_tokens_field: max_new_tokens")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_completion_tokens"), "{e}");
    }

    // Issue 28: `extra_body: {max_output_tokens: 100}` silently replaced max_tokens 8 (merged
    // last into the body); each limit key is refused there, naming the setting to use.
    #[test]
    fn an_output_limit_in_extra_body_is_refused() {
        for (api, key) in [
            ("openai-responses", "max_output_tokens"),
            ("openai-chat", "max_tokens"),
            ("openai-chat", "max_completion_tokens"),
        ] {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: m, api: {api}}}\n    request: {{prompt: hi, max_tokens: 8, extra_body: {{{key}: 100}}}}\n");
            let e = crate::config::parse_str(&y, "t.yaml", &|_| None)
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("request.extra_body must not set `{key}`"))
                    && e.contains("request.max_tokens")
                    && e.contains("request.max_tokens_field"),
                "{e}"
            );
        }
    }

    #[test]
    fn base_urls_are_normalised() {
        let n = |u: &str| normalise_base_url(u, Api::OpenaiChat);
        assert_eq!(
            n("http://127.0.0.1:8000/v1/").unwrap().0,
            "http://127.0.0.1:8000/v1"
        );
        assert_eq!(n("http://h:8000/v1//").unwrap().0, "http://h:8000/v1");
        assert_eq!(n("http://h/v1/v1").unwrap().0, "http://h/v1");
        assert_eq!(
            n("https://h/openai/v1?api-version=1").unwrap().0,
            "https://h/openai/v1?api-version=1"
        );
        assert_eq!(
            n("https://h/api/paas/v4").unwrap().0,
            "https://h/api/paas/v4"
        );
        // no /v1 inserted, with a warning
        let (u, w) = n("http://h:8000").unwrap();
        assert_eq!(u, "http://h:8000");
        assert!(w[0].contains("expect `/v1`"), "{w:?}");
        // a pasted full URL is cut back to its base, with a note
        let (u, w) = n("http://h:8000/v1/chat/completions").unwrap();
        assert_eq!(u, "http://h:8000/v1");
        assert_eq!(w.len(), 1);
        // ...but the route of another API is an error
        let e =
            normalise_base_url("http://h/v1/chat/completions", Api::AnthropicMessages).unwrap_err();
        assert!(e.contains("`http://h/v1`"), "{e}");
        // the Responses API's route too (it was appended again: .../responses/responses)
        let (u, w) = normalise_base_url("http://h/v1/responses", Api::OpenaiResponses).unwrap();
        assert_eq!((u.as_str(), w.len()), ("http://h/v1", 1));
        let e = n("http://h/v1/responses").unwrap_err();
        assert!(e.contains("api is openai-chat"), "{e}");
        assert!(n("ftp://h").is_err());
        assert!(n("not a url").is_err());
    }

    #[test]
    fn tracking_parameters_are_flagged() {
        let n = |u: &str| normalise_base_url(u, Api::OpenaiChat).unwrap();
        let (u, w) = n("https://h/v1?utm_source=x&api-version=1&UTM_Campaign=y&gclid=z");
        // kept as given (the query belongs to the user), but flagged once, naming each key
        assert_eq!(
            u,
            "https://h/v1?utm_source=x&api-version=1&UTM_Campaign=y&gclid=z"
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("tracking parameters `utm_source`, `UTM_Campaign`, `gclid`"),
            "{w:?}"
        );
        assert!(!w[0].contains("api-version"), "{w:?}");
        for key in ["utm_medium", "utm_term", "utm_content", "fbclid", "msclkid"] {
            let (_, w) = n(&format!("http://h:8000/v1?{key}=1"));
            assert!(
                w.len() == 1 && w[0].contains(&format!("tracking parameter `{key}`")),
                "{key}: {w:?}"
            );
        }
        // ordinary query parameters are not tracking
        for u in [
            "https://h/openai/v1?api-version=2024-10-21",
            "http://h/v1?utmost=1&source=x",
        ] {
            assert!(n(u).1.is_empty(), "{u}");
        }
    }
}
