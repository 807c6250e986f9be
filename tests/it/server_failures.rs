//! A server that fails, and what perfgate says and leaves behind (issue 32 item 4 and the
//! attacks on it): the first error lines of its log shown once, a killed supervisor's
//! processes adopted and killed, a failed start that kills nothing of perfgate's.

use crate::server_lifecycle::{alive, end_of, gone_within, python, run, script, Case, LOAD};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A crash explained on line 5 of a 41-line log (llama.cpp's `GGML_ASSERT`) is shown above the
/// 20-line tail, and a second scenario of the same `server:` block names the failure without
/// repeating the log (issue 32 item 4: the tail missed the cause and was printed once per
/// scenario).
#[test]
fn a_crash_shows_its_first_error_lines_and_the_log_once() {
    let c = Case::new();
    let crash = c.dir.path().join("crash.sh");
    std::fs::write(
        &crash,
        "#!/bin/sh\nfor i in 1 2 3 4; do echo \"llama_model_loader: line $i\"; done\n\
         echo '/src/ggml.c:1234: GGML_ASSERT(n_dims <= 4) failed'\n\
         i=6; while [ $i -le 41 ]; do echo \"frame $i\"; i=$((i+1)); done\nexit 1\n",
    )
    .unwrap();
    let f = c.write_cmd(
        &["/bin/sh".to_string(), crash.display().to_string()],
        None,
        "",
        LOAD,
        "  - name: a\n  - name: b\n",
    );
    let (code, stderr, _) = run(c.check_cmd(&f));
    assert_eq!(code, 3, "{stderr}");
    let r = c.results();
    let d = r["scenarios"][0]["status_detail"].as_str().unwrap();
    assert!(
        d.contains("exited (exit code 1) before it was ready"),
        "{d}"
    );
    assert!(
        d.contains(
            ", first error-looking line(s) before the tail:\n  | /src/ggml.c:1234: GGML_ASSERT(n_dims <= 4) failed\n  last 20 line(s):\n  | frame 22\n"
        ),
        "{d}"
    );
    assert!(d.ends_with("\n  | frame 41"), "{d}");
    assert_eq!(d.matches("\n  | ").count(), 21, "{d}");
    let d1 = r["scenarios"][1]["status_detail"].as_str().unwrap();
    assert!(d1.starts_with("not measured: the server"), "{d1}");
    assert!(
        d1.ends_with("(its lines are shown with the scenario that started it)"),
        "{d1}"
    );
    assert!(!d1.contains("  | "), "{d1}");
    // stderr: scenario a's summary line holds the log once; b's does not repeat it
    assert_eq!(stderr.matches("GGML_ASSERT").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("| frame 41").count(), 1, "{stderr}");
}

/// The supervisor itself SIGKILLed mid-run (the OOM killer): what it supervised is perfgate's
/// (a subreaper), so a daemon the server detached with `setsid` does not survive, and the
/// message names the supervisor's death instead of blaming the server.
#[test]
fn a_killed_supervisor_leaves_nothing_and_is_named() {
    if python().is_none() {
        return;
    }
    let c = Case::new();
    let daemon_pidfile = c.dir.path().join("daemon.pid");
    let shell = format!(
        "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exec {} '{}' --port {} --pidfile '{}'",
        daemon_pidfile.display(),
        python().unwrap(),
        script().display(),
        c.port,
        c.pidfile().display()
    );
    let f = c.write_cmd(
        &["/bin/sh".to_string(), "-c".to_string(), shell],
        Some(&c.dir.path().join("server.log")),
        "",
        "{samples: 5000, warmup: 2}",
        "  - name: long\n",
    );
    let child = c
        .check_cmd(&f)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let server = c.server_pid();
    let daemon: u32 = {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(p) = std::fs::read_to_string(&daemon_pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < end, "no daemon pid");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let end = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(c.dir.path().join("server.log"))
        .unwrap_or_default()
        .contains("POST /v1/chat/completions")
    {
        assert!(Instant::now() < end, "the check never started measuring");
        std::thread::sleep(Duration::from_millis(50));
    }
    // the supervisor is the server's parent
    let stat = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap();
    let supervisor: u32 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{supervisor}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("__perfgate-server-supervisor"),
        "pid {supervisor} is not the supervisor"
    );
    assert!(alive(daemon), "the daemon {daemon} did not start");
    let _ = Command::new("kill")
        .arg("-9")
        .arg(supervisor.to_string())
        .status();
    let (code, stderr) = end_of(child, 90, "its supervisor's death");
    let daemon_gone = gone_within(daemon, Duration::from_secs(10));
    if !daemon_gone {
        let _ = Command::new("kill")
            .arg("-9")
            .arg(daemon.to_string())
            .status();
    }
    assert!(daemon_gone, "the setsid daemon {daemon} survived");
    assert!(
        gone_within(server, Duration::from_secs(10)),
        "server {server} survived"
    );
    assert_eq!(code, 3, "{stderr}");
    let d = c.results()["scenarios"][0]["status_detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        d.contains(&format!(
            "status unknown: perfgate's server supervisor (pid {supervisor}) was killed by signal 9 (SIGKILL)"
        )),
        "{d}"
    );
}

/// Attack finding: a server command that cannot start (a typo) made its supervisor exit
/// without a report, which perfgate took for a killed supervisor: it then SIGKILLed every
/// child of its own, here a `sleep` the shell that exec'd perfgate had started. A failed start
/// kills nothing, and only what started after the dead supervisor is ever adopted.
#[test]
fn a_server_that_cannot_start_kills_nothing_of_perfgates() {
    let c = Case::new();
    let yaml = format!(
        "scenarios:\n  - name: a-typo\n    endpoint: {{base_url: 'http://127.0.0.1:{}/v1', model: m}}\n    request: {{prompt: hi, max_tokens: 8}}\n    load: {{samples: 20, warmup: 1}}\n    server: {{command: [no-such-server-binary-xyz, --port, '{}']}}\n  - name: b-sim\n    endpoint: {{base_url: 'sim://?ttft_ms=5&tpot_ms=1', model: m}}\n    request: {{prompt: hi, max_tokens: 8}}\n    load: {{samples: 20, warmup: 1}}\n",
        c.port, c.port
    );
    let f = c.dir.path().join("s.yaml");
    std::fs::write(&f, yaml).unwrap();
    let bg = c.dir.path().join("bg.pid");
    let shell = format!(
        "sleep 120 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exec '{}' check -s '{}' --baselines '{}' --allow-missing-baseline --output '{}'",
        bg.display(),
        env!("CARGO_BIN_EXE_perfgate"),
        f.display(),
        c.dir.path().join("baselines").display(),
        c.results_path().display()
    );
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(shell);
    let (code, stderr, _) = run(cmd);
    let pid: u32 = std::fs::read_to_string(&bg)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let survived = alive(pid);
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    assert!(survived, "perfgate killed its own child {pid}: {stderr}");
    assert_eq!(code, 3, "{stderr}");
    let r = c.results();
    assert_eq!(r["scenarios"][0]["status"], "unmeasurable");
    assert_eq!(r["scenarios"][1]["status"], "no_baseline");
}

/// Issue 32 item 5: an endpoint still loading (connection refused) exited 3 with no word about
/// `endpoint.wait_ready`; the detail now says how to make perfgate wait.
#[test]
fn an_endpoint_not_up_yet_points_to_wait_ready() {
    let c = Case::new();
    let yaml = format!(
        "scenarios:\n  - name: early\n    endpoint: {{base_url: 'http://127.0.0.1:{}/v1', model: m}}\n    request: {{prompt: hi, max_tokens: 8}}\n    load: {{samples: 20, warmup: 1}}\n",
        c.port
    );
    let f = c.dir.path().join("s.yaml");
    std::fs::write(&f, yaml).unwrap();
    let (code, stderr, _) = run(c.check_cmd(&f));
    assert_eq!(code, 3, "{stderr}");
    let d = c.results()["scenarios"][0]["status_detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        d.contains("set endpoint.wait_ready, e.g. `wait_ready: 5m`"),
        "{d}"
    );
}
