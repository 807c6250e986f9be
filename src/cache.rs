//! A conversation run's prefix-cache summary from its records and its cold reference
//! ([`summarize`], pure): the figures of [`crate::stats::cache`] (the measured hit rate and its
//! bounds, the reported one) over what the run recorded, and TTFT by turn position.

use crate::record::{ReferencePair, RequestRecord};
use crate::stats::cache::{measured_rate, reported_rate, CacheSummary, Triple, TurnFigures};

/// The cache summary of a conversation run: its successful `records`, its cold `reference` and
/// the server's own hit rate from `/metrics` (`server_hit_rate`).
pub fn summarize(
    records: &[RequestRecord],
    reference: &[ReferencePair],
    server_hit_rate: Option<f64>,
) -> CacheSummary {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
    let said = |r: &&RequestRecord| r.prompt_tokens.zip(r.cached_tokens);
    let reported_requests = ok.iter().filter(|r| r.cached_tokens.is_some()).count();
    let by_index: std::collections::HashMap<u64, &RequestRecord> = ok
        .iter()
        .filter_map(|r| r.work.as_ref().map(|w| (w.index, *r)))
        .collect();
    let mut triples = Vec::new();
    let mut on_reference = Vec::new();
    for p in reference {
        let Some(r) = by_index.get(&p.index) else {
            continue;
        };
        if let (Some(warm), Some(cold), Some(floor)) = (r.ttft_ms, p.cold_ttft_ms, p.floor_ttft_ms)
        {
            triples.push(Triple { warm, cold, floor });
            on_reference.extend(said(r));
        }
    }
    let (measured_hit_rate, measured_ci, unmeasured) = if reference.is_empty() {
        (None, None, None)
    } else {
        match measured_rate(&triples) {
            Ok((h, ci)) => (Some(h), ci, None),
            Err(why) => (None, None, Some(why)),
        }
    };
    let med = |f: fn(&Triple) -> f64| {
        let mut v: Vec<f64> = triples.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        crate::stats::quantile::quantile_type7(&v, 0.5)
    };
    CacheSummary {
        requests: ok.len(),
        reported_requests,
        reported_hit_rate: reported_rate(ok.iter().filter_map(said)),
        server_hit_rate,
        reference_sent: reference.len(),
        reference_pairs: triples.len(),
        measured_hit_rate,
        measured_ci,
        reported_on_reference: reported_rate(on_reference.into_iter()),
        warm_ttft_ms: med(|t| t.warm),
        cold_ttft_ms: med(|t| t.cold),
        floor_ttft_ms: med(|t| t.floor),
        span_ms: (!triples.is_empty())
            .then(|| triples.iter().map(|t| t.cold - t.floor).sum::<f64>() / triples.len() as f64),
        unmeasured,
        by_turn: by_turn(&ok),
    }
}

/// TTFT P50/P90 and the reported hit rate of each turn position.
fn by_turn(ok: &[&RequestRecord]) -> Vec<TurnFigures> {
    let mut turns: std::collections::BTreeMap<u32, Vec<&RequestRecord>> = Default::default();
    for r in ok {
        if let Some(t) = r.work.as_ref().and_then(|w| w.turn) {
            turns.entry(t).or_default().push(r);
        }
    }
    turns
        .into_iter()
        .filter_map(|(turn, rs)| {
            let mut v: Vec<f64> = rs.iter().filter_map(|r| r.ttft_ms).collect();
            v.sort_by(f64::total_cmp);
            Some(TurnFigures {
                turn,
                requests: rs.len(),
                ttft_p50_ms: crate::stats::quantile::quantile_type7(&v, 0.5)?,
                ttft_p90_ms: crate::stats::quantile::quantile_type7(&v, 0.9)?,
                reported_hit_rate: reported_rate(
                    rs.iter()
                        .filter_map(|r| r.prompt_tokens.zip(r.cached_tokens)),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::WorkItem;
    use crate::stats::cache::{drift, measured_rate, HitSource, Triple};

    fn rec(index: u64, turn: u32, ttft: f64, prompt: u64, cached: Option<u64>) -> RequestRecord {
        RequestRecord {
            ttft_ms: Some(ttft),
            prompt_tokens: Some(prompt),
            cached_tokens: cached,
            work: Some(WorkItem {
                index,
                entry: None,
                prompt_id: format!("p{index}"),
                max_tokens: 8,
                input_tokens: None,
                conversation: Some(index / 2),
                turn: Some(turn),
            }),
            ..RequestRecord::new(0.0)
        }
    }

    /// [`summarize`] with reference pairs for requests 1 (cold 210 ms) and 3 (cold 410 ms), floor
    /// 10 ms.
    fn summarize_1_3(records: &[RequestRecord]) -> CacheSummary {
        summarize(records, &[pair(1, 210.0, 10.0), pair(3, 410.0, 10.0)], None)
    }

    fn pair(index: u64, cold: f64, floor: f64) -> ReferencePair {
        ReferencePair {
            index,
            cold_ttft_ms: Some(cold),
            floor_ttft_ms: Some(floor),
            prompt_tokens: None,
            cold_cached_tokens: None,
        }
    }

    #[test]
    fn measured_reuse_by_hand() {
        // TTFT 10 ms + 0.5 ms per token computed. Request 1: prompt 400, 300 cached: warm 60,
        // cold 210, floor 10 -> (210 - 60) / (210 - 10) = 0.75. Request 3: prompt 800, 700
        // cached: warm 60, cold 410. Sum: (150 + 350) / (200 + 400) = 0.8333; reported
        // (300 + 700) / 1200 = 0.8333
        let records = vec![
            rec(0, 1, 110.0, 200, Some(0)),
            rec(1, 2, 60.0, 400, Some(300)),
            rec(2, 1, 110.0, 200, Some(0)),
            rec(3, 2, 60.0, 800, Some(700)),
        ];
        let s = summarize_1_3(&records);
        assert_eq!((s.reference_sent, s.reference_pairs), (2, 2));
        assert!((s.measured_hit_rate.unwrap() - 500.0 / 600.0).abs() < 1e-12);
        assert!((s.reported_on_reference.unwrap() - 1000.0 / 1200.0).abs() < 1e-12);
        assert!(s.disagreement().is_none());
        // over every request: 1000 of 1600
        assert!((s.reported_hit_rate.unwrap() - 1000.0 / 1600.0).abs() < 1e-12);
        assert_eq!(s.by_turn.len(), 2);
        assert_eq!((s.by_turn[0].turn, s.by_turn[0].requests), (1, 2));
        assert_eq!(s.by_turn[1].ttft_p50_ms, 60.0);
        assert_eq!(s.by_turn[0].reported_hit_rate, Some(0.0));
        assert_eq!(s.warm_ttft_ms, Some(60.0));
        assert_eq!(s.cold_ttft_ms, Some(310.0));
        assert_eq!(s.span_ms, Some(300.0));
    }

    #[test]
    fn a_server_that_says_everything_was_cached_but_recomputed_is_caught() {
        let records = vec![
            rec(1, 2, 205.0, 400, Some(400)),
            rec(3, 2, 400.0, 800, Some(800)),
        ];
        let s = summarize_1_3(&records);
        // (5 + 10) / 600 = 0.025 measured, 100 % reported
        assert!((s.measured_hit_rate.unwrap() - 0.025).abs() < 1e-12);
        let (r, m) = s.disagreement().unwrap();
        assert_eq!(r, 1.0);
        assert!((m - 0.025).abs() < 1e-12);
        // judged by the measured rate
        assert_eq!(s.hit_rate().unwrap().1, HitSource::Measured);
    }

    #[test]
    fn too_short_a_prefill_is_said_not_guessed_and_leaves_nothing_to_judge() {
        let records = vec![rec(1, 2, 10.0, 40, Some(40))];
        let s = summarize(&records, &[pair(1, 11.0, 9.5)], None);
        assert_eq!(s.measured_hit_rate, None);
        assert!(s
            .unmeasured
            .as_deref()
            .unwrap()
            .contains("only 1.5 ms longer"));
        // the server's 100 % is not taken instead: a reference ran and could not check it
        assert_eq!(s.hit_rate(), None);
        assert_eq!(
            measured_rate(&[]).unwrap_err(),
            "no reference request pair succeeded"
        );
        // a warm TTFT above the cold one is no reuse, not a negative one
        let slow = Triple {
            warm: 300.0,
            cold: 210.0,
            floor: 10.0,
        };
        assert_eq!(measured_rate(&[slow]).unwrap().0, 0.0);
        // without a reference (reference: 0) the reported rate is judged, said unchecked
        let s = summarize(&records, &[], None);
        assert_eq!(s.hit_rate(), Some((1.0, HitSource::Reported)));
    }

    #[test]
    fn a_hit_rate_that_moved_is_a_drift_with_both_figures() {
        let records = vec![rec(1, 2, 60.0, 400, Some(300))];
        let on = summarize(&records, &[pair(1, 210.0, 10.0)], None);
        // the cache off: warm as slow as cold, nothing reported
        let off_records = vec![rec(1, 2, 208.0, 400, None)];
        let off = summarize(&off_records, &[pair(1, 210.0, 10.0)], None);
        // (the caller names the two runs between the pieces)
        let said = |[lead, was, now, tail]: [String; 4]| format!("{lead}{was} | {now}{tail}");
        let d = said(drift(&on, &off).unwrap());
        assert!(
            d.starts_with("the prefix cache hit rate changed: measured 75% | 1%; reported 75% -> not reported, TTFT warm/cold 0.29 -> 0.99"),
            "{d}"
        );
        assert_eq!(drift(&on, &on), None);
        // without a reference: by the reported rates
        let a = summarize(&records, &[], None);
        let b = summarize(&[rec(1, 2, 208.0, 400, Some(0))], &[], None);
        assert!(said(drift(&a, &b).unwrap()).contains("reported 75% | 0%"));
    }
}
