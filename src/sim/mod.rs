//! The built-in OpenAI-compatible streaming simulator (docs/design.md "Jobs", `perfgate sim`), on loopback
//! only: seeded lognormal TTFT and inter-token gaps (ms) with fault injection, or a recorded
//! stream case replayed with its timing. It stands in for a server in the quickstart and tests.

#![warn(missing_docs)]

mod chunks;
mod command;
pub mod config;
mod cpu;
mod diverge;
mod http_util;
mod lognormal;
mod prefill;
mod prefix_cache;
pub mod replay;
mod replay_serve;
pub mod schedule;
pub mod server;
mod spec;
mod state;
mod structured;
mod timed_body;
mod timing_log;

#[cfg(test)]
mod tests;

pub use command::{cmd_sim, SimArgs};
pub use config::{CacheReport, PrefillCpu, SimConfig, SimConfigError};
pub use replay::{ReplayCase, ReplayError, ReplayExpect, ReplayRead};
pub use server::{origin, EventKind, RequestTimings, SimServer};
