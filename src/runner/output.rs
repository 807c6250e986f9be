//! What one run of a scenario produced ([`RunOutput`]), and when its re-sends make it
//! untrustworthy.

#[cfg(doc)]
use super::LagProbe;
#[cfg(doc)]
use crate::client::http::StreamClient;
use crate::record::RequestRecord;
use crate::summary::ClientLag;

/// What one run of a scenario produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Measured requests, ordered by start time.
    pub records: Vec<RequestRecord>,
    /// Wall time of the measured phase, ms.
    pub wall_ms: f64,
    /// RFC 3339 UTC start of the measured phase.
    pub started_at: String,
    /// `model` the server reported.
    pub model: Option<String>,
    /// `system_fingerprint` the server reported.
    pub system_fingerprint: Option<String>,
    /// `Server` header.
    pub server: Option<String>,
    /// True when the server rejected `stream_options` and the run continued without it.
    pub stream_options_fallback: bool,
    /// Set when the run stopped early because the endpoint was unreachable.
    pub unreachable: Option<String>,
    /// Warmup requests that failed.
    pub warmup_failures: u32,
    /// Measured requests sent twice because the server closed a reused connection first.
    pub retried: u32,
    /// Sequential sampling: the sample counts at which the run was evaluated.
    pub looks: Vec<usize>,
    /// The warmup requests (not measured; kept to diagnose a run that stopped after them).
    pub warmup_records: Vec<RequestRecord>,
    /// Sequential sampling: why the run stopped where it did.
    pub stop_reason: Option<String>,
    /// Event-loop lag of the client during the measured phase, ms (see [`LagProbe`]); `None`
    /// when nothing was measured long enough for one probe wakeup.
    pub client_lag: Option<ClientLag>,
    /// The server closed its connection after every streamed response (llama-server does), so
    /// each request opened a new one (see [`StreamClient::set_close_after_stream`]).
    pub closes_after_stream: bool,
    /// Measured requests re-sent before perfgate switched to `Connection: close` (a server that
    /// closes after each stream, found without a warmup): expected, not counted in `retried`.
    pub resent_before_close_mode: u32,
    /// The server perfgate started or waited for (`server:`, `endpoint.wait_ready`).
    pub server_side: Option<crate::server::ServerReport>,
    /// The model ids `GET <base>/models` listed before the warmup; `None` when it did not
    /// answer with a list.
    pub listed_models: Option<Vec<String>>,
    /// `request.prompt_tokens`: the synthetic prompt fitted before the warmup.
    pub prompt_fit: Option<crate::prompt_fit::PromptFit>,
    /// `request.generate`: the synthetic prompt's scale fitted before the warmup.
    pub length_fit: Option<crate::prompt_fit::LengthFit>,
    /// Server-side figures left out, and why (a `/metrics` counter that went down, a value no
    /// server means): notes of the scenario.
    pub metrics_dropped: Vec<String>,
    /// Steady-state closed loop (`load.ramp: steady`, concurrency > 1): the requests sent and
    /// not measured to keep the concurrency; `None` for other loops.
    pub steady: Option<SteadyCounts>,
    /// Start of the measured phase (the origin of the records' `start_ms`), ms since the Unix
    /// epoch.
    pub started_unix_ms: f64,
    /// A load shard's `--start-at`: how late the measured phase started after it, ms.
    pub late_ms: Option<f64>,
    /// Steady-state closed loop: every unmeasured (ramp-up, drain) request's (start, end), ms
    /// on the records' clock, so merged load shards count them in flight.
    pub unmeasured_spans: Vec<(f64, f64)>,
    /// `request.conversation`: the cold reference sent after the measured requests
    /// ([`crate::record::ReferencePair`]); empty for other scenarios or with `reference: 0`.
    pub cache_reference: Vec<crate::record::ReferencePair>,
    /// `perfgate ab`'s base arm with deterministic sampling: measured requests sent again after
    /// the run, for the base's own repeatability (`gate.outputs`); not in `records`.
    pub repeats: Vec<crate::record::RequestRecord>,
}

/// The unmeasured requests of a steady-state run's looks (docs/scenarios.md "Steady state").
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SteadyCounts {
    /// Ramp-up requests (the first c of each look).
    pub ramp_up: usize,
    /// Drain requests (sent while the last measured requests of a look were in flight).
    pub drain: usize,
    /// The ramp-up's gap between two streams' starts, ms (the last look's).
    pub step_ms: f64,
}

impl SteadyCounts {
    /// The run's note: what was not measured, and the concurrency the measured requests ran at
    /// (their per-request `concurrency`): `steady state at concurrency 8: 8 ramp-up requests
    /// (streams started 41 ms apart) and 6 drain requests not measured; measured requests ran
    /// at 7.9 in flight (median; lowest 7.4)`.
    pub fn note(
        &self,
        load: &crate::config::scenario::LoadSpec,
        records: &[RequestRecord],
    ) -> String {
        let concurrency = match load.share {
            Some(s) => format!(
                "{} (load shard {}/{} of {})",
                load.concurrency, s.shard.index, s.shard.count, s.total_concurrency
            ),
            None => load.concurrency.to_string(),
        };
        let mut ach: Vec<f64> = records.iter().filter_map(|r| r.concurrency).collect();
        ach.sort_by(f64::total_cmp);
        let ran = match (ach.first(), ach.get(ach.len() / 2)) {
            (Some(lo), Some(med)) => {
                format!("; measured requests ran at {med:.1} in flight (median; lowest {lo:.1})")
            }
            _ => String::new(),
        };
        let started = if self.step_ms > 0.0 {
            format!(
                "streams started {} apart",
                crate::units::fmt_ms(self.step_ms)
            )
        } else {
            "streams started at once: no warmup request succeeded to space them".into()
        };
        format!(
            "steady state at concurrency {concurrency}: {} ramp-up request(s) ({started}) and {} drain request(s) not measured{ran}",
            self.ramp_up, self.drain
        )
    }
}

impl RunOutput {
    /// A run with no requests (for scenarios that could not start).
    pub fn empty() -> Self {
        RunOutput {
            records: Vec::new(),
            wall_ms: 0.0,
            started_at: String::new(),
            model: None,
            system_fingerprint: None,
            server: None,
            stream_options_fallback: false,
            unreachable: None,
            warmup_failures: 0,
            retried: 0,
            looks: Vec::new(),
            stop_reason: None,
            warmup_records: Vec::new(),
            client_lag: None,
            closes_after_stream: false,
            resent_before_close_mode: 0,
            server_side: None,
            listed_models: None,
            prompt_fit: None,
            length_fit: None,
            metrics_dropped: Vec::new(),
            steady: None,
            started_unix_ms: 0.0,
            late_ms: None,
            unmeasured_spans: Vec::new(),
            cache_reference: Vec::new(),
            repeats: Vec::new(),
        }
    }
}

/// Largest share of measured requests that may need a re-send (dropped before any response)
/// before the run is not trusted: an occasional keep-alive race is normal, a server that drops
/// requests is not.
pub const MAX_RESENT_SHARE: f64 = 0.05;

impl RunOutput {
    /// When too many requests were dropped before any response and re-sent, why the run cannot
    /// be trusted.
    pub fn resent_problem(&self) -> Option<String> {
        let n = self.records.len().max(1);
        let allowed = ((n as f64) * MAX_RESENT_SHARE).floor().max(1.0) as u32;
        (self.retried > allowed).then(|| {
            format!(
                "{} of {} requests were dropped by the server before any response and had to be re-sent (more than {:.0}%): the endpoint is dropping requests",
                self.retried,
                n,
                MAX_RESENT_SHARE * 100.0
            )
        })
    }
}
