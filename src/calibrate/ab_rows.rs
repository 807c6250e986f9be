//! The A/B rows of `calibrate` (issue 17 targets in the comments), and the committed-baseline
//! rows at the same drift that show what measuring both arms in one run buys.

use super::ab::{AbDesign, AbExperiment, Drift};
use super::committed::Experiment;
use super::noise::{Change, Profile, TPOT, TTFT};
use crate::config::scenario::{Metric, Quantile};

/// The A/B rows of `calibrate` (issue 17 targets in comments), and the committed-baseline rows
/// under the same tau that show what measuring both arms in one run buys.
pub fn ab_experiments() -> (Vec<AbExperiment>, Vec<Experiment>) {
    let v = [
        interleaved_null_rows(),
        interleaved_power_rows(),
        blocked_null_rows(),
        blocked_power_rows(),
    ]
    .concat();
    (v, committed_rows())
}

/// TTFT and TPOT, the default gated metrics.
fn both() -> Vec<Profile> {
    vec![TTFT, TPOT]
}

/// P50 and P99, the default gated quantiles.
fn p50_p99() -> Vec<Quantile> {
    vec![Quantile::P50, Quantile::P99]
}

/// ` (fail 5%)` for a P50 fail tolerance other than the default; empty for the default.
fn band_label(band: Option<f64>) -> String {
    band.map_or(String::new(), |b: f64| format!(" (fail {:.0}%)", b * 100.0))
}

/// `blocked` or `pooled`: how the blocks of `design` are analysed.
fn analysis(design: AbDesign) -> &'static str {
    if matches!(design, AbDesign::Blocked(_)) {
        "blocked"
    } else {
        "pooled"
    }
}

/// Interleaved, family-wise false alarms (target <= 1 % at tau 0.05 and 0.20).
fn interleaved_null_rows() -> Vec<AbExperiment> {
    [
        (40, Drift::Walk(0.05), "walk tau 0.05"),
        (40, Drift::Walk(0.20), "walk tau 0.20"),
        (40, Drift::Step(0.20), "step +20%"),
        (500, Drift::Walk(0.20), "walk tau 0.20"),
    ]
    .into_iter()
    .map(|(n, drift, what)| AbExperiment {
        scenarios: 5,
        n,
        drift,
        ..AbExperiment::new(
            format!("ab interleaved null, 5 sc, {what}, n {n}"),
            both(),
            p50_p99(),
        )
    })
    .collect()
}

/// Interleaved power: TPOT +10 % at n 40 per arm (target >= 90 %), with the default 10 % band
/// and with a 5 % band, +20 % for comparison; TTFT +20 % within the sequential budget 20..300
/// (target >= 90 %).
fn interleaved_power_rows() -> Vec<AbExperiment> {
    let mut v = Vec::new();
    for (f, band) in [(1.1, None), (1.1, Some(0.05)), (1.2, None)] {
        for tau in [0.0, 0.05, 0.20] {
            v.push(AbExperiment {
                drift: Drift::Walk(tau),
                change: Change::Uniform(f),
                count_metric: Some(Metric::Tpot),
                fail_p50: band,
                ..AbExperiment::new(
                    format!(
                        "ab interleaved TPOT +{:.0}%{}, n 40, tau {tau}",
                        (f - 1.0) * 100.0,
                        band_label(band)
                    ),
                    vec![TPOT],
                    vec![Quantile::P50],
                )
            });
        }
    }
    for tau in [0.0, 0.05, 0.20] {
        v.push(AbExperiment {
            n: 20,
            max_samples: Some(300),
            drift: Drift::Walk(tau),
            change: Change::Uniform(1.2),
            count_metric: Some(Metric::Ttft),
            ..AbExperiment::new(
                format!("ab interleaved TTFT +20%, seq 20..300, tau {tau}"),
                vec![TTFT],
                vec![Quantile::P50],
            )
        });
    }
    v
}

/// Blocked: family-wise false alarms (target <= 1 % with linear drift of 10 %), the same blocks
/// analysed pooled, and more blocks; then ABAB, the order where pooling keeps a quarter of a
/// linear drift.
fn blocked_null_rows() -> Vec<AbExperiment> {
    let null = |label: String, n, design, drift| AbExperiment {
        scenarios: 5,
        n,
        design,
        drift,
        ..AbExperiment::new(label, both(), p50_p99())
    };
    let mut v = Vec::new();
    for (order, n) in [("ABBA", 40), ("ABBA", 500), ("ABBABAAB", 40)] {
        for (drift, what) in [
            (Drift::Linear(0.10), "linear +10%"),
            (Drift::Step(0.10), "step +10%"),
            (Drift::Walk(0.05), "walk tau 0.05"),
            (Drift::Walk(0.20), "walk tau 0.20"),
        ] {
            for design in [AbDesign::Blocked(order), AbDesign::Pooled(order)] {
                let how = analysis(design);
                v.push(null(
                    format!("ab {how} {order} null, 5 sc, {what}, n {n}"),
                    n,
                    design,
                    drift,
                ));
            }
        }
    }
    for design in [AbDesign::Blocked("ABAB"), AbDesign::Pooled("ABAB")] {
        let how = analysis(design);
        v.push(null(
            format!("ab {how} ABAB null, 5 sc, linear +30%, n 40"),
            40,
            design,
            Drift::Linear(0.30),
        ));
    }
    v
}

/// Blocked power under linear drift of 10 %: TPOT +10 % at n 40 per arm, TTFT +20 % at 300.
fn blocked_power_rows() -> Vec<AbExperiment> {
    [
        ("ABBA", TPOT, 1.1, 40, None),
        ("ABBA", TPOT, 1.1, 40, Some(0.05)),
        ("ABBA", TPOT, 1.2, 40, None),
        ("ABBA", TTFT, 1.2, 300, None),
        ("ABBABAAB", TPOT, 1.1, 40, Some(0.05)),
        ("ABBABAAB", TTFT, 1.2, 300, None),
    ]
    .into_iter()
    .map(|(order, p, f, n, band)| AbExperiment {
        n,
        design: AbDesign::Blocked(order),
        drift: Drift::Linear(0.10),
        change: Change::Uniform(f),
        count_metric: Some(p.metric),
        fail_p50: band,
        ..AbExperiment::new(
            format!(
                "ab blocked {order} {} +{:.0}%{}, n {n}, linear +10%",
                p.metric.label(),
                (f - 1.0) * 100.0,
                band_label(band)
            ),
            vec![p],
            vec![Quantile::P50],
        )
    })
    .collect()
}

/// Committed baseline (k = 5 blessed runs) at the same tau, as run-to-run drift.
fn committed_rows() -> Vec<Experiment> {
    let kd = crate::baseline::DEFAULT_RUNS as usize;
    let mut c = Vec::new();
    for tau in [0.05, 0.20] {
        c.push(Experiment {
            scenarios: 5,
            k: kd,
            n: 40,
            tau,
            ..Experiment::new(
                format!("committed null, 5 sc, tau {tau}, k {kd}, n 40"),
                both(),
                p50_p99(),
            )
        });
        c.push(Experiment {
            k: kd,
            n: 40,
            tau,
            change: Change::Uniform(1.1),
            count_metric: Some(Metric::Tpot),
            ..Experiment::new(
                format!("committed TPOT +10%, n 40, tau {tau}, k {kd}"),
                vec![TPOT],
                vec![Quantile::P50],
            )
        });
        c.push(Experiment {
            k: kd,
            tau,
            max_samples: Some(300),
            change: Change::Uniform(1.2),
            count_metric: Some(Metric::Ttft),
            ..Experiment::new(
                format!("committed TTFT +20%, seq 20..300, tau {tau}, k {kd}"),
                vec![TTFT],
                vec![Quantile::P50],
            )
        });
    }
    c
}
