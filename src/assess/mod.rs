//! Judging one scenario's measured run against a reference (a committed baseline, the base arm
//! of an A/B run): its status, notes and gate input, then the gate over the family, into the
//! [`crate::results::Results`] model. Pure: no I/O, no network; the commands (`check`, `ab`,
//! `bless`) measure, load and orchestrate, and call this.
//!
//! [`arm`] is what the gate compares, [`arms_diff`] what an A/B run's two servers differ in, [`figures`] and [`notes`] describe a run, [`drift`] finds
//! what changed between a baseline and a run, [`problem`] says why a run cannot be compared,
//! [`server_notes`] reads the server-side figures, [`judge`](mod@judge) judges one scenario against its
//! [`Reference`] with all of these, [`gated`] runs the gate over the family.

pub mod arm;
pub mod arms_diff;
pub mod cache;
pub mod cold_start;
pub mod drift;
pub mod figures;
pub mod gated;
pub mod judge;
pub mod nightly;
pub mod notes;
pub mod outputs;
pub mod pairing;
pub mod problem;
pub mod quality;
pub mod sample_sizes;
pub mod server_notes;

pub use arm::{baseline_spread, gate_input, scenario_samples, slo_only_input, Arm};
pub use drift::{config_diff, minority_source_note, staleness, workload_drift, Drift};
pub use figures::{achieved_concurrency, measured};
pub use gated::gated_results;
pub use judge::{judge, BaseArm, CommittedBaseline, Given, Judged, Reference};
pub use notes::{client_lag_note, run_notes, schedule_notes};
pub use problem::run_problem;
pub use sample_sizes::sample_sizes;
pub use server_notes::identity_drift;

/// What a configured model that the server does not list means (a server that accepts any
/// name would measure a typo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnlistedModel {
    /// A note on the scenario (the default).
    #[default]
    Note,
    /// `--require-listed-model`: the scenario is misconfigured (exit 2).
    Refuse,
}
