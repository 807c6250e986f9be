//! `perfgate check`: measure every scenario, compare with its baseline, decide the verdict and
//! exit code (DESIGN s1, s4, s6).

use crate::baseline::{self, Baseline, BaselineRecord, LoadError};
use crate::config::{Metric, Scenario};
use crate::exit;
use crate::gate::{self, Samples, ScenarioSamples, Verdict};
use crate::record::{RequestRecord, TokenSource};
use crate::results::{
    measured_summary, BaselineInfo, Measured, Results, ScenarioResult, Status,
    RESULTS_SCHEMA_VERSION,
};
use crate::runner::RunOutput;
use crate::verdict::Overall;
use std::collections::BTreeMap;
use std::path::Path;

/// Options of one check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Directory of baseline files.
    pub baselines: std::path::PathBuf,
    /// Whether a missing or stale baseline fails the check (the default) or is only reported.
    pub policy: crate::verdict::BaselinePolicy,
    /// The check id (comment marker).
    pub id: String,
}

/// Measured figures of a run (shared by check and bless reports).
pub fn measured(run: &RunOutput) -> Measured {
    let recs = &run.records;
    let ok: Vec<&RequestRecord> = recs.iter().filter(|r| r.ok()).collect();
    let mut by_class: BTreeMap<String, usize> = BTreeMap::new();
    for e in recs.iter().filter_map(|r| r.error.as_ref()) {
        *by_class.entry(e.class.as_str().to_string()).or_default() += 1;
    }
    let wall_s = (run.wall_ms / 1000.0).max(1e-9);
    let out_tokens: f64 = ok
        .iter()
        .filter_map(|r| r.output_tokens)
        .map(|t| t as f64)
        .sum();
    let brecs: Vec<BaselineRecord> = recs.iter().map(BaselineRecord::from_record).collect();
    let mut outs: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.output_tokens.map(|x| x as f64))
        .collect();
    outs.sort_by(f64::total_cmp);
    let sched = crate::results::schedule_summaries(recs);
    Measured {
        requests: recs.len(),
        ok: ok.len(),
        failed: recs.len() - ok.len(),
        errors_by_class: by_class,
        first_error: run.unreachable.clone().or_else(|| {
            recs.iter()
                .find_map(|r| r.error.as_ref().map(|e| e.message.clone()))
        }),
        wall_ms: baseline::round3(run.wall_ms),
        output_tokens_per_s: baseline::round3(out_tokens / wall_s),
        requests_per_s: baseline::round3(ok.len() as f64 / wall_s),
        summary: measured_summary(recs),
        token_source: baseline::token_source_of(&brecs),
        output_tokens_p50: crate::stats::quantile::quantile_type7(&outs, 0.5),
        prompt_tokens_p50: {
            let mut p: Vec<f64> = ok
                .iter()
                .filter_map(|r| r.prompt_tokens.map(|t| t as f64))
                .collect();
            p.sort_by(f64::total_cmp);
            crate::stats::quantile::quantile_type7(&p, 0.5)
        },
        model: run.model.clone(),
        server: run.server.clone(),
        achieved_concurrency: achieved_concurrency(recs, run.wall_ms),
        target_rate: None,
        schedule_delay_ms: sched.0,
        ttft_from_schedule_ms: sched.1,
        e2e_from_schedule_ms: sched.2,
        client_lag_ms: run.client_lag.clone(),
    }
}

/// Mean requests in flight: the sum of request durations (send to stream close, or to the last
/// event) over the wall time of the measured phase. `None` without records.
pub fn achieved_concurrency(recs: &[RequestRecord], wall_ms: f64) -> Option<f64> {
    if recs.is_empty() || wall_ms <= 0.0 {
        return None;
    }
    let busy: f64 = recs.iter().filter_map(|r| r.t_done_ms.or(r.e2e_ms)).sum();
    Some(baseline::round3(busy / wall_ms))
}

/// Open-loop notes: a client that fell behind its arrival schedule.
pub fn schedule_notes(m: &Measured) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(d) = &m.schedule_delay_ms {
        if d.p50 > crate::results::SCHEDULE_DELAY_WARN_MS {
            notes.push(format!(
                "open loop: the client fell behind its arrival schedule (median schedule delay {:.1} ms, P99 {:.1} ms, above {} ms): requests waited for a free slot of the concurrency cap or for a busy client, so latency from the send understates what users would see; see ttft_from_schedule_ms / e2e_from_schedule_ms",
                d.p50,
                d.p99,
                crate::results::SCHEDULE_DELAY_WARN_MS
            ));
        }
    }
    notes
}

/// The "client busy" note: the client's event loop lagged (P99 wakeup lag above
/// [`crate::runner::CLIENT_LAG_WARN_MS`]) while it measured, so latencies may carry client-side
/// delay. `None` when the client kept up or was not probed.
pub fn client_lag_note(lag: Option<&crate::results::ClientLag>) -> Option<String> {
    let lag = lag?;
    (lag.p99 > crate::runner::CLIENT_LAG_WARN_MS).then(|| {
        format!(
            "client busy: perfgate itself was late to run its own tasks while measuring (event-loop lag P99 {:.1} ms, max {:.1} ms over {} wakeups every {} ms; above {} ms), so latencies may include client-side delay rather than the server's: lower load.concurrency, use a bigger runner, or split the scenarios across runners with --shard I/N",
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
pub fn run_notes(sc: &Scenario, run: &RunOutput) -> Vec<String> {
    let mut notes = Vec::new();
    notes.extend(client_lag_note(run.client_lag.as_ref()));
    if run.stream_options_fallback {
        notes.push("the server rejected `stream_options`; perfgate retried without it, so output tokens come from counting events (set endpoint.include_usage: false to skip the first attempt)".into());
    }
    if sc.request.fixed_length() {
        let off = run
            .records
            .iter()
            .filter(|r| {
                r.ok()
                    && r.output_tokens
                        .is_some_and(|t| t != sc.request.max_tokens as u64)
            })
            .count();
        if off > 0 {
            notes.push(format!(
                "workload: {off} successful requests returned a different number of output tokens than max_tokens {} although ignore_eos/min_tokens asked for a fixed length: the server may not support it",
                sc.request.max_tokens
            ));
        }
    }
    let distrusted: Vec<&RequestRecord> = run
        .records
        .iter()
        .filter(|r| r.ok() && r.usage_distrusted.is_some())
        .collect();
    if let Some(r) = distrusted.first() {
        notes.push(format!(
            "{} request(s) reported a usage figure perfgate did not believe (e.g. completion_tokens {} for {} token events, max_tokens {}): output tokens were counted from events instead",
            distrusted.len(),
            r.usage_distrusted.unwrap_or(0),
            r.token_events,
            sc.request.max_tokens
        ));
    }
    if run.closes_after_stream {
        notes.push("the server closed its connection after every streamed response (llama.cpp's llama-server does, although it announces keep-alive): each request opened a new connection, so TTFT includes connection setup (TCP, and TLS for https), as it does for any client of this server".into());
    }
    if run.resent_before_close_mode > 0 {
        notes.push(format!(
            "{} request(s) were sent again, before perfgate found that the server closes its connection after every stream (set load.warmup >= 1 so it finds out before measuring); not counted as dropped requests",
            run.resent_before_close_mode
        ));
    }
    if run.retried > 0 {
        notes.push(format!(
            "{} request(s) were sent again because the server closed a kept-alive connection as it was reused (timed from the second send)",
            run.retried
        ));
    }
    if run.warmup_failures > 0 {
        notes.push(format!("{} warmup request(s) failed", run.warmup_failures));
    }
    notes
}

/// The leaves that differ between two configurations, as `path: old -> new` (at most 5).
pub fn config_diff(old: &serde_json::Value, new: &serde_json::Value) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(
                        &p,
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        out,
                    );
                }
            }
            _ if a != b => {
                let show = |v: &Value| {
                    let s = v.to_string();
                    if s.chars().count() > 40 {
                        format!("{}…", s.chars().take(40).collect::<String>())
                    } else {
                        s
                    }
                };
                out.push(format!("{path}: {} -> {}", show(a), show(b)));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", old, new, &mut out);
    // the sim's latency settings are not part of the fingerprint
    out.retain(|d| !d.starts_with("endpoint.base_url: \"sim://"));
    out.truncate(5);
    out
}

/// Why a baseline cannot be compared with this scenario at all, if it cannot: it belongs to
/// another scenario, the scenario's configuration changed, or the metric definitions did. Known
/// before measuring.
pub fn staleness(sc: &Scenario, b: &Baseline) -> Option<String> {
    if b.scenario.name != sc.name {
        return Some(format!(
            "the file holds the baseline of scenario `{}`, not `{}`",
            b.scenario.name, sc.name
        ));
    }
    if b.scenario.fingerprint != sc.fingerprint {
        let diff = config_diff(&b.scenario.config, &baseline::public_config(sc));
        return Some(format!(
            "the scenario changed since its baseline was blessed ({}), so nothing was compared; if the change is intended, bless it against the unchanged server (`perfgate bless --only {}`) and commit the new baseline with the change",
            if diff.is_empty() {
                format!("fingerprint {} vs {}", b.scenario.fingerprint, sc.fingerprint)
            } else {
                diff.join(", ")
            },
            sc.name
        ));
    }
    if b.metrics_version != baseline::METRICS_VERSION {
        return Some(format!(
            "the baseline uses metrics_version {} and this perfgate {}: bless it again with this perfgate (`perfgate bless --only {}`) against the unchanged server",
            b.metrics_version,
            baseline::METRICS_VERSION,
            sc.name
        ));
    }
    None
}

/// A difference in the workload between the baseline and this run, found after measuring, and
/// the metrics it makes incomparable. The other metrics and the error rate stay gated.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// The metrics that depend on what drifted.
    pub metrics: Vec<Metric>,
    /// What drifted, with the numbers.
    pub why: String,
}

/// The token source most requests used, its count and the number of requests with a source.
fn majority_source(sources: &[TokenSource]) -> Option<(TokenSource, usize, usize)> {
    let total = sources.len();
    // vendor usage is the server's own count too (record.rs `is_reported`)
    let usage = sources.iter().filter(|s| s.is_reported()).count();
    let (src, n) = if usage * 2 > total {
        (TokenSource::Usage, usage)
    } else if (total - usage) * 2 > total {
        (TokenSource::Events, total - usage)
    } else {
        return None;
    };
    Some((src, n, total))
}

fn source_name(t: TokenSource) -> &'static str {
    t.as_str()
}

fn median_of(v: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(f64::total_cmp);
    crate::stats::quantile::quantile_type7(&v, 0.5)
}

/// What drifted in the workload between the baseline and this run (successful requests only):
/// - the median prompt tokens (a different tokenizer, chat template or server): TTFT and E2E;
/// - the median output tokens: TPOT and E2E;
/// - where most requests' output token counts came from (usage or counted events): TPOT. A
///   minority of requests with another source (a proxy dropping the usage chunk now and then)
///   is not a drift when their token counts agree with the others'.
///
/// Never advises a new bless: a run that drifted may also have regressed.
pub fn workload_drift(sc: &Scenario, b: &Baseline, run: &RunOutput) -> Vec<Drift> {
    let mut out = Vec::new();
    let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
    let base_ok: Vec<&BaselineRecord> = b.records().filter(|r| r.error.is_none()).collect();
    let cand_prompt = median_of(ok.iter().filter_map(|r| r.prompt_tokens.map(|t| t as f64)));
    let cand_out = median_of(ok.iter().filter_map(|r| r.output_tokens.map(|t| t as f64)));
    if let (Some(bp), Some(cp)) = (b.workload.prompt_tokens_p50, cand_prompt) {
        // The same prompt gives the same prompt tokens; a cold cache adds a short nonce line.
        let limit = match sc.request.cache {
            crate::config::CachePolicy::Warm => 0.0,
            crate::config::CachePolicy::Cold => 0.05 * bp + 16.0,
        };
        if (cp - bp).abs() > limit {
            out.push(Drift {
                metrics: vec![Metric::Ttft, Metric::E2e],
                why: format!(
                    "median prompt tokens {bp} in the baseline vs {cp} now (a different tokenizer, chat template or server)"
                ),
            });
        }
    }
    let out_limit = if b.workload.fixed_length { 0.0 } else { 0.10 };
    let agrees = |bo: f64, co: f64| (co - bo).abs() <= out_limit * bo + 1e-9;
    if let (Some(bo), Some(co)) = (b.workload.output_tokens_p50, cand_out) {
        if !agrees(bo, co) {
            out.push(Drift {
                metrics: vec![Metric::Tpot, Metric::E2e],
                why: format!("median output tokens {bo} in the baseline vs {co} now"),
            });
        }
    }
    let base_sources: Vec<TokenSource> = base_ok.iter().filter_map(|r| r.token_source).collect();
    let cand_sources: Vec<TokenSource> = ok.iter().filter_map(|r| r.token_source).collect();
    if let (false, false) = (base_sources.is_empty(), cand_sources.is_empty()) {
        let bm = majority_source(&base_sources);
        let cm = majority_source(&cand_sources);
        match (bm, cm) {
            (Some((bs, ..)), Some((cs, n, total))) if bs == cs => {
                // A minority counted another way: comparable when its counts agree.
                let majority_out = median_of(
                    ok.iter()
                        .filter(|r| r.token_source == Some(cs))
                        .filter_map(|r| r.output_tokens.map(|t| t as f64)),
                );
                let off = ok
                    .iter()
                    .filter(|r| r.token_source.is_some_and(|s| s != cs))
                    .filter(|r| match (majority_out, r.output_tokens) {
                        (Some(m), Some(t)) => !agrees(m, t as f64),
                        _ => false,
                    })
                    .count();
                if off > 0 {
                    out.push(Drift {
                        metrics: vec![Metric::Tpot],
                        why: format!(
                            "{} of {total} requests counted output tokens from {} instead of {}, and {off} of them got a different count (median {} from {})",
                            total - n,
                            source_name(if cs == TokenSource::Usage { TokenSource::Events } else { TokenSource::Usage }),
                            source_name(cs),
                            majority_out.unwrap_or(0.0),
                            source_name(cs)
                        ),
                    });
                }
            }
            (bm, cm) => {
                let say = |m: Option<(TokenSource, usize, usize)>| match m {
                    Some((s, n, total)) => format!("{} ({n} of {total})", source_name(s)),
                    None => "usage and events equally".to_string(),
                };
                out.push(Drift {
                    metrics: vec![Metric::Tpot],
                    why: format!(
                        "output tokens were counted from {} in the baseline but from {} now",
                        say(bm),
                        say(cm)
                    ),
                });
            }
        }
    }
    out
}

/// Notes for the requests whose output tokens came from another source than most (kept gated).
fn minority_source_note(run: &RunOutput) -> Option<String> {
    let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
    let sources: Vec<TokenSource> = ok.iter().filter_map(|r| r.token_source).collect();
    let (src, n, total) = majority_source(&sources)?;
    (n < total).then(|| {
        format!(
            "{} of {total} requests had no `{}` token count and were counted from {} (e.g. a proxy dropped the usage chunk); their counts agree with the others', so TPOT is still compared",
            total - n,
            source_name(src),
            source_name(if src == TokenSource::Usage { TokenSource::Events } else { TokenSource::Usage })
        )
    })
}

fn samples_of(recs: impl Iterator<Item = (Option<f64>, bool)>) -> Samples {
    let mut s = Samples::default();
    for (v, ok) in recs {
        match (ok, v) {
            (true, Some(x)) => s.ok.push(x),
            (true, None) => {} // e.g. TPOT undefined for a 1-token answer
            (false, _) => s.failed += 1,
        }
    }
    s
}

fn metric_of(r: &RequestRecord, m: Metric) -> Option<f64> {
    match m {
        Metric::Ttft => r.ttft_ms,
        Metric::Tpot => r.tpot_ms,
        Metric::E2e => r.e2e_ms,
    }
}

/// The gate's input for one scenario: baseline records vs the candidate run, without the
/// metrics in `skip` (made incomparable by a workload drift).
pub fn scenario_samples(
    sc: &Scenario,
    b: &Baseline,
    run: &RunOutput,
    skip: &[Metric],
) -> ScenarioSamples {
    let brecs: Vec<&BaselineRecord> = b.records().collect();
    let metrics = sc
        .gate
        .metrics
        .iter()
        .filter(|m| !skip.contains(m))
        .map(|&m| {
            let bs = samples_of(brecs.iter().map(|r| (r.metric(m), r.error.is_none())));
            let cs = samples_of(run.records.iter().map(|r| (metric_of(r, m), r.ok())));
            (m, bs, cs)
        })
        .collect();
    let spread = b
        .run_spread
        .as_ref()
        .map(|rs| {
            sc.gate
                .metrics
                .iter()
                .filter_map(|&m| {
                    rs.tau
                        .get(&format!("{}_ms", m.as_str()))
                        .map(|&t| (m, (t, rs.runs)))
                })
                .collect()
        })
        .unwrap_or_default();
    let failed_c = run.records.iter().filter(|r| !r.ok()).count();
    ScenarioSamples {
        scenario: sc.name.clone(),
        gate: sc.gate.clone(),
        metrics,
        spread,
        errors: (
            (
                brecs.iter().filter(|r| r.error.is_some()).count(),
                brecs.len(),
            ),
            (failed_c, run.records.len()),
        ),
        looks: sc.load.looks().len(),
    }
}

/// Measures every scenario (sequentially, in looks when `max_samples` is set, stopping a
/// scenario as soon as all its gated checks are decided) and compares with the baselines.
pub async fn run_check(scenarios: &[Scenario], opts: &CheckOptions) -> Results {
    let mut runs = Vec::with_capacity(scenarios.len());
    for sc in scenarios {
        if crate::cancel::requested() {
            runs.push(Err("not measured: interrupted".to_string()));
            continue;
        }
        let looks = sc.load.looks();
        eprintln!(
            "perfgate: measuring {} ({} warmup + {} requests{}, {})",
            sc.name,
            sc.load.warmup,
            sc.load.samples,
            match sc.load.max_samples {
                Some(m) => format!(", up to {m} in {} looks", looks.len()),
                None => String::new(),
            },
            match sc.load.rate {
                Some(r) => format!(
                    "open loop {r} requests/s, at most {} in flight",
                    sc.load.concurrency
                ),
                None => format!("concurrency {}", sc.load.concurrency),
            }
        );
        let b = baseline::load(&baseline::path_for(&opts.baselines, &sc.name)).ok();
        let comparable = b.as_ref().filter(|b| staleness(sc, b).is_none());
        let run = match comparable {
            Some(b) if looks.len() > 1 => {
                let mut decide = |out: &RunOutput| {
                    let skip: Vec<Metric> = workload_drift(sc, b, out)
                        .into_iter()
                        .flat_map(|d| d.metrics)
                        .collect();
                    let ss = scenario_samples(sc, b, out, &skip);
                    let (checks, _) = gate::evaluate(std::slice::from_ref(&ss));
                    gate::all_decided(&checks)
                        .then(|| "every gated check is PASS, FAIL or IMPROVED".to_string())
                };
                crate::execute::measure_until(sc, &mut decide).await
            }
            _ => crate::execute::measure(sc).await,
        };
        runs.push(run);
    }
    let mut results = compare(scenarios, runs, opts);
    if !crate::cancel::requested() {
        confirm_failures(scenarios, opts, &mut results).await;
    }
    results.incomplete = crate::cancel::requested();
    results.decide();
    results
}

/// `gate.confirm: N`: a scenario with a FAIL is measured N more times; each FAIL holds only if
/// the same check fails in every re-run (compared with the same baseline), otherwise it becomes
/// WARN "not confirmed". The report lists each re-run. Only the candidate is re-measured, so a
/// baseline that was itself unlucky is not refreshed: bless with --runs for that.
async fn confirm_failures(scenarios: &[Scenario], opts: &CheckOptions, results: &mut Results) {
    for sc in scenarios.iter().filter(|s| s.gate.confirm > 0) {
        let Some(idx) = results.scenarios.iter().position(|r| r.name == sc.name) else {
            continue;
        };
        if !results.scenarios[idx]
            .checks
            .iter()
            .any(|c| c.verdict == Verdict::Fail)
        {
            continue;
        }
        for i in 1..=sc.gate.confirm {
            eprintln!(
                "perfgate: confirming {} (re-run {i} of {})",
                sc.name, sc.gate.confirm
            );
            let again = crate::execute::measure(sc).await;
            let re = compare(std::slice::from_ref(sc), vec![again], opts);
            let Some(r) = re.scenarios.into_iter().next() else {
                continue;
            };
            let res = &mut results.scenarios[idx];
            if r.status != Status::Compared {
                // A re-run that could not measure is no evidence against the FAIL.
                let why = if r.status_detail.is_empty() {
                    format!("{:?}", r.status)
                } else {
                    r.status_detail.clone()
                };
                res.notes.push(format!(
                    "confirmation re-run {i} could not be compared ({why}): no evidence against the FAIL, which holds"
                ));
                continue;
            }
            let mut held = Vec::new();
            for c in res.checks.iter_mut().filter(|c| c.verdict == Verdict::Fail) {
                let same = r
                    .checks
                    .iter()
                    .find(|x| x.metric == c.metric && x.kind == c.kind);
                let label = crate::report::fmt_check_name(c);
                match same {
                    Some(x) if x.verdict == Verdict::Fail => held.push(format!(
                        "{label} {} (FAIL, holds)",
                        crate::report::fmt_change(x)
                    )),
                    None => held.push(format!("{label} not compared in the re-run (FAIL holds)")),
                    Some(x) => {
                        let got =
                            format!("{} {}", crate::report::fmt_change(x), x.verdict.as_str());
                        held.push(format!("{label} {got} (not confirmed)"));
                        c.verdict = Verdict::Warn;
                        c.reason = format!(
                            "not confirmed by re-run {i} ({got}); first run: {}",
                            c.reason
                        );
                    }
                }
            }
            res.notes
                .push(format!("confirmation re-run {i}: {}", held.join("; ")));
            if !res.checks.iter().any(|c| c.verdict == Verdict::Fail) {
                break;
            }
        }
    }
    // The overall verdict may have changed: decided again over every scenario.
    results.decide();
}

/// Compares measured runs with their baselines and builds the results and exit code.
pub fn compare(
    scenarios: &[Scenario],
    runs: Vec<Result<RunOutput, String>>,
    opts: &CheckOptions,
) -> Results {
    let mut results: Vec<ScenarioResult> = Vec::new();
    let mut gate_inputs: Vec<ScenarioSamples> = Vec::new();
    for (sc, run) in scenarios.iter().zip(runs) {
        let mut res = ScenarioResult {
            name: sc.name.clone(),
            fingerprint: sc.fingerprint.clone(),
            source: sc.source.clone(),
            endpoint: sc.endpoint.shown_url(),
            api: sc.endpoint.api.as_str().to_string(),
            model: sc.endpoint.model.clone(),
            concurrency: sc.load.concurrency,
            status: Status::Compared,
            status_detail: String::new(),
            baseline: None,
            measured: measured(&RunOutput::empty()),
            checks: Vec::new(),
            notes: Vec::new(),
            records: Vec::new(),
        };
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                res.status = Status::Unmeasurable;
                res.status_detail = e;
                results.push(res);
                continue;
            }
        };
        res.measured = measured(&run);
        res.measured.target_rate = sc.load.rate;
        res.notes = sc.endpoint.warnings.clone();
        res.notes.extend(run_notes(sc, &run));
        res.notes.extend(schedule_notes(&res.measured));
        let path = baseline::path_for(&opts.baselines, &sc.name);
        let rate = res.measured.failed as f64 / res.measured.requests.max(1) as f64;
        if res.measured.ok == 0 && misconfigured(&run) {
            // Every request was refused as unauthorised or not found: the scenario is wrong,
            // not the server slow (shared/cases/35).
            res.status = Status::Misconfigured;
            let first = run
                .records
                .iter()
                .chain(&run.warmup_records)
                .find_map(|r| r.error.as_ref().map(|e| e.message.clone()));
            res.status_detail =
                format!("every request was rejected: {}", first.unwrap_or_default());
        } else if let Some(why) = &run.unreachable {
            res.status = Status::Unmeasurable;
            res.status_detail = why.clone();
        } else if let Some(why) = run.resent_problem() {
            res.status = Status::Unmeasurable;
            res.status_detail = why;
        } else if res.measured.ok == 0 {
            res.status = Status::Unmeasurable;
            res.status_detail = format!(
                "every request failed; first: {}",
                res.measured.first_error.clone().unwrap_or_default()
            );
        }
        let loaded = baseline::load(&path);
        if let Ok(b) = &loaded {
            res.baseline = Some(BaselineInfo {
                path: path.display().to_string(),
                created_at: b.created_at.clone(),
                perfgate_version: b.perfgate_version.clone(),
                requests: b.records().count(),
                summary: b.summary.clone(),
            });
        }
        match (&loaded, unusable(sc, &loaded)) {
            (_, Some((status, why))) => {
                if res.status == Status::Compared {
                    res.status = status;
                    res.status_detail = why;
                }
            }
            (Ok(b), None) => match res.status {
                Status::Compared | Status::Unmeasurable if res.measured.ok > 0 => {
                    let drifts = workload_drift(sc, b, &run);
                    let skip: Vec<Metric> = drifts.iter().flat_map(|d| d.metrics.clone()).collect();
                    let left: Vec<Metric> = sc
                        .gate
                        .metrics
                        .iter()
                        .copied()
                        .filter(|m| !skip.contains(m))
                        .collect();
                    let whys: Vec<String> = drifts.iter().map(|d| d.why.clone()).collect();
                    if !drifts.is_empty() && left.is_empty() {
                        if res.status == Status::Compared {
                            res.status = Status::Stale;
                            res.status_detail = format!(
                                    "workload drift: {}; every gated metric depends on it, so nothing was compared (find out why the workload changed before blessing anything)",
                                    whys.join("; ")
                                );
                        }
                    } else {
                        for d in &drifts {
                            let names: Vec<&str> = d
                                .metrics
                                .iter()
                                .filter(|m| sc.gate.metrics.contains(m))
                                .map(|m| m.label())
                                .collect();
                            if !names.is_empty() {
                                res.notes.push(format!(
                                        "workload drift: {}; {} not compared (the other metrics and the error rate are)",
                                        d.why,
                                        names.join(" and ")
                                    ));
                            }
                        }
                        if drifts.is_empty() {
                            res.notes.extend(minority_source_note(&run));
                        }
                        gate_inputs.push(scenario_samples(sc, b, &run, &skip));
                    }
                }
                _ => {}
            },
            (Err(_), None) => {} // a failed load is always unusable
        }
        if matches!(
            res.status,
            Status::Compared | Status::NoBaseline | Status::Stale
        ) && rate > sc.gate.max_error_rate
        {
            res.status = Status::Unmeasurable;
            res.status_detail = format!(
                "error rate {:.1}% is above max_error_rate {:.1}% (first failure: {})",
                rate * 100.0,
                sc.gate.max_error_rate * 100.0,
                res.measured.first_error.clone().unwrap_or_default()
            );
        }
        if let Some(why) = &run.stop_reason {
            res.notes.push(format!("sequential sampling: {why}"));
        }
        res.records = run.records.iter().map(RequestRecord::rounded).collect();
        results.push(res);
    }
    let (checks, family) = gate::evaluate(&gate_inputs);
    for c in checks {
        if let Some(r) = results.iter_mut().find(|r| r.name == c.scenario) {
            r.checks.push(c);
        }
    }
    let mut out = Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: crate::runner::now_rfc3339(),
        id: opts.id.clone(),
        verdict: Overall::Pass,
        exit_code: exit::OK,
        family_size: family,
        incomplete: false,
        baseline_policy: opts.policy,
        scenarios: results,
    };
    out.decide();
    out
}

/// The message for a scenario without a baseline file: which scenario, and what to run.
pub fn missing_message(name: &str, path: &Path) -> String {
    format!(
        "no baseline at {}: run `perfgate bless --only {name}` against the unchanged server and commit {}, or pass --allow-missing-baseline for the first run of a new scenario (reported, not gated)",
        path.display(),
        path.display()
    )
}

/// The scenarios whose baseline is known, before measuring, to be unusable: (name, why) for a
/// missing file, a broken file, or a scenario that changed since it was blessed.
pub fn unusable_baselines(scenarios: &[Scenario], dir: &Path) -> Vec<(String, Status, String)> {
    scenarios
        .iter()
        .filter_map(|sc| {
            let loaded = baseline::load(&baseline::path_for(dir, &sc.name));
            unusable(sc, &loaded).map(|(status, why)| (sc.name.clone(), status, why))
        })
        .collect()
}

/// Why a scenario cannot be compared against its loaded baseline, the one place this is
/// decided (before measuring and after): missing, broken, or stale for its configuration.
fn unusable(sc: &Scenario, loaded: &Result<Baseline, LoadError>) -> Option<(Status, String)> {
    match loaded {
        Err(LoadError::Missing(p)) => Some((Status::NoBaseline, missing_message(&sc.name, p))),
        Err(LoadError::Invalid(m)) => Some((Status::InvalidBaseline, m.clone())),
        Ok(b) => staleness(sc, b).map(|why| (Status::Stale, why)),
    }
}

/// True when every failure is an HTTP 401/403/404/405: a wrong key or URL, not a slow server.
fn misconfigured(run: &RunOutput) -> bool {
    let recs = if run.records.is_empty() {
        &run.warmup_records
    } else {
        &run.records
    };
    !recs.is_empty()
        && recs.iter().all(|r| {
            r.error.as_ref().is_some_and(|e| {
                e.class == crate::record::FailureClass::HttpStatus
                    && matches!(e.status, Some(401 | 403 | 404 | 405))
            })
        })
}

/// Writes a report file, creating its directory. Errors name the file.
pub fn write_report(path: &Path, text: &str) -> Result<(), String> {
    baseline::write_atomic(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TokenSource;

    fn scenario() -> Scenario {
        let yaml = "scenarios:\n  - name: s\n    endpoint: {base_url: 'sim://'}\n    request: {prompt: hi there, max_tokens: 8, ignore_eos: true}\n";
        crate::config::parse_str(yaml, "t.yaml", &|_| None)
            .unwrap()
            .remove(0)
    }

    fn record(prompt: u64, out: u64) -> RequestRecord {
        RequestRecord {
            ttft_ms: Some(10.0),
            tpot_ms: Some(2.0),
            e2e_ms: Some(24.0),
            t_done_ms: Some(25.0),
            itl_ms: vec![2.0; 7],
            output_tokens: Some(out),
            token_source: Some(TokenSource::Usage),
            prompt_tokens: Some(prompt),
            token_events: out,
            ..RequestRecord::new(0.0)
        }
    }

    fn baseline_of(sc: &Scenario, prompt: u64, out: u64) -> Baseline {
        let mut run = RunOutput::empty();
        run.records = vec![record(prompt, out); 20];
        run.started_at = "2026-11-30T00:00:00Z".into();
        baseline::from_runs(sc, &[run], None)
    }

    fn run_of(recs: Vec<RequestRecord>) -> RunOutput {
        let mut run = RunOutput::empty();
        run.records = recs;
        run
    }

    #[test]
    fn workload_drift_removes_only_what_depends_on_it() {
        let sc = scenario();
        let b = baseline_of(&sc, 12, 8);
        let same = run_of(vec![record(12, 8); 20]);
        assert_eq!(workload_drift(&sc, &b, &same), vec![]);
        let d = workload_drift(&sc, &b, &run_of(vec![record(30, 8); 20]));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].metrics, vec![Metric::Ttft, Metric::E2e]);
        assert!(
            d[0].why
                .contains("median prompt tokens 12 in the baseline vs 30 now"),
            "{}",
            d[0].why
        );
        let d = workload_drift(&sc, &b, &run_of(vec![record(12, 6); 20]));
        assert_eq!(d[0].metrics, vec![Metric::Tpot, Metric::E2e]);
        assert!(d[0]
            .why
            .contains("median output tokens 8 in the baseline vs 6 now"));
        let events = RequestRecord {
            token_source: Some(TokenSource::Events),
            ..record(12, 8)
        };
        let d = workload_drift(&sc, &b, &run_of(vec![events.clone(); 20]));
        assert_eq!(d[0].metrics, vec![Metric::Tpot]);
        assert!(
            d[0].why
                .contains("from usage (20 of 20) in the baseline but from events (20 of 20) now"),
            "{}",
            d[0].why
        );
        // One request of twenty without usage, same count: no drift, a note.
        let mut mixed = vec![record(12, 8); 19];
        mixed.push(events.clone());
        let mixed = run_of(mixed);
        assert_eq!(workload_drift(&sc, &b, &mixed), vec![]);
        let note = minority_source_note(&mixed).unwrap();
        assert!(
            note.starts_with("1 of 20 requests had no `usage` token count"),
            "{note}"
        );
        // ... with another count, TPOT is not compared.
        let mut off = vec![record(12, 8); 19];
        off.push(RequestRecord {
            output_tokens: Some(5),
            ..events
        });
        let d = workload_drift(&sc, &b, &run_of(off));
        assert_eq!(d[0].metrics, vec![Metric::Tpot]);
        assert!(d[0].why.contains("1 of 20 requests counted output tokens from events instead of usage, and 1 of them got a different count"), "{}", d[0].why);
    }
}
