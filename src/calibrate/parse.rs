//! The parse-failure rows of `calibrate` (issue 44): the structured-output check (the error
//! rate's one-sided Fisher test on the share of answers that did not parse) run through the gate
//! with the error-rate check beside it (a Holm family of 2). Each side's failures are drawn
//! Binomial(n, share): a base share of 5 % on both sides (false alarms), and a candidate at 15 %
//! or 30 % (power).

use crate::config::scenario::GateSpec;
use crate::gate::{self, ErrorCounts, QualitySamples, ScenarioSamples, Verdict};
use rand::rngs::StdRng;
use rand::Rng;

/// One experiment: n requests a side, the base's share of answers that do not parse and the
/// candidate's.
#[derive(Debug, Clone)]
pub struct ParseExperiment {
    pub label: String,
    pub n: usize,
    pub base: f64,
    pub candidate: f64,
}

/// The rows: no change at a 5 % base share (n 20, 100, 500), then 5 % -> 15 % and 5 % -> 30 %.
pub fn parse_experiments() -> Vec<ParseExperiment> {
    let mut v = Vec::new();
    for (what, candidate, ns) in [
        ("null 5%", 0.05, &[20, 100, 500][..]),
        ("5% -> 15%", 0.15, &[100, 500][..]),
        ("5% -> 30%", 0.30, &[20, 100][..]),
    ] {
        for &n in ns {
            v.push(ParseExperiment {
                label: format!("parse failures {what}, n {n}"),
                n,
                base: 0.05,
                candidate,
            });
        }
    }
    v
}

fn binomial(rng: &mut StdRng, n: usize, p: f64) -> usize {
    (0..n).filter(|_| rng.random::<f64>() < p).count()
}

/// The gate's input of one replicate: no latency metric, no failed request, the parse counts.
fn input(n: usize, fb: usize, fc: usize) -> ScenarioSamples {
    ScenarioSamples {
        scenario: "parse".into(),
        gate: GateSpec {
            metrics: Vec::new(),
            ..GateSpec::default()
        },
        metrics: Vec::new(),
        errors: ErrorCounts::new((0, n), (0, n)),
        stopped: ErrorCounts::default(),
        spread: Default::default(),
        looks: 1,
        slo: Vec::new(),
        design: gate::Design::Committed,
        itl: None,
        client_delay: None,
        pairing: gate::Pairing::NoIdentities,
        quality: QualitySamples {
            acceptance: None,
            parse: Some(ErrorCounts::new((fb, n), (fc, n))),
        },
    }
}

/// The share of replicates whose parse check FAILs.
pub fn run_parse(e: &ParseExperiment, reps: usize, seed: u64) -> f64 {
    let [fail, _] = super::noise::rates(reps, seed, |rng| {
        let fb = binomial(rng, e.n, e.base);
        let fc = binomial(rng, e.n, e.candidate);
        let (checks, _) = gate::evaluate(&[input(e.n, fb, fc)]);
        let failed = checks
            .iter()
            .any(|c| c.kind == gate::CheckKind::ParseRate && c.verdict == Verdict::Fail);
        if failed {
            0
        } else {
            1
        }
    });
    fail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn false_alarms_stay_under_alpha_and_a_large_increase_is_caught() {
        let rows = parse_experiments();
        let row = |l: &str| rows.iter().find(|e| e.label == l).unwrap();
        // Fisher's test is conservative: at most alpha 0.01 (plus Monte-Carlo error, sd 0.0022
        // at 2000 replicates)
        let null = run_parse(row("parse failures null 5%, n 100"), 2000, 5);
        assert!(null <= 0.01 + 3.0 * 0.0023, "{null}");
        let power = run_parse(row("parse failures 5% -> 30%, n 100"), 400, 6);
        assert!(power > 0.9, "{power}");
    }
}
