//! The history's home: a dedicated branch of the repository itself (docs/history.md "Where it
//! lives"), one file per scenario (`<scenario>.jsonl`, one entry per night). Read with `git fetch`
//! and `git cat-file`; appended with git plumbing (a temporary index, `commit-tree`, `push`), so
//! the work tree, the index and HEAD of the checkout are never touched; nor is a branch that is
//! not perfgate's ([`NotHistory`]). Concurrent appends both land: a push rejected as
//! non-fast-forward fetches again and rebuilds the commit on the new tip, a bounded number of
//! times.

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
    #[error("history branch `{branch}` is not a perfgate history: {why}; perfgate writes its history only to a branch of its own, which it creates on the first night (your branches and the checkout are never touched): name another with --history (the default is `{}`)", super::DEFAULT_BRANCH)]
    NotHistory {
        branch: String,
        #[source]
        why: NotHistory,
    },
    #[error("cannot read the history branch: {0}")]
    Read(#[source] GitError),
    #[error("cannot write the history commit: {0}")]
    Write(#[source] GitError),
    #[error("cannot push the history branch `{branch}` to {remote}: {source}; check that this job may push that branch (GitHub Actions: `permissions: contents: write`, and no branch protection on `{branch}`); the night is in the results file: append it later with `perfgate history append --results FILE`")]
    Push {
        branch: String,
        remote: String,
        #[source]
        source: GitError,
    },
    #[error("interrupted: git was stopped, so the history branch `{branch}` is read or appended to no further (an append is all or nothing: the branch holds the whole night or none of it; `perfgate history append --results FILE` appends a night that is missing, and only once)")]
    Interrupted { branch: String },
    #[error("the history branch `{branch}` moved under every one of {MAX_ATTEMPTS} attempts to append (other jobs appending at once); the night is in the results file: append it later with `perfgate history append --results FILE`")]
    Contended { branch: String },
}

/// Why a branch is not perfgate's history, so that perfgate neither reads nor writes it as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHistory {
    /// Checked out in a work tree: moving it would leave that checkout's index and files stale.
    #[error("it is checked out in {}", .0.display())]
    CheckedOut(PathBuf),
    /// The branch a clone checks out (the remote's `HEAD`).
    #[error("it is the default branch of {0}")]
    RemoteDefault(String),
    /// Its tree holds something else than `<scenario>.jsonl` files at the top.
    #[error("it holds `{name}`, {kind} (perfgate's branch holds only `<scenario>.jsonl` files)")]
    ForeignFile { name: String, kind: &'static str },
    /// Its first commit does not say `perfgate history: ...`.
    #[error("its first commit {commit} (`{subject}`) was not written by perfgate (whose commits say `{SUBJECT}...`)")]
    ForeignRoot { commit: String, subject: String },
}

/// How every history commit's message begins (perfgate's first commit of a branch is told by it).
pub const SUBJECT: &str = "perfgate history: ";

impl From<HistoryError> for crate::exit::Error {
    /// An interruption is the command's (exit 130); everything else the history's (exit 2).
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::Interrupted { .. } => crate::exit::Error::Interrupted(e.into()),
            e => crate::exit::Error::History(e.into()),
        }
    }
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
        local(&self.repo, &["rev-parse", "--git-dir"]).map_err(|source| {
            HistoryError::NotARepo {
                repo: self.repo.clone(),
                source,
            }
        })?;
        self.refuse_named()?;
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
                    let _ = local(&self.repo, &["update-ref", "-d", &tip]);
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
        let commit = rev(&self.repo, &tip).map_err(HistoryError::Read)?;
        if let Some(c) = &commit {
            self.refuse_content(c)?;
        }
        Ok(commit)
    }

    fn not_history(&self, why: NotHistory) -> HistoryError {
        HistoryError::NotHistory {
            branch: self.branch.clone(),
            why,
        }
    }

    /// Refuses, by its name, a branch that is someone else's: checked out in a work tree of the
    /// repository, or the remote's default branch.
    fn refuse_named(&self) -> Result<(), HistoryError> {
        let list =
            local(&self.repo, &["worktree", "list", "--porcelain"]).map_err(HistoryError::Read)?;
        if let Some(dir) = checked_out_in(&String::from_utf8_lossy(&list), &self.branch) {
            return Err(self.not_history(NotHistory::CheckedOut(dir)));
        }
        if let Remote::Push(remote) = &self.remote {
            let head = run(
                &self.repo,
                &["ls-remote", "--symref", remote, "HEAD"],
                None,
                &[],
                NETWORK_TIMEOUT,
            )
            .map_err(|source| HistoryError::Fetch {
                branch: self.branch.clone(),
                remote: self.remote_label(),
                source,
            })?;
            let named = match default_branch(&String::from_utf8_lossy(&head)) {
                Some(b) => Some(b.to_string()),
                // a HEAD naming a branch that does not exist is not listed
                None => self.unborn_head(remote),
            };
            if named.as_deref() == Some(self.branch.as_str()) {
                return Err(self.not_history(NotHistory::RemoteDefault(self.remote_label())));
            }
        }
        Ok(())
    }

    /// The branch the HEAD of `remote` names when that remote is a repository on this machine
    /// (`git init --bare` names `master` or `init.defaultBranch` before anything is pushed
    /// there): the branch its clones would check out once it exists. `None` for other remotes.
    fn unborn_head(&self, remote: &str) -> Option<String> {
        let git = |args: &[&str]| local(&self.repo, args).ok();
        let url = git(&["remote", "get-url", remote])
            .map(|u| String::from_utf8_lossy(&u).trim().to_string())
            .unwrap_or_else(|| remote.to_string());
        // a path is relative to the repository, as git reads it
        let dir = self.repo.join(url.strip_prefix("file://").unwrap_or(&url));
        let dir = dir.canonicalize().ok().filter(|d| d.is_dir())?;
        let dir = dir.to_str()?;
        let head = git(&["--git-dir", dir, "symbolic-ref", "-q", "HEAD"])?;
        let head = String::from_utf8_lossy(&head);
        head.trim().strip_prefix("refs/heads/").map(str::to_string)
    }

    /// Refuses, by what it holds at `tip`, a branch that is not perfgate's history: a file that
    /// is not a history file, a first commit perfgate did not write.
    fn refuse_content(&self, tip: &str) -> Result<(), HistoryError> {
        let git = |args: &[&str]| local(&self.repo, args).map_err(HistoryError::Read);
        let tree = git(&["ls-tree", "-z", tip])?;
        if let Some((name, kind)) = foreign_entry(&String::from_utf8_lossy(&tree)) {
            return Err(self.not_history(NotHistory::ForeignFile { name, kind }));
        }
        let roots = git(&["log", "-z", "--max-parents=0", "--format=%H %s", tip])?;
        if let Some((commit, subject)) = foreign_root(&String::from_utf8_lossy(&roots)) {
            return Err(self.not_history(NotHistory::ForeignRoot { commit, subject }));
        }
        Ok(())
    }

    /// The scenario's file at `commit`, parsed (empty when the file does not exist).
    fn file_at(&self, commit: &str, name: &ScenarioName) -> Result<Vec<Entry>, HistoryError> {
        let path = file_name(name);
        let spec = format!("{commit}:{path}");
        // `<type> <size>`, or `<spec> missing` (no such file yet)
        let input = format!("{spec}\n");
        let found = match run(
            &self.repo,
            &["cat-file", "--batch-check=%(objecttype) %(objectsize)"],
            Some(input.as_bytes()),
            &[],
            LOCAL_TIMEOUT,
        ) {
            Ok(s) => String::from_utf8_lossy(&s).trim().to_string(),
            Err(GitError::Failed { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(HistoryError::Read(e)),
        };
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
        let bytes = local(&self.repo, &["cat-file", "blob", &spec]).map_err(HistoryError::Write)?;
        let text = String::from_utf8_lossy(&bytes);
        parse(&path, name, &text).map_err(|source| HistoryError::Entry {
            branch: self.branch.clone(),
            source,
        })
    }

    /// Reads the series of `names` (fetching the branch first when it has a remote).
    pub fn read(&self, names: &[ScenarioName]) -> Result<Loaded, HistoryError> {
        self.read_series(names).map_err(|e| self.interrupted(e))
    }

    /// An error that a stopped git command caused, as [`HistoryError::Interrupted`].
    fn interrupted(&self, e: HistoryError) -> HistoryError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if let Some(GitError::Interrupted { .. }) = c.downcast_ref::<GitError>() {
                return HistoryError::Interrupted {
                    branch: self.branch.clone(),
                };
            }
            cause = c.source();
        }
        e
    }

    fn read_series(&self, names: &[ScenarioName]) -> Result<Loaded, HistoryError> {
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
    /// Interrupted, it stops (a push under way is killed: the branch moves to the whole new
    /// commit or not at all).
    pub fn append(&self, entries: &[Entry]) -> Result<Appended, HistoryError> {
        self.append_once(entries).map_err(|e| self.interrupted(e))
    }

    fn append_once(&self, entries: &[Entry]) -> Result<Appended, HistoryError> {
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
                let _ = local(&self.repo, &["update-ref", &self.tip_ref(), commit]);
                Ok(())
            }
            Remote::LocalOnly => {
                let zero = "0".repeat(40);
                let old = parent.unwrap_or(&zero);
                local(&self.repo, &["update-ref", &self.tip_ref(), commit, old])?;
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

/// The work tree `git worktree list --porcelain` says has `branch` checked out.
fn checked_out_in(list: &str, branch: &str) -> Option<PathBuf> {
    let me = format!("branch refs/heads/{branch}");
    let mut dir = None;
    for line in list.lines() {
        if let Some(d) = line.strip_prefix("worktree ") {
            dir = Some(PathBuf::from(d));
        } else if line == me {
            return dir;
        }
    }
    None
}

/// The remote's default branch, from `git ls-remote --symref REMOTE HEAD`
/// (`ref: refs/heads/main<TAB>HEAD`).
fn default_branch(ls_remote: &str) -> Option<&str> {
    ls_remote
        .lines()
        .find_map(|l| l.strip_prefix("ref: refs/heads/")?.strip_suffix("\tHEAD"))
}

/// The first entry of `git ls-tree -z` that is not a history file (a `<scenario>.jsonl` blob),
/// as it is named on the branch, and what it is instead.
fn foreign_entry(ls_tree: &str) -> Option<(String, &'static str)> {
    ls_tree.split('\0').filter(|e| !e.is_empty()).find_map(|e| {
        let (meta, name) = e.split_once('\t').unwrap_or((e, e));
        let named = name
            .strip_suffix(".jsonl")
            .is_some_and(|n| crate::config::ScenarioName::new(n).is_ok());
        let kind = match meta.split(' ').nth(1) {
            Some("blob") if named && meta.starts_with("100644 ") => return None,
            Some("tree") => "a directory, not a history file",
            Some("commit") => "a submodule, not a history file",
            _ => "which is not a history file",
        };
        Some((shown(name), kind))
    })
}

/// The first root commit of `git log -z --max-parents=0 --format='%H %s'` whose subject is not
/// perfgate's: its short id and subject.
fn foreign_root(log: &str) -> Option<(String, String)> {
    log.split('\0').filter(|e| !e.is_empty()).find_map(|e| {
        let (id, subject) = e.split_once(' ').unwrap_or((e, ""));
        (!subject.starts_with(SUBJECT)).then(|| (id.chars().take(12).collect(), shown(subject)))
    })
}

/// Text of the branch shown in a message: no control characters, at most 72 characters.
fn shown(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(72).collect()
}

/// `git <args>` in `repo` with no input, within [`LOCAL_TIMEOUT`].
fn local(repo: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    run(repo, args, None, &[], LOCAL_TIMEOUT)
}

/// The commit id `r` points at, if it exists (an error: git did not answer).
fn rev(repo: &Path, r: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{r}^{{commit}}");
    match local(repo, &["rev-parse", "--verify", "--quiet", &spec]) {
        Ok(s) => Ok(Some(String::from_utf8_lossy(&s).trim().to_string()).filter(|s| !s.is_empty())),
        Err(GitError::Failed { .. }) => Ok(None),
        Err(e) => Err(e),
    }
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
        "{SUBJECT}{} at {commit}\n\n{} scenario(s): {}",
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

    #[test]
    fn a_branch_checked_out_anywhere_is_found() {
        let list = "worktree /r\nHEAD 1111\nbranch refs/heads/main\n\nworktree /r/wt\nHEAD 2222\nbranch refs/heads/perf/x\n\nworktree /r/d\nHEAD 3333\ndetached\n";
        assert_eq!(checked_out_in(list, "main"), Some(PathBuf::from("/r")));
        assert_eq!(checked_out_in(list, "perf/x"), Some(PathBuf::from("/r/wt")));
        assert_eq!(checked_out_in(list, "perf"), None);
        assert_eq!(checked_out_in(list, "perfgate-history"), None);
    }

    #[test]
    fn the_remotes_default_branch_is_read_from_ls_remote() {
        assert_eq!(
            default_branch("ref: refs/heads/trunk\tHEAD\n0123abcd\tHEAD\n"),
            Some("trunk")
        );
        assert_eq!(default_branch("0123abcd\tHEAD\n"), None);
        assert_eq!(default_branch(""), None);
    }

    #[test]
    fn only_scenario_files_are_history_files() {
        let ok = "100644 blob aa\tchat.jsonl\x00100644 blob bb\tlong_v1.2.jsonl\0";
        assert_eq!(foreign_entry(ok), None);
        for (tree, named) in [
            (
                "100644 blob aa\tchat.jsonl\x00100644 blob bb\tREADME.md\0",
                "README.md",
            ),
            ("040000 tree aa\tsrc\0", "src"),
            ("040000 tree aa\tchat.jsonl\0", "chat.jsonl"),
            ("160000 commit aa\tchat.jsonl\0", "chat.jsonl"),
            ("100755 blob aa\trun.jsonl\0", "run.jsonl"),
            ("120000 blob aa\tlink.jsonl\0", "link.jsonl"),
            ("100644 blob aa\t.hidden.jsonl\0", ".hidden.jsonl"),
            ("100644 blob aa\ta\u{1b}[31m.txt\0", "a[31m.txt"),
        ] {
            assert_eq!(
                foreign_entry(tree).map(|e| e.0).as_deref(),
                Some(named),
                "{tree:?}"
            );
        }
        let kind = |tree| foreign_entry(tree).map(|e| e.1);
        assert_eq!(
            kind("040000 tree aa\tchat.jsonl\0"),
            Some("a directory, not a history file")
        );
        assert_eq!(
            kind("160000 commit aa\tchat.jsonl\0"),
            Some("a submodule, not a history file")
        );
        assert_eq!(
            kind("100644 blob aa\tREADME.md\0"),
            Some("which is not a history file")
        );
    }

    #[test]
    fn a_first_commit_is_perfgates_by_its_subject() {
        let c = "0123456789abcdef0123456789abcdef01234567";
        let ours = format!("{c} perfgate history: 2026-11-30T03:17:09Z at 6f7a8b9c0d12\0");
        assert_eq!(foreign_root(&ours), None);
        let theirs = format!("{c} Initial commit\0");
        assert_eq!(
            foreign_root(&theirs),
            Some(("0123456789ab".to_string(), "Initial commit".to_string()))
        );
        // two roots (a history merged into another): each must be perfgate's
        assert!(foreign_root(&format!("{ours}{theirs}")).is_some());
        // what perfgate writes is what it recognises
        let subject = message(&[]);
        let subject = subject.lines().next().unwrap();
        assert_eq!(foreign_root(&format!("{c} {subject}\0")), None);
    }
}
