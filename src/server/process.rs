//! The server process: spawned in a process group of its own (so SIGTERM and SIGKILL reach
//! everything it started), with its stdout and stderr in a log file, and on Linux with
//! `PR_SET_PDEATHSIG = SIGKILL` so it dies with perfgate even when perfgate is SIGKILLed.
//!
//! The parent-death signal fires when the *thread* that forked the child ends, not the
//! process: every server is therefore forked by one spawner thread that lives as long as
//! perfgate ([`spawner`]). A waiter thread per server reaps it and publishes its exit status.
//!
//! The one module allowed `unsafe` (the crate denies it): `prctl` in the forked child and
//! `kill` on a process group, each with its SAFETY note.
#![allow(unsafe_code)]

use crate::config::server::ServerSpec;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

/// The long-lived thread that forks every server (see the module doc).
fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static TX: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let _ = std::thread::Builder::new()
            .name("perfgate-server-spawner".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        Mutex::new(tx)
    })
}

/// A started server process (its process group has the same id as its pid).
#[derive(Debug)]
pub struct Proc {
    /// Process id, also the process group id.
    pub pid: u32,
    /// The log file (stdout and stderr).
    pub log: PathBuf,
    /// When it was spawned.
    pub started: Instant,
    exit: Arc<Mutex<Option<ExitStatus>>>,
}

impl Proc {
    /// The exit status, once the process has ended (reaped by its waiter thread).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit.lock().ok().and_then(|e| *e)
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

/// The log file a server writes to: the spec's, or a new one in the temp directory.
fn log_path(spec: &ServerSpec, n: usize) -> PathBuf {
    spec.log.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "perfgate-server-{}-{n}-{}.log",
            std::process::id(),
            &spec.key
        ))
    })
}

/// Why the server's process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The directory of the log file cannot be created.
    #[error("cannot create the log directory {}: {source}", dir.display())]
    LogDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log file cannot be created.
    #[error("cannot create the server log {}: {source}", log.display())]
    LogCreate {
        log: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log file cannot be opened a second time (for stderr).
    #[error("cannot open the server log {}: {source}", log.display())]
    LogOpen {
        log: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The spawner thread's lock is poisoned.
    #[error("the server spawner is unusable")]
    SpawnerUnusable,
    /// The spawner thread has ended.
    #[error("the server spawner thread is gone")]
    SpawnerGone,
    /// The program cannot be started (`command`: the redacted command line).
    #[error("cannot start the server `{command}`: {source}{}", if source.kind() == std::io::ErrorKind::NotFound { " (is the program on PATH, or give its full path in server.command[0])" } else { "" })]
    Program {
        command: String,
        #[source]
        source: std::io::Error,
    },
    /// The thread that reaps the server cannot start (the server was killed).
    #[error("cannot start a thread to watch the server")]
    Watcher,
}

/// Starts the server of `spec` (the `n`-th start of this perfgate, for the log name).
///
/// Errors: the log file cannot be created, or the program cannot be started (not found, not
/// executable), with the redacted command line.
pub fn spawn(spec: &ServerSpec, n: usize) -> Result<Proc, SpawnError> {
    let log = log_path(spec, n);
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SpawnError::LogDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    let file = std::fs::File::create(&log).map_err(|source| SpawnError::LogCreate {
        log: log.clone(),
        source,
    })?;
    let err_file = file.try_clone().map_err(|source| SpawnError::LogOpen {
        log: log.clone(),
        source,
    })?;
    let mut cmd = Command::new(&spec.command[0]);
    cmd.args(&spec.command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err_file));
    for (k, v) in &spec.env {
        cmd.env(k, v.expose());
    }
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: only async-signal-safe calls (getpid before the fork; prctl, getppid
            // after it) and no allocation in the child.
            let parent = std::process::id() as libc::pid_t;
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // perfgate died between the fork and the prctl: do not outlive it.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
    }
    let (tx, rx) = mpsc::channel::<std::io::Result<Child>>();
    let job: Job = Box::new(move || {
        let _ = tx.send(cmd.spawn());
    });
    spawner()
        .lock()
        .map_err(|_| SpawnError::SpawnerUnusable)?
        .send(job)
        .map_err(|_| SpawnError::SpawnerGone)?;
    let started = Instant::now();
    let mut child = rx
        .recv()
        .map_err(|_| SpawnError::SpawnerGone)?
        .map_err(|source| SpawnError::Program {
            command: spec.shown_command.clone(),
            source,
        })?;
    let pid = child.id();
    let exit = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&exit);
    let waiter = std::thread::Builder::new()
        .name(format!("perfgate-server-wait-{pid}"))
        .spawn(move || {
            if let Ok(st) = child.wait() {
                if let Ok(mut e) = slot.lock() {
                    *e = Some(st);
                }
            }
        });
    if waiter.is_err() {
        signal_group(pid, libc::SIGKILL);
        return Err(SpawnError::Watcher);
    }
    Ok(Proc {
        pid,
        log,
        started,
        exit,
    })
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

/// True while some process of group `pid` exists.
pub fn group_alive(pid: u32) -> bool {
    signal_group(pid, 0)
}

/// Stops the server: SIGTERM to its process group, then SIGKILL to the group after
/// `stop_timeout` if the leader has not exited (or other members are left). Waits for the
/// leader to be reaped (at most 5 s after the SIGKILL). Returns how it ended, e.g. `exited
/// after SIGTERM (exit code 0)` or `did not stop within stop_timeout 10s: SIGKILLed`.
pub async fn stop(p: &Proc, stop_timeout: Duration) -> String {
    if let Some(st) = p.exit_status() {
        // Already gone; clear any process it left in its group.
        if group_alive(p.pid) {
            signal_group(p.pid, libc::SIGKILL);
        }
        return format!("had already exited ({})", describe(st));
    }
    signal_group(p.pid, libc::SIGTERM);
    let deadline = Instant::now() + stop_timeout;
    while Instant::now() < deadline {
        if let Some(st) = p.exit_status() {
            if group_alive(p.pid) {
                signal_group(p.pid, libc::SIGKILL);
            }
            return format!("stopped by SIGTERM ({})", describe(st));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_group(p.pid, libc::SIGKILL);
    let hard = Instant::now() + Duration::from_secs(5);
    while p.exit_status().is_none() && Instant::now() < hard {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    format!(
        "did not stop within stop_timeout {} after SIGTERM: SIGKILLed{}",
        humantime::format_duration(stop_timeout),
        p.exit_status()
            .map(|s| format!(" ({})", describe(s)))
            .unwrap_or_default()
    )
}

/// The last `n` lines of the log (at most the last 256 KiB read), each clipped to 400
/// characters, control characters escaped ([`printable`]), secrets redacted.
pub fn log_tail(log: &Path, n: usize, secrets: &[String]) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(256 * 1024);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(n);
    lines[skip..]
        .iter()
        .map(|l| {
            let l: String = printable(l).chars().take(400).collect();
            crate::redact::redact(&l, secrets)
        })
        .collect()
}

/// `s` with control characters (ANSI escapes, carriage returns) shown escaped, so a server's
/// log cannot rewrite terminal or CI log lines.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Reads the log from byte `from` on; returns whether a line holds `text` and the offset to
/// continue from (the start of the last, possibly unfinished, line).
pub fn log_has(log: &Path, text: &str, from: u64) -> (bool, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return (false, from);
    };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return (false, from);
    }
    let found = String::from_utf8_lossy(&buf).contains(text);
    let keep = buf
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    (found, from + keep as u64)
}
