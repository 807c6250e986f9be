//! File-system helpers.

use std::io::Write;
use std::path::Path;

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
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
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
