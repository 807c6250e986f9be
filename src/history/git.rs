//! Running `git` for the history store: bounded in time and output, never prompting for
//! credentials, its messages stripped of credentials before anyone sees them. git runs in a
//! process group of its own, killed whole (its remote helpers, `git-remote-http` with the URL in
//! its arguments, and hooks with it) at the deadline and when perfgate is interrupted
//! ([`crate::cancel`]); after an interruption no git command starts.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Most bytes read from one git command's stdout (a history file is bounded well below).
pub const MAX_OUTPUT: usize = 64 << 20;

/// A git command that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// git could not be started (not installed, not on PATH).
    #[error("cannot run git ({0}); install git or put it on PATH")]
    Spawn(String),
    /// It did not finish in time; it was killed.
    #[error("`git {args}` did not finish within {secs} s and was stopped")]
    Timeout { args: String, secs: u64 },
    /// perfgate was interrupted (Ctrl-C, SIGTERM): it was stopped, or not started.
    #[error("`git {args}` was stopped: perfgate was interrupted")]
    Interrupted { args: String },
    /// It exited non-zero: its stderr (credentials redacted, clipped).
    #[error("`git {args}` failed: {stderr}")]
    Failed { args: String, stderr: String },
}

impl GitError {
    /// The command's stderr, when it ran and failed.
    pub fn stderr(&self) -> &str {
        match self {
            GitError::Failed { stderr, .. } => stderr,
            _ => "",
        }
    }
}

/// Runs `git -C repo args...` with `stdin` (if any) and extra environment, and returns its
/// stdout. Its process group is killed at `timeout` and when perfgate is interrupted; once
/// interrupted, nothing is started.
pub fn run(
    repo: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<Vec<u8>, GitError> {
    let shown = shown_args(args);
    if crate::cancel::requested() {
        return Err(GitError::Interrupted { args: shown });
    }
    let mut cmd = Command::new("git");
    // its own group: killed whole, and out of the terminal's, so Ctrl-C reaches perfgate only
    cmd.process_group(0)
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        .env("GIT_ASKPASS", "")
        .env("SSH_ASKPASS", "")
        .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| GitError::Spawn(e.to_string()))?;
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let out = child.stdout.take().map(|p| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = p.take(MAX_OUTPUT as u64).read_to_end(&mut buf);
            buf
        })
    });
    let err = child.stderr.take().map(|p| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = p.take(64 << 10).read_to_end(&mut buf);
            buf
        })
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        let stopped = match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if crate::cancel::requested() => GitError::Interrupted { args: shown },
            Ok(None) if Instant::now() >= deadline => GitError::Timeout {
                args: shown,
                secs: timeout.as_secs(),
            },
            Ok(None) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => GitError::Spawn(e.to_string()),
        };
        // the whole group: git's helpers and hooks too (an orphaned push would publish later)
        crate::server::process::signal_group(child.id(), libc::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
        return Err(stopped);
    };
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        // `push --porcelain` says why each ref was refused on stdout (`!<TAB>ref<TAB>[rejected]
        // (non-fast-forward)`, `[remote rejected] (pre-receive hook declined)`): kept with
        // stderr, so a refusal for good is told from a lost race and shown.
        let refused: String = String::from_utf8_lossy(&stdout)
            .lines()
            .filter(|l| l.starts_with('!'))
            .take(8)
            .map(|l| format!("\n{}", l.replace('\t', " ")))
            .collect();
        let text = format!("{}{refused}", String::from_utf8_lossy(&stderr).trim());
        let text: String = redact_credentials(text.trim()).chars().take(900).collect();
        Err(GitError::Failed {
            args: shown,
            stderr: if text.is_empty() {
                format!("exit {status}")
            } else {
                text
            },
        })
    }
}

/// The arguments as shown in a message: credentials in URLs redacted.
fn shown_args(args: &[&str]) -> String {
    redact_credentials(&args.join(" "))
}

/// `scheme://user:secret@host` -> `scheme://<redacted>@host`, anywhere in `text`, and the values
/// of the token variables perfgate knows.
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '/' || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("<redacted>");
                out.push_str(&tail[at..end]);
            }
            None => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    let secrets: Vec<String> = ["GITHUB_TOKEN", "GH_TOKEN", "PERFGATE_GITHUB_TOKEN"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .filter(|v| !v.is_empty())
        .collect();
    crate::redact::redact(&out, &secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact_credentials(
                "fatal: unable to access 'https://x-access-token:ghs_abc@github.com/o/r.git/': 403"
            ),
            "fatal: unable to access 'https://<redacted>@github.com/o/r.git/': 403"
        );
        assert_eq!(
            redact_credentials("push to https://github.com/o/r and ssh://git@host/x"),
            "push to https://github.com/o/r and ssh://<redacted>@host/x"
        );
    }

    /// Whether process `pid` still runs (a zombie, killed and waiting to be reaped, does not).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s.get(s.rfind(')')? + 2..)?.starts_with(|c| c != 'Z')))
            .unwrap_or(false)
    }

    /// Issue 41 finding 8: at the deadline only git itself was killed: what it had started (a
    /// remote helper, with the remote's URL and credentials in its arguments; a hook) ran on
    /// after perfgate. Here git runs an alias that starts a process (`sleep`) and waits for it.
    #[test]
    fn the_deadline_stops_git_and_every_process_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let alias = format!(
            "alias.hang=!echo $$ > '{}'; exec sleep 30",
            pid_file.display()
        );
        let started = Instant::now();
        let e = run(
            dir.path(),
            &["-c", &alias, "hang"],
            None,
            &[],
            Duration::from_secs(2),
        )
        .unwrap_err();
        assert!(matches!(&e, GitError::Timeout { secs: 2, .. }), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .expect("the alias started")
            .trim()
            .parse()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(2);
        while running(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = running(pid);
        if left {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert!(!left, "git's child {pid} outlived the deadline");
    }

    #[test]
    fn a_failing_command_says_what_failed() {
        let dir = std::env::temp_dir();
        let e = run(
            &dir,
            &["definitely-not-a-git-command"],
            None,
            &[],
            Duration::from_secs(20),
        )
        .unwrap_err();
        assert!(
            matches!(&e, GitError::Failed { args, .. } if args == "definitely-not-a-git-command"),
            "{e}"
        );
    }
}
