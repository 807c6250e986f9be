//! Server-side metrics: the Prometheus text format (exposition format 0.0.4) scraped from the
//! server's `/metrics` before and after a scenario's measured requests, reduced to per-scenario
//! figures known to explain client latency.
//!
//! The parser is ours (about 40 lines): perfgate needs only `name{labels} value` samples summed
//! over labels, and the maintained crates (`prometheus-parse`, last release 2022;
//! `prometheus_exposition_format`) would add a dependency and a regex engine for that. Comments,
//! `# TYPE`/`# HELP`, timestamps and exemplars are skipped; a malformed line is ignored.
//!
//! Families (from each server's documentation and source; a family a server does not expose is
//! simply absent):
//! - llama.cpp (`--metrics`): counters `llamacpp:prompt_seconds_total`,
//!   `llamacpp:prompt_tokens_total`, `llamacpp:tokens_predicted_seconds_total`,
//!   `llamacpp:tokens_predicted_total`, `llamacpp:prompt_tokens_cached_total`; gauges
//!   `llamacpp:requests_processing`, `llamacpp:requests_deferred`.
//! - vLLM: histograms `vllm:time_to_first_token_seconds`, `vllm:request_queue_time_seconds`,
//!   `vllm:request_prefill_time_seconds`, `vllm:request_decode_time_seconds`,
//!   `vllm:inter_token_latency_seconds` (older: `vllm:time_per_output_token_seconds`); counters
//!   `vllm:num_preemptions_total`, `vllm:prefix_cache_hits_total`,
//!   `vllm:prefix_cache_queries_total`, and with speculative decoding
//!   `vllm:spec_decode_num_drafts_total`, `vllm:spec_decode_num_draft_tokens_total`,
//!   `vllm:spec_decode_num_accepted_tokens_total`; gauges `vllm:num_requests_running`,
//!   `vllm:num_requests_waiting`.
//! - SGLang: histograms `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`,
//!   `sglang:queue_time_seconds`, `sglang:e2e_request_latency_seconds`; gauges
//!   `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:cache_hit_rate`.
//! - TGI: histograms `tgi_request_queue_duration`, `tgi_request_inference_duration`,
//!   `tgi_request_mean_time_per_token_duration`; gauges `tgi_queue_size`,
//!   `tgi_batch_current_size`.

use crate::units::Num;
use std::collections::BTreeMap;

/// Sample values by metric name (the part before `{`), summed over label sets.
pub type Scrape = BTreeMap<String, f64>;

/// Parses Prometheus text into per-name sums over labels.
pub fn parse(text: &str) -> Scrape {
    let mut out = Scrape::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // name{labels} value [timestamp] [# exemplar]
        let (name, rest) = match line.find(['{', ' ', '\t']) {
            Some(i) => (&line[..i], &line[i..]),
            None => continue,
        };
        let rest = if rest.starts_with('{') {
            // label values may hold spaces and braces inside quotes
            let mut in_q = false;
            let mut esc = false;
            let mut end = None;
            for (i, c) in rest.char_indices() {
                match c {
                    _ if esc => esc = false,
                    '\\' if in_q => esc = true,
                    '"' => in_q = !in_q,
                    '}' if !in_q => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            match end {
                Some(e) => &rest[e + 1..],
                None => continue,
            }
        } else {
            rest
        };
        let Some(v) = rest.split_whitespace().next() else {
            continue;
        };
        let v = match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            _ => match v.parse::<f64>() {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        if name.is_empty() || !v.is_finite() {
            continue;
        }
        *out.entry(name.to_string()).or_default() += v;
    }
    out
}

/// How a figure is derived from two scrapes.
enum Kind {
    /// Histogram `<family>_sum` / `_count` in seconds: mean per observation over the scenario,
    /// ms.
    MeanMs(&'static str),
    /// Ratio of two counters' increases, scaled: (a, b, scale) = scale * Δa / Δb.
    Ratio(&'static str, &'static str, f64),
    /// A counter's increase.
    Delta(&'static str),
    /// A gauge's value at the end.
    Gauge(&'static str),
}

/// (figure name in the results, derivation).
const FIGURES: &[(&str, Kind)] = &[
    // llama.cpp
    (
        "llamacpp_prompt_ms_per_token",
        Kind::Ratio(
            "llamacpp:prompt_seconds_total",
            "llamacpp:prompt_tokens_total",
            1000.0,
        ),
    ),
    (
        "llamacpp_decode_ms_per_token",
        Kind::Ratio(
            "llamacpp:tokens_predicted_seconds_total",
            "llamacpp:tokens_predicted_total",
            1000.0,
        ),
    ),
    (
        "llamacpp_prompt_seconds",
        Kind::Delta("llamacpp:prompt_seconds_total"),
    ),
    (
        "llamacpp_prompt_tokens",
        Kind::Delta("llamacpp:prompt_tokens_total"),
    ),
    (
        "llamacpp_prompt_tokens_cached",
        Kind::Delta("llamacpp:prompt_tokens_cached_total"),
    ),
    (
        "llamacpp_decode_seconds",
        Kind::Delta("llamacpp:tokens_predicted_seconds_total"),
    ),
    (
        "llamacpp_decode_tokens",
        Kind::Delta("llamacpp:tokens_predicted_total"),
    ),
    (
        "llamacpp_requests_deferred",
        Kind::Gauge("llamacpp:requests_deferred"),
    ),
    // vLLM
    (
        "vllm_ttft_ms_mean",
        Kind::MeanMs("vllm:time_to_first_token_seconds"),
    ),
    (
        "vllm_queue_ms_mean",
        Kind::MeanMs("vllm:request_queue_time_seconds"),
    ),
    (
        "vllm_prefill_ms_mean",
        Kind::MeanMs("vllm:request_prefill_time_seconds"),
    ),
    (
        "vllm_decode_ms_mean",
        Kind::MeanMs("vllm:request_decode_time_seconds"),
    ),
    (
        "vllm_itl_ms_mean",
        Kind::MeanMs("vllm:inter_token_latency_seconds"),
    ),
    (
        "vllm_tpot_ms_mean",
        Kind::MeanMs("vllm:time_per_output_token_seconds"),
    ),
    (
        "vllm_preemptions",
        Kind::Delta("vllm:num_preemptions_total"),
    ),
    (
        "vllm_prefix_cache_hit_rate",
        Kind::Ratio(
            "vllm:prefix_cache_hits_total",
            "vllm:prefix_cache_queries_total",
            1.0,
        ),
    ),
    // speculative decoding (docs/metrics.md "Speculative decoding")
    (
        "vllm_spec_drafts",
        Kind::Delta("vllm:spec_decode_num_drafts_total"),
    ),
    (
        "vllm_spec_draft_tokens",
        Kind::Delta("vllm:spec_decode_num_draft_tokens_total"),
    ),
    (
        "vllm_spec_accepted_tokens",
        Kind::Delta("vllm:spec_decode_num_accepted_tokens_total"),
    ),
    (
        "vllm_requests_waiting",
        Kind::Gauge("vllm:num_requests_waiting"),
    ),
    // SGLang
    (
        "sglang_ttft_ms_mean",
        Kind::MeanMs("sglang:time_to_first_token_seconds"),
    ),
    (
        "sglang_queue_ms_mean",
        Kind::MeanMs("sglang:queue_time_seconds"),
    ),
    (
        "sglang_itl_ms_mean",
        Kind::MeanMs("sglang:inter_token_latency_seconds"),
    ),
    (
        "sglang_e2e_ms_mean",
        Kind::MeanMs("sglang:e2e_request_latency_seconds"),
    ),
    (
        "sglang_cache_hit_rate",
        Kind::Gauge("sglang:cache_hit_rate"),
    ),
    (
        "sglang_queue_requests",
        Kind::Gauge("sglang:num_queue_reqs"),
    ),
    // TGI
    (
        "tgi_queue_ms_mean",
        Kind::MeanMs("tgi_request_queue_duration"),
    ),
    (
        "tgi_inference_ms_mean",
        Kind::MeanMs("tgi_request_inference_duration"),
    ),
    (
        "tgi_time_per_token_ms_mean",
        Kind::MeanMs("tgi_request_mean_time_per_token_duration"),
    ),
    ("tgi_queue_size", Kind::Gauge("tgi_queue_size")),
];

/// The per-scenario figures between two scrapes, and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Figure name -> value, rounded to 0.001.
    pub values: BTreeMap<String, f64>,
    /// One note per figure left out although its series were there: a counter that went
    /// down (a reset), a value no server could mean.
    pub dropped: Vec<String>,
}

/// Why a figure whose series were scraped is left out.
enum Unusable {
    /// A counter that went down between the scrapes: the server restarted or reset it, so the
    /// difference is not what the scenario did.
    Reset {
        counter: String,
        before: f64,
        after: f64,
    },
    /// Not finite, negative, or beyond [`crate::limits::MAX_FIGURE`] (a time beyond
    /// [`crate::limits::MAX_LATENCY_MS`]): stored, it would make the baseline unreadable.
    Unbelievable(f64),
}

/// The per-scenario figures between two scrapes, rounded to 0.001; figures whose series are
/// absent, or that saw no observation, are left out silently; a figure from a counter that went
/// down (a reset) or of a value no server could mean (negative, above a day of ms, 1e305) is
/// left out with a note in [`Figures::dropped`], so a baseline never stores it and "where the
/// time went" never reads it.
pub fn figures(before: &Scrape, after: &Scrape) -> Figures {
    let delta = |n: &str| -> Option<Result<f64, Unusable>> {
        let a = *after.get(n)?;
        let b = before.get(n).copied().unwrap_or(0.0);
        Some(if a < b {
            Err(Unusable::Reset {
                counter: n.to_string(),
                before: b,
                after: a,
            })
        } else {
            Ok(a - b)
        })
    };
    let mut out = Figures::default();
    for (name, kind) in FIGURES {
        let v = match kind {
            Kind::MeanMs(f) => match (delta(&format!("{f}_sum")), delta(&format!("{f}_count"))) {
                (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
                (Some(Ok(s)), Some(Ok(c))) if c > 0.0 => Some(Ok(1000.0 * s / c)),
                _ => None,
            },
            Kind::Ratio(a, b, scale) => match (delta(a), delta(b)) {
                (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
                (Some(Ok(x)), Some(Ok(y))) if y > 0.0 => Some(Ok(scale * x / y)),
                _ => None,
            },
            Kind::Delta(n) => delta(n),
            Kind::Gauge(n) => after.get(*n).copied().map(Ok),
        };
        let limit = if name.contains("_ms") {
            crate::limits::MAX_LATENCY_MS
        } else {
            crate::limits::MAX_FIGURE
        };
        let v = v.map(|r| {
            r.and_then(|x| {
                if (0.0..=limit).contains(&x) {
                    Ok(x)
                } else {
                    Err(Unusable::Unbelievable(x))
                }
            })
        });
        match v {
            Some(Ok(x)) => {
                out.values.insert(name.to_string(), crate::units::round3(x));
            }
            Some(Err(Unusable::Reset {
                counter,
                before,
                after,
            })) => out.dropped.push(format!(
                "/metrics: {counter} went down during the measured requests ({} -> {}): the server restarted or reset it, so {name} is left out",
                Num(before),
                Num(after)
            )),
            Some(Err(Unusable::Unbelievable(x))) => out.dropped.push(format!(
                "/metrics: {name} came out as {}, which no server means (a time must be 0 to {} ms, a figure 0 to {}): left out",
                Num(x),
                Num(crate::limits::MAX_LATENCY_MS),
                Num(crate::limits::MAX_FIGURE)
            )),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA: &str = "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 100\nllamacpp:prompt_seconds_total 0.5\nllamacpp:tokens_predicted_total 480\nllamacpp:tokens_predicted_seconds_total 4.8\nllamacpp:requests_deferred 0\n";

    #[test]
    fn parses_labels_comments_and_sums() {
        let s = parse("a_total{x=\"1 }\",y=\"q\\\"\"} 2\na_total{x=\"2\"} 3 1700000000\n# c\nb 1e3\nbad line here\nc NaN\n");
        assert_eq!(s.get("a_total"), Some(&5.0));
        assert_eq!(s.get("b"), Some(&1000.0));
        assert_eq!(s.get("c"), None);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn llama_cpp_figures_are_per_token_over_the_scenario() {
        let before = parse(LLAMA);
        let after = parse(
            &LLAMA
                .replace("total 100", "total 300")
                .replace("seconds_total 0.5", "seconds_total 1.5")
                .replace("predicted_total 480", "predicted_total 1440")
                .replace(
                    "predicted_seconds_total 4.8",
                    "predicted_seconds_total 14.4",
                ),
        );
        let f = figures(&before, &after).values;
        assert_eq!(f["llamacpp_prompt_ms_per_token"], 5.0);
        assert_eq!(f["llamacpp_decode_ms_per_token"], 10.0);
        assert_eq!(f["llamacpp_prompt_tokens"], 200.0);
        assert_eq!(f["llamacpp_decode_seconds"], 9.6);
        assert!(!f.contains_key("vllm_queue_ms_mean"));
    }

    #[test]
    fn histogram_means() {
        let b = parse("vllm:request_queue_time_seconds_sum{m=\"x\"} 1\nvllm:request_queue_time_seconds_count{m=\"x\"} 10\nvllm:request_queue_time_seconds_bucket{le=\"+Inf\"} 10\n");
        let a = parse("vllm:request_queue_time_seconds_sum{m=\"x\"} 1.76\nvllm:request_queue_time_seconds_count{m=\"x\"} 30\n");
        assert_eq!(figures(&b, &a).values["vllm_queue_ms_mean"], 38.0);
    }

    /// Issue 26: a counter that went backwards was stored as a negative figure (and read by
    /// "where the time went"); a value of 1e306 rounded to +inf and was written as `null`,
    /// which made the baseline unreadable. Both are left out, with a note.
    #[test]
    fn resets_and_unbelievable_values_are_left_out_with_a_note() {
        let before = parse(LLAMA);
        let after = parse(
            &LLAMA
                .replace("predicted_total 480", "predicted_total 96")
                .replace("requests_deferred 0", "requests_deferred 1e306"),
        );
        let f = figures(&before, &after);
        assert!(!f.values.contains_key("llamacpp_decode_tokens"), "{f:?}");
        assert!(
            !f.values.contains_key("llamacpp_decode_ms_per_token"),
            "{f:?}"
        );
        assert!(
            !f.values.contains_key("llamacpp_requests_deferred"),
            "{f:?}"
        );
        assert!(
            f.values.values().all(|v| v.is_finite() && *v >= 0.0),
            "{f:?}"
        );
        assert_eq!(f.values["llamacpp_prompt_tokens"], 0.0);
        assert_eq!(
            f.dropped,
            [
                "/metrics: llamacpp:tokens_predicted_total went down during the measured requests (480 -> 96): the server restarted or reset it, so llamacpp_decode_ms_per_token is left out",
                "/metrics: llamacpp:tokens_predicted_total went down during the measured requests (480 -> 96): the server restarted or reset it, so llamacpp_decode_tokens is left out",
                "/metrics: llamacpp_requests_deferred came out as 1e306, which no server means (a time must be 0 to 86400000 ms, a figure 0 to 1000000000000000): left out",
            ]
        );
        // A mean over a histogram whose sum is 1.8e305 s: 1.8e308 ms, beyond a day.
        let b = parse(
            "vllm:request_queue_time_seconds_sum 0\nvllm:request_queue_time_seconds_count 0\n",
        );
        let a = parse("vllm:request_queue_time_seconds_sum 1.8e305\nvllm:request_queue_time_seconds_count 1\n");
        let f = figures(&b, &a);
        assert!(f.values.is_empty(), "{f:?}");
        assert_eq!(f.dropped.len(), 1, "{f:?}");
    }
}
