//! The started server under attack (issue 26): durations too long to add to a clock, a log that is
//! a FIFO or never ends its line, a server that hides processes from its process group (a
//! wrapper's child, a `setsid()`), secrets in its command line, readiness and metrics URLs on
//! another origin, the default log file's privacy, and a server that prints its ready line and
//! exits. Against the scripted server of tests/server_support/ on 127.0.0.1; every process a test
//! starts is found by the PID it writes and checked (and cleaned up) by PID.

use super::server_lifecycle::{alive, gone_within, python, run, script, Case, LOAD};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// SIGKILLs the listed PIDs (those still alive) when dropped: a failing test leaves no server.
struct Reap(Vec<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

/// The PID a process wrote to `path` (waits up to 30 s).
fn pid_in(path: &Path) -> u32 {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(p) = s.trim().parse() {
                return p;
            }
        }
        assert!(Instant::now() < end, "{} was never written", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` to its end, at most `limit` (then kills it and fails): (exit code, stderr).
fn run_within(mut cmd: Command, limit: Duration) -> (i32, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + limit;
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("perfgate did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    eprintln!("--- stderr\n{stderr}");
    (code, stderr)
}

/// A bash script in the case directory (perfgate expands `${...}` and `$$` in a command word,
/// so scripts that use `$` live in files).
fn bash_script(c: &Case, name: &str, body: &str) -> Vec<String> {
    let p = c.dir.path().join(name);
    std::fs::write(&p, body).unwrap();
    vec!["bash".into(), p.display().to_string()]
}

/// `bash` running the scripted server in the background (the server is bash's child, in its
/// process group) and a `setsid()` grandchild (a session and process group of its own), then
/// `wait`: the shape of a `bash -c`/`uv run` wrapper and a daemonising engine worker. Each
/// writes its PID: `bash.pid`, `server.pid`, `setsid.pid`.
fn wrapped_server(c: &Case) -> Vec<String> {
    let d = c.dir.path();
    let body = format!(
        "echo $$ > {bash_pid}\n\
         {py} {script} --port {port} --pidfile {server_pid} &\n\
         {py} -c 'import os, sys, time; os.setsid(); open(sys.argv[1], \"w\").write(str(os.getpid())); time.sleep(600)' {setsid_pid} &\n\
         wait\n",
        bash_pid = d.join("bash.pid").display(),
        py = python().unwrap(),
        script = script().display(),
        port = c.port,
        server_pid = c.pidfile().display(),
        setsid_pid = d.join("setsid.pid").display(),
    );
    bash_script(c, "wrapper.sh", &body)
}

fn wrapped_pids(c: &Case) -> Vec<(&'static str, u32)> {
    vec![
        ("bash", pid_in(&c.dir.path().join("bash.pid"))),
        ("server", c.server_pid()),
        (
            "setsid grandchild",
            pid_in(&c.dir.path().join("setsid.pid")),
        ),
    ]
}

// ---- finding 8: durations -------------------------------------------------------------------

#[test]
fn durations_beyond_the_maximum_are_config_errors_naming_key_value_and_maximum() {
    let c = Case::new();
    let keys = [
        ("server", "ready_timeout"),
        ("server", "stop_timeout"),
        ("endpoint", "connect_timeout"),
        ("endpoint", "first_token_timeout"),
        ("endpoint", "idle_timeout"),
        ("endpoint", "request_timeout"),
        ("endpoint", "wait_ready"),
    ];
    // 2^64 - 1 seconds: the largest a Duration holds, which no clock can add
    let huge = "18446744073709551615s";
    for (section, key) in keys {
        let (endpoint_extra, server_extra) = match section {
            "endpoint" => (format!(", {key}: {huge}"), String::new()),
            _ => (String::new(), format!("    {key}: {huge}\n")),
        };
        let yaml = format!(
            "defaults:\n  endpoint: {{base_url: 'http://127.0.0.1:{}/v1', model: m{endpoint_extra}}}\n  request: {{prompt: hi, max_tokens: 8}}\n  server:\n    command: [srv]\n{server_extra}scenarios:\n  - name: a\n",
            c.port
        );
        let f = c.dir.path().join("d.yaml");
        std::fs::write(&f, yaml).unwrap();
        let mut v = Command::new(env!("CARGO_BIN_EXE_perfgate"));
        v.arg("validate").arg("-s").arg(&f);
        let (code, stderr) = run_within(v, Duration::from_secs(60));
        assert_eq!(code, 2, "{section}.{key}: {stderr}");
        assert!(
            stderr.contains(&format!("{section}.{key}")),
            "{section}.{key}: {stderr}"
        );
        assert!(stderr.contains(huge), "{section}.{key}: {stderr}");
        assert!(
            stderr.contains("longer than the maximum 1day"),
            "{section}.{key}: {stderr}"
        );
    }
}

// ---- finding 9: a FIFO as server.log ----------------------------------------------------------

#[test]
fn a_fifo_as_server_log_is_refused_not_waited_on() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let fifo = c.dir.path().join("server.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let cmd = vec![
        python().unwrap().to_string(),
        script().display().to_string(),
        "--port".into(),
        c.port.to_string(),
        "--pidfile".into(),
        c.pidfile().display().to_string(),
    ];
    let f = c.write_cmd(&cmd, Some(&fifo), "", LOAD, "  - name: fifo\n");
    // before: perfgate blocked in open(2) of the FIFO forever
    let (code, stderr) = run_within(c.check_cmd(&f), Duration::from_secs(60));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the server log {} is not a regular file (a FIFO)",
            fifo.display()
        )),
        "{stderr}"
    );
    assert!(!c.pidfile().exists(), "no server was started");
}

// ---- finding 10: a log line that never ends ---------------------------------------------------

/// Peak resident memory of `pid`, KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn a_log_without_newlines_is_followed_in_bounded_memory() {
    if python().is_none() || !Path::new("/proc/self/status").exists() {
        return;
    }
    let c = Case::new();
    // tqdm-style progress: 64 MiB of `\r`-separated updates and no newline, never ready; written
    // in 1 MiB pieces so that even a loaded machine writes it all well inside the ready timeout
    let body = format!(
        "{py} -c 'import sys, time\npiece = \"\".join(\"\\rloading %9d/2000000 shards\" % i for i in range(32768))\nfor _ in range(64): sys.stdout.write(piece); sys.stdout.flush()\nopen(sys.argv[1], \"w\").write(\"done\")\ntime.sleep(600)' {done}\n",
        py = python().unwrap(),
        done = c.dir.path().join("written").display(),
    );
    let cmd = bash_script(&c, "progress.sh", &body);
    let log = c.dir.path().join("server.log");
    let f = c.write_cmd(
        &cmd,
        Some(&log),
        "    ready: {log: READY}\n    ready_timeout: 20s\n",
        LOAD,
        "  - name: progress\n",
    );
    let mut child = c
        .check_cmd(&f)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut peak = 0;
    let end = Instant::now() + Duration::from_secs(90);
    let code = loop {
        if let Some(p) = peak_rss_kib(pid) {
            peak = peak.max(p);
        }
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        assert!(Instant::now() < end, "perfgate did not end within 90 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap();
    eprintln!("--- stderr\n{stderr}\npeak RSS {peak} KiB");
    assert!(
        c.dir.path().join("written").exists(),
        "the server never wrote its progress"
    );
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size > 60_000_000, "log of {size} bytes");
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("was not ready within ready_timeout 20s"),
        "{stderr}"
    );
    // before: every poll read the whole unfinished line again (64 MiB and more resident)
    assert!(
        peak < 48 * 1024,
        "perfgate's peak RSS {peak} KiB while following a {size}-byte log line"
    );
}

// ---- finding 12: processes outside the server's direct child -------------------------------------

#[test]
fn a_wrapped_server_and_a_setsid_grandchild_end_with_a_normal_run() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let cmd = wrapped_server(&c);
    let log = c.dir.path().join("server.log");
    let f = c.write_cmd(&cmd, Some(&log), "", LOAD, "  - name: wrapped\n");
    let (code, stderr, _) = run(c.check_cmd(&f));
    let pids = wrapped_pids(&c);
    let _reap = Reap(pids.iter().map(|p| p.1).collect());
    assert_eq!(code, 0, "{stderr}");
    for (what, pid) in pids {
        assert!(
            gone_within(pid, Duration::from_secs(10)),
            "the {what} (pid {pid}) outlived perfgate's run"
        );
    }
}

#[test]
fn perfgate_sigkilled_takes_the_servers_whole_tree_with_it() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let cmd = wrapped_server(&c);
    let log = c.dir.path().join("server.log");
    let f = c.write_cmd(
        &cmd,
        Some(&log),
        "",
        "{samples: 5000, warmup: 2}",
        "  - name: long\n",
    );
    let mut child = c
        .check_cmd(&f)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = wrapped_pids(&c);
    let _reap = Reap(pids.iter().map(|p| p.1).collect());
    let end = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("POST /v1/chat/completions")
    {
        assert!(Instant::now() < end, "the check never started measuring");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    for (what, pid) in pids {
        assert!(
            gone_within(pid, Duration::from_secs(10)),
            "the {what} (pid {pid}) outlived a SIGKILLed perfgate"
        );
    }
}

// ---- finding 13: secrets in the command line ----------------------------------------------------

#[test]
fn secrets_in_the_server_command_reach_no_output() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let env_canary = "hf_env_canary_value_13";
    let literal_canary = "sk-literal-canary-13";
    let url_canary = "pw-url-canary-13";
    let flag_canary = "flag-canary-value-13";
    // a docker-style wrapper: the extra words are bash's $0 $1 ... (ignored by the script)
    let mut cmd = bash_script(
        &c,
        "exec.sh",
        &format!(
            "exec {} {} --port {} --pidfile {}\n",
            python().unwrap(),
            script().display(),
            c.port,
            c.pidfile().display()
        ),
    );
    cmd.extend(
        [
            "-e",
            "HF_TOKEN=${T13_VALUE}",
            "-e",
            &format!("OPENAI_API_KEY={literal_canary}"),
            "--download-url",
            &format!("https://user:{url_canary}@example.invalid/models"),
            "--api-key",
            flag_canary,
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let log = c.dir.path().join("server.log");
    let f = c.write_cmd(&cmd, Some(&log), "", LOAD, "  - name: secrets\n");
    let md = c.dir.path().join("comment.md");
    let mut check = c.check_cmd(&f);
    check
        .env("T13_VALUE", env_canary)
        .arg("--markdown")
        .arg(&md);
    let (code, stderr, _) = run(check);
    assert_eq!(code, 0, "{stderr}");
    let results = std::fs::read_to_string(c.results_path()).unwrap();
    let markdown = std::fs::read_to_string(&md).unwrap();
    for (what, text) in [
        ("stderr", &stderr),
        ("results", &results),
        ("markdown", &markdown),
    ] {
        for canary in [env_canary, literal_canary, url_canary, flag_canary] {
            assert!(!text.contains(canary), "{canary} in {what}:\n{text}");
        }
    }
    let shown = c.results()["scenarios"][0]["server"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    for part in [
        "-e HF_TOKEN=<redacted>",
        "-e OPENAI_API_KEY=<redacted>",
        "https://user:<redacted>@example.invalid/models",
        "--api-key <redacted>",
    ] {
        assert!(shown.contains(part), "{part} not in {shown}");
    }
}

// ---- finding 14: credentials only to the endpoint's origin ---------------------------------------

/// A loopback HTTP listener that records each request's head and answers 200 (`/health` only
/// once `ready_port` accepts connections: before, it closes the connection unanswered).
fn recording_listener(ready_port: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            let head = String::from_utf8_lossy(&head).to_string();
            let up = std::net::TcpStream::connect(("127.0.0.1", ready_port)).is_ok();
            let answer = up || !head.starts_with("GET /health");
            log.lock().unwrap().push(head);
            // not up yet: no answer at all (an answer would be "the port is taken")
            if answer {
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                );
            }
        }
    });
    (port, seen)
}

#[test]
fn the_endpoint_key_goes_only_to_its_own_origin() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let key = "sk-canary-origin-14";
    let (other, seen) = recording_listener(c.port);
    let extra = format!(
        "    ready: {{url: 'http://127.0.0.1:{other}/health'}}\n    metrics: 'http://127.0.0.1:{other}/metrics'\n"
    );
    let f = c.write(&[], &extra, LOAD, "  - name: origin\n");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("model: scripted}", "model: scripted, api_key_env: T14_KEY}");
    std::fs::write(&f, text).unwrap();
    let mut check = c.check_cmd(&f);
    check.env("T14_KEY", key);
    let (code, stderr, _) = run(check);
    assert_eq!(code, 0, "{stderr}");
    let heads = seen.lock().unwrap().clone();
    assert!(
        heads.iter().any(|h| h.starts_with("GET /health")),
        "{heads:?}"
    );
    assert!(
        heads.iter().any(|h| h.starts_with("GET /metrics")),
        "{heads:?}"
    );
    for h in &heads {
        let lower = h.to_ascii_lowercase();
        assert!(
            !lower.contains("authorization") && !h.contains(key),
            "the endpoint's key went to another origin:\n{h}"
        );
    }
    let pid = c.server_pid();
    assert!(gone_within(pid, Duration::from_secs(10)));
}

// ---- finding 15: the default server log -------------------------------------------------------

/// The log path perfgate printed when it started the server.
fn printed_log(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("perfgate: started the server"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let at = line.find("; log ").unwrap() + "; log ".len();
    let end = line[at..].find(')').unwrap() + at;
    PathBuf::from(&line[at..end])
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_default_server_log_is_private_and_removed_after_a_clean_run() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let tmp = c.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let cmd = vec![
        python().unwrap().to_string(),
        script().display().to_string(),
        "--port".into(),
        c.port.to_string(),
        "--pidfile".into(),
        c.pidfile().display().to_string(),
    ];
    let f = c.write_cmd(&cmd, None, "", LOAD, "  - name: clean\n");
    let mut check = c.check_cmd(&f);
    check.env("TMPDIR", &tmp);
    let (code, stderr, _) = run(check);
    assert_eq!(code, 0, "{stderr}");
    let log = printed_log(&stderr);
    assert!(log.starts_with(&tmp), "{}", log.display());
    assert_ne!(
        log.parent(),
        Some(tmp.as_path()),
        "not in a private directory"
    );
    assert!(!log.exists(), "{} was left behind", log.display());
    // and the results do not name a file that is gone
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.results_path()).unwrap()).unwrap();
    let srv = &r["scenarios"][0]["server"];
    assert!(srv["pid"].is_u64(), "{srv}");
    assert!(srv.get("log").is_none(), "a removed log is named: {srv}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    assert!(gone_within(c.server_pid(), Duration::from_secs(10)));
}

#[test]
fn a_failed_servers_default_log_is_kept_private_and_named() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let tmp = c.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let cmd = vec![
        python().unwrap().to_string(),
        script().display().to_string(),
        "--port".into(),
        c.port.to_string(),
        "--pidfile".into(),
        c.pidfile().display().to_string(),
        "--never-ready".into(),
    ];
    let f = c.write_cmd(
        &cmd,
        None,
        "    ready_timeout: 2s\n",
        LOAD,
        "  - name: failed\n",
    );
    let mut check = c.check_cmd(&f);
    check.env("TMPDIR", &tmp);
    let (code, stderr, _) = run(check);
    assert_eq!(code, 3, "{stderr}");
    let log = printed_log(&stderr);
    let detail = c.results()["scenarios"][0]["status_detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains(&format!("log {}", log.display())),
        "{detail}"
    );
    assert!(
        stderr.contains(&format!("kept its log {}", log.display())),
        "{stderr}"
    );
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("[scripted] loading model"));
    assert_eq!(mode(&log), 0o600, "{}", log.display());
    assert_eq!(mode(log.parent().unwrap()), 0o700);
    assert_ne!(log.parent(), Some(tmp.as_path()));
    assert!(gone_within(c.server_pid(), Duration::from_secs(10)));
}

// ---- finding 19: ready line, then exit ----------------------------------------------------------

#[test]
fn a_server_that_prints_its_ready_line_and_exits_is_reported_as_such() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let cmd = bash_script(
        &c,
        "flash.sh",
        "echo loading\nsleep 1\necho READY\nexit 4\n",
    );
    let log = c.dir.path().join("server.log");
    let f = c.write_cmd(
        &cmd,
        Some(&log),
        "    ready: {log: READY}\n    ready_timeout: 30s\n",
        LOAD,
        "  - name: flash\n",
    );
    let (code, stderr, _) = run(c.check_cmd(&f));
    assert_eq!(code, 3, "{stderr}");
    let r = c.results();
    let d = r["scenarios"][0]["status_detail"].as_str().unwrap();
    assert!(
        d.contains("printed its ready line (`READY`) and then exited (exit code 4)"),
        "{d}"
    );
    assert!(!d.contains("no log line contains"), "{d}");
    assert!(d.contains("| READY"), "{d}");
}
