//! The history's home: a dedicated branch of the repository itself (docs/history.md "Where it
//! lives"), one file per scenario (`<scenario>.jsonl`, one entry per night). Read with `git fetch`
//! and `git cat-file`; appended with git plumbing (a temporary index, `commit-tree`, `push`), so
//! the work tree, the index and HEAD of the checkout are never touched. Concurrent appends both
//! land: a push rejected as non-fast-forward fetches again and rebuilds the commit on the new
//! tip, a bounded number of times.

use super::entry::{already_in, parse, render, Entry, EntryError};
use super::git::{run, GitError};
use crate::config::ScenarioName;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Entries kept per scenario (the retention rule): the oldest go when a night is appended.
/// 400 nights is over a year of nightly runs: enough for the change-point rule's windows and for
/// a reader's look back; at ~1.5 KB an entry a file stays under 1 MB.
pub const KEEP_NIGHTS: usize = 400;

/// Largest history file read, bytes (a hand-made giant is refused, not loaded).
pub const MAX_FILE_BYTES: usize = 8 << 20;

/// Append attempts before giving up (each one after a rejected push).
pub const MAX_ATTEMPTS: u32 = 8;

/// Network operations (fetch, push) must end within this.
const NETWORK_TIMEOUT: Duration = Duration::from_secs(120);
/// Local plumbing must end within this.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the history branch is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// A remote name (`origin`) or URL: fetched before reading, pushed to after appending.
    Push(String),
    /// Only the local branch (trying it out; a CI job's checkout would lose it).
    LocalOnly,
}

/// The history store of one repository and branch.
#[derive(Debug, Clone)]
pub struct Store {
    /// The git repository (any directory inside a checkout).
    pub repo: PathBuf,
    /// The history branch, e.g. `perfgate-history`.
    pub branch: String,
    pub remote: Remote,
}

/// Why the history could not be read or appended to: what, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("history branch `{0}` is not a usable branch name: use letters, digits, `.`, `_`, `-` and `/`")]
    BadBranch(String),
    #[error("{} is not inside a git repository ({source}); run perfgate from the checkout or pass --history-repo", .repo.display())]
    NotARepo {
        repo: PathBuf,
        #[source]
        source: GitError,
    },
    #[error("cannot fetch the history branch `{branch}` from {remote}: {source}")]
    Fetch {
        branch: String,
        remote: String,
        #[source]
        source: GitError,
    },
    #[error("history file {file} on branch `{branch}` is {bytes} bytes, over the {MAX_FILE_BYTES}-byte limit: it was not written by perfgate (which keeps {KEEP_NIGHTS} nights); trim it on the branch")]
    TooLarge {
        branch: String,
        file: String,
        bytes: usize,
    },
    #[error("history file {file} on branch `{branch}` is {kind}, not a file: move it away on the branch")]
    NotAFile {
        branch: String,
        file: String,
        /// `a directory`, `a submodule`.
        kind: &'static str,
    },
    #[error("history branch `{branch}`: {source}")]
    Entry {
        branch: String,
        #[source]
        source: EntryError,
    },
    #[error("cannot write the history commit: {0}")]
    Write(#[source] GitError),
    #[error("cannot push the history branch `{branch}` to {remote}: {source}; check that this job may push that branch (GitHub Actions: `permissions: contents: write`, and no branch protection on `{branch}`); the night is in the results file: append it later with `perfgate history append --results FILE`")]
    Push {
        branch: String,
        remote: String,
        #[source]
        source: GitError,
    },
    #[error("the history branch `{branch}` moved under every one of {MAX_ATTEMPTS} attempts to append (other jobs appending at once); the night is in the results file: append it later with `perfgate history append --results FILE`")]
    Contended { branch: String },
}

/// A scenario's entries as read, oldest first, with the branch commit they were read at.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The history branch's commit (`None`: no history yet).
    pub commit: Option<String>,
    pub series: BTreeMap<ScenarioName, Vec<Entry>>,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The new commit on the history branch.
    pub commit: String,
    /// Attempts it took (1 without contention).
    pub attempts: u32,
    /// Every night was already in the history (a repeated append): nothing was written.
    pub already: bool,
}

/// Checks a branch name: `[A-Za-z0-9._/-]`, 1..=100 characters, no `..`, `//`, `@{`, no
/// leading `-` or `/`, no trailing `/`, `.lock` or `.`.
pub fn check_branch(b: &str) -> Result<(), HistoryError> {
    let ok = !b.is_empty()
        && b.len() <= 100
        && b.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        && !b.contains("..")
        && !b.contains("//")
        && !b.starts_with(['-', '/', '.'])
        && !b.ends_with(['/', '.'])
        && !b.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(HistoryError::BadBranch(b.to_string()))
    }
}

impl Store {
    /// A store; the branch name is checked.
    pub fn new(repo: &Path, branch: &str, remote: Remote) -> Result<Store, HistoryError> {
        check_branch(branch)?;
        Ok(Store {
            repo: repo.to_path_buf(),
            branch: branch.to_string(),
            remote,
        })
    }

    /// Where the branch is read from: the fetched copy of the remote's, or the local branch.
    fn tip_ref(&self) -> String {
        match self.remote {
            Remote::Push(_) => format!("refs/perfgate/history/{}", self.branch),
            Remote::LocalOnly => format!("refs/heads/{}", self.branch),
        }
    }

    fn remote_label(&self) -> String {
        match &self.remote {
            Remote::Push(r) => super::git::redact_credentials(r),
            Remote::LocalOnly => "(local)".into(),
        }
    }

    /// The branch's tip after fetching it (`None`: the branch does not exist yet).
    fn fetch_tip(&self) -> Result<Option<String>, HistoryError> {
        // inside a repository at all?
        run(
            &self.repo,
            &["rev-parse", "--git-dir"],
            None,
            &[],
            LOCAL_TIMEOUT,
        )
        .map_err(|source| HistoryError::NotARepo {
            repo: self.repo.clone(),
            source,
        })?;
        let tip = self.tip_ref();
        if let Remote::Push(remote) = &self.remote {
            let spec = format!("+refs/heads/{}:{tip}", self.branch);
            // `--refmap=`: no opportunistic update of refs/remotes/<remote>/<branch>, which jobs
            // fetching at once raced for ("cannot lock ref ... but expected"); a race for our own
            // ref is retried (a few times, briefly: the other fetch wrote the same thing).
            let fetch = || {
                run(
                    &self.repo,
                    &[
                        "fetch",
                        "--quiet",
                        "--no-tags",
                        "--no-write-fetch-head",
                        "--refmap=",
                        remote,
                        &spec,
                    ],
                    None,
                    &[],
                    NETWORK_TIMEOUT,
                )
            };
            let mut got = fetch();
            for _ in 0..4 {
                match &got {
                    Err(e) if lost_race(e) => {
                        std::thread::sleep(Duration::from_millis(50 + noise() % 200));
                        got = fetch();
                    }
                    _ => break,
                }
            }
            match got {
                Ok(_) => {}
                Err(e) if e.stderr().contains("couldn't find remote ref") => {
                    // no history yet: forget a stale copy
                    let _ = run(
                        &self.repo,
                        &["update-ref", "-d", &tip],
                        None,
                        &[],
                        LOCAL_TIMEOUT,
                    );
                    return Ok(None);
                }
                Err(source) => {
                    return Err(HistoryError::Fetch {
                        branch: self.branch.clone(),
                        remote: self.remote_label(),
                        source,
                    })
                }
            }
        }
        Ok(rev(&self.repo, &tip))
    }

    /// The scenario's file at `commit`, parsed (empty when the file does not exist).
    fn file_at(&self, commit: &str, name: &ScenarioName) -> Result<Vec<Entry>, HistoryError> {
        let path = file_name(name);
        let spec = format!("{commit}:{path}");
        // `<type> <size>`, or `<spec> missing` (no such file yet)
        let input = format!("{spec}\n");
        let found = run(
            &self.repo,
            &["cat-file", "--batch-check=%(objecttype) %(objectsize)"],
            Some(input.as_bytes()),
            &[],
            LOCAL_TIMEOUT,
        )
        .map(|s| String::from_utf8_lossy(&s).trim().to_string())
        .unwrap_or_default();
        let size = match found.split_once(' ') {
            Some(("blob", size)) => size.parse::<usize>().unwrap_or(0),
            Some((kind @ ("tree" | "commit"), _)) => {
                return Err(HistoryError::NotAFile {
                    branch: self.branch.clone(),
                    file: path,
                    kind: if kind == "tree" {
                        "a directory"
                    } else {
                        "a submodule"
                    },
                })
            }
            _ => return Ok(Vec::new()),
        };
        if size > MAX_FILE_BYTES {
            return Err(HistoryError::TooLarge {
                branch: self.branch.clone(),
                file: path,
                bytes: size,
            });
        }
        let bytes = run(
            &self.repo,
            &["cat-file", "blob", &spec],
            None,
            &[],
            LOCAL_TIMEOUT,
        )
        .map_err(HistoryError::Write)?;
        let text = String::from_utf8_lossy(&bytes);
        parse(&path, name, &text).map_err(|source| HistoryError::Entry {
            branch: self.branch.clone(),
            source,
        })
    }

    /// Reads the series of `names` (fetching the branch first when it has a remote).
    pub fn read(&self, names: &[ScenarioName]) -> Result<Loaded, HistoryError> {
        let Some(commit) = self.fetch_tip()? else {
            return Ok(Loaded::default());
        };
        let mut series = BTreeMap::new();
        for n in names {
            series.insert(n.clone(), self.file_at(&commit, n)?);
        }
        Ok(Loaded {
            commit: Some(commit),
            series,
        })
    }

    /// Appends one entry per scenario in one commit on the branch, keeping the last
    /// [`KEEP_NIGHTS`] of each file; retried on a rejected push (another job appended first).
    pub fn append(&self, entries: &[Entry]) -> Result<Appended, HistoryError> {
        let mut delay = Duration::from_millis(150);
        for attempt in 1..=MAX_ATTEMPTS {
            let parent = self.fetch_tip()?;
            let Some(commit) = self.commit_on(parent.as_deref(), entries)? else {
                return Ok(Appended {
                    commit: parent.unwrap_or_default(),
                    attempts: attempt,
                    already: true,
                });
            };
            match self.publish(parent.as_deref(), &commit) {
                Ok(()) => {
                    return Ok(Appended {
                        commit,
                        attempts: attempt,
                        already: false,
                    })
                }
                Err(e) if lost_race(&e) => {
                    // jitter so that two jobs retrying together do not collide again
                    let jitter = Duration::from_millis(noise() % 150);
                    std::thread::sleep(delay + jitter);
                    delay = (delay * 2).min(Duration::from_secs(4));
                }
                Err(source) => {
                    return Err(match self.remote {
                        Remote::Push(_) => HistoryError::Push {
                            branch: self.branch.clone(),
                            remote: self.remote_label(),
                            source,
                        },
                        Remote::LocalOnly => HistoryError::Write(source),
                    })
                }
            }
        }
        Err(HistoryError::Contended {
            branch: self.branch.clone(),
        })
    }

    /// A commit whose tree is `parent`'s with each entry appended to its scenario's file;
    /// `None` when every entry is already there.
    fn commit_on(
        &self,
        parent: Option<&str>,
        entries: &[Entry],
    ) -> Result<Option<String>, HistoryError> {
        let dir = tempfile_dir().map_err(|e| HistoryError::Write(GitError::Spawn(e)))?;
        let index = dir.join("index");
        let index_s = index.to_string_lossy().to_string();
        let env = identity_env(&index_s);
        let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let git = |args: &[&str], stdin: Option<&[u8]>| {
            run(&self.repo, args, stdin, &envs, LOCAL_TIMEOUT).map_err(HistoryError::Write)
        };
        match parent {
            Some(p) => git(&["read-tree", p], None)?,
            None => git(&["read-tree", "--empty"], None)?,
        };
        let mut changed = 0;
        for e in entries {
            let old = match parent {
                Some(p) => self.file_at(p, &e.scenario)?,
                None => Vec::new(),
            };
            if already_in(&old, e) {
                continue;
            }
            changed += 1;
            let text = render(&old, e, KEEP_NIGHTS);
            let blob = git(&["hash-object", "-w", "--stdin"], Some(text.as_bytes()))?;
            let blob = String::from_utf8_lossy(&blob).trim().to_string();
            let info = format!("100644,{blob},{}", file_name(&e.scenario));
            git(&["update-index", "--add", "--cacheinfo", &info], None)?;
        }
        if changed == 0 {
            let _ = std::fs::remove_dir_all(&dir);
            return Ok(None);
        }
        let tree = git(&["write-tree"], None)?;
        let tree = String::from_utf8_lossy(&tree).trim().to_string();
        let msg = message(entries);
        let mut args = vec!["commit-tree", tree.as_str(), "-m", msg.as_str()];
        if let Some(p) = parent {
            args.extend(["-p", p]);
        }
        let commit = git(&args, None)?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(Some(String::from_utf8_lossy(&commit).trim().to_string()))
    }

    /// Moves the branch from `parent` to `commit`: a push (refused unless a fast-forward), or a
    /// compare-and-swap of the local ref.
    fn publish(&self, parent: Option<&str>, commit: &str) -> Result<(), GitError> {
        match &self.remote {
            Remote::Push(remote) => {
                let spec = format!("{commit}:refs/heads/{}", self.branch);
                run(
                    &self.repo,
                    &["push", "--quiet", "--porcelain", remote, &spec],
                    None,
                    &[],
                    NETWORK_TIMEOUT,
                )?;
                // keep the fetched copy current, so a read right after sees the night
                let _ = run(
                    &self.repo,
                    &["update-ref", &self.tip_ref(), commit],
                    None,
                    &[],
                    LOCAL_TIMEOUT,
                );
                Ok(())
            }
            Remote::LocalOnly => {
                let zero = "0".repeat(40);
                let old = parent.unwrap_or(&zero);
                run(
                    &self.repo,
                    &["update-ref", &self.tip_ref(), commit, old],
                    None,
                    &[],
                    LOCAL_TIMEOUT,
                )?;
                Ok(())
            }
        }
    }
}

/// `<scenario>.jsonl`.
pub fn file_name(name: &ScenarioName) -> String {
    format!("{name}.jsonl")
}

/// Whether a failed push or ref update lost a race with another append (retry) rather than
/// failed for good (credentials, a protected branch, no network).
///
/// A race is a non-fast-forward (`[rejected] (non-fast-forward)`, `(fetch first)`, `stale
/// info`) or a ref lock taken by the other writer. `[remote rejected]` for any other reason (a
/// hook declined, a protected branch, no permission) is for good: retrying would only hide
/// git's own words behind "the branch moved" (it did, before: every refusal was a race).
fn lost_race(e: &GitError) -> bool {
    let s = e.stderr();
    [
        "non-fast-forward",
        "fetch first",
        "[rejected]",
        "cannot lock ref",
        "failed to update ref",
        "incorrect old value",
        "stale info",
        "but expected",
        "failed to lock",
    ]
    .iter()
    .any(|p| s.contains(p))
}

/// The commit id `r` points at, if it exists.
fn rev(repo: &Path, r: &str) -> Option<String> {
    let spec = format!("{r}^{{commit}}");
    run(
        repo,
        &["rev-parse", "--verify", "--quiet", &spec],
        None,
        &[],
        LOCAL_TIMEOUT,
    )
    .ok()
    .map(|s| String::from_utf8_lossy(&s).trim().to_string())
    .filter(|s| !s.is_empty())
}

/// The history commit's message: the night and the commit under test.
fn message(entries: &[Entry]) -> String {
    let first = entries.first();
    let commit = first
        .and_then(|e| e.commit.as_deref())
        .map(|c| c.chars().take(12).collect::<String>())
        .unwrap_or_else(|| "unknown commit".into());
    let names: Vec<&str> = entries.iter().map(|e| e.scenario.as_str()).collect();
    format!(
        "perfgate history: {} at {commit}\n\n{} scenario(s): {}",
        first.map_or("", |e| e.time.as_str()),
        entries.len(),
        names.join(", ")
    )
}

/// The temporary index and the commit's author: perfgate, unless the environment names one.
fn identity_env(index: &str) -> Vec<(&'static str, String)> {
    let mut env = vec![("GIT_INDEX_FILE", index.to_string())];
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "perfgate"),
        ("GIT_AUTHOR_EMAIL", "perfgate@users.noreply.github.com"),
        ("GIT_COMMITTER_NAME", "perfgate"),
        ("GIT_COMMITTER_EMAIL", "perfgate@users.noreply.github.com"),
    ] {
        if std::env::var_os(k).is_none() {
            env.push((k, v.to_string()));
        }
    }
    env
}

/// A few bits that differ between processes and calls (retry jitter, temporary names).
fn noise() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11
}

/// A fresh private directory for the temporary index.
fn tempfile_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let p = base.join(format!(
            "perfgate-history-{}-{:016x}",
            std::process::id(),
            noise()
        ));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create a temporary directory: {e}")),
        }
    }
    Err("cannot create a temporary directory".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_checked() {
        for ok in ["perfgate-history", "perf/history", "h.1"] {
            assert!(check_branch(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "-x", "a..b", "a b", "x.lock", "/x", "x/", "a//b", "$(rm)",
        ] {
            assert!(check_branch(bad).is_err(), "{bad:?}");
        }
    }
}
