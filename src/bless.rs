//! `perfgate bless`: measure each scenario K times and rewrite its baseline atomically.
//! A scenario whose run is unreachable, has no successful request, or fails more often than its
//! `max_error_rate` is refused, and its old baseline is left untouched.

use crate::baseline;
use crate::check;
use crate::config::Scenario;
use crate::exit;
use crate::report::fmt_ms;
use crate::runner::RunOutput;
use std::path::Path;

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

/// Removes temp files a killed bless may have left for this scenario (`.<name>.json.tmp-PID`).
fn remove_stale_temp_files(dir: &Path, name: &str) {
    let prefix = format!(".{name}.json.tmp-");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Why a run may not become a baseline, if it may not.
pub fn refusal(sc: &Scenario, run: &RunOutput) -> Option<String> {
    let m = check::measured(run);
    let rate = m.failed as f64 / m.requests.max(1) as f64;
    if let Some(why) = &run.unreachable {
        Some(why.clone())
    } else if let Some(why) = run.resent_problem() {
        Some(why)
    } else if m.ok == 0 {
        Some(format!(
            "no successful request (first failure: {})",
            m.first_error.unwrap_or_default()
        ))
    } else if rate > sc.gate.max_error_rate {
        Some(format!(
            "{} of {} requests failed ({:.1}% > max_error_rate {:.1}%; first: {})",
            m.failed,
            m.requests,
            rate * 100.0,
            sc.gate.max_error_rate * 100.0,
            m.first_error.unwrap_or_default()
        ))
    } else {
        None
    }
}

/// Blesses every scenario with `k` runs each; returns the exit code (0, or 3 when a scenario
/// was refused). Errors writing a file are exit 2 with the path.
pub async fn bless(
    scs: &[Scenario],
    dir: &Path,
    k: usize,
    host: Option<String>,
) -> Result<i32, exit::ExitError> {
    let mut code = exit::OK;
    'scenario: for sc in scs {
        let path = baseline::path_for(dir, &sc.name);
        let mut runs = Vec::with_capacity(k);
        remove_stale_temp_files(dir, &sc.name);
        for i in 0..k {
            if interrupted(&sc.name, &path) {
                return Ok(exit::INTERRUPTED);
            }
            eprintln!(
                "perfgate: measuring {} run {}/{k} ({} warmup + {} requests, concurrency {})",
                sc.name,
                i + 1,
                sc.load.warmup,
                sc.load.samples,
                sc.load.concurrency
            );
            let run = match crate::execute::measure(sc).await {
                Ok(r) => r,
                Err(e) => {
                    let mut r = RunOutput::empty();
                    r.unreachable = Some(e);
                    r
                }
            };
            if let Some(why) = refusal(sc, &run) {
                eprintln!(
                    "perfgate: not blessing {}: {why}; {} left unchanged",
                    sc.name,
                    path.display()
                );
                code = exit::COULD_NOT_MEASURE;
                continue 'scenario;
            }
            for n in check::run_notes(sc, &run) {
                eprintln!("perfgate: {}: note: {n}", sc.name);
            }
            runs.push(run);
        }
        if interrupted(&sc.name, &path) {
            return Ok(exit::INTERRUPTED);
        }
        let b = baseline::from_runs(sc, &runs, host.clone());
        baseline::write_atomic(&path, &baseline::to_json(&b)).map_err(|e| {
            exit::ExitError::invalid(format!("cannot write {}: {e}", path.display()))
        })?;
        let p50 = |key: &str| {
            b.summary
                .get(key)
                .map(|x| fmt_ms(x.p50))
                .unwrap_or_else(|| "-".into())
        };
        let requests: usize = runs.iter().map(|r| r.records.len()).sum();
        let spread = match &b.run_spread {
            Some(rs) => {
                let t: Vec<String> = rs
                    .tau
                    .iter()
                    .map(|(m, t)| format!("{} {:.1}%", m.trim_end_matches("_ms"), t * 100.0))
                    .collect();
                format!(
                    "; run-to-run spread tau (90% upper bound): {}",
                    t.join(", ")
                )
            }
            None => String::new(),
        };
        println!(
            "blessed {:<24} -> {}  ({k} run(s), {requests} requests; TTFT P50 {}, TPOT P50 {}{spread})",
            sc.name,
            path.display(),
            p50("ttft_ms"),
            p50("tpot_ms"),
        );
    }
    Ok(code)
}
