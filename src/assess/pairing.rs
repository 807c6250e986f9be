//! Whether the reference and the candidate sent the same requests (docs/gate.md "Paired
//! requests"), and when they did, each gated metric's per-request log differences.
//!
//! Matched means: every request on both sides carries its identity ([`WorkItem`]: index, prompt
//! id, lengths, conversation turn), no index appears twice within a run, and every candidate index
//! was sent by every reference run with the same identity. The reference's extra requests (a
//! candidate that stopped at an earlier look) are left out. A request failed on either side, or
//! without the metric (TPOT of a one-token answer), is left out of that metric's differences.

use super::arm::Arm;
use crate::config::Metric;
use crate::gate::{Paired, Pairing, Unmatched};
use crate::record::WorkItem;
use crate::stats::MIN_POSITIVE_LATENCY;
use std::collections::BTreeMap;

/// The pairing of `candidate` against `reference` over `metrics`.
pub fn pairing(reference: &Arm, candidate: &Arm, metrics: &[Metric]) -> Pairing {
    match matched(reference, candidate) {
        Ok(None) => Pairing::NoIdentities,
        Err(why) => Pairing::Unmatched(why),
        Ok(Some(pairs)) => Pairing::Matched(
            metrics
                .iter()
                .map(|&m| (m, log_differences(reference, candidate, &pairs, m)))
                .collect(),
        ),
    }
}

/// A matched candidate request: its position in `candidate.requests`, and the position of the
/// same request in each reference run (in `reference.requests`).
struct Pair {
    candidate: usize,
    reference: Vec<usize>,
}

/// `Ok(None)` when no request of either side has an identity (a fixed prompt), `Ok(Some)` the
/// pairs when the sides are matched, else why not.
fn matched(reference: &Arm, candidate: &Arm) -> Result<Option<Vec<Pair>>, Unmatched> {
    let all = reference.work.iter().chain(&candidate.work);
    if candidate.work.is_empty() || all.clone().all(Option::is_none) {
        return Ok(None);
    }
    if all.clone().any(Option::is_none) {
        return Err(Unmatched::Unidentified);
    }
    let cand = by_index(&candidate.work, 0..candidate.work.len())?;
    let mut runs = Vec::with_capacity(reference.runs.len());
    let mut start = 0;
    for &len in &reference.runs {
        runs.push(by_index(&reference.work, start..start + len)?);
        start += len;
    }
    if runs.is_empty() {
        return Ok(None);
    }
    cand.iter()
        .map(|(&index, &(c, cw))| {
            let reference = runs
                .iter()
                .map(|run| match run.get(&index) {
                    None => Err(Unmatched::Missing { index }),
                    Some(&(_, rw)) if rw != cw => Err(Unmatched::Differs { index }),
                    Some(&(r, _)) => Ok(r),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Pair {
                candidate: c,
                reference,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The requests at `positions` of `work` by their index: position and identity.
fn by_index(
    work: &[Option<WorkItem>],
    positions: std::ops::Range<usize>,
) -> Result<BTreeMap<u64, (usize, &WorkItem)>, Unmatched> {
    let mut out = BTreeMap::new();
    for i in positions {
        let w = work
            .get(i)
            .and_then(Option::as_ref)
            .ok_or(Unmatched::Unidentified)?;
        if out.insert(w.index, (i, w)).is_some() {
            return Err(Unmatched::Repeated { index: w.index });
        }
    }
    Ok(out)
}

/// Per matched request with metric `m` on the candidate and in every reference run:
/// ln(candidate) - the mean of ln(reference) over the runs (values clamped as the unpaired test
/// clamps them); and the reference runs' paired spread over the same requests.
fn log_differences(reference: &Arm, candidate: &Arm, pairs: &[Pair], m: Metric) -> Paired {
    let ln = |x: f64| x.max(MIN_POSITIVE_LATENCY).ln();
    let runs = pairs.first().map_or(0, |p| p.reference.len());
    let mut by_run: Vec<Vec<f64>> = vec![Vec::new(); runs];
    let d = pairs
        .iter()
        .filter_map(|p| {
            let c = candidate.value(p.candidate, m)?;
            let refs = p
                .reference
                .iter()
                .map(|&r| reference.value(r, m).map(ln))
                .collect::<Option<Vec<f64>>>()?;
            for (run, x) in by_run.iter_mut().zip(&refs) {
                run.push(*x);
            }
            Some(ln(c) - refs.iter().sum::<f64>() / refs.len() as f64)
        })
        .collect();
    Paired {
        d,
        tau: crate::stats::spread::paired_spread_upper(&by_run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::metric::Timings;

    fn item(index: u64, prompt: &str) -> WorkItem {
        WorkItem {
            index,
            entry: Some(index),
            prompt_id: prompt.into(),
            max_tokens: 8,
            input_tokens: None,
            conversation: None,
            turn: None,
        }
    }

    /// An arm of `runs`, each a list of (index, prompt, ttft or failed).
    fn arm(runs: &[Vec<(u64, &str, Option<f64>)>]) -> Arm {
        let mut a = Arm::default();
        for run in runs {
            a.runs.push(run.len());
            for &(i, p, t) in run {
                a.work.push(Some(item(i, p)));
                a.requests.push(t.map(|t| Timings {
                    ttft_ms: Some(t),
                    e2e_ms: Some(t),
                    ..Timings::default()
                }));
            }
        }
        a
    }

    #[test]
    fn matched_sides_give_each_request_its_log_ratio_against_the_runs_mean() {
        // Request 0: reference 10 and 40 ms (log mean = ln 20), candidate 22 -> ln 1.1.
        // Request 1: reference 100 and 100, candidate 50 -> ln 0.5. Reference runs in another
        // order than the candidate: matched by index.
        let r = arm(&[
            vec![(0, "a", Some(10.0)), (1, "b", Some(100.0))],
            vec![(1, "b", Some(100.0)), (0, "a", Some(40.0))],
        ]);
        let c = arm(&[vec![(1, "b", Some(50.0)), (0, "a", Some(22.0))]]);
        let Pairing::Matched(d) = pairing(&r, &c, &[Metric::Ttft]) else {
            panic!("not matched")
        };
        let p = &d[&Metric::Ttft];
        let d = &p.d;
        assert_eq!(d.len(), 2);
        assert!((d[0] - 1.1f64.ln()).abs() < 1e-12, "{d:?}");
        assert!((d[1] - 0.5f64.ln()).abs() < 1e-12, "{d:?}");
    }

    #[test]
    fn a_failed_request_on_either_side_is_left_out() {
        let r = arm(&[
            vec![(0, "a", Some(10.0)), (1, "b", None), (2, "c", Some(5.0))],
            vec![
                (0, "a", Some(10.0)),
                (1, "b", Some(9.0)),
                (2, "c", Some(5.0)),
            ],
        ]);
        let c = arm(&[vec![
            (0, "a", None),
            (1, "b", Some(9.0)),
            (2, "c", Some(10.0)),
        ]]);
        let Pairing::Matched(d) = pairing(&r, &c, &[Metric::Ttft]) else {
            panic!("not matched")
        };
        // Only request 2 (5 and 5 ms, candidate 10): ln 2.
        let d = &d[&Metric::Ttft].d;
        assert_eq!(d.len(), 1);
        assert!((d[0] - 2f64.ln()).abs() < 1e-12, "{d:?}");
    }

    #[test]
    fn different_requests_are_not_paired() {
        let r = arm(&[vec![(0, "a", Some(1.0)), (1, "b", Some(1.0))]]);
        let other = arm(&[vec![(0, "a", Some(1.0)), (1, "x", Some(1.0))]]);
        assert_eq!(
            pairing(&r, &other, &[Metric::Ttft]),
            Pairing::Unmatched(Unmatched::Differs { index: 1 })
        );
        // Request 2 of the candidate was sent by the first run only.
        let r2 = arm(&[
            vec![(0, "a", Some(1.0)), (2, "c", Some(1.0))],
            vec![(0, "a", Some(1.0))],
        ]);
        let c2 = arm(&[vec![(0, "a", Some(1.0)), (2, "c", Some(1.0))]]);
        assert_eq!(
            pairing(&r2, &c2, &[Metric::Ttft]),
            Pairing::Unmatched(Unmatched::Missing { index: 2 })
        );
        let twice = arm(&[vec![(0, "a", Some(1.0)), (0, "a", Some(1.0))]]);
        assert_eq!(
            pairing(&r, &twice, &[Metric::Ttft]),
            Pairing::Unmatched(Unmatched::Repeated { index: 0 })
        );
        let mut fixed = arm(&[vec![(0, "a", Some(1.0))]]);
        fixed.work = vec![None];
        assert_eq!(
            pairing(&r, &fixed, &[Metric::Ttft]),
            Pairing::Unmatched(Unmatched::Unidentified)
        );
    }

    #[test]
    fn a_fixed_prompt_has_no_identities() {
        let mut r = arm(&[vec![(0, "a", Some(1.0))]]);
        let mut c = r.clone();
        r.work = vec![None];
        c.work = vec![None];
        assert_eq!(pairing(&r, &c, &[Metric::Ttft]), Pairing::NoIdentities);
    }
}
