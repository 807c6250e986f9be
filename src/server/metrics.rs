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
//!   `vllm:prefix_cache_queries_total`; gauges `vllm:num_requests_running`,
//!   `vllm:num_requests_waiting`.
//! - SGLang: histograms `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds`,
//!   `sglang:queue_time_seconds`, `sglang:e2e_request_latency_seconds`; gauges
//!   `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:cache_hit_rate`.
//! - TGI: histograms `tgi_request_queue_duration`, `tgi_request_inference_duration`,
//!   `tgi_request_mean_time_per_token_duration`; gauges `tgi_queue_size`,
//!   `tgi_batch_current_size`.

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

/// The per-scenario figures between two scrapes, rounded to 0.001; figures whose series are
/// absent, or that saw no observation, are left out.
pub fn figures(before: &Scrape, after: &Scrape) -> BTreeMap<String, f64> {
    let delta = |n: &str| -> Option<f64> {
        let a = after.get(n)?;
        let b = before.get(n).copied().unwrap_or(0.0);
        Some(a - b)
    };
    let mut out = BTreeMap::new();
    for (name, kind) in FIGURES {
        let v = match kind {
            Kind::MeanMs(f) => {
                let c = delta(&format!("{f}_count"));
                let s = delta(&format!("{f}_sum"));
                match (s, c) {
                    (Some(s), Some(c)) if c > 0.0 => Some(1000.0 * s / c),
                    _ => None,
                }
            }
            Kind::Ratio(a, b, scale) => match (delta(a), delta(b)) {
                (Some(x), Some(y)) if y > 0.0 => Some(scale * x / y),
                _ => None,
            },
            Kind::Delta(n) => delta(n),
            Kind::Gauge(n) => after.get(*n).copied(),
        };
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.insert(name.to_string(), crate::units::round3(v));
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
        let f = figures(&before, &after);
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
        assert_eq!(figures(&b, &a)["vllm_queue_ms_mean"], 38.0);
    }
}
