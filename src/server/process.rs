//! The server process, as perfgate sees it: started through a [`super::supervisor`] (the
//! perfgate binary run as one), in a process group of its own, with its stdout and stderr in a
//! log file ([`super::log`]).
//!
//! perfgate holds the supervisor's stdin: closing it (in [`Proc::release`], in `Drop`, or by
//! the kernel when perfgate dies, SIGKILL included) makes the supervisor SIGKILL the server's
//! process group and every descendant of the server, `setsid()` ones included, and exit. A
//! reader thread per server takes the supervisor's reports (the server's pid, its exit status)
//! and reaps the supervisor.
//!
//! The one place perfgate itself signals the server: [`signal_group`] (kill(2) on its process
//! group, with its SAFETY note); this module therefore allows `unsafe` (the crate denies it).
#![allow(unsafe_code)]

use super::log::{LogError, ServerLog};
use crate::config::server::ServerSpec;
use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest perfgate waits for the supervisor to say the server started.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Longest perfgate waits for the supervisor to have killed and reaped everything.
const RELEASE_LIMIT: Duration = Duration::from_secs(12);

/// How the server's process ended, as perfgate knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The supervisor reported the server's own exit status.
    Server(ExitStatus),
    /// The supervisor itself died (the OOM killer, a `kill -9`) before it reported the
    /// server's status: perfgate killed what it left ([`kill_adopted`]); the server's own fate
    /// is unknown.
    SupervisorDied { pid: u32, status: ExitStatus },
}

impl Ended {
    /// `exit code 3`, `killed by signal 9 (SIGKILL)`, or what happened to the supervisor.
    pub fn describe(self) -> String {
        match self {
            Ended::Server(st) => describe(st),
            Ended::SupervisorDied { pid, status } => format!(
                "status unknown: perfgate's server supervisor (pid {pid}) was {}; perfgate killed the processes it left",
                match describe(status) {
                    d if d.starts_with("exit code") => format!("gone ({d})"),
                    d => d,
                }
            ),
        }
    }
}

/// What the reader thread learnt from the supervisor.
#[derive(Debug, Default)]
struct State {
    /// How the server ended, once it did.
    exit: Option<Ended>,
    /// The supervisor has exited: every process of the server is gone.
    released: bool,
}

/// A started server process (its process group has the same id as its pid).
#[derive(Debug)]
pub struct Proc {
    /// Process id, also the process group id.
    pub pid: u32,
    /// The log file (stdout and stderr).
    pub log: ServerLog,
    /// When it was spawned.
    pub started: Instant,
    state: Arc<Mutex<State>>,
    /// The supervisor's stdin; `None` once released.
    control: Mutex<Option<ChildStdin>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Proc {
    /// How the process ended, once it has.
    pub fn exit_status(&self) -> Option<Ended> {
        lock(&self.state).exit
    }

    /// Asks the supervisor to SIGTERM the server's process group and every descendant outside
    /// it; signals the group itself when the supervisor cannot be told.
    pub fn terminate(&self) {
        let told = lock(&self.control)
            .as_mut()
            .is_some_and(|c| c.write_all(b"term\n").and_then(|_| c.flush()).is_ok());
        if !told {
            signal_group(self.pid, libc::SIGTERM);
        }
    }

    /// Ends everything the server started: closes the supervisor's stdin (it SIGKILLs the
    /// server's group and every descendant, reaps them and exits) and waits for that, at most
    /// [`RELEASE_LIMIT`]. True when the supervisor is done.
    pub async fn release(&self) -> bool {
        drop(lock(&self.control).take());
        let end = Instant::now() + RELEASE_LIMIT;
        while !lock(&self.state).released {
            if Instant::now() >= end {
                // the supervisor is stuck: at least the group goes
                signal_group(self.pid, libc::SIGKILL);
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // closing the supervisor's stdin kills whatever is left of the server
        drop(lock(&self.control).take());
    }
}

/// Describes an exit status: `exit code 3`, `killed by signal 9 (SIGKILL)`.
pub fn describe(st: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(c) = st.code() {
        return format!("exit code {c}");
    }
    match st.signal() {
        Some(s) => {
            let name = match s {
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGINT => " (SIGINT)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGBUS => " (SIGBUS)",
                _ => "",
            };
            format!("killed by signal {s}{name}")
        }
        None => format!("{st}"),
    }
}

/// Why the server's process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The log file cannot be created, or `server.log` is not a regular file.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log file cannot be opened a second time (for the server's output).
    #[error("cannot open the server log {}: {source}", log.display())]
    LogOpen {
        log: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The supervisor (perfgate's own binary) cannot be started.
    #[error("cannot start perfgate's server supervisor: {0}")]
    Supervisor(#[source] std::io::Error),
    /// The supervisor did not say whether the server started.
    #[error("perfgate's server supervisor did not report the server's start")]
    SupervisorSilent,
    /// The program cannot be started (`command`: the redacted command line).
    #[error("cannot start the server `{command}`: {source}{}", if source.kind() == std::io::ErrorKind::NotFound { " (is the program on PATH, or give its full path in server.command[0])" } else { "" })]
    Program {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The thread that reads the supervisor's reports cannot start (the server was killed).
    #[error("cannot start a thread to watch the server")]
    Watcher,
}

/// The program that runs the supervisor: this very binary.
fn supervisor_program() -> std::io::Result<std::path::PathBuf> {
    if cfg!(target_os = "linux") {
        // still runs when the file was replaced or deleted since perfgate started
        Ok("/proc/self/exe".into())
    } else {
        std::env::current_exe()
    }
}

/// A report line of the supervisor.
enum Report {
    Pid(u32),
    Error(i32),
    Exit(i32),
}

fn parse_report(line: &str) -> Option<Report> {
    let (what, n) = line.trim().split_once(' ')?;
    match what {
        "pid" => n.parse().ok().map(Report::Pid),
        "error" => n.parse().ok().map(Report::Error),
        "exit" => n.parse().ok().map(Report::Exit),
        _ => None,
    }
}

/// Starts the server of `spec` (the `n`-th start of this perfgate, for the default log's name)
/// under a supervisor.
///
/// Errors: the log file cannot be created (or is not a regular file), the supervisor cannot
/// start, or the program cannot be started (not found, not executable), with the redacted
/// command line.
pub fn spawn(spec: &ServerSpec, n: usize) -> Result<Proc, SpawnError> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let log = ServerLog::create(
        spec.log.as_deref(),
        &format!("server-{n}-{}.log", &spec.key),
    )?;
    let out = log.writer().map_err(|source| SpawnError::LogOpen {
        log: log.path().to_path_buf(),
        source,
    })?;
    become_subreaper();
    let mut cmd = Command::new(supervisor_program().map_err(SpawnError::Supervisor)?);
    cmd.arg(super::supervisor::ARG)
        .arg(super::supervisor::GRACE_ARG)
        .arg(spec.stop_timeout.as_millis().to_string())
        .arg("--")
        .args(&spec.command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(out))
        // out of perfgate's process group: a Ctrl-C or a signal to perfgate's group is
        // perfgate's to handle, and the supervisor must outlive perfgate to clean up
        .process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v.expose());
    }
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    let started = Instant::now();
    let mut sup = cmd.spawn().map_err(SpawnError::Supervisor)?;
    let sup_pid = sup.id();
    let sup_start = start_time(sup_pid);
    let control = sup.stdin.take();
    let reports = sup.stdout.take();
    let state = Arc::new(Mutex::new(State::default()));
    let (tx, rx) = mpsc::channel::<Report>();
    let shared = Arc::clone(&state);
    let reader = std::thread::Builder::new()
        .name("perfgate-server-supervisor".into())
        .spawn(move || {
            let mut first = Some(tx);
            let mut started_server = false;
            if let Some(r) = reports {
                for line in std::io::BufReader::new(r).lines() {
                    let Ok(line) = line else { break };
                    match parse_report(&line) {
                        Some(Report::Exit(raw)) => {
                            lock(&shared).exit = Some(Ended::Server(ExitStatus::from_raw(raw)));
                        }
                        Some(r) => {
                            started_server |= matches!(r, Report::Pid(_));
                            if let Some(tx) = first.take() {
                                let _ = tx.send(r);
                            }
                        }
                        None => {}
                    }
                }
            }
            drop(first);
            let st = sup.wait().ok();
            let mut s = lock(&shared);
            if s.exit.is_none() {
                // the supervisor ended without the server's status: when it was killed after
                // starting the server, what it supervised is now perfgate's (a subreaper): kill
                // it, then say so (a supervisor that could not start the program exits by
                // itself and leaves nothing)
                if started_server && st.is_some_and(|st| st.signal().is_some()) {
                    kill_adopted(sup_start);
                }
                s.exit = st.map(|status| Ended::SupervisorDied {
                    pid: sup_pid,
                    status,
                });
            }
            s.released = true;
        });
    if reader.is_err() {
        return Err(SpawnError::Watcher);
    }
    let pid = match rx.recv_timeout(START_LIMIT) {
        Ok(Report::Pid(pid)) => pid,
        Ok(Report::Error(errno)) => {
            return Err(SpawnError::Program {
                command: spec.shown_command.clone(),
                source: std::io::Error::from_raw_os_error(errno),
            })
        }
        _ => return Err(SpawnError::SupervisorSilent),
    };
    Ok(Proc {
        pid,
        log,
        started,
        state,
        control: Mutex::new(control),
    })
}

/// Makes perfgate a child subreaper (Linux), once, before its first server: when a
/// supervisor dies before its server (the OOM killer, a `kill -9`), the server and whatever it
/// detached (a `setsid` daemon) become perfgate's, not init's, so [`kill_adopted`] can find them.
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl with integer arguments only changes this process's own attribute.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// SIGKILLs what a dead supervisor left to perfgate (a subreaper): perfgate's children that
/// are not supervisors and started no earlier than that supervisor (`since`: its start time in
/// clock ticks since boot; a child perfgate inherited or started before is never touched), each
/// with its process group and descendants, and reaps them. Repeats, at most 2 s, until no such
/// child is left: a process forking while it is killed leaves children that become perfgate's
/// on the next pass.
pub fn kill_adopted(since: u64) {
    let me = std::process::id();
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let procs = proc_table();
        let adopted: Vec<u32> = procs
            .iter()
            .filter(|p| p.ppid == me && !p.is_supervisor && p.start >= since)
            .map(|p| p.pid)
            .collect();
        if adopted.is_empty() || Instant::now() >= end {
            return;
        }
        for &pid in &adopted {
            let mut stack = vec![pid];
            while let Some(x) = stack.pop() {
                stack.extend(procs.iter().filter(|p| p.ppid == x).map(|p| p.pid));
                if procs.iter().any(|p| p.pid == x && p.pgrp == x) {
                    signal_group(x, libc::SIGKILL);
                }
                if let Ok(x) = libc::pid_t::try_from(x) {
                    // SAFETY: kill with a pid of a process found in /proc and a signal number.
                    unsafe {
                        libc::kill(x, libc::SIGKILL);
                    }
                }
            }
        }
        // reap the adopted (only these pids: others are std's children to wait for); their
        // own children are perfgate's now, for the next pass
        for pid in adopted {
            let Ok(pid) = libc::pid_t::try_from(pid) else {
                continue;
            };
            let reap_end = Instant::now() + Duration::from_millis(200);
            loop {
                // SAFETY: waitpid on one pid, with a valid status pointer.
                let r = unsafe {
                    let mut status = 0;
                    libc::waitpid(pid, &mut status, libc::WNOHANG)
                };
                if r != 0 || Instant::now() >= reap_end {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// The start time of process `pid` in clock ticks since boot (`/proc/PID/stat` field 22); 0
/// when unknown.
fn start_time(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| stat_fields(&s).and_then(|f| f.get(19)?.parse().ok()))
        .unwrap_or(0)
}

/// The fields of a `/proc/PID/stat` line after the parenthesised command name (state first).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.rsplit_once(')')?.1.split_whitespace().collect())
}

/// A process of /proc: its pid, parent, group, start time, and whether it is a server
/// supervisor.
struct ProcEntry {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    start: u64,
    is_supervisor: bool,
}

/// Every process /proc shows (empty where /proc is not).
fn proc_table() -> Vec<ProcEntry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let f = stat_fields(&stat)?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let is_supervisor = cmdline
            .split(|&b| b == 0)
            .any(|a| a == super::supervisor::ARG.as_bytes());
        Some(ProcEntry {
            pid,
            ppid: f.get(1)?.parse().ok()?,
            pgrp: f.get(2)?.parse().ok()?,
            start: f.get(19)?.parse().ok()?,
            is_supervisor,
        })
    })
    .collect()
}

/// Sends `sig` to the process group `pid`. False when no process of the group is left.
pub fn signal_group(pid: u32, sig: libc::c_int) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pgid <= 1 {
        return false; // never the whole session or init
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Stops the server: SIGTERM to its process group and every descendant outside it, then,
/// when the server has not exited within `stop_timeout`, SIGKILL to all of them; whatever the
/// server left behind is SIGKILLed either way ([`Proc::release`]). Returns how it ended, e.g.
/// `stopped by SIGTERM (exit code 0)` or `did not stop within stop_timeout 10s after SIGTERM:
/// SIGKILLed`.
pub async fn stop(p: &Proc, stop_timeout: Duration) -> String {
    if let Some(st) = p.exit_status() {
        p.release().await;
        return format!("had already exited ({})", st.describe());
    }
    p.terminate();
    let deadline = Instant::now() + stop_timeout;
    while Instant::now() < deadline {
        if let Some(st) = p.exit_status() {
            p.release().await;
            return format!("stopped by SIGTERM ({})", st.describe());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_group(p.pid, libc::SIGKILL);
    p.release().await;
    format!(
        "did not stop within stop_timeout {} after SIGTERM: SIGKILLed{}",
        humantime::format_duration(stop_timeout),
        p.exit_status()
            .map(|s| format!(" ({})", s.describe()))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supervisor_reports_parse() {
        assert!(matches!(
            parse_report("pid 4242\n"),
            Some(Report::Pid(4242))
        ));
        assert!(matches!(parse_report("error 2"), Some(Report::Error(2))));
        assert!(matches!(
            parse_report("exit 1792"),
            Some(Report::Exit(1792))
        ));
        assert!(parse_report("exit").is_none());
        assert!(parse_report("hello world").is_none());
    }
}
