//! The server's log file: created, watched for the ready line, tailed on a failure, removed.
//!
//! Invariants:
//! - opening never blocks: `server.log` must be a regular file (a FIFO, device or directory is
//!   refused before and after the open, which is non-blocking);
//! - the default log (no `server.log`) is created `O_EXCL`, mode 0600, in a private directory
//!   (0700, random name) under the temp directory, one per perfgate process; it is removed after
//!   the server stopped cleanly and kept (and named) when the server failed;
//! - the file is read through one descriptor opened with it (`pread`), never reopened by path;
//! - following the log for the ready text holds at most one chunk and the text's length in
//!   memory, however long a line grows (a progress bar that only writes `\r`, no newline).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bytes read from the log per `pread` while following it.
const CHUNK: usize = 64 * 1024;
/// Most bytes one [`LogWatch::poll`] reads: a server writing faster than perfgate reads is
/// caught up over several polls, never in one unbounded read.
const POLL_BYTES: u64 = 16 * 1024 * 1024;
/// Bytes at the end of the log that [`ServerLog::tail`] reads.
const TAIL_BYTES: u64 = 256 * 1024;

/// Why the log file cannot be created.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The directory of `server.log` cannot be created.
    #[error("cannot create the log directory {}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The private directory of the default log cannot be created.
    #[error("cannot create a private directory for the server log in {}: {source}", dir.display())]
    PrivateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log file cannot be created or opened.
    #[error("cannot create the server log {}: {source}", log.display())]
    Create {
        log: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `server.log` names something other than a regular file (`kind`: `a FIFO`, ...).
    #[error("the server log {} is not a regular file ({kind}): give server.log a file path, or leave it out for a private file in the temp directory", log.display())]
    NotRegular { log: PathBuf, kind: &'static str },
}

/// What a file type is, for [`LogError::NotRegular`].
fn kind_of(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// An open server log.
#[derive(Debug)]
pub struct ServerLog {
    path: PathBuf,
    /// Opened read-write when the log was created: the server writes through duplicates of it,
    /// perfgate reads it with `pread` (the shared offset is never moved by a read).
    file: File,
    /// True for the default log perfgate created (removed after a clean stop).
    default: bool,
}

/// This process's private directory for default logs, once created.
static PRIVATE_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// 64 bits nobody can guess (std's per-process random hash keys, plus the clock): the private
/// directory's name. mkdir(2) without overwrite and mode 0700 are what protect it; the name
/// only keeps others from creating it first.
fn unpredictable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

fn private_dir() -> Result<PathBuf, LogError> {
    let mut slot = PRIVATE_DIR.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = slot.as_ref() {
        return Ok(d.clone());
    }
    let tmp = std::env::temp_dir();
    let mut last = None;
    for _ in 0..16 {
        let name = format!("perfgate-{}-{:016x}", std::process::id(), unpredictable());
        let d = tmp.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => {
                *slot = Some(d.clone());
                return Ok(d);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(source) => return Err(LogError::PrivateDir { dir: tmp, source }),
        }
    }
    Err(LogError::PrivateDir {
        dir: tmp,
        source: last.unwrap_or_else(|| std::io::Error::other("no free name")),
    })
}

/// Removes this process's private log directory when it is empty (at the end of a run).
pub fn remove_private_dir() {
    let mut slot = PRIVATE_DIR.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = slot.as_ref() {
        if std::fs::remove_dir(d).is_ok() {
            *slot = None;
        }
    }
}

impl ServerLog {
    /// Opens `given` (`server.log`, truncated) or creates the default log `name` in this
    /// process's private directory.
    ///
    /// Errors: a directory cannot be created, `given` is not a regular file, or the file
    /// cannot be opened.
    pub fn create(given: Option<&Path>, name: &str) -> Result<ServerLog, LogError> {
        match given {
            Some(p) => Self::open_given(p),
            None => {
                let path = private_dir()?.join(name);
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|source| LogError::Create {
                        log: path.clone(),
                        source,
                    })?;
                Ok(ServerLog {
                    path,
                    file,
                    default: true,
                })
            }
        }
    }

    fn open_given(path: &Path) -> Result<ServerLog, LogError> {
        let not_regular = |t: std::fs::FileType| {
            kind_of(t).map(|kind| LogError::NotRegular {
                log: path.to_path_buf(),
                kind,
            })
        };
        match std::fs::metadata(path) {
            Ok(m) => {
                if let Some(e) = not_regular(m.file_type()) {
                    return Err(e);
                }
            }
            Err(_) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| LogError::Dir {
                        dir: dir.to_path_buf(),
                        source,
                    })?;
                }
            }
        }
        // Non-blocking, so that a FIFO swapped in after the check cannot block the open;
        // the type is checked again on what was opened (O_NONBLOCK means nothing to a file).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| LogError::Create {
                log: path.to_path_buf(),
                source,
            })?;
        let meta = file.metadata().map_err(|source| LogError::Create {
            log: path.to_path_buf(),
            source,
        })?;
        if let Some(e) = not_regular(meta.file_type()) {
            return Err(e);
        }
        file.set_len(0).map_err(|source| LogError::Create {
            log: path.to_path_buf(),
            source,
        })?;
        Ok(ServerLog {
            path: path.to_path_buf(),
            file,
            default: false,
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True for the default log perfgate created in its private directory.
    pub fn is_default(&self) -> bool {
        self.default
    }

    /// A descriptor to give the server as its stdout or stderr.
    pub fn writer(&self) -> std::io::Result<File> {
        self.file.try_clone()
    }

    /// Removes the default log (a given `server.log` is kept). True when it was removed.
    pub fn remove_if_default(&self) -> bool {
        self.default && std::fs::remove_file(&self.path).is_ok()
    }

    /// The last `n` lines of the log (at most the last 256 KiB read), each clipped to 400
    /// characters, control characters escaped ([`printable`]), secrets redacted.
    pub fn tail(&self, n: usize, secrets: &[String]) -> Vec<String> {
        let cut = secrets.iter().map(String::len).max().unwrap_or(0);
        self.tail_from(n, cut)
            .1
            .iter()
            .map(|l| shown(l, secrets))
            .collect()
    }

    /// The byte offset where the last `n` lines start, and those lines (raw); `cut`: bytes left
    /// out at the start of a window that holds no line end.
    fn tail_from(&self, n: usize, cut: usize) -> (u64, Vec<String>) {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        let from = len.saturating_sub(TAIL_BYTES);
        let mut buf = vec![0u8; (len - from) as usize];
        let got = read_full_at(&self.file, &mut buf, from);
        buf.truncate(got);
        // a read that starts inside a line starts at the next line: a line cut at the 256 KiB
        // mark is not shown (nor split in two, which could split a secret past redaction)
        // A window without a line end is the end of one long line: shown from `cut` bytes in
        // (the longest secret's length), so no piece of a secret cut at the mark is shown.
        let (from, buf) = if from > 0 {
            // (a line end that is the file's last byte ends that one long line)
            let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
            match body.iter().position(|&b| b == b'\n') {
                Some(i) => (from + i as u64 + 1, buf[i + 1..].to_vec()),
                None => {
                    let cut = cut.min(buf.len());
                    let mut v = b"[...] ".to_vec();
                    v.extend_from_slice(&buf[cut..]);
                    (from + cut as u64, v)
                }
            }
        } else {
            (from, buf)
        };
        let text = String::from_utf8_lossy(&buf);
        let lines: Vec<&str> = text.lines().collect();
        let skip = lines.len().saturating_sub(n);
        // bytes of the skipped lines, each with its line end
        let mut start = from;
        let mut rest = &buf[..];
        for _ in 0..skip {
            let Some(i) = rest.iter().position(|&b| b == b'\n') else {
                break;
            };
            start += i as u64 + 1;
            rest = &rest[i + 1..];
        }
        (start, lines[skip..].iter().map(|l| l.to_string()).collect())
    }

    /// What a failure message shows of the log: the first error-looking lines
    /// ([`looks_like_an_error`]: at most `errors` of them, from the first 1 MiB, before the tail)
    /// and the last `n` lines, each as [`ServerLog::tail`] shows it. A crash explained on line
    /// 5 of 41 (a `GGML_ASSERT`, a Python `Traceback`) is not lost behind a 20-line tail.
    pub fn excerpt(&self, n: usize, errors: usize, secrets: &[String]) -> LogExcerpt {
        let cut = secrets.iter().map(String::len).max().unwrap_or(0);
        let (tail_start, tail) = self.tail_from(n, cut);
        let head_len = tail_start.min(HEAD_BYTES);
        let mut buf = vec![0u8; head_len as usize];
        let got = read_full_at(&self.file, &mut buf, 0);
        buf.truncate(got);
        // a line cut by the 1 MiB limit is not a line (nor is a 1 MiB head without a line end)
        if tail_start > HEAD_BYTES {
            let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            buf.truncate(end);
        }
        let text = String::from_utf8_lossy(&buf);
        LogExcerpt {
            first_errors: text
                .lines()
                .filter(|l| looks_like_an_error(l))
                .take(errors)
                .map(|l| shown(l, secrets))
                .collect(),
            tail: tail.iter().map(|l| shown(l, secrets)).collect(),
        }
    }
}

/// Bytes from the start of the log that [`ServerLog::excerpt`] searches for error lines.
const HEAD_BYTES: u64 = 1024 * 1024;

/// Error-looking lines a failure message shows, at most.
pub const FIRST_ERRORS: usize = 5;

/// What a failure message shows of a server's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogExcerpt {
    /// The first error-looking lines before the tail.
    pub first_errors: Vec<String>,
    /// The last lines.
    pub tail: Vec<String>,
}

/// A line as a message shows it: clipped to 400 characters, control characters escaped,
/// secrets redacted.
fn shown(l: &str, secrets: &[String]) -> String {
    // redacted before clipping, so a secret is never cut in two; then its first and last 200
    // characters (a crash often ends a long progress line: `...\rTraceback ...`)
    let l = crate::redact::redact(&printable(l), secrets);
    let n = l.chars().count();
    if n <= 400 {
        return l;
    }
    let head: String = l.chars().take(200).collect();
    let tail: String = l.chars().skip(n - 200).collect();
    format!("{head} [... {} characters ...] {tail}", n - 400)
}

/// Whether a log line looks like it explains a failure: it names an error, a failed assertion,
/// a fatal condition, an abort, a panic, a Python traceback, a crash by signal or running out
/// of memory (case-insensitive).
pub fn looks_like_an_error(line: &str) -> bool {
    const MARKERS: [&str; 10] = [
        "error",
        "assert",
        "fatal",
        "abort",
        "panic",
        "traceback",
        "exception",
        "segmentation fault",
        "out of memory",
        "core dumped",
    ];
    let l = line.to_ascii_lowercase();
    MARKERS.iter().any(|m| l.contains(m))
}

/// Reads into `buf` from `at` until it is full or the file ends; the bytes read.
fn read_full_at(f: &File, buf: &mut [u8], at: u64) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    got
}

/// Follows a log for a ready text (`server.ready.log`), which holds no line end: the text is in
/// a line exactly when it is in the byte stream, so the watch keeps only the last
/// `text.len() - 1` bytes between reads (an occurrence cut by a read), never the line.
#[derive(Debug, Default)]
pub struct LogWatch {
    offset: u64,
    carry: Vec<u8>,
}

impl LogWatch {
    /// Reads what the log gained since the last poll (at most 16 MiB, in 64 KiB chunks) and
    /// says whether `text` has appeared. Memory: one chunk and `text`'s length.
    pub fn poll(&mut self, log: &ServerLog, text: &str) -> bool {
        self.poll_file(&log.file, text.as_bytes())
    }

    fn poll_file(&mut self, f: &File, text: &[u8]) -> bool {
        if text.is_empty() {
            return true;
        }
        let mut chunk = vec![0u8; CHUNK];
        let mut read = 0u64;
        while read < POLL_BYTES {
            let n = match f.read_at(&mut chunk, self.offset) {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            self.offset += n as u64;
            read += n as u64;
            let mut window = std::mem::take(&mut self.carry);
            window.extend_from_slice(&chunk[..n]);
            if contains(&window, text) {
                return true;
            }
            let keep = window.len().min(text.len() - 1);
            self.carry = window.split_off(window.len() - keep);
        }
        false
    }

    /// Bytes held between polls (at most the ready text's length less one).
    pub fn held(&self) -> usize {
        self.carry.len()
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `s` with control characters (ANSI escapes, carriage returns) shown escaped, so a server's
/// log cannot rewrite terminal or CI log lines.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || is_invisible_format(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Unicode format characters that change how text around them reads without showing
/// themselves: zero-width spaces and joiners, bidirectional overrides and isolates, line and
/// paragraph separators, the word joiner family, the byte-order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_line_that_never_ends_is_followed_in_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let log = ServerLog::create(Some(&dir.path().join("s.log")), "x").unwrap();
        let mut w = log.writer().unwrap();
        let mut watch = LogWatch::default();
        // 8 MiB of tqdm-style progress: `\r` updates, no newline
        for i in 0..200_000 {
            write!(w, "\rloading {i:>9}/200000 shards").unwrap();
            if i % 50_000 == 0 {
                assert!(!watch.poll(&log, "model loaded"));
                assert!(watch.held() < "model loaded".len());
            }
        }
        assert!(!watch.poll(&log, "model loaded"));
        assert_eq!(watch.held(), "model loaded".len() - 1);
        assert_eq!(watch.offset, std::fs::metadata(log.path()).unwrap().len());
        // the ready text, cut by the end of one write and the start of the next
        write!(w, "\rmodel lo").unwrap();
        assert!(!watch.poll(&log, "model loaded"));
        write!(w, "aded").unwrap();
        assert!(watch.poll(&log, "model loaded"));
    }

    #[test]
    fn an_occurrence_across_a_chunk_boundary_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let log = ServerLog::create(Some(&dir.path().join("s.log")), "x").unwrap();
        let mut w = log.writer().unwrap();
        let mut text = vec![b'x'; CHUNK - 3];
        text.extend_from_slice(b"READY\n");
        w.write_all(&text).unwrap();
        assert!(LogWatch::default().poll(&log, "READY"));
        assert!(!LogWatch::default().poll(&log, "READY!"));
    }

    #[test]
    fn non_regular_logs_are_refused_and_the_default_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let e = ServerLog::create(Some(dir.path()), "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the server log {} is not a regular file (a directory): give server.log a file path, or leave it out for a private file in the temp directory",
                dir.path().display()
            )
        );
        let log = ServerLog::create(None, "unit-test.log").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(log.path()), 0o600);
        assert_eq!(mode(log.path().parent().unwrap()), 0o700);
        // O_EXCL: the same name is never opened twice
        assert!(ServerLog::create(None, "unit-test.log").is_err());
        assert!(log.remove_if_default());
        assert!(!log.path().exists());
        remove_private_dir();
        assert!(!log.path().parent().unwrap().exists());
    }

    #[test]
    fn tails_are_clipped_escaped_and_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let log = ServerLog::create(Some(&dir.path().join("s.log")), "x").unwrap();
        let mut w = log.writer().unwrap();
        write!(w, "one\ntwo sk-secret-123\n\x1b[2Jthree\n").unwrap();
        assert_eq!(
            log.tail(2, &["sk-secret-123".to_string()]),
            vec!["two <redacted>".to_string(), "\\u{1b}[2Jthree".to_string()]
        );
    }

    #[test]
    fn the_excerpt_finds_the_first_errors_before_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = ServerLog::create(Some(&dir.path().join("s.log")), "x").unwrap();
        let mut w = log.writer().unwrap();
        for i in 1..=4 {
            writeln!(w, "llama_model_loader: line {i}").unwrap();
        }
        writeln!(w, "/src/ggml.c:1234: GGML_ASSERT(n_dims <= 4) failed").unwrap();
        writeln!(w, "Traceback (most recent call last): sk-secret-123").unwrap();
        for i in 7..=41 {
            writeln!(w, "frame {i}").unwrap();
        }
        writeln!(w, "fatal: in the tail, shown there only").unwrap();
        let ex = log.excerpt(3, FIRST_ERRORS, &["sk-secret-123".to_string()]);
        assert_eq!(
            ex.first_errors,
            vec![
                "/src/ggml.c:1234: GGML_ASSERT(n_dims <= 4) failed".to_string(),
                "Traceback (most recent call last): <redacted>".to_string(),
            ]
        );
        assert_eq!(
            ex.tail,
            vec![
                "frame 40",
                "frame 41",
                "fatal: in the tail, shown there only"
            ]
        );
        // a log that is all tail has no separate first errors
        assert_eq!(
            log.excerpt(100, FIRST_ERRORS, &[]).first_errors,
            Vec::<String>::new()
        );
        // at most `errors` lines
        assert_eq!(log.excerpt(3, 1, &[]).first_errors.len(), 1);
    }

    #[test]
    fn error_looking_lines() {
        assert!(looks_like_an_error("GGML_ASSERT(x) failed"));
        assert!(looks_like_an_error("thread 'main' panicked at src/x.rs"));
        assert!(looks_like_an_error("RuntimeError: CUDA out of memory"));
        assert!(looks_like_an_error("Aborted (core dumped)"));
        assert!(!looks_like_an_error("llama_model_loader: loaded meta data"));
        assert!(!looks_like_an_error(
            "main: server is listening on 127.0.0.1:8080"
        ));
    }

    /// Attack finding: the 256 KiB tail window began inside a line, inside the API key, so the
    /// key was split between the first error lines (`key=sk-`) and the tail (the rest) and
    /// neither part was redacted.
    #[test]
    fn a_key_cut_by_the_tail_window_is_never_shown() {
        let secret = "sk-CANARY0123456789abcdefghij".to_string();
        for extra_lines in [0usize, 3] {
            let dir = tempfile::tempdir().unwrap();
            let log = ServerLog::create(Some(&dir.path().join("s.log")), "x").unwrap();
            let mut w = log.writer().unwrap();
            let prefix = format!("error: {} key=", "a".repeat(100));
            // one line whose 256 KiB mark falls 3 bytes into the key
            let line_len = TAIL_BYTES as usize + prefix.len() + 3;
            let rest = line_len - prefix.len() - secret.len();
            writeln!(w, "{prefix}{secret} {}", "b".repeat(rest - 2)).unwrap();
            for i in 0..extra_lines {
                writeln!(w, "after {i}").unwrap();
            }
            drop(w);
            let ex = log.excerpt(3, FIRST_ERRORS, std::slice::from_ref(&secret));
            let all = format!("{:?} {:?}", ex.first_errors, ex.tail);
            assert!(!all.contains("CANARY"), "{all}");
            assert!(!all.contains("key=sk-\""), "{all}");
        }
    }

    #[test]
    fn long_lines_show_their_start_and_end_and_format_characters_are_escaped() {
        let l = format!("{}\u{202E}Traceback: boom", "x".repeat(1000));
        let s = shown(&l, &[]);
        assert!(s.starts_with(&"x".repeat(200)), "{s}");
        assert!(s.ends_with("\\u{202e}Traceback: boom"), "{s}");
        assert!(s.contains(" [... "), "{s}");
        assert_eq!(printable("a\u{200B}b"), "a\\u{200b}b");
    }
}
