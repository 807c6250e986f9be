//! The nightly history (docs/history.md): every scheduled run's per-scenario result kept as a
//! series in the repository itself, on a dedicated branch, so that a change point can be told
//! from a noisy night and a committed baseline's tolerance can learn how much real nights move.
//!
//! [`entry`] is one night of one scenario (the file format), [`store`] reads and appends the
//! branch with git plumbing, [`series`] turns a scenario's nights into the values the
//! change-point rule and the learned tolerance read, [`git`] runs git bounded and quiet.

mod args;
pub mod entry;
pub mod git;
pub mod series;
pub mod store;

pub use args::HistoryArgs;
pub use entry::{entries_of, entry_of, Entry, Night, Runner};
pub use store::{HistoryError, Loaded, Remote, Store};

/// The branch perfgate suggests for the history (`--history` without a name).
pub const DEFAULT_BRANCH: &str = "perfgate-history";
