//! Notes for the reader about a run: a busy client, fallbacks, a client behind its open-loop
//! schedule, fixed-length workloads that were not fixed.

use crate::config::Scenario;
use crate::record::RequestRecord;
use crate::results::{Measured, Note, NoteKind};
use crate::runner::RunOutput;

/// Open-loop notes: a client that fell behind its arrival schedule.
pub fn schedule_notes(m: &Measured) -> Vec<Note> {
    let mut notes = Vec::new();
    if let Some(d) = &m.schedule_delay_ms {
        if d.p50 > crate::results::SCHEDULE_DELAY_WARN_MS {
            notes.push(Note::new(NoteKind::Schedule, format!(
                "open loop: the client fell behind its arrival schedule (median schedule delay {:.1} ms, P99 {:.1} ms, above {} ms): requests waited for a free slot of the concurrency cap or for a busy client, so latency from the send understates what users would see; see ttft_from_schedule_ms / e2e_from_schedule_ms",
                d.p50,
                d.p99,
                crate::results::SCHEDULE_DELAY_WARN_MS
            )));
        }
    }
    notes
}

/// The "client busy" note: the client's event loop lagged (P99 wakeup lag above
/// [`crate::runner::CLIENT_LAG_WARN_MS`]) while it measured, so latencies may carry client-side
/// delay. `None` when the client kept up or was not probed.
pub fn client_lag_note(lag: Option<&crate::summary::ClientLag>) -> Option<String> {
    let lag = lag?;
    (lag.p99 > crate::runner::CLIENT_LAG_WARN_MS).then(|| {
        format!(
            "client busy: perfgate itself was late to run its own tasks while measuring (event-loop lag P99 {:.1} ms, max {:.1} ms over {} wakeups every {} ms; above {} ms), so latencies may include client-side delay rather than the server's: lower load.concurrency, use a bigger runner, or split the load over machines with --load-shard I/N (docs/load-shards.md)",
            lag.p99,
            lag.max,
            lag.samples,
            crate::runner::LAG_PROBE_INTERVAL.as_millis(),
            crate::runner::CLIENT_LAG_WARN_MS
        )
    })
}

/// Notes about the run itself (a busy client, fallbacks, fixed-length workloads that were not
/// fixed).
pub fn run_notes(sc: &Scenario, run: &RunOutput) -> Vec<Note> {
    use NoteKind::{ClientBusy, Server, ServerFigures, Workload};
    let mut notes = Vec::new();
    let mut add = |kind: NoteKind, text: Option<String>| {
        notes.extend(text.map(|t| Note::new(kind, t)));
    };
    add(ClientBusy, client_lag_note(run.client_lag.as_ref()));
    add(
        Server,
        crate::client::models::unlisted_note(&sc.endpoint.model, run.listed_models.as_deref()),
    );
    add(
        Workload,
        run.prompt_fit
            .as_ref()
            .map(crate::prompt_fit::PromptFit::note),
    );
    // a varied workload: which one, so a report says what was sent
    let prompt_set = sc.request.prompt_set.as_ref();
    add(
        Workload,
        prompt_set.map(|p| format!("workload: {}", p.describe())),
    );
    let generate = sc.request.generate.as_ref();
    add(
        Workload,
        generate.map(|g| format!("workload: {}", g.describe())),
    );
    add(
        Workload,
        sc.load.trace.as_ref().map(|t| {
            format!(
                "workload: {}, replayed at a mean {:.2} requests/s",
                t.describe(),
                sc.load.rate.unwrap_or(0.0)
            )
        }),
    );
    add(
        Workload,
        run.length_fit
            .as_ref()
            .map(crate::prompt_fit::LengthFit::note),
    );
    add(Workload, drawn_lengths_note(&run.records));
    add(Workload, goodput_note(sc, run));
    add(
        Workload,
        run.steady.map(|st| st.note(&sc.load, &run.records)),
    );
    for n in &run.metrics_dropped {
        add(ServerFigures, Some(n.clone()));
    }
    add(Server, run.stream_options_fallback.then(|| "the server rejected `stream_options`; perfgate retried without it, so output tokens come from counting events (set endpoint.include_usage: false to skip the first attempt)".into()));
    if sc.request.fixed_length() {
        let off = run
            .records
            .iter()
            .filter(|r| {
                // a varied workload's request asked its own max_tokens
                let asked = r
                    .work
                    .as_ref()
                    .map_or(sc.request.max_tokens, |w| w.max_tokens);
                r.ok() && r.output_tokens.is_some_and(|t| t != u64::from(asked))
            })
            .count();
        let asked = if run.records.iter().any(|r| r.work.is_some()) {
            "their own max_tokens".to_string()
        } else {
            format!("max_tokens {}", sc.request.max_tokens)
        };
        add(Workload, (off > 0).then(|| format!(
            "workload: {off} successful requests returned a different number of output tokens than {asked} although ignore_eos/min_tokens asked for a fixed length: the server may not support it"
        )));
    }
    let distrusted: Vec<&RequestRecord> = run
        .records
        .iter()
        .filter(|r| r.ok() && r.usage_distrusted.is_some())
        .collect();
    add(Server, distrusted.first().map(|r| format!(
        "{} request(s) reported a usage figure perfgate did not believe (e.g. completion_tokens {} for {} token events, max_tokens {}): output tokens were counted from events instead",
        distrusted.len(),
        r.usage_distrusted.unwrap_or(0),
        r.token_events,
        sc.request.max_tokens
    )));
    for n in stream_notes(&run.records) {
        add(Server, Some(n));
    }
    add(Server, stopped_note(&run.records));
    add(Server, run.closes_after_stream.then(|| "the server closed its connection after every streamed response (llama.cpp's llama-server does, although it announces keep-alive): each request opened a new connection, so TTFT includes connection setup (TCP, and TLS for https), as it does for any client of this server".into()));
    add(Server, (run.resent_before_close_mode > 0).then(|| format!(
        "{} request(s) were sent again, before perfgate found that the server closes its connection after every stream (set load.warmup >= 1 so it finds out before measuring); not counted as dropped requests",
        run.resent_before_close_mode
    )));
    add(Server, (run.retried > 0).then(|| format!(
        "{} request(s) were sent again because the server closed a kept-alive connection as it was reused (timed from the second send)",
        run.retried
    )));
    add(
        Server,
        (run.warmup_failures > 0)
            .then(|| format!("{} warmup request(s) failed", run.warmup_failures)),
    );
    notes
}

/// The requests the provider completed but stopped on purpose (a refusal, a content filter;
/// [`crate::record::FailureClass::is_stop`]), counted apart: how many of all, by class. `None`
/// when there are none.
pub fn stopped_note(records: &[RequestRecord]) -> Option<String> {
    let mut by_class: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in records
        .iter()
        .filter(|r| r.stopped())
        .filter_map(|r| r.error.as_ref())
    {
        *by_class.entry(e.class.as_str()).or_default() += 1;
    }
    let n: usize = by_class.values().sum();
    (n > 0).then(|| {
        let classes: Vec<String> = by_class.iter().map(|(c, k)| format!("{c} {k}")).collect();
        format!(
            "{n} of {} requests were stopped by the provider on purpose ({}): completed, but kept out of the latency figures and of the error rate; against a baseline their share is its own check (a significant increase FAILs)",
            records.len(),
            classes.join(", ")
        )
    })
}

/// What streams sent that was read otherwise than it looked ([`crate::record::StreamNote`]),
/// one note per kind with the number of requests.
pub fn stream_notes(records: &[RequestRecord]) -> Vec<String> {
    use crate::record::StreamNote;
    [
        StreamNote::ThinkCloseInAnswer,
        StreamNote::UsageNotInteger,
        StreamNote::CachedAbovePrompt,
    ]
    .into_iter()
        .filter_map(|n| {
            let count = records.iter().filter(|r| r.stream_notes.contains(&n)).count();
            (count > 0).then(|| match n {
                StreamNote::ThinkCloseInAnswer => format!(
                    "{count} request(s) had a `</think>` that was never opened after answer text: read as answer text the model wrote, not as the end of its reasoning (stream_notes: {})",
                    n.as_str()
                ),
                StreamNote::UsageNotInteger => format!(
                    "{count} request(s) reported a usage output token count that is not a whole number: not read, output tokens were counted from events (stream_notes: {})",
                    n.as_str()
                ),
                StreamNote::CachedAbovePrompt => format!(
                    "{count} request(s) reported more prompt tokens served from the prefix cache than prompt tokens: not believable, cached_tokens not recorded (stream_notes: {})",
                    n.as_str()
                ),
            })
        })
        .collect()
}

/// Goodput under `gate.slo`: the share of requests that succeeded and met every latency
/// objective on their own (each request's TTFT, TPOT, E2E at most the objective's value,
/// whatever its quantile), with its exact 95 % interval and the good requests per second.
/// `None` without latency objectives or requests.
pub fn goodput_note(sc: &Scenario, run: &RunOutput) -> Option<String> {
    use crate::config::scenario::Objective;
    let limits: Vec<(crate::config::Metric, f64)> = sc
        .gate
        .slo
        .iter()
        .filter_map(|o| match *o {
            Objective::Latency { metric, max_ms, .. } => Some((metric, max_ms)),
            Objective::ErrorRate { .. } => None,
        })
        .collect();
    let n = run.records.len();
    if limits.is_empty() || n == 0 {
        return None;
    }
    let good = run
        .records
        .iter()
        .filter(|r| {
            r.ok()
                && limits.iter().all(|&(m, max)| {
                    let v = m.value(r.timings());
                    v.is_none_or(|v| v <= max)
                })
        })
        .count();
    let (lo, hi) = crate::stats::objective::clopper_pearson(good as u64, n as u64, 0.95)?;
    let per_s = if run.wall_ms > 0.0 {
        format!(
            "; {:.2} good requests/s",
            good as f64 / (run.wall_ms / 1000.0)
        )
    } else {
        String::new()
    };
    Some(format!(
        "goodput: {good} of {n} requests ({:.1}%, 95% CI [{:.1}%, {:.1}%]) succeeded and met every latency objective of gate.slo on their own{per_s}",
        good as f64 / n as f64 * 100.0,
        lo * 100.0,
        hi * 100.0
    ))
}

/// `request.generate`, `load.trace`: how close the server's prompt token counts came to the
/// lengths asked
/// (the accuracy of the scaled synthetic prompt), over the successful requests that have both.
pub fn drawn_lengths_note(records: &[crate::record::RequestRecord]) -> Option<String> {
    let mut off: Vec<f64> = records
        .iter()
        .filter(|r| r.ok())
        .filter_map(|r| {
            let want = r.work.as_ref()?.input_tokens?;
            let got = r.prompt_tokens?;
            Some((got as f64 - f64::from(want)).abs() / f64::from(want.max(1)) * 100.0)
        })
        .collect();
    if off.is_empty() {
        return None;
    }
    off.sort_by(f64::total_cmp);
    let q = |p: f64| crate::stats::quantile::quantile_type7(&off, p).unwrap_or(0.0);
    let exact = off.iter().filter(|x| **x == 0.0).count();
    Some(format!(
        "prompt lengths: the server counted each request's prompt length within {:.1} % (median), {:.1} % (P90), {:.1} % (max) over {} requests ({exact} exactly)",
        q(0.5),
        q(0.9),
        off[off.len() - 1],
        off.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StreamNote;

    #[test]
    fn stream_notes_are_counted_per_kind() {
        let with = |n: &[StreamNote]| RequestRecord {
            stream_notes: n.to_vec(),
            ..RequestRecord::new(0.0)
        };
        let recs = [
            with(&[
                StreamNote::ThinkCloseInAnswer,
                StreamNote::CachedAbovePrompt,
            ]),
            with(&[StreamNote::ThinkCloseInAnswer, StreamNote::UsageNotInteger]),
            with(&[]),
        ];
        let notes = stream_notes(&recs);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("2 request(s) had a `</think>`"),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].starts_with(
                "1 request(s) reported a usage output token count that is not a whole number"
            ),
            "{}",
            notes[1]
        );
        assert!(
            notes[2].starts_with(
                "1 request(s) reported more prompt tokens served from the prefix cache than prompt tokens"
            ),
            "{}",
            notes[2]
        );
        assert!(stream_notes(&recs[2..]).is_empty());
    }

    /// Drawn 100 tokens each; the server counted 100, 101, 98 and 110: off by 0, 1, 2 and 10 %.
    #[test]
    fn the_drawn_lengths_note_by_hand() {
        let rec = |got: u64| crate::record::RequestRecord {
            prompt_tokens: Some(got),
            work: Some(crate::record::WorkItem {
                index: 0,
                entry: None,
                prompt_id: "0".repeat(16),
                max_tokens: 8,
                input_tokens: Some(100),
                conversation: None,
                turn: None,
            }),
            ..crate::record::RequestRecord::new(0.0)
        };
        let recs: Vec<_> = [100, 101, 98, 110].into_iter().map(rec).collect();
        // type-7 median of [0, 1, 2, 10] is 1.5; P90 is 2 + 0.7 x 8 = 7.6
        assert_eq!(
            super::drawn_lengths_note(&recs).unwrap(),
            "prompt lengths: the server counted each request's prompt length within 1.5 % (median), 7.6 % (P90), 10.0 % (max) over 4 requests (1 exactly)"
        );
        assert_eq!(
            super::drawn_lengths_note(&[crate::record::RequestRecord::new(0.0)]),
            None
        );
    }
}
