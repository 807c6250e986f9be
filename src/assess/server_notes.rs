//! Where the time went: a check's client-side change set beside the server's own figures
//! (from `/metrics`, [`crate::server::metrics`]) in the baseline and now, and server identity drift.
//! Pure functions over the figures; the words go to the scenario's notes.

use crate::config::Metric;
use std::collections::BTreeMap;

/// Server-side figures that time part of a metric (latency, in ms), per metric. A share (a
/// cache hit rate) or a count (preemptions) is listed beside them in [`CONTEXT`].
fn timing_figures(m: Metric) -> &'static [&'static str] {
    match m {
        Metric::Ttft => &[
            "llamacpp_prompt_ms_per_token",
            "vllm_ttft_ms_mean",
            "vllm_queue_ms_mean",
            "vllm_prefill_ms_mean",
            "sglang_ttft_ms_mean",
            "sglang_queue_ms_mean",
            "tgi_queue_ms_mean",
        ],
        Metric::Tpot => &[
            "llamacpp_decode_ms_per_token",
            "vllm_itl_ms_mean",
            "vllm_tpot_ms_mean",
            "vllm_decode_ms_mean",
            "sglang_itl_ms_mean",
            "tgi_time_per_token_ms_mean",
        ],
        Metric::E2e => &[
            "llamacpp_prompt_ms_per_token",
            "llamacpp_decode_ms_per_token",
            "vllm_queue_ms_mean",
            "vllm_prefill_ms_mean",
            "vllm_decode_ms_mean",
            "sglang_e2e_ms_mean",
            "tgi_inference_ms_mean",
        ],
    }
}

/// Figures that explain without timing: cache hit rates and preemptions.
const CONTEXT: &[&str] = &[
    "vllm_prefix_cache_hit_rate",
    "vllm_preemptions",
    "sglang_cache_hit_rate",
];

/// A server-side timing that moved less than this (relative) is "unchanged".
pub const UNCHANGED: f64 = 0.05;

/// For a check of metric `m` whose client-side change is `change` (e.g. `+40.2%`), what the
/// server's own figures say: which of its timings moved and by how much, or that none did (the
/// time went outside the server: network, proxy, client). `None` without figures on both sides.
pub fn attribute(
    m: Metric,
    change: &str,
    base: &BTreeMap<String, f64>,
    now: &BTreeMap<String, f64>,
) -> Option<String> {
    let mut moved = Vec::new();
    let mut same = Vec::new();
    for k in timing_figures(m) {
        let (Some(&b), Some(&n)) = (base.get(*k), now.get(*k)) else {
            continue;
        };
        if b <= 0.0 {
            continue;
        }
        let r = n / b - 1.0;
        let text = format!("{k} {b:.3} -> {n:.3} ({:+.0}%)", r * 100.0);
        if r.abs() >= UNCHANGED {
            moved.push(text);
        } else {
            same.push(text);
        }
    }
    if moved.is_empty() && same.is_empty() {
        return None;
    }
    let mut s = format!("{} {change}: ", m.label());
    if moved.is_empty() {
        s.push_str(&format!(
            "the server's own timing is unchanged ({}): the time went outside the server's compute (network, proxy, connection setup, client) or into queueing it does not time",
            same.join(", ")
        ));
    } else {
        s.push_str(&format!("server side {}", moved.join(", ")));
        if !same.is_empty() {
            s.push_str(&format!("; unchanged: {}", same.join(", ")));
        }
    }
    let ctx: Vec<String> = CONTEXT
        .iter()
        .filter_map(|k| {
            let (b, n) = (base.get(*k)?, now.get(*k)?);
            (b != n).then(|| format!("{k} {b} -> {n}"))
        })
        .collect();
    if !ctx.is_empty() {
        s.push_str(&format!("; also {}", ctx.join(", ")));
    }
    Some(s)
}

/// The attribution notes of a compared scenario: one per FAIL check of a latency metric, when
/// the scenario's server and its baseline both have server-side figures (`base`).
pub fn fail_notes(
    res: &crate::results::ScenarioResult,
    base: &BTreeMap<String, f64>,
) -> Vec<String> {
    let Some(now) = res.server.as_ref().map(|s| &s.metrics) else {
        return Vec::new();
    };
    res.checks
        .iter()
        .filter(|c| c.verdict == crate::gate::Verdict::Fail)
        .filter_map(|c| {
            let change = format!("{} FAIL {}", c.kind.label(), crate::report::fmt_change(c));
            attribute(c.metric?, &change, base, now).map(|s| format!("where the time went: {s}"))
        })
        .collect()
}

/// The time-to-ready note of a started server: this start's against the baseline's (reported,
/// not gated). `None` when either is unknown.
pub fn ready_note(base_ms: Option<f64>, now: &crate::server::ServerReport) -> Option<String> {
    let (b, n) = (base_ms?, now.time_to_ready_ms?);
    now.pid?;
    (b > 0.0).then(|| {
        format!(
            "time to ready {:.2} s, {:+.0}% against the baseline's {:.2} s (one start each: reported, not gated; gate it with gate.cold_start)",
            n / 1000.0,
            (n / b - 1.0) * 100.0,
            b / 1000.0
        )
    })
}

/// A note when the server's identity differs from the baseline's: every key whose value
/// changed, appeared or went away. `None` when either side has no identity or nothing differs.
pub fn identity_drift(
    base: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Option<String> {
    if base.is_empty() || now.is_empty() {
        return None;
    }
    let keys: std::collections::BTreeSet<&String> = base.keys().chain(now.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| base.get(*k) != now.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.map(|s| s.as_str()).unwrap_or("(absent)").to_string();
            format!("{k} {} -> {}", show(base.get(k)), show(now.get(k)))
        })
        .collect();
    (!diffs.is_empty()).then(|| {
        format!(
            "the server is not the one the baseline was blessed against: {}; the comparison stands, but a change may come from the server version or its configuration",
            diffs.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kv: &[(&str, f64)]) -> BTreeMap<String, f64> {
        kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn says_which_server_timing_moved() {
        let base = m(&[("vllm_queue_ms_mean", 2.0), ("vllm_prefill_ms_mean", 30.0)]);
        let now = m(&[("vllm_queue_ms_mean", 40.0), ("vllm_prefill_ms_mean", 30.3)]);
        let s = attribute(Metric::Ttft, "+40.0%", &base, &now).unwrap();
        assert_eq!(s, "TTFT +40.0%: server side vllm_queue_ms_mean 2.000 -> 40.000 (+1900%); unchanged: vllm_prefill_ms_mean 30.000 -> 30.300 (+1%)");
        let base = m(&[("llamacpp_decode_ms_per_token", 10.0)]);
        let now = m(&[("llamacpp_decode_ms_per_token", 10.2)]);
        let s = attribute(Metric::Tpot, "+30.0%", &base, &now).unwrap();
        assert!(s.contains("the server's own timing is unchanged"), "{s}");
        assert_eq!(
            attribute(Metric::Tpot, "+1%", &base, &BTreeMap::new()),
            None
        );
    }

    #[test]
    fn identity_changes_are_listed() {
        let a: BTreeMap<String, String> =
            [("llama.cpp.build_info".to_string(), "b1".to_string())].into();
        let b: BTreeMap<String, String> =
            [("llama.cpp.build_info".to_string(), "b2".to_string())].into();
        let s = identity_drift(&a, &b).unwrap();
        assert!(s.contains("llama.cpp.build_info b1 -> b2"), "{s}");
        assert_eq!(identity_drift(&a, &a), None);
        assert_eq!(identity_drift(&BTreeMap::new(), &b), None);
    }
}
