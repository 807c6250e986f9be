//! The validated `server:` block: a server process perfgate starts before the scenarios that
//! name it, waits for until it is ready, and stops afterwards (src/server/ runs it).
//!
//! Invariants: `command` is non-empty; every `${ENV}` is expanded; `shown_command` never holds a
//! secret (values of flags that name a key, token, secret, password or auth, `${VAR}` values of
//! such variables, and the endpoint's own secrets are `<redacted>`); `env` values are never
//! shown, only their names.

use super::common::Secret;
use super::file::{RawMetrics, RawServer};
use super::values::{expand_env, timeout_or};
use crate::config::common::{bail, ensure, At, Invalid};
use std::path::PathBuf;
use std::time::Duration;

/// Default `ready_timeout`: model loads take minutes on a CI runner.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(600);
/// Default `stop_timeout`: SIGTERM, then SIGKILL after this long.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `log_tail`: log lines shown on a failure.
pub const DEFAULT_LOG_TAIL: usize = 20;

/// How perfgate knows the server is ready.
#[derive(Debug, Clone, PartialEq)]
pub enum Ready {
    /// `GET url` answers 200 (the default, `<base_url>/models`) or any 2xx (an explicit URL).
    Http {
        /// The URL polled.
        url: String,
        /// True for the default `<base_url>/models`, which must answer exactly 200.
        default: bool,
    },
    /// A line of the server's log contains this text.
    Log(String),
}

/// A validated `server:` block.
#[derive(Clone, PartialEq)]
pub struct ServerSpec {
    /// argv after `${ENV}` expansion; may hold secrets: show [`ServerSpec::shown_command`].
    pub command: Vec<String>,
    /// The command line as shown everywhere (shell-quoted, secrets `<redacted>`).
    pub shown_command: String,
    /// The `${VAR:-default}` defaults the command runs with (their variables unset).
    pub defaults: Vec<DefaultTaken>,
    /// Extra environment; the values are never shown.
    pub env: Vec<(String, Secret)>,
    /// Working directory of the server.
    pub cwd: Option<PathBuf>,
    /// Readiness.
    pub ready: Ready,
    /// Longest wait from the start to the first ready answer.
    pub ready_timeout: Duration,
    /// Wait after SIGTERM before SIGKILL.
    pub stop_timeout: Duration,
    /// Log file (stdout and stderr); `None`: a new file in the temp directory.
    pub log: Option<PathBuf>,
    /// Log lines shown on a failure.
    pub log_tail: usize,
    /// Prometheus text endpoint, or `None` when scraping is off.
    pub metrics_url: Option<String>,
    /// `scheme://host:port` of the endpoint, for identity probes (`/props`, `/version`, ...).
    pub origin: String,
    /// Values to redact from everything shown (log tails, messages).
    pub secrets: Vec<String>,
    /// Identifies the block: scenarios whose spec has the same key share one process.
    pub key: String,
    /// The readiness probe keeps its first pause (25 ms) instead of backing off to 250 ms: set
    /// when the scenario gates its cold start (`gate.cold_start`), so the time to ready is known
    /// to within one probe. Not part of the block's identity.
    pub fine_probe: bool,
}

impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ServerSpec")
            .field("command", &self.shown_command)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("ready", &self.ready)
            .field("ready_timeout", &self.ready_timeout)
            .field("stop_timeout", &self.stop_timeout)
            .field("log", &self.log)
            .field("metrics_url", &self.metrics_url)
            .finish()
    }
}

/// True for a flag, variable or header name that usually holds a credential: one of its words
/// (split at anything not a letter or digit, lowercased) is or ends with `key` or `token`
/// (`--api-key`, `HF_TOKEN`, `apikey`), or starts with `auth`, `pass`, `secret` or `credential`
/// (`Authorization`, `--password`, `passwd`). `--max-num-batched-tokens`, `--tokenizer` and
/// `--ssl-keyfile` name none.
pub fn names_a_secret(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .map(|w| w.to_ascii_lowercase())
        .any(|w| {
            ["key", "token"].iter().any(|s| w.ends_with(s))
                || ["auth", "pass", "secret", "credential"]
                    .iter()
                    .any(|s| w.starts_with(s))
        })
}

/// The credentials one argv word carries: values of `NAME=VALUE` assignments whose NAME names a
/// secret (after `-`, `=`, `?`, `&` or `;`: `HF_TOKEN=V`, `--env=HF_TOKEN=V`, `u?api_key=V&x=1`),
/// the value of a `Name: value` header whose name does (and its credential after `Bearer ` or
/// `Basic `), and the userinfo of a URL in it (`https://user:pw@host`: `user:pw` and `pw`).
pub fn word_secrets(w: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (eq, _) in w.match_indices('=') {
        let start = w[..eq].rfind(['=', '?', '&', ';']).map_or(0, |i| i + 1);
        let name = w[start..eq].trim_start_matches('-');
        if name.is_empty() || !names_a_secret(name) {
            continue;
        }
        let rest = &w[eq + 1..];
        // a query parameter ends at `&`; any other value runs to the end of the word
        let value = if w[..eq].contains('?') {
            rest.split('&').next().unwrap_or(rest)
        } else {
            rest
        };
        if !value.is_empty() {
            out.push(value.to_string());
        }
    }
    if let Some((name, value)) = w.split_once(':') {
        let header_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if header_name && names_a_secret(name) && !value.starts_with("//") {
            let value = value.trim();
            out.push(value.to_string());
            if let Some((_, cred)) = value.split_once(' ') {
                out.push(cred.trim().to_string());
            }
        }
    }
    if let Some(scheme) = w.find("://") {
        let url = &w[scheme..];
        let end = url[3..].find(['/', '?', '#']).map_or(url.len(), |j| j + 3);
        if let Some(at) = url[3..end].rfind('@') {
            let userinfo = &url[3..3 + at];
            out.push(userinfo.to_string());
            if let Some((_, pw)) = userinfo.split_once(':') {
                out.push(pw.to_string());
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Quotes one argv word for display, as a POSIX shell would need it.
fn quote(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%<>".contains(c))
    {
        w.to_string()
    } else {
        // control characters (a line end, an ANSI escape) shown escaped: the command is
        // printed on stderr and in reports, where they could fake a line or a workflow command
        let w: String = w
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The `${VAR}` and `${VAR:-default}` references of a raw word: each name and its default.
fn references(raw: &str) -> Vec<(&str, Option<&str>)> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.find("${") {
        let body = &rest[i + 2..];
        let Some(end) = body.find('}') else { break };
        let inner = &body[..end];
        out.push(match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        });
        rest = &body[end + 1..];
    }
    out
}

/// The `${VAR}` names a raw word refers to.
fn referenced_vars(raw: &str) -> Vec<String> {
    references(raw)
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect()
}

/// A `${VAR:-default}` in `server.command` whose variable is not set (or empty), so the default
/// runs: `perfgate validate` names each (issue 46: an unset LLAMA_MODEL left the template's
/// `model.gguf` in the command, and nothing said so before the server failed to start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultTaken {
    pub var: String,
    /// The default as written; `<redacted>` when the variable names a credential.
    pub value: String,
}

impl std::fmt::Display for DefaultTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is not set, so its default `{}` runs",
            self.var, self.value
        )
    }
}

/// The defaults `words` fall back to in the environment `env`, in order, each variable once.
fn defaults_taken(words: &[String], env: &dyn Fn(&str) -> Option<String>) -> Vec<DefaultTaken> {
    let mut out: Vec<DefaultTaken> = Vec::new();
    for w in words {
        for (name, default) in references(w) {
            let Some(d) = default else { continue };
            if env(name).is_some_and(|v| !v.is_empty()) || out.iter().any(|t| t.var == name) {
                continue;
            }
            out.push(DefaultTaken {
                var: name.to_string(),
                value: if names_a_secret(name) {
                    "<redacted>".to_string()
                } else {
                    d.to_string()
                },
            });
        }
    }
    out
}

/// Validates a `server:` block for an endpoint at `base_url` (already normalised).
/// `endpoint_secrets` (the API key, ...) are redacted from the shown command too.
///
/// Errors: one message naming the key and what to write instead.
pub fn build(
    raw: &RawServer,
    base_url: &str,
    endpoint_secrets: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSpec, Invalid> {
    let words = raw
        .command
        .as_ref()
        .filter(|c| !c.is_empty())
        .ok_or("server.command is required: the server's argv as a list, e.g. [llama-server, -m, model.gguf, --port, \"8080\"]")?;
    let mut command = Vec::with_capacity(words.len());
    let mut secrets: Vec<String> = endpoint_secrets.to_vec();
    for (i, w) in words.iter().enumerate() {
        let v = expand_env(w, env).at(format!("server.command[{i}]"))?;
        if referenced_vars(w).iter().any(|n| names_a_secret(n)) {
            for n in referenced_vars(w) {
                if let Some(val) = env(&n).filter(|v| !v.is_empty()) {
                    secrets.push(val);
                }
            }
        }
        command.push(v);
    }
    ensure!(
        !command[0].is_empty(),
        "server.command[0] is empty: name the program to run"
    );
    // Values of credential flags (`--api-key VALUE`), of credential assignments anywhere in a
    // word (`--api-key=V`, `-e HF_TOKEN=V`, `--env=HF_TOKEN=V`, `?token=V`), of credential
    // headers (`-H 'Authorization: Bearer V'`) and URL userinfo (`https://user:V@host`).
    for (i, w) in command.iter().enumerate() {
        if let Some(flag) = w.strip_prefix('-') {
            if !flag.contains('=') && names_a_secret(flag) {
                if let Some(next) = command.get(i + 1) {
                    secrets.push(next.clone());
                }
            }
        }
        secrets.extend(word_secrets(w));
    }
    let mut env_out = Vec::new();
    for (k, v) in raw.env.clone().unwrap_or_default() {
        ensure!(
            !k.is_empty() && !k.contains(['=', '\0']),
            "server.env: `{k}` is not a variable name"
        );
        let val = expand_env(&v, env).at(format!("server.env.{k}"))?;
        if names_a_secret(&k) || v.contains("${") {
            secrets.push(val.clone());
        }
        env_out.push((k, Secret::new(val)));
    }
    secrets.retain(|s| s.chars().count() >= 4);
    secrets.sort();
    secrets.dedup();
    let shown_command = crate::redact::redact(
        &command
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" "),
        &secrets,
    );
    let origin = match url::Url::parse(base_url) {
        Ok(u) => origin_of_url(&u),
        Err(e) => bail!("server: base_url `{base_url}` is not a URL ({e})"),
    };
    let ready = match &raw.ready {
        None => Ready::Http {
            url: models_url(base_url),
            default: true,
        },
        Some(r) => match (&r.url, &r.log) {
            (Some(u), None) => {
                let u = expand_env(u, env).at("server.ready.url")?;
                let p = url::Url::parse(&u).map_err(|e| {
                    format!("server.ready.url `{u}` is not a URL ({e}); write it like `http://127.0.0.1:8080/health`")
                })?;
                ensure!(
                    matches!(p.scheme(), "http" | "https"),
                    "server.ready.url `{u}`: use http:// or https://"
                );
                Ready::Http {
                    url: u,
                    default: false,
                }
            }
            (None, Some(t)) if t.contains(['\n', '\r']) => bail!(
                "server.ready.log `{}` holds a line end: give text from within one line",
                t.escape_debug()
            ),
            (None, Some(t)) if !t.is_empty() => Ready::Log(t.clone()),
            _ => bail!("server.ready: give `url: <URL answering 2xx when ready>` or `log: <text of the log line that says it is ready>`, one of them"),
        },
    };
    let ready_timeout =
        timeout_or(&raw.ready_timeout, DEFAULT_READY_TIMEOUT).at("server.ready_timeout")?;
    let stop_timeout =
        timeout_or(&raw.stop_timeout, DEFAULT_STOP_TIMEOUT).at("server.stop_timeout")?;
    let metrics_url = match &raw.metrics {
        None | Some(RawMetrics::On(true)) => Some(format!("{origin}/metrics")),
        Some(RawMetrics::On(false)) => None,
        Some(RawMetrics::Url(u)) => {
            let u = expand_env(u, env).at("server.metrics")?;
            url::Url::parse(&u).map_err(|e| format!("server.metrics `{u}` is not a URL ({e})"))?;
            Some(u)
        }
    };
    let path = |v: &Option<String>, key: &str| {
        v.as_ref()
            .map(|p| expand_env(p, env).map(PathBuf::from))
            .transpose()
            .at(key)
    };
    let cwd = path(&raw.cwd, "server.cwd")?;
    let log = path(&raw.log, "server.log")?;
    let log_tail = raw.log_tail.map(|n| n as usize).unwrap_or(DEFAULT_LOG_TAIL);
    ensure!(
        log_tail <= 10_000,
        "server.log_tail is {log_tail}: at most 10000 lines"
    );
    let key = super::common::short_hash(
        &serde_json::json!({
            "command": command,
            "env": env_out.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect::<Vec<_>>(),
            "cwd": cwd,
            "ready": format!("{ready:?}"),
            "ready_timeout": ready_timeout.as_millis() as u64,
            "stop_timeout": stop_timeout.as_millis() as u64,
            "log": log,
            "log_tail": log_tail,
            "metrics": metrics_url,
        })
        .to_string(),
    );
    Ok(ServerSpec {
        command,
        shown_command,
        defaults: defaults_taken(words, env),
        env: env_out,
        cwd,
        ready,
        ready_timeout,
        stop_timeout,
        log,
        log_tail,
        metrics_url,
        origin,
        secrets,
        key,
        fine_probe: false,
    })
}

/// `<base_url>/models` (query dropped).
/// The scheme, host and port of `base_url` (`http://127.0.0.1:8080`): where a server answers
/// `/props`, `/metrics`; `None` when it is not a URL.
pub fn origin_of(base_url: &str) -> Option<String> {
    url::Url::parse(base_url).ok().map(|u| origin_of_url(&u))
}

fn origin_of_url(url: &url::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or("127.0.0.1"),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

pub fn models_url(base_url: &str) -> String {
    match url::Url::parse(base_url) {
        Ok(mut u) => {
            let p = u.path().trim_end_matches('/').to_string();
            u.set_path(&format!("{p}/models"));
            u.set_query(None);
            u.to_string()
        }
        Err(_) => format!("{}/models", base_url.trim_end_matches('/')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_the_shown_command_are_escaped() {
        assert_eq!(
            quote("x\n::warning title=pwn::y\u{1b}[2J"),
            "'x\\n::warning title=pwn::y\\u{1b}[2J'"
        );
        assert_eq!(quote("llama-server"), "llama-server");
    }

    fn env(n: &str) -> Option<String> {
        match n {
            "MODEL" => Some("/m/gemma.gguf".into()),
            "HF_TOKEN" => Some("hf_canary_value".into()),
            _ => None,
        }
    }

    fn raw(cmd: &[&str]) -> RawServer {
        RawServer {
            command: Some(cmd.iter().map(|s| s.to_string()).collect()),
            ..RawServer::default()
        }
    }

    #[test]
    fn the_defaults_a_command_runs_with_are_named_once_each() {
        let env = |n: &str| match n {
            "SET" => Some("x".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let words: Vec<String> = [
            "srv",
            "-m",
            "${MODEL:-model.gguf}",
            "${SET:-unused}",
            "--t=${EMPTY:-2}",
            "${MODEL:-other}",
            "--api-key",
            "${API_KEY:-sk-local}",
            "${PLAIN}",
        ]
        .map(String::from)
        .to_vec();
        let taken = defaults_taken(&words, &env);
        let shown: Vec<String> = taken.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            shown,
            [
                "MODEL is not set, so its default `model.gguf` runs",
                "EMPTY is not set, so its default `2` runs",
                "API_KEY is not set, so its default `<redacted>` runs",
            ]
        );
    }

    #[test]
    fn command_is_expanded_and_shown_redacted() {
        let r = raw(&[
            "llama-server",
            "-m",
            "${MODEL}",
            "--api-key",
            "sk-secret-1234",
            "--hf-token=${HF_TOKEN}",
            "--alias",
            "my model",
        ]);
        let s = build(&r, "http://127.0.0.1:8080/v1", &[], &env).unwrap();
        assert_eq!(s.command[2], "/m/gemma.gguf");
        assert_eq!(s.command[5], "--hf-token=hf_canary_value");
        assert_eq!(
            s.shown_command,
            "llama-server -m /m/gemma.gguf --api-key <redacted> --hf-token=<redacted> --alias 'my model'"
        );
        assert!(!format!("{s:?}").contains("sk-secret"));
        assert_eq!(s.origin, "http://127.0.0.1:8080");
        assert_eq!(
            s.ready,
            Ready::Http {
                url: "http://127.0.0.1:8080/v1/models".into(),
                default: true
            }
        );
        assert_eq!(
            s.metrics_url.as_deref(),
            Some("http://127.0.0.1:8080/metrics")
        );
        assert_eq!(s.ready_timeout, DEFAULT_READY_TIMEOUT);
    }

    #[test]
    fn credentials_anywhere_in_the_command_are_redacted() {
        let e = |n: &str| match n {
            "X" => Some("hf_from_x_canary".to_string()),
            _ => None,
        };
        let r = raw(&[
            "docker",
            "run",
            "-e",
            "HF_TOKEN=${X}",
            "--env=OPENAI_API_KEY=sk-literal-canary",
            "-H",
            "Authorization: Bearer hdr-canary-1",
            "--model-url",
            "https://user:pw-canary-2@example.invalid/m?x=1",
            "https://ghp_user_canary@github.com/o/r",
            "http://h/v?api_key=q-canary-3&page=2",
            "--max-num-batched-tokens=8192",
            "--tokenizer",
            "tok/v1",
            "img",
        ]);
        let s = build(&r, "http://127.0.0.1:8080/v1", &[], &e).unwrap();
        for leak in [
            "hf_from_x_canary",
            "sk-literal-canary",
            "hdr-canary-1",
            "pw-canary-2",
            "ghp_user_canary",
            "q-canary-3",
        ] {
            assert!(
                !s.shown_command.contains(leak),
                "{leak}: {}",
                s.shown_command
            );
            assert!(s.secrets.iter().any(|x| x.contains(leak)), "{leak}");
        }
        assert_eq!(
            s.shown_command,
            "docker run -e HF_TOKEN=<redacted> --env=OPENAI_API_KEY=<redacted> -H 'Authorization: <redacted>' --model-url 'https://user:<redacted>@example.invalid/m?x=1' https://<redacted>@github.com/o/r 'http://h/v?api_key=<redacted>&page=2' --max-num-batched-tokens=8192 --tokenizer tok/v1 img"
        );
        // words that name no credential keep their values
        assert!(word_secrets("--model=/m/gemma.gguf").is_empty());
        assert!(word_secrets("http://127.0.0.1:8080/v1").is_empty());
        assert!(word_secrets("PATH=/usr/bin").is_empty());
        for n in [
            "HF_TOKEN",
            "api-key",
            "apiKey",
            "Authorization",
            "DB_PASSWORD",
            "passwd",
            "client_secret",
            "AWS_SECRET_ACCESS_KEY",
            "X-Api-Key",
        ] {
            assert!(names_a_secret(n), "{n}");
        }
        for n in [
            "max-num-batched-tokens",
            "max_tokens",
            "tokenizer",
            "ssl-keyfile",
            "model",
        ] {
            assert!(!names_a_secret(n), "{n}");
        }
    }

    #[test]
    fn durations_are_bounded() {
        let mut r = raw(&["x"]);
        r.ready_timeout = Some("18446744073709551615s".into());
        assert_eq!(
            build(&r, "http://h:1/v1", &[], &env)
                .unwrap_err()
                .to_string(),
            "server.ready_timeout: `18446744073709551615s` is longer than the maximum 1day"
        );
        let mut r = raw(&["x"]);
        r.stop_timeout = Some("25h".into());
        assert!(build(&r, "http://h:1/v1", &[], &env)
            .unwrap_err()
            .to_string()
            .starts_with("server.stop_timeout: `25h` is longer than the maximum 1day"));
    }

    #[test]
    fn bad_blocks_are_explained() {
        let e = build(&RawServer::default(), "http://h:1/v1", &[], &env).unwrap_err();
        assert!(e.to_string().contains("server.command is required"), "{e}");
        let mut r = raw(&["x"]);
        r.ready = Some(super::super::file::RawReady {
            url: Some("http://h/x".into()),
            log: Some("up".into()),
        });
        let e = build(&r, "http://h:1/v1", &[], &env).unwrap_err();
        assert!(e.to_string().contains("one of them"), "{e}");
        let e = build(&raw(&["${NOPE}"]), "http://h:1/v1", &[], &env).unwrap_err();
        assert!(
            e.to_string().contains("server.command[0]") && e.to_string().contains("NOPE"),
            "{e}"
        );
        let mut r = raw(&["x"]);
        r.stop_timeout = Some("0s".into());
        assert!(build(&r, "http://h:1/v1", &[], &env).is_err());
    }

    #[test]
    fn same_block_same_key() {
        let a = build(&raw(&["s", "1"]), "http://h:1/v1", &[], &env).unwrap();
        let b = build(&raw(&["s", "1"]), "http://h:1/v1", &[], &env).unwrap();
        let c = build(&raw(&["s", "2"]), "http://h:1/v1", &[], &env).unwrap();
        assert_eq!(a.key, b.key);
        assert_ne!(a.key, c.key);
    }
}
