//! The results JSON (`--output`): [`Results`] serialised as is, pretty-printed with a trailing
//! newline. Its layout is described by `schema/results.schema.json` (JSON Schema 2020-12), whose
//! `$id` carries [`RESULTS_SCHEMA_VERSION`]; a test validates real output against it. Adding an
//! optional field keeps the version; removing or changing one raises it.

use crate::results::{Results, RESULTS_SCHEMA_VERSION};
use std::path::{Path, PathBuf};

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

/// Why a results file could not be loaded; every message starts with the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsFileError {
    /// It could not be read (missing, too large, not UTF-8).
    #[error("cannot read {}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: crate::limits::ReadError,
    },
    /// It is not JSON.
    #[error("{}: not JSON ({source}); expected a results file from `perfgate check --output`", file.display())]
    NotJson {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A time in it is not believable (the error names the field).
    #[error("{}: {source}", file.display())]
    Time {
        file: PathBuf,
        #[source]
        source: crate::limits::TimeError,
    },
    /// Written by a perfgate with another results layout.
    #[error("{}: results schema_version {found}, but this perfgate reads version {RESULTS_SCHEMA_VERSION}; use the perfgate that wrote it", file.display())]
    SchemaVersion { file: PathBuf, found: u64 },
    /// No `schema_version`: not a results file.
    #[error("{}: no schema_version; expected a results file from `perfgate check --output`", file.display())]
    NoSchemaVersion { file: PathBuf },
    /// A load-shard worker's number no worker runs (`load_shard.count` 0, an index above it).
    #[error("{}: scenarios[{scenario}].{source}", file.display())]
    LoadShard {
        file: PathBuf,
        /// The scenario's place in `scenarios` (0-based).
        scenario: usize,
        #[source]
        source: crate::results::BadLoadShard,
    },
    /// A field is missing or of the wrong type (serde's message names it, with the file's own
    /// text made safe to print: a hostile value's escape sequences dropped).
    #[error("{}: not a perfgate results file: {message}", file.display())]
    Shape { file: PathBuf, message: String },
}

impl From<ResultsFileError> for crate::exit::Error {
    fn from(e: ResultsFileError) -> Self {
        crate::exit::Error::Results(Box::new(e))
    }
}

/// Reads a results JSON file. Errors name the file and say what is wrong.
pub fn load(path: &Path) -> Result<Results, ResultsFileError> {
    let file = || path.to_path_buf();
    let text =
        crate::limits::read_text(path, crate::limits::MAX_RESULTS_BYTES).map_err(|source| {
            ResultsFileError::Read {
                file: file(),
                source,
            }
        })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ResultsFileError::NotJson {
            file: file(),
            source,
        })?;
    crate::limits::check_times(&v).map_err(|source| ResultsFileError::Time {
        file: file(),
        source,
    })?;
    match v.get("schema_version").and_then(|x| x.as_u64()) {
        Some(n) if n == u64::from(RESULTS_SCHEMA_VERSION) => {}
        Some(found) => {
            return Err(ResultsFileError::SchemaVersion {
                file: file(),
                found,
            })
        }
        None => return Err(ResultsFileError::NoSchemaVersion { file: file() }),
    }
    let r: Results = serde_json::from_value(v).map_err(|e| ResultsFileError::Shape {
        file: file(),
        message: super::safe_text::field(&e.to_string()),
    })?;
    for (k, s) in r.scenarios.iter().enumerate() {
        if let Some(ls) = &s.load_shard {
            ls.shard().map_err(|source| ResultsFileError::LoadShard {
                file: file(),
                scenario: k,
                source,
            })?;
        }
    }
    Ok(r)
}
