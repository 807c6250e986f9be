//! The results model of one `check` run: what was measured, what it was compared with, and the
//! verdicts. Every renderer (terminal, markdown, JSON) reads this one model, so they cannot
//! disagree. Serialised as the `--output` results JSON (`schema_version` 1).

use crate::config::Metric;
use crate::gate::{Check, Verdict};
use crate::record::RequestRecord;
use crate::summary::ClientLag;
use crate::summary::{MetricSummary, Summaries, SummaryKey};
pub use crate::verdict::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A check id (`--id`), checked once where it is read ([`CheckId::new`]): 1 to 100 letters,
/// digits and `. _ : / -`, since it names the PR comment marker inside an HTML comment.
/// Written as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CheckId(String);

impl CheckId {
    /// Checks `id`; the error is the message for the user, without saying where the id came
    /// from (the CLI puts `--id ` before it, a results file `id `).
    pub fn new(id: impl Into<String>) -> Result<CheckId, String> {
        let id = id.into();
        if id.is_empty()
            || id.len() > 100
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:/-".contains(c))
        {
            return Err(format!(
                "`{id}`: use 1 to 100 letters, digits and . _ : / - (it goes into an HTML comment)"
            ));
        }
        Ok(CheckId(id))
    }
    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for CheckId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CheckId::new(String::deserialize(d)?)
            .map_err(|e| serde::de::Error::custom(format!("id {e}")))
    }
}

impl std::fmt::Display for CheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&self.0)
    }
}

impl AsRef<str> for CheckId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for CheckId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CheckId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Version of the results JSON layout.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema_version: u32,
    pub perfgate_version: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// The check id (names the PR comment marker).
    pub id: CheckId,
    /// FAIL, WARN, PASS, IMPROVED, NO_BASELINE, ERROR, INTERRUPTED or MEASURED; always
    /// [`crate::verdict::decide`] over `scenarios`.
    pub verdict: crate::verdict::Overall,
    /// The process exit code (docs/design.md "Exit codes").
    pub exit_code: i32,
    /// Number of gated checks in the Holm family.
    pub family_size: usize,
    /// True when the run was interrupted (Ctrl-C / SIGTERM): the figures are partial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
    /// `allow_missing` when the check ran with `--allow-missing-baseline` (absent otherwise).
    #[serde(
        default,
        skip_serializing_if = "crate::verdict::BaselinePolicy::is_required"
    )]
    pub baseline_policy: crate::verdict::BaselinePolicy,
    pub scenarios: Vec<ScenarioResult>,
}

/// One scenario's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub name: crate::config::ScenarioName,
    pub fingerprint: String,
    /// `file:line` of its definition.
    pub source: String,
    /// Endpoint URL as configured (no secrets: keys live in env vars only).
    pub endpoint: String,
    pub api: String,
    pub model: String,
    pub concurrency: u32,
    /// The scenario as written, when `load.concurrency` or `load.rate` listed levels and this
    /// is one of them (drawn together in the HTML report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    pub status: Status,
    /// Why, when not `compared`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineInfo>,
    pub measured: Measured,
    pub checks: Vec<Check>,
    /// Warnings for the reader (workload changes, fallbacks): written as `notes` (their words)
    /// and `note_kinds` (each one's [`NoteKind`], in the same order).
    #[serde(flatten, with = "notes_wire")]
    pub notes: Vec<Note>,
    /// The server perfgate started (`server:`) or waited for (`endpoint.wait_ready`): time
    /// to ready, identity, server-side metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::server::ServerReport>,
    /// Every measured request (of the candidate arm, for `perfgate ab`).
    pub records: Vec<RequestRecord>,
    /// `perfgate ab`: how the two arms were measured, and the base arm (its figures and every
    /// request); the scenario's `measured`, `server` and `records` are the candidate arm's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab: Option<AbResult>,
    /// `check --history`: the newest nights of the scenario's series, tonight last, with the
    /// change points found in them (the reports draw them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nightly: Option<NightlySeries>,
    /// `check --load-shard I/N`: this worker's part of the load (status `load_shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_shard: Option<LoadShardRun>,
    /// `perfgate report`: the load-shard workers whose requests this scenario merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<MergedWorkers>,
    /// A conversation scenario (or one with `gate.cache.hit_rate`): the prefix cache's reported
    /// and measured hit rates and TTFT by turn position (docs/scenarios.md "Conversations").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::stats::cache::CacheSummary>,
    /// `perfgate ab` with deterministic sampling: the arms' answers compared pair by pair
    /// (docs/ab.md "Outputs that changed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<crate::output_text::OutputsSummary>,
    /// Speculative decoding, when the server reported it: the acceptance rate and mean
    /// acceptance length of the run and of its reference (docs/metrics.md "Speculative
    /// decoding").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<crate::speculative::AcceptanceSides>,
    /// A scenario that asks for structured output or tool calls: how many of its successful
    /// requests' answers parsed, and why the others did not (docs/metrics.md "Structured output
    /// and tool calls").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::structured::ParseSummary>,
}

/// A note for the reader: made by the judgement ([`crate::assess`]), only rendered by the
/// reports, which decide by its [`NoteKind`], never by its words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Note {
    pub kind: NoteKind,
    pub text: String,
}

impl Note {
    /// A note of `kind` saying `text`.
    pub fn new(kind: NoteKind, text: impl Into<String>) -> Note {
        Note {
            kind,
            text: text.into(),
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What a note is about (the results JSON's `note_kinds`, docs/reference.md "Results JSON").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// The scenario's own configuration.
    Scenario,
    /// What the workload sent and got (a prompt set, drawn lengths, goodput, fixed lengths).
    Workload,
    /// What changed in the workload between the reference and the run: metrics not compared.
    WorkloadDrift,
    /// perfgate's own client was late while measuring.
    ClientBusy,
    /// The open loop fell behind its schedule.
    Schedule,
    /// What the server or its streams did (fallbacks, re-sends, closed connections, stops).
    Server,
    /// The server's identity, time to ready and figures, and where a FAIL's time went.
    ServerFigures,
    /// This machine is not the baseline's.
    Machine,
    /// The reference could be used only in part (`gate.slo` alone).
    Reference,
    /// What the two arms of an A/B run differ in.
    Arms,
    /// The prefix cache.
    Cache,
    /// Sequential sampling stopped early.
    Sequential,
    /// A `gate.confirm` re-run.
    Confirmation,
    /// The nightly history.
    Nightly,
    /// Load-shard workers.
    LoadShard,
    /// The answers compared with the reference's (`gate.outputs`), or why they were not.
    Outputs,
    /// What another tool whose export was imported (`--from EXPORT --format`) measured otherwise.
    Imported,
    /// Results written before the run ended (a forced exit).
    Partial,
    /// A results file written before this field existed.
    #[default]
    Other,
}

/// A note is written as its words; one read back is of kind `Other` until its kind is read.
impl Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Note {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Note, D::Error> {
        String::deserialize(d).map(|text| Note::new(NoteKind::Other, text))
    }
}

/// `notes` as the results JSON writes them: the words, and the kinds beside them.
mod notes_wire {
    use super::{Note, NoteKind};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(bound(serialize = "T: Serialize + AsRef<[Note]>"))]
    struct Wire<T> {
        #[serde(default, skip_serializing_if = "none")]
        notes: T,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        note_kinds: Vec<NoteKind>,
    }

    fn none<T: AsRef<[Note]>>(notes: &T) -> bool {
        notes.as_ref().is_empty()
    }

    pub fn serialize<S: Serializer>(notes: &[Note], s: S) -> Result<S::Ok, S::Error> {
        let note_kinds = notes.iter().map(|n| n.kind).collect();
        Wire { notes, note_kinds }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Note>, D::Error> {
        let Wire {
            mut notes,
            note_kinds,
        } = Wire::<Vec<Note>>::deserialize(d)?;
        for (n, kind) in notes.iter_mut().zip(note_kinds) {
            n.kind = kind;
        }
        Ok(notes)
    }
}

/// One load-shard worker's part of a scenario (`check --load-shard I/N`): what
/// `perfgate report` needs, beside the records, to merge the workers into one run
/// (docs/load-shards.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadShardRun {
    /// Worker I (1-based) of N.
    pub index: usize,
    pub count: usize,
    /// This worker's share of `load.concurrency` and `load.samples`.
    pub concurrency: u32,
    pub samples: u32,
    /// Start of its measured phase (the origin of its records' `start_ms`), ms since the Unix
    /// epoch.
    pub started_unix_ms: f64,
    /// `--start-at`, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ms: Option<f64>,
    /// How late its measured phase started after `--start-at`, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_ms: Option<f64>,
    /// Steady-state closed loop: its unmeasured ramp-up and drain requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<crate::runner::SteadyCounts>,
    /// Its unmeasured ramp-up and drain requests' (start, end) on its records' clock, ms: in
    /// flight beside the measured ones, so the merge counts them in each request's concurrency.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured_spans: Vec<(f64, f64)>,
    /// Measured requests re-sent, and warmup requests that failed.
    pub retried: u32,
    pub warmup_failures: u32,
}

/// A `load_shard` whose worker number no `--load-shard I/N` gives (a file not written by a
/// worker): `field` is `index` or `count`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("load_shard.{field} is {value}, but a worker is I of N with 1 <= I <= N <= {max} (this is worker {index} of {count}): the file is not as `check --load-shard` wrote it; use the file the worker wrote", max = crate::config::shard::MAX_SHARDS)]
pub struct BadLoadShard {
    pub field: &'static str,
    pub value: usize,
    pub index: usize,
    pub count: usize,
}

impl LoadShardRun {
    /// Which worker of how many, checked: what a results file says is validated once, when
    /// it is read ([`crate::report::json::load`]), so a merge never divides by a count of 0.
    pub fn shard(&self) -> Result<crate::config::shard::Shard, BadLoadShard> {
        let (index, count) = (self.index, self.count);
        let count_ok = (1..=crate::config::shard::MAX_SHARDS).contains(&count);
        let (field, value) = if count_ok {
            ("index", index)
        } else {
            ("count", count)
        };
        crate::config::shard::Shard::new(index, count).ok_or(BadLoadShard {
            field,
            value,
            index,
            count,
        })
    }
}

/// The workers a merged scenario came from (`perfgate report`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedWorkers {
    /// Each worker's measured window, in worker order.
    pub windows: Vec<WorkerWindow>,
    /// The time every worker was measuring, over the longest worker's window (1 = fully
    /// together).
    pub overlap: f64,
}

/// One worker's measured phase, as merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerWindow {
    pub index: usize,
    /// The results file it came from.
    pub file: String,
    pub started_unix_ms: f64,
    pub wall_ms: f64,
    pub requests: usize,
}

/// A scenario's nightly series as the reports draw it (docs/history.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NightlySeries {
    /// The history branch.
    pub branch: String,
    /// Nights of this configuration in the history, tonight included (`nights` holds the newest
    /// [`NIGHTS_SHOWN`] of them).
    pub total: usize,
    /// Oldest first; the last is tonight.
    pub nights: Vec<NightPoint>,
    /// Change points among `nights`.
    pub steps: Vec<StepMark>,
    /// The metrics whose nights decide tonight's verdict ([`crate::assess::nightly::Nightly::deciding`]);
    /// the committed baseline decides the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deciding: Vec<crate::config::Metric>,
}

impl NightlySeries {
    /// The gated metrics any shown night has a value of, in order.
    pub fn metrics(&self) -> std::collections::BTreeSet<crate::config::Metric> {
        self.nights
            .iter()
            .flat_map(|n| n.p50_ms.keys().copied())
            .collect()
    }

    /// The number (from 1) of the first shown night in the whole series.
    pub fn first_shown(&self) -> usize {
        self.total.saturating_sub(self.nights.len()) + 1
    }

    /// Metric `m`'s nightly P50, ms, per shown night (NaN where a night has none).
    pub fn values(&self, m: crate::config::Metric) -> Vec<f64> {
        self.nights
            .iter()
            .map(|n| n.p50_ms.get(&m).copied().unwrap_or(f64::NAN))
            .collect()
    }
}

/// Nights a report draws.
pub const NIGHTS_SHOWN: usize = 60;

/// One night of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NightPoint {
    /// RFC 3339 UTC.
    pub time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Each gated metric's median, ms.
    pub p50_ms: BTreeMap<Metric, f64>,
}

/// A change point: the first night of the new level (index into the series' `nights`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepMark {
    pub metric: Metric,
    pub night: usize,
    /// Up (slower) or down.
    pub up: bool,
}

/// How the two arms of a `perfgate ab` scenario were measured (docs/design.md "A/B runs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbDesign {
    /// Both arms up at once, requests dispatched in pairs (AB or BA, seeded).
    Interleaved,
    /// One arm at a time, in blocks (ABBA ...), the server swapped between blocks.
    Blocked,
}

impl AbDesign {
    /// `interleaved`, `blocked`.
    pub fn as_str(self) -> &'static str {
        match self {
            AbDesign::Interleaved => "interleaved",
            AbDesign::Blocked => "blocked",
        }
    }
}

/// How much both arms of an interleaved A/B run had requests in flight at once (docs/ab.md
/// "When the arms overlap").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbOverlap {
    /// The arms took turns: a request of one arm was sent only once the other had none in
    /// flight.
    pub alternated: bool,
    /// Both arms run on this machine (servers perfgate started, loopback endpoints, the
    /// built-in simulator), so requests in flight at once slow each other.
    pub one_host: bool,
    /// `both_ms / any_ms`, 0 to 1.
    pub share: f64,
    /// Time both arms had at least one request in flight, ms.
    pub both_ms: f64,
    /// Time at least one arm had a request in flight, ms.
    pub any_ms: f64,
}

/// One block of a blocked A/B run, in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbBlock {
    pub side: crate::gate::Side,
    /// Measured requests of this block: the arm's records hold its blocks' requests in block
    /// order, so block i of an arm is the next `requests` records of that arm.
    pub requests: usize,
    /// The server started for this block (time to ready, pid, identity); absent for an
    /// endpoint perfgate did not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::server::ServerReport>,
}

/// The base arm and the design of a `perfgate ab` scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbResult {
    pub design: AbDesign,
    /// The order the two arms ran in, `A` = base, `B` = candidate: per request for the
    /// interleaved design (`ABBA...`, one letter per dispatched request), per block for the
    /// blocked one.
    pub order: String,
    /// Interleaved: the pairs of requests (each AB or BA); blocked: the blocks per arm.
    pub alternations: usize,
    /// Seed of the interleaved order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Blocked: every block, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<AbBlock>,
    /// Interleaved: how much the arms' requests were in flight at once (absent for blocked,
    /// where one arm runs at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<AbOverlap>,
    /// The base arm's endpoint (secrets redacted) and model.
    pub base_endpoint: String,
    pub base_model: String,
    /// The base arm's figures.
    pub base_measured: Measured,
    /// The base arm's server (interleaved: the one start; blocked: the first block's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_server: Option<crate::server::ServerReport>,
    /// Every measured request of the base arm (blocked: in block order).
    pub base_records: Vec<RequestRecord>,
}

impl Results {
    /// True when these are the results of `perfgate ab` (reports then say "base", not
    /// "baseline").
    pub fn is_ab(&self) -> bool {
        self.scenarios.iter().any(|s| s.ab.is_some())
    }

    /// `Err` when the file is a part of a run, not a run: it was interrupted (`incomplete`).
    pub fn whole_run(&self) -> Result<(), NotARun> {
        if self.incomplete {
            Err(NotARun::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// Why a saved results file, or one scenario in it, is not a whole run of the scenario: what
/// `bless --from` and `history append --results` refuse to take as one (a baseline, a night).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotARun {
    #[error("that run was interrupted (the results are marked `incomplete`): its requests are a part of a run, not a run; run it again")]
    Interrupted,
    #[error("holds load-shard worker {index}/{count} (1/{count} of the load), not the scenario: merge the workers with `perfgate report ... --output merged.json` and use the merged file (docs/load-shards.md \"Blessing\")")]
    LoadShardWorker { index: usize, count: usize },
}

/// Where the baseline came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineInfo {
    pub path: String,
    pub created_at: String,
    pub perfgate_version: String,
    pub requests: usize,
    pub summary: Summaries,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Figures of the candidate run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub requests: usize,
    pub ok: usize,
    /// Requests that failed (a stop is not a failure).
    pub failed: usize,
    /// Requests the provider completed but stopped on purpose (classes `refusal`,
    /// `content_filter`): neither ok nor failed, out of the latency figures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stopped: usize,
    /// Failures and stops per class (`connect`, `http_status`, ..., `content_filter`).
    pub errors_by_class: BTreeMap<crate::record::FailureClass, usize>,
    /// The first failure message, for the report (secrets redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Measured-phase wall time, ms.
    pub wall_ms: f64,
    /// sum(output_tokens of successes) / wall time, tokens/s.
    pub output_tokens_per_s: f64,
    /// Successful requests / wall time, requests/s.
    pub requests_per_s: f64,
    /// `ttft_ms`, `tpot_ms`, `e2e_ms`, `itl_ms` quantiles over successes.
    pub summary: Summaries,
    /// `usage`, `events` or `mixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<crate::record::TokenSources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_p50: Option<f64>,
    /// Median prompt tokens the server reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_p50: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Mean requests in flight over the measured phase (sum of request durations / wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_concurrency: Option<f64>,
    /// Open loop: the configured arrival rate, requests/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Open loop: actual send minus scheduled send, ms, over every measured request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_delay_ms: Option<MetricSummary>,
    /// Open loop: TTFT counted from the scheduled send (schedule delay + TTFT), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_schedule_ms: Option<MetricSummary>,
    /// Open loop: E2E latency counted from the scheduled send, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_from_schedule_ms: Option<MetricSummary>,
    /// How late perfgate's own runtime woke a probe task while measuring (event-loop lag), ms:
    /// high values mean the client, not the server, was busy. Absent when the measured phase
    /// was too short for a sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag_ms: Option<ClientLag>,
}

/// Open-loop figures of a set of records; `None`s for a closed-loop run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScheduleSummaries {
    /// Delay between a request's scheduled arrival and its send.
    pub delay: Option<MetricSummary>,
    /// TTFT counted from the scheduled arrival.
    pub ttft_from_schedule: Option<MetricSummary>,
    /// E2E counted from the scheduled arrival.
    pub e2e_from_schedule: Option<MetricSummary>,
}

/// The open-loop summaries of a set of records.
pub fn schedule_summaries(records: &[RequestRecord]) -> ScheduleSummaries {
    let delays: Vec<f64> = records.iter().filter_map(|r| r.sched_delay_ms).collect();
    let from = |f: fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.ok())
            .filter_map(|r| Some(r.sched_delay_ms? + f(r)?))
            .collect()
    };
    ScheduleSummaries {
        delay: summary(&delays),
        ttft_from_schedule: summary(&from(|r| r.ttft_ms)),
        e2e_from_schedule: summary(&from(|r| r.e2e_ms)),
    }
}

/// Median schedule delay above which the report warns that the client fell behind, ms.
pub const SCHEDULE_DELAY_WARN_MS: f64 = 5.0;

fn summary(xs: &[f64]) -> Option<MetricSummary> {
    crate::summary::metric_summary(xs)
}

/// Summaries of a set of measured records (successes), including ITL over every gap.
pub fn measured_summary(records: &[RequestRecord]) -> Summaries {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
    let mut out = BTreeMap::new();
    let cols = Metric::ALL.map(|m| {
        (
            SummaryKey::from(m),
            ok.iter()
                .filter_map(|r| m.value(r.timings()))
                .collect::<Vec<f64>>(),
        )
    });
    for (k, v) in cols {
        if let Some(s) = summary(&v) {
            out.insert(k, s);
        }
    }
    // ITL: each request's bounded gaps, pooled (crate::stats::itl)
    let itl = ok.iter().map(|r| (&r.itl_ms[..], r.itl_count));
    if let Some(s) = crate::stats::itl::pooled_summary(itl) {
        out.insert(SummaryKey::Itl, crate::summary::summary_of(&s));
    }
    out
}

impl ScenarioResult {
    /// The worst verdict among its checks (FAIL > WARN > IMPROVED > PASS > INFO).
    pub fn worst(&self) -> Option<Verdict> {
        self.checks.iter().map(|c| c.verdict).min()
    }

    /// `Err` when this is a load-shard worker's part of the scenario (`check --load-shard`),
    /// not the scenario: a fraction of its load under its own fingerprint.
    pub fn whole_run(&self) -> Result<(), NotARun> {
        match &self.load_shard {
            Some(ls) => Err(NotARun::LoadShardWorker {
                index: ls.index,
                count: ls.count,
            }),
            None => Ok(()),
        }
    }
}

impl Results {
    /// Sets `verdict` and `exit_code` from the scenarios, the policy and `incomplete`: the one
    /// place they are decided ([`crate::verdict::decide`]).
    pub fn decide(&mut self) {
        // A scenario without a usable baseline whose gate.slo objectives were checked is gated
        // by them (a gate on day one), as is one whose nightly history could be judged: for the
        // verdict it counts as compared. A broken
        // baseline file stays an error.
        let gated_by_slo = |s: &ScenarioResult| {
            matches!(s.status, Status::NoBaseline | Status::Stale)
                && s.checks.iter().any(|c| {
                    c.kind.is_slo()
                        || (c.kind == crate::gate::CheckKind::ChangePoint
                            && c.verdict != crate::gate::Verdict::Info)
                })
        };
        (self.verdict, self.exit_code) = crate::verdict::decide(
            self.scenarios.iter().map(|s| {
                let status = if gated_by_slo(s) {
                    Status::Compared
                } else {
                    s.status
                };
                (status, s.worst())
            }),
            self.baseline_policy,
            self.incomplete,
        );
    }
    /// When nothing failed, the gated check the drift widening made the most nearly blind
    /// ([`Check::nearly_blind`]): the one that hides the largest regressions (its `catches`
    /// figure where it has one, else its widened fail tolerance), its configured fail tolerance
    /// and what decides its metric.
    pub fn drift_blind(&self) -> Option<DriftBlind<'_>> {
        if self.verdict == crate::verdict::Overall::Fail {
            return None;
        }
        let checks = self
            .scenarios
            .iter()
            .flat_map(|s| s.checks.iter().map(move |c| (s, c)));
        let blind = checks.filter_map(|(s, c)| Some((s, c, c.nearly_blind()?)));
        let hides = |c: &Check| {
            c.min_detectable_change
                .filter(|m| m.is_finite())
                .map_or(c.fail, |m| m.max(c.fail))
        };
        let (s, check, configured) = blind.max_by(|a, b| hides(a.1).total_cmp(&hides(b.1)))?;
        let decided_by = match &s.nightly {
            Some(n) if check.metric.is_some_and(|m| n.deciding.contains(&m)) => DecidedBy::Nights,
            Some(_) => DecidedBy::FirstNight,
            None => DecidedBy::Baseline,
        };
        Some(DriftBlind {
            check,
            configured,
            hides: hides(check),
            decided_by,
        })
    }

    /// Checks with a given verdict, across scenarios.
    pub fn count(&self, v: Verdict) -> usize {
        self.scenarios
            .iter()
            .flat_map(|s| s.checks.iter())
            .filter(|c| c.verdict == v)
            .count()
    }
}

/// A gated check the drift widening made nearly blind ([`Results::drift_blind`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftBlind<'a> {
    pub check: &'a Check,
    /// Its configured fail tolerance (before the widening).
    pub configured: f64,
    /// The smallest regression it catches: its `catches` figure (min_detectable_change) where
    /// it has one, else its widened fail tolerance.
    pub hides: f64,
    pub decided_by: DecidedBy,
}

/// What decides the verdict of a metric whose committed-baseline rows are nearly blind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    /// No history is kept: the committed baseline.
    Baseline,
    /// A history is kept and tonight is its first night of this configuration: the committed
    /// baseline gates tonight ([`crate::assess::nightly::Nightly::deciding`]).
    FirstNight,
    /// The nights (its `nightly step` row).
    Nights,
}

/// Merges the results of several checks (e.g. one per CI matrix job) into one: scenarios in
/// order, Holm families added up and Holm redone over the union
/// ([`crate::gate::correct_merged_family`]), and the
/// verdict and exit code decided again from the scenarios ([`crate::verdict::decide`]), never
/// taken from the files' `verdict`/`exit_code` fields. The baseline policy is the strictest of
/// the files'. A scenario name seen twice is an error naming both files. `files` are the labels
/// used in messages. A single file is decided again too.
///
/// Errors: the message (naming the files), which `perfgate report` lifts into
/// [`crate::exit::Error::Results`]; text because callers (tests/it/report_snapshots.rs) read it.
pub fn merge(mut all: Vec<Results>, files: &[String]) -> Result<Results, String> {
    if all.is_empty() {
        return Err("no results file given".into());
    }
    let mut seen: std::collections::BTreeMap<crate::config::ScenarioName, usize> =
        Default::default();
    for (i, r) in all.iter().enumerate() {
        for s in &r.scenarios {
            if let Some(&j) = seen.get(&s.name) {
                return Err(format!(
                    "scenario {} is in both {} and {}: render them separately",
                    s.name,
                    files.get(j).map(String::as_str).unwrap_or("?"),
                    files.get(i).map(String::as_str).unwrap_or("?")
                ));
            }
            seen.insert(s.name.clone(), i);
        }
    }
    let merged = all.len();
    let mut out = all.remove(0);
    for r in all {
        out.family_size += r.family_size;
        out.incomplete |= r.incomplete;
        if r.baseline_policy.is_required() {
            out.baseline_policy = r.baseline_policy;
        }
        out.created_at = out.created_at.max(r.created_at);
        out.scenarios.extend(r.scenarios);
    }
    if merged > 1 {
        crate::gate::correct_merged_family(
            out.scenarios.iter_mut().flat_map(|s| s.checks.iter_mut()),
        );
    }
    out.decide();
    Ok(out)
}

#[cfg(test)]
mod merge_tests {
    use super::*;
    use crate::gate::Verdict;

    /// The fixture's `chat-long` scenario alone, its FAIL check given raw p-value `p`.
    fn shard(name: &str, p: f64) -> Results {
        let mut r = super::fixture();
        r.scenarios.retain(|s| s.name == "chat-long");
        let s = &mut r.scenarios[0];
        s.name = crate::config::ScenarioName::new(name).unwrap();
        for c in &mut s.checks {
            c.scenario = name.into();
            c.alpha = Some(0.01);
            if c.verdict == Verdict::Fail {
                c.p_value = Some(p);
            }
        }
        r.family_size = s.checks.iter().filter(|c| c.p_value.is_some()).count();
        (r.verdict, r.exit_code) = (crate::verdict::Overall::Fail, 1);
        r
    }

    fn fails(r: &Results) -> usize {
        let all = r.scenarios.iter().flat_map(|s| s.checks.iter());
        all.filter(|c| c.verdict == Verdict::Fail).count()
    }

    #[test]
    fn holm_is_redone_over_the_union_of_shards() {
        // 5 p-values per shard: 0.001 * 5 < 0.01 alone, and 0.001 * 10 = 0.01 over the union
        let files = ["a.json".to_string(), "b.json".to_string()];
        let m = merge(vec![shard("a", 0.001), shard("b", 0.001)], &files).unwrap();
        assert_eq!(m.family_size, 10);
        assert_eq!(fails(&m), 0);
        assert_eq!((m.verdict.as_str(), m.exit_code), ("WARN", 0));
        let c = m.scenarios[0]
            .checks
            .iter()
            .find(|c| c.p_value == Some(0.001));
        assert!(c.unwrap().reason.contains("merged shards"));
        // a strong regression survives the larger family (1e-9 * 10), a weak one not (0.002 * 9)
        let m = merge(vec![shard("a", 1e-9), shard("b", 0.002)], &files).unwrap();
        assert_eq!(fails(&m), 1);
        assert_eq!((m.verdict.as_str(), m.exit_code), ("FAIL", 1));
        // one file: nothing is redone
        let one = merge(vec![shard("a", 0.001)], &files[..1]).unwrap();
        assert_eq!(fails(&one), 1);
    }
}

/// The results file the tests read (tests/fixtures/results.json), parsed.
#[cfg(test)]
pub(crate) fn fixture() -> Results {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::{CheckId, Note, NoteKind};

    /// Issue 42: the JSON keeps each note's words and says its kind beside it; a file written
    /// before the kinds reads as `other`; no notes, neither field.
    #[test]
    fn notes_are_written_as_words_with_their_kinds_beside_them() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct S {
            #[serde(flatten, with = "super::notes_wire")]
            notes: Vec<Note>,
        }
        let s = S {
            notes: vec![
                Note::new(NoteKind::WorkloadDrift, "workload drift: x"),
                Note::new(NoteKind::ClientBusy, "client busy: y"),
            ],
        };
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(
            text,
            r#"{"notes":["workload drift: x","client busy: y"],"note_kinds":["workload_drift","client_busy"]}"#
        );
        assert_eq!(serde_json::from_str::<S>(&text).unwrap(), s);
        let old: S = serde_json::from_str(r#"{"notes":["a"]}"#).unwrap();
        assert_eq!(old.notes, vec![Note::new(NoteKind::Other, "a")]);
        assert_eq!(serde_json::to_string(&S { notes: vec![] }).unwrap(), "{}");
    }

    #[test]
    fn check_ids_are_short_and_plain() {
        assert!(CheckId::new("perfgate").is_ok());
        assert!(CheckId::new("ci/latency:gpu-1.2_a").is_ok());
        assert!(CheckId::new("").is_err());
        assert!(CheckId::new("a".repeat(101)).is_err());
        let e = CheckId::new("x-->y <b>").unwrap_err();
        assert!(e.starts_with("`x-->y <b>`: use 1 to 100"), "{e}");
        // a results file says `id`, not the flag it may not have come from
        let e = serde_json::from_str::<CheckId>("\"a b\"").unwrap_err();
        assert!(e.to_string().starts_with("id `a b`: use 1 to 100"), "{e}");
        // aligned listings pad it
        assert_eq!(format!("[{:<6}]", CheckId::new("ab").unwrap()), "[ab    ]");
    }
}
