//! Speculative decoding accounting (docs/metrics.md "Speculative decoding"): the draft tokens a
//! server proposed and the target model accepted, per request ([`Drafts`], from llama.cpp's
//! `timings.draft_n` / `timings.draft_n_accepted`) and over a run ([`Acceptance`]: the acceptance
//! rate and the mean acceptance length), and the per-request rates the `gate.acceptance` check
//! compares. Pure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request's speculative decoding: draft tokens proposed and accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drafts {
    /// Draft tokens the draft model (or n-gram table) proposed for this request.
    pub drafted: u64,
    /// Of those, the tokens the target model accepted (never above `drafted`).
    pub accepted: u64,
}

impl Drafts {
    /// From a llama.cpp `timings` object (as kept in `server_timings`): `draft_n` and
    /// `draft_n_accepted`, both whole numbers, accepted not above drafted; `None` otherwise
    /// (llama.cpp writes neither when nothing was drafted).
    pub fn from_timings(t: &Value) -> Option<Drafts> {
        let whole = |k: &str| {
            let x = t.get(k)?.as_f64()?;
            (x >= 0.0 && x.fract() == 0.0 && x <= crate::limits::MAX_FIGURE).then_some(x as u64)
        };
        let drafted = whole("draft_n")?;
        let accepted = whole("draft_n_accepted")?;
        (accepted <= drafted).then_some(Drafts { drafted, accepted })
    }

    /// accepted / drafted; `None` when nothing was drafted.
    pub fn rate(self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }
}

/// Where a run's acceptance figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptanceSource {
    /// Every request's own counts (llama.cpp's `timings`), summed.
    Requests,
    /// The server's `/metrics` counters over the run (vLLM's `spec_decode_*_total`): the whole
    /// server's traffic in that time, not only perfgate's requests.
    Metrics,
}

/// A run's speculative decoding (docs/metrics.md "Speculative decoding").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acceptance {
    pub source: AcceptanceSource,
    /// Requests with counts (`source: requests`); 0 from metrics.
    pub requests: usize,
    /// Successful requests without counts (`source: requests`): a server that drafted for some
    /// requests only, or reported for some only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub without_counts: usize,
    /// Draft tokens proposed, summed.
    pub drafted: u64,
    /// Draft tokens accepted, summed.
    pub accepted: u64,
    /// accepted / drafted (absent when nothing was drafted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Tokens generated per target-model step (the accepted draft tokens plus the one token the
    /// target model adds each step): per request output / (output - accepted), pooled as
    /// sum(output) / sum(output - accepted) (`source: requests`; the first token, from the
    /// prefill, counts as a step), or 1 + accepted / drafts (`source: metrics`, vLLM's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_length: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A run's acceptance from its successful requests' (counts, output tokens): `None` when no
/// request reported counts. A request whose output count is unknown (or not above its accepted
/// count) still counts in the rate but not in the mean length.
pub fn summarize(
    requests: impl IntoIterator<Item = (Option<Drafts>, Option<u64>)>,
) -> Option<Acceptance> {
    let (mut n, mut without, mut drafted, mut accepted) = (0usize, 0usize, 0u64, 0u64);
    let (mut out, mut steps) = (0u64, 0u64);
    for (d, output) in requests {
        let Some(d) = d else {
            without += 1;
            continue;
        };
        n += 1;
        drafted += d.drafted;
        accepted += d.accepted;
        if let Some(o) = output.filter(|&o| o > d.accepted) {
            out += o;
            steps += o - d.accepted;
        }
    }
    (n > 0).then(|| Acceptance {
        source: AcceptanceSource::Requests,
        requests: n,
        without_counts: without,
        drafted,
        accepted,
        rate: (drafted > 0).then(|| accepted as f64 / drafted as f64),
        mean_length: (steps > 0).then(|| out as f64 / steps as f64),
    })
}

/// vLLM's spec-decode counters over a run (the `/metrics` deltas perfgate scrapes:
/// `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
/// `..._num_accepted_tokens_total`): `None` when the server drafted nothing in the run.
pub fn from_metrics(drafts: f64, draft_tokens: f64, accepted: f64) -> Option<Acceptance> {
    let ok = |x: f64| x.is_finite() && x >= 0.0;
    if !(ok(drafts) && ok(draft_tokens) && ok(accepted))
        || draft_tokens <= 0.0
        || accepted > draft_tokens
    {
        return None;
    }
    Some(Acceptance {
        source: AcceptanceSource::Metrics,
        requests: 0,
        without_counts: 0,
        drafted: draft_tokens.round() as u64,
        accepted: accepted.round() as u64,
        rate: Some(accepted / draft_tokens),
        mean_length: (drafts > 0.0).then(|| 1.0 + accepted / drafts),
    })
}

/// The reference's and the candidate's acceptance, side by side (a scenario's result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptanceSides {
    /// The run measured now (the candidate arm of `ab`).
    pub candidate: Acceptance,
    /// The baseline's (or base arm's), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Acceptance>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_from_llama_cpp_timings() {
        let t = json!({"predicted_n": 24, "draft_n": 18, "draft_n_accepted": 12});
        assert_eq!(
            Drafts::from_timings(&t),
            Some(Drafts {
                drafted: 18,
                accepted: 12
            })
        );
        // 12 / 18
        assert_eq!(Drafts::from_timings(&t).unwrap().rate(), Some(2.0 / 3.0));
        for bad in [
            json!({"predicted_n": 24}),
            json!({"draft_n": 4, "draft_n_accepted": 5}),
            json!({"draft_n": 4.5, "draft_n_accepted": 1}),
            json!({"draft_n": -1, "draft_n_accepted": 0}),
            json!({"draft_n": "4", "draft_n_accepted": 1}),
        ] {
            assert_eq!(Drafts::from_timings(&bad), None, "{bad}");
        }
    }

    /// Two requests: 8 drafted 6 accepted of 10 tokens, 12 drafted 3 accepted of 9 tokens; one
    /// without counts. Rate (6 + 3) / (8 + 12) = 0.45; mean length (10 + 9) / ((10 - 6) + (9 - 3))
    /// = 19 / 10 = 1.9.
    #[test]
    fn a_run_pools_its_requests() {
        let d = |drafted, accepted| Some(Drafts { drafted, accepted });
        let a = summarize([(d(8, 6), Some(10)), (d(12, 3), Some(9)), (None, Some(5))]).unwrap();
        assert_eq!(a.requests, 2);
        assert_eq!(a.without_counts, 1);
        assert_eq!((a.drafted, a.accepted), (20, 9));
        assert!((a.rate.unwrap() - 0.45).abs() < 1e-12);
        assert!((a.mean_length.unwrap() - 1.9).abs() < 1e-12);
        assert_eq!(summarize([(None, Some(5))]), None);
    }

    /// vLLM: 100 drafts of 300 tokens, 240 accepted: rate 0.8, mean length 1 + 240 / 100 = 3.4.
    #[test]
    fn vllm_counters() {
        let a = from_metrics(100.0, 300.0, 240.0).unwrap();
        assert_eq!(a.rate, Some(0.8));
        assert!((a.mean_length.unwrap() - 3.4).abs() < 1e-12);
        assert_eq!(from_metrics(0.0, 0.0, 0.0), None);
        assert_eq!(from_metrics(1.0, 3.0, 4.0), None);
    }
}
