//! Exit codes, defined once (docs/design.md "Exit codes"), and the error type that carries them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | no regression (improvements included) |
//! | 1 | regression |
//! | 2 | invalid input or usage (bad YAML, bad flags, missing env var, stale or missing baseline when required) |
//! | 3 | could not measure (endpoint unreachable, error rate above `max_error_rate`, every request failed) |
//! | 130 | interrupted (Ctrl-C / SIGTERM): partial results marked incomplete, no baseline written |

use std::fmt;

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

/// An error that ends the program with a specific exit code and a one-line (or few-line) message.
#[derive(Debug)]
pub struct ExitError {
    /// One of the constants in this module.
    pub code: i32,
    /// Says what was wrong and what to do.
    pub message: String,
}

impl ExitError {
    /// Invalid input (exit 2).
    pub fn invalid(message: impl Into<String>) -> Self {
        ExitError {
            code: INVALID_INPUT,
            message: message.into(),
        }
    }
    /// Could not measure (exit 3).
    pub fn unmeasurable(message: impl Into<String>) -> Self {
        ExitError {
            code: COULD_NOT_MEASURE,
            message: message.into(),
        }
    }
}

impl fmt::Display for ExitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {}
