//! Input bounds shared by every file perfgate reads: a size limit enforced while reading (not
//! from the file's length, which is 0 for `/dev/zero`, a FIFO or a pipe), and believable ranges
//! for the times in baselines and results (a finite 1.7e308 ms once made `--html` spin forever).

use std::io::Read;
use std::path::Path;

/// Largest baseline file read, bytes, and so the largest `bless` writes: one constant for the
/// writer ([`crate::baseline::encode`], which counts while writing and refuses above it) and the
/// reader ([`crate::baseline::load`]). A request with 128 ITL points takes about 1.4 KB with the
/// points on one line (about 3 KB with one point a line), so some 45,000 requests over all bless
/// runs fit.
pub const MAX_BASELINE_BYTES: u64 = 64 << 20;
/// Largest results file read, bytes (README: at most ~3 KB per request, so 100,000 requests
/// fit).
pub const MAX_RESULTS_BYTES: u64 = 512 << 20;
/// Largest prompt-set file read (`request.prompt_set.file`), bytes: the whole file is hashed
/// into the fingerprint and its prompts are held in memory while a scenario runs.
pub const MAX_PROMPT_SET_BYTES: u64 = 128 << 20;
/// Most entries a prompt-set file may hold (a look measures at most 100,000 requests).
pub const MAX_PROMPT_SET_ENTRIES: usize = 100_000;
/// Largest trace file read (`load.trace.file`), bytes.
pub const MAX_TRACE_BYTES: u64 = 256 << 20;
/// Most requests a trace file may hold.
pub const MAX_TRACE_ENTRIES: usize = 2_000_000;
/// The most turns a conversation may have (`request.conversation.turns`, a session of a file).
pub const MAX_TURNS: u32 = 64;
/// The longest think time between a turn's answer and the next turn, ms (`think_time`, a
/// session's `delay`).
pub const MAX_THINK_MS: f64 = 60_000.0;
/// A latency above a day is not a measurement: invalid input.
pub const MAX_LATENCY_MS: f64 = 86_400_000.0;
/// The smallest positive time perfgate writes, ms: times are rounded to the µs
/// (`units::round3`), so a smaller positive one was not measured by perfgate.
pub const MIN_WRITTEN_MS: f64 = 0.001;
/// A server-side figure that is not a time (a token count, a share, a queue length) above this
/// is not a measurement (it is also where rounding to 0.001 stops being exact): left out.
pub const MAX_FIGURE: f64 = 1e15;
/// Offsets within a run (`start_ms`, `sched_ms`, `wall_ms`): at most 30 days.
pub const MAX_OFFSET_MS: f64 = 30.0 * MAX_LATENCY_MS;

/// Wall-clock times (`started_unix_ms`: ms since the Unix epoch): before the year 5000.
pub const MAX_EPOCH_MS: f64 = 1e14;

/// Whether `ms` is a time perfgate could have written: within [`MIN_WRITTEN_MS`] and
/// [`MAX_LATENCY_MS`] (NaN is not).
pub fn believable_ms(ms: f64) -> bool {
    (MIN_WRITTEN_MS..=MAX_LATENCY_MS).contains(&ms)
}

/// The largest believable log-sd (standard deviation of ln(ms)) of believable times: values
/// within [`believable_ms`] cannot spread by more than the log of that range (ln 8.64e10 = 25.2).
pub fn max_log_sd() -> f64 {
    (MAX_LATENCY_MS / MIN_WRITTEN_MS).ln()
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file does not exist.
    #[error("no such file")]
    NotFound,
    /// More than `limit` bytes (only `limit + 1` were read).
    #[error("larger than {0} bytes; not read further")]
    TooLarge(u64),
    /// Another I/O error, or text that is not UTF-8.
    #[error("{0}")]
    Other(String),
}

/// A time in a baseline or results document that is not believable ([`check_times`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field} = {value} ms is not a believable time (above {limit_days} days); invalid input")]
pub struct TimeError {
    /// The field's path in the document (`runs[0].records[3].ttft_ms`).
    pub field: String,
    /// What it holds, ms.
    pub value: f64,
    /// The limit it is above, days.
    pub limit_days: f64,
}

/// `--baselines` names a regular file ([`check_baselines_dir`]).
#[derive(Debug, thiserror::Error)]
#[error("--baselines {} is a file, not a directory: pass the directory that holds (or will hold) one <scenario>.json per scenario", path.display())]
pub struct BaselinesDirIsFile {
    /// The path given.
    pub path: std::path::PathBuf,
}

impl From<BaselinesDirIsFile> for crate::exit::Error {
    fn from(e: BaselinesDirIsFile) -> Self {
        crate::exit::Error::Baseline(Box::new(e))
    }
}

/// JSON text in which an object has the same key twice, or that is not JSON
/// ([`check_unique_keys`]); serde_json's message names the key and where it is.
#[derive(Debug, thiserror::Error)]
#[error("{0}; remove the duplicate")]
pub struct DuplicateKey(#[source] pub serde_json::Error);

/// The text of `path`, reading at most `limit + 1` bytes whatever the file claims to be.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    let f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Other(e.to_string()),
    })?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(ReadError::Other("is a directory".into()));
    }
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::Other(e.to_string()))?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    String::from_utf8(buf).map_err(|e| ReadError::Other(format!("not UTF-8 text ({e})")))
}

/// [`read_text`] of a file that must be a regular file in the repository (a prompt set, a
/// trace): a FIFO, socket or device is refused before it is opened (opening a FIFO waits for a
/// writer that may never come).
pub fn read_repo_file(path: &Path, limit: u64) -> Result<String, ReadError> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(ReadError::Other(
            "not a regular file (a FIFO, socket or device): give a file kept in the repository"
                .into(),
        )),
        _ => read_text(path, limit),
    }
}

/// Checks every number under a key ending in `_ms` (recursively: summaries, ITL arrays) in a
/// baseline or results document: finite (JSON has no other) and within [`MAX_LATENCY_MS`] (or
/// [`MAX_OFFSET_MS`] for run offsets). The error names the field's path.
pub fn check_times(v: &serde_json::Value) -> Result<(), TimeError> {
    walk(v, "", None)
}

fn walk(v: &serde_json::Value, path: &str, limit: Option<f64>) -> Result<(), TimeError> {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            if let (Some(limit), Some(x)) = (limit, n.as_f64()) {
                if x.is_nan() || x.abs() > limit {
                    return Err(TimeError {
                        field: path.to_string(),
                        value: x,
                        limit_days: limit / MAX_LATENCY_MS,
                    });
                }
            }
            Ok(())
        }
        Value::Array(a) => {
            // ITL arrays can be long: check them without building a path per item
            for (i, x) in a.iter().enumerate() {
                walk(x, &format!("{path}[{i}]"), limit)?;
            }
            Ok(())
        }
        Value::Object(o) => {
            for (k, x) in o {
                let lim = if k.ends_with("_ms") {
                    Some(match k.as_str() {
                        "start_ms" | "sched_ms" | "wall_ms" => MAX_OFFSET_MS,
                        _ if k.ends_with("_unix_ms") => MAX_EPOCH_MS,
                        _ => MAX_LATENCY_MS,
                    })
                } else {
                    limit
                };
                // counts inside a summary (`n`) are not times
                let lim = if k == "n" { None } else { lim };
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, &p, lim)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `--baselines` must be a directory (or not exist yet): a regular file there is refused before
/// anything is measured (before: everything was measured, then "File exists").
pub fn check_baselines_dir(p: &Path) -> Result<(), BaselinesDirIsFile> {
    match std::fs::metadata(p) {
        Ok(m) if !m.is_dir() => Err(BaselinesDirIsFile {
            path: p.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Refuses JSON text in which an object has the same key twice (serde_json would keep the last
/// silently: a reviewer could read one value while perfgate uses another). The error names the
/// key and where it is.
pub fn check_unique_keys(text: &str) -> Result<(), DuplicateKey> {
    use serde::de::Deserializer as _;
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(Unique).map_err(DuplicateKey)
}

struct Unique;

impl<'de> serde::de::DeserializeSeed<'de> for Unique {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Unique)
    }
}

impl<'de> serde::de::Visitor<'de> for Unique {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Unique)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            if seen.contains(&k) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key `{}`",
                    k.chars().take(80).collect::<String>()
                )));
            }
            map.next_value_seed(Unique)?;
            seen.insert(k);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/dev/zero` has length 0 and never ends: read to the limit, not to the end (today's
    /// `read_to_string` after a length check never returned).
    #[test]
    fn an_endless_file_is_cut_at_the_limit() {
        let e = read_repo_file(Path::new("/dev/zero"), 4096).unwrap_err();
        assert!(e.to_string().starts_with("not a regular file"), "{e}");
        let e = read_text(Path::new("/dev/zero"), 4096).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(4096)), "{e}");
        assert!(matches!(
            read_text(Path::new("/nonexistent/x"), 10),
            Err(ReadError::NotFound)
        ));
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert!(check_unique_keys(r#"{"a":[{"b":1,"c":{"b":2}}],"b":3}"#).is_ok());
        let e = check_unique_keys(r#"{"runs":[{"records":[{"ttft_ms":1,"ttft_ms":900}]}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("duplicate key `ttft_ms`"), "{e}");
        assert!(check_unique_keys("not json").is_err());
    }

    #[test]
    fn times_above_a_day_are_refused_with_their_path() {
        let ok =
            serde_json::json!({"records": [{"ttft_ms": 12.5, "itl_ms": {"n": 1e9, "p99": 3.0}}]});
        assert!(check_times(&ok).is_ok());
        let bad = serde_json::json!({"records": [{"ttft_ms": 1.0}, {"e2e_ms": 1.7e308}]});
        let e = check_times(&bad).unwrap_err();
        assert_eq!(e.field, "records[1].e2e_ms");
        assert!(e.to_string().starts_with("records[1].e2e_ms = "), "{e}");
        let neg = serde_json::json!({"summary": {"tpot_ms": {"p50": -1e300}}});
        assert_eq!(check_times(&neg).unwrap_err().field, "summary.tpot_ms.p50");
    }
}
