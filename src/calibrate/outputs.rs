//! The `gate.outputs` rows of `calibrate` (docs/ab.md "Outputs that changed"): the `outputs`
//! check run on simulated answers, through the gate's own comparison
//! ([`crate::assess::outputs::compare`], [`crate::assess::outputs::compare_runs`] for `check`
//! against a multi-run baseline, and [`crate::assess::outputs::check`]).
//!
//! Answer model: a server that is not batch-invariant perturbs each send independently with
//! probability `self_divergence` (a perturbed answer differs from every other answer); the
//! candidate, in addition, answers otherwise for a share `changed` of the requests (every send
//! of them). Under no change, a pair of sends of one request differs with probability
//! 1 - (1 - q)^2 on the base (its repeats) and between the arms alike: the null the check tests.

use crate::assess::outputs::Sent;
use crate::output_text::OutputText;
use crate::record::{RequestRecord, WorkItem};
use rand::rngs::StdRng;
use rand::Rng;

/// Where the base arm's repeatability comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeats {
    /// One fixed prompt: the base's n requests are n - 1 pairs of repeats.
    FixedPrompt,
    /// n distinct prompts and `k` base requests sent again after the run.
    SentAgain(usize),
    /// `perfgate check` against a baseline of `k` bless runs of the same n distinct prompts
    /// ([`crate::assess::outputs::compare_runs`]): the check's n requests paired with run 1's,
    /// the other runs' (k - 1) x n answers its repeats.
    Baseline(usize),
}

/// One row: n requests per arm.
#[derive(Debug, Clone)]
pub struct OutputsExperiment {
    pub label: String,
    pub n: usize,
    pub repeats: Repeats,
    /// Probability that one send is perturbed (both arms).
    pub self_divergence: f64,
    /// Share of requests the candidate answers otherwise.
    pub changed: f64,
}

/// The rows: false alarms with a batch-invariant server and with one whose sends are perturbed
/// 5 % of the time (a pair of sends then differs 9.75 % of the time), and the power for a
/// candidate answering otherwise in 20 % of the requests; a fixed prompt (n - 1 pairs of
/// repeats), and distinct prompts with ab's n/2 repeats, as many as n (n 20), or 8 (n 100).
pub fn outputs_experiments() -> Vec<OutputsExperiment> {
    let mut v = Vec::new();
    for (what, changed) in [("no change", 0.0), ("+20% of requests changed", 0.2)] {
        for q in [0.0, 0.05] {
            for (n, repeats, how) in [
                (20, Repeats::FixedPrompt, "fixed prompt"),
                (100, Repeats::FixedPrompt, "fixed prompt"),
                (20, Repeats::SentAgain(10), "distinct, 10 repeats (ab's)"),
                (20, Repeats::SentAgain(20), "distinct, 20 repeats"),
                (100, Repeats::SentAgain(8), "distinct, 8 repeats"),
                (100, Repeats::SentAgain(50), "distinct, 50 repeats (ab's)"),
            ] {
                v.push(OutputsExperiment {
                    label: format!("outputs {what}, self {:.0}%, n {n}, {how}", q * 100.0),
                    n,
                    repeats,
                    self_divergence: q,
                    changed,
                });
            }
        }
    }
    // `perfgate check` against a multi-run baseline (after ab's rows, so their seeds stay)
    for (what, changed) in [("no change", 0.0), ("+20% of requests changed", 0.2)] {
        for q in [0.0, 0.05] {
            for (n, runs) in [(20, 2), (20, 5), (100, 5)] {
                v.push(OutputsExperiment {
                    label: format!(
                        "outputs {what}, self {:.0}%, n {n}, check against {runs} bless runs",
                        q * 100.0
                    ),
                    n,
                    repeats: Repeats::Baseline(runs),
                    self_divergence: q,
                    changed,
                });
            }
        }
    }
    v
}

/// One send's answer record: request `index` (a work item for distinct prompts), the canonical
/// answer `base` unless perturbed (then a text of its own).
fn send(index: u64, text: String, identified: bool) -> RequestRecord {
    RequestRecord {
        output: Some(OutputText::of(&text)),
        work: identified.then(|| WorkItem {
            index,
            entry: None,
            prompt_id: format!("{index:016x}"),
            max_tokens: 8,
            input_tokens: None,
            conversation: None,
            turn: None,
        }),
        ..RequestRecord::new(index as f64)
    }
}

/// [FAIL, WARN, PASS] rates of the `outputs` check over `reps` replicates (alpha 0.01).
pub fn run_outputs(e: &OutputsExperiment, reps: usize, seed: u64) -> [f64; 3] {
    let identified = e.repeats != Repeats::FixedPrompt;
    super::noise::rates(reps, seed, |rng| {
        let mut unique = 0u64;
        let mut answer = |rng: &mut StdRng, index: u64, wrong: bool| {
            let canonical = if identified { index } else { 0 };
            let text = if rng.random::<f64>() < e.self_divergence {
                unique += 1;
                format!("perturbed {unique}")
            } else if wrong {
                format!("changed {canonical}")
            } else {
                format!("canonical {canonical}")
            };
            send(index, text, identified)
        };
        if let Repeats::Baseline(k) = e.repeats {
            let runs: Vec<Vec<RequestRecord>> = (0..k)
                .map(|_| (0..e.n as u64).map(|i| answer(rng, i, false)).collect())
                .collect();
            let cand: Vec<RequestRecord> = (0..e.n as u64)
                .map(|i| {
                    let wrong = rng.random::<f64>() < e.changed;
                    answer(rng, i, wrong)
                })
                .collect();
            let runs: Vec<Vec<Sent>> = runs
                .iter()
                .map(|r| r.iter().map(Sent::of).collect())
                .collect();
            let cand: Vec<Sent> = cand.iter().map(Sent::of).collect();
            let s = crate::assess::outputs::compare_runs(&runs, &cand);
            return verdict(&s);
        }
        let base: Vec<RequestRecord> = (0..e.n as u64).map(|i| answer(rng, i, false)).collect();
        let cand: Vec<RequestRecord> = (0..e.n as u64)
            .map(|i| {
                let wrong = rng.random::<f64>() < e.changed;
                answer(rng, i, wrong)
            })
            .collect();
        let again: Vec<RequestRecord> = match e.repeats {
            Repeats::FixedPrompt | Repeats::Baseline(_) => Vec::new(),
            Repeats::SentAgain(k) => {
                let ix: Vec<u64> = (0..e.n as u64).collect();
                crate::runner::reference::spread(&ix, k, 1, &|_| 0)
                    .into_iter()
                    .map(|i| answer(rng, i, false))
                    .collect()
            }
        };
        let s = crate::assess::outputs::compare(&base, &cand, &again);
        verdict(&s)
    })
}

/// The `outputs` check's verdict at alpha 0.01 as a rate index: FAIL 0, WARN 1, else 2.
fn verdict(s: &crate::output_text::OutputsSummary) -> usize {
    use crate::gate::Verdict;
    match crate::assess::outputs::check("c", s, 0.01).verdict {
        Verdict::Fail => 0,
        Verdict::Warn => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outputs_check_false_fails_at_most_alpha_and_catches_a_fifth_changed() {
        let rows = outputs_experiments();
        let row = |l: &str| rows.iter().find(|e| e.label == l).unwrap();
        // a server whose sends are perturbed 5 % of the time, no change: Fisher's exact test
        // is conservative, at most alpha (0.01) plus Monte-Carlo error (sd 0.0031 at 1000)
        for l in [
            "outputs no change, self 5%, n 100, fixed prompt",
            "outputs no change, self 5%, n 20, distinct, 10 repeats (ab's)",
        ] {
            let r = run_outputs(row(l), 1000, 5);
            assert!(r[0] <= 0.01 + 3.0 * 0.0032, "{l}: {r:?}");
        }
        // batch-invariant and no change: every answer the same, PASS always
        let r = run_outputs(
            row("outputs no change, self 0%, n 20, fixed prompt"),
            200,
            6,
        );
        assert_eq!(r, [0.0, 0.0, 1.0]);
        // a fifth changed, batch-invariant, 100 requests against 99 repeats: caught
        let r = run_outputs(
            row("outputs +20% of requests changed, self 0%, n 100, fixed prompt"),
            200,
            7,
        );
        assert!(r[0] > 0.95, "{r:?}");
        // check against a 5-run baseline, 5 % perturbed sends, no change: at most alpha
        let l = "outputs no change, self 5%, n 20, check against 5 bless runs";
        let r = run_outputs(row(l), 1000, 8);
        assert!(r[0] <= 0.01 + 3.0 * 0.0032, "{l}: {r:?}");
        // a fifth changed, batch-invariant, 100 requests against 4 x 100 repeats: caught
        let r = run_outputs(
            row("outputs +20% of requests changed, self 0%, n 100, check against 5 bless runs"),
            200,
            9,
        );
        assert!(r[0] > 0.95, "{r:?}");
    }
}
