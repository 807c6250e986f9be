//! The nightly gate end to end (issue 29): a work repository whose `origin` is a bare repository
//! on disk, the built-in simulator as the server, the fake GitHub (tests/it/github_support) for
//! the tracking issue, and `perfgate check --history` run once a night as a scheduled workflow
//! would: 40 nights with night-to-night drift and a +20 % TPOT step from night 30, restored from
//! night 36: red from the step's second night, restored on the second night back. And two appends at once both land.

use crate::github_support::{FakeGithub, TOKEN};
use std::path::Path;
use std::process::Command as Std;

/// TPOT `T` ms (15 ms times the night's drift), seed per night; tight within-night noise so the
/// night's level is its drift. A night's TPOT error from a late last token is the lateness over
/// the decode time, so the decode is long (16 tokens x 15 ms = 225 ms, not 7 x 5 ms = 35 ms): on
/// a CI runner whose other tests load both cores a few ms of lateness are then ~2 % of a night,
/// not the ~7 % night-to-night spread that hid the +20 % step in CI of f8b18f4. Two streams keep
/// a night at ~3 s.
const SIM: &str = r#"
defaults:
  endpoint:
    base_url: "sim://?ttft_ms=20&tpot_ms=${T}&seed=${SEED}&tpot_sigma=0.03&ttft_sigma=0.03"
  request: {prompt: "Say something.", max_tokens: 16, ignore_eos: true}
  load: {samples: 20, warmup: 1, concurrency: 2}
scenarios:
  - name: nightly
    gate: {metrics: [ttft, tpot]}
"#;

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Std::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A bare `remote.git` and a work checkout `work` with origin = it, the scenario committed.
fn repos() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q", "--bare", "remote.git"]);
    git(d.path(), &["init", "-q", "work"]);
    let w = d.path().join("work");
    git(&w, &["remote", "add", "origin", "../remote.git"]);
    std::fs::create_dir_all(w.join("scenarios")).unwrap();
    std::fs::write(w.join("scenarios/s.yaml"), SIM).unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "scenarios"]);
    d
}

/// Night i's drift: a deterministic +-4 % without ties (the golden ratio's fractional parts).
fn drift(i: u32) -> f64 {
    1.0 + 0.04 * ((f64::from(i) * 0.618_034).fract() * 2.0 - 1.0)
}

/// `perfgate check --history` as the scheduled job runs it, for commit `sha`.
fn night(w: &Path, gh: &FakeGithub, tpot: f64, seed: u32, sha: &str) -> (Option<i32>, String) {
    let o = crate::support::perfgate_in(w, 120)
        .args(["check", "--history", "--output", "r.json"])
        .env("T", format!("{tpot:.3}"))
        .env("SEED", seed.to_string())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "octo/demo")
        .env("GITHUB_EVENT_NAME", "schedule")
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_SHA", sha)
        .env("GITHUB_RUN_ID", format!("{}", 1000 + seed))
        .env("GITHUB_WORKFLOW", "nightly")
        .env("GITHUB_JOB", "latency")
        .env("GITHUB_TOKEN", TOKEN)
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_EVENT_PATH")
        .output()
        .unwrap();
    let text = crate::support::output_text(&o);
    (o.status.code(), text)
}

#[test]
fn forty_nights_alert_on_the_step_and_close_the_issue_when_it_is_restored() {
    let d = repos();
    let w = d.path().join("work");
    let gh = FakeGithub::start();
    // night 0: bless (one run) at 5 ms and commit the baseline
    let o = crate::support::perfgate_in(&w, 120)
        .args(["bless", "--runs", "1"])
        .env("T", "15")
        .env("SEED", "0")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "baseline"]);
    let mut shas = vec![String::new()];
    let mut opened_on = None;
    let mut step_named_on = None;
    let mut closed_on = None;
    let mut red = Vec::new();
    for i in 1..=40u32 {
        // a commit a night (what the nightly job tests)
        std::fs::write(w.join("change.txt"), format!("night {i}")).unwrap();
        git(&w, &["add", "change.txt"]);
        git(&w, &["commit", "-qm", &format!("change {i}")]);
        let sha = git(&w, &["rev-parse", "HEAD"]);
        shas.push(sha.clone());
        let step = if (30..36).contains(&i) { 1.2 } else { 1.0 };
        let (code, text) = night(&w, &gh, 15.0 * drift(i) * step, i, &sha);
        let s = gh.state();
        let open: Vec<_> = s.issues.iter().filter(|x| x.state == "open").collect();
        if i < 30 {
            assert_eq!(code, Some(0), "night {i} must pass:\n{text}");
            assert!(s.issues.is_empty(), "no issue before night 30 (night {i})");
            continue;
        }
        if !open.is_empty() && opened_on.is_none() {
            opened_on = Some(i);
        }
        if code == Some(1) {
            red.push(i);
        }
        let body = open.first().map(|x| x.body.clone()).unwrap_or_default();
        if step_named_on.is_none() && body.contains("stepped up") {
            // the night the new level began (30 +- 1) and the commits around it
            let named = (29..=31).find(|n| body.contains(&format!("from night {n} of")));
            assert!(
                named.is_some(),
                "night {i}: the step names no night 29-31:\n{body}"
            );
            let n = named.unwrap() as usize;
            let range = format!("commits {}..{}", &shas[n - 1][..10], &shas[n][..10]);
            assert!(body.contains(&range), "night {i}: no {range} in\n{body}");
            assert!(body.contains("nightly step"), "{body}");
            step_named_on = Some(i);
        }
        if opened_on.is_some()
            && closed_on.is_none()
            && s.issues.iter().all(|x| x.state == "closed")
        {
            closed_on = Some(i);
            assert_eq!(code, Some(0), "night {i}: restored, exit 0:\n{text}");
        }
        let unalerted = opened_on.is_none() && i >= 32;
        let dropped = opened_on.is_some() && open.is_empty() && i < 36;
        if (31..36).contains(&i) && (unalerted || dropped || !matches!(code, Some(0 | 1))) {
            // what the nights were, to tell noise from a rule that missed a clean step
            let shown = crate::support::perfgate_in(&w, 60)
                .args(["history", "show", "--last", "40"])
                .env("T", "15")
                .env("SEED", "0")
                .output()
                .unwrap();
            panic!(
                "night {i}: the step persists, the issue open by night 32 and open while it does, got exit {code:?}, opened on {opened_on:?}:\n{text}\nhistory show:\n{}{}",
                String::from_utf8_lossy(&shown.stdout),
                String::from_utf8_lossy(&shown.stderr)
            );
        }
    }
    eprintln!(
        "nightly e2e: tracking issue opened on night {opened_on:?}, the step named on night {step_named_on:?}, closed on night {closed_on:?}"
    );
    let s = gh.state();
    assert_eq!(s.issues.len(), 1, "one tracking issue: {:?}", s.issues);
    // opened by the confirmed step (its second night, 31; issue 43: the rank rule needed its
    // third, 32, or later), not by night 30 alone: the step's first night is a WARN (exit 0), as
    // one bad night is, and never alerts; red on that night only, the nights in force after it
    // a WARN while the issue stays open
    assert!(
        opened_on.is_some_and(|n| (31..=32).contains(&n)),
        "opened on {opened_on:?}"
    );
    assert_eq!(red, vec![opened_on.unwrap()], "red nights");
    assert!(
        step_named_on.is_some_and(|n| n <= 32),
        "step named on {step_named_on:?}"
    );
    // closed when restored: the second night back (37; the rank rule's restore needed 3, 38)
    assert!(
        closed_on.is_some_and(|n| (37..=39).contains(&n)),
        "closed on {closed_on:?}"
    );
    assert_eq!(s.bad_auth, 0);
    // the branch holds the 40 nights, one line each, and the work tree was not touched
    let remote = d.path().join("remote.git");
    let text = git(&remote, &["show", "perfgate-history:nightly.jsonl"]);
    assert_eq!(text.lines().count(), 40);
    assert!(text.lines().nth(29).unwrap().contains(&shas[30]));
    assert_eq!(
        git(&w, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    assert_eq!(git(&w, &["log", "-1", "--format=%s"]), "change 40");
}

#[test]
fn two_appends_at_once_both_land() {
    let d = repos();
    let w = d.path().join("work");
    // one measured night, saved
    measure_once(&w);
    // four jobs' nights (the results file as four nights a minute apart)
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.join("r.json")).unwrap()).unwrap();
    for k in 0..4 {
        let mut night = r.clone();
        night["created_at"] = format!("2026-12-0{}T03:00:00Z", k + 1).into();
        std::fs::write(w.join(format!("r{k}.json")), night.to_string()).unwrap();
    }
    let bin = assert_cmd::cargo::cargo_bin("perfgate");
    // four appends started together against the same remote
    let children: Vec<_> = (0..4)
        .map(|k| {
            Std::new(&bin)
                .current_dir(&w)
                .args(["history", "append", "--results", &format!("r{k}.json")])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let remote = d.path().join("remote.git");
    let text = git(&remote, &["show", "perfgate-history:nightly.jsonl"]);
    assert_eq!(text.lines().count(), 4, "{text}");
    let log = git(&remote, &["rev-list", "--count", "perfgate-history"]);
    assert_eq!(log, "4");
    for k in 0..4 {
        assert!(
            text.contains(&format!("\"time\":\"2026-12-0{}T03:00:00Z\"", k + 1)),
            "{text}"
        );
    }
    // the same night again adds nothing
    let o = crate::support::perfgate_in(&w, 60)
        .args(["history", "append", "--results", "r0.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is already on branch perfgate-history: nothing appended"),
        "{err}"
    );
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "4"
    );
}

/// The fresh-reader walkthrough of 2026-12-04: `history append --results` of the very file a
/// `check --history` already appended added the night again (the check stamped its start, the
/// append the file's end, and the append had no commit without `GITHUB_SHA`); and a push the
/// remote refused for good (a hook, a protected branch, no `contents: write`) was retried 8
/// times and reported as "the branch moved under every attempt", git's own words hidden.
#[test]
fn a_night_is_appended_once_and_a_refused_push_says_why() {
    let d = repos();
    let w = d.path().join("work");
    let remote = d.path().join("remote.git");
    let check = |out: &str| {
        crate::support::perfgate_in(&w, 120)
            .args([
                "check",
                "--history",
                "--allow-missing-baseline",
                "--output",
                out,
            ])
            .env("T", "5")
            .env("SEED", "1")
            .env_remove("GITHUB_SHA")
            .output()
            .unwrap()
    };
    let o = check("r.json");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "1"
    );
    let o = crate::support::perfgate_in(&w, 60)
        .args(["history", "append", "--results", "r.json"])
        .env_remove("GITHUB_SHA")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("nothing appended"), "{err}");
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "1"
    );
    let line = git(&remote, &["show", "perfgate-history:nightly.jsonl"]);
    let head = git(&w, &["rev-parse", "HEAD"]);
    assert!(line.contains(&format!("\"commit\":\"{head}\"")), "{line}");

    // the remote refuses every push from now on
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'denied by policy' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = check("r2.json");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("pre-receive hook declined"), "{err}");
    assert!(err.contains("denied by policy"), "{err}");
    assert!(err.contains("permissions: contents: write"), "{err}");
    assert!(!err.contains("moved under every"), "{err}");
    assert!(
        w.join("r2.json").exists(),
        "the night stays in the results file"
    );
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "1"
    );
}

/// Issue 41 finding 5: `history append --results` appended what is not a night, as a full
/// night: an interrupted run's file (`incomplete`) and a load-shard worker's (half the load,
/// under the scenario's own fingerprint). Both are refused (exit 2, nothing pushed), as
/// `bless --from` refuses them; the file as measured still appends.
#[test]
fn history_append_refuses_an_interrupted_run_and_a_load_shard_worker() {
    let d = repos();
    let w = d.path().join("work");
    let remote = d.path().join("remote.git");
    measure_once(&w);
    let r = crate::support::read_json(&w.join("r.json"));
    let mut interrupted = r.clone();
    interrupted["incomplete"] = true.into();
    std::fs::write(w.join("interrupted.json"), interrupted.to_string()).unwrap();
    let mut worker = r.clone();
    worker["scenarios"][0]["load_shard"] = serde_json::json!({
        "index": 1, "count": 2, "concurrency": 1, "samples": 10, "started_unix_ms": 1.0e12,
        "retried": 0, "warmup_failures": 0
    });
    std::fs::write(w.join("worker.json"), worker.to_string()).unwrap();
    let append = |file: &str| {
        let o = crate::support::perfgate_in(&w, 60)
            .args(["history", "append", "--results", file])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (code, err) = append("interrupted.json");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("interrupted.json: nothing appended: that run was interrupted (the results are marked `incomplete`)"),
        "{err}"
    );
    let (code, err) = append("worker.json");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("worker.json: nothing appended: scenario nightly: worker.json holds load-shard worker 1/2 (1/2 of the load), not the scenario"),
        "{err}"
    );
    assert_eq!(git(&remote, &["branch", "--list"]), "", "nothing pushed");
    let (code, err) = append("r.json");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "1"
    );
}

/// Issue 46: a bare remote whose HEAD names a branch that does not exist (a fresh
/// `git init --bare`, HEAD `master`, while `main` was pushed) lists no HEAD to
/// `git ls-remote --symref`, so `--history trunk` was written to `trunk`, which then became the
/// branch every clone checks out. Such a local remote's own HEAD is read: refused (exit 2,
/// nothing pushed); perfgate's own branch appends there as before.
#[test]
fn a_history_named_like_a_bare_remotes_unborn_head_is_refused() {
    let d = repos();
    let w = d.path().join("work");
    let remote = d.path().join("remote.git");
    measure_once(&w);
    git(&w, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
    git(&remote, &["symbolic-ref", "HEAD", "refs/heads/trunk"]);
    assert_eq!(git(&w, &["ls-remote", "--symref", "origin", "HEAD"]), "");
    let (code, err) = append_in(&w, &["--history", "trunk"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("branch `trunk` is not a perfgate history: it is the default branch of origin; perfgate writes its history only to a branch of its own"),
        "{err}"
    );
    assert_eq!(
        git(&remote, &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
    let (code, err) = append_in(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        git(&remote, &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main\nrefs/heads/perfgate-history"
    );
}

/// `perfgate history append --results r.json` plus `extra`, in `w`: exit code and stderr.
fn append_in(w: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let o = crate::support::perfgate_in(w, 60)
        .args(["history", "append", "--results", "r.json"])
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

/// A commit of one file `name` holding `text`, by `t`, with message `msg`, on no branch.
fn commit_of(w: &Path, name: &str, text: &str, msg: &str) -> String {
    std::fs::write(w.join("blob.tmp"), text).unwrap();
    let blob = git(w, &["hash-object", "-w", "blob.tmp"]);
    std::fs::remove_file(w.join("blob.tmp")).unwrap();
    let o = Std::new("git")
        .current_dir(w)
        .args(["mktree"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    o.stdin
        .as_ref()
        .unwrap()
        .write_all(format!("100644 blob {blob}\t{name}\n").as_bytes())
        .unwrap();
    let tree = String::from_utf8(o.wait_with_output().unwrap().stdout).unwrap();
    git(w, &["commit-tree", tree.trim(), "-m", msg])
}

/// Issue 41 finding 1: the history could be written onto the user's own branch: `--history
/// main --history-local` moved the branch HEAD points to (the history file then staged as a
/// deletion), and `--history main` fast-forwarded a perfgate commit onto the remote's default
/// branch. A branch checked out, the remote's default branch, a branch holding anything but
/// history files and one whose first commit is not perfgate's are refused (exit 2, nothing
/// written); perfgate's own branch still appends, night after night.
#[test]
fn the_history_is_never_written_to_a_branch_that_is_not_perfgates() {
    let d = repos();
    let w = d.path().join("work");
    let remote = d.path().join("remote.git");
    measure_once(&w);
    let main = git(&w, &["symbolic-ref", "--short", "HEAD"]);
    let head = git(&w, &["rev-parse", "HEAD"]);
    let refused = |extra: &[&str], why: &str| {
        let (code, err) = append_in(&w, extra);
        assert_eq!(code, Some(2), "{extra:?}: {err}");
        assert!(err.contains(why), "{extra:?}: {err}");
        assert!(
            err.contains("perfgate writes its history only to a branch of its own"),
            "{err}"
        );
    };
    // the branch HEAD points to, kept locally: HEAD, the index and the work tree untouched
    refused(
        &["--history", &main, "--history-local"],
        &format!(
            "branch `{main}` is not a perfgate history: it is checked out in {}",
            w.canonicalize().unwrap().display()
        ),
    );
    assert_eq!(git(&w, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        git(&w, &["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
    // the remote's default branch (checked out here under another name)
    git(
        &w,
        &["push", "-q", "origin", &format!("HEAD:refs/heads/{main}")],
    );
    git(
        &remote,
        &["symbolic-ref", "HEAD", &format!("refs/heads/{main}")],
    );
    git(&w, &["checkout", "-q", "-b", "feature"]);
    refused(
        &["--history", &main],
        &format!("branch `{main}` is not a perfgate history: it is the default branch of origin"),
    );
    assert_eq!(git(&remote, &["rev-parse", &main]), head);
    // a branch of the remote holding other files
    let notes = commit_of(&w, "README.md", "notes\n", "notes");
    git(
        &w,
        &["push", "-q", "origin", &format!("{notes}:refs/heads/notes")],
    );
    refused(
        &["--history", "notes"],
        "branch `notes` is not a perfgate history: it holds `README.md`, which is not a history file",
    );
    assert_eq!(git(&remote, &["rev-parse", "notes"]), notes);
    // history files only, but not begun by perfgate
    let data = commit_of(&w, "nightly.jsonl", "", "start the data");
    git(
        &w,
        &["push", "-q", "origin", &format!("{data}:refs/heads/data")],
    );
    refused(
        &["--history", "data"],
        &format!(
            "branch `data` is not a perfgate history: its first commit {} (`start the data`) was not written by perfgate",
            &data[..12]
        ),
    );
    assert_eq!(git(&remote, &["rev-parse", "data"]), data);
    // perfgate's own branch: created, then appended to
    let (code, err) = append_in(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    let mut r = crate::support::read_json(&w.join("r.json"));
    r["created_at"] = "2026-12-01T03:00:00Z".into();
    std::fs::write(w.join("r.json"), r.to_string()).unwrap();
    let (code, err) = append_in(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "2"
    );
    // and so is one begun by an older perfgate under another author
    let old = commit_of(
        &w,
        "nightly.jsonl",
        "",
        "perfgate history: 2026-11-30T03:00:00Z at 1a2b3c4d5e6f\n\n1 scenario(s): nightly",
    );
    git(
        &w,
        &["push", "-q", "origin", &format!("{old}:refs/heads/older")],
    );
    let (code, err) = append_in(&w, &["--history", "older"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(git(&remote, &["rev-list", "--count", "older"]), "2");
}

/// Whether process `pid` still runs (a zombie, killed and waiting to be reaped, does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.get(s.rfind(')')? + 2..)?.starts_with(|c| c != 'Z')))
        .unwrap_or(false)
}

/// The pid written to `file`, once it is (within 90 s, while `child` runs; else `child` is
/// killed and the test fails).
fn pid_in(file: &Path, child: &mut std::process::Child) -> u32 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while std::time::Instant::now() < until && child.try_wait().unwrap().is_none() {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    panic!("{} was never written: {err}", file.display());
}

/// SIGTERM to `child`, then its exit code and how long it took to exit after the signal (killed
/// after 30 s: `None`). `pid`, a process git started, is killed too if it is still running
/// after that, and whether it was is returned.
fn terminate(
    mut child: std::process::Child,
    pid: u32,
) -> (Option<i32>, std::time::Duration, bool, String) {
    let _ = Std::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let t = std::time::Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = t.elapsed();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while running(pid) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = running(pid);
    if left {
        let _ = Std::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    let mut err = String::new();
    use std::io::Read;
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (code, took, left, err)
}

/// Issue 41 findings 7 and 8: SIGTERM while git pushed the night was ignored until the 15 s
/// hard stop, which then wrote the results file without its per-request records (so the night
/// could not be appended later), and the push (git, the remote's receive-pack and its hook) ran
/// on: an orphaned push published the night after perfgate had exited 130. Now git's whole
/// process group is killed at the signal: perfgate exits 130 at once, nothing is published, the
/// results file is whole, and the night appends later. The remote's pre-receive hook here
/// stands for a slow push.
#[test]
fn sigterm_while_the_night_is_pushed_stops_the_push_and_keeps_the_night() {
    let d = repos();
    let w = d.path().join("work");
    let remote = d.path().join("remote.git");
    let pid_file = d.path().join("hook.pid");
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 20\n",
            pid_file.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = crate::support::perfgate_signalled(&w)
        .args([
            "check",
            "--history",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ])
        .env("T", "5")
        .env("SEED", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = pid_in(&pid_file, &mut child);
    let (code, took, left, err) = terminate(child, pid);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        took.as_secs() < 5,
        "exited {took:?} after the signal: {err}"
    );
    assert!(!left, "the push's hook (pid {pid}) outlived perfgate");
    assert!(
        err.contains("interrupted: git was stopped, so the history branch `perfgate-history`"),
        "{err}"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(git(&remote, &["branch", "--list"]), "", "nothing published");
    let r = crate::support::read_json(&w.join("r.json"));
    assert_eq!(
        r["incomplete"],
        serde_json::Value::Null,
        "the run was whole"
    );
    assert_eq!(r["scenarios"][0]["records"].as_array().unwrap().len(), 20);
    std::fs::remove_file(&hook).unwrap();
    let (code, err) = append_in(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        git(&remote, &["rev-list", "--count", "perfgate-history"]),
        "1"
    );
}

/// Issue 41 findings 7 and 8: SIGTERM while git fetched the history was ignored until the 15 s
/// hard stop, and the remote helper git had started (here `git-remote-ext`'s command; in CI
/// `git-remote-http`, the remote's URL and credentials in its arguments) ran on after perfgate.
#[test]
fn sigterm_while_the_history_is_fetched_stops_git_and_its_helper() {
    let d = repos();
    let w = d.path().join("work");
    git(&w, &["config", "protocol.ext.allow", "always"]);
    let pid_file = d.path().join("helper.pid");
    // a remote whose transport starts a process that answers nothing
    let remote = format!(
        "ext::sh -c echo% $$% >% {}% ;% exec% sleep% 20",
        pid_file.display()
    );
    let mut child = crate::support::perfgate_signalled(&w)
        .args(["history", "show", "--history-remote", &remote])
        .env("T", "5")
        .env("SEED", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = pid_in(&pid_file, &mut child);
    let (code, took, left, err) = terminate(child, pid);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        took.as_secs() < 5,
        "exited {took:?} after the signal: {err}"
    );
    assert!(!left, "git's remote helper (pid {pid}) outlived perfgate");
    assert!(err.contains("interrupted: git was stopped"), "{err}");
}

/// A quicker scenario than [`SIM`] for the tests below that measure once: 8 tokens, 4 streams.
const SIM_QUICK: &str = r#"
defaults:
  endpoint:
    base_url: "sim://?ttft_ms=20&tpot_ms=${T}&seed=${SEED}&tpot_sigma=0.03&ttft_sigma=0.03"
  request: {prompt: "Say something.", max_tokens: 8, ignore_eos: true}
  load: {samples: 20, warmup: 1, concurrency: 4}
scenarios:
  - name: nightly
    gate: {metrics: [ttft, tpot]}
"#;

/// [`repos`] with [`SIM_QUICK`] as the scenario.
fn quick_repos() -> tempfile::TempDir {
    let d = repos();
    let w = d.path().join("work");
    std::fs::write(w.join("scenarios/s.yaml"), SIM_QUICK).unwrap();
    git(&w, &["commit", "-qam", "quick scenario"]);
    d
}

/// Commits `files` (path, text) as the whole tree of the local branch `perfgate-history` of
/// the checkout `w` (its work tree must be clean), then checks the work branch out again.
fn put_history(w: &Path, files: &[(&str, String)]) {
    let back = git(w, &["rev-parse", "--abbrev-ref", "HEAD"]);
    git(w, &["update-ref", "-d", "refs/heads/perfgate-history"]);
    git(w, &["checkout", "-q", "--orphan", "perfgate-history"]);
    git(w, &["rm", "-rqf", "."]);
    for (path, text) in files {
        let p = w.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(w, &["add", "-A"]);
    git(
        w,
        &["commit", "-qm", "perfgate history: a night written by hand"],
    );
    git(w, &["checkout", "-q", &back]);
}

/// One night of scenario `nightly` as perfgate writes it: TTFT and TPOT medians, ms.
fn entry_line(time: &str, fingerprint: &str, ttft: f64, tpot: f64, commit: &str) -> String {
    let point = |v: f64| {
        serde_json::json!({"n": 20, "p50": v, "p90": v * 1.1, "p99": v * 1.2,
                           "log_sd": 0.05, "q": [v, v, v, v, v, v, v, v, v, v]})
    };
    serde_json::json!({
        "history_version": 1, "perfgate_version": "0.1.0", "metrics_version": 1,
        "time": time, "scenario": "nightly", "fingerprint": fingerprint, "commit": commit,
        "runner": {"os": "linux", "arch": "x86_64", "cpus": 2},
        "requests": 20, "failed": 0,
        "metrics": {"ttft_ms": point(ttft), "tpot_ms": point(tpot)}
    })
    .to_string()
}

/// `nights` nights on 2020-01-01, -02, ... from the `(ttft, tpot)` pairs, one per line.
fn history_of(fingerprint: &str, nights: &[(f64, f64)]) -> String {
    nights
        .iter()
        .enumerate()
        .map(|(i, &(ttft, tpot))| {
            let t = format!("2020-{:02}-{:02}T03:00:00Z", 1 + i / 28, 1 + i % 28);
            entry_line(&t, fingerprint, ttft, tpot, &format!("{i:040x}")) + "\n"
        })
        .collect()
}

/// One measured night without a baseline in `w`, saved as `r.json` (exit 0).
fn measure_once(w: &Path) {
    let o = crate::support::perfgate_in(w, 120)
        .args(["check", "--allow-missing-baseline", "--output", "r.json"])
        .env("T", "5")
        .env("SEED", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", run_out(&o));
}

/// `perfgate bless --runs 2` of [`SIM_QUICK`] at TPOT `t` ms (seed 0), its `created_at` set to
/// `created_at` if given, committed; returns its fingerprint and TTFT and TPOT P50s.
fn bless_quick(w: &Path, t: &str, created_at: Option<&str>) -> (String, f64, f64) {
    let o = crate::support::perfgate_in(w, 120)
        .args(["bless", "--runs", "2"])
        .env("T", t)
        .env("SEED", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", run_out(&o));
    let path = w.join("baselines/nightly.json");
    let mut base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    if let Some(t) = created_at {
        base["created_at"] = t.into();
        std::fs::write(&path, serde_json::to_string_pretty(&base).unwrap()).unwrap();
    }
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "baseline"]);
    let p50 = |m: &str| base["summary"][m]["p50"].as_f64().unwrap();
    let fp = base["scenario"]["fingerprint"].as_str().unwrap();
    (fp.to_string(), p50("ttft_ms"), p50("tpot_ms"))
}

/// `perfgate check --history --history-local --output r.json` in `w` at TPOT `t` ms (seed 7).
fn check_history(w: &Path, t: &str) -> std::process::Output {
    crate::support::perfgate_in(w, 180)
        .args([
            "check",
            "--history",
            "--history-local",
            "--output",
            "r.json",
        ])
        .env("T", t)
        .env("SEED", "7")
        .output()
        .unwrap()
}

fn run_out(o: &std::process::Output) -> String {
    crate::support::output_text(o)
}

/// Issue 41: history files perfgate cannot read say what is wrong with them (exit 2, before
/// anything is measured): a night of 1e300 ms (it was read, and learned an `inf%` fail
/// tolerance), a byte-order mark (it read as "line 1: not a perfgate history entry"), a
/// directory of the file's name (it read as "cannot write the history commit").
#[test]
fn unreadable_history_files_say_what_they_are() {
    let d = quick_repos();
    let w = d.path().join("work");
    let mut text = history_of("f", &[(20.0, 15.0); 3]);
    text.push_str(&entry_line("2020-02-01T03:00:00Z", "f", 20.0, 1e300, "c"));
    text.push('\n');
    let cases = [
        (
            vec![("nightly.jsonl", text)],
            "history: history branch `perfgate-history`: nightly.jsonl line 4: tpot_ms.p50 = 1e300 ms is not a believable time (0.001 ms to 1 day); no perfgate writes that: fix or delete the line on the history branch",
        ),
        (
            vec![("nightly.jsonl", format!("\u{feff}{}", history_of("f", &[(20.0, 15.0)])))],
            "history: history branch `perfgate-history`: nightly.jsonl starts with a UTF-8 byte-order mark: remove it on the history branch (the file is JSON lines, which have none)",
        ),
        (
            vec![("nightly.jsonl/x", "x".to_string())],
            "history: history branch `perfgate-history` is not a perfgate history: it holds `nightly.jsonl`, a directory, not a history file (perfgate's branch holds only `<scenario>.jsonl` files); perfgate writes its history only to a branch of its own, which it creates on the first night (your branches and the checkout are never touched): name another with --history (the default is `perfgate-history`)",
        ),
    ];
    for (files, want) in cases {
        put_history(&w, &files);
        for args in [
            &["history", "show", "--history-local"][..],
            &[
                "check",
                "--history",
                "--history-local",
                "--allow-missing-baseline",
            ][..],
        ] {
            let o = crate::support::perfgate_in(&w, 60)
                .args(args)
                .env("T", "15")
                .env("SEED", "1")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", run_out(&o));
            assert_eq!(err.trim(), format!("perfgate: {want}"), "{args:?}");
        }
    }
}

/// Issue 41: `history show` printed the file's strings raw: a commit or a model holding
/// terminal escapes rewrote the terminal.
#[test]
fn history_show_prints_no_escape_sequences_from_the_file() {
    let d = quick_repos();
    let w = d.path().join("work");
    // 10 nights at 15 ms, then 6 at 30 ms on a server of another model: a step in force (red on
    // the night that confirmed it, a WARN since), its commits and the server change are printed
    let mut nights: Vec<(f64, f64)> = vec![(20.0, 15.0); 10];
    nights.extend([(20.0, 30.0); 6]);
    let mut text = String::new();
    for (i, line) in history_of("f", &nights).lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["commit"] = format!("\u{1b}]0;pwned{i}\u{7}\u{1b}[2J").into();
        v["server"] = serde_json::json!({"model": if i < 10 { "m1" } else { "m2\u{1b}[31mred" }});
        text.push_str(&format!("{v}\n"));
    }
    put_history(&w, &[("nightly.jsonl", text)]);
    let o = crate::support::perfgate_in(&w, 60)
        .args(["history", "show", "--history-local"])
        .env("T", "15")
        .env("SEED", "1")
        .output()
        .unwrap();
    let out = run_out(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("TPOT nightly step: WARN stepped up"), "{out}");
    assert!(out.contains("model m1 -> m2[31mred"), "{out}");
    assert!(out.contains("]0;pwned1"), "{out}");
    assert!(
        !out.chars().any(|c| c == '\u{1b}' || c == '\u{7}'),
        "escapes printed: {out:?}"
    );
}

/// Issue 41: nights alternating 1.0x and 1.5x the baseline learned a fail tolerance of 477 %
/// (successive differences double for anti-correlated nights), and a 4x TPOT regression exited
/// 0. Nights that move beyond 3x the configured tolerance (their band's width, issue 43) cannot
/// gate: exit 3, saying why. Since issue 43's trimmed width, nights alternating 1.0x and 1.5x
/// learn a band that can confirm a 17.8 % step and are gated; 1.0x and 2.0x (31.8 %) are not.
#[test]
fn nights_that_move_too_much_cannot_pass_a_4x_regression() {
    let d = quick_repos();
    let w = d.path().join("work");
    let (fp, ttft, tpot) = bless_quick(&w, "15", None);
    let nights: Vec<(f64, f64)> = (0..30)
        .map(|i| (ttft, if i % 2 == 0 { tpot } else { tpot * 2.0 }))
        .collect();
    put_history(&w, &[("nightly.jsonl", history_of(&fp, &nights))]);
    let o = check_history(&w, "60");
    let out = run_out(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(
        out.contains("the nights move too much to gate at this tolerance"),
        "{out}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.join("r.json")).unwrap()).unwrap();
    let s = &r["scenarios"][0];
    assert_eq!(s["status"], "unmeasurable", "{s}");
    // the TPOT row is shown at the cap, 3x the configured 10 %: the 4x night is beyond it, a
    // WARN there since the nights decide (issue 43), and the nightly step row suspects a step
    let checks = s["checks"].as_array().unwrap();
    let row = crate::support::p50_row(s, "tpot");
    assert_eq!(row["verdict"], "WARN", "{row}");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .ends_with("so this comparison with the committed baseline is shown, not gated"),
        "{row}"
    );
    assert!((row["fail"].as_f64().unwrap() - 0.30).abs() < 1e-9, "{row}");
    // the nightly step row: the nights' band is narrow here (the MAD of 15 nights at 1.0x and 14
    // at 2.0x, the 15th night at 2.0x held out as a suspected step, is 0: a median deviation
    // at exactly 50 % contamination), so night 30 and tonight's 4x confirm a step from night 30,
    // which this job's bless (today, after the nights of 2020) accepts. What gates is the exit
    // code above: the nights move too much for any band to gate, exit 3
    let step = checks
        .iter()
        .find(|c| c["metric"] == "tpot" && c["kind"] == "change_point")
        .unwrap();
    assert_eq!(step["verdict"], "PASS", "{step}");
    assert!(
        step["reason"].as_str().unwrap().contains(
            "% from night 30 of 31 (2020-02-02) was accepted: the baseline was blessed again"
        ),
        "{step}"
    );
}

/// Issue 41: the reader refuses a night whose time is not RFC 3339, so `history append` must
/// not write one (a hand-edited results file's `created_at`): it would break the history.
#[test]
fn a_night_the_reader_would_refuse_is_not_appended() {
    let d = quick_repos();
    let w = d.path().join("work");
    measure_once(&w);
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.join("r.json")).unwrap()).unwrap();
    r["created_at"] = "last night".into();
    std::fs::write(w.join("r.json"), r.to_string()).unwrap();
    let o = crate::support::perfgate_in(&w, 60)
        .args([
            "history",
            "append",
            "--history-local",
            "--results",
            "r.json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", run_out(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        "perfgate: r.json: the night of scenario `nightly`: time `last night` is not an RFC 3339 time: nothing appended"
    );
    let o = Std::new("git")
        .current_dir(&w)
        .args(["rev-parse", "--verify", "-q", "refs/heads/perfgate-history"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "a history branch was written");
}

/// Issue 42: the nights are a part of the committed baseline's reference, judged before the
/// verdict, so `gate.confirm` sees the night's verdict: a step up confirmed tonight is a FAIL
/// that a re-run, judged as tonight against the same nights, holds; the committed baseline's
/// TPOT row the nights decide is a WARN before confirm looks. 29 nights at the baseline's TPOT,
/// night 30 and tonight at 1.5x (a band of 0 deviation and the 5 % prior: 2 nights beyond 1.8
/// widths by far, ln 1.5 = 0.405).
#[test]
fn gate_confirm_re_runs_a_nightly_step_and_the_step_holds() {
    let d = quick_repos();
    let w = d.path().join("work");
    let confirmed = SIM_QUICK.replace(
        "gate: {metrics: [ttft, tpot]}",
        "gate: {metrics: [ttft, tpot], confirm: 1}",
    );
    std::fs::write(w.join("scenarios/s.yaml"), confirmed).unwrap();
    // blessed before the nights (2020), so the step is not one a later bless accepted
    let (fp, ttft, tpot) = bless_quick(&w, "5", Some("2019-12-01T00:00:00Z"));
    let mut nights = vec![(ttft, tpot); 29];
    nights.push((ttft, tpot * 1.5));
    put_history(&w, &[("nightly.jsonl", history_of(&fp, &nights))]);
    let o = check_history(&w, "7.5");
    let out = run_out(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("confirming nightly (re-run 1 of 1)"), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(w.join("r.json")).unwrap()).unwrap();
    let s = &r["scenarios"][0];
    let step = s["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "tpot" && c["kind"] == "change_point")
        .unwrap();
    assert_eq!(step["verdict"], "FAIL", "{step}");
    assert!(
        step["reason"].as_str().unwrap().starts_with("stepped up +"),
        "{step}"
    );
    let row = crate::support::p50_row(s, "tpot");
    assert_eq!(row["verdict"], "WARN", "{row}");
    let kinds = s["note_kinds"].as_array().unwrap();
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(kinds)
        .filter(|(_, k)| *k == "confirmation")
        .map(|(n, _)| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("confirmation re-run 1: TPOT nightly step ")
            && notes[0].ends_with("(FAIL, holds)"),
        "{notes:?}"
    );
    // tonight appended once: 31 nights, the night's time the results' own
    let nights = git(&w, &["show", "perfgate-history:nightly.jsonl"]);
    assert_eq!(nights.lines().count(), 31, "{nights}");
    let last: serde_json::Value = serde_json::from_str(nights.lines().last().unwrap()).unwrap();
    assert_eq!(last["time"], r["created_at"], "{last}");
}
