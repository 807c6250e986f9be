//! Load-shard workers (`check --load-shard I/N`, docs/load-shards.md): a worker's scenario
//! marked as its part of the load, and what `perfgate report` does before the gate: the N
//! workers of a scenario merged into one run (every request, on one clock), which is then
//! judged against the baseline exactly as an unsharded check's run.

use crate::config::{Scenario, ScenarioName};
use crate::record::RequestRecord;
use crate::results::{LoadShardRun, MergedWorkers, Results, ScenarioResult, Status, WorkerWindow};
use crate::runner::{RunOutput, SteadyCounts};

/// Least share of the longest worker's measured window during which every worker was
/// measuring: below it the workers did not load the server together, and the merge is refused.
pub const MIN_OVERLAP: f64 = 0.5;

/// One worker's scenario as read from a results file.
#[derive(Debug, Clone, Copy)]
pub struct Worker<'a> {
    /// The results file (for messages).
    pub file: &'a str,
    pub result: &'a ScenarioResult,
    /// The file's run was interrupted (its results are partial).
    pub interrupted: bool,
}

/// What the workers of one scenario give: a run to judge, or a worker that could not measure
/// (its result stands for the scenario).
#[derive(Debug)]
pub enum Merged {
    Run(Box<RunOutput>, MergedWorkers),
    NotMeasured(Box<ScenarioResult>),
}

/// Merges the workers of one scenario: every worker 1..=N once, the same fingerprint, measured
/// together (at least [`MIN_OVERLAP`]); records on the earliest worker's clock.
///
/// Errors: why they cannot be merged, naming the scenario, the workers and their files.
pub fn merge(workers: &[Worker]) -> Result<Merged, String> {
    let Some(first) = workers.first() else {
        return Err("no worker to merge".into());
    };
    let name = &first.result.name;
    let parts: Vec<(&Worker, &LoadShardRun)> = workers
        .iter()
        .map(|w| match &w.result.load_shard {
            Some(ls) => Ok((w, ls)),
            None => Err(format!(
                "scenario {name}: {} holds it measured whole, other files hold load shards of it: merge only the workers of one load-sharded run",
                w.file
            )),
        })
        .collect::<Result<_, _>>()?;
    // read files were checked ([`crate::report::json::load`]); a caller's own values are too
    for (w, ls) in &parts {
        ls.shard()
            .map_err(|e| format!("scenario {name}: {}: {e}", w.file))?;
    }
    let n = parts[0].1.count;
    let label =
        |w: &Worker, ls: &LoadShardRun| format!("worker {}/{} ({})", ls.index, ls.count, w.file);
    if let Some((w, ls)) = parts.iter().find(|(_, ls)| ls.count != n) {
        return Err(format!(
            "scenario {name}: {} was one of {} workers, {} one of {n}: merge the workers of one run",
            label(w, ls),
            ls.count,
            label(parts[0].0, parts[0].1)
        ));
    }
    for i in 1..=n {
        let have: Vec<&(&Worker, &LoadShardRun)> =
            parts.iter().filter(|(_, ls)| ls.index == i).collect();
        match have.len() {
            1 => {}
            0 => {
                return Err(format!(
                    "scenario {name}: worker {i}/{n} is missing (given: {}): merge all {n} workers' results, or none of them",
                    parts.iter().map(|(w, ls)| label(w, ls)).collect::<Vec<_>>().join(", ")
                ))
            }
            _ => {
                return Err(format!(
                    "scenario {name}: worker {i}/{n} is given twice ({}): give each worker's results once",
                    have.iter().map(|(w, _)| w.file).collect::<Vec<_>>().join(", ")
                ))
            }
        }
    }
    if let Some((w, ls)) = parts
        .iter()
        .find(|(w, _)| w.result.fingerprint != first.result.fingerprint)
    {
        return Err(format!(
            "scenario {name}: {} measured fingerprint {}, {} fingerprint {}: the workers ran different scenario definitions; run them from one commit",
            label(w, ls),
            w.result.fingerprint,
            label(parts[0].0, parts[0].1),
            first.result.fingerprint
        ));
    }
    // a worker that was interrupted measured part of its share: the scenario was not measured
    if let Some((w, ls)) = parts.iter().find(|(w, _)| w.interrupted) {
        let mut res = w.result.clone();
        res.status = Status::Unmeasurable;
        res.status_detail = format!(
            "{} was interrupted (its results are partial): run the {n} workers again",
            label(w, ls)
        );
        res.load_shard = None;
        return Ok(Merged::NotMeasured(Box::new(res)));
    }
    // a worker that could not measure is the scenario's outcome (its error says why)
    if let Some((w, ls)) = parts
        .iter()
        .find(|(w, _)| w.result.status != Status::LoadShard)
    {
        let mut res = w.result.clone();
        res.status_detail = format!("{}: {}", label(w, ls), res.status_detail);
        res.load_shard = None;
        return Ok(Merged::NotMeasured(Box::new(res)));
    }
    for (w, ls) in &parts {
        check_worker(w, ls).map_err(|why| {
            format!(
                "scenario {name}: {}: {why}: the file is not the worker's results as it wrote them; merge each worker's own file",
                label(w, ls)
            )
        })?;
    }
    let mut ordered = parts.clone();
    ordered.sort_by_key(|(_, ls)| ls.index);
    let records: Vec<&[RequestRecord]> = ordered
        .iter()
        .map(|(w, _)| w.result.records.as_slice())
        .collect();
    if let Some(rep) = repeated(&records) {
        let at = |(p, k): (usize, usize)| {
            let (w, ls) = ordered[p];
            (label(w, ls), k)
        };
        let ((first, j), (second, k)) = (at(rep.first), at(rep.second));
        let both = if first == second {
            format!("{second}: records[{j}] and records[{k}]")
        } else {
            format!("{second}: records[{k}] and {first}'s records[{j}]")
        };
        let same = match rep.id {
            Some(id) => format!("have one response id {id}"),
            None => "are the same record".into(),
        };
        return Err(format!(
            "scenario {name}: {both} {same}: one request counted twice (a worker's file copied or relabelled as another's, or its records repeated); merge each worker's own file as it wrote it"
        ));
    }
    let windows: Vec<WorkerWindow> = ordered
        .iter()
        .map(|(w, ls)| WorkerWindow {
            index: ls.index,
            file: w.file.to_string(),
            started_unix_ms: ls.started_unix_ms,
            wall_ms: w.result.measured.wall_ms,
            requests: w.result.records.len(),
        })
        .collect();
    let overlap = overlap(&windows);
    if overlap < MIN_OVERLAP {
        let shown: Vec<String> = windows
            .iter()
            .map(|w| {
                let late = ordered
                    .iter()
                    .find(|(_, ls)| ls.index == w.index)
                    .and_then(|(_, ls)| ls.late_ms)
                    .filter(|l| *l > crate::assess::judge::LATE_NOTE_MS)
                    .map(|l| format!(", {} after --start-at", crate::units::fmt_ms(l)))
                    .unwrap_or_default();
                format!(
                    "worker {}/{n} ({}) {} for {}{late}",
                    w.index,
                    w.file,
                    crate::config::load_shard::utc(w.started_unix_ms),
                    crate::units::fmt_ms(w.wall_ms)
                )
            })
            .collect();
        return Err(format!(
            "scenario {name}: the workers did not measure together (every worker was measuring during {:.0}% of the longest window, at least {:.0}% needed): {}: start them with one --start-at",
            overlap * 100.0,
            MIN_OVERLAP * 100.0,
            shown.join(", ")
        ));
    }
    let ((t0, _), (_, end)) = (starts(&windows), ends(&windows));
    let per_worker: Vec<Vec<RequestRecord>> = ordered
        .iter()
        .map(|(w, ls)| shifted(&w.result.records, ls.started_unix_ms - t0))
        .collect();
    let unmeasured: Vec<(f64, f64)> = ordered
        .iter()
        .flat_map(|(_, ls)| {
            let by = ls.started_unix_ms - t0;
            ls.unmeasured_spans
                .iter()
                .map(move |&(s, e)| (s + by, e + by))
        })
        .collect();
    let mut records = merged_concurrency(per_worker, &unmeasured);
    records.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    // the busiest worker's lag, and the highest CPU share: either could explain a delay
    let lags: Vec<_> = ordered
        .iter()
        .filter_map(|(w, _)| w.result.measured.client_lag_ms.clone())
        .collect();
    let worst_lag = lags
        .iter()
        .max_by(|a, b| a.p50.total_cmp(&b.p50))
        .cloned()
        .map(|mut l| {
            l.cpu_share = lags.iter().filter_map(|x| x.cpu_share).reduce(f64::max);
            l
        });
    let steady = ordered
        .iter()
        .filter_map(|(_, ls)| ls.steady)
        .reduce(|a, b| SteadyCounts {
            ramp_up: a.ramp_up + b.ramp_up,
            drain: a.drain + b.drain,
            step_ms: a.step_ms,
        });
    let m = &first.result.measured;
    let earliest = ordered
        .iter()
        .min_by(|a, b| a.1.started_unix_ms.total_cmp(&b.1.started_unix_ms))
        .map(|(w, _)| w.result.measured.clone());
    let mut run = RunOutput::empty();
    run.records = records;
    run.wall_ms = end - t0;
    run.started_at = crate::config::load_shard::utc(t0);
    run.started_unix_ms = t0;
    run.model = m.model.clone();
    run.server = earliest.and_then(|e| e.server);
    run.client_lag = worst_lag;
    run.steady = steady;
    run.retried = ordered.iter().map(|(_, ls)| ls.retried).sum();
    run.warmup_failures = ordered.iter().map(|(_, ls)| ls.warmup_failures).sum();
    run.late_ms = ordered
        .iter()
        .filter_map(|(_, ls)| ls.late_ms)
        .reduce(f64::max);
    Ok(Merged::Run(
        Box::new(run),
        MergedWorkers { windows, overlap },
    ))
}

/// Slack of the window checks, ms: a worker writes its records and spans to the microsecond and
/// takes its wall time after its last request ended.
const WINDOW_SLACK_MS: f64 = 1.0;

/// Why a worker's file is not its share of the run as the worker wrote it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotItsShare {
    #[error("it holds {records} request record(s) but measured {samples} (its share)")]
    RecordCount { records: usize, samples: u32 },
    #[error("{spans} unmeasured spans, more than its {streams} streams' ramp-up and drain can send ({most})")]
    TooManySpans {
        spans: usize,
        streams: u32,
        most: usize,
    },
    #[error("unmeasured span [{start}, {end}] is not an interval within its run (ms from its start: 0 <= start <= end <= its wall_ms {wall_ms})")]
    SpanOutside { start: f64, end: f64, wall_ms: f64 },
    #[error("records[{k}] runs from {start} ms to {end} ms, outside its measured run (0 to its wall_ms {wall_ms})")]
    RecordOutside {
        k: usize,
        start: f64,
        end: f64,
        wall_ms: f64,
    },
    #[error("records[{k}] is request {request} of the run (work.index), not one of its share (worker {index}/{count} sends requests {index} - 1 + k x {count}, k below its {samples})")]
    NotItsRequest {
        k: usize,
        request: u64,
        index: usize,
        count: usize,
        samples: u32,
    },
    #[error(
        "records[{first}] and records[{k}] are both request {request} of the run (work.index)"
    )]
    RequestTwice {
        first: usize,
        k: usize,
        request: u64,
    },
}

/// What a worker's results must hold to be its share of the run: one record per measured
/// request of its share, each within its measured window (`measured.wall_ms`) and, when it says
/// which request of the run it was, one of its share's and once; unmeasured spans no more than
/// its ramp-up and drain send, each within the window.
fn check_worker(w: &Worker, ls: &LoadShardRun) -> Result<(), NotItsShare> {
    let recs = &w.result.records;
    if recs.len() != ls.samples as usize {
        return Err(NotItsShare::RecordCount {
            records: recs.len(),
            samples: ls.samples,
        });
    }
    // a steady look sends c ramp-up and at most DRAIN_PER_STREAM x c drain requests
    let most = (1 + crate::runner::steady::DRAIN_PER_STREAM) * ls.concurrency as usize;
    if ls.unmeasured_spans.len() > most {
        return Err(NotItsShare::TooManySpans {
            spans: ls.unmeasured_spans.len(),
            streams: ls.concurrency,
            most,
        });
    }
    let wall_ms = w.result.measured.wall_ms;
    let within = |s: f64, e: f64| 0.0 <= s && s <= e && e <= wall_ms + WINDOW_SLACK_MS;
    if let Some(&(start, end)) = ls.unmeasured_spans.iter().find(|(s, e)| !within(*s, *e)) {
        return Err(NotItsShare::SpanOutside {
            start,
            end,
            wall_ms,
        });
    }
    let mut requests = std::collections::HashMap::new();
    for (k, r) in recs.iter().enumerate() {
        let (start, end) = span(r);
        if !within(start, end) {
            return Err(NotItsShare::RecordOutside {
                k,
                start,
                end,
                wall_ms,
            });
        }
        let Some(request) = r.work.as_ref().map(|wk| wk.index) else {
            continue;
        };
        let n = ls.count as u64;
        if request % n != ls.index as u64 - 1 || request / n >= u64::from(ls.samples) {
            return Err(NotItsShare::NotItsRequest {
                k,
                request,
                index: ls.index,
                count: ls.count,
                samples: ls.samples,
            });
        }
        if let Some(first) = requests.insert(request, k) {
            return Err(NotItsShare::RequestTwice { first, k, request });
        }
    }
    Ok(())
}

/// A request's (start, end) on its run's clock, ms: its end the stream's last byte (or its
/// E2E; its start when it has neither).
fn span(r: &RequestRecord) -> (f64, f64) {
    let len = r.t_done_ms.or(r.e2e_ms).unwrap_or(0.0).max(0.0);
    (r.start_ms, r.start_ms + len)
}

/// One request twice in the merged run: `first` and `second` are (worker, record) places, the
/// worker's place in the list given to [`repeated`].
#[derive(Debug, Clone, PartialEq)]
struct Repeat {
    first: (usize, usize),
    second: (usize, usize),
    /// The response id both carry; `None`: the records are identical.
    id: Option<String>,
}

/// The first request that two records of the workers' `records` are: one response id (unless the
/// server gave every response the same id: then ids tell nothing), or records identical in every
/// figure (which two requests never are).
fn repeated(records: &[&[RequestRecord]]) -> Option<Repeat> {
    let places = || {
        records
            .iter()
            .enumerate()
            .flat_map(|(p, rs)| rs.iter().enumerate().map(move |(k, r)| ((p, k), r)))
    };
    let ids = || {
        places().filter_map(|(at, r)| {
            r.response_id
                .as_deref()
                .filter(|id| !id.is_empty())
                .map(|id| (at, id))
        })
    };
    let mut all = ids();
    let one_id = all
        .next()
        .is_none_or(|(_, first)| all.all(|(_, id)| id == first));
    if !one_id {
        let mut seen = std::collections::HashMap::new();
        for (at, id) in ids() {
            if let Some(first) = seen.insert(id, at) {
                return Some(Repeat {
                    first,
                    second: at,
                    id: Some(id.to_string()),
                });
            }
        }
    }
    let mut seen = std::collections::HashMap::new();
    for (at, r) in places() {
        let text = serde_json::to_string(r).unwrap_or_default();
        if let Some(first) = seen.insert(text, at) {
            return Some(Repeat {
                first,
                second: at,
                id: None,
            });
        }
    }
    None
}

/// The time every worker was measuring over the longest worker's window (0 when some pair of
/// windows does not meet).
pub fn overlap(windows: &[WorkerWindow]) -> f64 {
    let ((_, start), (end, _)) = (starts(windows), ends(windows));
    let longest = windows.iter().map(|w| w.wall_ms).fold(0.0, f64::max);
    if longest <= 0.0 || end.partial_cmp(&start) != Some(std::cmp::Ordering::Greater) {
        return 0.0;
    }
    ((end - start) / longest).min(1.0)
}

/// The earliest and the latest start of the windows, unix ms (infinite both ways when there is
/// none).
fn starts(windows: &[WorkerWindow]) -> (f64, f64) {
    range(windows.iter().map(|w| w.started_unix_ms))
}

/// The earliest and the latest end of the windows, as [`starts`].
fn ends(windows: &[WorkerWindow]) -> (f64, f64) {
    range(windows.iter().map(|w| w.started_unix_ms + w.wall_ms))
}

fn range(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// `records` with their times moved `by_ms` later (onto the merged run's clock).
fn shifted(records: &[RequestRecord], by_ms: f64) -> Vec<RequestRecord> {
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.start_ms += by_ms;
            r.sched_ms = r.sched_ms.map(|s| s + by_ms);
            r
        })
        .collect()
}

/// Every worker's records with their per-request `concurrency` counted over all workers: the
/// requests of every worker in flight over the request's duration, the unmeasured ramp-up and
/// drain requests (`unmeasured`, on the merged clock) included, as a single process counts them.
/// Records without a figure (not a steady-state loop) keep none.
fn merged_concurrency(
    per_worker: Vec<Vec<RequestRecord>>,
    unmeasured: &[(f64, f64)],
) -> Vec<RequestRecord> {
    let mut records: Vec<RequestRecord> = per_worker.into_iter().flatten().collect();
    let mut spans: Vec<(f64, f64)> = records.iter().map(span).collect();
    spans.extend_from_slice(unmeasured);
    let achieved = crate::runner::steady::achieved_all(&spans);
    for (r, c) in records.iter_mut().zip(achieved) {
        r.concurrency = r.concurrency.map(|_| c);
    }
    records
}

/// `perfgate report`: each load-sharded scenario of `all` (`files` label them) replaced by its
/// workers merged ([`merge`]) and judged against its baseline in `baselines` as
/// [`super::compare`] judges an unsharded run; the merged scenarios come as one more
/// [`Results`] at the end. `scenarios` gives the scenario definitions (their gate settings),
/// asked for only when there is a load shard.
///
/// Errors: workers that cannot be merged, or a scenario missing or changed in `scenarios`.
pub fn merge_workers(
    all: &mut Vec<Results>,
    files: &mut Vec<String>,
    scenarios: &dyn Fn() -> Result<Vec<Scenario>, String>,
    baselines: &std::path::Path,
) -> Result<(), String> {
    let mut names: Vec<ScenarioName> = Vec::new();
    for r in all.iter() {
        for s in r.scenarios.iter().filter(|s| s.load_shard.is_some()) {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    let defined = scenarios()?;
    let mut judged_scs = Vec::new();
    let mut runs = Vec::new();
    let mut merged_info = Vec::new();
    let mut not_measured = Vec::new();
    for name in &names {
        let workers: Vec<Worker> = all
            .iter()
            .zip(files.iter())
            .flat_map(|(r, f)| {
                r.scenarios
                    .iter()
                    .filter(|s| &s.name == name)
                    .map(move |s| Worker {
                        file: f,
                        result: s,
                        interrupted: r.incomplete,
                    })
            })
            .collect();
        match merge(&workers)? {
            Merged::NotMeasured(res) => not_measured.push(*res),
            Merged::Run(run, info) => {
                let sc = defined.iter().find(|s| &s.name == name).ok_or_else(|| {
                    format!(
                        "scenario {name}: its workers' results are given but no scenario file defines it: pass the workers' scenario files with -s"
                    )
                })?;
                if sc.fingerprint != workers[0].result.fingerprint {
                    return Err(format!(
                        "scenario {name}: the workers measured fingerprint {}, the scenario file ({}) now gives {}: merge with the scenario files the workers ran",
                        workers[0].result.fingerprint, sc.source, sc.fingerprint
                    ));
                }
                // samples are not in the fingerprint: each worker's share must be this file's
                for w in &workers {
                    if let Some(ls) = &w.result.load_shard {
                        let shard = ls
                            .shard()
                            .map_err(|e| format!("scenario {name}: {}: {e}", w.file))?;
                        let want = crate::config::load_shard::share(sc.load.samples, shard);
                        if ls.samples != want {
                            return Err(format!(
                                "scenario {name}: worker {}/{} ({}) measured {} request(s), but load.samples {} in {} gives it {want}: merge with the scenario files the workers ran",
                                ls.index, ls.count, w.file, ls.samples, sc.load.samples, sc.source
                            ));
                        }
                    }
                }
                judged_scs.push(sc.clone());
                runs.push(Ok(*run));
                merged_info.push(info);
            }
        }
    }
    let first = &all[0];
    let opts = super::CheckOptions {
        policy: first.baseline_policy,
        id: first.id.clone(),
        unlisted_model: crate::assess::UnlistedModel::Note,
        progress: None,
        history: None,
    };
    let bl = super::Baselines::load(&judged_scs, baselines, Default::default());
    let mut judged = super::judge_all(&judged_scs, runs, &bl, &opts, &merged_info);
    judged.scenarios.extend(not_measured);
    judged.created_at = all
        .iter()
        .map(|r| r.created_at.clone())
        .max()
        .unwrap_or_default();
    // the workers' files leave once their scenarios are merged (an interrupted worker's
    // `incomplete` with them: the report itself was not interrupted)
    let mut kept_files = Vec::new();
    let mut kept = Vec::new();
    for (mut r, f) in std::mem::take(all).into_iter().zip(std::mem::take(files)) {
        let had = r.scenarios.len();
        r.scenarios.retain(|s| s.load_shard.is_none());
        if r.scenarios.is_empty() && had > 0 {
            continue;
        }
        kept.push(r);
        kept_files.push(f);
    }
    *all = kept;
    *files = kept_files;
    judged.decide();
    all.push(judged);
    files.push("the merged load-shard workers".into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture's `chat-short` scenario as worker `index` of `count`, measuring from
    /// `started` (ms since the epoch) for `wall` ms, with one request per (start, length) of
    /// `requests` on its own clock (concurrency figure 1.0: a steady-state loop), each its own
    /// response id.
    fn worker(
        index: usize,
        count: usize,
        started: f64,
        wall: f64,
        requests: &[(f64, f64)],
    ) -> ScenarioResult {
        let r = crate::results::fixture();
        let mut s = r.scenarios.into_iter().next().unwrap();
        s.status = Status::LoadShard;
        s.measured.wall_ms = wall;
        s.records = requests
            .iter()
            .enumerate()
            .map(|(k, &(start, len))| {
                let mut rec = RequestRecord::new(start);
                rec.response_id = Some(format!("chatcmpl-{index}-{k}"));
                rec.ttft_ms = Some(len / 2.0);
                rec.e2e_ms = Some(len);
                rec.t_done_ms = Some(len);
                rec.concurrency = Some(1.0);
                rec
            })
            .collect();
        s.load_shard = Some(LoadShardRun {
            index,
            count,
            concurrency: 1,
            samples: requests.len() as u32,
            started_unix_ms: started,
            start_at_unix_ms: None,
            late_ms: None,
            steady: None,
            unmeasured_spans: Vec::new(),
            retried: 0,
            warmup_failures: 0,
        });
        s
    }

    fn run_of(m: Merged) -> (RunOutput, MergedWorkers) {
        match m {
            Merged::Run(r, w) => (*r, w),
            Merged::NotMeasured(r) => panic!("not measured: {}", r.status_detail),
        }
    }

    #[test]
    fn workers_merge_onto_one_clock_and_count_each_other_in_flight() {
        let t0 = 1.8e12;
        // worker 1: requests [0, 100] and [100, 200] on its clock; worker 2 started 50 ms later
        // with [0, 100] (= [50, 150] merged) and an unmeasured drain request [100, 140]
        // (= [150, 190] merged)
        let a = worker(1, 2, t0, 200.0, &[(0.0, 100.0), (100.0, 100.0)]);
        let mut b = worker(2, 2, t0 + 50.0, 140.0, &[(0.0, 100.0)]);
        b.load_shard.as_mut().unwrap().unmeasured_spans = vec![(100.0, 140.0)];
        let ws = [
            Worker {
                file: "b.json",
                result: &b,
                interrupted: false,
            },
            Worker {
                file: "a.json",
                result: &a,
                interrupted: false,
            },
        ];
        let (run, info) = run_of(merge(&ws).unwrap());
        let starts: Vec<f64> = run.records.iter().map(|r| r.start_ms).collect();
        assert_eq!(starts, vec![0.0, 50.0, 100.0]);
        // in flight, by hand: [0,100] has itself on [0,100] and b's first on [50,100]:
        // (100 + 50) / 100 = 1.5; b's [50,150]: a's first on [50,100], a's second on
        // [100,150]: (100 + 50 + 50) / 100 = 2.0; a's [100,200]: b's first on [100,150], the
        // drain request on [150,190]: (100 + 50 + 40) / 100 = 1.9
        let conc: Vec<f64> = run.records.iter().map(|r| r.concurrency.unwrap()).collect();
        assert_eq!(conc, vec![1.5, 2.0, 1.9]);
        assert_eq!(run.wall_ms, 200.0);
        assert_eq!(run.started_unix_ms, t0);
        // every worker measuring during [50, 190]: 140 ms of the longest window's 200
        assert!((info.overlap - 0.7).abs() < 1e-12, "{}", info.overlap);
        assert_eq!(
            info.windows
                .iter()
                .map(|w| (w.index, w.file.as_str(), w.requests))
                .collect::<Vec<_>>(),
            vec![(1, "a.json", 2), (2, "b.json", 1)]
        );
    }

    #[test]
    fn workers_that_cannot_be_merged_are_refused_with_the_reason() {
        let t0 = 1.8e12;
        let one = worker(1, 2, t0, 100.0, &[(0.0, 50.0)]);
        let two = worker(2, 2, t0, 100.0, &[(0.0, 50.0)]);
        let err = |ws: &[Worker]| merge(ws).unwrap_err();
        let w = |file, result| Worker {
            file,
            result,
            interrupted: false,
        };
        // a missing worker
        let e = err(&[w("a", &one)]);
        assert!(e.contains("worker 2/2 is missing"), "{e}");
        // one given twice
        let e = err(&[w("a", &one), w("b", &one), w("c", &two)]);
        assert!(e.contains("worker 1/2 is given twice (a, b)"), "{e}");
        // another N
        let three = worker(3, 3, t0, 100.0, &[(0.0, 50.0)]);
        let e = err(&[w("a", &one), w("b", &two), w("c", &three)]);
        assert!(e.contains("one of 3 workers"), "{e}");
        // another scenario definition
        let mut other = two.clone();
        other.fingerprint = "0000000000000000".into();
        let e = err(&[w("a", &one), w("b", &other)]);
        assert!(e.contains("different scenario definitions"), "{e}");
        // not together: the second started as the first ended
        let late = worker(2, 2, t0 + 100.0, 100.0, &[(0.0, 50.0)]);
        let e = err(&[w("a", &one), w("b", &late)]);
        assert!(
            e.contains("did not measure together") && e.contains("--start-at"),
            "{e}"
        );
        // half together is enough; less is not
        let half = worker(2, 2, t0 + 50.0, 100.0, &[(0.0, 50.0)]);
        assert!(merge(&[w("a", &one), w("b", &half)]).is_ok());
        let less = worker(2, 2, t0 + 51.0, 100.0, &[(0.0, 50.0)]);
        assert!(merge(&[w("a", &one), w("b", &less)]).is_err());
        // a file that is not the worker's whole results: fewer records than its share, a span
        // that ends before it starts, more spans than its streams can send
        let mut short = two.clone();
        short.records.clear();
        let e = err(&[w("a", &one), w("b", &short)]);
        assert!(
            e.contains("holds 0 request record(s) but measured 1"),
            "{e}"
        );
        let mut backwards = two.clone();
        backwards.load_shard.as_mut().unwrap().unmeasured_spans = vec![(1e18, -1e18)];
        let e = err(&[w("a", &one), w("b", &backwards)]);
        assert!(e.contains("is not an interval within its run"), "{e}");
        let mut many = two.clone();
        many.load_shard.as_mut().unwrap().unmeasured_spans = vec![(0.0, 1.0); 4];
        let e = err(&[w("a", &one), w("b", &many)]);
        assert!(
            e.contains("4 unmeasured spans, more than its 1 streams'"),
            "{e}"
        );
        // an interrupted worker: the scenario was not measured
        let cut = Worker {
            file: "b",
            result: &two,
            interrupted: true,
        };
        match merge(&[w("a", &one), cut]).unwrap() {
            Merged::NotMeasured(r) => {
                assert_eq!(r.status, Status::Unmeasurable);
                assert!(r.status_detail.contains("worker 2/2 (b) was interrupted"));
            }
            Merged::Run(..) => panic!("merged an interrupted worker"),
        }
        // a result measured whole among load shards
        let mut whole = two.clone();
        whole.load_shard = None;
        let e = err(&[w("a", &one), w("b", &whole)]);
        assert!(e.contains("b holds it measured whole"), "{e}");
    }

    /// Issue 41 finding 9: a record says which request of the run it was (`work.index`, a
    /// prompt set or drawn lengths): worker 2 of 2 sends requests 1, 3, 5, ... below 2 x its
    /// share, each once. A server that gives every response one id still merges.
    #[test]
    fn each_record_is_a_request_of_its_workers_share_once() {
        let t0 = 1.8e12;
        let at = |index: u64| crate::record::WorkItem {
            index,
            entry: Some(0),
            prompt_id: "0123456789abcdef".into(),
            max_tokens: 8,
            input_tokens: None,
            conversation: None,
            turn: None,
        };
        let with = |indices: [u64; 2]| {
            let mut s = worker(2, 2, t0, 100.0, &[(0.0, 50.0), (10.0, 50.0)]);
            for (r, i) in s.records.iter_mut().zip(indices) {
                r.work = Some(at(i));
                r.response_id = Some("chatcmpl-123".into());
            }
            s
        };
        let mut one = worker(1, 2, t0, 100.0, &[(0.0, 50.0), (20.0, 50.0)]);
        for (k, r) in one.records.iter_mut().enumerate() {
            r.work = Some(at(2 * k as u64));
            r.response_id = Some("chatcmpl-123".into());
        }
        fn w<'a>(file: &'a str, result: &'a ScenarioResult) -> Worker<'a> {
            Worker {
                file,
                result,
                interrupted: false,
            }
        }
        let ok = with([1, 3]);
        run_of(merge(&[w("a", &one), w("b", &ok)]).unwrap());
        for (indices, want) in [
            (
                [1, 2],
                "records[1] is request 2 of the run (work.index), not one of its share",
            ),
            ([1, 5], "records[1] is request 5 of the run"),
            (
                [3, 3],
                "records[0] and records[1] are both request 3 of the run",
            ),
        ] {
            let bad = with(indices);
            let e = merge(&[w("a", &one), w("b", &bad)]).unwrap_err();
            assert!(e.contains("worker 2/2 (b): ") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_worker_that_could_not_measure_is_the_scenarios_outcome() {
        let one = worker(1, 2, 1.8e12, 100.0, &[(0.0, 50.0)]);
        let mut two = worker(2, 2, 1.8e12, 0.0, &[]);
        two.status = Status::Unmeasurable;
        two.status_detail = "connection refused".into();
        let ws = [
            Worker {
                file: "a",
                result: &one,
                interrupted: false,
            },
            Worker {
                file: "b",
                result: &two,
                interrupted: false,
            },
        ];
        match merge(&ws).unwrap() {
            Merged::NotMeasured(r) => {
                assert_eq!(r.status, Status::Unmeasurable);
                assert_eq!(r.status_detail, "worker 2/2 (b): connection refused");
            }
            Merged::Run(..) => panic!("merged a worker that could not measure"),
        }
    }
}
