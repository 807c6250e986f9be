//! The results JSON a forced exit still writes (issue 26): `perfgate check` and `ab` promise
//! partial results marked incomplete when interrupted, but the hard stop 15 s after the first
//! signal (or a second signal) can come while the results are being compared or written. So
//! the command keeps a small copy ready here, the results without their per-request records,
//! and [`write`], a hook of [`crate::cancel::on_force_exit`], writes it unless the full file was
//! written meanwhile. Before measuring the copy is every scenario "not measured: interrupted";
//! once the results exist, it is those results.

use crate::results::Results;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The note each scenario of a last-resort file carries.
pub const NOTE: &str = "written when perfgate was stopped (a second signal, or 15 s after the first) before the results file was complete: the per-request records are left out";

static READY: Mutex<Option<(PathBuf, String)>> = Mutex::new(None);

fn ready() -> std::sync::MutexGuard<'static, Option<(PathBuf, String)>> {
    READY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps `results`, without records and marked incomplete, ready to be written to `path` by a
/// forced exit (replacing what was kept). The records are taken out for the rendering and put
/// back, so nothing large is copied.
pub fn keep(path: &Path, results: &mut Results) {
    let records: Vec<_> = results
        .scenarios
        .iter_mut()
        .map(|s| {
            let base = s.ab.as_mut().map(|ab| std::mem::take(&mut ab.base_records));
            (std::mem::take(&mut s.records), base)
        })
        .collect();
    let incomplete = results.incomplete;
    results.incomplete = true;
    let (verdict, code) = (results.verdict, results.exit_code);
    results.decide();
    for s in &mut results.scenarios {
        s.notes.push(crate::results::Note::new(
            crate::results::NoteKind::Partial,
            NOTE,
        ));
    }
    let text = super::json::render(results);
    for s in &mut results.scenarios {
        s.notes.pop();
    }
    results.incomplete = incomplete;
    results.verdict = verdict;
    results.exit_code = code;
    for (s, (recs, base)) in results.scenarios.iter_mut().zip(records) {
        s.records = recs;
        if let (Some(ab), Some(b)) = (s.ab.as_mut(), base) {
            ab.base_records = b;
        }
    }
    *ready() = Some((path.to_path_buf(), text));
}

/// Forgets what was kept: the full file was written (or could not be, for a reason a second
/// try would meet too).
pub fn done() {
    *ready() = None;
}

/// Writes what was kept, if anything (the forced-exit hook).
pub fn write() {
    let kept = ready().take();
    if let Some((path, text)) = kept {
        match crate::fsutil::write_atomic_tagged(&path, "last", &text) {
            Ok(()) => eprintln!(
                "perfgate: wrote the results JSON without per-request records: {}",
                path.display()
            ),
            Err(e) => eprintln!(
                "perfgate: error: cannot write the results JSON to {}: {e}",
                path.display()
            ),
        }
    }
}
