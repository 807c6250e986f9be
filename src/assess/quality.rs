//! What a run's server produced beside how fast, as the gate and the reports read it: the
//! speculative-decoding acceptance of both sides ([`sides`], shown in the results) and the
//! `gate.acceptance` check's per-request rates ([`samples`]).

use crate::baseline::Baseline;
use crate::config::Scenario;
use crate::gate::{AcceptanceSamples, QualitySamples, RequestRate};
use crate::record::RequestRecord;
use crate::runner::RunOutput;
use crate::speculative::{self, Acceptance, AcceptanceSides, Drafts};
use crate::structured::Parsed;
use std::collections::BTreeMap;

/// One successful request as the acceptance figures read it: its index in the run (pairing),
/// its draft counts and its output tokens.
type Row = (Option<u64>, Option<Drafts>, Option<u64>);

fn rows_of_records(recs: &[RequestRecord]) -> Vec<Row> {
    recs.iter()
        .filter(|r| r.ok())
        .map(|r| (r.work.as_ref().map(|w| w.index), r.draft, r.output_tokens))
        .collect()
}

/// The acceptance of a run: its requests' own counts, else the server's `/metrics` counters
/// over the run (vLLM).
fn acceptance(rows: &[Row], metrics: Option<&BTreeMap<String, f64>>) -> Option<Acceptance> {
    speculative::summarize(rows.iter().map(|&(_, d, o)| (d, o))).or_else(|| {
        let m = metrics?;
        speculative::from_metrics(
            *m.get("vllm_spec_drafts")?,
            *m.get("vllm_spec_draft_tokens")?,
            *m.get("vllm_spec_accepted_tokens")?,
        )
    })
}

/// The reference's side of the output checks, resolved with the reference ([`super::judge()`]):
/// its successful requests' draft rows, acceptance and parse outcomes, and whether any of its
/// requests has a parse outcome.
#[derive(Debug, Clone)]
pub struct BaseSide {
    rows: Vec<Row>,
    acceptance: Option<Acceptance>,
    parsed: Vec<Parsed>,
    any_parsed: bool,
}

impl BaseSide {
    /// A committed baseline's side.
    pub fn of_baseline(b: &Baseline) -> BaseSide {
        let ok = || b.records().filter(|r| r.error.is_none());
        let rows: Vec<Row> = ok()
            .map(|r| {
                let d = r.server_timings.as_ref().and_then(Drafts::from_timings);
                (r.work.as_ref().map(|w| w.index), d, r.output_tokens)
            })
            .collect();
        BaseSide {
            acceptance: acceptance(&rows, None),
            rows,
            parsed: ok().filter_map(|r| r.structured).collect(),
            any_parsed: b.records().any(|r| r.structured.is_some()),
        }
    }

    /// A base arm's side, from its run.
    pub fn of_run(run: &RunOutput) -> BaseSide {
        let rows = rows_of_records(&run.records);
        let parsed = parsed_of_records(&run.records);
        BaseSide {
            acceptance: acceptance(&rows, run.server_side.as_ref().map(|s| &s.metrics)),
            rows,
            any_parsed: !parsed.is_empty(),
            parsed,
        }
    }
}

/// Both sides' speculative decoding, for the results; `None` when the candidate reported none.
/// `base`: the usable reference's side, if any.
pub fn sides(base: Option<&BaseSide>, cand: &RunOutput) -> Option<AcceptanceSides> {
    let m = cand.server_side.as_ref().map(|s| &s.metrics);
    let candidate = acceptance(&rows_of_records(&cand.records), m)?;
    Some(AcceptanceSides {
        candidate,
        reference: base.and_then(|b| b.acceptance.clone()),
    })
}

/// The structured-output outcomes of a run's successful requests that were checked.
fn parsed_of_records(recs: &[RequestRecord]) -> Vec<Parsed> {
    recs.iter()
        .filter(|r| r.ok())
        .filter_map(|r| r.structured)
        .collect()
}

/// The candidate's structured-output summary, for the results (`None`: nothing was checked).
pub fn parse_summary(cand: &RunOutput) -> Option<crate::structured::ParseSummary> {
    crate::structured::summarize(parsed_of_records(&cand.records))
}

/// Why the parse-failure check is missing although the candidate's answers were checked: the
/// reference has no outcomes (a baseline blessed before perfgate judged structured output, or
/// one whose requests asked for none), `whose` ("the baseline"). `None` when the check can run
/// or nothing was checked.
pub fn parse_not_compared(base: &BaseSide, whose: &str, cand: &RunOutput) -> Option<String> {
    if parsed_of_records(&cand.records).is_empty() {
        return None;
    }
    (!base.any_parsed).then(|| format!(
        "structured output: the parse-failure share is not compared: {whose} has no parse outcomes (blessed before perfgate judged structured output, or its requests asked for none); bless again to gate it"
    ))
}

/// (did not parse, checked) of a list of outcomes.
fn parse_counts(p: &[Parsed]) -> (usize, usize) {
    (p.iter().filter(|&&o| o != Parsed::Ok).count(), p.len())
}

/// The gate's output-check input of a scenario: `gate.acceptance`'s per-request rates (every
/// request that drafted, on both sides) when the scenario gates it; the parse-failure counts of
/// both sides when both checked structured output.
pub fn samples(sc: &Scenario, base: &BaseSide, cand: &RunOutput) -> QualitySamples {
    let mut q = QualitySamples::default();
    let cand_parsed = parsed_of_records(&cand.records);
    if !base.parsed.is_empty() && !cand_parsed.is_empty() {
        q.parse = Some(crate::gate::ErrorCounts::new(
            parse_counts(&base.parsed),
            parse_counts(&cand_parsed),
        ));
    }
    if let Some(max_drop) = sc.gate.acceptance {
        let rates = |rows: &[Row]| -> Vec<RequestRate> {
            rows.iter()
                .filter_map(|&(index, d, _)| {
                    Some(RequestRate {
                        index,
                        rate: d?.rate()?,
                    })
                })
                .collect()
        };
        let c_rows = rows_of_records(&cand.records);
        let c_acc = acceptance(&c_rows, None);
        q.acceptance = Some(AcceptanceSamples {
            baseline: rates(&base.rows),
            candidate: rates(&c_rows),
            pooled: (
                base.acceptance.as_ref().and_then(|a| a.rate),
                c_acc.and_then(|a| a.rate),
            ),
            max_drop,
        });
    }
    q
}

/// "Where the time went" when a TPOT check FAILs and the server drafts: the acceptance rate and
/// mean acceptance length now and in the reference, since a draft model accepted less often
/// decodes fewer tokens per step (docs/metrics.md "Speculative decoding"). `None` without a
/// TPOT FAIL or without acceptance figures.
pub fn tpot_fail_note(res: &crate::results::ScenarioResult) -> Option<String> {
    let sp = res.speculative.as_ref()?;
    let fail = res.checks.iter().find(|c| {
        c.verdict == crate::gate::Verdict::Fail && c.metric == Some(crate::config::Metric::Tpot)
    })?;
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0));
    let len = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
    let c = &sp.candidate;
    let was = match &sp.reference {
        Some(r) => format!(
            " (reference {}, {} tokens a step)",
            pct(r.rate),
            len(r.mean_length)
        ),
        None => " (the reference reported none)".to_string(),
    };
    Some(format!(
        "where the time went: TPOT {} FAIL {}: speculative decoding accepted {} of draft tokens, {} tokens a target step{was}",
        fail.kind.label(),
        crate::report::fmt_change(fail),
        pct(c.rate),
        len(c.mean_length)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No request carries counts: vLLM's counters over the run, 100 drafts of 300 tokens with
    /// 240 accepted: rate 0.8, mean length 1 + 240 / 100 = 3.4. With counts, they win.
    #[test]
    fn the_servers_counters_when_no_request_carries_counts() {
        let m: BTreeMap<String, f64> = [
            ("vllm_spec_drafts", 100.0),
            ("vllm_spec_draft_tokens", 300.0),
            ("vllm_spec_accepted_tokens", 240.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let a = acceptance(&[(None, None, Some(10))], Some(&m)).unwrap();
        assert_eq!(a.source, speculative::AcceptanceSource::Metrics);
        assert_eq!(a.rate, Some(0.8));
        assert!((a.mean_length.unwrap() - 3.4).abs() < 1e-12);
        let d = Drafts {
            drafted: 4,
            accepted: 2,
        };
        let a = acceptance(&[(Some(0), Some(d), Some(10))], Some(&m)).unwrap();
        assert_eq!(a.source, speculative::AcceptanceSource::Requests);
        assert_eq!(a.rate, Some(0.5));
        assert_eq!(acceptance(&[(None, None, Some(10))], None), None);
    }
}
