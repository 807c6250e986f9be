//! Another tool's per-request export read into perfgate's records (`check --from FILE --format
//! F`, `bless --from FILE --format F`; docs/import.md): AIPerf's `profile_export.jsonl`, GuideLLM's
//! benchmarks JSON or YAML, `vllm bench serve --save-result --save-detailed` JSON. One pure
//! parser per format ([`aiperf`], [`guidellm`], [`vllm`]) turns text into [`Request`]s; this file
//! turns those into a [`RunOutput`] the gate reads like a measured run, and says what the tool
//! measured otherwise than perfgate ([`Format::differences`]).
//!
//! An export without per-request records (a summary of averaged percentiles) is refused: two
//! summaries cannot be compared with a stated false-alarm rate.

pub mod aiperf;
pub mod args;
pub mod guidellm;
pub mod vllm;

use crate::record::{Failure, FailureClass, RequestRecord};
use crate::runner::RunOutput;
use std::path::Path;

/// The largest export read, bytes (as large as a results file perfgate reads).
pub const MAX_EXPORT_BYTES: u64 = crate::limits::MAX_RESULTS_BYTES;

/// Which tool wrote the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// AIPerf's `profile_export.jsonl`: one JSON record a line.
    Aiperf,
    /// GuideLLM's benchmarks file (`--output kind=json` or `kind=yaml`).
    Guidellm,
    /// `vllm bench serve --save-result --save-detailed` JSON.
    Vllm,
}

impl Format {
    /// Every format, in the order the docs list them.
    pub const ALL: [Format; 3] = [Format::Aiperf, Format::Guidellm, Format::Vllm];

    /// Its name on the command line (`--format aiperf`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Aiperf => "aiperf",
            Format::Guidellm => "guidellm",
            Format::Vllm => "vllm",
        }
    }

    /// The tool's name as its authors write it.
    pub fn tool(self) -> &'static str {
        match self {
            Format::Aiperf => "AIPerf",
            Format::Guidellm => "GuideLLM",
            Format::Vllm => "vllm bench serve",
        }
    }

    /// What the tool measured otherwise than perfgate (docs/design.md "Metrics"), from its own
    /// documented definitions; every line is a note of the imported scenario.
    pub fn differences(self) -> &'static [&'static str] {
        match self {
            Format::Aiperf => &[
                "AIPerf's TTFT is request start to its first response chunk (the clock starts before the connection is set up), as perfgate's",
                "TPOT is AIPerf's inter_token_latency, (request_latency - TTFT) / (output_sequence_length - 1): its end is the last response AIPerf received (perfgate's: the last token-bearing event) and its tokens include reasoning tokens, counted by AIPerf's tokenizer unless it ran with --use-server-token-count",
                "E2E is AIPerf's request_latency (request start to its last response); ITL is its inter_chunk_latency, one gap per response chunk as perfgate's",
            ],
            Format::Guidellm => &[
                "GuideLLM's TTFT is request start to its first token iteration (the clock starts before the connection is set up), as perfgate's",
                "TPOT is GuideLLM's inter_token_latency_ms, (last token - first token) / (output_tokens - 1), perfgate's formula; output_tokens is the server's usage count, or the number of stream iterations without one (not its time_per_output_token_ms, which includes TTFT)",
                "E2E is GuideLLM's request_latency (request start to request end, the end of the body: later than perfgate's last token); no per-gap ITL is exported",
            ],
            Format::Vllm => &[
                "vllm bench serve's TTFT is request start to the first chunk with text (the clock starts before the connection is set up), as perfgate's",
                "TPOT is vLLM's (latency - TTFT) / (output_len - 1) with output_len the server's usage count, or its tokenizer's count of the generated text without one; ITL is its itls, one gap per chunk with text",
                "E2E is vLLM's latency (request start to the last chunk), or TTFT plus the sum of its itls where the file has no latencies",
            ],
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an export could not be read. Every message names the file and, for one bad record, its
/// line (JSONL) or its place in the document (`benchmarks[0].requests.successful[3]`).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        file: String,
        #[source]
        source: crate::limits::ReadError,
    },
    /// One record is not what the format documents.
    #[error("{file}:{line}: {why}")]
    Line {
        file: String,
        line: usize,
        why: String,
    },
    /// One record of a JSON or YAML document is not what the format documents; `at` is its
    /// place (`benchmarks[0].requests.successful[3]`).
    #[error("{file}: {at}: {why}")]
    At {
        file: String,
        at: String,
        why: String,
    },
    /// The document is not what the format documents.
    #[error("{file}: {why}")]
    Shape { file: String, why: String },
    /// The export holds no per-request records (a summary, or no request at all).
    #[error("{file}: no per-request records to gate: {why}. perfgate gates each request's times; averaged percentiles cannot be compared with a stated false-alarm rate")]
    NoRecords { file: String, why: String },
}

impl From<ImportError> for crate::exit::Error {
    fn from(e: ImportError) -> Self {
        crate::exit::Error::Results(Box::new(e))
    }
}

/// One request as the other tool recorded it, ms (converted from its units), before it becomes
/// a [`RequestRecord`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// When it was sent: ms on the tool's clock (epoch or monotonic; only differences are used).
    pub start_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// Per-chunk gaps, ms, in arrival order.
    pub itl_ms: Vec<f64>,
    pub prompt_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// The tool's id of the request (AIPerf `x_request_id`, GuideLLM `response_id`).
    pub id: Option<String>,
    /// Its failure, when it failed.
    pub error: Option<Failure>,
}

/// What an export gave: its requests and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub requests: Vec<Request>,
    /// Why records of the file were not taken (cancelled on purpose, a warmup), for the notes.
    pub left_out: Vec<String>,
    /// The model the tool named, when it did.
    pub model: Option<String>,
    /// Start of the run, ms since the Unix epoch, when the tool's clock is the wall clock.
    pub started_unix_ms: Option<f64>,
}

/// An export read: the run the gate reads and the notes the report carries.
#[derive(Debug, Clone)]
pub struct Imported {
    pub format: Format,
    pub run: RunOutput,
    /// What was imported and what the tool measured otherwise.
    pub notes: Vec<String>,
}

/// Reads `path` as an export of `format`.
pub fn read(path: &Path, format: Format) -> Result<Imported, ImportError> {
    let file = path.display().to_string();
    let text = crate::limits::read_repo_file(path, MAX_EXPORT_BYTES).map_err(|source| {
        ImportError::Read {
            file: file.clone(),
            source,
        }
    })?;
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    );
    let parsed = parse(&text, format, &file, yaml)?;
    Ok(imported(parsed, format, &file))
}

/// Parses an export's text (`yaml`: a GuideLLM YAML file).
pub fn parse(text: &str, format: Format, file: &str, yaml: bool) -> Result<Parsed, ImportError> {
    let parsed = match format {
        Format::Aiperf => aiperf::parse(text, file)?,
        Format::Guidellm => guidellm::parse(text, file, yaml)?,
        Format::Vllm => vllm::parse(text, file)?,
    };
    if parsed.requests.is_empty() {
        return Err(ImportError::NoRecords {
            file: file.to_string(),
            why: if parsed.left_out.is_empty() {
                "it holds no request".to_string()
            } else {
                format!("every record was left out ({})", parsed.left_out.join("; "))
            },
        });
    }
    Ok(parsed)
}

/// The run and notes of a parsed export.
pub fn imported(parsed: Parsed, format: Format, file: &str) -> Imported {
    let n = parsed.requests.len();
    let mut notes = vec![format!(
        "imported from {} export {file} ({n} requests); not measured by perfgate",
        format.tool()
    )];
    notes.extend(parsed.left_out.iter().map(|w| format!("left out: {w}")));
    notes.extend(format.differences().iter().map(|d| d.to_string()));
    Imported {
        format,
        run: run_output(parsed),
        notes,
    }
}

/// The requests as one measured run: ordered by start, `start_ms` from the first start (all
/// 0 when the tool gave no start times), the run's wall time from the first start to the last
/// end.
pub fn run_output(parsed: Parsed) -> RunOutput {
    let mut reqs = parsed.requests;
    reqs.sort_by(|a, b| {
        a.start_ms
            .unwrap_or(0.0)
            .total_cmp(&b.start_ms.unwrap_or(0.0))
    });
    let origin = reqs
        .iter()
        .filter_map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    let origin = if origin.is_finite() { origin } else { 0.0 };
    let records: Vec<RequestRecord> = reqs.into_iter().map(|r| record(r, origin)).collect();
    let wall_ms = records
        .iter()
        .map(|r| r.start_ms + r.e2e_ms.unwrap_or(0.0))
        .fold(0.0, f64::max);
    let mut run = RunOutput::empty();
    run.records = records;
    run.wall_ms = wall_ms;
    run.model = parsed.model;
    run.started_unix_ms = parsed.started_unix_ms.unwrap_or(0.0);
    run.started_at = parsed
        .started_unix_ms
        .and_then(rfc3339)
        .unwrap_or_else(crate::clock::now_rfc3339);
    run
}

/// `ms` since the epoch as RFC 3339 UTC, second precision.
fn rfc3339(ms: f64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp((ms / 1000.0).floor() as i64).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// One request as a record: its start `origin` ms after the run's, its gaps kept as
/// [`crate::stats::itl::compress`] keeps a measured request's.
fn record(r: Request, origin: f64) -> RequestRecord {
    let mut rec = RequestRecord::new(r.start_ms.map_or(0.0, |s| s - origin));
    rec.prompt_tokens = r.prompt_tokens;
    rec.response_id = r.id;
    if let Some(e) = r.error {
        rec.error = Some(e);
        return rec;
    }
    rec.ttft_ms = r.ttft_ms;
    rec.tpot_ms = r.tpot_ms;
    rec.e2e_ms = r.e2e_ms;
    rec.output_tokens = r.output_tokens;
    rec.token_events = r.ttft_ms.map_or(0, |_| r.itl_ms.len() as u64 + 1);
    let gaps: Vec<(f64, u64)> = r.itl_ms.iter().map(|&g| (g, 1)).collect();
    let (points, count) = crate::stats::itl::compress(&gaps);
    rec.itl_ms = points;
    rec.itl_count = count;
    rec
}

/// A time the export gave, checked: finite, not negative, at most a day
/// ([`crate::limits::MAX_LATENCY_MS`]); `what` names the field in the message.
pub fn time_ms(v: f64, what: &str) -> Result<f64, String> {
    if v.is_finite() && (0.0..=crate::limits::MAX_LATENCY_MS).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{what} = {v} ms is not a believable time (0 to {} ms)",
            crate::limits::MAX_LATENCY_MS
        ))
    }
}

/// The failure class of another tool's error: its HTTP status when it gave one, else what its
/// text names (a timeout, a refused connection), else an error inside the response.
pub fn classify(status: Option<u16>, text: &str) -> FailureClass {
    let t = text.to_ascii_lowercase();
    if t.contains("timeout") || t.contains("timed out") {
        FailureClass::TimeoutRequest
    } else if status.is_some_and(|s| (400..=599).contains(&s)) {
        FailureClass::HttpStatus
    } else if t.contains("connect") || t.contains("refused") {
        FailureClass::Connect
    } else {
        FailureClass::InBandError
    }
}

/// A failed request's [`Failure`]: its class from [`classify`], the tool's own words.
pub fn failure(format: Format, status: Option<u16>, text: &str) -> Failure {
    let shown: String = text.chars().take(300).collect();
    Failure {
        class: classify(status, text),
        status: status.filter(|s| (100..=599).contains(s)),
        message: format!("{}: {shown}", format.tool()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_reads_status_and_words() {
        assert_eq!(classify(Some(500), "Internal"), FailureClass::HttpStatus);
        assert_eq!(
            classify(Some(408), "ReadTimeout"),
            FailureClass::TimeoutRequest
        );
        assert_eq!(
            classify(None, "ClientConnectorError: Connection refused"),
            FailureClass::Connect
        );
        assert_eq!(classify(None, "boom"), FailureClass::InBandError);
    }

    #[test]
    fn run_starts_at_the_first_request_and_orders_by_start() {
        let req = |s: f64, e2e: f64| Request {
            start_ms: Some(s),
            ttft_ms: Some(10.0),
            e2e_ms: Some(e2e),
            ..Request::default()
        };
        let run = run_output(Parsed {
            requests: vec![
                req(1_700_000_000_500.0, 100.0),
                req(1_700_000_000_000.0, 50.0),
            ],
            left_out: vec![],
            model: None,
            started_unix_ms: Some(1_700_000_000_000.0),
        });
        assert_eq!(run.records[0].start_ms, 0.0);
        assert_eq!(run.records[1].start_ms, 500.0);
        assert_eq!(run.wall_ms, 600.0);
        assert_eq!(run.started_at, "2023-11-14T22:13:20Z");
        assert_eq!(run.records[0].token_events, 1);
    }

    #[test]
    fn times_out_of_range_are_refused() {
        assert!(time_ms(-1.0, "ttft").is_err());
        assert!(time_ms(f64::NAN, "ttft").is_err());
        assert!(time_ms(2e8, "ttft").is_err());
        assert_eq!(time_ms(12.5, "ttft"), Ok(12.5));
    }
}
