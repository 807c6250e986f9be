//! Behaviour of the GitHub integration against a local stateful fake of GitHub's REST API
//! (tests/it/github_support): the marker found on page 2, update in place, a fork's 403, a report
//! over GitHub's 65,536-character limit, the tracking issue of scheduled runs, a missing token.
//! Everything runs on 127.0.0.1; every call is bounded by perfgate's own API deadline.

use crate::github_support;

use github_support::{results, FakeGithub, BLESS_SHA, TOKEN};
use perfgate::github::api::{CommentAction, IssueAction};
use perfgate::github::{publish_with, GithubArgs, Outcome, Reports, MAX_BODY_BYTES};
use perfgate::results::Results;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- perfgate:perfgate/latency -->";

struct Run {
    dir: tempfile::TempDir,
    env: HashMap<String, String>,
}

impl Run {
    /// A GitHub Actions environment for a pull_request run on PR `pr` (None: a schedule run).
    fn new(gh: &FakeGithub, pr: Option<u64>) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let mut env: HashMap<String, String> = HashMap::new();
        let mut set = |k: &str, v: &str| {
            env.insert(k.to_string(), v.to_string());
        };
        set("GITHUB_ACTIONS", "true");
        set("GITHUB_REPOSITORY", "octo/demo");
        set("GITHUB_API_URL", &gh.url());
        set("GITHUB_SERVER_URL", "https://github.com");
        set("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567");
        set("GITHUB_RUN_ID", "4242");
        set("GITHUB_TOKEN", TOKEN);
        let summary = dir.path().join("summary.md");
        let output = dir.path().join("output.txt");
        set("GITHUB_STEP_SUMMARY", summary.to_str().unwrap());
        set("GITHUB_OUTPUT", output.to_str().unwrap());
        match pr {
            Some(n) => {
                let ev = dir.path().join("event.json");
                std::fs::write(
                    &ev,
                    format!(r#"{{"number": {n}, "pull_request": {{"number": {n}}}}}"#),
                )
                .unwrap();
                set("GITHUB_EVENT_NAME", "pull_request");
                set("GITHUB_EVENT_PATH", ev.to_str().unwrap());
            }
            None => set("GITHUB_EVENT_NAME", "schedule"),
        }
        Run { dir, env }
    }

    fn publish(&self, r: &Results) -> Outcome {
        self.publish_args(r, &GithubArgs::default())
    }

    fn publish_args(&self, r: &Results, args: &GithubArgs) -> Outcome {
        let env = self.env.clone();
        let lookup = move |k: &str| env.get(k).cloned();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let json = PathBuf::from("perfgate-results.json");
        rt.block_on(publish_with(
            r,
            args,
            Reports {
                json: Some(&json),
                markdown: None,
            },
            &lookup,
        ))
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

#[test]
fn marker_on_page_two_is_found_and_the_comment_updated_in_place() {
    let gh = FakeGithub::start();
    let ours = {
        let mut s = gh.state();
        for i in 0..130 {
            // One human comment quotes the marker mid-text: not ours, must not be edited.
            let body = if i == 3 {
                format!("> quoting the bot: {MARKER}")
            } else {
                format!("comment {i}")
            };
            s.add_comment(7, "someone", &body);
        }
        let id = s.add_comment(7, "github-actions[bot]", &format!("{MARKER}\nold report"));
        for i in 0..20 {
            s.add_comment(7, "someone", &format!("later comment {i}"));
        }
        id
    };
    let run = Run::new(&gh, Some(7));
    let out = run.publish(&results(3, 0, "PASS"));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.comment, Some(CommentAction::Updated(ours)));
    let s = gh.state();
    assert_eq!(s.comments_on(7).len(), 151, "no comment created");
    assert_eq!(s.count("POST"), 0, "{:?}", s.log);
    let ours_now = s.comments.iter().find(|c| c.id == ours).unwrap();
    assert_eq!(ours_now.edits, 1);
    assert!(ours_now.body.starts_with(MARKER) && ours_now.body.contains("no regression"));
    let quoted = &s.comments_on(7)[3];
    assert_eq!(
        quoted.edits, 0,
        "a comment quoting the marker is not perfgate's"
    );
    // It paged: page 1 then page 2, 100 per page, and stopped there.
    let pages: Vec<&String> = s
        .log
        .iter()
        .filter(|l| l.starts_with("GET /repos/octo/demo/issues/7/comments"))
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert!(pages[0].contains("per_page=100") && pages[0].contains("page=1"));
    assert!(pages[1].contains("page=2"));
    assert_eq!(s.bad_auth, 0);
}

#[test]
fn two_runs_leave_one_comment_edited_in_place() {
    let gh = FakeGithub::start();
    let run = Run::new(&gh, Some(12));
    let first = run.publish(&results(2, 0, "PASS"));
    let Some(CommentAction::Created(id)) = first.comment else {
        panic!("{first:?}")
    };
    let second = run.publish(&results(2, 1, "FAIL"));
    assert_eq!(second.comment, Some(CommentAction::Updated(id)));
    let s = gh.state();
    let comments = s.comments_on(12);
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].edits, 1);
    assert!(comments[0].body.contains("latency regression"));
    // The baseline's bless commit and the run link are in the body.
    let short = &BLESS_SHA[..7];
    assert!(
        comments[0].body.contains(&format!(
            "(commit [`{short}`](https://github.com/octo/demo/commit/{BLESS_SHA}))"
        )),
        "{}",
        comments[0].body
    );
    assert!(comments[0]
        .body
        .contains("[workflow run](https://github.com/octo/demo/actions/runs/4242)"));
    assert!(
        s.log
            .iter()
            .any(|l| l
                .starts_with("GET /repos/octo/demo/commits?path=baselines%2Fscenario-0000.json"))
    );
}

#[test]
fn fork_pr_403_warns_with_a_hint_and_still_writes_summary_and_outputs() {
    let gh = FakeGithub::start();
    gh.state().forbid_writes = true;
    let run = Run::new(&gh, Some(3));
    let out = run.publish(&results(2, 1, "FAIL"));
    assert_eq!(out.comment, None);
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    let w = &out.warnings[0];
    assert!(
        w.contains("403") && w.contains("pull-requests: write") && w.contains("fork"),
        "{w}"
    );
    assert!(!w.contains(TOKEN));
    assert_eq!(w.lines().count(), 1);
    assert!(run.file("summary.md").contains("latency regression"));
    let o = run.file("output.txt");
    assert!(
        o.contains("verdict=FAIL\n") && o.contains("regressions=2\n"),
        "{o}"
    );
    assert!(o.contains("report-json=perfgate-results.json\n"), "{o}");
    assert!(gh.state().comments.is_empty());
}

#[test]
fn not_found_and_bad_token_give_one_line_hints() {
    let gh = FakeGithub::start();
    gh.state().not_found = true;
    let run = Run::new(&gh, Some(3));
    let out = run.publish(&results(1, 0, "PASS"));
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("404") && w.contains("--repo")),
        "{:?}",
        out.warnings
    );
    gh.state().not_found = false;
    let mut run = Run::new(&gh, Some(3));
    run.env.insert("GITHUB_TOKEN".into(), "wrong-token".into());
    let out = run.publish(&results(1, 0, "PASS"));
    let w = out.warnings.join("\n");
    assert!(w.contains("401") && w.contains("$GITHUB_TOKEN"), "{w}");
    assert!(!w.contains("wrong-token"));
}

#[test]
fn no_token_warns_and_keeps_the_step_summary() {
    let gh = FakeGithub::start();
    let mut run = Run::new(&gh, Some(3));
    run.env.remove("GITHUB_TOKEN");
    let out = run.publish(&results(1, 0, "PASS"));
    assert_eq!(out.comment, None);
    assert!(
        out.warnings[0].contains("no token in $GITHUB_TOKEN"),
        "{:?}",
        out.warnings
    );
    assert!(run
        .file("summary.md")
        .starts_with("<!-- perfgate:perfgate/latency -->"));
    assert!(gh.state().log.is_empty(), "no API call without a token");
}

#[test]
fn a_report_over_65536_characters_keeps_the_failing_rows_and_points_to_the_summary() {
    let gh = FakeGithub::start();
    let run = Run::new(&gh, Some(5));
    // 800 scenarios, every 7th failing: the full report is far over the limit.
    let r = results(800, 7, "FAIL");
    let full = perfgate::report::markdown::render(&r);
    assert!(full.chars().count() > 65_536, "{}", full.len());
    let out = run.publish(&r);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(matches!(out.comment, Some(CommentAction::Created(_))));
    let s = gh.state();
    let body = &s.comments_on(5)[0].body;
    assert!(body.chars().count() <= 65_536 && body.len() <= MAX_BODY_BYTES);
    assert!(body.starts_with(MARKER));
    assert!(
        body.lines().nth(1).unwrap().contains("latency regression"),
        "verdict line first"
    );
    assert!(body.contains("step summary") && body.contains("actions/runs/4242"));
    for i in (0..800).step_by(7) {
        let row = format!("| scenario-{i:04} | TPOT P50 |");
        assert!(body.contains(&row), "missing failing row {row}");
    }
    assert!(
        !body.contains("✅ PASS |"),
        "passing rows are dropped first"
    );
    assert!(!body.contains("<details>"));
    // The step summary has the whole report.
    let summary = run.file("summary.md");
    assert!(summary.contains("| scenario-0799 | TTFT P50 |"));
    assert!(summary.chars().count() > 65_536);
}

#[test]
fn thousands_of_failing_rows_still_fit() {
    let gh = FakeGithub::start();
    let run = Run::new(&gh, Some(5));
    let out = run.publish(&results(2500, 1, "FAIL"));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let s = gh.state();
    let body = &s.comments_on(5)[0].body;
    assert!(body.len() <= MAX_BODY_BYTES);
    assert!(body.contains("| scenario-0000 | TPOT P50 |"));
    assert!(body.contains("more FAIL/WARN row(s)"));
}

#[test]
fn scheduled_runs_keep_one_tracking_issue_and_say_recovered_once() {
    let gh = FakeGithub::start();
    let run = Run::new(&gh, None);
    let fail = results(2, 1, "FAIL");
    let pass = results(2, 0, "PASS");

    let o = run.publish(&fail);
    let Some(IssueAction::Opened(n)) = o.issue else {
        panic!("{o:?}")
    };
    let o = run.publish(&fail);
    assert_eq!(o.issue, Some(IssueAction::Updated(n)));
    {
        let s = gh.state();
        assert_eq!(s.issues.len(), 1);
        assert_eq!(s.issues[0].labels, vec!["perfgate".to_string()]);
        assert!(s.issues[0].body.starts_with(MARKER));
        assert!(
            s.comments.is_empty(),
            "a still-failing run does not comment"
        );
    }
    let o = run.publish(&pass);
    assert_eq!(o.issue, Some(IssueAction::Recovered(n)));
    let o = run.publish(&pass);
    assert_eq!(o.issue, Some(IssueAction::Nothing));
    {
        let s = gh.state();
        assert_eq!(s.issues[0].state, "closed");
        let c = s.comments_on(n);
        assert_eq!(c.len(), 1, "recovered is said once");
        assert!(c[0].body.contains("recovered"));
    }
    // A new regression opens a new issue; a run that cannot measure leaves it alone.
    let o = run.publish(&fail);
    let Some(IssueAction::Opened(m)) = o.issue else {
        panic!("{o:?}")
    };
    assert_ne!(m, n);
    let o = run.publish(&results(1, 0, "ERROR"));
    assert_eq!(o.issue, Some(IssueAction::Nothing));
    assert_eq!(
        gh.state()
            .issues
            .iter()
            .filter(|i| i.state == "open")
            .count(),
        1
    );
    // --no-issue: no API call at all.
    let before = gh.state().log.len();
    let args = GithubArgs {
        no_issue: true,
        ..GithubArgs::default()
    };
    let o = run.publish_args(&fail, &args);
    assert_eq!(o.issue, None);
    let calls: Vec<String> = gh.state().log[before..].to_vec();
    assert!(
        calls
            .iter()
            .all(|l| l.starts_with("GET /repos/octo/demo/commits")),
        "{calls:?}"
    );
}

#[test]
fn comment_file_and_no_comment_for_the_fork_safe_pattern() {
    let gh = FakeGithub::start();
    let run = Run::new(&gh, Some(9));
    let file = run.path("out/comment.md");
    let args = GithubArgs {
        no_comment: true,
        comment_file: Some(file.clone()),
        ..GithubArgs::default()
    };
    let out = run.publish_args(&results(2, 1, "FAIL"), &args);
    assert_eq!(out.comment, None);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let body = std::fs::read_to_string(Path::new(&file)).unwrap();
    assert!(body.starts_with(MARKER));
    assert!(body.len() <= MAX_BODY_BYTES);
    assert_eq!(gh.state().comments.len(), 0);
    // Asked for explicitly, the file is written outside GitHub Actions too; nothing else is.
    let mut local = Run::new(&gh, Some(9));
    local.env.remove("GITHUB_ACTIONS");
    let file = local.path("comment.md");
    let args = GithubArgs {
        comment_file: Some(file.clone()),
        ..GithubArgs::default()
    };
    let before = gh.state().log.len();
    let out = local.publish_args(&results(1, 0, "PASS"), &args);
    assert!(!out.enabled && out.comment.is_none());
    assert!(std::fs::read_to_string(&file).unwrap().starts_with(MARKER));
    assert!(local.file("summary.md").is_empty());
    assert_eq!(gh.state().log.len(), before, "no API call");
}

#[test]
fn annotations_are_bounded_at_ten_per_kind() {
    let r = results(30, 1, "FAIL");
    let lines = perfgate::github::actions::annotations(&r);
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 10);
    assert!(errors[9].contains("21 more FAIL"), "{}", errors[9]);
    assert!(errors[0].starts_with("::error title=perfgate scenario-0000%3A TPOT P50 FAIL::"));
    assert!(lines.iter().all(|l| !l.contains('\n')));
}
