//! What every integration test binary shares (tests/it/main.rs, tests/realserver.rs,
//! tests/thirdparty.rs include this file): the perfgate command, and the rule for tests that
//! need a tool installed outside cargo.
#![allow(dead_code)] // each binary uses what it needs

use assert_cmd::Command;
use std::path::Path;
use std::time::Duration;

/// The built `perfgate` binary, without the CI environment of the machine running the tests
/// (`GITHUB_*`, `RUNNER_*`, `CI`) or the simulator overrides (`PERFGATE_SIM*`), so a test sees
/// the same perfgate locally and inside GitHub Actions. Set what a test needs with `.env()`.
pub fn perfgate() -> Command {
    let mut c = Command::cargo_bin("perfgate").expect("the perfgate binary is built");
    for k in outside_env() {
        c.env_remove(k);
    }
    c
}

/// The variables of the environment running the tests that a test's perfgate must not see:
/// the CI's (`GITHUB_*`, `RUNNER_*`, `CI`) and the simulator overrides (`PERFGATE_SIM*`).
fn outside_env() -> Vec<String> {
    std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| {
            k.starts_with("GITHUB_")
                || k.starts_with("RUNNER_")
                || k.starts_with("PERFGATE_SIM")
                || k == "CI"
        })
        .collect()
}

/// `perfgate <args>` in `dir` (killed after 180 s): its exit code and stdout then stderr.
pub fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = perfgate_in(dir, 180)
        .args(args)
        .output()
        .expect("perfgate runs");
    let text = output_text(&o);
    (o.status.code(), text)
}

/// A finished perfgate's stdout then stderr, as one text (what a test's messages show).
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A JSON file (a results or baseline file a test wrote).
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the file exists"))
        .expect("the file is JSON")
}

/// [`perfgate_in`] as a plain process (under `timeout`), for tests that run several at once.
pub fn perfgate_process(dir: &Path, timeout_s: u64) -> std::process::Command {
    let mut c = std::process::Command::new("timeout");
    c.arg(timeout_s.to_string())
        .arg(assert_cmd::cargo::cargo_bin("perfgate"))
        .current_dir(dir);
    for k in outside_env() {
        c.env_remove(k);
    }
    c
}

/// [`perfgate_process`] without `timeout`, for a test that signals perfgate itself (`timeout`
/// passes a signal on to its whole process group); the test must stop it.
pub fn perfgate_signalled(dir: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("perfgate"));
    c.current_dir(dir);
    for k in outside_env() {
        c.env_remove(k);
    }
    c
}

/// [`perfgate`] run in `dir`, killed after `timeout_s` seconds.
pub fn perfgate_in(dir: &Path, timeout_s: u64) -> Command {
    let mut c = perfgate();
    c.current_dir(dir).timeout(Duration::from_secs(timeout_s));
    c
}

/// For a test that needs something cargo does not install (a browser, a Python package, a
/// server): `why` says what is missing and how to install it. With `require_var=1` (as
/// scripts/test.sh sets for everything it installs) a missing tool fails the test; otherwise the
/// test is skipped with a message. Call it when the tool is missing, and return.
pub fn missing(require_var: &str, why: &str) {
    if std::env::var(require_var).as_deref() == Ok("1") {
        panic!("{why} ({require_var}=1 forbids skipping)");
    }
    eprintln!("SKIPPED: {why}");
}

/// A new project directory with `scenarios/s.yaml` = `yaml`, and `files` copied from the
/// fixture directory `from` into `scenarios/<to>/` (a prompt set's or trace's files).
pub fn project(yaml: &str, from: &str, to: &str, files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sub = dir.path().join("scenarios").join(to);
    std::fs::create_dir_all(&sub).expect("scenarios/");
    for f in files {
        std::fs::copy(Path::new(from).join(f), sub.join(f)).expect("the fixture file");
    }
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).expect("the scenario file");
    dir
}

/// A scenario file `yaml` in a new temporary directory (as `scenarios/s.yaml`) and
/// `perfgate check --allow-missing-baseline --output r.json` run there (120 s at most): the
/// exit code, stdout and stderr together, and the results JSON (`null` when none was written).
pub fn check_scenario(yaml: &str) -> (Option<i32>, String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(dir.path().join("scenarios")).expect("scenarios/");
    std::fs::write(dir.path().join("scenarios/s.yaml"), yaml).expect("the scenario file");
    let o = perfgate_in(dir.path(), 120)
        .args(["check", "--allow-missing-baseline", "--output", "r.json"])
        .output()
        .expect("perfgate ran");
    let text = output_text(&o);
    let r = std::fs::read_to_string(dir.path().join("r.json")).unwrap_or_else(|_| "null".into());
    (
        o.status.code(),
        text,
        serde_json::from_str(&r).expect("the results JSON parses"),
    )
}

/// A `perfgate sim --port 0 <args>` process under `timeout` (so a failed assertion cannot leave
/// it running), stopped by its PID when dropped (SIGTERM to `timeout` reaches the simulator).
pub struct Sim {
    child: std::process::Child,
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Its address.
    pub addr: std::net::SocketAddr,
}

impl Sim {
    /// Starts it (killed after `timeout_s` seconds at most) and waits until it prints its URL.
    pub fn start(timeout_s: u64, args: &[&str]) -> Sim {
        let mut child = std::process::Command::new("timeout")
            .arg(timeout_s.to_string())
            .arg(assert_cmd::cargo::cargo_bin("perfgate"))
            .args(["sim", "--port", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("perfgate sim starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("its stdout")),
            &mut line,
        )
        .expect("perfgate sim prints its URL");
        let url = line
            .trim()
            .strip_prefix("perfgate sim listening on ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .parse()
            .unwrap_or_else(|_| panic!("an address in {url}"));
        Sim { child, url, addr }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The P50 row of `metric` ("ttft", "tpot", "e2e") among a results scenario's checks.
pub fn p50_row<'a>(scenario: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    scenario["checks"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["metric"] == metric && c["kind"]["quantile"] == "p50")
        })
        .unwrap_or_else(|| panic!("no {metric} P50 row in {scenario}"))
}
