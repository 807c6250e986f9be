//! The `perfgate` binary in a simulated GitHub Actions pull_request run: the built-in simulator
//! (`sim://`) as the endpoint, a fake PR event file (`GITHUB_EVENT_PATH`) and the local fake
//! GitHub (`GITHUB_API_URL`, tests/it/github_support). Two `check` runs leave exactly one comment,
//! edited in place, whose body matches the insta snapshot (volatile numbers and timestamps
//! redacted); a fork's 403 warns and leaves the exit code to the verdict.

use crate::github_support;

use assert_cmd::Command;
use github_support::{FakeGithub, TOKEN};
use std::path::Path;

/// Two scenarios on the simulator, seeded: bless and check draw the same latencies, so only
/// scheduling noise differs. T sets the TPOT (default 8 ms).
const SIM: &str = r#"
defaults:
  endpoint:
    base_url: "sim://?ttft_ms=40&tpot_ms=${T:-8}&seed=3"
  request:
    prompt: "Say something."
    max_tokens: 16
    ignore_eos: true
  load:
    samples: 20
    warmup: 1
scenarios:
  - name: short-answer
  - name: longer-answer
    request: {max_tokens: 24}
"#;

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(dir.path().join("scenarios/s.yaml"), SIM).unwrap();
    std::fs::write(
        dir.path().join("event.json"),
        r#"{"action": "synchronize", "number": 7, "pull_request": {"number": 7, "head": {"sha": "0123456789abcdef0123456789abcdef01234567"}}}"#,
    )
    .unwrap();
    dir
}

/// perfgate with none of the host's GitHub or runner variables (the tests may themselves run
/// inside GitHub Actions).
fn perfgate(dir: &Path) -> Command {
    let mut c = crate::support::perfgate_in(dir, 180);
    c.env_remove("T");
    c
}

/// `perfgate check` as the PR job `latency` of workflow `perfgate` would run it.
fn check_in_actions(dir: &Path, gh: &FakeGithub) -> Command {
    let mut c = perfgate(dir);
    let d = dir.to_str().unwrap();
    c.args(["check", "--output", "results.json"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKFLOW", "perfgate")
        .env("GITHUB_JOB", "latency")
        .env("GITHUB_REPOSITORY", "octo/demo")
        .env("GITHUB_EVENT_NAME", "pull_request")
        .env("GITHUB_EVENT_PATH", format!("{d}/event.json"))
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
        .env("GITHUB_RUN_ID", "987654")
        .env("GITHUB_WORKSPACE", d)
        .env("GITHUB_STEP_SUMMARY", format!("{d}/summary.md"))
        .env("GITHUB_OUTPUT", format!("{d}/output.txt"))
        .env("GITHUB_TOKEN", TOKEN);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn bless(dir: &Path) {
    let o = perfgate(dir)
        .args(["bless", "--runs", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// A fresh reader's walk (issue 46): with GitHub's API unreachable, the warning says the API did
/// not answer, not that the job needs `contents: read`; the check's own verdict stands (exit 0).
#[test]
fn an_unreachable_api_is_not_called_a_missing_permission() {
    let dir = setup();
    bless(dir.path());
    let gh = FakeGithub::start();
    // a port nothing listens on: bound, then closed
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = check_in_actions(dir.path(), &gh)
        .env("GITHUB_API_URL", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let all = format!("{out}{err}");
    assert!(
        all.contains("cannot look up the baselines' commits: GitHub's API did not answer ("),
        "{all}"
    );
    assert!(!all.contains("needs `contents: read`"), "{all}");
}

#[test]
fn two_checks_in_a_pr_leave_one_comment_edited_in_place() {
    let dir = setup();
    bless(dir.path());
    let gh = FakeGithub::start();
    // Somebody else's comment is already on the PR.
    gh.state()
        .add_comment(7, "reviewer", "LGTM once the latency check is green");

    let o = check_in_actions(dir.path(), &gh).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains("perfgate: created the PR comment"), "{err}");
    let (id, first_body) = {
        let s = gh.state();
        let ours: Vec<_> = s
            .comments_on(7)
            .into_iter()
            .filter(|c| c.user != "reviewer")
            .cloned()
            .collect();
        assert_eq!(ours.len(), 1);
        (ours[0].id, ours[0].body.clone())
    };

    let o = check_in_actions(dir.path(), &gh).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains(&format!("perfgate: updated the PR comment ({id})")),
        "{err}"
    );

    let s = gh.state();
    let all = s.comments_on(7);
    assert_eq!(
        all.len(),
        2,
        "the reviewer's comment and exactly one perfgate comment"
    );
    let ours = all.iter().find(|c| c.id == id).unwrap();
    assert_eq!(ours.edits, 1, "edited in place by the second run");
    assert_eq!(s.count("POST /repos/octo/demo/issues/7/comments"), 1);
    assert_eq!(s.count("PATCH /repos/octo/demo/issues/comments/"), 1);
    assert_eq!(s.bad_auth, 0);
    assert!(ours
        .body
        .starts_with("<!-- perfgate:perfgate/latency -->\n"));
    assert_ne!(
        ours.body, first_body,
        "the second run's numbers replaced the first's"
    );

    // The step summary got the full report once per run; the outputs name the verdict.
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert_eq!(
        summary
            .matches("<!-- perfgate:perfgate/latency -->")
            .count(),
        2
    );
    let outputs = std::fs::read_to_string(dir.path().join("output.txt")).unwrap();
    assert!(outputs.contains("regressions=0\n"), "{outputs}");
    assert!(outputs.contains("report-json=results.json\n"), "{outputs}");
    // No token anywhere a user could see.
    assert!(!out.contains(TOKEN) && !err.contains(TOKEN) && !summary.contains(TOKEN));

    insta::with_settings!({
        description => "the PR comment after the second `perfgate check` (numbers redacted)",
        // tests/snapshots/github_cli__pr_comment_after_two_runs.snap, as when this file was its
        // own test binary.
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            // Charts belong to the markdown renderer's own snapshots; here only their place.
            (r"(?s)```mermaid\n.*```\n", "[charts]\n"),
            // A busy machine adds a client-lag note; whether it does depends on the load.
            (r"(?m)^Note: client busy: .*\n\n", ""),
            // Whether a P50 row's shift and its two columns differ by more than 2 points (the
            // line that shows both) depends on the two runs' noise; report_snapshots asserts it.
            (r"(?m)^- \S+: \S+ P50: the change [^\n]*two P50 columns alone differ[^\n]*\n", ""),
            (r"(?m)\n^\S+ P50: the change [^\n]*two P50 columns alone differ[^\n]*\n", ""),
            // Whether a check of two runs of the same simulator WARNs depends on the machine's
            // load between them (the verdict is asserted above: no regression); the place of
            // the warned rows is what this snapshot keeps.
            (
                r"(?s)\n\n(?:No check failed or warned\.|\| scenario \| check \| baseline .*?)\n\n(\*change)",
                "\n\n[the rows that warned, if any]\n\n$1",
            ),
            // The `why` cell of the per-scenario tables: its wording follows the verdict and
            // belongs to the gate; the cell must be there.
            (r"(?m)^((?:\| (?:[^|\n\\]|\\.)* ){7})\| (?:[^|\n\\]|\\.)+ \|$", "${1}| [why] |"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[timestamp]"),
            (r"(✅ PASS|⚠️ WARN|🚀 IMPROVED)", "[ok verdict]"),
            (r"(✅ \*\*perfgate: no regression\*\*|⚠️ \*\*perfgate: no regression, with warnings\*\*)", "[no regression]"),
            (r"\[[+-]?\d+(\.\d+)?%, [+-]?\d+(\.\d+)?%\]", "[CI]"),
            (r"[+-]?\d+(\.\d+)?( ms| s\b| pp|%)", "[x]$2"),
            (r"\d+\.\d+ output tokens/s", "[x] output tokens/s"),
            (r"(\(p = |p = )\d\.\d+", "${1}[p]"),
            (r"\d+/\d+ (baseline|candidate)", "[k/n] $1"),
            (r"HD P90 ratio \d\.\d+", "HD P90 ratio [r]"),
            (r"\d+ FAIL, \d+ WARN, \d+ IMPROVED, \d+ PASS", "[counts]"),
            (r"\| \d+/\d+ \|", "| [n/n] |"),
            (r"(needs ~?|needs n >= )\d+", "${1}[n]"),
        ]
    }, {
        insta::assert_snapshot!("github_cli__pr_comment_after_two_runs", ours.body);
    });
}

#[test]
fn fork_pr_403_warns_and_the_exit_code_follows_the_verdict() {
    let dir = setup();
    bless(dir.path());
    let gh = FakeGithub::start();
    gh.state().forbid_writes = true;

    // 30 % slower TPOT: a regression, exit 1, whatever happens to the comment.
    let o = check_in_actions(dir.path(), &gh)
        .env("T", "10.4")
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    let warning = out
        .lines()
        .find(|l| l.starts_with("::warning title=perfgate GitHub::PR #7 comment"))
        .unwrap_or_else(|| panic!("no 403 warning in\n{out}"));
    assert!(
        warning.contains("403") && warning.contains("pull-requests: write"),
        "{warning}"
    );
    assert!(warning.contains("fork"), "{warning}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error title=perfgate longer-answer%3A TPOT P50 FAIL::")),
        "{out}"
    );
    let outputs = std::fs::read_to_string(dir.path().join("output.txt")).unwrap();
    assert!(outputs.contains("verdict=FAIL\n"), "{outputs}");
    assert!(std::fs::read_to_string(dir.path().join("summary.md"))
        .unwrap()
        .contains("latency regression"));

    // No regression: exit 0 despite the same 403.
    let o = check_in_actions(dir.path(), &gh).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("::warning title=perfgate GitHub::PR #7 comment: GitHub answered 403"),
        "{out}"
    );
    assert!(gh.state().comments.is_empty());
}

#[test]
fn outside_github_actions_nothing_is_sent() {
    let dir = setup();
    bless(dir.path());
    let gh = FakeGithub::start();
    let o = check_in_actions(dir.path(), &gh)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(gh.state().log.is_empty());
    assert!(!dir.path().join("summary.md").exists());
    // --github on, with flags instead of the environment, does send.
    let o = check_in_actions(dir.path(), &gh)
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_EVENT_PATH")
        .env_remove("GITHUB_REPOSITORY")
        .args(["--github", "on", "--repo", "octo/demo", "--pr", "8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(gh.state().comments_on(8).len(), 1);
}

/// The composite action's run step (scripts/action-entrypoint.sh), run directly with the binary
/// on PATH as the install step leaves it: inputs become flags, `fail-on` maps the exit code, bad
/// inputs are refused.
#[test]
fn action_entrypoint_maps_inputs_to_flags_and_fail_on() {
    let dir = setup();
    bless(dir.path());
    let bin = assert_cmd::cargo::cargo_bin("perfgate");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/action-entrypoint.sh");
    let run = |inputs: &[(&str, &str)], slower: bool| {
        let mut c = std::process::Command::new("bash");
        c.arg(&script).current_dir(dir.path()).env("PATH", &path);
        for (k, _) in std::env::vars() {
            if k.starts_with("GITHUB_") || k.starts_with("PERFGATE_") || k == "T" {
                c.env_remove(k);
            }
        }
        c.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", dir.path().join("output.txt"));
        for (k, v) in inputs {
            c.env(k, v);
        }
        if slower {
            c.env("T", "10.4");
        }
        let _ = std::fs::remove_file(dir.path().join("output.txt"));
        c.output().unwrap()
    };

    // A regression with the defaults: exit 1, reports in the workspace, outputs set.
    let o = run(&[("PERFGATE_ARGS", "--only longer-answer")], true);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let outputs = std::fs::read_to_string(dir.path().join("output.txt")).unwrap();
    assert!(outputs.contains("verdict=FAIL\n"), "{outputs}");
    assert!(
        outputs.contains("report-json=perfgate-results.json\n"),
        "{outputs}"
    );
    assert!(
        outputs.contains("report-path=perfgate-report.md\n"),
        "{outputs}"
    );
    let json = std::fs::read_to_string(dir.path().join("perfgate-results.json")).unwrap();
    // The top-level verdict keeps this exact line (the entry point once grepped it for
    // `fail-on: warn`; it now passes PERFGATE_FAIL_ON to perfgate instead).
    assert!(
        json.lines().any(|l| l == "  \"verdict\": \"FAIL\","),
        "{json:.300}"
    );
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        r["scenarios"].as_array().unwrap().len(),
        1,
        "--only was passed"
    );

    // fail-on: never turns the regression into a passing step.
    let o = run(
        &[
            ("PERFGATE_FAIL_ON", "never"),
            ("PERFGATE_SCENARIOS", "scenarios\n"),
        ],
        true,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("fail-on: never"));

    // Bad inputs are refused with an annotation, before running anything.
    let o = run(&[("PERFGATE_COMMAND", "rm -rf /")], false);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stdout).starts_with("::error title=perfgate::input command must be"));
    // `ab` is not an input of the action: the error says where it runs instead (issue 46)
    let o = run(&[("PERFGATE_COMMAND", "ab")], false);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stdout).trim_end(),
        "::error title=perfgate::input command must be check, bless or validate: run `perfgate ab` in a step of its own after this action installed perfgate (examples/workflows/perfgate-ab.yml)"
    );
    let o = run(&[("PERFGATE_FAIL_ON", "sometimes")], false);
    assert_eq!(o.status.code(), Some(2));

    // validate takes no --baselines; comment: false passes --no-comment to check.
    let o = run(&[("PERFGATE_COMMAND", "validate")], false);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(
        &[
            ("PERFGATE_COMMENT", "false"),
            ("PERFGATE_ARGS", "--only short-answer"),
        ],
        false,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Issue 26 finding 22: `$GITHUB_OUTPUT` named `report-json` even when the results file could not
/// be written (a later step then read a missing file, or an older run's). Only files written now
/// are named; the verdict outputs are still set.
#[test]
fn step_outputs_name_only_report_files_that_were_written() {
    let dir = setup();
    bless(dir.path());
    let gh = FakeGithub::start();
    // a directory where the results JSON (--output results.json) goes: it cannot be written
    std::fs::create_dir_all(dir.path().join("results.json/in-the-way")).unwrap();
    let o = check_in_actions(dir.path(), &gh)
        .args([
            "--only",
            "short-answer",
            "--no-comment",
            "--markdown",
            "report.md",
        ])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "a report not written: {err}");
    assert!(
        err.contains("perfgate: error: cannot write the results JSON to results.json"),
        "{err}"
    );
    assert!(dir.path().join("results.json").is_dir());
    let outputs = std::fs::read_to_string(dir.path().join("output.txt")).unwrap();
    assert!(outputs.contains("verdict=PASS\n"), "{outputs}");
    assert!(!outputs.contains("report-json"), "{outputs}");
    assert!(outputs.contains("report-path=report.md\n"), "{outputs}");
    assert!(dir.path().join("report.md").exists());
}
