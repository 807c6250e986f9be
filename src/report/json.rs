//! The results JSON (`--output`): [`Results`] serialised as is, pretty-printed with a trailing
//! newline. Its layout is described by `schema/results.schema.json` (JSON Schema 2020-12), whose
//! `$id` carries [`RESULTS_SCHEMA_VERSION`]; a test validates real output against it. Adding an
//! optional field keeps the version; removing or changing one raises it.

use crate::results::{Results, RESULTS_SCHEMA_VERSION};
use std::path::Path;

/// Merging shards is not rendering: it lives with the model ([`crate::results::merge`]); kept
/// here under its old path.
pub use crate::results::merge;

/// The results JSON text.
pub fn render(r: &Results) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// Writes the results JSON ([`render`]'s text) to `w` as it is serialised.
pub fn write(w: &mut dyn std::io::Write, r: &Results) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, r)?;
    w.write_all(b"\n")
}

/// Reads a results JSON file. Errors name the file and say what is wrong.
pub fn load(path: &Path) -> Result<Results, String> {
    let shown = path.display();
    let text = crate::limits::read_text(path, crate::limits::MAX_RESULTS_BYTES)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{shown}: not JSON ({e}); expected a results file from `perfgate check --output`")
    })?;
    crate::limits::check_times(&v).map_err(|e| format!("{shown}: {e}"))?;
    match v.get("schema_version").and_then(|x| x.as_u64()) {
        Some(n) if n == u64::from(RESULTS_SCHEMA_VERSION) => {}
        Some(n) => {
            return Err(format!(
                "{shown}: results schema_version {n}, but this perfgate reads version {RESULTS_SCHEMA_VERSION}; use the perfgate that wrote it"
            ))
        }
        None => {
            return Err(format!(
                "{shown}: no schema_version; expected a results file from `perfgate check --output`"
            ))
        }
    }
    serde_json::from_value(v).map_err(|e| format!("{shown}: not a perfgate results file: {e}"))
}
