//! The GitHub REST calls perfgate makes, on octocrab, and the two flows built from them: the one
//! PR comment found by its hidden marker (paged through every comment, updated in place or
//! created) and the one tracking issue of runs without a PR (opened or updated on FAIL, closed
//! with one comment when a later run passes).
//!
//! Every call here runs in `tests/it/github_prism.rs` against Prism serving GitHub's own OpenAPI
//! description, which rejects requests that do not match it. Responses are read into minimal
//! structs (only the fields used), so GitHub Enterprise versions with other fields still parse.
//! Loops are bounded ([`MAX_COMMENT_PAGES`], [`MAX_ISSUE_PAGES`]); every request has connect
//! and read timeouts.

use super::context::{Repo, Token};
use hyper::Method;
use octocrab::Octocrab;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Page size of list calls (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// At most 10,000 comments are searched for the marker.
pub const MAX_COMMENT_PAGES: u32 = 100;
/// At most 1,000 open `perfgate` issues are searched.
pub const MAX_ISSUE_PAGES: u32 = 10;
/// Largest response body read, bytes (a page of 100 comments of GitHub's 65,536-character
/// maximum is ~7 MB of JSON); a larger one is an error, never read to the end.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// Longest time to read one response body once its headers came.
const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// Label of the tracking issue.
pub const LABEL: &str = "perfgate";
const API_VERSION: &str = "2022-11-28";

/// A failed call: the HTTP status when GitHub answered, and its message (one line, bounded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(f, "HTTP {s}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn one_line(s: &str, max: usize) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        format!("{}...", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

impl From<octocrab::Error> for ApiError {
    fn from(e: octocrab::Error) -> Self {
        match e {
            octocrab::Error::GitHub { source, .. } => ApiError {
                status: Some(source.status_code.as_u16()),
                message: one_line(&source.message, 200),
            },
            // Display of the others names only the step ("SendRequest"); the cause (connection
            // refused, a timeout) is further down the source chain: name it. octocrab's snafu
            // messages may append a backtrace: keep the first line of each.
            other => ApiError {
                status: None,
                message: one_line(&chain_message(&other), 200),
            },
        }
    }
}

/// The error and its causes, first lines joined with `: `; a timeout anywhere is named first
/// ("timed out: ..."), so a hung API does not read as "SendRequest".
fn chain_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        let line = x
            .to_string()
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if !line.is_empty() && !parts.contains(&line) {
            parts.push(line);
        }
        cur = x.source();
    }
    let text = if parts.is_empty() {
        "error".to_string()
    } else {
        parts.join(": ")
    };
    let lower = text.to_ascii_lowercase();
    if lower.contains("timed out") || lower.contains("timeout") || lower.contains("elapsed") {
        format!("timed out: the GitHub API did not answer in time ({text})")
    } else {
        text
    }
}

/// Reads a response body of at most [`MAX_RESPONSE_BYTES`] within [`BODY_TIMEOUT`]; the
/// status decides between the parsed body and an [`ApiError`] with GitHub's `message`.
async fn read_capped<T: serde::de::DeserializeOwned>(
    resp: hyper::Response<http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>>,
) -> Result<T, ApiError> {
    use http_body_util::BodyExt;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut bytes: Vec<u8> = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(ApiError::from)?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_RESPONSE_BYTES {
                    return Err(ApiError {
                        status: Some(status.as_u16()),
                        message: format!(
                            "the GitHub API response exceeded {} MiB; not read further",
                            MAX_RESPONSE_BYTES >> 20
                        ),
                    });
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(())
    };
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Err(_) => {
            return Err(ApiError {
                status: Some(status.as_u16()),
                message: format!(
                    "timed out: the GitHub API response body did not end within {} s",
                    BODY_TIMEOUT.as_secs()
                ),
            })
        }
        Ok(r) => r?,
    }
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        let message = if message.trim().is_empty() {
            status.canonical_reason().unwrap_or("error").to_string()
        } else {
            message
        };
        return Err(ApiError {
            status: Some(status.as_u16()),
            message: one_line(&message, 200),
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError {
        status: Some(status.as_u16()),
        message: one_line(
            &format!("the GitHub API answered unreadable JSON: {e}"),
            200,
        ),
    })
}

/// An issue or PR comment (only what perfgate reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Comment {
    pub id: u64,
    #[serde(default)]
    pub body: Option<String>,
}

/// An issue (only what perfgate reads). The issues list also returns pull requests, which carry
/// a `pull_request` key.
#[derive(Debug, Clone, Deserialize)]
pub struct Issue {
    pub number: u64,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize)]
struct CommitItem {
    sha: String,
}

#[derive(Serialize)]
struct BodyOnly<'a> {
    body: &'a str,
}

#[derive(Serialize)]
struct NewIssue<'a> {
    title: &'a str,
    body: &'a str,
    labels: [&'a str; 1],
}

#[derive(Serialize)]
struct CloseIssue {
    state: &'static str,
    state_reason: &'static str,
}

#[derive(Serialize)]
struct PageQuery {
    per_page: usize,
    page: u32,
}

#[derive(Serialize)]
struct IssueQuery<'a> {
    state: &'static str,
    labels: &'a str,
    per_page: usize,
    page: u32,
}

#[derive(Serialize)]
struct CommitQuery<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha: Option<&'a str>,
    per_page: usize,
}

/// A client for one repository.
pub struct Api {
    client: Octocrab,
    repo: Repo,
}

impl Api {
    /// `api_url` is the REST base (`https://api.github.com`, or `https://HOST/api/v3`).
    /// Needs a tokio runtime.
    pub fn new(api_url: &str, token: &Token, repo: &Repo) -> Result<Api, ApiError> {
        crate::tls::install_crypto_provider();
        let client = Octocrab::builder()
            .base_uri(api_url)
            .map_err(ApiError::from)?
            .personal_token(token.expose().to_string())
            .add_header(
                hyper::header::HeaderName::from_static("x-github-api-version"),
                API_VERSION.to_string(),
            )
            .set_connect_timeout(Some(Duration::from_secs(10)))
            .set_read_timeout(Some(Duration::from_secs(30)))
            .set_write_timeout(Some(Duration::from_secs(30)))
            .build()
            .map_err(ApiError::from)?;
        Ok(Api {
            client,
            repo: repo.clone(),
        })
    }

    fn route(&self, rest: &str) -> String {
        format!("/repos/{}/{}/{rest}", self.repo.owner, self.repo.name)
    }

    fn uri<Q: Serialize>(&self, rest: &str, query: Option<&Q>) -> Result<String, ApiError> {
        let mut uri = self.route(rest);
        if let Some(q) = query {
            let mut qs = url::form_urlencoded::Serializer::new(String::new());
            if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(q) {
                for (k, v) in m {
                    match v {
                        serde_json::Value::Null => {}
                        serde_json::Value::String(s) => {
                            qs.append_pair(&k, &s);
                        }
                        other => {
                            qs.append_pair(&k, &other.to_string());
                        }
                    }
                }
            }
            uri = format!("{uri}?{}", qs.finish());
        }
        Ok(uri)
    }

    /// GET, body capped ([`read_capped`]).
    async fn get<T: serde::de::DeserializeOwned, Q: Serialize>(
        &self,
        rest: &str,
        query: Option<&Q>,
    ) -> Result<T, ApiError> {
        let resp = self.client._get(self.uri(rest, query)?).await?;
        read_capped(resp).await
    }

    /// POST or PATCH with a JSON body, response capped ([`read_capped`]).
    async fn send<T: serde::de::DeserializeOwned, B: Serialize>(
        &self,
        method: Method,
        rest: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let builder = hyper::Request::builder()
            .method(method)
            .uri(self.uri::<()>(rest, None)?);
        let request = self.client.build_request(builder, Some(body))?;
        read_capped(self.client.execute(request).await?).await
    }

    /// `GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page=N`
    pub async fn list_comments(&self, issue: u64, page: u32) -> Result<Vec<Comment>, ApiError> {
        let q = PageQuery {
            per_page: PER_PAGE,
            page,
        };
        self.get(&format!("issues/{issue}/comments"), Some(&q))
            .await
    }

    /// `POST /repos/{owner}/{repo}/issues/{number}/comments` (PRs are issues here).
    pub async fn create_comment(&self, issue: u64, body: &str) -> Result<Comment, ApiError> {
        self.send(
            Method::POST,
            &format!("issues/{issue}/comments"),
            &BodyOnly { body },
        )
        .await
    }

    /// `PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}`
    pub async fn update_comment(&self, id: u64, body: &str) -> Result<Comment, ApiError> {
        self.send(
            Method::PATCH,
            &format!("issues/comments/{id}"),
            &BodyOnly { body },
        )
        .await
    }

    /// `GET /repos/{owner}/{repo}/issues?state=open&labels=perfgate&per_page=100&page=N`
    pub async fn list_open_issues(&self, page: u32) -> Result<Vec<Issue>, ApiError> {
        let q = IssueQuery {
            state: "open",
            labels: LABEL,
            per_page: PER_PAGE,
            page,
        };
        self.get("issues", Some(&q)).await
    }

    /// `POST /repos/{owner}/{repo}/issues` with the `perfgate` label.
    pub async fn create_issue(&self, title: &str, body: &str) -> Result<Issue, ApiError> {
        let new = NewIssue {
            title,
            body,
            labels: [LABEL],
        };
        self.send(Method::POST, "issues", &new).await
    }

    /// `PATCH /repos/{owner}/{repo}/issues/{number}` with a new body.
    pub async fn update_issue_body(&self, number: u64, body: &str) -> Result<Issue, ApiError> {
        self.send(
            Method::PATCH,
            &format!("issues/{number}"),
            &BodyOnly { body },
        )
        .await
    }

    /// `PATCH /repos/{owner}/{repo}/issues/{number}` to `closed` (completed).
    pub async fn close_issue(&self, number: u64) -> Result<Issue, ApiError> {
        let close = CloseIssue {
            state: "closed",
            state_reason: "completed",
        };
        self.send(Method::PATCH, &format!("issues/{number}"), &close)
            .await
    }

    /// `GET /repos/{owner}/{repo}/commits?path=P&sha=S&per_page=1`: the last commit at or before
    /// `sha` that changed `path` (the baseline's bless commit), if any.
    pub async fn last_commit_for_path(
        &self,
        path: &str,
        sha: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        let q = CommitQuery {
            path,
            sha,
            per_page: 1,
        };
        let list: Vec<CommitItem> = self.get("commits", Some(&q)).await?;
        Ok(list
            .into_iter()
            .next()
            .map(|c| c.sha)
            .filter(|s| (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())))
    }
}

/// What happened to the PR comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    Created(u64),
    Updated(u64),
}

/// Finds perfgate's comment on `pr` (the first whose body starts with `marker`), paging through
/// every comment, and updates it in place; creates it when there is none.
pub async fn upsert_comment(
    api: &Api,
    pr: u64,
    marker: &str,
    body: &str,
) -> Result<CommentAction, ApiError> {
    for page in 1..=MAX_COMMENT_PAGES {
        let comments = api.list_comments(pr, page).await?;
        if let Some(c) = comments
            .iter()
            .find(|c| c.body.as_deref().is_some_and(|b| b.starts_with(marker)))
        {
            api.update_comment(c.id, body).await?;
            return Ok(CommentAction::Updated(c.id));
        }
        if comments.len() < PER_PAGE {
            break;
        }
    }
    Ok(CommentAction::Created(
        api.create_comment(pr, body).await?.id,
    ))
}

/// What happened to the tracking issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueAction {
    /// A regression and no open issue: opened one.
    Opened(u64),
    /// A regression and an open issue: its body now holds the latest report.
    Updated(u64),
    /// A pass and an open issue: commented that it recovered and closed it.
    Recovered(u64),
    /// Nothing to do (a pass with no open issue, or a run that could not be judged).
    Nothing,
}

/// The open `perfgate`-labelled issue whose body starts with `marker`.
pub async fn find_tracking_issue(api: &Api, marker: &str) -> Result<Option<u64>, ApiError> {
    for page in 1..=MAX_ISSUE_PAGES {
        let issues = api.list_open_issues(page).await?;
        if let Some(i) = issues.iter().find(|i| {
            i.pull_request.is_none() && i.body.as_deref().is_some_and(|b| b.starts_with(marker))
        }) {
            return Ok(Some(i.number));
        }
        if issues.len() < PER_PAGE {
            break;
        }
    }
    Ok(None)
}

/// Keeps one tracking issue per check id. `failed`: `Some(true)` on FAIL, `Some(false)` on a
/// pass (PASS, WARN, IMPROVED), `None` when the run cannot say (could not measure, no baseline).
/// A pass comments `recovered` once, then closes the issue, so later passes find nothing to do.
pub async fn track_issue(
    api: &Api,
    marker: &str,
    failed: Option<bool>,
    title: &str,
    body: &str,
    recovered: &str,
) -> Result<IssueAction, ApiError> {
    let Some(failed) = failed else {
        return Ok(IssueAction::Nothing);
    };
    let open = find_tracking_issue(api, marker).await?;
    match (failed, open) {
        (true, Some(n)) => {
            api.update_issue_body(n, body).await?;
            Ok(IssueAction::Updated(n))
        }
        (true, None) => Ok(IssueAction::Opened(
            api.create_issue(title, body).await?.number,
        )),
        (false, Some(n)) => {
            api.create_comment(n, recovered).await?;
            api.close_issue(n).await?;
            Ok(IssueAction::Recovered(n))
        }
        (false, None) => Ok(IssueAction::Nothing),
    }
}

/// A one-line hint for a failed write, by status: what permission to grant, or why a fork PR
/// cannot write.
pub fn hint(e: &ApiError, what: &str, token_env: &str) -> String {
    match e.status {
        Some(401) => format!(
            "{what}: GitHub rejected the token in ${token_env} ({e}); check that it is set to a valid token"
        ),
        Some(403) if what.contains("issue") => format!(
            "{what}: GitHub answered 403 ({}); grant the job `permissions: issues: write`",
            e.message
        ),
        Some(403) => format!(
            "{what}: GitHub answered 403 ({}); grant the job `permissions: pull-requests: write`. A pull_request run from a fork gets a read-only token: use the fork-safe workflow_run pattern (README)",
            e.message
        ),
        Some(404) => format!(
            "{what}: GitHub answered 404 ({}); check --repo/--pr (GITHUB_REPOSITORY, the event's PR number) and that the token can see the repository",
            e.message
        ),
        _ => format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Serves one connection on 127.0.0.1 with `head` then `body_bytes` bytes of a JSON array
    /// of comments (chunked); the thread ends when the client goes away or all is written.
    fn server(head: &'static str, body_bytes: usize) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(head.as_bytes());
            let item = format!(r#"{{"id":1,"body":"{}"}},"#, "x".repeat(65_000));
            let mut chunk = |data: &str| {
                let _ = write!(s, "{:x}\r\n{data}\r\n", data.len());
            };
            chunk("[");
            let mut sent = 1;
            while sent + item.len() < body_bytes {
                chunk(&item);
                sent += item.len();
            }
            chunk(r#"{"id":2,"body":"end"}]"#);
            let _ = s.write_all(b"0\r\n\r\n");
        });
        port
    }

    fn api(port: u16) -> Api {
        Api::new(
            &format!("http://127.0.0.1:{port}"),
            &Token::new("t").unwrap(),
            &Repo::parse("o/r").unwrap(),
        )
        .unwrap()
    }

    const HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

    /// A comments page of 40 MB (a hostile API or proxy; one that never ends grew perfgate to
    /// 2 GB): refused at MAX_RESPONSE_BYTES. Before the cap, octocrab read it whole and this
    /// returned 600-odd comments.
    #[tokio::test]
    async fn an_oversized_response_is_refused_not_read() {
        let port = server(HEAD, 40 << 20);
        let e = api(port).list_comments(1, 1).await.unwrap_err();
        assert_eq!(e.status, Some(200));
        assert!(e.message.contains("exceeded 16 MiB"), "{e}");
        // a normal page still reads
        let port = server(HEAD, 200_000);
        let page = api(port).list_comments(1, 1).await.unwrap();
        assert_eq!(page.len(), 4);
        assert_eq!(page[3].id, 2);
    }

    #[test]
    fn a_timeout_in_the_cause_chain_is_named() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("SendRequest")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "operation timed out",
        ));
        let m = chain_message(&e);
        assert!(m.starts_with("timed out:"), "{m}");
        assert!(m.contains("SendRequest: operation timed out"), "{m}");
    }
}
