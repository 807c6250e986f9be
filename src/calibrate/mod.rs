//! `perfgate calibrate`: Monte-Carlo calibration of the gate on documented noise profiles
//! (docs/gate.md): false-alarm rate and power of perfgate's gate, side by
//! side with two comparator rules computed on the same simulated data:
//!
//! - **percentage threshold** (as github-action-benchmark): FAIL when the candidate's sample
//!   P50 (P99) exceeds the baseline's by more than the fail tolerance (10 %, 50 %);
//! - **t-test on per-run summaries** (as Bencher's `t_test` threshold): FAIL when the
//!   candidate run's P50 (P99) is above the upper 99 % Student-t prediction bound
//!   mean + t(0.99, k-1) * sd * sqrt(1 + 1/k) of the k baseline runs' values (needs k >= 2).
//!
//! Latency model: lognormal around a median (TTFT 200 ms, sigma 0.35, 5 % of requests on a 3x
//! slow path; TPOT 20 ms, sigma 0.10), times a per-run drift exp(tau * Z) shared by every
//! scenario of a run. Seeded: the same seed and replicate count print the same numbers.
//!
//! The ITL rows ([`itl_experiments`]) simulate every request's inter-token gaps with a
//! per-request speed (request-level random effect) and show the ITL P99 check's false alarms,
//! its level at its own fail boundary beside a naive test that counts gaps as independent, and
//! its power for a stall pattern (docs/accuracy.md).
//!
//! A user-facing command (docs/gate.md quotes its table): the statistical targets are shown by
//! running it. One file per job:
//!
//! - `noise`: the latency model (profiles, the candidate's change, drawing samples);
//! - `committed`: one committed-baseline experiment run through the gate, replicate by
//!   replicate (sequential looks included); `comparators`: the threshold and t-test rules on
//!   the same data; `committed_rows`: the rows (false alarms, power, tail-only, sequential, P99);
//! - `itl`: the ITL P99 rows (inter-token gaps with per-request speeds);
//! - `paired`: the TTFT P50 on a prompt mix, paired and unpaired (issue 43);
//! - `slo`: the `gate.slo` rows (no baseline);
//! - `outputs`: the `gate.outputs` rows (answers that changed, against a server that is not
//!   batch-invariant);
//! - `parse`: the structured-output parse-failure rows (issue 44);
//! - `cold_start`: the `gate.cold_start` rows (k stored server starts vs one);
//! - `ab`: A/B designs (drift over one run, interleaved and blocked schedules); `ab_rows`: their
//!   rows and the committed-baseline rows at the same drift;
//! - `table`: runs the rows and prints the table, section by section.

mod ab;
mod ab_rows;
mod cold_start;
mod command;
mod committed;
mod committed_rows;
mod comparators;
mod itl;
pub mod nightly;
mod noise;
mod outputs;
mod paired;
mod parse;
mod slo;
mod table;

pub use ab::{run_ab, AbDesign, AbExperiment, AbRates, Drift};
pub use ab_rows::ab_experiments;
pub use command::{cmd_calibrate, CalibrateArgs};
pub use committed::{run_experiment, Experiment, Rates};
pub use committed_rows::experiments;
pub use itl::{itl_experiments, run_itl, ItlChange, ItlExperiment, ItlProfile, ItlRates, ITL};
pub use noise::{Change, Profile, TPOT, TTFT};
pub use outputs::{outputs_experiments, run_outputs, OutputsExperiment, Repeats};
pub use paired::{paired_experiments, run_paired, PairedExperiment, PairedRates};
pub use parse::{parse_experiments, run_parse, ParseExperiment};
pub use slo::{run_slo, slo_experiments, true_quantile, SloExperiment};
pub use table::report;
