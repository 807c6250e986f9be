//! Baseline files (`baselines/<scenario>.json`, docs/design.md "Files"): the format, atomic writes
//! (temp file + fsync + rename, so a crash leaves the old file or the new one, never half of
//! one), and loading with validation that names the file and the field.

use crate::config::scenario::{Metric, Scenario};
use crate::record::{FailureClass, RequestRecord, TokenSource, TokenSources};
use crate::runner::RunOutput;
use crate::stats::quantile::{sorted, summarize};
use crate::summary::{metric_summary, Summaries, SummaryKey};
use crate::units::round3;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod encode;
pub use encode::{encode, Unwritable};

/// Version of the file layout; a newer file is refused with a clear message.
pub const SCHEMA_VERSION: u32 = 1;
/// Version of the metric definitions (docs/design.md "Metrics"); numbers defined differently are not compared.
pub const METRICS_VERSION: u32 = 1;

/// Runs per scenario of a plain `perfgate bless`: enough for the run-to-run spread to be
/// estimated tightly enough that the widened tolerance still catches +20 % TPOT (calibrate's
/// "defaults" rows); bless is rare and a check is not. Here, not in `bless`, because
/// `calibrate` measures this default too and no command imports another.
pub const DEFAULT_RUNS: u8 = 5;

/// A whole baseline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub schema_version: u32,
    pub perfgate_version: String,
    pub metrics_version: u32,
    pub scenario: BaselineScenario,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub environment: Environment,
    pub workload: Workload,
    pub runs: Vec<BaselineRun>,
    /// Per metric (`ttft_ms`, `tpot_ms`, `e2e_ms`, `itl_ms`): quantiles over all runs.
    pub summary: Summaries,
    /// With k >= 2 runs: per metric, the upper 90 % bound of the run-to-run spread tau (log
    /// scale) and k. `check` widens the fail tolerance to it (docs/gate.md "Family and bands").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_spread: Option<RunSpread>,
    /// A conversation scenario (or one with `gate.cache.hit_rate`): the prefix cache of its
    /// first bless run with a cold reference (else its first run): reported and measured hit
    /// rates, TTFT by turn. A check whose hit rate moved names it as a drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::stats::cache::CacheSummary>,
}

/// The run-to-run spread of a k-run baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpread {
    /// Number of bless runs.
    pub runs: usize,
    /// Per metric (`ttft_ms`, `tpot_ms`, `e2e_ms`): tau, upper 90 % bound, log scale.
    pub tau: BTreeMap<SummaryKey, f64>,
    /// Per metric: each run's median, ms (for review).
    pub run_medians_ms: BTreeMap<SummaryKey, Vec<f64>>,
}

/// Which scenario, and its resolved configuration minus secrets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineScenario {
    pub name: crate::config::ScenarioName,
    pub fingerprint: String,
    pub config: serde_json::Value,
}

/// What the server said about itself, and where perfgate ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub model: Option<String>,
    pub system_fingerprint: Option<String>,
    pub server: Option<String>,
    pub host: Option<String>,
    /// The CPU the bless ran on (`model name x N`, [`crate::machine::cpu`]); a check on
    /// another one says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Who the server perfgate started said it was (`server:`; see [`crate::server::identity`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_identity: BTreeMap<String, String>,
    /// Its server-side figures from `/metrics` (see [`crate::server::metrics`]), the median over
    /// the bless runs, so a check can say where the time went.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_metrics: BTreeMap<String, f64>,
    /// Its time to ready, ms (process start to the first ready answer), for the check's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time_to_ready_ms: Option<f64>,
    /// Each start of the server the bless runs made, in order (`gate.cold_start` restarts it
    /// for every run): what a check's cold start is compared with. Empty in older baselines and
    /// when no run started a server (then the cold-start checks are not gated, with a note).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_starts: Vec<crate::server::start::ServerStart>,
}

/// The workload actually measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// sha256 prefix of the prompt text.
    pub prompt_hash: String,
    pub max_tokens: u32,
    /// True when `ignore_eos`/`min_tokens` asked for exactly `max_tokens`.
    pub fixed_length: bool,
    /// Where output token counts came from (`usage` or `events`, or `mixed`).
    pub token_source: Option<TokenSources>,
    /// Median prompt tokens reported by the server.
    pub prompt_tokens_p50: Option<f64>,
    /// Median output tokens.
    pub output_tokens_p50: Option<f64>,
}

/// One bless run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineRun {
    pub started_at: String,
    /// Wall time of the measured phase, ms.
    pub wall_ms: f64,
    pub records: Vec<BaselineRecord>,
}

/// One request, as stored (ms rounded to 3 decimals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
    /// ITL per request: [n, p50, p99, max] in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<ItlSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<TokenSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the server reported as served from its prefix cache
    /// ([`RequestRecord::cached_tokens`]); absent in baselines blessed before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<FailureClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<serde_json::Value>,
    /// A prompt-set request: its index in the run, entry and prompt id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<crate::record::WorkItem>,
    /// Whether its structured output or tool call parsed ([`RequestRecord::structured`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<crate::structured::Parsed>,
    /// Its answer's hash and length (never its text), blessed with deterministic sampling
    /// (`request.temperature: 0`) only: what a check's answers are compared with
    /// (`gate.outputs`, docs/baselines.md). Absent in baselines blessed before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::output_text::OutputText>,
}

/// A per-request ITL summary, ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItlSummary {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// The request's gaps as measured (ms, 3 decimals): every gap, or at most
    /// [`crate::stats::itl::ITL_KEEP`] points standing for `n` gaps. What the ITL P99 check
    /// pools (docs/gate.md "ITL P99"); absent in baselines blessed before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<f64>,
}

impl ItlSummary {
    /// The request's gaps as the ITL check takes them (`None` without stored points).
    pub fn cluster(&self) -> Option<crate::stats::cluster::GapCluster> {
        (!self.points.is_empty()).then(|| crate::stats::cluster::GapCluster {
            points: self.points.clone(),
            count: (self.n > self.points.len()).then_some(self.n as u64),
        })
    }
}

impl BaselineRecord {
    /// From a measured record.
    pub fn from_record(r: &RequestRecord) -> Self {
        let itl = if r.itl_ms.is_empty() {
            None
        } else {
            summarize(&r.itl_ms).map(|s| ItlSummary {
                n: r.itl_count.map_or(s.n, |c| c as usize),
                p50: round3(s.p50),
                p99: round3(s.p99),
                max: round3(s.max),
                points: r.itl_ms.iter().map(|&x| round3(x)).collect(),
            })
        };
        BaselineRecord {
            ttft_ms: r.ttft_ms.map(round3),
            tpot_ms: r.tpot_ms.map(round3),
            e2e_ms: r.e2e_ms.map(round3),
            itl_ms: itl,
            output_tokens: r.output_tokens,
            token_source: r.token_source,
            prompt_tokens: r.prompt_tokens,
            cached_tokens: r.cached_tokens,
            error: r.error.as_ref().map(|e| e.class),
            server_timings: r.server_timings.clone(),
            work: r.work.clone(),
            structured: r.structured,
            output: None,
        }
    }

    /// From a measured record of `sc`: with its answer's hash and length when sampling was
    /// deterministic (the condition the results' records use; a hash of a random sample says
    /// nothing).
    pub fn kept(r: &RequestRecord, sc: &Scenario) -> Self {
        BaselineRecord {
            output: r
                .output
                .as_ref()
                .filter(|_| sc.request.temperature == Some(0.0))
                .map(|o| crate::output_text::OutputText {
                    sha256: o.sha256.clone(),
                    chars: o.chars,
                    ..Default::default()
                }),
            ..Self::from_record(r)
        }
    }
    /// The value of a metric for a successful request.
    pub fn metric(&self, m: Metric) -> Option<f64> {
        if self.error.is_some() {
            return None;
        }
        m.value(self.timings())
    }

    /// Its gated figures.
    pub fn timings(&self) -> crate::config::metric::Timings {
        crate::config::metric::Timings {
            ttft_ms: self.ttft_ms,
            tpot_ms: self.tpot_ms,
            e2e_ms: self.e2e_ms,
        }
    }
}

/// Summaries of ttft/tpot/e2e over `records` (successes only).
pub fn summaries(records: &[BaselineRecord]) -> Summaries {
    let mut out = BTreeMap::new();
    for m in Metric::ALL {
        let xs: Vec<f64> = records.iter().filter_map(|r| r.metric(m)).collect();
        if let Some(s) = metric_summary(&xs) {
            out.insert(SummaryKey::from(m), s);
        }
    }
    out
}

/// The scenario's resolved configuration with secrets removed (header values from `${ENV}`
/// become `<redacted>`; the API key is never included, only the variable's name).
pub fn public_config(sc: &Scenario) -> serde_json::Value {
    let e = &sc.endpoint;
    let url = e.shown_url();
    let headers: BTreeMap<&str, &str> = e
        .headers
        .iter()
        .map(|h| {
            (
                h.name.as_str(),
                if h.from_env {
                    "<redacted>"
                } else {
                    h.value.expose()
                },
            )
        })
        .collect();
    serde_json::json!({
        "endpoint": {
            "base_url": url,
            "api": e.api.as_str(),
            "model": e.model,
            "api_key_env": e.api_key_env,
            "headers": headers,
            "include_usage": e.include_usage,
        },
        "request": sc.request,
        "load": sc.load,
    })
}

/// Median of an iterator of numbers (type 7), if any.
fn median(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let v = sorted(&xs.collect::<Vec<_>>());
    crate::stats::quantile::quantile_type7(&v, 0.5)
}

/// The token source over records: one source, or mixed.
pub fn token_source_of(records: &[BaselineRecord]) -> Option<TokenSources> {
    TokenSources::of(records.iter().filter_map(|r| r.token_source))
}

/// The workload figures of a set of records.
pub fn workload_of(sc: &Scenario, records: &[BaselineRecord]) -> Workload {
    let ok = || records.iter().filter(|r| r.error.is_none());
    Workload {
        prompt_hash: sc.request.prompt_hash(),
        max_tokens: sc.request.max_tokens,
        fixed_length: sc.request.fixed_length(),
        token_source: token_source_of(records),
        prompt_tokens_p50: median(ok().filter_map(|r| r.prompt_tokens.map(|x| x as f64))),
        output_tokens_p50: median(ok().filter_map(|r| r.output_tokens.map(|x| x as f64))),
    }
}

/// Builds a baseline from bless runs.
pub fn from_runs(sc: &Scenario, runs: &[RunOutput], host: Option<String>) -> Baseline {
    let b_runs: Vec<BaselineRun> = runs
        .iter()
        .map(|r| BaselineRun {
            started_at: r.started_at.clone(),
            wall_ms: round3(r.wall_ms),
            records: r
                .records
                .iter()
                .map(|x| BaselineRecord::kept(x, sc))
                .collect(),
        })
        .collect();
    let all: Vec<BaselineRecord> = b_runs
        .iter()
        .flat_map(|r| r.records.iter().cloned())
        .collect();
    let run_spread = (b_runs.len() >= 2).then(|| spread_of(&b_runs));
    let first = runs.first();
    Baseline {
        schema_version: SCHEMA_VERSION,
        perfgate_version: env!("CARGO_PKG_VERSION").to_string(),
        metrics_version: METRICS_VERSION,
        scenario: BaselineScenario {
            name: sc.name.clone(),
            fingerprint: sc.fingerprint.clone(),
            config: public_config(sc),
        },
        created_at: crate::clock::now_rfc3339(),
        environment: Environment {
            model: first.and_then(|r| r.model.clone()),
            system_fingerprint: first.and_then(|r| r.system_fingerprint.clone()),
            server: first.and_then(|r| r.server.clone()),
            host,
            cpu: crate::machine::cpu(),
            server_identity: first
                .and_then(|r| r.server_side.as_ref())
                .map(|s| s.identity.clone())
                .unwrap_or_default(),
            server_metrics: crate::server::median_figures(
                runs.iter().filter_map(|r| r.server_side.as_ref()),
            ),
            server_time_to_ready_ms: runs
                .iter()
                .filter_map(|r| r.server_side.as_ref())
                .find(|s| s.pid.is_some())
                .and_then(|s| s.time_to_ready_ms),
            server_starts: runs
                .iter()
                .filter_map(|r| r.server_side.as_ref())
                .filter_map(crate::server::start::ServerStart::of)
                .collect(),
        },
        workload: workload_of(sc, &all),
        summary: summaries(&all),
        runs: b_runs,
        run_spread,
        cache: cache_of(sc, runs),
    }
}

/// The prefix-cache summary a baseline keeps ([`Baseline::cache`]).
fn cache_of(sc: &Scenario, runs: &[RunOutput]) -> Option<crate::stats::cache::CacheSummary> {
    if sc.request.conversation.is_none() && sc.gate.cache_hit_rate.is_none() {
        return None;
    }
    let run = runs
        .iter()
        .find(|r| !r.cache_reference.is_empty())
        .or(runs.first())?;
    Some(crate::cache::summarize(
        &run.records,
        &run.cache_reference,
        None,
    ))
}

/// Run-to-run spread of k >= 2 runs, per metric.
fn spread_of(runs: &[BaselineRun]) -> RunSpread {
    let mut tau = BTreeMap::new();
    let mut meds = BTreeMap::new();
    for m in Metric::ALL {
        let per_run: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| r.records.iter().filter_map(|x| x.metric(m)).collect())
            .collect();
        let key = SummaryKey::from(m);
        if let Some(t) = crate::stats::spread::run_spread_upper(&per_run) {
            tau.insert(key, (t * 10_000.0).round() / 10_000.0);
        }
        let run_meds = per_run
            .iter()
            .filter_map(|v| median(v.iter().copied()).map(round3))
            .collect();
        meds.insert(key, run_meds);
    }
    RunSpread {
        runs: runs.len(),
        tau,
        run_medians_ms: meds,
    }
}

impl Baseline {
    /// All records of all runs.
    pub fn records(&self) -> impl Iterator<Item = &BaselineRecord> {
        self.runs.iter().flat_map(|r| r.records.iter())
    }
}

/// `dir/<name>.json`.
pub fn path_for(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

/// Why a baseline could not be used. The messages name the file; `Invalid`'s names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// No file.
    #[error("no baseline file at {}", .0.display())]
    Missing(PathBuf),
    /// The file exists but cannot be read (too large, not UTF-8, an I/O error).
    #[error("{}: cannot read ({reason})", file.display())]
    Unreadable { file: PathBuf, reason: String },
    /// The file is broken: not JSON, a field missing or out of range ([`parse`]'s message).
    #[error("{}: {problem}", file.display())]
    Invalid { file: PathBuf, problem: String },
}

/// Reads and validates a baseline file (`hint`: the `perfgate bless` its errors suggest).
pub fn load(path: &Path, hint: &crate::hint::Hint) -> Result<Baseline, LoadError> {
    let text = match crate::limits::read_text(path, crate::limits::MAX_BASELINE_BYTES) {
        Ok(t) => t,
        Err(crate::limits::ReadError::NotFound) => {
            return Err(LoadError::Missing(path.to_path_buf()))
        }
        Err(e) => {
            return Err(LoadError::Unreadable {
                file: path.to_path_buf(),
                reason: e.to_string(),
            })
        }
    };
    parse(&text, hint).map_err(|problem| LoadError::Invalid {
        file: path.to_path_buf(),
        problem,
    })
}

/// Parses and validates baseline JSON text.
///
/// Errors: what is wrong, naming the field (`runs[0].records[3].ttft_ms is -1: ...`), without
/// the file, which [`load`] adds ([`LoadError::Invalid`]). Text rather than a type: nothing
/// branches on which check failed, and callers of this text API (tests/it/bounds.rs) read it.
pub fn parse(text: &str, hint: &crate::hint::Hint) -> Result<Baseline, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "not valid JSON ({e}); restore it from git or run `{}`",
            hint.bless()
        )
    })?;
    crate::limits::check_unique_keys(text).map_err(|e| e.to_string())?;
    crate::limits::check_times(&v).map_err(|e| e.to_string())?;
    if let Some(sv) = v.get("schema_version").and_then(|s| s.as_u64()) {
        if sv > SCHEMA_VERSION as u64 {
            return Err(format!("schema_version {sv} was written by a newer perfgate (this one reads {SCHEMA_VERSION}); upgrade perfgate"));
        }
    }
    let b: Baseline = serde_json::from_value(v).map_err(|e| {
        format!(
            "{e}; fix the field or re-create the file with `{}`",
            hint.bless()
        )
    })?;
    if b.schema_version == 0 {
        return Err("schema_version 0 is not valid".into());
    }
    if time::OffsetDateTime::parse(
        &b.created_at,
        &time::format_description::well_known::Rfc3339,
    )
    .is_err()
    {
        return Err(format!(
            "created_at `{}` is not an RFC 3339 time",
            b.created_at
        ));
    }
    for (ri, run) in b.runs.iter().enumerate() {
        for (i, r) in run.records.iter().enumerate() {
            for (field, val) in [
                (SummaryKey::Ttft, r.ttft_ms),
                (SummaryKey::Tpot, r.tpot_ms),
                (SummaryKey::E2e, r.e2e_ms),
            ] {
                if let Some(x) = val {
                    if !x.is_finite() || x < 0.0 {
                        return Err(format!("runs[{ri}].records[{i}].{field} is {x}: it must be a number of ms >= 0"));
                    }
                }
            }
            if let Some(o) = &r.output {
                let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
                if o.sha256.len() != 16 || !o.sha256.chars().all(hex) {
                    return Err(format!(
                        "runs[{ri}].records[{i}].output.sha256 `{}` is not 16 lowercase hex characters; restore it from git or re-create the file with `{}`",
                        o.sha256.chars().take(40).collect::<String>(),
                        hint.bless()
                    ));
                }
            }
            if r.error.is_none() && r.ttft_ms.is_none() {
                return Err(format!(
                    "runs[{ri}].records[{i}] has neither ttft_ms nor error"
                ));
            }
        }
    }
    if b.runs.iter().all(|r| r.records.is_empty()) {
        return Err("has no records; run `perfgate bless`".into());
    }
    check_summary(&b)?;
    Ok(b)
}

/// Refuses a baseline whose `summary` differs from the summary of its own records (a reviewer
/// reads the summary; the gate uses the records). Values are compared as written (3 decimals).
fn check_summary(b: &Baseline) -> Result<(), String> {
    let all: Vec<BaselineRecord> = b
        .runs
        .iter()
        .flat_map(|r| r.records.iter().cloned())
        .collect();
    let want = summaries(&all);
    let keys = |m: &Summaries| m.keys().map(|k| k.as_str()).collect::<Vec<_>>().join(", ");
    if want.keys().ne(b.summary.keys()) {
        return Err(format!(
            "summary has metrics [{}] but the records give [{}]; re-create the file with `perfgate bless`",
            keys(&b.summary),
            keys(&want)
        ));
    }
    let near = |a: f64, b: f64| (a - b).abs() <= 0.0015 + 1e-9 * a.abs().max(b.abs());
    for (k, w) in &want {
        let g = &b.summary[k];
        let fields = [
            ("p50", g.p50, w.p50),
            ("p90", g.p90, w.p90),
            ("p99", g.p99, w.p99),
            ("mean", g.mean, w.mean),
            ("min", g.min, w.min),
            ("max", g.max, w.max),
        ];
        if g.n != w.n {
            return Err(format!(
                "summary.{k}.n is {} but the records have {}: the summary does not match the records the gate uses; re-create the file with `perfgate bless`",
                g.n, w.n
            ));
        }
        for (f, got, exp) in fields {
            if !near(got, exp) {
                return Err(format!(
                    "summary.{k}.{f} is {got} but the records give {exp}: the summary does not match the records the gate uses; re-create the file with `perfgate bless`"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_baselines_name_the_field() {
        assert!(parse("{", &Default::default())
            .unwrap_err()
            .contains("not valid JSON"));
        assert!(parse(r#"{"schema_version": 9}"#, &Default::default())
            .unwrap_err()
            .contains("newer perfgate"));
        let e = parse(r#"{"schema_version": 1}"#, &Default::default()).unwrap_err();
        assert!(e.contains("missing field"), "{e}");
    }

    // A record keeps the server's cached prompt count; one blessed before the field reads as
    // none, and none is not written, so old baselines read and write back unchanged.
    #[test]
    fn cached_tokens_are_kept_and_optional() {
        let rec = RequestRecord {
            prompt_tokens: Some(120),
            cached_tokens: Some(96),
            cached_source: Some(crate::record::CachedSource::Usage),
            ..RequestRecord::new(0.0)
        };
        let b = BaselineRecord::from_record(&rec);
        assert_eq!(b.cached_tokens, Some(96));
        assert_eq!(
            serde_json::to_value(&b).unwrap(),
            serde_json::json!({"prompt_tokens": 120, "cached_tokens": 96})
        );
        let old: BaselineRecord =
            serde_json::from_str(r#"{"ttft_ms": 12.5, "prompt_tokens": 120}"#).unwrap();
        assert_eq!(old.cached_tokens, None);
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"ttft_ms":12.5,"prompt_tokens":120}"#
        );
    }

    // At temperature 0 a bless keeps each answer's hash and length (no text); at any other
    // temperature none; a baseline without it still loads; a hash that is not 16 hex is refused
    #[test]
    fn answers_are_kept_as_hash_and_length_at_temperature_0_only() {
        let sc = |t: &str| {
            let yaml = format!("scenarios:\n  - name: s\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi, max_tokens: 8{t}}}\n");
            crate::config::parse_str(&yaml, "t.yaml", &|_| None)
                .unwrap()
                .remove(0)
        };
        let rec = RequestRecord {
            ttft_ms: Some(10.0),
            output: Some(crate::output_text::OutputText::of(" tok1 tok2")),
            ..RequestRecord::new(0.0)
        };
        let mut run = RunOutput::empty();
        run.records = vec![rec];
        run.started_at = "2026-11-30T00:00:00Z".into();
        let greedy = from_runs(&sc(", temperature: 0"), std::slice::from_ref(&run), None);
        let o = greedy.runs[0].records[0].output.as_ref().unwrap();
        // " tok1 tok2" is 10 characters; the text itself is not kept
        assert_eq!((o.chars, o.sha256.len(), o.head.as_str()), (10, 16, ""));
        let text = encode(&greedy).unwrap();
        assert!(
            text.contains("\"output\": {\n") && !text.contains("tok1"),
            "{text}"
        );
        let back = parse(&text, &Default::default()).unwrap();
        assert_eq!(back.runs[0].records[0].output.as_ref(), Some(o));
        for t in ["", ", temperature: 0.7"] {
            let b = from_runs(&sc(t), std::slice::from_ref(&run), None);
            assert_eq!(b.runs[0].records[0].output, None, "{t}");
        }
        // an old baseline without outputs reads back as none
        let old = text.replace(
            &format!(
                ",\n          \"output\": {{\n            \"sha256\": \"{}\",\n            \"chars\": 10\n          }}",
                o.sha256
            ),
            "",
        );
        assert_ne!(old, text);
        assert_eq!(
            parse(&old, &Default::default()).unwrap().runs[0].records[0].output,
            None
        );
        let bad = text.replace(&o.sha256, "not-a-hash");
        let e = parse(&bad, &Default::default()).unwrap_err();
        assert!(
            e.starts_with("runs[0].records[0].output.sha256 `not-a-hash` is not 16 lowercase hex"),
            "{e}"
        );
    }
}
