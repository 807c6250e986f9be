//! `perfgate bless`: measure each scenario K times and rewrite its baseline atomically.
//! A scenario whose run is unreachable, has no successful request, or fails more often than its
//! `max_error_rate` is refused, and its old baseline is left untouched.

mod command;

pub use command::{cmd_bless, BlessArgs};

use crate::assess;
use crate::baseline;
use crate::config::Scenario;
use crate::exit;
use crate::report::fmt_ms;
use crate::runner::RunOutput;
use crate::summary::SummaryKey;
use std::path::Path;

mod estimate;

/// Says that scenario `name` is not blessed, why, and that its baseline file is unchanged.
fn not_blessing(name: &str, path: &Path, why: &dyn std::fmt::Display) {
    eprintln!(
        "perfgate: not blessing {name}: {why}; {} left unchanged",
        path.display()
    );
}

/// True (and says so) when Ctrl-C / SIGTERM asked to stop: nothing more is blessed.
fn interrupted(name: &str, path: &Path) -> bool {
    let stop = crate::cancel::requested();
    if stop {
        eprintln!(
            "perfgate: interrupted: {name} not blessed; {} left unchanged",
            path.display()
        );
    }
    stop
}

/// Removes temp files a killed bless left for this scenario (`.<name>.json.tmp-PID`), only those
/// of processes that are gone: another bless writing the same directory right now keeps its
/// file.
fn remove_stale_temp_files(dir: &Path, name: &str) {
    let prefix = format!(".{name}.json.tmp-");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().to_string();
            let Some(pid) = file.strip_prefix(&prefix) else {
                continue;
            };
            let dead = match pid.parse::<u32>() {
                Ok(pid) => !process_alive(pid, &e.path()),
                Err(_) => false, // not ours
            };
            if dead {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Whether process `pid` may still be writing `file`. On Linux, whether /proc/PID exists;
/// elsewhere, a temp file younger than an hour is assumed to be in use.
fn process_alive(pid: u32, file: &Path) -> bool {
    if pid == std::process::id() {
        return false; // our own leftover from an earlier scenario write cannot be in flight
    }
    if Path::new("/proc/self").exists() {
        return Path::new(&format!("/proc/{pid}")).exists();
    }
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < std::time::Duration::from_secs(3600))
}

/// Why a run may not become a baseline, if it may not: `check`'s rules ([`assess::run_problem`],
/// [`assess::judge::error_rate_problem`]) in `check`'s words, and a single successful request
/// (a P50 comparison needs 2).
pub fn refusal(sc: &Scenario, run: &RunOutput) -> Option<String> {
    let m = assess::measured(run);
    let one = (m.ok == 1).then(|| {
        format!(
            "1 successful request of {} (first failure: {}): a P50 comparison needs 2 or more, so no check could compare with it",
            m.requests,
            m.first_error.clone().unwrap_or_default()
        )
    });
    let problem = assess::run_problem(sc, run, &m, assess::UnlistedModel::Note)
        .map(|(_, why)| why)
        .or(one);
    problem.or_else(|| assess::judge::error_rate_problem(sc, &m).map(|(_, why)| why))
}

/// The name of the machine blessing (`$HOSTNAME`, else `/etc/hostname`), recorded in the
/// baseline's environment; `None` when neither is readable.
pub fn this_host() -> Option<String> {
    crate::machine::host()
}

/// The fewest requests an arm of a results file must hold to become a baseline (`bless
/// --from`): `load.samples`' own minimum. An arm of 1 request made a baseline no latency check
/// could compare with.
pub const MIN_FROM_REQUESTS: usize = crate::config::scenario::MIN_SAMPLES as usize;

pub use crate::baseline::DEFAULT_RUNS;

/// The largest fail tolerance a baseline may widen to: beyond it not even a 2x slowdown could
/// FAIL, so such a baseline would pass every regression.
pub const MAX_WIDENED_FAIL: f64 = 1.0;

/// Why a k-run baseline's run-to-run spread makes it useless as a gate, if it does: the widened
/// P50 fail tolerance of a gated metric could not catch a 2x change.
pub fn unstable(sc: &Scenario, b: &baseline::Baseline) -> Option<String> {
    let rs = b.run_spread.as_ref()?;
    let mut why = Vec::new();
    for &m in &sc.gate.metrics {
        let key = SummaryKey::from(m);
        let Some(&tau) = rs.tau.get(&key) else {
            continue;
        };
        let fail = sc.gate.band(m, crate::config::Quantile::P50).fail;
        let widened = crate::stats::spread::widened_fail(fail, tau, rs.runs);
        if widened >= MAX_WIDENED_FAIL {
            let meds: Vec<String> = rs
                .run_medians_ms
                .get(&key)
                .map(|v| v.iter().map(|x| fmt_ms(*x)).collect())
                .unwrap_or_default();
            why.push(format!(
                "{} P50 of the {} runs was {} (run-to-run spread tau {:.0}%), so a check would widen the {:.0}% fail tolerance to {:.0}%: not even a 2x slowdown could FAIL",
                m.label(),
                rs.runs,
                meds.join(", "),
                tau * 100.0,
                fail * 100.0,
                widened * 100.0
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Blesses every scenario with `k` runs each; returns the exit code (0, or 3 when a scenario
/// was refused). Errors writing a file are exit 2 with the path. `allow_unstable` writes a
/// baseline whose run-to-run spread is too large to gate (see [`unstable`]) instead of refusing.
/// Every run reports its requests to `progress` (a live display) when given.
pub async fn bless(
    scs: &[Scenario],
    dir: &Path,
    k: usize,
    allow_unstable: bool,
    unlisted: assess::UnlistedModel,
    host: Option<String>,
    progress: Option<std::sync::Arc<dyn crate::runner::Progress>>,
) -> Result<i32, exit::Error> {
    let mut code = exit::OK;
    'scenario: for sc in scs {
        let path = baseline::path_for(dir, &sc.name);
        let mut runs = Vec::with_capacity(k);
        // A note is said once per scenario, not once per run.
        let mut said = std::collections::HashSet::new();
        remove_stale_temp_files(dir, &sc.name);
        let plan = estimate::Plan::new(sc, k);
        let previous =
            estimate::per_request(sc, &baseline::load(&path, &crate::hint::Hint::default()));
        eprintln!("perfgate: {}", estimate::before(&sc.name, &plan, previous));
        let mut ended = estimate::Runs::default();
        for i in 0..k {
            if interrupted(&sc.name, &path) {
                return Ok(exit::INTERRUPTED);
            }
            let run_started = std::time::Instant::now();
            eprintln!(
                "perfgate: measuring {} run {}/{k} ({} warmup + {} requests, concurrency {})",
                sc.name,
                i + 1,
                sc.load.warmup,
                sc.load.samples,
                sc.load.concurrency
            );
            // the cold reference in the first run only (estimate::run_scenario)
            let run_sc = estimate::run_scenario(sc, i);
            let run = match crate::execute::measure(&run_sc, progress.clone()).await {
                Ok(r) => r,
                // Ctrl-C / SIGTERM while the server was starting: an interruption (130), not a
                // server that could not start (3)
                Err(e) if crate::cancel::requested() => {
                    eprintln!("perfgate: {}: {e}", sc.name);
                    interrupted(&sc.name, &path);
                    return Ok(exit::INTERRUPTED);
                }
                Err(e) => {
                    let mut r = RunOutput::empty();
                    r.unreachable = Some(e.to_string());
                    r
                }
            };
            if let Some(why) = refusal(sc, &run) {
                not_blessing(&sc.name, &path, &why);
                code = exit::COULD_NOT_MEASURE;
                continue 'scenario;
            }
            if let (assess::UnlistedModel::Refuse, Some(why)) = (
                unlisted,
                crate::client::models::unlisted_note(
                    &sc.endpoint.model,
                    run.listed_models.as_deref(),
                ),
            ) {
                eprintln!(
                    "perfgate: not blessing {}: {why}. A baseline of a name the server does not list stays wrong for good (a typo, or another model answered); {} left unchanged. Set endpoint.model to a listed name, or pass --allow-unlisted-model if this server routes names it does not list (a gateway)",
                    sc.name,
                    path.display()
                );
                if code == exit::OK {
                    code = exit::INVALID_INPUT;
                }
                continue 'scenario;
            }
            for n in assess::run_notes(sc, &run) {
                if said.insert(n.clone()) {
                    eprintln!("perfgate: {}: note: {n}", sc.name);
                }
            }
            eprintln!(
                "perfgate: {}",
                ended.ended(
                    &sc.name,
                    (i, k),
                    run.records.len(),
                    run.cache_reference.len(),
                    run_started.elapsed()
                )
            );
            runs.push(run);
        }
        if interrupted(&sc.name, &path) {
            return Ok(exit::INTERRUPTED);
        }
        let b = baseline::from_runs(sc, &runs, host.clone());
        if let Some(why) = unstable(sc, &b) {
            if allow_unstable {
                eprintln!("perfgate: {}: warning (--allow-unstable): {why}", sc.name);
            } else {
                eprintln!(
                    "perfgate: not blessing {}: the endpoint's speed is not stable enough to gate: {why}; {} left unchanged. Find what makes its speed vary (other load on the machine, autoscaling, cold caches) and bless again, or pass --allow-unstable to write it anyway",
                    sc.name,
                    path.display()
                );
                code = exit::COULD_NOT_MEASURE;
                continue 'scenario;
            }
        }
        // What a check will read, checked before the rename: never a file a check refuses.
        let text = match baseline::encode(&b) {
            Ok(t) => t,
            Err(why) => {
                not_blessing(&sc.name, &path, &why);
                code = exit::COULD_NOT_MEASURE;
                continue 'scenario;
            }
        };
        crate::fsutil::write_atomic(&path, &text).map_err(|e| exit::Error::write(&path, e))?;
        let requests: usize = runs.iter().map(|r| r.records.len()).sum();
        let spread = match &b.run_spread {
            Some(rs) => {
                let t: Vec<String> = rs
                    .tau
                    .iter()
                    .map(|(m, t)| format!("{} {:.1}%", m.name(), t * 100.0))
                    .collect();
                format!(
                    "; spread of the run medians, tau (90% upper bound): {}",
                    t.join(", ")
                )
            }
            None => String::new(),
        };
        // what a check's cache drift is measured against
        let cache = b.cache.as_ref().map_or(String::new(), |c| {
            format!("; prefix cache of its first run: {}", c.describe())
        });
        let what = format!("{k} run(s)");
        say_blessed(sc, &path, &b, &what, requests, &format!("{spread}{cache}"));
        for line in assess::cold_start::bless_lines(sc, &b.environment.server_starts) {
            println!("  {}: {line}", sc.name);
        }
    }
    Ok(code)
}

/// `perfgate bless --from RESULTS.json --arm base|candidate`: measures nothing; writes the
/// requests one arm of a saved run measured as the baseline of each scenario in `scs`, with
/// the same format and atomic write as a measured bless (one run, so no run-to-run spread).
/// `--arm candidate` also takes a `check` run's requests.
///
/// Everything is checked before anything is written: a scenario missing from the results, a
/// results file without that arm (exit 2), a fingerprint that differs from the scenario
/// file's (the scenario changed since that run; exit 2), figures a baseline cannot hold (a
/// negative or out-of-range time; exit 2), an interrupted (`incomplete`) run, an arm of fewer
/// than [`MIN_FROM_REQUESTS`] requests, an arm that could not be measured or failed too often,
/// a baseline too large for a check to read (exit 3, as `bless` refuses a run).
pub fn bless_from(
    scs: &[Scenario],
    dir: &Path,
    from: &Path,
    arm: crate::gate::Side,
    host: Option<String>,
) -> Result<i32, exit::Error> {
    use crate::gate::Side;
    let results = crate::report::json::load(from)?;
    let shown = from.display();
    let arm_name = match arm {
        Side::Base => "base",
        Side::Candidate => "candidate",
    };
    let mut planned = Vec::with_capacity(scs.len());
    let mut problems = Vec::new();
    let mut refused = Vec::new();
    for sc in scs {
        let Some(res) = results.scenarios.iter().find(|r| r.name == sc.name) else {
            problems.push(format!(
                "scenario {}: not in {shown} (pass --only with the scenarios it holds)",
                sc.name
            ));
            continue;
        };
        if let Err(why) = res.whole_run() {
            problems.push(format!("scenario {}: {shown} {why}", sc.name));
            continue;
        }
        if res.fingerprint != sc.fingerprint {
            problems.push(format!(
                "scenario {}: {shown} measured it with fingerprint {}, the scenario file ({}) now has {}: the scenario changed since that run, so its requests are not this scenario's; run it again",
                sc.name, res.fingerprint, sc.source, sc.fingerprint
            ));
            continue;
        }
        let (records, m, server_side) = match (arm, &res.ab) {
            (Side::Base, Some(ab)) => (&ab.base_records, &ab.base_measured, &ab.base_server),
            (Side::Base, None) => {
                problems.push(format!(
                    "scenario {}: {shown} is not from perfgate ab, so it has no base arm (--arm candidate takes its requests)",
                    sc.name
                ));
                continue;
            }
            (Side::Candidate, _) => (&res.records, &res.measured, &res.server),
        };
        let mut run = RunOutput::empty();
        run.records = records.clone();
        run.started_at = results.created_at.clone();
        run.wall_ms = m.wall_ms;
        run.model = m.model.clone();
        run.server = m.server.clone();
        run.server_side = server_side.clone();
        if records.is_empty() {
            run.unreachable = Some(format!("the {arm_name} arm has no measured request"));
        }
        let why = if let Err(why) = results.whole_run() {
            Some(why.to_string())
        } else if records.len() < MIN_FROM_REQUESTS {
            Some(format!(
                "the {arm_name} arm measured {} request(s): a baseline needs at least {MIN_FROM_REQUESTS} (load.samples' minimum), or a check could not compare with it",
                records.len()
            ))
        } else {
            refusal(sc, &run)
        };
        if let Some(why) = why {
            refused.push(format!(
                "not blessing {} from the {arm_name} arm of {shown}: {why}",
                sc.name
            ));
            continue;
        }
        // The results file's figures become the baseline's: a figure a check would refuse
        // (`ttft_ms: -1`, a time above a day) is the results file's fault, named here.
        let b = baseline::from_runs(sc, std::slice::from_ref(&run), host.clone());
        match baseline::encode(&b) {
            Ok(text) => planned.push((sc, run, b, text)),
            Err(why @ baseline::Unwritable::TooLarge { .. }) => refused.push(format!(
                "not blessing {} from the {arm_name} arm of {shown}: {why}",
                sc.name
            )),
            Err(why) => problems.push(format!(
                "scenario {}: the {arm_name} arm of {shown} holds figures a baseline cannot: {why}",
                sc.name
            )),
        }
    }
    if !problems.is_empty() {
        return Err(exit::Error::Usage(format!(
            "bless --from {shown} --arm {arm_name}: nothing written:\n  - {}",
            problems.join("\n  - ")
        )));
    }
    for r in &refused {
        eprintln!("perfgate: {r}; nothing written");
    }
    if !refused.is_empty() {
        return Ok(exit::COULD_NOT_MEASURE);
    }
    for (sc, run, b, text) in planned {
        let what = format!("the {arm_name} arm of {shown}");
        write_unmeasured(sc, dir, &b, &text, &what, run.records.len())?;
    }
    Ok(exit::OK)
}

/// Says what the baseline `b` written at `path` holds: `what` (how many runs, or where its
/// requests came from), its `requests`, its P50s and `extra` (the runs' spread, the cache), then
/// the sample sizes its checks need.
fn say_blessed(
    sc: &Scenario,
    path: &Path,
    b: &baseline::Baseline,
    what: &str,
    requests: usize,
    extra: &str,
) {
    let p50 = |key: SummaryKey| {
        b.summary
            .get(&key)
            .map(|x| fmt_ms(x.p50))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "blessed {:<24} -> {}  ({what}, {requests} requests; TTFT P50 {}, TPOT P50 {}{extra})",
        sc.name,
        path.display(),
        p50(SummaryKey::Ttft),
        p50(SummaryKey::Tpot),
    );
    for line in crate::assess::sample_sizes(sc, b) {
        println!("  {}: {line}", sc.name);
    }
}

/// Writes the baseline `b` (encoded as `text`) of a run perfgate did not measure now (`bless
/// --from`), atomically, and says what it holds: `what` names where its `requests` came from.
fn write_unmeasured(
    sc: &Scenario,
    dir: &Path,
    b: &baseline::Baseline,
    text: &str,
    what: &str,
    requests: usize,
) -> Result<(), exit::Error> {
    let path = baseline::path_for(dir, &sc.name);
    remove_stale_temp_files(dir, &sc.name);
    crate::fsutil::write_atomic(&path, text).map_err(|e| exit::Error::write(&path, e))?;
    say_blessed(sc, &path, b, what, requests, "");
    Ok(())
}

/// `perfgate bless --from EXPORT --format F`: writes the requests of another tool's export
/// ([`crate::import`], read by the caller) as the baseline of `sc`, measuring nothing, with the
/// refusals of [`bless_from`]: fewer than [`MIN_FROM_REQUESTS`] requests, no successful one,
/// too many failures, a baseline too large (exit 3); figures a baseline cannot hold (exit 2).
/// The notes (what the tool measured otherwise) are said on stderr.
pub fn bless_import(
    sc: &Scenario,
    dir: &Path,
    imported: &crate::import::Imported,
    host: Option<String>,
) -> Result<i32, exit::Error> {
    let run = &imported.run;
    let path = baseline::path_for(dir, &sc.name);
    let why = if run.records.len() < MIN_FROM_REQUESTS {
        Some(format!(
            "the export holds {} request(s): a baseline needs at least {MIN_FROM_REQUESTS} (load.samples' minimum), or a check could not compare with it",
            run.records.len()
        ))
    } else {
        refusal(sc, run)
    };
    if let Some(why) = why {
        not_blessing(&sc.name, &path, &why);
        return Ok(exit::COULD_NOT_MEASURE);
    }
    let b = baseline::from_runs(sc, std::slice::from_ref(run), host);
    let text = match baseline::encode(&b) {
        Ok(t) => t,
        Err(why @ baseline::Unwritable::TooLarge { .. }) => {
            not_blessing(&sc.name, &path, &why);
            return Ok(exit::COULD_NOT_MEASURE);
        }
        Err(why) => {
            return Err(exit::Error::Usage(format!(
                "scenario {}: the export holds figures a baseline cannot: {why}; nothing written",
                sc.name
            )))
        }
    };
    for n in &imported.notes {
        eprintln!("perfgate: {}: note: {n}", sc.name);
    }
    let what = format!("the {} export", imported.format.tool());
    write_unmeasured(sc, dir, &b, &text, &what, run.records.len())?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Failure, FailureClass, RequestRecord};

    fn run_of(recs: Vec<RequestRecord>) -> RunOutput {
        RunOutput {
            records: recs,
            wall_ms: 1000.0,
            ..RunOutput::empty()
        }
    }

    fn failed(status: u16) -> RequestRecord {
        RequestRecord {
            error: Some(Failure {
                class: FailureClass::HttpStatus,
                status: Some(status),
                message: format!("HTTP {status}: no"),
            }),
            ..RequestRecord::new(0.0)
        }
    }

    fn ok() -> RequestRecord {
        RequestRecord {
            ttft_ms: Some(10.0),
            e2e_ms: Some(20.0),
            t_done_ms: Some(21.0),
            output_tokens: Some(8),
            ..RequestRecord::new(0.0)
        }
    }

    /// Issue 42: bless refuses a run by check's rules, in check's words (it had a third copy
    /// with its own: "no successful request (first failure: HTTP 401: no)").
    #[test]
    fn bless_refuses_a_run_by_the_rules_and_words_of_check() {
        let yaml = "scenarios:\n  - name: s\n    endpoint: {base_url: 'sim://'}\n    request: {prompt: hi, max_tokens: 8}\n    gate: {max_error_rate: 0.1}\n";
        let sc = crate::config::parse_str(yaml, "t.yaml", &|_| None)
            .unwrap()
            .remove(0);
        let why = |recs| refusal(&sc, &run_of(recs));
        assert_eq!(
            why(vec![failed(401), failed(401)]).as_deref(),
            Some("every request was rejected: HTTP 401: no")
        );
        assert_eq!(
            why(vec![ok(), failed(500)]).as_deref(),
            Some("1 successful request of 2 (first failure: HTTP 500: no): a P50 comparison needs 2 or more, so no check could compare with it")
        );
        // 2 failures in 10 (20 %) is above 10 %
        let mut recs = vec![ok(); 8];
        recs.extend([failed(500), failed(500)]);
        assert_eq!(
            why(recs).as_deref(),
            Some("error rate 20.0% is above max_error_rate 10.0% (first failure: HTTP 500: no)")
        );
        assert_eq!(why(vec![ok(); 10]), None);
    }
}
