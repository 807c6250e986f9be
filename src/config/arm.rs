//! The two arms of `perfgate ab` in scenario terms: a `server:` block's `base:` / `candidate:`
//! arm blocks and the command line's per-arm overrides (`--base-url`, `--candidate-model`,
//! `--base-server-cmd`, ...), applied to a raw scenario before it is validated, so each arm is
//! an ordinary [`super::Scenario`] checked like any other.
//!
//! Precedence, per arm: the command line, then the arm block, then the scenario as written.
//! An arm block's keys win over the shared `server:` block's; its `base_url` (the arm's own
//! port, so both arms can run side by side) replaces `endpoint.base_url`.

use super::file::{RawScenario, RawServer};

/// One arm of an A/B run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmKey {
    Base,
    Candidate,
}

// The key in scenario files and the prefix of its flags.
super::common::names!(ArmKey { Base => "base", Candidate => "candidate" });

/// An arm's command-line overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArmOverride {
    /// `--base-url` / `--candidate-url`: the arm's endpoint.
    pub base_url: Option<String>,
    /// `--base-model` / `--candidate-model`.
    pub model: Option<String>,
    /// `--base-server-cmd` / `--candidate-server-cmd`, split into argv words.
    pub server_command: Option<Vec<String>>,
    /// `--no-server`: start no server; measure the arm's URL as it is (a server the user
    /// started), whatever the scenario's `server:` block says.
    pub no_server: bool,
}

impl ArmOverride {
    /// Whether a flag sets something of the arm (URL, model, server command); `--no-server`
    /// sets nothing: it only starts no server.
    pub fn sets_arm(&self) -> bool {
        self.base_url.is_some() || self.model.is_some() || self.server_command.is_some()
    }
}

/// How a command reads a scenario file.
#[derive(Debug, Clone, Copy)]
pub enum Reading<'a> {
    /// `check`, `bless`, `validate`: the scenario as written; `base:` / `candidate:` arm blocks
    /// are ignored (a `server:` of arm blocks only starts no server, and `check`/`bless` refuse
    /// such a scenario).
    Written,
    /// `perfgate ab`: one arm, its arm block and overrides applied.
    Arm(ArmKey, &'a ArmOverride),
    /// `perfgate ab`: the scenario without its `server:` block, for what the run reports it as
    /// (name, source, fingerprint: how a server is started is not part of the fingerprint).
    Serverless,
}

/// What reading a scenario in the `Written` way left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WrittenServer {
    /// Nothing: no `server:`, or one with a `command:`.
    #[default]
    Complete,
    /// A `server:` block of `base:` / `candidate:` arms without a `command:` of its own.
    ArmsOnly,
}

/// Why a `server:` block's arms are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArmError {
    /// `server.base_url` outside an arm block.
    #[error("server.base_url belongs inside server.base or server.candidate (each arm's own endpoint for perfgate ab); the scenario's endpoint is endpoint.base_url")]
    BaseUrlOutsideArm,
    /// `server.<arm>` holds an arm block itself.
    #[error("server.{arm} holds base: or candidate: itself; an arm block is one server")]
    Nested { arm: &'static str },
}

/// Why a command line given as one string does not split ([`split_command`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SplitError {
    /// A quote (`'` or `"`) never closed; `text` is the whole command line.
    #[error("unterminated {quote} in `{text}`")]
    Unterminated { quote: char, text: String },
    /// No word at all.
    #[error("the command is empty: give the program and its arguments")]
    Empty,
}

/// The raw scenario as `reading` sees it.
///
/// Errors: a `base_url` outside an arm block; an arm block inside an arm block.
pub fn apply(
    mut raw: RawScenario,
    reading: Reading<'_>,
) -> Result<(RawScenario, WrittenServer), ArmError> {
    let mut written = WrittenServer::Complete;
    if let Some(s) = &raw.server {
        if s.base_url.is_some() {
            return Err(ArmError::BaseUrlOutsideArm);
        }
        for (k, arm) in [("base", &s.base), ("candidate", &s.candidate)] {
            if arm
                .as_ref()
                .is_some_and(|a| a.base.is_some() || a.candidate.is_some())
            {
                return Err(ArmError::Nested { arm: k });
            }
        }
    }
    match reading {
        Reading::Written => {
            if let Some(s) = raw.server.take() {
                let arms = s.base.is_some() || s.candidate.is_some();
                if arms && s.command.is_none() {
                    written = WrittenServer::ArmsOnly;
                } else {
                    raw.server = Some(RawServer {
                        base: None,
                        candidate: None,
                        ..s
                    });
                }
            }
        }
        Reading::Serverless => raw.server = None,
        Reading::Arm(key, over) => {
            let scenario_url = raw.endpoint.base_url.clone();
            let mut server = raw.server.take().map(|s| {
                let arm = match key {
                    ArmKey::Base => s.base.clone(),
                    ArmKey::Candidate => s.candidate.clone(),
                };
                let own_log = arm.as_ref().is_some_and(|a| a.log.is_some());
                let mut merged = match arm {
                    Some(a) => a.over(&s),
                    None => RawServer {
                        base: None,
                        candidate: None,
                        ..s
                    },
                };
                // A `server.log` shared by both arms: each arm its own file, or the second
                // server to start truncates the first one's log (the base's log was lost).
                if !own_log {
                    merged.log = merged.log.map(|l| arm_log(&l, key));
                }
                merged
            });
            if let Some(u) = server.as_mut().and_then(|s| s.base_url.take()) {
                raw.endpoint.base_url = Some(u);
            }
            if let Some(cmd) = &over.server_command {
                let mut s = server.unwrap_or_default();
                s.command = Some(cmd.clone());
                server = Some(s);
            }
            if let Some(u) = &over.base_url {
                raw.endpoint.base_url = Some(u.clone());
            }
            if over.no_server {
                server = None;
            }
            if let Some(m) = &over.model {
                raw.endpoint.model = Some(m.clone());
            }
            // A readiness URL on the scenario's own server follows the arm to its port (init's
            // llama-server template's /health on 8080 was polled for 10 minutes while the arms
            // listened on 8081 and 8082).
            if let (Some(s), Some(from), Some(to)) =
                (server.as_mut(), &scenario_url, &raw.endpoint.base_url)
            {
                if let Some(url) = s.ready.as_mut().and_then(|r| r.url.as_mut()) {
                    if let Some(moved) = follow_arm(url, from, to) {
                        *url = moved;
                    }
                }
            }
            raw.server = server;
        }
    }
    Ok((raw, written))
}

/// `server.log` of one arm when both arms share it: `perfgate-server.log` ->
/// `perfgate-server.base.log` (the arm before the extension; appended without one).
pub fn arm_log(log: &str, key: ArmKey) -> String {
    let arm = key.as_str();
    let path = std::path::Path::new(log);
    match (path.file_stem(), path.extension()) {
        (Some(stem), Some(ext)) => path
            .with_file_name(format!(
                "{}.{arm}.{}",
                stem.to_string_lossy(),
                ext.to_string_lossy()
            ))
            .to_string_lossy()
            .into_owned(),
        _ => format!("{log}.{arm}"),
    }
}

/// The port a server command says it listens on (`--port N` or `--port=N`, the flag of
/// llama-server, vLLM, SGLang and TGI) when it differs from the port of the URL the arm measures:
/// `(command's port, URL's port)`. `None` when they agree, or either says nothing.
pub fn port_mismatch(command: &[String], url: &str) -> Option<(u16, u16)> {
    let mut said = None;
    let mut it = command.iter();
    while let Some(w) = it.next() {
        if w == "--port" {
            said = it.next().and_then(|v| v.parse::<u16>().ok());
        } else if let Some(v) = w.strip_prefix("--port=") {
            said = v.parse::<u16>().ok();
        }
    }
    let url_port = url::Url::parse(url).ok()?.port_or_known_default()?;
    said.filter(|p| *p != url_port).map(|p| (p, url_port))
}

/// Where an endpoint URL goes, for telling whether two arms reach one server: scheme, host,
/// port (the scheme's default written out), path without a trailing `/`, query. `localhost`,
/// `127.0.0.1` and `[::1]` are one host, the loopback, as a server on this machine answers
/// (perfgate's own endpoints are 127.0.0.1 only). A string that is not a URL is compared as
/// written (pure).
pub fn endpoint_place(url: &str) -> String {
    let Ok(u) = url::Url::parse(url) else {
        return url.to_string();
    };
    let host = match u.host() {
        Some(url::Host::Domain(d)) if d.trim_end_matches('.').eq_ignore_ascii_case("localhost") => {
            "loopback".to_string()
        }
        Some(url::Host::Ipv4(a)) if a == std::net::Ipv4Addr::LOCALHOST => "loopback".to_string(),
        Some(url::Host::Ipv6(a)) if a.is_loopback() => "loopback".to_string(),
        Some(h) => h.to_string().to_ascii_lowercase(),
        None => String::new(),
    };
    format!(
        "{}://{host}{}{}{}",
        u.scheme(),
        u.port_or_known_default()
            .map(|p| format!(":{p}"))
            .unwrap_or_default(),
        u.path().trim_end_matches('/'),
        u.query().map(|q| format!("?{q}")).unwrap_or_default()
    )
}

/// `url` moved to `to`'s host and port when it is on `from`'s host and port and `to` is
/// elsewhere: a scenario server's readiness URL following an arm to its own port (pure).
pub fn follow_arm(url: &str, from: &str, to: &str) -> Option<String> {
    let origin = |u: &url::Url| {
        let host = endpoint_place(&format!("{}://{}/", u.scheme(), u.host_str()?));
        Some((host, u.port_or_known_default()?))
    };
    let (mut u, f, t) = (
        url::Url::parse(url).ok()?,
        url::Url::parse(from).ok()?,
        url::Url::parse(to).ok()?,
    );
    let (here, from_at, to_at) = (origin(&u)?, origin(&f)?, origin(&t)?);
    if here != from_at || from_at == to_at {
        return None;
    }
    u.set_host(t.host_str()).ok()?;
    u.set_port(t.port()).ok()?;
    Some(u.to_string())
}

/// Splits a command line given as one string (`--base-server-cmd "llama-server -m 'a b.gguf'"`)
/// into argv words the way a POSIX shell would, without expanding anything: words separated by
/// blanks, `'...'` literal, `"..."` with `\"` and `\\`, a backslash escaping the next character.
///
/// Errors: an unterminated quote, or no word at all.
pub fn split_command(s: &str) -> Result<Vec<String>, SplitError> {
    let unterminated = |quote: char| SplitError::Unterminated {
        quote,
        text: s.to_string(),
    };
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(unterminated('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(unterminated('"')),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(unterminated('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            x => {
                in_word = true;
                cur.push(x);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err(SplitError::Empty);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_server_command_on_another_port_than_its_url_is_found() {
        let cmd = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let url = "http://127.0.0.1:8081/v1";
        assert_eq!(
            port_mismatch(&cmd("llama-server -m m --port 8082"), url),
            Some((8082, 8081))
        );
        assert_eq!(
            port_mismatch(&cmd("vllm serve m --port=8082"), url),
            Some((8082, 8081))
        );
        assert_eq!(
            port_mismatch(&cmd("llama-server -m m --port 8081"), url),
            None
        );
        assert_eq!(port_mismatch(&cmd("llama-server -m m"), url), None);
        // a URL without a port is its scheme's default
        assert_eq!(
            port_mismatch(&cmd("s --port 80"), "http://127.0.0.1/v1"),
            None
        );
    }

    use super::*;

    const ARMS: &str = "defaults:\n  endpoint: {base_url: 'http://127.0.0.1:8080/v1', model: m}\n  request: {prompt: hi, max_tokens: 8}\n  server:\n    ready_timeout: 5m\n    base: {base_url: 'http://127.0.0.1:8081/v1', command: [srv, --port, '8081']}\n    candidate: {base_url: 'http://127.0.0.1:8082/v1', command: [srv, --port, '8082']}\nscenarios:\n  - name: a\n";

    #[test]
    fn each_arm_reads_as_a_validated_scenario_with_its_server_and_port() {
        let env = |_: &str| None;
        let read = |r: Reading<'_>| crate::config::parse_str_as(ARMS, "t.yaml", &env, r);
        let none = ArmOverride::default();
        let b = read(Reading::Arm(ArmKey::Base, &none)).unwrap().remove(0);
        let c = read(Reading::Arm(ArmKey::Candidate, &none))
            .unwrap()
            .remove(0);
        assert_eq!(b.endpoint.shown_url(), "http://127.0.0.1:8081/v1");
        assert_eq!(c.endpoint.shown_url(), "http://127.0.0.1:8082/v1");
        let (bs, cs) = (b.server.unwrap(), c.server.unwrap());
        assert_eq!(bs.shown_command, "srv --port 8081");
        assert_eq!(bs.origin, "http://127.0.0.1:8081");
        assert_eq!(cs.ready_timeout, std::time::Duration::from_secs(300));
        assert_ne!(bs.key, cs.key);
        // as written: no command of its own, so no server, and said so; the fingerprint is the
        // file's (the arms' URLs are not in it)
        let w = read(Reading::Written).unwrap().remove(0);
        assert!(w.server.is_none());
        assert_eq!(w.written_server, WrittenServer::ArmsOnly);
        let plain = read(Reading::Serverless).unwrap().remove(0);
        assert_eq!(plain.fingerprint, w.fingerprint);
        assert_ne!(plain.fingerprint, b.fingerprint);
        // a base_url outside an arm block is explained
        let bad = ARMS.replace("    ready_timeout: 5m\n", "    base_url: 'http://x/v1'\n");
        let e = crate::config::parse_str(&bad, "t.yaml", &env).unwrap_err();
        assert!(
            e.message()
                .contains("server.base_url belongs inside server.base"),
            "{e}"
        );
    }

    /// Issue 46 read the flag as expanding nothing; it is expanded as `server.command` is (after
    /// the split): `${VAR}` and `${VAR:-default}`, from the environment perfgate runs in.
    #[test]
    fn a_server_cmd_flag_expands_variables_as_the_scenario_file_does() {
        let env = |k: &str| (k == "M").then(|| "/models/a b.gguf".to_string());
        let over = ArmOverride {
            server_command: Some(
                split_command("srv -m ${M} --port ${PORT:-8081} --alias 'x y'").unwrap(),
            ),
            ..Default::default()
        };
        let b =
            crate::config::parse_str_as(ARMS, "t.yaml", &env, Reading::Arm(ArmKey::Base, &over))
                .unwrap()
                .remove(0);
        assert_eq!(
            b.server.unwrap().command,
            [
                "srv",
                "-m",
                "/models/a b.gguf",
                "--port",
                "8081",
                "--alias",
                "x y"
            ]
        );
    }

    #[test]
    fn a_readiness_url_on_the_scenarios_port_follows_the_arm() {
        let from = "http://127.0.0.1:8080/v1";
        assert_eq!(
            follow_arm(
                "http://127.0.0.1:8080/health",
                from,
                "http://127.0.0.1:8081/v1"
            )
            .as_deref(),
            Some("http://127.0.0.1:8081/health")
        );
        assert_eq!(
            follow_arm(
                "http://localhost:8080/health",
                from,
                "http://127.0.0.1:8082/v1"
            )
            .as_deref(),
            Some("http://127.0.0.1:8082/health")
        );
        // elsewhere than the scenario's endpoint, or the arm on the same port: unchanged
        assert_eq!(
            follow_arm(
                "http://127.0.0.1:9000/health",
                from,
                "http://127.0.0.1:8081/v1"
            ),
            None
        );
        assert_eq!(follow_arm("http://127.0.0.1:8080/health", from, from), None);
        assert_eq!(
            follow_arm("not a url", from, "http://127.0.0.1:8081/v1"),
            None
        );
    }

    #[test]
    fn loopback_names_are_one_place() {
        let p = endpoint_place;
        assert_eq!(
            p("http://localhost:8080/v1"),
            p("http://127.0.0.1:8080/v1/")
        );
        assert_eq!(p("http://[::1]:8080/v1"), p("http://127.0.0.1:8080/v1"));
        assert_eq!(p("http://LocalHost:80/v1"), p("http://127.0.0.1/v1"));
        assert_ne!(p("http://localhost:8080/v1"), p("http://127.0.0.1:8081/v1"));
        assert_ne!(
            p("http://localhost:8080/v1"),
            p("https://127.0.0.1:8080/v1")
        );
        assert_ne!(p("http://127.0.0.2:8080/v1"), p("http://127.0.0.1:8080/v1"));
        assert_ne!(p("http://example.com/v1"), p("http://127.0.0.1/v1"));
        assert_eq!(p("sim://?seed=1"), p("sim://?seed=1"));
        assert_ne!(p("sim://?seed=1"), p("sim://?seed=2"));
    }

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"llama-server -m 'my model.gguf' --alias "a \"b\"" x\ y"#).unwrap(),
            [
                "llama-server",
                "-m",
                "my model.gguf",
                "--alias",
                "a \"b\"",
                "x y"
            ]
        );
        assert_eq!(split_command("  a   ''  ").unwrap(), ["a", ""]);
        assert!(split_command("a 'b")
            .unwrap_err()
            .to_string()
            .contains("unterminated"));
        assert!(split_command("   ").is_err());
    }

    fn server(cmd: &str) -> RawServer {
        RawServer {
            command: Some(vec![cmd.into()]),
            ..RawServer::default()
        }
    }

    #[test]
    fn arms_take_their_block_then_the_flags() {
        let mut raw = RawScenario::default();
        raw.endpoint.base_url = Some("http://127.0.0.1:8080/v1".into());
        raw.server = Some(RawServer {
            ready_timeout: Some("5m".into()),
            base: Some(Box::new(RawServer {
                base_url: Some("http://127.0.0.1:8081/v1".into()),
                ..server("old")
            })),
            candidate: Some(Box::new(server("new"))),
            ..RawServer::default()
        });
        let none = ArmOverride::default();
        let (b, _) = apply(raw.clone(), Reading::Arm(ArmKey::Base, &none)).unwrap();
        let bs = b.server.unwrap();
        assert_eq!(bs.command, Some(vec!["old".to_string()]));
        assert_eq!(bs.ready_timeout.as_deref(), Some("5m"));
        assert_eq!(
            b.endpoint.base_url.as_deref(),
            Some("http://127.0.0.1:8081/v1")
        );
        let over = ArmOverride {
            base_url: Some("http://127.0.0.1:9000/v1".into()),
            model: Some("m2".into()),
            server_command: Some(vec!["newer".into()]),
            no_server: false,
        };
        let none = ArmOverride {
            base_url: Some("http://127.0.0.1:9001/v1".into()),
            no_server: true,
            ..Default::default()
        };
        let (n, _) = apply(raw.clone(), Reading::Arm(ArmKey::Base, &none)).unwrap();
        assert!(n.server.is_none());
        assert_eq!(
            n.endpoint.base_url.as_deref(),
            Some("http://127.0.0.1:9001/v1")
        );
        let (c, _) = apply(raw.clone(), Reading::Arm(ArmKey::Candidate, &over)).unwrap();
        assert_eq!(c.server.unwrap().command, Some(vec!["newer".to_string()]));
        assert_eq!(
            c.endpoint.base_url.as_deref(),
            Some("http://127.0.0.1:9000/v1")
        );
        assert_eq!(c.endpoint.model.as_deref(), Some("m2"));
        // as written: arms only, no command: no server, and said so
        let (w, ws) = apply(raw, Reading::Written).unwrap();
        assert!(w.server.is_none());
        assert_eq!(ws, WrittenServer::ArmsOnly);
    }

    #[test]
    fn a_shared_server_log_becomes_one_file_per_arm() {
        assert_eq!(
            arm_log("perfgate-server.log", ArmKey::Base),
            "perfgate-server.base.log"
        );
        assert_eq!(
            arm_log("logs/llama.txt", ArmKey::Candidate),
            "logs/llama.candidate.txt"
        );
        assert_eq!(arm_log("server-log", ArmKey::Base), "server-log.base");
    }
}
