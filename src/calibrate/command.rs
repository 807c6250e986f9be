//! `perfgate calibrate`: its flags and what it prints.

use crate::exit::{self, Error};
use clap::Args;

/// `perfgate calibrate`'s flags.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Replicates per experiment (2000 gives rates to about +/-0.5 %).
    #[arg(long, default_value_t = 2000)]
    replicates: usize,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 20240601)]
    seed: u64,
    /// Only experiments whose label contains this text.
    #[arg(long)]
    only: Option<String>,
    /// The nightly verdict's rule instead (series of nights: its red nights and change points,
    /// beside perfgate 0.1's rank rule, a Perfherder-style t-test and an Otava-style rule).
    #[arg(long)]
    nightly: bool,
}

/// Runs `perfgate calibrate`: the rows of the gate's calibration, or of the nightly history's
/// change-point rule with `--nightly`.
pub fn cmd_calibrate(a: CalibrateArgs) -> Result<i32, Error> {
    if a.replicates == 0 || a.replicates > 1_000_000 {
        return Err(Error::usage("--replicates must be between 1 and 1000000"));
    }
    if a.nightly {
        print!(
            "{}",
            crate::calibrate::nightly::report(a.replicates, a.seed)
        );
    } else {
        print!(
            "{}",
            crate::calibrate::report(a.replicates, a.seed, a.only.as_deref())
        );
    }
    Ok(exit::OK)
}
