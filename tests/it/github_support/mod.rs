//! A stateful fake of the parts of GitHub's REST API perfgate uses, on 127.0.0.1, for behaviour
//! tests (tests/it/github_fake.rs, tests/it/github_cli.rs). It keeps comments and issues in memory,
//! pages lists like GitHub (per_page up to 100, `Link` headers), enforces the 65,536-character
//! body limit with GitHub's 422, checks the bearer token, and can answer writes with 403 (a fork's
//! read-only token) or everything with 404. Bounded: at most [`MAX_REQUESTS`] requests are served,
//! request bodies are capped, and the server stops when the [`FakeGithub`] is dropped.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub const TOKEN: &str = "test-token-0123";
pub const MAX_REQUESTS: usize = 2_000;
pub const BLESS_SHA: &str = "b1e55ed0b1e55ed0b1e55ed0b1e55ed0b1e55ed0";

#[derive(Debug, Clone)]
pub struct FakeComment {
    pub id: u64,
    pub issue: u64,
    pub body: String,
    pub user: String,
    /// How many times it was edited.
    pub edits: u32,
}

#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub state: String,
    pub is_pr: bool,
}

#[derive(Debug, Default)]
pub struct State {
    pub comments: Vec<FakeComment>,
    pub issues: Vec<FakeIssue>,
    /// `METHOD path?query` of every request, in order.
    pub log: Vec<String>,
    /// Answer writes (POST/PATCH) with 403, like a fork PR's read-only token.
    pub forbid_writes: bool,
    /// Answer everything with 404.
    pub not_found: bool,
    pub next_id: u64,
    /// Authorization headers seen that were not the expected token (never the token itself).
    pub bad_auth: usize,
}

impl State {
    pub fn comments_on(&self, issue: u64) -> Vec<&FakeComment> {
        self.comments.iter().filter(|c| c.issue == issue).collect()
    }
    pub fn count(&self, method_path_prefix: &str) -> usize {
        self.log
            .iter()
            .filter(|l| l.starts_with(method_path_prefix))
            .count()
    }
    pub fn add_comment(&mut self, issue: u64, user: &str, body: &str) -> u64 {
        self.next_id += 1;
        let id = 1_000 + self.next_id;
        self.comments.push(FakeComment {
            id,
            issue,
            body: body.to_string(),
            user: user.to_string(),
            edits: 0,
        });
        id
    }
}

/// The server, on its own runtime thread so blocking tests (assert_cmd) can use it too.
pub struct FakeGithub {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl FakeGithub {
    pub fn start() -> FakeGithub {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(Mutex::new(State {
            next_id: 0,
            ..State::default()
        }));
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let st = state.clone();
        rt.spawn(async move {
            let mut served = 0usize;
            while served < MAX_REQUESTS {
                let Ok((stream, _)) = listener.accept().await else {
                    break;
                };
                served += 1;
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, std::convert::Infallible>(handle(req, &st, addr).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, svc);
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(60), conn).await;
                });
            }
        });
        FakeGithub {
            addr,
            state,
            rt: Some(rt),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(
        status,
        json!({"message": message, "documentation_url": "https://docs.github.com/rest", "status": status.as_u16().to_string()}),
    )
}

fn comment_json(c: &FakeComment, repo: &str, base: &str) -> Value {
    json!({
        "id": c.id,
        "node_id": format!("IC_{}", c.id),
        "url": format!("{base}/repos/{repo}/issues/comments/{}", c.id),
        "html_url": format!("https://github.com/{repo}/issues/{}#issuecomment-{}", c.issue, c.id),
        "body": c.body,
        "user": {"login": c.user, "id": 1, "type": "Bot"},
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "author_association": "NONE"
    })
}

fn issue_json(i: &FakeIssue, repo: &str) -> Value {
    let mut v = json!({
        "id": 10_000 + i.number,
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "state": i.state,
        "labels": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "html_url": format!("https://github.com/{repo}/issues/{}", i.number),
    });
    if i.is_pr {
        v["pull_request"] = json!({"url": "x"});
    }
    v
}

fn query(uri: &hyper::Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                v.replace("%2F", "/").replace("%2f", "/").replace('+', " "),
            )
        })
        .collect()
}

/// Pages `items` like GitHub: `per_page` (default 30, max 100), `page` from 1, `Link` header.
fn paged(
    items: Vec<Value>,
    q: &BTreeMap<String, String>,
    base: &str,
    path: &str,
) -> Response<Full<Bytes>> {
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let pages = items.len().div_ceil(per_page).max(1);
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let mut r = reply(StatusCode::OK, Value::Array(slice));
    if page < pages {
        let link = format!(
            "<{base}{path}?per_page={per_page}&page={}>; rel=\"next\", <{base}{path}?per_page={per_page}&page={pages}>; rel=\"last\"",
            page + 1
        );
        r.headers_mut().insert("link", link.parse().unwrap());
    }
    r
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    st: &Arc<Mutex<State>>,
    addr: SocketAddr,
) -> Response<Full<Bytes>> {
    let base = format!("http://{addr}");
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path().to_string();
    let q = query(&uri);
    let auth_ok = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    let body = match Limited::new(req.into_body(), 4 << 20).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
    };
    let mut s = st.lock().unwrap();
    if s.log.len() >= MAX_REQUESTS {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "request budget of the fake spent",
        );
    }
    s.log.push(format!(
        "{method} {path}{}",
        uri.query().map(|q| format!("?{q}")).unwrap_or_default()
    ));
    if !auth_ok {
        s.bad_auth += 1;
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if s.not_found {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let is_write = method == Method::POST || method == Method::PATCH;
    if is_write && s.forbid_writes {
        return error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        );
    }
    let json_body: Value = if is_write {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    } else {
        Value::Null
    };
    if let Some(b) = json_body.get("body").and_then(|b| b.as_str()) {
        if b.chars().count() > 65_536 {
            return reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"message": "Validation Failed", "errors": [{"resource": "IssueComment", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"}]}),
            );
        }
    }
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // /repos/{owner}/{repo}/...
    if seg.len() < 4 || seg[0] != "repos" {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let repo = format!("{}/{}", seg[1], seg[2]);
    let rest = &seg[3..];
    match (method.as_str(), rest) {
        ("GET", ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let items = s
                .comments
                .iter()
                .filter(|c| c.issue == n)
                .map(|c| comment_json(c, &repo, &base))
                .collect();
            paged(items, &q, &base, &path)
        }
        ("POST", ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(b) = json_body.get("body").and_then(|b| b.as_str()) else {
                return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request: body");
            };
            let b = b.to_string();
            let id = s.add_comment(n, "github-actions[bot]", &b);
            let c = s.comments.iter().find(|c| c.id == id).unwrap().clone();
            reply(StatusCode::CREATED, comment_json(&c, &repo, &base))
        }
        ("PATCH", ["issues", "comments", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let Some(b) = json_body.get("body").and_then(|b| b.as_str()) else {
                return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request: body");
            };
            let b = b.to_string();
            match s.comments.iter_mut().find(|c| c.id == id) {
                Some(c) => {
                    c.body = b;
                    c.edits += 1;
                    let c = c.clone();
                    reply(StatusCode::OK, comment_json(&c, &repo, &base))
                }
                None => error(StatusCode::NOT_FOUND, "Not Found"),
            }
        }
        ("GET", ["issues"]) => {
            let state = q.get("state").cloned().unwrap_or_else(|| "open".into());
            let labels: Vec<String> = q
                .get("labels")
                .map(|l| l.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            let items = s
                .issues
                .iter()
                .filter(|i| state == "all" || i.state == state)
                .filter(|i| labels.iter().all(|l| i.labels.contains(l)))
                .map(|i| issue_json(i, &repo))
                .collect();
            paged(items, &q, &base, &path)
        }
        ("POST", ["issues"]) => {
            let title = json_body["title"].as_str().unwrap_or_default().to_string();
            if title.is_empty() {
                return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request: title");
            }
            s.next_id += 1;
            let number = s.next_id;
            let issue = FakeIssue {
                number,
                title,
                body: json_body["body"].as_str().unwrap_or_default().to_string(),
                labels: json_body["labels"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|l| l.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                state: "open".into(),
                is_pr: false,
            };
            s.issues.push(issue.clone());
            reply(StatusCode::CREATED, issue_json(&issue, &repo))
        }
        ("PATCH", ["issues", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            match s.issues.iter_mut().find(|i| i.number == n) {
                Some(i) => {
                    if let Some(b) = json_body["body"].as_str() {
                        i.body = b.to_string();
                    }
                    if let Some(st) = json_body["state"].as_str() {
                        i.state = st.to_string();
                    }
                    let i = i.clone();
                    reply(StatusCode::OK, issue_json(&i, &repo))
                }
                None => error(StatusCode::NOT_FOUND, "Not Found"),
            }
        }
        ("GET", ["commits"]) => {
            if q.get("path").is_none_or(|p| p.is_empty()) {
                return reply(StatusCode::OK, json!([]));
            }
            reply(
                StatusCode::OK,
                json!([{"sha": BLESS_SHA, "commit": {"message": "bless", "committer": {"date": "2026-01-01T00:00:00Z"}}}]),
            )
        }
        _ => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// A results model with `n` scenarios; every `fail_every`-th has a TPOT P50 FAIL (0 = none).
pub fn results(n: usize, fail_every: usize, verdict: &str) -> perfgate::results::Results {
    let check = |name: &str, metric: &str, v: &str, ratio: f64| {
        json!({
            "scenario": name, "metric": metric, "kind": {"quantile": "p50"},
            "baseline": 4.0, "candidate": 4.0 * ratio, "ratio": ratio,
            "ci": [ratio - 0.02, ratio + 0.02], "p_value": 0.001, "p_holm": 0.002,
            "warn": 0.05, "fail": 0.1, "min_delta_ms": 0.5, "n_baseline": 20, "n_candidate": 20,
            "verdict": v, "reason": format!("{v}: change {ratio:.2}x")
        })
    };
    let scenarios: Vec<Value> = (0..n)
        .map(|i| {
            let name = format!("scenario-{i:04}");
            let failing = fail_every > 0 && i % fail_every == 0;
            let (v, ratio) = if failing { ("FAIL", 1.3) } else { ("PASS", 1.0) };
            json!({
                "name": name, "fingerprint": "f00d", "source": "scenarios/s.yaml:1",
                "endpoint": "sim://?seed=1", "api": "openai-chat", "model": "perfgate-sim",
                "concurrency": 1, "status": "compared",
                "baseline": {"path": format!("baselines/{name}.json"), "created_at": "2026-01-01T00:00:00Z",
                             "perfgate_version": "0.1.0", "requests": 20, "summary": {}},
                "measured": {"requests": 20, "ok": 20, "failed": 0, "errors_by_class": {},
                             "wall_ms": 1000.0, "output_tokens_per_s": 100.0, "requests_per_s": 20.0,
                             "summary": {}},
                "checks": [check(&name, "ttft", "PASS", 1.0), check(&name, "tpot", v, ratio)],
                "records": []
            })
        })
        .collect();
    let exit_code = if verdict == "FAIL" { 1 } else { 0 };
    serde_json::from_value(json!({
        "schema_version": 1, "perfgate_version": "0.1.0", "created_at": "2026-01-01T00:00:00Z",
        "id": "perfgate/latency", "verdict": verdict, "exit_code": exit_code,
        "family_size": 2 * n, "scenarios": scenarios
    }))
    .expect("results fixture matches the results model")
}
