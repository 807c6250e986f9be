//! Every GitHub REST call perfgate makes, sent to Prism serving GitHub's official OpenAPI
//! description (npm `@octokit/openapi`, api.github.com) on 127.0.0.1. Prism rejects a request
//! that does not match the description (path, method, query, body) with 422, and with `--errors`
//! also fails when its own answer would not match, so each call passing here is a call GitHub
//! documents, with the parameters and body it documents.
//!
//! Prism and the spec come from scripts/github-tools.sh, which exports PERFGATE_PRISM and
//! PERFGATE_GITHUB_OPENAPI. Without them the test is skipped with a message, unless
//! PERFGATE_REQUIRE_GITHUB_TOOLS=1 (scripts/test.sh), where it fails.

use perfgate::github::api::{self, Api, CommentAction, IssueAction};
use perfgate::github::context::{Repo, Token};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills Prism when the test ends, however it ends.
struct Prism {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Drop for Prism {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools() -> Option<(String, String)> {
    let prism = std::env::var("PERFGATE_PRISM").ok();
    let spec = std::env::var("PERFGATE_GITHUB_OPENAPI").ok();
    match (prism, spec) {
        (Some(p), Some(s))
            if std::path::Path::new(&p).exists() && std::path::Path::new(&s).exists() =>
        {
            Some((p, s))
        }
        _ => {
            let msg = "Prism or GitHub's OpenAPI description not found: run \
                       `bash scripts/github-tools.sh setup` and \
                       `eval \"$(bash scripts/github-tools.sh env)\"` (sets PERFGATE_PRISM and \
                       PERFGATE_GITHUB_OPENAPI)";
            crate::support::missing("PERFGATE_REQUIRE_GITHUB_TOOLS", msg);
            None
        }
    }
}

/// One HTTP/1.1 GET over a plain socket, bounded in time; returns the status code.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace().nth(1)?.parse().ok()
}

fn start_prism(prism: &str, spec: &str) -> Prism {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let log = std::env::temp_dir().join(format!("perfgate-prism-{port}.log"));
    let logf = std::fs::File::create(&log).unwrap();
    let child = Command::new(prism)
        .args(["mock", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--errors", spec])
        .stdin(Stdio::null())
        .stdout(logf.try_clone().unwrap())
        .stderr(logf)
        .spawn()
        .expect("start prism");
    let p = Prism { child, addr, log };
    // Loading the 13 MB description takes ~10 s on this machine; allow 180 s under load.
    let t0 = Instant::now();
    while http_status(p.addr, "/zen").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "Prism did not answer within 180 s; log:\n{}",
            std::fs::read_to_string(&p.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("Prism ready on {} after {:?}", p.addr, t0.elapsed());
    p
}

/// Runs one call with a 60 s bound; panics with Prism's log when it fails.
async fn call<T>(
    p: &Prism,
    what: &str,
    f: impl std::future::Future<Output = Result<T, api::ApiError>>,
) -> T {
    let r = tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 60 s"));
    match r {
        Ok(v) => v,
        Err(e) => panic!(
            "{what}: {e}\nPrism log (tail):\n{}",
            tail(&std::fs::read_to_string(&p.log).unwrap_or_default(), 40)
        ),
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[test]
fn every_github_call_matches_githubs_openapi_description() {
    let Some((prism, spec)) = tools() else {
        return;
    };
    let p = start_prism(&prism, &spec);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = format!("http://{}", p.addr);
    let repo = Repo::parse("octo-org/hello.world").unwrap();
    let token = Token::new("test-token-not-a-secret").unwrap();
    let marker = "<!-- perfgate:prism/test -->";
    let body = format!("{marker}\n✅ **perfgate: no regression**\n\n| a | b |\n|---|---|\n");

    rt.block_on(async {
        let api = Api::new(&base, &token, &repo).unwrap();

        // Negative control: Prism does reject a request the description does not allow (a
        // comment without `body`), so the passes below mean something.
        let raw = format!("{base}/repos/octo-org/hello.world/issues/7/comments");
        let status = tokio::task::spawn_blocking(move || {
            let addr: SocketAddr = raw
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let payload = r#"{"text": "no body field"}"#;
            write!(
                s,
                "POST /repos/octo-org/hello.world/issues/7/comments HTTP/1.1\r\nHost: {addr}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            )
            .unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            out
        })
        .await
        .unwrap();
        assert!(
            status.starts_with("HTTP/1.1 422"),
            "Prism accepted an invalid request: {}",
            status.lines().next().unwrap_or("")
        );

        // Each call perfgate makes, one by one.
        let comments = call(&p, "list issue comments", api.list_comments(7, 1)).await;
        assert!(!comments.is_empty(), "Prism answers with the spec's example list");
        let page2 = call(&p, "list issue comments, page 2", api.list_comments(7, 2)).await;
        let _ = page2;
        let c = call(&p, "create issue comment", api.create_comment(7, &body)).await;
        assert!(c.id > 0);
        let c = call(&p, "update issue comment", api.update_comment(c.id, &body)).await;
        assert!(c.id > 0);
        let issues = call(&p, "list open perfgate issues", api.list_open_issues(1)).await;
        let _ = issues;
        let i = call(&p, "create issue", api.create_issue("perfgate: latency regression (prism/test)", &body)).await;
        assert!(i.number > 0);
        call(&p, "update issue body", api.update_issue_body(i.number, &body)).await;
        call(&p, "close issue", api.close_issue(i.number)).await;
        let sha = call(&p, "last commit of a baseline file", api.last_commit_for_path(
                "baselines/short-prompt.json",
                Some("0123456789abcdef0123456789abcdef01234567"),
            )).await;
        assert!(sha.is_some(), "the spec's example commit list has a sha");
        let sha = call(&p, "last commit of a baseline file, no sha", api.last_commit_for_path("baselines/x.json", None)).await;
        let _ = sha;

        // And the flows built from them. Prism's example comments and issues do not carry our
        // marker, so the comment is created and a FAIL opens an issue.
        let a = call(&p, "upsert comment", api::upsert_comment(&api, 7, marker, &body)).await;
        assert!(matches!(a, CommentAction::Created(_)), "{a:?}");
        let a = call(&p, "tracking issue on FAIL", api::track_issue(&api, marker, Some(true), "perfgate: latency regression", &body, "recovered")).await;
        assert!(matches!(a, IssueAction::Opened(_)), "{a:?}");
        let a = call(&p, "tracking issue on PASS", api::track_issue(&api, marker, Some(false), "t", &body, "recovered")).await;
        assert_eq!(a, IssueAction::Nothing);
    });

    // Prism logs its verdict on every request: exactly one (the negative control) failed
    // validation, and none of perfgate's requests, nor Prism's answers to them, were violations.
    let log = std::fs::read_to_string(&p.log).unwrap_or_default();
    let rejected = log
        .lines()
        .filter(|l| l.contains("Request did not pass the validation rules"))
        .count();
    assert_eq!(rejected, 1, "Prism log:\n{}", tail(&log, 80));
    let passed = log
        .lines()
        .filter(|l| l.contains("The request passed the validation rules"))
        .count();
    assert!(
        passed >= 15,
        "only {passed} requests validated; log:\n{}",
        tail(&log, 80)
    );
    let bad_answers: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("/repos/") && l.contains("VIOLATIONS"))
        .collect();
    assert!(bad_answers.is_empty(), "{}", bad_answers.join("\n"));
    let _ = std::fs::remove_file(&p.log);
}
