//! Where a run is: repository, pull request, API URL, commit, run link and token, read from the
//! GitHub Actions environment (`GITHUB_*`) and overridden by flags. Everything is validated
//! here, once: downstream code trusts a [`Context`]. The token is held in [`Token`], whose
//! `Debug` never shows it, and nothing here prints it.

use super::GithubArgs;
use std::path::PathBuf;

/// GitHub.com's REST API; `GITHUB_API_URL` or `--api-url` names another (GitHub Enterprise).
pub const DEFAULT_API_URL: &str = "https://api.github.com";
const DEFAULT_SERVER_URL: &str = "https://github.com";
/// Event payloads are small; a larger file is not read.
const MAX_EVENT_BYTES: u64 = 64 << 20;

/// A GitHub token. Never printed: `Debug` shows `Token(***)` and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Accepts a token that can travel in an HTTP header (visible ASCII, at most 4096 bytes)
    /// after trimming surrounding whitespace.
    pub fn new(raw: &str) -> Option<Token> {
        let t = raw.trim();
        if t.is_empty() || t.len() > 4096 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        Some(Token(t.to_string()))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// `owner/name`, both checked against GitHub's allowed characters so they are safe in a URL path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

impl Repo {
    pub fn parse(s: &str) -> Option<Repo> {
        let (owner, name) = s.trim().split_once('/')?;
        let ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 100
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        (ok(owner) && ok(name)).then(|| Repo {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// The run's GitHub context. Built by [`Context::from_env`].
#[derive(Debug, Clone)]
pub struct Context {
    /// Whether any GitHub output is written (`--github`, default: inside GitHub Actions).
    pub enabled: bool,
    /// Inside GitHub Actions (`GITHUB_ACTIONS=true`): workflow commands are understood.
    pub in_actions: bool,
    pub repo: Option<Repo>,
    pub event_name: Option<String>,
    /// The pull request of this run, from `--pr` or the event payload.
    pub pr: Option<u64>,
    /// REST API base, without a trailing slash.
    pub api_url: String,
    /// Web base (`GITHUB_SERVER_URL`), without a trailing slash.
    pub server_url: String,
    /// The commit measured (`GITHUB_SHA`, hex).
    pub sha: Option<String>,
    /// `{server}/{repo}/actions/runs/{GITHUB_RUN_ID}`.
    pub run_url: Option<String>,
    pub token: Option<Token>,
    /// Name of the variable the token is read from (for messages).
    pub token_env: String,
    /// `GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT`, `GITHUB_WORKSPACE`.
    pub step_summary: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    /// Problems found while reading the environment (one line each).
    pub warnings: Vec<String>,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// An http(s) URL that can sit in a markdown link: no whitespace, quotes, brackets or parentheses.
fn clean_url(s: &str) -> Option<String> {
    let s = s.trim().trim_end_matches('/');
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))?;
    let ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_graphic() && !"<>()[]\"'`\\{}|^".contains(c));
    ok.then(|| s.to_string())
}

fn is_hex_sha(s: &str) -> bool {
    (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The pull request number in an event payload: `pull_request.number` (pull_request,
/// pull_request_target, pull_request_review...) or `issue.number` of an issue that is a PR
/// (issue_comment).
pub fn pr_from_event(event: &serde_json::Value) -> Option<u64> {
    if let Some(n) = event
        .get("pull_request")
        .and_then(|p| p.get("number"))
        .and_then(|n| n.as_u64())
    {
        return Some(n);
    }
    let issue = event.get("issue")?;
    // an issue is a PR when `pull_request` is an object; `"pull_request": null` is a plain issue
    issue.get("pull_request").filter(|p| p.is_object())?;
    issue.get("number")?.as_u64()
}

/// The default check id: `GITHUB_WORKFLOW/GITHUB_JOB` when running in GitHub Actions (so two
/// perfgate jobs keep two comments), else `perfgate`. Characters outside `A-Za-z0-9.-` become
/// `-` (the id goes into an HTML comment).
pub fn default_id_from(env: &dyn Fn(&str) -> Option<String>) -> String {
    let clean = |s: &str| {
        let mut out = String::new();
        for c in s.chars() {
            let c = if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            };
            if !(c == '-' && out.ends_with('-')) {
                out.push(c);
            }
        }
        out.trim_matches('-').to_string()
    };
    let parts: Vec<String> = ["GITHUB_WORKFLOW", "GITHUB_JOB"]
        .iter()
        .filter_map(|k| non_empty(env(k)))
        .map(|v| clean(&v))
        .filter(|v| !v.is_empty())
        .collect();
    if parts.is_empty() {
        return "perfgate".to_string();
    }
    let mut id = parts.join("/");
    id.truncate(100);
    id.trim_end_matches(['-', '/']).to_string()
}

impl Context {
    /// Reads the environment through `env` (tests pass a map), flags first.
    pub fn from_env(args: &GithubArgs, env: &dyn Fn(&str) -> Option<String>) -> Context {
        let mut warnings = Vec::new();
        let in_actions = env("GITHUB_ACTIONS").as_deref() == Some("true");
        let enabled = match args.github {
            super::Mode::Auto => in_actions,
            super::Mode::On => true,
            super::Mode::Off => false,
        };
        let repo = match args
            .repo
            .clone()
            .or_else(|| non_empty(env("GITHUB_REPOSITORY")))
        {
            Some(r) => {
                let parsed = Repo::parse(&r);
                if parsed.is_none() {
                    warnings.push(format!(
                        "repository `{}` is not OWNER/NAME; no comment or issue",
                        r.chars().take(120).collect::<String>()
                    ));
                }
                parsed
            }
            None => None,
        };
        let event_name = non_empty(env("GITHUB_EVENT_NAME"));
        let mut pr = args.pr.filter(|n| *n > 0);
        if pr.is_none() && enabled {
            if let Some(path) = non_empty(env("GITHUB_EVENT_PATH")) {
                match read_event(&path) {
                    Ok(ev) => pr = pr_from_event(&ev).filter(|n| *n > 0),
                    Err(e) => warnings.push(format!("GITHUB_EVENT_PATH {path}: {e}")),
                }
            }
        }
        let api_raw = args
            .api_url
            .clone()
            .or_else(|| non_empty(env("GITHUB_API_URL")))
            .unwrap_or_else(|| DEFAULT_API_URL.to_string());
        let api_url = clean_url(&api_raw).unwrap_or_else(|| {
            warnings.push(format!(
                "API URL `{}` is not an http(s) URL; using {DEFAULT_API_URL}",
                api_raw.chars().take(120).collect::<String>()
            ));
            DEFAULT_API_URL.to_string()
        });
        let server_url = non_empty(env("GITHUB_SERVER_URL"))
            .and_then(|s| clean_url(&s))
            .unwrap_or_else(|| DEFAULT_SERVER_URL.to_string());
        let sha = non_empty(env("GITHUB_SHA")).filter(|s| is_hex_sha(s));
        let run_id =
            non_empty(env("GITHUB_RUN_ID")).filter(|s| s.bytes().all(|b| b.is_ascii_digit()));
        let run_url = match (&repo, run_id) {
            (Some(r), Some(id)) => Some(format!("{server_url}/{r}/actions/runs/{id}")),
            _ => None,
        };
        let token_env = args.github_token_env.clone();
        let token = match non_empty(env(&token_env)) {
            Some(raw) => {
                let t = Token::new(&raw);
                if t.is_none() {
                    warnings.push(format!(
                        "the token in ${token_env} contains characters an HTTP header cannot carry; ignoring it"
                    ));
                }
                t
            }
            None => None,
        };
        let path = |k: &str| non_empty(env(k)).map(PathBuf::from);
        Context {
            enabled,
            in_actions,
            repo,
            event_name,
            pr,
            api_url,
            server_url,
            sha,
            run_url,
            token,
            token_env,
            step_summary: path("GITHUB_STEP_SUMMARY"),
            output: path("GITHUB_OUTPUT"),
            workspace: path("GITHUB_WORKSPACE"),
            warnings,
        }
    }

    /// A link to a commit of this repository.
    pub fn commit_url(&self, sha: &str) -> Option<String> {
        let r = self.repo.as_ref()?;
        is_hex_sha(sha).then(|| format!("{}/{r}/commit/{sha}", self.server_url))
    }

    /// A run without a pull request that should keep a tracking issue: scheduled, push or
    /// manually dispatched.
    pub fn tracks_issue(&self) -> bool {
        self.pr.is_none()
            && matches!(
                self.event_name.as_deref(),
                Some("schedule" | "push" | "workflow_dispatch")
            )
    }
}

/// Why the event payload (`GITHUB_EVENT_PATH`) was not read; a warning, never an exit code.
#[derive(Debug, thiserror::Error)]
enum EventError {
    /// Above [`MAX_EVENT_BYTES`].
    #[error("larger than {} MiB; not read", MAX_EVENT_BYTES >> 20)]
    TooLarge,
    /// Missing, unreadable or not UTF-8.
    #[error(transparent)]
    Read(crate::limits::ReadError),
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

fn read_event(path: &str) -> Result<serde_json::Value, EventError> {
    let text = crate::limits::read_text(std::path::Path::new(path), MAX_EVENT_BYTES).map_err(
        |e| match e {
            crate::limits::ReadError::TooLarge(_) => EventError::TooLarge,
            other => EventError::Read(other),
        },
    )?;
    serde_json::from_str(&text).map_err(EventError::NotJson)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn token_debug_never_shows_the_token() {
        let t = Token::new("  ghs_secret123 \n").unwrap();
        assert_eq!(t.expose(), "ghs_secret123");
        assert_eq!(format!("{t:?}"), "Token(***)");
        assert!(Token::new("a b").is_none() && Token::new("x\ny").is_none());
        assert!(Token::new("").is_none());
        let ctx = Context::from_env(
            &GithubArgs::default(),
            &env_of(&[("GITHUB_TOKEN", "ghs_secret123")]),
        );
        assert!(!format!("{ctx:?}").contains("secret"));
    }

    #[test]
    fn default_id_is_workflow_and_job() {
        assert_eq!(default_id_from(&env_of(&[])), "perfgate");
        assert_eq!(
            default_id_from(&env_of(&[
                ("GITHUB_WORKFLOW", "Latency check (PR)"),
                ("GITHUB_JOB", "gate_a100")
            ])),
            "Latency-check-PR/gate-a100"
        );
        assert_eq!(
            default_id_from(&env_of(&[("GITHUB_WORKFLOW", ".github/workflows/x.yml")])),
            ".github-workflows-x.yml"
        );
        let long = "w".repeat(300);
        assert!(default_id_from(&env_of(&[("GITHUB_WORKFLOW", &long)])).len() <= 100);
    }

    #[test]
    fn pr_number_from_event_payloads() {
        let pr: serde_json::Value =
            serde_json::from_str(r#"{"number": 5, "pull_request": {"number": 5}}"#).unwrap();
        assert_eq!(pr_from_event(&pr), Some(5));
        let ic: serde_json::Value =
            serde_json::from_str(r#"{"issue": {"number": 9, "pull_request": {}}}"#).unwrap();
        assert_eq!(pr_from_event(&ic), Some(9));
        let issue: serde_json::Value = serde_json::from_str(r#"{"issue": {"number": 9}}"#).unwrap();
        assert_eq!(pr_from_event(&issue), None);
        // issue 15: an issue_comment on a plain issue may carry `"pull_request": null`
        let null_pr: serde_json::Value =
            serde_json::from_str(r#"{"issue": {"number": 9, "pull_request": null}}"#).unwrap();
        assert_eq!(pr_from_event(&null_pr), None);
        let push: serde_json::Value =
            serde_json::from_str(r#"{"ref": "refs/heads/main"}"#).unwrap();
        assert_eq!(pr_from_event(&push), None);
    }

    #[test]
    fn context_from_environment_and_flags() {
        let dir = std::env::temp_dir().join(format!("perfgate-ctx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ev = dir.join("event.json");
        std::fs::write(&ev, r#"{"pull_request": {"number": 42}}"#).unwrap();
        let env = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_REPOSITORY", "octo/demo"),
            ("GITHUB_EVENT_NAME", "pull_request"),
            ("GITHUB_EVENT_PATH", ev.to_str().unwrap()),
            ("GITHUB_API_URL", "https://ghe.example.com/api/v3/"),
            ("GITHUB_SERVER_URL", "https://ghe.example.com"),
            ("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567"),
            ("GITHUB_RUN_ID", "777"),
        ]);
        let c = Context::from_env(&GithubArgs::default(), &env);
        assert!(c.enabled && c.in_actions);
        assert_eq!(c.pr, Some(42));
        assert_eq!(c.api_url, "https://ghe.example.com/api/v3");
        assert_eq!(
            c.run_url.as_deref(),
            Some("https://ghe.example.com/octo/demo/actions/runs/777")
        );
        assert!(!c.tracks_issue());
        let args = GithubArgs {
            repo: Some("other/repo".into()),
            pr: Some(7),
            api_url: Some("http://127.0.0.1:9".into()),
            ..GithubArgs::default()
        };
        let c = Context::from_env(&args, &env);
        assert_eq!(c.repo.unwrap().to_string(), "other/repo");
        assert_eq!(c.pr, Some(7));
        assert_eq!(c.api_url, "http://127.0.0.1:9");
        let bad = GithubArgs {
            repo: Some("../x".into()),
            api_url: Some("javascript:alert(1)".into()),
            ..GithubArgs::default()
        };
        let c = Context::from_env(&bad, &env);
        assert!(c.repo.is_none());
        assert_eq!(c.api_url, DEFAULT_API_URL);
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        std::fs::remove_dir_all(&dir).unwrap();
        let sched = env_of(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_EVENT_NAME", "schedule"),
        ]);
        assert!(Context::from_env(&GithubArgs::default(), &sched).tracks_issue());
        let off = GithubArgs {
            github: crate::github::Mode::Off,
            ..GithubArgs::default()
        };
        assert!(!Context::from_env(&off, &sched).enabled);
    }
}
