//! The prefix cache of a scenario's run, judged (docs/scenarios.md "Conversations"): its
//! [`CacheSummary`], the note when the server's reported reuse and the TTFTs disagree, the
//! `gate.cache.hit_rate` check, and the drift when the hit rate moved since the baseline (a
//! server configuration or workload change, named, never a silent latency FAIL).

use super::drift::{Drift, DriftWhy};
use crate::baseline::Baseline;
use crate::config::metric::Phase;
use crate::config::{Metric, Scenario};
use crate::gate::{Check, CheckKind, Verdict};
use crate::runner::RunOutput;
use crate::stats::cache::{self, pct, CacheSummary};

/// The run's prefix-cache summary: for a conversation scenario, or one with
/// `gate.cache.hit_rate`.
pub fn summary(sc: &Scenario, run: &RunOutput) -> Option<CacheSummary> {
    if sc.request.conversation.is_none() && sc.gate.cache_hit_rate.is_none() {
        return None;
    }
    let server = run
        .server_side
        .as_ref()
        .and_then(|s| server_hit_rate(&s.metrics));
    Some(crate::cache::summarize(
        &run.records,
        &run.cache_reference,
        server,
    ))
}

/// The server's own prefix-cache hit rate from its `/metrics` figures
/// ([`crate::server::metrics`]): vLLM's hits over queries, SGLang's gauge, llama.cpp's cached
/// prompt tokens over all prompt tokens it was sent.
pub fn server_hit_rate(figures: &std::collections::BTreeMap<String, f64>) -> Option<f64> {
    let get = |k: &str| figures.get(k).copied().filter(|x| x.is_finite());
    get("vllm_prefix_cache_hit_rate")
        .or_else(|| get("sglang_cache_hit_rate"))
        .or_else(|| {
            let cached = get("llamacpp_prompt_tokens_cached")?;
            let evaluated = get("llamacpp_prompt_tokens")?;
            (cached + evaluated > 0.0).then(|| cached / (cached + evaluated))
        })
        .filter(|x| (0.0..=1.0).contains(x))
}

/// What the reader must know about the cache figures: a server whose reported reuse the TTFTs
/// contradict, a reference that could not measure.
pub fn notes(s: &CacheSummary) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((r, m)) = s.disagreement() {
        out.push(format!(
            "prefix cache: the server reports {} of the reference requests' prompt tokens cached, their TTFTs show {} reused (cold {}, measured {}, empty prompt {}): its cached-token counts are not believable (or its prefill time does not follow the tokens it computes); the measured figure is the one judged",
            pct(r),
            pct(m),
            fmt(s.cold_ttft_ms),
            fmt(s.warm_ttft_ms),
            fmt(s.floor_ttft_ms)
        ));
    }
    if let Some(why) = &s.unmeasured {
        out.push(format!(
            "prefix cache: the cold reference could not measure reuse: {why}"
        ));
    }
    out
}

fn fmt(x: Option<f64>) -> String {
    x.map_or("-".into(), crate::units::fmt_ms)
}

/// The `gate.cache.hit_rate` check of `s`, or why the scenario cannot be judged by it (no hit
/// rate: the reference could not measure one, or none ran and the server reported none). On the
/// measured rate: PASS when its lower bound is at least the least rate, FAIL when its upper
/// bound is below it, WARN (cannot tell at this many pairs) between; a measured rate without
/// bounds (one pair) and the reported one (`reference: 0`) are compared as they are. `base` is
/// the baseline's (or base arm's) summary: its rate is shown beside the candidate's, not judged.
pub fn check(
    sc: &Scenario,
    s: &CacheSummary,
    base: Option<&CacheSummary>,
) -> Option<Result<Check, String>> {
    let min = sc.gate.cache_hit_rate?;
    let Some((hit, source)) = s.hit_rate() else {
        return Some(Err(format!(
            "gate.cache.hit_rate {}: no hit rate to check: {}",
            pct1(min),
            match &s.unmeasured {
                Some(why) => format!("the cold reference could not measure one ({why}), and what the server reports is not taken unchecked"),
                None if sc.request.conversation.is_none() => "the server reported no cached tokens (without request.conversation, gate.cache.hit_rate judges what the server reports: usage.prompt_tokens_details.cached_tokens or its equivalent)".into(),
                None => "the server reported no cached tokens and no cold reference ran (request.conversation.reference: 0)".into(),
            }
        )));
    };
    let ci = s
        .measured_ci
        .filter(|_| source == cache::HitSource::Measured);
    let (verdict, why) = match ci {
        Some([lo, _]) if lo >= min => (Verdict::Pass, "meets".to_string()),
        Some([_, hi]) if hi < min => (Verdict::Fail, "is below".to_string()),
        Some([lo, hi]) => (
            Verdict::Warn,
            format!(
                "cannot tell at {} reference pairs whether it meets (its {:.0}% bounds {} to {} hold",
                s.reference_pairs,
                cache::CONFIDENCE * 100.0,
                pct1(lo),
                pct1(hi)
            ),
        ),
        None if hit >= min => (Verdict::Pass, "meets".to_string()),
        None => (Verdict::Fail, "is below".to_string()),
    };
    let bounds = match ci {
        Some([lo, hi]) if verdict != Verdict::Warn => format!(" [{}, {}]", pct1(lo), pct1(hi)),
        _ => String::new(),
    };
    let other = match (source, s.reported_hit_rate) {
        (cache::HitSource::Measured, Some(r)) => format!("; reported {}", pct1(r)),
        _ => String::new(),
    };
    let end = if verdict == Verdict::Warn {
        format!(
            " {}); raise request.conversation.reference for a decision",
            pct1(min)
        )
    } else {
        format!(" gate.cache.hit_rate {}", pct1(min))
    };
    Some(Ok(Check {
        baseline: Some(min),
        candidate: Some(hit),
        n_candidate: s.requests,
        baseline_hit_rate: base.and_then(CacheSummary::hit_rate).map(|(h, _)| h),
        reference_pairs: (source == cache::HitSource::Measured).then_some(s.reference_pairs),
        verdict,
        reason: format!(
            "prefix cache hit rate {}{bounds} ({}{other}) {why}{end}",
            pct1(hit),
            source.as_str(),
        ),
        ..Check::blank(&sc.name, None, CheckKind::CacheHitRate, min)
    }))
}

/// A share with one decimal (`89.6%`): a rate shown beside its threshold must not round onto it.
fn pct1(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The drift when the hit rate moved since the baseline ([`cache::drift`]): TTFT and E2E
/// depend on it, so they are not compared; TPOT and the error rate still are.
pub fn drift(sc: &Scenario, b: &Baseline, run: &RunOutput) -> Option<Drift> {
    let was = b.cache.as_ref()?;
    let now = summary(sc, run)?;
    let hint = if sc.gate.cache_hit_rate.is_none() {
        "; gate it with gate.cache.hit_rate"
    } else {
        ""
    };
    Some(Drift {
        metrics: Metric::timing(Phase::Prefill),
        why: {
            let [lead, base, now, tail] = cache::drift(was, &now)?;
            DriftWhy::versus(lead, base, " vs ", now, &format!("{tail}{hint}"))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::server_hit_rate;

    #[test]
    fn the_servers_own_hit_rate_by_engine() {
        let f = |kv: &[(&str, f64)]| {
            server_hit_rate(&kv.iter().map(|(k, v)| (k.to_string(), *v)).collect())
        };
        assert_eq!(f(&[("vllm_prefix_cache_hit_rate", 0.62)]), Some(0.62));
        assert_eq!(f(&[("sglang_cache_hit_rate", 0.3)]), Some(0.3));
        // llama.cpp: 300 cached of 300 + 100
        assert_eq!(
            f(&[
                ("llamacpp_prompt_tokens_cached", 300.0),
                ("llamacpp_prompt_tokens", 100.0)
            ]),
            Some(0.75)
        );
        assert_eq!(f(&[("llamacpp_prompt_tokens", 100.0)]), None);
        assert_eq!(f(&[("sglang_cache_hit_rate", 7.0)]), None);
    }
}
