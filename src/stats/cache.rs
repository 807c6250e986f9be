//! The prefix cache of a conversation scenario (docs/scenarios.md "Conversations"), from its
//! records and its cold reference (pure): the hit rate the server reported, the hit rate its
//! TTFTs show, and TTFT by turn position.
//!
//! Reported: the prompt tokens the server said it served from its cache over the prompt tokens
//! it counted, summed over the requests that said (`usage...cached_tokens`, llama.cpp's
//! `timings.cache_n`). Never trusted alone: servers misreport it.
//!
//! Measured: each reference pair sends a measured request's prompt again with a cache-busting
//! first line (cold: nothing reused) and once more (hot: everything reused). If prefill time is
//! proportional to the tokens not reused, a request whose share h of its prompt was reused takes
//! `ttft = hot + (1 - h) (cold - hot)`, so over the pairs
//! `h = sum(cold - warm) / sum(cold - hot)` (warm: the request's measured TTFT), which weighs
//! each request by its prompt as the reported rate does, and needs no model of the server's
//! fixed costs (the hot request pays them too).

use crate::record::{ReferencePair, RequestRecord};
use serde::{Deserialize, Serialize};

/// The reported and measured hit rates may differ by this much (absolute) and still agree.
/// Prefill is not quite linear in the tokens not reused (attention grows with the context, the
/// first token's decode is in every TTFT), and a small reference has sampling noise; 15 points
/// tell a cache that works from one that does not, and a server that reports 100 % from one
/// that reuses nothing.
pub const AGREE_WITHIN: f64 = 0.15;
/// A hit rate that moved this much (absolute) since the baseline is a drift.
pub const DRIFT_AT: f64 = 0.15;
/// The least mean cold - hot TTFT, ms, for the TTFTs to resolve reuse at all.
pub const MIN_SPAN_MS: f64 = 3.0;
/// A mean cold - hot TTFT, ms, that shows the server reusing a prompt beyond doubt (see
/// [`drift`]).
pub const REUSE_SEEN_MS: f64 = 10.0;

/// TTFT and reuse of one turn position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnFigures {
    /// The turn (1-based).
    pub turn: u32,
    /// Successful requests of this turn.
    pub requests: usize,
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    /// The reported hit rate of this turn's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_hit_rate: Option<f64>,
}

/// The prefix cache of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSummary {
    /// Successful measured requests.
    pub requests: usize,
    /// Of them, those whose cached tokens the server reported.
    pub reported_requests: usize,
    /// Cached over prompt tokens, summed over the requests that reported both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_hit_rate: Option<f64>,
    /// The server's own hit rate from `/metrics` (vLLM, SGLang, llama.cpp), when scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_hit_rate: Option<f64>,
    /// Reference pairs with a cold, a hot and a measured TTFT.
    pub reference_pairs: usize,
    /// The hit rate the TTFTs show (module comment), 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_hit_rate: Option<f64>,
    /// The reported hit rate of the reference's requests (what `measured_hit_rate` checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_on_reference: Option<f64>,
    /// Median measured (warm), cold and hot TTFT of the reference's requests, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_ttft_ms: Option<f64>,
    /// Mean cold - hot TTFT over the reference, ms: what a fully reused prompt saves. About 0
    /// when the server reuses nothing, not even an exact repeat (or when its prefill is too
    /// short to see).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_ms: Option<f64>,
    /// Why there is no measured hit rate, when there is a reference but none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmeasured: Option<String>,
    /// TTFT by turn position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_turn: Vec<TurnFigures>,
}

impl CacheSummary {
    /// The hit rate to judge by: the measured one when the reference gave one, else the
    /// reported one.
    pub fn hit_rate(&self) -> Option<(f64, HitSource)> {
        self.measured_hit_rate
            .map(|h| (h, HitSource::Measured))
            .or(self.reported_hit_rate.map(|h| (h, HitSource::Reported)))
    }

    /// When the reported and measured hit rates of the same requests disagree by more than
    /// [`AGREE_WITHIN`]: both.
    pub fn disagreement(&self) -> Option<(f64, f64)> {
        match (self.reported_on_reference, self.measured_hit_rate) {
            (Some(r), Some(m)) if (r - m).abs() > AGREE_WITHIN => Some((r, m)),
            _ => None,
        }
    }

    /// `reported 72 %, measured 70 % (TTFT 41 ms warm, 120 cold, 12 hot over 8 requests)`.
    pub fn describe(&self) -> String {
        let pct = |x: f64| format!("{:.0} %", x * 100.0);
        let mut parts = vec![match self.reported_hit_rate {
            Some(r) => format!(
                "reported {} ({} of {} requests said)",
                pct(r),
                self.reported_requests,
                self.requests
            ),
            None => "not reported by the server".to_string(),
        }];
        if let Some(s) = self.server_hit_rate {
            parts.push(format!("server /metrics {}", pct(s)));
        }
        match (self.measured_hit_rate, &self.unmeasured) {
            (Some(m), _) => parts.push(format!(
                "measured {} (TTFT {} warm, {} cold, {} fully cached, over {} requests)",
                pct(m),
                ms(self.warm_ttft_ms),
                ms(self.cold_ttft_ms),
                ms(self.hot_ttft_ms),
                self.reference_pairs
            )),
            (None, Some(why)) => parts.push(format!("not measured: {why}")),
            (None, None) => {}
        }
        parts.join(", ")
    }
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1} ms"))
}

/// Which hit rate a judgement used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitSource {
    Measured,
    Reported,
}

impl HitSource {
    pub fn as_str(self) -> &'static str {
        match self {
            HitSource::Measured => "measured",
            HitSource::Reported => "reported",
        }
    }
}

/// Cached over prompt tokens summed over `pairs` of (prompt, cached) tokens; `None` without any.
pub fn reported_rate(pairs: impl Iterator<Item = (u64, u64)>) -> Option<f64> {
    let (mut p, mut c, mut n) = (0u64, 0u64, 0usize);
    for (prompt, cached) in pairs {
        p = p.saturating_add(prompt);
        c = c.saturating_add(cached.min(prompt));
        n += 1;
    }
    (n > 0 && p > 0).then(|| c as f64 / p as f64)
}

/// The measured hit rate from `(warm, cold, hot)` TTFTs, ms (module comment); the reason when
/// the TTFTs cannot tell.
pub fn measured_rate(triples: &[(f64, f64, f64)]) -> Result<f64, String> {
    if triples.is_empty() {
        return Err("no reference request pair succeeded".into());
    }
    let span: f64 = triples.iter().map(|(_, c, h)| c - h).sum();
    let mean_span = span / triples.len() as f64;
    if mean_span < MIN_SPAN_MS {
        return Err(format!(
            "an exact repeat of a prompt was only {mean_span:.1} ms faster than its cold first send: either the server reuses nothing (no prefix cache, or it is off) or its prefill is too short to tell (lengthen the system prompt or the turns)"
        ));
    }
    let saved: f64 = triples.iter().map(|(w, c, _)| c - w).sum();
    Ok((saved / span).clamp(0.0, 1.0))
}

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
        if let (Some(w), Some(c), Some(h)) = (r.ttft_ms, p.cold_ttft_ms, p.hot_ttft_ms) {
            triples.push((w, c, h));
            on_reference.extend(said(r));
        }
    }
    let turns = by_turn(&ok);
    let (measured_hit_rate, unmeasured) = if reference.is_empty() {
        (None, None)
    } else {
        match (measured_rate(&triples), prefill_seen(&turns)) {
            (Ok(h), _) => (Some(h), None),
            // an exact repeat no faster than cold, while longer prompts take visibly longer:
            // the server computes every prompt in full, it reuses nothing
            (Err(_), Some(_)) if !triples.is_empty() => (Some(0.0), None),
            (Err(why), _) => (None, Some(why)),
        }
    };
    let med = |f: fn(&(f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = triples.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        super::quantile::quantile_type7(&v, 0.5)
    };
    CacheSummary {
        requests: ok.len(),
        reported_requests,
        reported_hit_rate: reported_rate(ok.iter().filter_map(said)),
        server_hit_rate,
        reference_pairs: triples.len(),
        measured_hit_rate,
        reported_on_reference: reported_rate(on_reference.into_iter()),
        warm_ttft_ms: med(|t| t.0),
        cold_ttft_ms: med(|t| t.1),
        hot_ttft_ms: med(|t| t.2),
        span_ms: (!triples.is_empty())
            .then(|| triples.iter().map(|(_, c, h)| c - h).sum::<f64>() / triples.len() as f64),
        unmeasured,
        by_turn: turns,
    }
}

/// How much longer the last turn's TTFT P50 is than the first's, ms, when that shows the
/// prefill's cost (at least [`REUSE_SEEN_MS`]): the history grows turn after turn.
fn prefill_seen(turns: &[TurnFigures]) -> Option<f64> {
    let (first, last) = (turns.first()?, turns.last()?);
    let grows = last.ttft_p50_ms - first.ttft_p50_ms;
    (last.turn > first.turn && grows >= REUSE_SEEN_MS).then_some(grows)
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
                ttft_p50_ms: super::quantile::quantile_type7(&v, 0.5)?,
                ttft_p90_ms: super::quantile::quantile_type7(&v, 0.9)?,
                reported_hit_rate: reported_rate(
                    rs.iter()
                        .filter_map(|r| r.prompt_tokens.zip(r.cached_tokens)),
                ),
            })
        })
        .collect()
}

/// What changed in the prefix cache between the baseline's run (`was`) and this one (`now`),
/// as a drift's words, when its hit rate moved by [`DRIFT_AT`] or more: by the measured rates
/// when both runs have one, else by the reported ones.
///
/// A reference that measured reuse in the baseline (an exact repeat [`REUSE_SEEN_MS`] or more
/// faster than cold) and now finds an exact repeat no faster than cold ([`MIN_SPAN_MS`]) shows a
/// server that stopped reusing anything: measured 0 now, whatever it reports.
pub fn drift(was: &CacheSummary, now: &CacheSummary) -> Option<String> {
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    let stopped = was.span_ms.is_some_and(|s| s >= REUSE_SEEN_MS)
        && now.span_ms.is_some_and(|s| s < MIN_SPAN_MS);
    let (kind, a, b) = match (was.measured_hit_rate, now.measured_hit_rate) {
        (Some(a), Some(b)) => ("measured", a, b),
        (Some(a), None) if stopped => ("measured", a, 0.0),
        _ => ("reported", was.reported_hit_rate?, now.reported_hit_rate?),
    };
    if (b - a).abs() < DRIFT_AT {
        return None;
    }
    let other = match kind {
        "measured" => {
            let reported = match (was.reported_hit_rate, now.reported_hit_rate) {
                (Some(x), Some(y)) => format!("; reported {} -> {}", pct(x), pct(y)),
                (Some(x), None) => format!("; reported {} -> not reported", pct(x)),
                _ => "; not reported by the server".into(),
            };
            let repeat = if stopped {
                format!(
                    "; an exact repeat saves {:.1} ms now vs {:.1} ms then",
                    now.span_ms.unwrap_or(0.0),
                    was.span_ms.unwrap_or(0.0)
                )
            } else {
                String::new()
            };
            format!("{reported}{repeat}")
        }
        _ => match (was.measured_hit_rate, now.measured_hit_rate) {
            (Some(x), Some(y)) => format!("; measured {} -> {}", pct(x), pct(y)),
            _ => String::new(),
        },
    };
    let ratio = |s: &CacheSummary| {
        s.warm_ttft_ms
            .zip(s.cold_ttft_ms)
            .filter(|(_, c)| *c > 0.0)
            .map(|(w, c)| format!("{:.2}", w / c))
    };
    let ratios = match (ratio(was), ratio(now)) {
        (Some(x), Some(y)) => format!(", TTFT warm/cold {x} -> {y}"),
        _ => String::new(),
    };
    Some(format!(
        "the prefix cache hit rate changed: {kind} {} in the baseline vs {} now{other}{ratios} (a server configuration or workload change; gate it with gate.cache.hit_rate)",
        pct(a),
        pct(b)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::WorkItem;

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

    fn pair(index: u64, cold: f64, hot: f64) -> ReferencePair {
        ReferencePair {
            index,
            cold_ttft_ms: Some(cold),
            hot_ttft_ms: Some(hot),
            prompt_tokens: None,
            cold_cached_tokens: None,
            hot_cached_tokens: None,
        }
    }

    #[test]
    fn measured_reuse_by_hand() {
        // request 1: prompt 400, 300 cached; TTFT 10 + 0.5 ms per uncached token: warm 60,
        // cold 210, hot 10 -> (210 - 60) / (210 - 10) = 0.75
        // request 3: prompt 800, 700 cached: warm 60, cold 410, hot 10.
        // sum: (150 + 350) / (200 + 400) = 0.8333; reported (300 + 700) / 1200 = 0.8333
        let records = vec![
            rec(0, 1, 110.0, 200, Some(0)),
            rec(1, 2, 60.0, 400, Some(300)),
            rec(2, 1, 110.0, 200, Some(0)),
            rec(3, 2, 60.0, 800, Some(700)),
        ];
        let s = summarize(
            &records,
            &[pair(1, 210.0, 10.0), pair(3, 410.0, 10.0)],
            None,
        );
        assert_eq!(s.reference_pairs, 2);
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
    }

    #[test]
    fn a_server_that_says_everything_was_cached_but_recomputed_is_caught() {
        let records = vec![
            rec(1, 2, 205.0, 400, Some(400)),
            rec(3, 2, 400.0, 800, Some(800)),
        ];
        let s = summarize(
            &records,
            &[pair(1, 210.0, 10.0), pair(3, 410.0, 10.0)],
            None,
        );
        // (5 + 10) / 600 = 0.025 measured, 100 % reported
        assert!((s.measured_hit_rate.unwrap() - 0.025).abs() < 1e-12);
        let (r, m) = s.disagreement().unwrap();
        assert_eq!(r, 1.0);
        assert!((m - 0.025).abs() < 1e-12);
    }

    #[test]
    fn too_short_a_prefill_is_said_not_guessed() {
        let records = vec![rec(1, 2, 10.0, 40, Some(30))];
        let s = summarize(&records, &[pair(1, 11.0, 9.5)], None);
        assert_eq!(s.measured_hit_rate, None);
        assert!(s.unmeasured.unwrap().contains("only 1.5 ms faster"));
        assert_eq!(s.span_ms, Some(1.5));
        assert_eq!(
            measured_rate(&[]).unwrap_err(),
            "no reference request pair succeeded"
        );
        // a warm TTFT above the cold one is no reuse, not a negative one
        assert_eq!(measured_rate(&[(300.0, 210.0, 10.0)]), Ok(0.0));
    }

    #[test]
    fn a_hit_rate_that_moved_is_a_drift_with_both_figures() {
        let records = vec![rec(1, 2, 60.0, 400, Some(300))];
        let on = summarize(&records, &[pair(1, 210.0, 10.0)], None);
        let off_records = vec![rec(1, 2, 208.0, 400, Some(0))];
        let off = summarize(&off_records, &[pair(1, 210.0, 10.0)], None);
        let d = drift(&on, &off).unwrap();
        assert!(
            d.starts_with("the prefix cache hit rate changed: measured 75 % in the baseline vs 1 % now; reported 75 % -> 0 %, TTFT warm/cold 0.29 -> 0.99"),
            "{d}"
        );
        assert_eq!(drift(&on, &on), None);
        // without a reference: by the reported rates
        let a = summarize(&records, &[], None);
        let b = summarize(&off_records, &[], None);
        assert!(drift(&a, &b)
            .unwrap()
            .contains("reported 75 % in the baseline vs 0 % now"));
        // the cache switched off: an exact repeat is as slow as cold (cold 210, hot 209): the
        // reference measures nothing, the baseline's 200 ms span says reuse stopped
        let none = vec![rec(1, 2, 209.5, 400, None)];
        let stopped = summarize(&none, &[pair(1, 210.0, 209.0)], None);
        assert_eq!(stopped.measured_hit_rate, None);
        // ... and with a first turn 100 ms faster than the second (the history's prefill
        // shows), the same reference measures 0 reuse itself
        let grown = vec![rec(0, 1, 109.5, 200, None), rec(1, 2, 209.5, 400, None)];
        let zero = summarize(&grown, &[pair(1, 210.0, 209.0)], None);
        assert_eq!((zero.measured_hit_rate, zero.unmeasured), (Some(0.0), None));
        let d = drift(&on, &stopped).unwrap();
        assert!(
            d.starts_with("the prefix cache hit rate changed: measured 75 % in the baseline vs 0 % now; reported 75 % -> not reported; an exact repeat saves 1.0 ms now vs 200.0 ms then"),
            "{d}"
        );
    }
}
