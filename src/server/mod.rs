//! The server under test, when perfgate starts it (`server:` in a scenario file) or waits for
//! it (`endpoint.wait_ready`): start, readiness, identity, server-side metrics, stop.
//!
//! Invariants:
//! - one server process at a time: scenarios with the same `server:` block share the process
//!   started for the first of them; a scenario with another block stops it first (except the
//!   two arms of an interleaved `perfgate ab`, [`Others::Keep`], each on its own port);
//! - every process perfgate starts, and every process that one starts, is stopped: by
//!   [`stop_all`] when `check` or `bless` ends (success, failure, Ctrl-C or SIGTERM after the
//!   grace period), by [`kill_all_now`] on a second signal, and by the server's
//!   [`supervisor`] when perfgate itself dies (even by SIGKILL); SIGTERM goes to the whole
//!   process group and to descendants outside it, SIGKILL follows after `stop_timeout`, and
//!   descendants that left the group (`setsid()`) are found as the supervisor's descendants
//!   (it is their subreaper, Linux);
//! - a server that never got ready, or exited while a scenario ran, is not started again in this
//!   run: the scenarios that name it are not measured (exit 3), with its exit status and the
//!   last lines of its log;
//! - nothing secret is shown: the command line is redacted ([`crate::config::server`]), env
//!   values never appear, log tails are redacted.

pub mod identity;
pub mod log;
pub mod metrics;
pub mod process;
pub mod start;
pub mod supervisor;

use crate::client::http::StreamClient;
use crate::config::server::{Ready, ServerSpec};
use process::Proc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a scenario's results say about its server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// The command line perfgate started (secrets redacted); absent for an endpoint perfgate
    /// only waited for (`endpoint.wait_ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Process id (and process group id) of the started server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The server's log file (stdout and stderr), when `server.log` named one: the default log,
    /// in a private temporary directory, is removed after a clean stop and not named here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// True when this scenario started the process; false when it shared the process an
    /// earlier scenario with the same `server:` block started (`time_to_ready_ms` is that
    /// start's).
    pub started_here: bool,
    /// From the process start (or, for `endpoint.wait_ready`, the first poll) to the first ready
    /// answer, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_ready_ms: Option<f64>,
    /// For a server this scenario started: the TTFT of the first request sent after it was
    /// ready (the warmup's first; [`start::first_ttft`]), ms; absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_ttft_ms: Option<f64>,
    /// How readiness was known, e.g. `GET http://127.0.0.1:8080/v1/models answered 200`.
    pub ready_by: String,
    /// Who the server says it is (see [`identity`]), e.g. `llama.cpp.build_info`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub identity: BTreeMap<String, String>,
    /// Server-side figures over this scenario's measured requests, from `/metrics` (see
    /// [`metrics`]); empty when the server exposes none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// How the process ended, when it ended during the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
}

/// [`ServerReport::ready_by`] of an endpoint perfgate neither started nor waited for.
const NOT_STARTED: &str = "not started by perfgate, measured as found";

impl ServerReport {
    /// The report of an endpoint perfgate neither started nor waited for (`perfgate ab
    /// --no-server`, two URLs), before it is asked who it is.
    pub fn not_started() -> ServerReport {
        ServerReport {
            command: None,
            pid: None,
            log: None,
            started_here: false,
            time_to_ready_ms: None,
            first_ttft_ms: None,
            ready_by: NOT_STARTED.into(),
            identity: BTreeMap::new(),
            metrics: BTreeMap::new(),
            exit: None,
        }
    }

    /// One line for the report's notes.
    pub fn note(&self) -> String {
        let ready = self
            .time_to_ready_ms
            .map(|t| format!("ready in {:.2} s", t / 1000.0))
            .unwrap_or_else(|| "not ready".into());
        let mut s = match (&self.command, self.pid) {
            (Some(c), Some(pid)) => format!(
                "server: `{c}` (pid {pid}, {}), {ready} ({}); log {}",
                if self.started_here {
                    "started for this scenario"
                } else {
                    "shared with an earlier scenario"
                },
                self.ready_by,
                self.log.as_deref().unwrap_or("-")
            ),
            _ if self.ready_by == NOT_STARTED => format!("endpoint: {NOT_STARTED}"),
            _ => format!("endpoint.wait_ready: {ready} ({})", self.ready_by),
        };
        // `name value` pairs, joined by commas
        fn listed<V: std::fmt::Display>(m: &BTreeMap<String, V>) -> String {
            let items: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            items.join(", ")
        }
        if !self.identity.is_empty() {
            s.push_str(&format!("; identity: {}", listed(&self.identity)));
        }
        if !self.metrics.is_empty() {
            s.push_str(&format!(
                "; server-side over the measured requests: {}",
                listed(&self.metrics)
            ));
        }
        s
    }
}

/// A process perfgate started and has not stopped yet.
struct Running {
    spec: ServerSpec,
    proc: Proc,
    time_to_ready: Duration,
    ready_by: String,
    identity: BTreeMap<String, String>,
}

/// The started servers (at most one ready at a time).
static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());
/// Process group ids of every server not yet stopped, including one still starting, for
/// [`kill_all_now`].
static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Blocks (by key) whose server failed in this run, and why.
static FAILED: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
/// Starts so far (names the default log files).
static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn forget_pid(pid: u32) {
    lock(&PIDS).retain(|p| *p != pid);
}

/// Why a server (or an endpoint waited for) is not there to be measured. Each message says
/// what happened; a started server's says which process and ends with its log tail.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The process could not be started.
    #[error(transparent)]
    Spawn(#[from] process::SpawnError),
    /// The started server exited before it was ready, was not ready in time, or perfgate was
    /// interrupted while it was getting ready.
    #[error("the server `{command}` (pid {pid}) {what}; log {}{}", log.display(), excerpt_text(excerpt))]
    NotReady {
        /// The redacted command line.
        command: String,
        pid: u32,
        /// What happened (`exited (...) before it was ready ...`).
        what: String,
        log: std::path::PathBuf,
        /// Its log's first error-looking lines and last lines, redacted.
        excerpt: Box<log::LogExcerpt>,
    },
    /// Something already answers the readiness URL before the server was started.
    #[error("something already answers GET {url} (HTTP {status}) before perfgate started the server `{command}`: stop it or give the server another port, so that what is measured is the server perfgate starts")]
    PortTaken {
        url: String,
        status: u16,
        command: String,
    },
    /// The server of this `server:` block failed earlier in this run (`why`: how).
    #[error("not measured: {why}")]
    FailedEarlier { why: String },
    /// `endpoint.wait_ready`: the endpoint did not answer within the limit.
    #[error("the endpoint was not ready within endpoint.wait_ready {} ({tries} probes of {url}; last: {last})", humantime::format_duration(*limit))]
    EndpointNotReady {
        url: String,
        limit: Duration,
        tries: u32,
        last: String,
    },
    /// `endpoint.wait_ready`: interrupted while waiting.
    #[error("interrupted while waiting for {url}: {last}")]
    Interrupted { url: String, last: String },
}

/// The failure of a started server: what happened, and the first error lines and last lines of
/// its log.
fn with_tail(spec: &ServerSpec, p: &Proc, what: &str) -> ServerError {
    ServerError::NotReady {
        command: spec.shown_command.clone(),
        pid: p.pid,
        what: what.to_string(),
        log: p.log.path().to_path_buf(),
        excerpt: Box::new(
            p.log
                .excerpt(spec.log_tail, log::FIRST_ERRORS, &spec.secrets),
        ),
    }
}

/// ` (empty)`, or the first error-looking lines (`, first error line(s):`) and `, last N
/// line(s):` with the lines, each on its own `  | ` line.
fn excerpt_text(ex: &log::LogExcerpt) -> String {
    if ex.tail.is_empty() && ex.first_errors.is_empty() {
        return " (empty)".into();
    }
    let mut s = String::new();
    if !ex.first_errors.is_empty() {
        s.push_str(", first error-looking line(s) before the tail:");
        for l in &ex.first_errors {
            s.push_str("\n  | ");
            s.push_str(l);
        }
        s.push('\n');
        s.push_str(&format!("  last {} line(s):", ex.tail.len()));
    } else {
        s.push_str(&format!(", last {} line(s):", ex.tail.len()));
    }
    for l in &ex.tail {
        s.push_str("\n  | ");
        s.push_str(l);
    }
    s
}

impl ServerError {
    /// What a later scenario of the same `server:` block says (`not measured: ...`): the
    /// failure without its log lines, which the scenario that started the server shows once.
    fn said_again(&self) -> String {
        match self {
            ServerError::NotReady {
                command, pid, what, log, ..
            } => format!(
                "the server `{command}` (pid {pid}) {what}; log {} (its lines are shown with the scenario that started it)",
                log.display()
            ),
            other => other.to_string(),
        }
    }
}

/// After the ready line of `ready: {log: ...}`, how long the server must still run to count as
/// ready (its time to ready is that of the line).
const READY_SETTLE: Duration = Duration::from_millis(100);

/// Polls until the server is ready; the time from its start to the first ready answer, and
/// how it was known. Errors: it exited, did not get ready within `ready_timeout`, or perfgate
/// was interrupted.
async fn wait_ready(
    spec: &ServerSpec,
    p: &Proc,
    client: &StreamClient,
) -> Result<(Duration, String), ServerError> {
    let deadline = p.started + spec.ready_timeout;
    let mut pause = Duration::from_millis(25);
    let mut last = String::from("no answer yet");
    let mut watch = log::LogWatch::default();
    let printed_then_exited = |text: &str, st: process::Ended| {
        with_tail(
            spec,
            p,
            &format!(
                "printed its ready line (`{text}`) and then exited ({}) before it could be measured",
                st.describe()
            ),
        )
    };
    loop {
        if let Some(st) = p.exit_status() {
            // the rest of the log first: a server may print its ready line and exit at once
            if let Ready::Log(text) = &spec.ready {
                if watch.poll(&p.log, text) {
                    return Err(printed_then_exited(text, st));
                }
            }
            return Err(with_tail(
                spec,
                p,
                &format!(
                    "exited ({}) before it was ready (last readiness probe: {last})",
                    st.describe()
                ),
            ));
        }
        if crate::cancel::requested() {
            return Err(with_tail(
                spec,
                p,
                "was not ready yet when perfgate was interrupted",
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match &spec.ready {
            Ready::Http { url, default } => {
                match client
                    .get(
                        url,
                        left.clamp(Duration::from_millis(100), Duration::from_secs(5)),
                    )
                    .await
                {
                    Ok((status, body)) => {
                        let at = p.started.elapsed();
                        if status == 200 || (!default && (200..300).contains(&status)) {
                            return Ok((at, format!("GET {url} answered {status}")));
                        }
                        last = format!(
                            "GET {url}: HTTP {status} {}",
                            crate::client::http::body_detail(&body)
                        );
                    }
                    Err(e) => last = format!("GET {url}: {}", e.message),
                }
            }
            Ready::Log(text) => {
                if watch.poll(&p.log, text) {
                    let at = p.started.elapsed();
                    // A line is no proof that it serves: one that exits right after printing it
                    // is reported as such, not measured against a dead port.
                    tokio::time::sleep(READY_SETTLE).await;
                    if let Some(st) = p.exit_status() {
                        return Err(printed_then_exited(text, st));
                    }
                    return Ok((at, format!("a log line contained `{text}`")));
                }
                last = format!("no log line contains `{text}` yet");
            }
        }
        if Instant::now() >= deadline {
            return Err(with_tail(
                spec,
                p,
                &format!(
                    "was not ready within ready_timeout {} (last readiness probe: {last}); raise server.ready_timeout if the model takes longer to load",
                    humantime::format_duration(spec.ready_timeout)
                ),
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(pause.min(left)).await;
        if !spec.fine_probe {
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}

/// What starting a server does to the servers of other `server:` blocks already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Others {
    /// Stop them first: one server at a time (`check`, `bless`, a blocked `ab`).
    Stop,
    /// Keep them: both arms of an interleaved `ab` run side by side (each on its own port).
    Keep,
}

/// Makes sure the server of `spec` runs and is ready: reuses the process of an earlier
/// scenario with the same block, else (`others`) stops or keeps the servers of other blocks and
/// starts this one. `client` carries the endpoint's headers (API key) for the probes;
/// `models_url` is `<base_url>/models`.
///
/// Errors: the server cannot start, never got ready, or failed earlier in this run; the
/// message holds its exit status and log tail.
pub async fn ensure_with(
    spec: &ServerSpec,
    client: &StreamClient,
    models_url: &str,
    others: Others,
) -> Result<ServerReport, ServerError> {
    if let Some(why) = lock(&FAILED).get(&spec.key) {
        return Err(ServerError::FailedEarlier { why: why.clone() });
    }
    // A second Ctrl-C exits at once: every started server is SIGKILLed first.
    crate::cancel::on_force_exit("started servers", kill_all_now);
    let others: Vec<Running> = {
        let mut r = lock(&RUNNING);
        if let Some(x) = r.iter().find(|x| x.spec.key == spec.key) {
            if x.proc.exit_status().is_none() {
                return Ok(report_of(x, false));
            }
        }
        let (same, rest): (Vec<Running>, Vec<Running>) =
            r.drain(..).partition(|x| x.spec.key == spec.key);
        // an exited process of this block (cleared below with the others)
        match others {
            Others::Stop => rest.into_iter().chain(same).collect(),
            Others::Keep => {
                r.extend(rest);
                same
            }
        }
    };
    for o in others {
        stop_one(o).await;
    }
    // Something else on the port would answer the readiness probe and be measured instead.
    if let Ready::Http { url, .. } = &spec.ready {
        if let Ok((status, _)) = client.get(url, Duration::from_secs(2)).await {
            let why = ServerError::PortTaken {
                url: url.clone(),
                status,
                command: spec.shown_command.clone(),
            };
            lock(&FAILED).insert(spec.key.clone(), why.to_string());
            return Err(why);
        }
    }
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let p = process::spawn(spec, n).inspect_err(|e| {
        lock(&FAILED).insert(spec.key.clone(), e.to_string());
    })?;
    lock(&PIDS).push(p.pid);
    eprintln!(
        "perfgate: started the server `{}` (pid {}; log {}); waiting until it is ready (at most {})",
        spec.shown_command,
        p.pid,
        p.log.path().display(),
        humantime::format_duration(spec.ready_timeout)
    );
    match wait_ready(spec, &p, client).await {
        Ok((t, ready_by)) => {
            eprintln!(
                "perfgate: the server (pid {}) is ready after {:.2} s: {ready_by}",
                p.pid,
                t.as_secs_f64()
            );
            let identity = identity::probe(client, &spec.origin, models_url, &spec.secrets).await;
            let run = Running {
                spec: spec.clone(),
                proc: p,
                time_to_ready: t,
                ready_by,
                identity,
            };
            let rep = report_of(&run, true);
            lock(&RUNNING).push(run);
            Ok(rep)
        }
        Err(why) => {
            let how = process::stop(&p, spec.stop_timeout).await;
            forget_pid(p.pid);
            eprintln!(
                "perfgate: the server (pid {}) {how}{}",
                p.pid,
                log_fate(&p.log, true)
            );
            lock(&FAILED).insert(spec.key.clone(), why.said_again());
            Err(why)
        }
    }
}

fn report_of(r: &Running, started_here: bool) -> ServerReport {
    ServerReport {
        command: Some(r.spec.shown_command.clone()),
        pid: Some(r.proc.pid),
        // only a log the user named: the default one is removed after a clean stop (a failed
        // server's is kept and named in the error instead)
        log: (!r.proc.log.is_default()).then(|| r.proc.log.path().display().to_string()),
        started_here,
        time_to_ready_ms: Some(crate::units::round3(r.time_to_ready.as_secs_f64() * 1000.0)),
        first_ttft_ms: None,
        ready_by: r.ready_by.clone(),
        identity: r.identity.clone(),
        metrics: BTreeMap::new(),
        exit: None,
    }
}

/// After a scenario: when the server of `spec` exited while it ran, its exit status and why
/// (with the log tail); the block is not started again. `None` while it runs.
pub async fn exited_during(spec: &ServerSpec, scenario: &str) -> Option<(String, String)> {
    let running = |r: &Vec<Running>| r.iter().position(|x| x.spec.key == spec.key);
    let exited = {
        let r = lock(&RUNNING);
        let i = running(&r)?;
        r[i].proc.exit_status().is_some()
    };
    if !exited {
        // a crash is reaped within microseconds; give the waiter thread a moment anyway
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = {
        let mut r = lock(&RUNNING);
        let i = running(&r)?;
        r[i].proc.exit_status()?;
        r.remove(i)
    };
    let st = gone
        .proc
        .exit_status()
        .map(process::Ended::describe)
        .unwrap_or_default();
    let why = with_tail(
        spec,
        &gone.proc,
        &format!("exited ({st}) while scenario {scenario} was measured"),
    )
    .to_string();
    // whatever it left behind (its group, its descendants) goes; its log stays
    process::signal_group(gone.proc.pid, libc::SIGKILL);
    gone.proc.release().await;
    forget_pid(gone.proc.pid);
    lock(&FAILED).insert(
        spec.key.clone(),
        format!("the server exited during scenario {scenario} ({st}); see that scenario"),
    );
    Some((st, why))
}

/// One scrape of the `/metrics` at `url` (`None` when unreachable or not 200).
pub async fn scrape(url: &str, client: &StreamClient) -> Option<metrics::Scrape> {
    match client.get(url, Duration::from_secs(10)).await {
        Ok((200, body)) => Some(metrics::parse(&body)),
        _ => None,
    }
}

async fn stop_one(r: Running) {
    let how = process::stop(&r.proc, r.spec.stop_timeout).await;
    forget_pid(r.proc.pid);
    eprintln!(
        "perfgate: the server (pid {}) {how}{}",
        r.proc.pid,
        log_fate(&r.proc.log, false)
    );
}

/// What became of the log once its server stopped, for the stop line: a given `server.log`
/// stays (`; log PATH`); the default one is removed after a clean run (`; removed its log
/// PATH`) and kept when the server `failed` (`; kept its log PATH`).
fn log_fate(log: &log::ServerLog, failed: bool) -> String {
    let path = log.path().display();
    if !log.is_default() {
        format!("; log {path}")
    } else if failed {
        format!("; kept its log {path}")
    } else if log.remove_if_default() {
        format!("; removed its log {path}")
    } else {
        format!("; log {path}")
    }
}

/// Stops every server perfgate started (SIGTERM to each process group, SIGKILL after its
/// `stop_timeout`). Called when `check` or `bless` ends, however it ends.
pub async fn stop_all() {
    let all: Vec<Running> = lock(&RUNNING).drain(..).collect();
    for r in all {
        stop_one(r).await;
    }
    log::remove_private_dir();
}

/// Stops every server perfgate started except those of the blocks `keep` (by
/// [`ServerSpec::key`]): between the scenarios of an interleaved `perfgate ab`, whose two arms
/// run side by side.
pub async fn stop_except(keep: &[&str]) {
    let gone: Vec<Running> = {
        let mut r = lock(&RUNNING);
        let (kept, gone) = r
            .drain(..)
            .partition(|x| keep.contains(&x.spec.key.as_str()));
        *r = kept;
        gone
    };
    for r in gone {
        stop_one(r).await;
    }
}

/// SIGKILLs the process group of every server not yet stopped, at once (the second Ctrl-C).
pub fn kill_all_now() {
    let pids: Vec<u32> = match PIDS.try_lock() {
        Ok(mut p) => p.drain(..).collect(),
        Err(_) => return,
    };
    for pid in pids {
        process::signal_group(pid, libc::SIGKILL);
        eprintln!("perfgate: killed the server (pid {pid})");
    }
}

/// `endpoint.wait_ready`: polls `GET <base_url>/models` until the endpoint answers, for at most
/// `limit`: a refused connection, HTTP 502/503/504, or an error body that says it is loading
/// are retried with backoff (0.25 s doubling to 5 s); any other answer means it is up (a wrong
/// key or URL is then reported by the run itself).
///
/// Errors: not up within `limit`, with the last answer; or interrupted.
pub async fn wait_endpoint(
    client: &StreamClient,
    models_url: &str,
    limit: Duration,
) -> Result<ServerReport, ServerError> {
    let start = Instant::now();
    let deadline = start + limit;
    let mut pause = Duration::from_millis(250);
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let last = match client
            .get(
                models_url,
                left.clamp(Duration::from_millis(100), Duration::from_secs(10)),
            )
            .await
        {
            Ok((status, body)) => {
                let loading =
                    !(200..300).contains(&status) && body.to_ascii_lowercase().contains("loading");
                if !matches!(status, 502..=504) && !loading {
                    let t = start.elapsed();
                    if tries > 1 {
                        eprintln!(
                            "perfgate: {models_url} answered {status} after {:.2} s",
                            t.as_secs_f64()
                        );
                    }
                    return Ok(ServerReport {
                        command: None,
                        pid: None,
                        log: None,
                        started_here: false,
                        time_to_ready_ms: Some(crate::units::round3(t.as_secs_f64() * 1000.0)),
                        first_ttft_ms: None,
                        ready_by: format!(
                            "GET {models_url} answered {status} after {tries} probe(s)"
                        ),
                        identity: BTreeMap::new(),
                        metrics: BTreeMap::new(),
                        exit: None,
                    });
                }
                format!("HTTP {status} {}", crate::client::http::body_detail(&body))
            }
            Err(e) => e.message,
        };
        if tries == 1 {
            eprintln!(
                "perfgate: waiting for {models_url} to be ready (at most {}): {last}",
                humantime::format_duration(limit)
            );
        }
        if crate::cancel::requested() {
            return Err(ServerError::Interrupted {
                url: models_url.to_string(),
                last,
            });
        }
        if Instant::now() >= deadline {
            return Err(ServerError::EndpointNotReady {
                url: models_url.to_string(),
                limit,
                tries,
                last,
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// Per figure, the median over the runs that have it (for a baseline's environment).
pub fn median_figures<'a>(
    reports: impl IntoIterator<Item = &'a ServerReport>,
) -> BTreeMap<String, f64> {
    let mut all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in reports {
        for (k, v) in &r.metrics {
            all.entry(k.clone()).or_default().push(*v);
        }
    }
    all.into_iter()
        .filter_map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            crate::stats::quantile::quantile_type7(&v, 0.5).map(|m| (k, crate::units::round3(m)))
        })
        .collect()
}
