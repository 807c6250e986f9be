//! The report commands end to end: `perfgate init` (scaffold, never overwrite), `perfgate report`
//! (re-render saved results without measuring), and the runner's progress hook.

use perfgate::config::Scenario;
use perfgate::record::RequestRecord;
use perfgate::report::{html, json, junit, markdown, terminal, Report};
use perfgate::runner::{Phase, Progress};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::support::perfgate;

#[test]
fn init_scaffolds_a_project_that_validates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("proj");
    let out = perfgate().arg("init").arg(&d).assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(stdout.contains("perfgate bless"), "{stdout}");
    let yaml = std::fs::read_to_string(d.join("scenarios/example.yaml")).unwrap();
    assert!(d.join("baselines/.gitkeep").is_file());
    let wf = std::fs::read_to_string(d.join(".github/workflows/perfgate.yml")).unwrap();
    assert!(wf.contains("pull_request") && wf.contains(perfgate::init::USES_PLACEHOLDER));
    // commented, every key: each key of the scenario format appears in the example
    for key in [
        "base_url:",
        "api:",
        "model:",
        "api_key_env:",
        "headers:",
        "connect_timeout:",
        "first_token_timeout:",
        "idle_timeout:",
        "request_timeout:",
        "include_usage:",
        "prompt:",
        "messages:",
        "prompt_set:",
        "generate:",
        "trace:",
        "system:",
        "max_tokens:",
        "temperature:",
        "seed:",
        "ignore_eos:",
        "min_tokens:",
        "extra_body:",
        "cache:",
        "concurrency:",
        "samples:",
        "warmup:",
        "max_samples:",
        "metrics:",
        "quantiles:",
        "tolerances:",
        "min_delta:",
        "alpha:",
        "max_error_rate:",
        "confirm:",
        "name:",
        "description:",
    ] {
        assert!(yaml.contains(key), "example.yaml lacks {key}");
    }
    assert!(
        yaml.contains("# base_url: http://127.0.0.1:8000/v1"),
        "the real endpoint, commented"
    );
    // it validates as written (sim://, no key), with the three classic shapes
    let out = perfgate().current_dir(&d).arg("validate").assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for s in [
        "short-prompt-short-answer",
        "short-prompt-long-answer",
        "long-prompt-short-answer",
    ] {
        assert!(stdout.contains(s), "{stdout}");
    }
    // the workflow is YAML
    let v: serde_json::Value = serde_saphyr::from_str(&wf).expect("workflow parses");
    assert!(v["jobs"].is_object());
}

#[test]
fn init_writes_a_gitignore_for_run_outputs_but_never_edits_one() {
    // a fresh directory: the server logs of `ab` (log: perfgate-server.log -> .base/.candidate)
    // and the report files are ignored, the scenarios and baselines are not
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("proj");
    let out = perfgate().arg("init").arg(&d).assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("wrote ") && stdout.contains(".gitignore"),
        "{stdout}"
    );
    let gi = std::fs::read_to_string(d.join(".gitignore")).unwrap();
    let lines: Vec<&str> = gi.lines().filter(|l| !l.starts_with('#')).collect();
    for want in [
        "perfgate-server*.log",
        "perfgate-results.json",
        "perfgate-report.md",
        "perfgate-report.html",
        "perfgate-junit.xml",
        "report.md",
        "report.html",
        "results.json",
    ] {
        assert!(lines.contains(&want), "{want} not in {gi}");
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("baselines") || l.contains("scenarios")),
        "{gi}"
    );
    // an existing .gitignore is the user's: left as it was, init still succeeds and says what to add
    let e = tempfile::tempdir().unwrap();
    std::fs::write(e.path().join(".gitignore"), "target/\n").unwrap();
    let out = perfgate().arg("init").arg(e.path()).assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(
        std::fs::read_to_string(e.path().join(".gitignore")).unwrap(),
        "target/\n"
    );
    assert!(
        stdout.contains(".gitignore exists, left as it is; add these lines to it:")
            && stdout.contains("perfgate-server*.log"),
        "{stdout}"
    );
    assert!(e.path().join("scenarios/example.yaml").is_file());
}

#[test]
fn init_refuses_to_overwrite_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join(".github/workflows")).unwrap();
    std::fs::write(d.join(".github/workflows/perfgate.yml"), "mine\n").unwrap();
    let out = perfgate().arg("init").arg(d).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains(".github/workflows/perfgate.yml") && err.contains("already exists"),
        "{err}"
    );
    assert!(!d.join("scenarios").exists() && !d.join("baselines").exists());
    assert_eq!(
        std::fs::read_to_string(d.join(".github/workflows/perfgate.yml")).unwrap(),
        "mine\n"
    );
    // a second init over a complete scaffold names the first file it would overwrite
    let e = tempfile::tempdir().unwrap();
    perfgate().arg("init").arg(e.path()).assert().code(0);
    let before = std::fs::read_to_string(e.path().join("scenarios/example.yaml")).unwrap();
    let out = perfgate().arg("init").arg(e.path()).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("scenarios/example.yaml"), "{err}");
    assert_eq!(
        std::fs::read_to_string(e.path().join("scenarios/example.yaml")).unwrap(),
        before
    );
}

#[test]
fn report_re_renders_saved_results_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    // Inside a workflow too, the comment marker is the id the results were measured with (the
    // fixture's `perfgate`, a check run outside Actions), not this job's WORKFLOW/JOB (issue 46):
    // the comment a re-render posts replaces the one the measuring job's id names.
    let out = perfgate()
        .env("GITHUB_WORKFLOW", "render")
        .env("GITHUB_JOB", "fan-in")
        .args([
            "report",
            "tests/fixtures/results.json",
            "--baseline-dir",
            "tests/fixtures/baselines",
        ])
        .arg("--markdown")
        .arg(p("r.md"))
        .arg("--html")
        .arg(p("r.html"))
        .arg("--junit")
        .arg(p("r.xml"))
        .arg("--output")
        .arg(p("r.json"))
        .assert()
        .code(1); // the results carry a regression
    let r = json::load(Path::new("tests/fixtures/results.json")).unwrap();
    let rep = Report::new(r.clone(), Some(Path::new("tests/fixtures/baselines")));
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(
        stdout,
        terminal::render(&r),
        "plain text when stdout is not a terminal"
    );
    let read = |n: &str| std::fs::read_to_string(p(n)).unwrap();
    assert_eq!(read("r.md"), markdown::render(&r));
    assert!(read("r.md").starts_with("<!-- perfgate:perfgate -->\n"));
    assert_eq!(read("r.xml"), junit::render(&r));
    assert_eq!(read("r.html"), html::render(&rep));
    assert_eq!(
        read("r.json"),
        std::fs::read_to_string("tests/fixtures/results.json").unwrap()
    );
}

#[test]
fn report_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 99}").unwrap();
    let out = perfgate().arg("report").arg(&bad).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("bad.json") && err.contains("schema_version 99"),
        "{err}"
    );
    let out = perfgate()
        .args([
            "report",
            "tests/fixtures/results.json",
            "tests/fixtures/results.json",
        ])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("scenario chat-short is in both"), "{err}");
    perfgate().arg("report").assert().code(2); // a results file is required
}

#[derive(Default)]
struct Counting {
    log: Mutex<Vec<String>>,
}

impl Progress for Counting {
    fn start(&self, sc: &Scenario) {
        self.log.lock().unwrap().push(format!("start {}", sc.name));
    }
    fn request(&self, phase: Phase, record: &RequestRecord) {
        let kind = match phase {
            Phase::Measured => "measured",
            Phase::Warmup => "warmup",
            Phase::Unmeasured => "unmeasured",
        };
        self.log
            .lock()
            .unwrap()
            .push(format!("{kind} ok={}", record.ok()));
    }
    fn finish(&self) {
        self.log.lock().unwrap().push("finish".into());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_reports_progress_only_when_given_one() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.yaml");
    std::fs::write(
        &f,
        r#"
defaults:
  endpoint: {base_url: "sim://?ttft_ms=2&tpot_ms=1", model: perfgate-sim}
  request: {prompt: hi, max_tokens: 3}
  load: {samples: 20, warmup: 2, concurrency: 2}
scenarios:
  - name: p
"#,
    )
    .unwrap();
    let scs = perfgate::config::load(&[f], &|_| None).unwrap();
    let sc = &scs[0];
    let counting = Arc::new(Counting::default());
    let p: Arc<dyn Progress> = counting.clone();
    let run = perfgate::execute::measure(sc, Some(p)).await.unwrap();
    assert_eq!(run.records.len(), 20);
    let log = counting.log.lock().unwrap().clone();
    assert_eq!(log.first().map(String::as_str), Some("start p"));
    assert_eq!(log.last().map(String::as_str), Some("finish"));
    assert_eq!(log.iter().filter(|l| l.starts_with("warmup")).count(), 2);
    assert_eq!(log.iter().filter(|l| *l == "measured ok=true").count(), 20);
    // concurrency 2, steady state: the 2 ramp-up requests and the drain are sent, not measured
    let unmeasured = log.iter().filter(|l| l.starts_with("unmeasured")).count();
    assert!((2..=2 + 2 * 2).contains(&unmeasured), "{log:?}");
    // warmup before measured
    let last_warm = log.iter().rposition(|l| l.starts_with("warmup")).unwrap();
    let first_meas = log.iter().position(|l| l.starts_with("measured")).unwrap();
    assert!(last_warm < first_meas);
    // without a progress display nothing is reported
    let before = counting.log.lock().unwrap().len();
    perfgate::execute::measure(sc, None).await.unwrap();
    assert_eq!(counting.log.lock().unwrap().len(), before);
}

#[test]
fn check_never_draws_progress_or_colour_into_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.yaml");
    std::fs::write(
        &f,
        "defaults:\n  endpoint: {base_url: \"sim://?ttft_ms=2&tpot_ms=1\", model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 3}\nscenarios:\n  - name: q\n",
    )
    .unwrap();
    let out = perfgate()
        .args(["check", "--allow-missing-baseline"])
        .arg("-s")
        .arg(&f)
        .arg("--baselines")
        .arg(dir.path().join("b"))
        .assert()
        .code(0);
    let o = out.get_output();
    for text in [&o.stdout, &o.stderr] {
        let t = String::from_utf8_lossy(text);
        assert!(!t.contains('\x1b') && !t.contains('\r'), "{t:?}");
    }
}

/// Issue 26 finding 21: `perfgate report` printed a results file's text raw, so a hand-edited
/// file put `::error` workflow commands and terminal escapes into the CI log, and a 10 MB
/// `ab.order` became one 10 MB line. Every field is printed without control characters, with
/// no line that starts a workflow command, and cut at 2,000 characters with its length.
#[test]
fn report_prints_a_hostile_results_file_safely() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("s.yaml"),
        "defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 8}\n  load: {samples: 20, warmup: 1}\nscenarios:\n  - name: tpot\n",
    )
    .unwrap();
    let o = crate::support::perfgate_in(d, 120)
        .args([
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            "sim://?seed=1",
            "--candidate-url",
            "sim://?seed=2",
            "--design",
            "blocked",
            "--output",
            "r.json",
        ])
        .output()
        .unwrap();
    assert!(d.join("r.json").exists(), "{o:?}");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let s = &mut r["scenarios"][0];
    s["ab"]["order"] = "AB".repeat(5_000_000).into();
    s["ab"]["base_model"] = "m\n::error title=pwned::from a results file".into();
    s["model"] = "\u{1b}]0;title\u{7}\u{1b}[2Jmodel\r::warning::x".into();
    s["notes"] = serde_json::json!([
        "fine\n::add-mask::hidden\n   ::stop-commands::token",
        "\u{1b}[31mred\u{1b}[0m \u{202e}reversed"
    ]);
    std::fs::write(d.join("evil.json"), serde_json::to_string(&r).unwrap()).unwrap();

    let o = crate::support::perfgate_in(d, 120)
        .args(["report", "evil.json"])
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(!out.contains('\u{1b}'), "an escape reached the log");
    assert!(!out.contains('\u{7}') && !out.contains('\r') && !out.contains('\u{202e}'));
    for line in out.lines() {
        assert!(
            !line.trim_start().starts_with("::"),
            "a workflow command line: {line}"
        );
        assert!(line.len() < 10_000, "a line of {} bytes", line.len());
    }
    assert!(
        out.contains("A/B blocked ABABAB") && out.contains("… (10000000 characters)"),
        "{:.3000}",
        out
    );
    assert!(
        out.contains(": :error title=pwned::from a results file"),
        "{out}"
    );
    // mid-line `::` starts no command: only control characters are dropped there
    assert!(out.contains("model ]0;title[2Jmodel::warning::x,"), "{out}");
    assert!(out.contains(": :add-mask::hidden") && out.contains("   : :stop-commands::token"));
    assert!(out.contains("note: [31mred[0m reversed"), "{out}");
}

/// `perfgate init --server NAME` in a new directory: it writes scenarios/NAME.yaml (not the
/// simulator example) and the .gitignore, validates as written with no variable set, and its
/// `server:` block carries what docs/servers.md teaches: returns the scenario as loaded.
fn init_server(name: &str) -> Scenario {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("proj");
    let out = perfgate()
        .arg("init")
        .arg(&d)
        .args(["--server", name])
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let file = d.join(format!("scenarios/{name}.yaml"));
    assert!(
        stdout.contains(&format!("wrote {}", file.display())),
        "{stdout}"
    );
    assert!(!d.join("scenarios/example.yaml").exists());
    assert!(std::fs::read_to_string(d.join(".gitignore"))
        .unwrap()
        .contains("perfgate-server*.log"));
    let v = perfgate()
        .current_dir(&d)
        .env_remove("LLAMA_MODEL")
        .env_remove("LLAMA_THREADS")
        .arg("validate")
        .assert()
        .code(0);
    let shown = String::from_utf8_lossy(&v.get_output().stdout).to_string();
    if name == "llama-server" {
        // Issue 46: with LLAMA_MODEL unset the template's `model.gguf` runs, and validate says so.
        assert!(
            shown.contains("    server: llama-server -m model.gguf --alias local-model --host 127.0.0.1 --port 8080 --threads 2 --metrics"),
            "{shown}"
        );
        assert!(
            shown.contains("    server.command: LLAMA_MODEL is not set, so its default `model.gguf` runs (set LLAMA_MODEL to change it)\n    server.command: LLAMA_THREADS is not set, so its default `2` runs (set LLAMA_THREADS to change it)\n"),
            "{shown}"
        );
    }
    let mut scs = perfgate::config::load(&[file], &|_| None).unwrap();
    assert_eq!(scs.len(), 1);
    let sc = scs.remove(0);
    let server = sc.server.clone().expect("a server: block");
    assert_eq!(
        server.log.as_deref(),
        Some(Path::new("perfgate-server.log"))
    );
    sc
}

fn words(sc: &Scenario) -> Vec<String> {
    sc.server.as_ref().unwrap().command.clone()
}

fn ready_url(sc: &Scenario) -> String {
    match &sc.server.as_ref().unwrap().ready {
        perfgate::config::server::Ready::Http { url, .. } => url.clone(),
        other => panic!("{other:?}"),
    }
}

/// The pair `flag value` is in `argv`.
fn has(argv: &[String], flag: &str, value: &str) -> bool {
    argv.windows(2).any(|w| w[0] == flag && w[1] == value)
}

#[test]
fn init_server_llama_server_names_the_model_fixes_threads_and_turns_metrics_on() {
    let sc = init_server("llama-server");
    let argv = words(&sc);
    assert_eq!(argv[0], "llama-server");
    assert!(has(&argv, "-m", "model.gguf"), "{argv:?}");
    // the alias is the model the scenario asks for
    assert!(has(&argv, "--alias", &sc.endpoint.model), "{argv:?}");
    assert!(has(&argv, "--threads", "2"), "{argv:?}");
    assert!(has(&argv, "--port", "8080") && argv.contains(&"--metrics".to_string()));
    assert_eq!(ready_url(&sc), "http://127.0.0.1:8080/health");
    assert_eq!(
        sc.server.unwrap().metrics_url.as_deref(),
        Some("http://127.0.0.1:8080/metrics")
    );
}

#[test]
fn init_server_vllm_serves_the_scenarios_model_name() {
    let sc = init_server("vllm");
    let argv = words(&sc);
    assert_eq!(argv[..2], ["vllm", "serve"]);
    assert!(
        has(&argv, "--served-model-name", &sc.endpoint.model),
        "{argv:?}"
    );
    assert!(argv.contains(&"--enable-prompt-tokens-details".to_string()));
    assert!(has(&argv, "--port", "8000"));
    assert_eq!(ready_url(&sc), "http://127.0.0.1:8000/health");
    let s = sc.server.unwrap();
    assert_eq!(
        s.metrics_url.as_deref(),
        Some("http://127.0.0.1:8000/metrics")
    );
    assert_eq!(s.env[0].0, "CUDA_VISIBLE_DEVICES");
}

#[test]
fn init_server_sglang_serves_the_scenarios_model_name_with_metrics() {
    let sc = init_server("sglang");
    let argv = words(&sc);
    assert_eq!(argv[..3], ["python3", "-m", "sglang.launch_server"]);
    assert!(
        has(&argv, "--served-model-name", &sc.endpoint.model),
        "{argv:?}"
    );
    for flag in ["--enable-metrics", "--enable-cache-report"] {
        assert!(argv.contains(&flag.to_string()), "{argv:?}");
    }
    assert!(has(&argv, "--port", "30000"));
    assert_eq!(ready_url(&sc), "http://127.0.0.1:30000/health");
    assert_eq!(
        sc.server.unwrap().metrics_url.as_deref(),
        Some("http://127.0.0.1:30000/metrics")
    );
}

#[test]
fn init_server_ollama_serves_on_a_port_of_its_own_without_metrics() {
    let sc = init_server("ollama");
    assert_eq!(words(&sc), ["ollama", "serve"]);
    let s = sc.server.clone().unwrap();
    let mut env: Vec<&str> = s.env.iter().map(|(k, _)| k.as_str()).collect();
    env.sort_unstable();
    assert_eq!(
        env,
        ["OLLAMA_HOST", "OLLAMA_KEEP_ALIVE", "OLLAMA_NUM_PARALLEL"]
    );
    // the endpoint is the port OLLAMA_HOST gives, not a system ollama's 11434
    assert_eq!(sc.endpoint.shown_url(), "http://127.0.0.1:11435/v1");
    assert_eq!(ready_url(&sc), "http://127.0.0.1:11435/api/version");
    assert_eq!(s.metrics_url, None);
}

#[test]
fn init_server_refuses_an_unknown_server_naming_the_four() {
    let dir = tempfile::tempdir().unwrap();
    let out = perfgate()
        .arg("init")
        .arg(dir.path())
        .args(["--server", "tgi"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("invalid value 'tgi' for '--server <NAME>'")
            && err.contains("[possible values: llama-server, vllm, sglang, ollama]"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
