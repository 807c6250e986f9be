//! The committed-baseline rows of `calibrate`: family-wise false alarms, power, a tail-only
//! change, sequential stopping under no change, and P99 false alarms at every n (issue targets
//! in the comments). Their order is the table's, and seeds each row.

use super::committed::Experiment;
use super::noise::{Change, Profile, TPOT, TTFT};
use crate::config::scenario::{Metric, Quantile};

/// The experiments `calibrate` runs, in the table's order (issue targets in comments).
pub fn experiments() -> Vec<Experiment> {
    [
        family_null_rows(),
        power_rows(),
        sequential_null_rows(),
        p99_null_rows(),
    ]
    .concat()
}

/// TTFT and TPOT, the default gated metrics.
fn both() -> Vec<Profile> {
    vec![TTFT, TPOT]
}

/// P50 and P99, the default gated quantiles.
fn p50_p99() -> Vec<Quantile> {
    vec![Quantile::P50, Quantile::P99]
}

/// Family-wise false alarms: 5 scenarios x (TTFT, TPOT) x (P50, P99). Target with the default
/// bless (k = DEFAULT_RUNS): <= 1 % at tau 0, <= 5 % at tau 0.05.
fn family_null_rows() -> Vec<Experiment> {
    let kd = crate::baseline::DEFAULT_RUNS as usize;
    let mut v: Vec<Experiment> = [
        (0.0, 1),
        (0.0, kd),
        (0.03, 1),
        (0.03, kd),
        (0.05, 1),
        (0.05, kd),
    ]
    .into_iter()
    .map(|(tau, k)| Experiment {
        scenarios: 5,
        k,
        tau,
        ..Experiment::new(
            format!("null, 5 scenarios, tau {tau}, k {k}, n 20"),
            both(),
            p50_p99(),
        )
    })
    .collect();
    v.push(Experiment {
        scenarios: 5,
        n: 100,
        ..Experiment::new("null, 5 scenarios, tau 0, k 1, n 100", both(), p50_p99())
    });
    v
}

/// Power: TPOT P50 at n 20, with one baseline run and with the default bless; TTFT P50
/// sequential up to 300; a tail-only TTFT change.
fn power_rows() -> Vec<Experiment> {
    let kd = crate::baseline::DEFAULT_RUNS as usize;
    let tpot = |label: String, change| Experiment {
        change,
        count_metric: Some(Metric::Tpot),
        ..Experiment::new(label, vec![TPOT], vec![Quantile::P50])
    };
    let mut v = Vec::new();
    // Target >= 90 % for +20 % at n 20.
    for f in [1.1, 1.2, 1.5] {
        v.push(tpot(
            format!("TPOT +{:.0}% uniform, n 20", (f - 1.0) * 100.0),
            Change::Uniform(f),
        ));
    }
    // With the default bless (k runs, the fail tolerance widened to their spread): target
    // >= 90 % for +20 % TPOT P50 at tau 0; at tau 0.05 for comparison.
    for tau in [0.0, 0.05] {
        v.push(Experiment {
            k: kd,
            tau,
            ..tpot(
                format!("TPOT +20% uniform, n 20, tau {tau}, k {kd}"),
                Change::Uniform(1.2),
            )
        });
    }
    // TTFT P50 sequential up to 300 (target >= 90 % for +20 %).
    for f in [1.1, 1.2, 1.5] {
        v.push(Experiment {
            max_samples: Some(300),
            change: Change::Uniform(f),
            count_metric: Some(Metric::Ttft),
            ..Experiment::new(
                format!("TTFT +{:.0}% uniform, seq 20..300", (f - 1.0) * 100.0),
                vec![TTFT],
                vec![Quantile::P50],
            )
        });
    }
    for n in [20, 300] {
        v.push(Experiment {
            n,
            change: Change::SlowShare(0.10),
            count_metric: Some(Metric::Ttft),
            ..Experiment::new(
                format!("TTFT tail-only (slow 5%->10%), n {n}"),
                vec![TTFT],
                p50_p99(),
            )
        });
    }
    v
}

/// Sequential stopping under no change.
fn sequential_null_rows() -> Vec<Experiment> {
    [
        ("TPOT null, seq 20..300", TPOT),
        ("TTFT null, seq 20..300", TTFT),
    ]
    .into_iter()
    .map(|(label, p)| Experiment {
        max_samples: Some(300),
        ..Experiment::new(label, vec![p], vec![Quantile::P50])
    })
    .collect()
}

/// P99 false alarms at every n (target <= 1 %).
fn p99_null_rows() -> Vec<Experiment> {
    [20, 100, 300, 500, 1000]
        .into_iter()
        .map(|n| Experiment {
            n,
            ..Experiment::new(
                format!("TTFT P99 null, n {n}"),
                vec![TTFT],
                vec![Quantile::P99],
            )
        })
        .collect()
}
