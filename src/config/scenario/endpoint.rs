//! The validated `endpoint:` section: where requests go (an HTTP base URL or the built-in
//! simulator), the dialect and model, the API key and headers (secrets kept out of `Debug` and
//! every output), and the timeouts.

use super::base_url::normalise_base_url;
use crate::api::Api;
use crate::config::common::{bail, ensure, At, BuildCtx, Invalid, Secret};
use crate::config::file::RawEndpoint;
use crate::config::values::{expand_env, parse_timeout, timeout_or};
use crate::sim::SimConfig;
use std::time::Duration;

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
            .fold(crate::config::values::mask_userinfo(&u), |u, s| {
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

pub(super) fn build_endpoint(e: &RawEndpoint, ctx: &BuildCtx<'_>) -> Result<Endpoint, Invalid> {
    let mut warnings = Vec::new();
    let raw_url = e
        .base_url
        .as_deref()
        .ok_or("endpoint.base_url is required (e.g. `http://127.0.0.1:8000/v1`, or `sim://` for the built-in simulator)")?;
    let url = expand_env(raw_url, ctx.env).at("endpoint.base_url")?;
    // The simulator's query holds latency settings, not keys.
    let url_secrets = if url.starts_with("sim://") {
        Vec::new()
    } else {
        let mut v = crate::config::values::url_secret_values(raw_url, ctx.env);
        // a literal `user:pw@` is a credential too, wherever it came from
        v.extend(crate::config::values::userinfo_password(&url).filter(|p| p.len() >= 4));
        v
    };
    // What perfgate shows: the URL with its userinfo and query secrets masked.
    let display_url = url_secrets
        .iter()
        .fold(crate::config::values::mask_userinfo(&url), |u, s| {
            u.replace(s.as_str(), "<redacted>")
        });
    let api = match &e.api {
        None => Api::OpenaiChat,
        Some(name) => name
            .parse::<Api>()
            .map_err(|why| format!("endpoint.api {why}"))?,
    };
    let (target, default_model, w) = target(&url, api)?;
    warnings.extend(w);
    let model = match (&e.model, default_model) {
        (Some(m), _) => expand_env(m, ctx.env).at("endpoint.model")?,
        (None, Some(m)) => m,
        (None, None) => bail!("endpoint.model is required (the model id the server serves)"),
    };
    let api_key = api_key(e, ctx)?;
    let headers = headers(e, ctx)?;
    Ok(Endpoint {
        target,
        display_url,
        api,
        model,
        api_key_env: e.api_key_env.clone(),
        api_key,
        headers,
        connect_timeout: timeout_or(&e.connect_timeout, secs(10)).at("endpoint.connect_timeout")?,
        first_token_timeout: timeout_or(&e.first_token_timeout, secs(60))
            .at("endpoint.first_token_timeout")?,
        idle_timeout: timeout_or(&e.idle_timeout, secs(30)).at("endpoint.idle_timeout")?,
        request_timeout: timeout_or(&e.request_timeout, secs(300))
            .at("endpoint.request_timeout")?,
        include_usage: e.include_usage.unwrap_or(true),
        wait_ready: e
            .wait_ready
            .as_deref()
            .map(parse_timeout)
            .transpose()
            .at("endpoint.wait_ready")?,
        warnings,
        url_secrets: url_secrets.into_iter().map(Secret::new).collect(),
    })
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Where `url` (expanded) sends requests: the built-in simulator (with its model, for an API it
/// serves) or an HTTP base URL, normalised, with its warnings.
fn target(url: &str, api: Api) -> Result<(Target, Option<String>, Vec<String>), Invalid> {
    if let Some(rest) = url.strip_prefix("sim://") {
        let query = rest.split_once('?').map(|(_, q)| q).unwrap_or("");
        let cfg =
            SimConfig::from_query(query).map_err(|m| format!("endpoint.base_url `{url}`: {m}"))?;
        let model = cfg.model.clone();
        let served: Vec<&str> = Api::simulated_all().iter().map(|a| a.as_str()).collect();
        ensure!(
            api.simulated(),
            "endpoint.api {api}: the built-in simulator (sim://) serves {} only; measure {api} against a server that speaks it (an http:// or https:// base_url)",
            served.join(", ")
        );
        Ok((Target::Sim(cfg), Some(model), Vec::new()))
    } else {
        let (base_url, w) = normalise_base_url(url, api).map_err(|m| format!("endpoint.{m}"))?;
        Ok((Target::Http { base_url }, None, w))
    }
}

/// `endpoint.api_key_env`: the key, read from the variable it names (never the key itself).
fn api_key(e: &RawEndpoint, ctx: &BuildCtx<'_>) -> Result<Option<Secret>, Invalid> {
    Ok(match &e.api_key_env {
        None => None,
        Some(var) => {
            // Never echo the value when it may be a pasted key.
            let n = var.chars().count();
            ensure!(
                !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "endpoint.api_key_env is not a variable name (a value of {n} characters, not shown in case it is a key): write the NAME of the variable that holds the key (e.g. OPENAI_API_KEY), never the key itself"
            );
            match (ctx.env)(var) {
                Some(v) if !v.is_empty() => Some(Secret::new(v)),
                Some(_) => bail!("endpoint.api_key_env: environment variable {var} is set but empty; export the API key in it"),
                None if looks_like_a_key(var) => bail!("endpoint.api_key_env: no environment variable has this name, and the value ({n} characters, not shown) looks like a key itself: write the NAME of the variable that holds the key (e.g. OPENAI_API_KEY), never the key, and revoke the key if this file was shared"),
                None => bail!("endpoint.api_key_env: environment variable {var} is not set; export the API key in it"),
            }
        }
    })
}

/// `endpoint.headers`: checked names and values, `${ENV}` expanded (and then secret).
fn headers(e: &RawEndpoint, ctx: &BuildCtx<'_>) -> Result<Vec<Header>, Invalid> {
    let mut headers = Vec::new();
    for (k, v) in e.headers.clone().unwrap_or_default() {
        ensure!(
            reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_ok(),
            "endpoint.headers: `{k}` is not a valid header name"
        );
        let value = expand_env(&v, ctx.env).at(format!("endpoint.headers.{k}"))?;
        ensure!(
            reqwest::header::HeaderValue::from_str(&value).is_ok(),
            "endpoint.headers.{k}: the value is not a valid header value"
        );
        headers.push(Header {
            name: k,
            from_env: v.contains("${"),
            value: Secret::new(value),
        });
    }
    Ok(headers)
}

/// A variable name that is really a pasted key: long, and either a known key prefix or mixed
/// lower-case letters and digits (variable names are conventionally UPPER_SNAKE_CASE).
fn looks_like_a_key(v: &str) -> bool {
    let lower = v.chars().any(|c| c.is_ascii_lowercase());
    let digit = v.chars().any(|c| c.is_ascii_digit());
    v.len() >= 20 && (v.starts_with("sk") || v.starts_with("hf_") || (lower && digit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulator_serves_openai_apis_only() {
        let parse = |api: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'sim://?ttft_ms=5', api: {api}}}\n    request: {{prompt: hi, max_tokens: 4}}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].endpoint.api)
        };
        for api in Api::simulated_all() {
            assert_eq!(parse(api.as_str()).unwrap(), api);
        }
        let e = parse("anthropic-messages").unwrap_err().to_string();
        assert!(
            e.contains("endpoint.api anthropic-messages: the built-in simulator (sim://) serves openai-chat, openai-completions, openai-responses only"),
            "{e}"
        );
    }
}
