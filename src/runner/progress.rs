//! The hooks of a live display of a measuring session (the terminal's progress line), passed in
//! explicitly, never ambient.

use crate::config::Scenario;
use crate::record::RequestRecord;

/// A live view of a measuring session (the terminal's progress line). Called from the workers:
/// implementations must be cheap and must not block.
pub trait Progress: Send + Sync {
    /// A session of `sc` starts (its warmup requests come first).
    fn start(&self, sc: &Scenario);
    /// One request of `phase` ended.
    fn request(&self, phase: Phase, record: &RequestRecord);
    /// The session ended (its requests are done).
    fn finish(&self);
}

impl std::fmt::Debug for dyn Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// Which phase of a session a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A warmup request (discarded).
    Warmup,
    /// A measured request.
    Measured,
    /// A ramp-up or drain request of a steady-state look (docs/scenarios.md "Steady state"):
    /// sent to keep the concurrency, not measured.
    Unmeasured,
}
