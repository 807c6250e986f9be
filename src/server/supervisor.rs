//! The server's supervisor: a small process (the perfgate binary run as
//! `perfgate __perfgate-server-supervisor -- ARGV...`) between perfgate and the server, so that
//! nothing the server starts outlives perfgate, however perfgate ends.
//!
//! - It is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a process the server leaves
//!   behind (a `bash -c`/`uv run` wrapper's child, an engine worker, a `setsid()` daemon) is
//!   re-parented to it, not to init, so every descendant of the server stays its descendant.
//! - It starts the server in a process group of its own, with `PR_SET_PDEATHSIG = SIGKILL`
//!   (the supervisor is single-threaded, so the signal fires exactly when it dies), stdin
//!   `/dev/null`, stdout and stderr the log (the supervisor's own stderr).
//! - perfgate holds its stdin: `term\n` asks it to SIGTERM the server's group and every
//!   descendant outside it; end of file (perfgate closed it, or died, even by SIGKILL) makes it
//!   SIGKILL the group and every descendant, reap them all, and exit. When no `term` came first
//!   (perfgate died), it SIGTERMs them and waits up to `--grace-ms` (the server's
//!   `stop_timeout`) before the SIGKILL, so that a server can stop cleanly (a foreground
//!   `docker run` forwards the SIGTERM to its container).
//! - It reports on stdout, one line each: `pid N` (the server started), `error ERRNO` (it could
//!   not), `exit RAW` (the server's wait status, when it ended).
//! - It ignores SIGINT, SIGTERM and SIGHUP (a Ctrl-C or a signal to perfgate's group is
//!   perfgate's to handle; the server gets the default dispositions back).
//!
//! This module allows `unsafe` (the crate denies it): `prctl`, `signal`, `poll`, `waitpid` and
//! `kill`, each with its SAFETY note.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

/// The hidden first argument that runs the supervisor instead of the CLI:
/// `perfgate __perfgate-server-supervisor --grace-ms N -- ARGV...`.
pub const ARG: &str = "__perfgate-server-supervisor";
/// The option that gives the SIGTERM grace when perfgate dies (ms).
pub const GRACE_ARG: &str = "--grace-ms";

/// How often the supervisor looks for perfgate's commands and reaps children.
const TICK_MS: libc::c_int = 10;
/// Longest the final kill-and-reap goes on (a process forking as fast as it is killed).
const KILL_LIMIT: Duration = Duration::from_secs(10);

/// Runs the supervisor when the process was started as one (`argv[1] == ARG`): its exit code.
/// `None` for any other command line (the CLI runs).
pub fn main_if_requested() -> Option<i32> {
    let mut args = std::env::args_os();
    let _exe = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(ARG)) {
        return None;
    }
    let mut grace = Duration::ZERO;
    let mut rest = Vec::new();
    while let Some(a) = args.next() {
        if a == GRACE_ARG {
            let ms = args.next().and_then(|v| v.to_str()?.parse::<u64>().ok());
            grace = Duration::from_millis(ms.unwrap_or(0));
        } else if a == "--" {
            rest = args.collect();
            break;
        }
    }
    Some(run(&rest, grace))
}

fn set_disposition(sig: libc::c_int, how: libc::sighandler_t) {
    // SAFETY: installs SIG_IGN or SIG_DFL (no handler code runs); async-signal-safe, so it is
    // also called between fork and exec.
    unsafe {
        libc::signal(sig, how);
    }
}

const SHIELDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn report(line: &str) {
    // perfgate may be gone: a failed write is ignored (SIGPIPE is ignored by the Rust runtime)
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn run(argv: &[OsString], grace: Duration) -> i32 {
    use std::os::fd::AsFd;
    use std::os::unix::process::CommandExt;
    let Some(program) = argv.first() else {
        report(&format!("error {}", libc::EINVAL));
        return 2;
    };
    for s in SHIELDED {
        set_disposition(s, libc::SIG_IGN);
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with integer arguments only.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    }
    let log = match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => {
            report(&format!("error {}", e.raw_os_error().unwrap_or(libc::EIO)));
            return 1;
        }
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(log))
        .stderr(std::process::Stdio::inherit())
        .process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls after the fork (signal, prctl, getppid, _exit),
    // no allocation.
    unsafe {
        cmd.pre_exec(move || {
            for s in SHIELDED {
                set_disposition(s, libc::SIG_DFL);
            }
            #[cfg(target_os = "linux")]
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // the supervisor died between the fork and the prctl: do not outlive it
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            report(&format!(
                "error {}",
                e.raw_os_error().unwrap_or(libc::EINVAL)
            ));
            return 1;
        }
    };
    let pid = child.id() as libc::pid_t;
    // reaped below with waitpid, not through `child`
    drop(child);
    report(&format!("pid {pid}"));
    let mut reported = false;
    let mut terminated = false;
    let mut input = Vec::new();
    loop {
        match wait_input() {
            Input::Bytes(b) => {
                input.extend_from_slice(&b);
                while let Some(i) = input.iter().position(|&c| c == b'\n') {
                    let line: Vec<u8> = input.drain(..=i).collect();
                    if line.starts_with(b"term") {
                        terminated = true;
                        terminate(pid);
                    }
                }
            }
            Input::Nothing => {}
            Input::Closed => break,
        }
        reap(pid, &mut reported);
    }
    if !terminated {
        // perfgate is gone without stopping the server: a clean stop first, bounded
        terminate(pid);
        let end = Instant::now() + grace;
        while Instant::now() < end && reap(pid, &mut reported) {
            std::thread::sleep(Duration::from_millis(TICK_MS as u64));
        }
    }
    kill_all(pid, &mut reported);
    0
}

enum Input {
    Bytes(Vec<u8>),
    Nothing,
    Closed,
}

/// Waits up to one tick for perfgate's commands on stdin.
fn wait_input() -> Input {
    let mut p = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, its count, a timeout.
    let n = unsafe { libc::poll(&mut p, 1, TICK_MS) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Input::Nothing
        } else {
            Input::Closed
        };
    }
    if n == 0 {
        return Input::Nothing;
    }
    if p.revents & libc::POLLIN != 0 {
        let mut buf = [0u8; 256];
        // SAFETY: read(2) into a buffer of the length given (unbuffered: what poll saw is
        // what is read, none left behind in a userspace buffer).
        let k = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        return match usize::try_from(k) {
            Ok(0) | Err(_) => Input::Closed,
            Ok(k) => Input::Bytes(buf[..k].to_vec()),
        };
    }
    // POLLHUP, POLLERR, POLLNVAL: perfgate is gone
    Input::Closed
}

/// Reaps every child that ended (the server and any re-parented orphan); reports the server's
/// status once. True while children remain.
fn reap(server: libc::pid_t, reported: &mut bool) -> bool {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid out pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            if r == server && !*reported {
                *reported = true;
                report(&format!("exit {status}"));
            }
            continue;
        }
        return r == 0;
    }
}

/// kill(2) of a process (`pid > 0`) or a process group (`pid < 0`); never init, our own
/// group or every process (`0`, `1`, `-1`).
fn signal(pid: libc::pid_t, sig: libc::c_int) {
    if pid.unsigned_abs() > 1 {
        // SAFETY: kill(2) touches no memory.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// SIGTERM to the server's process group and to each descendant outside it.
fn terminate(server: libc::pid_t) {
    signal(-server, libc::SIGTERM);
    for (pid, pgid) in descendants() {
        if pgid != server {
            signal(pid, libc::SIGTERM);
        }
    }
}

/// SIGKILLs the server's group and every descendant until none is left, reaping them.
fn kill_all(server: libc::pid_t, reported: &mut bool) {
    let end = Instant::now() + KILL_LIMIT;
    loop {
        signal(-server, libc::SIGKILL);
        for (pid, _) in descendants() {
            signal(pid, libc::SIGKILL);
        }
        if !reap(server, reported) || Instant::now() > end {
            return;
        }
        std::thread::sleep(Duration::from_millis(TICK_MS as u64));
    }
}

/// Every descendant of this process, with its process group (Linux: from /proc; elsewhere
/// none, and only the server's process group is signalled).
fn descendants() -> Vec<(libc::pid_t, libc::pid_t)> {
    #[cfg(target_os = "linux")]
    {
        let me = std::process::id() as libc::pid_t;
        let table = proc_table();
        let mut out = Vec::new();
        let mut frontier = vec![me];
        while let Some(p) = frontier.pop() {
            for &(pid, ppid, pgid) in &table {
                if ppid == p && pid != me {
                    out.push((pid, pgid));
                    frontier.push(pid);
                }
            }
        }
        out
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// `(pid, ppid, pgid)` of every process in /proc.
#[cfg(target_os = "linux")]
fn proc_table() -> Vec<(libc::pid_t, libc::pid_t, libc::pid_t)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (ppid, pgid) = parse_stat(&stat)?;
            Some((pid, ppid, pgid))
        })
        .collect()
}

/// `(ppid, pgid)` from a /proc/PID/stat line: the fields after the parenthesised command
/// name (which may hold spaces and parentheses) are `state ppid pgrp ...`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_stat(stat: &str) -> Option<(libc::pid_t, libc::pid_t)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(1);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(
            parse_stat("4242 (python3) S 4200 4242 4242 0 -1 4194560"),
            Some((4200, 4242))
        );
        assert_eq!(
            parse_stat("7 (a) b (c) R 1 7 7 0"),
            Some((1, 7)),
            "a command name with `) ` in it"
        );
        assert_eq!(parse_stat("garbage"), None);
    }
}
