//! Runs one scenario: warmup requests (discarded), then `samples` measured requests in a closed
//! loop of `concurrency` workers, each refilling its slot the moment its request ends; or, with
//! `load.rate`, in an open loop: request i is due at the i-th arrival of a seeded Poisson process
//! and is sent at max(due, a slot of the `concurrency` cap free), keeping its scheduled time.
//!
//! Bounded: exactly `warmup + samples` requests (plus at most one retry when the server rejects
//! `stream_options`), each bounded by the endpoint's timeouts. A run whose first requests all
//! fail (refused, 404, 401, no answer), more of them than `gate.max_error_rate` allows over
//! the whole run, stops early: the endpoint is not usable.
//!
//! perfgate's own delays stay out of the numbers: after the warmup, the connection pool is
//! filled to `concurrency` connections ([`crate::client::http::StreamClient::warm_pool`]) so the first measured wave
//! does not pay TCP/TLS setup inside its TTFTs; and while measuring, a [`LagProbe`] records how
//! late the runtime wakes a task, so a client too busy to read its sockets on time is reported
//! ([`CLIENT_LAG_WARN_MS`]) instead of passing as a slow server.
//!
//! One file per job: `session` (a measuring session: warmup, connection checks, looks, its
//! output), `phase` (the closed and open loops that send one phase's requests, and the early
//! stop), `interleaved` (two sessions' requests in one order, for `perfgate ab`), `lag` (the
//! client-lag probe), `output` (what a run produced), `progress` (the live display's hooks).

mod interleaved;
mod lag;
mod output;
mod phase;
mod progress;
pub mod reference;
mod session;
pub mod steady;

pub use interleaved::{measure_interleaved, InFlight, Span};
pub use lag::{LagProbe, CLIENT_LAG_WARN_MS, LAG_PROBE_INTERVAL, LAG_RESERVOIR};
pub use output::{RunOutput, SteadyCounts};
pub use phase::arrivals;
pub use progress::{Phase, Progress};
pub use session::{run, Session};
