//! Exit codes, defined once (docs/design.md "Exit codes"), and [`Error`], the kinds of failure
//! that end a command, each mapped to its exit code in one `match` ([`Error::exit_code`]).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | no regression (improvements included) |
//! | 1 | regression |
//! | 2 | invalid input or usage (bad YAML, bad flags, missing env var, stale or missing baseline when required) |
//! | 3 | could not measure (endpoint unreachable, error rate above `max_error_rate`, every request failed) |
//! | 130 | interrupted (Ctrl-C / SIGTERM): partial results marked incomplete, no baseline written |
//!
//! This is a leaf module: the producers' own error types (`config::ConfigError`,
//! `report::json::ResultsFileError`, `sim::SimConfigError`, ...) live with their producers, which lift
//! them into a kind here with a `From` impl, so `?` works and the kind, not the call site,
//! decides the exit code. A kind that wraps a producer's error keeps it as its `source`.

use std::path::PathBuf;

/// No regression.
pub const OK: i32 = 0;
/// At least one gated check is FAIL.
pub const REGRESSION: i32 = 1;
/// Invalid input or usage.
pub const INVALID_INPUT: i32 = 2;
/// The endpoint could not be measured.
pub const COULD_NOT_MEASURE: i32 = 3;
/// Interrupted by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it); partial results only.
pub const INTERRUPTED: i32 = 130;

/// A producer's typed error, kept as the source of a kind (this module cannot name the
/// producers' types: they live in higher layers).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What ended a command before it could report an outcome. The message (`Display`) says what
/// was wrong and what to do; `perfgate: ` is put before it on stderr.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags, a flag combination that cannot run, or a command refusing its input before
    /// doing anything (`--only` naming no scenario, `init` over existing files, ...).
    #[error("{0}")]
    Usage(String),
    /// A scenario file could not be found, read or validated (`config::ConfigError`).
    #[error(transparent)]
    Scenario(Source),
    /// A baseline is missing, stale or broken where one is required, or `--baselines` is not a
    /// directory.
    #[error(transparent)]
    Baseline(Source),
    /// A results file (`check --output`) could not be read, parsed or merged.
    #[error(transparent)]
    Results(Source),
    /// The nightly history (`--history`) could not be read or appended to
    /// (`history::HistoryError`).
    #[error("history: {0}")]
    History(Source),
    /// The simulator's settings or a replayed stream case are invalid (`perfgate sim`);
    /// `context` is put before the message (`sim: `, or empty).
    #[error("{context}{source}")]
    Sim {
        context: &'static str,
        #[source]
        source: Source,
    },
    /// A file could not be written (a baseline, the `init` scaffold). `context` is put before
    /// the message (`init: `, or empty).
    #[error("{context}cannot write {}: {source}", path.display())]
    Write {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A report file (`--output`, `--markdown`, `--junit`, `--html`) could not be written. It
    /// does not stop the command: the other reports are written and the verdict stands, and
    /// [`crate::verdict::with_write_failure`] uses this kind's code only when the verdict's is 0.
    #[error("cannot write the {what} to {}: {source}; the other reports were written and the verdict stands", path.display())]
    Report {
        /// Which report (`results JSON`, `HTML report`, ...).
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `perfgate sim` could not listen on its port.
    #[error("sim: cannot listen on 127.0.0.1:{port}: {source}")]
    Listen {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// Ctrl-C or SIGTERM stopped the command in a step that cannot end early with a report
    /// (a git command of the nightly history, stopped).
    #[error("{0}")]
    Interrupted(Source),
    /// The async runtime could not start, so nothing can be measured.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl Error {
    /// The exit code of this kind of failure: the one place that decides it.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_)
            | Error::Scenario(_)
            | Error::Baseline(_)
            | Error::History(_)
            | Error::Results(_)
            | Error::Sim { .. }
            | Error::Write { .. }
            | Error::Report { .. }
            | Error::Listen { .. } => INVALID_INPUT,
            Error::Runtime(_) => COULD_NOT_MEASURE,
            Error::Interrupted(_) => INTERRUPTED,
        }
    }

    /// [`Error::Usage`] from a message.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::Usage(message.into())
    }

    /// [`Error::Write`] without a context prefix.
    pub fn write(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Write {
            context: "",
            path: path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_carry_their_codes_and_messages() {
        let e = Error::usage("--only x: no such scenario");
        assert_eq!(
            (e.exit_code(), e.to_string().as_str()),
            (2, "--only x: no such scenario")
        );
        let io = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = Error::Write {
            context: "init: ",
            path: "a/b.yaml".into(),
            source: io(),
        };
        assert_eq!(e.to_string(), "init: cannot write a/b.yaml: denied");
        assert_eq!(e.exit_code(), INVALID_INPUT);
        assert_eq!(Error::Runtime(io()).exit_code(), COULD_NOT_MEASURE);
        assert_eq!(
            Error::Listen {
                port: 9,
                source: io()
            }
            .to_string(),
            "sim: cannot listen on 127.0.0.1:9: denied"
        );
    }
}
