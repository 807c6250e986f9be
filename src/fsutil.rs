//! File-system helpers: atomic writes, and the temporary files of writes in progress, removed
//! by [`remove_pending`] when perfgate is stopped in the middle of one (a second signal, or the
//! hard stop of [`crate::cancel`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The temporary files of the atomic writes in progress.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes the temporary file of every atomic write still in progress (what a forced exit runs:
/// no `.NAME.tmp-PID` is left behind); the writes themselves are not finished.
pub fn remove_pending() {
    for p in pending().drain(..) {
        let _ = std::fs::remove_file(&p);
    }
}

/// Writes `text` to `path` atomically: a temp file in the same directory, fsync, rename over
/// the target, fsync the directory. A crash at any point leaves the old file or the new one.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    write_atomic_with(path, |w| w.write_all(text.as_bytes()))
}

/// Like [`write_atomic`], the content written by `write` into a buffered writer as it is
/// produced (a large results file is never held in memory as one string).
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_atomic_via(path, "", write)
}

/// [`write_atomic`] through a temporary file of its own (`.NAME.tmp-PID-TAG`): for a write that
/// may run while another write of the same file is in progress (the last-resort results of a
/// forced exit).
pub fn write_atomic_tagged(path: &Path, tag: &str, text: &str) -> std::io::Result<()> {
    write_atomic_via(path, &format!("-{tag}"), |w| w.write_all(text.as_bytes()))
}

fn write_atomic_via(
    path: &Path,
    tag: &str,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| {
        let file_in_the_way = dir
            .ancestors()
            .any(|a| !a.as_os_str().is_empty() && a.exists() && !a.is_dir());
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot create the directory {}: {e}{}",
                dir.display(),
                if file_in_the_way {
                    " (it, or a directory above it, is a file)"
                } else {
                    ""
                }
            ),
        )
    })?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("baseline.json");
    let tmp = dir.join(format!(".{name}.tmp-{}{tag}", std::process::id()));
    pending().push(tmp.clone());
    let result = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    pending().retain(|p| p != &tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, "one\n").unwrap();
        write_atomic(&p, "two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }
}
