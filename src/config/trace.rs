//! `load.trace`: an open loop whose arrival times and per-request lengths come from a trace
//! file, in the formats the field already uses (docs/scenarios.md "Trace replay"): Mooncake's
//! JSONL (`{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [...]}`, the
//! hash ids naming fixed-size prompt blocks, so that requests sharing a block share its text),
//! the Azure LLM inference trace CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`; the 2023
//! release's naive times, the 2024 release's with a UTC offset, or seconds or ms since the Unix
//! epoch) and BurstGPT's CSV
//! (`Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`, seconds from the
//! trace's start; its failed requests, `Response tokens` 0, left out and counted). Parsing is
//! pure ([`parse`]); [`load`] reads the file with its size bound.

use super::common::{bail, ensure, fit_points, named, names, read_data_file, short_hash, within};
use super::common::{At, Invalid, Slot, MAX_RATE, MIN_RATE};
use super::file::RawTrace;
use crate::limits::{MAX_TRACE_BYTES, MAX_TRACE_ENTRIES};
use crate::synthetic_prompt::MAX_PROMPT_TOKENS;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Largest output length a trace entry may ask, tokens.
pub const MAX_TRACE_OUTPUT: u64 = 1_000_000;
/// Mooncake's and AIPerf's prompt block size, tokens.
pub const DEFAULT_BLOCK_SIZE: u32 = 512;

/// The trace's format (`load.trace.format`; told from the file when not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake JSONL.
    Mooncake,
    /// Azure LLM inference trace CSV.
    Azure,
    /// BurstGPT CSV.
    Burstgpt,
}

names!(TraceFormat { Mooncake => "mooncake", Azure => "azure", Burstgpt => "burstgpt" });

impl TraceFormat {
    /// The CSV columns of (time, prompt tokens, output tokens), as the format's header names
    /// them (compared without case); `None` for a JSONL format.
    fn columns(self) -> Option<[&'static str; 3]> {
        match self {
            TraceFormat::Mooncake => None,
            TraceFormat::Azure => Some(["TIMESTAMP", "ContextTokens", "GeneratedTokens"]),
            TraceFormat::Burstgpt => Some(["Timestamp", "Request tokens", "Response tokens"]),
        }
    }
}

/// One request of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    /// Arrival, ms after the trace's first entry (before `time_scale`).
    pub at_ms: f64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Output tokens (the request's `max_tokens`; 0 in the file asks 1).
    pub output_tokens: u32,
    /// Mooncake: the prompt's blocks (empty for Azure: every prompt its own text).
    pub hash_ids: Vec<u64>,
}

/// The validated `load.trace`: where it came from and how it is replayed (in the
/// fingerprint), and its entries (not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSpec {
    /// The path as written (relative to the scenario file).
    pub file: String,
    pub format: TraceFormat,
    /// sha256 (16 hex chars) of the file's bytes.
    pub sha256: String,
    /// Entries read.
    pub entries: usize,
    /// BurstGPT: failed requests (`Response tokens` 0) left out, not replayed.
    #[serde(skip)]
    pub failed: usize,
    /// Tokens per hash id (Mooncake).
    pub block_size: u32,
    /// Factor on the trace's times (0.5: twice as fast).
    pub time_scale: f64,
    /// Entries skipped before the first measured request.
    pub start: usize,
    #[serde(skip)]
    list: Arc<Vec<TraceEntry>>,
}

/// What the request in a slot sends, from the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest<'a> {
    /// Its line's index among the entries (0-based).
    pub entry: usize,
    pub item: &'a TraceEntry,
}

impl TraceSpec {
    /// The entry of the request in `slot`: measured request g sends entry `start + g`
    /// (checked to exist when the scenario is read); unmeasured request i the entry
    /// `n - 1 - (i mod n)`, from the end.
    pub fn pick(&self, slot: Slot) -> TraceRequest<'_> {
        let n = self.list.len();
        let entry = match slot {
            Slot::Measured(g) => (self.start + g).min(n - 1),
            Slot::Unmeasured(i) => n - 1 - (i % n),
        };
        TraceRequest {
            entry,
            item: &self.list[entry],
        }
    }

    /// When measured request `g` is due, ms after measured request `first`'s arrival
    /// (scaled by `time_scale`).
    pub fn offset_ms(&self, first: usize, g: usize) -> f64 {
        let at = |k: usize| self.pick(Slot::Measured(k)).item.at_ms;
        (at(g) - at(first)) * self.time_scale
    }

    /// The mean arrival rate of `count` measured requests, requests/s: what `load.rate` reports.
    pub fn rate(&self, count: usize) -> f64 {
        let span_s = self.offset_ms(0, count.saturating_sub(1)) / 1000.0;
        if span_s > 0.0 {
            (count.saturating_sub(1)) as f64 / span_s
        } else {
            MAX_RATE
        }
    }

    /// The prompt lengths of `count` measured requests at their 10th and 90th percentiles,
    /// where the synthetic prompt is fitted ([`crate::config::generate::fit_points`]).
    pub fn fit_points(&self, count: usize) -> Vec<u32> {
        let mut v: Vec<u32> = (0..count)
            .map(|g| self.pick(Slot::Measured(g)).item.input_tokens)
            .collect();
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        fit_points(at(0.1), at(0.9))
    }

    /// The longest output `count` measured requests ask, tokens.
    pub fn max_output(&self, count: usize) -> u32 {
        (0..count.max(1))
            .map(|g| self.pick(Slot::Measured(g)).item.output_tokens)
            .max()
            .unwrap_or(1)
    }

    /// A summary for `validate`.
    pub fn describe(&self) -> String {
        let failed = match self.failed {
            0 => String::new(),
            n => format!(" ({n} failed requests, `Response tokens` 0, left out)"),
        };
        format!(
            "trace {} ({}, {} entries{failed}, sha256 {}, from entry {}, time x {}, blocks of {} tokens)",
            self.file,
            self.format.as_str(),
            self.entries,
            self.sha256,
            self.start,
            crate::units::Num(self.time_scale),
            self.block_size
        )
    }
}

/// Reads and validates `load.trace`; `dir` is the scenario file's directory; `needed`: the
/// measured requests the largest look sends. Errors: the key or `file:line`, and what to do.
pub fn load(raw: &RawTrace, dir: &Path, needed: usize) -> Result<TraceSpec, Invalid> {
    let (file, shown, text) = read_data_file(
        "load.trace.file",
        raw.file.as_deref(),
        (dir, MAX_TRACE_BYTES),
        "a Mooncake JSONL, Azure CSV or BurstGPT CSV trace",
        "trace",
    )?;
    let format = named(
        "load.trace.format",
        raw.format.as_deref(),
        "mooncake, azure or burstgpt (or leave it out to tell from the file)",
    )?;
    let block_size = raw.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    within("load.trace.block_size", block_size, 1..=65_536, " tokens")?;
    let time_scale = match (raw.time_scale, raw.rate) {
        (Some(_), Some(_)) => {
            bail!("load.trace: give time_scale or rate, not both (rate sets the time scale)")
        }
        (Some(t), None) if !(t.is_finite() && t > 0.0 && t <= 1000.0) => {
            bail!("load.trace.time_scale is {t}: use a factor above 0, at most 1000")
        }
        (Some(t), None) => Some(t),
        (None, Some(r)) if !(MIN_RATE..=MAX_RATE).contains(&r) => {
            bail!("load.trace.rate is {r}: use {MIN_RATE}..={MAX_RATE} requests/s")
        }
        _ => None,
    };
    let Parsed {
        format,
        entries: list,
        failed,
    } = parse(&text, &shown, format, block_size)?;
    let start = raw.start.unwrap_or(0);
    ensure!(
        list.len() >= start.saturating_add(needed),
        "load.trace: {shown} has {} entries; from entry {start} the run needs {needed} (load.samples or load.max_samples): lower them, or start earlier",
        list.len()
    );
    let mut spec = TraceSpec {
        file: file.to_string(),
        format,
        sha256: short_hash(&text),
        entries: list.len(),
        failed,
        block_size,
        time_scale: time_scale.unwrap_or(1.0),
        start,
        list: Arc::new(list),
    };
    if let Some(r) = raw.rate {
        // the scale that makes the measured window's mean rate r
        let natural = spec.rate(needed);
        spec.time_scale = if natural.is_finite() && needed > 1 {
            natural / r
        } else {
            1.0
        };
    }
    Ok(spec)
}

/// What [`parse`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub format: TraceFormat,
    pub entries: Vec<TraceEntry>,
    /// BurstGPT's failed requests (`Response tokens` 0), left out.
    pub failed: usize,
}

/// Parses a trace's text (`name` labels messages). `format`: given, or `None` to tell it from
/// the first line (`{`: Mooncake; a header with `ContextTokens`: Azure; with `Request tokens`:
/// BurstGPT).
///
/// Errors: the first bad line as `name:line: what is wrong`; no entries; more than
/// [`MAX_TRACE_ENTRIES`]; times that go back.
pub fn parse(
    text: &str,
    name: &str,
    format: Option<TraceFormat>,
    block_size: u32,
) -> Result<Parsed, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let header = first.to_ascii_lowercase();
    let format = match format {
        Some(f) => f,
        None if first.trim_start().starts_with('{') => TraceFormat::Mooncake,
        None if header.contains("contexttokens") => TraceFormat::Azure,
        None if header.contains("request tokens") => TraceFormat::Burstgpt,
        None => bail!("{name}:1: neither a Mooncake JSONL line nor a CSV header of Azure (TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT (Timestamp,Model,Request tokens,Response tokens,...); set load.trace.format"),
    };
    let mut out: Vec<TraceEntry> = Vec::new();
    let mut failed = 0;
    let mut origin: Option<f64> = None;
    let mut columns: Option<[usize; 3]> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{name}:{}", i + 1);
        let parsed = match (format, format.columns(), columns) {
            (_, None, _) => mooncake(line, block_size),
            (_, Some(names), None) => {
                columns = Some(csv_header(line, names).at(at())?);
                continue;
            }
            (TraceFormat::Burstgpt, _, Some(c)) => burstgpt(line, c),
            (_, _, Some(c)) => azure(line, c),
        };
        let Some((t, mut e)) = parsed.at(at())? else {
            failed += 1;
            continue;
        };
        ensure!(
            out.len() < MAX_TRACE_ENTRIES,
            "{name}: more than {MAX_TRACE_ENTRIES} entries; keep the part to replay (e.g. `head -n {MAX_TRACE_ENTRIES}`)"
        );
        let t0 = *origin.get_or_insert(t);
        e.at_ms = t - t0;
        if let Some(prev) = out.last() {
            ensure!(
                e.at_ms >= prev.at_ms,
                "{}: the time goes back ({} ms before the line above); a trace is in arrival order",
                at(),
                crate::units::Num(prev.at_ms - e.at_ms)
            );
        }
        out.push(e);
    }
    ensure!(
        !out.is_empty(),
        "{name}: holds no requests{}",
        if failed > 0 {
            format!(" ({failed} failed ones, `Response tokens` 0, left out)")
        } else {
            String::new()
        }
    );
    Ok(Parsed {
        format,
        entries: out,
        failed,
    })
}

/// A line's `hash_ids` (none: empty), one per block of `block_size` tokens of its
/// `input_length` tokens; `fix`: what to do when their count does not fit.
pub(super) fn hash_ids(
    v: &Value,
    input: u64,
    block_size: u32,
    fix: &str,
) -> Result<Vec<u64>, Invalid> {
    let hash_ids: Vec<u64> = match v.get("hash_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|h| h.as_u64().ok_or("`hash_ids` must hold whole numbers >= 0"))
            .collect::<Result<_, _>>()?,
        Some(_) => bail!("`hash_ids` must be an array of whole numbers"),
    };
    let blocks = input.div_ceil(u64::from(block_size));
    ensure!(
        hash_ids.is_empty() || hash_ids.len() as u64 == blocks,
        "{} hash_ids for input_length {input}: blocks of {block_size} tokens need {blocks} ({fix})",
        hash_ids.len()
    );
    Ok(hash_ids)
}

/// A whole number at `key` of a JSON line, in 0..=`max`.
pub(super) fn length(v: Option<&Value>, key: &str, max: u64) -> Result<u64, Invalid> {
    match v.and_then(Value::as_u64) {
        Some(n) if n <= max => Ok(n),
        _ => bail!(
            "`{key}` must be a whole number in 0..={max}, not {}",
            v.map_or("nothing".to_string(), |v| v.to_string())
        ),
    }
}

/// One Mooncake line: (timestamp ms, entry).
fn mooncake(line: &str, block_size: u32) -> Result<Option<(f64, TraceEntry)>, Invalid> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        format!("not a JSON object ({e}); a Mooncake trace line is {{\"timestamp\": ms, \"input_length\": N, \"output_length\": M, \"hash_ids\": [...]}}")
    })?;
    let has = |k: &str| v.get(k).is_some_and(|x| !x.is_null());
    // AIPerf's mooncake_trace sessions: each turn is sent `delay` ms after the previous turn of
    // its session completes, with the session's history; its arrival depends on the server's
    // answers, so it is not a time this open loop can replay: request.conversation replays them
    let session = !has("timestamp") && (has("session_id") || has("delay"));
    ensure!(!session, "a line with `session_id` or `delay` and no `timestamp` is a turn of an AIPerf mooncake_trace session, which AIPerf sends `delay` ms after the previous turn of its session completes: its arrival depends on the server's answers, so it is not a time in the file, and load.trace replays fixed arrival times only. Replay the sessions closed loop with `request.conversation: {{file: <this file>, turns: N}}` (each turn `delay` ms after the previous answer, with the session's history; load.trace left out), or give each line a `timestamp` in ms");
    let text = ["text_input", "messages", "payload"]
        .into_iter()
        .find(|k| has(k) && !has("input_length"));
    if let Some(k) = text {
        bail!("a line with `{k}` and no `input_length` (AIPerf's exact-payload trace): load.trace sends a synthetic prompt of `input_length` tokens, not a given text; give each line `input_length` (tokens; `{k}` is then ignored), or send the texts as a prompt set (request.prompt_set, lines {{\"text\": ...}}) at load.rate");
    }
    let t = v
        .get("timestamp")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| match v.get("timestamp") {
            None => "no `timestamp`: load.trace replays each line at its `timestamp` (ms from the trace's start); a file without times (AIPerf sends such lines at its request rate or concurrency) has no arrivals to replay: give each line a `timestamp`, or send it as a prompt set at load.rate".to_string(),
            Some(x) => format!("`timestamp` must be a number of ms >= 0, not {x}"),
        })?;
    let input = length(
        v.get("input_length"),
        "input_length",
        u64::from(MAX_PROMPT_TOKENS),
    )?;
    ensure!(input > 0, "`input_length` is 0: a request needs a prompt");
    let output = length(v.get("output_length"), "output_length", MAX_TRACE_OUTPUT)?;
    let hash_ids = hash_ids(
        &v,
        input,
        block_size,
        "set load.trace.block_size to the trace's",
    )?;
    Ok(Some((
        t,
        TraceEntry {
            at_ms: 0.0,
            input_tokens: input as u32,
            output_tokens: output.max(1) as u32,
            hash_ids,
        },
    )))
}

/// A CSV header: the columns of `names` (time, prompt tokens, output tokens), in any order,
/// compared without case or surrounding quotes.
fn csv_header(line: &str, names: [&str; 3]) -> Result<[usize; 3], Invalid> {
    let cols: Vec<String> = line
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let find = |n: &str| {
        cols.iter()
            .position(|c| *c == n.to_ascii_lowercase())
            .ok_or_else(|| {
                format!(
                    "the header has no `{n}` column; this format's header names {}",
                    names.join(", ")
                )
            })
    };
    Ok([find(names[0])?, find(names[1])?, find(names[2])?])
}

/// The fields of a CSV line (no field of these traces holds a comma or a quote).
fn fields(line: &str) -> Vec<&str> {
    line.split(',')
        .map(|f| f.trim().trim_matches('"'))
        .collect()
}

/// A whole number of tokens in 0..=`max` (`key`: the column, for messages).
fn tokens(s: &str, key: &str, max: u64) -> Result<u64, Invalid> {
    s.parse::<u64>()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| format!("`{key}` must be a whole number in 0..={max}, not `{s}`").into())
}

/// One Azure CSV line: (timestamp ms, entry).
fn azure(line: &str, c: [usize; 3]) -> Result<Option<(f64, TraceEntry)>, Invalid> {
    let f = fields(line);
    let get = |k: usize| f.get(k).copied().ok_or("fewer columns than the header");
    let t = azure_time(get(c[0])?)?;
    let input = tokens(get(c[1])?, "ContextTokens", u64::from(MAX_PROMPT_TOKENS))?;
    ensure!(input > 0, "`ContextTokens` is 0: a request needs a prompt");
    let output = tokens(get(c[2])?, "GeneratedTokens", MAX_TRACE_OUTPUT)?;
    Ok(Some((t, entry(input, output))))
}

/// One BurstGPT CSV line: (timestamp ms, entry); `None` for a failed request (`Response
/// tokens` 0: the release's files other than `*_without_fails_*` keep them).
fn burstgpt(line: &str, c: [usize; 3]) -> Result<Option<(f64, TraceEntry)>, Invalid> {
    let f = fields(line);
    let get = |k: usize| f.get(k).copied().ok_or("fewer columns than the header");
    let s = get(c[0])?;
    let t = s
        .parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| {
            format!("`Timestamp` must be seconds from the trace's start (>= 0), not `{s}`")
        })?;
    let input = tokens(get(c[1])?, "Request tokens", u64::from(MAX_PROMPT_TOKENS))?;
    ensure!(input > 0, "`Request tokens` is 0: a request needs a prompt");
    let output = tokens(get(c[2])?, "Response tokens", MAX_TRACE_OUTPUT)?;
    Ok((output > 0).then(|| (t * 1000.0, entry(input, output))))
}

/// An entry without blocks (every prompt its own text); output 0 asks 1.
fn entry(input: u64, output: u64) -> TraceEntry {
    TraceEntry {
        at_ms: 0.0,
        input_tokens: input as u32,
        output_tokens: output.max(1) as u32,
        hash_ids: Vec::new(),
    }
}

/// `2023-11-16 18:15:46.6805900` (the 2023 release: no zone, UTC) or `2024-05-10
/// 00:00:00.009930+00:00` (the 2024 release: a UTC offset, `+HH:MM`, `-HH:MM`, `+HHMM` or `Z`),
/// `T` or a space between date and time, up to 9 fraction digits or none, as ms since the Unix
/// epoch. Also a number since the epoch ([`epoch_ms`]): seconds (`1700158546.68059`), or ms
/// when it has 13 whole digits (`1700158546680`).
pub fn azure_time(s: &str) -> Result<f64, Invalid> {
    let bad = || {
        Invalid::from(format!(
            "TIMESTAMP `{s}` is not like 2023-11-16 18:15:46.6805900, 2024-05-10 00:00:00.009930+00:00, seconds since the Unix epoch (1700158546.68059, up to 10 whole digits) or ms since it (1700158546680, 13 whole digits)"
        ))
    };
    if let Some(ms) = epoch_ms(s.trim()) {
        return ms.ok_or_else(bad);
    }
    let (date, time) = s.trim().split_once([' ', 'T']).ok_or_else(bad)?;
    let (time, offset_min) = split_zone(time).ok_or_else(bad)?;
    let d: Vec<&str> = date.split('-').collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let t: Vec<&str> = hms.split(':').collect();
    let shaped = d.len() == 3 && t.len() == 3 && frac.len() <= 9;
    if !shaped || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n = |x: &str| x.parse::<u32>().map_err(|_| bad());
    let month = time::Month::try_from(n(d[1])? as u8).map_err(|_| bad())?;
    let day = time::Date::from_calendar_date(n(d[0])? as i32, month, n(d[2])? as u8)
        .map_err(|_| bad())?;
    let (h, m, sec) = (n(t[0])?, n(t[1])?, n(t[2])?);
    if h > 23 || m > 59 || sec > 60 {
        return Err(bad());
    }
    let frac_s = if frac.is_empty() {
        0.0
    } else {
        frac.parse::<f64>().map_err(|_| bad())? / 10f64.powi(frac.len() as i32)
    };
    let days = f64::from(day.to_julian_day() - 2_440_588);
    let secs = f64::from(h * 3600 + m * 60 + sec) - f64::from(offset_min) * 60.0;
    // whole seconds exact in f64; the fraction added last (ms to about 1 µs at today's dates)
    Ok((days * 86_400.0 + secs) * 1000.0 + frac_s * 1000.0)
}

/// A plain number (digits, at most one `.` and fraction digits), as ms since the Unix epoch:
/// `None` when `s` is not one; `Some(None)` when its magnitude is ambiguous. Up to 10 whole
/// digits are seconds (10 digits reach 2286); 13 are ms (2001 to 2286); 11, 12 or more than 13
/// would be seconds after the year 5000 or ms before 1973, and are refused.
fn epoch_ms(s: &str) -> Option<Option<f64>> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) {
        return None;
    }
    let n = whole.parse::<u64>().ok().map(|n| n as f64);
    let f = if frac.is_empty() {
        0.0
    } else {
        format!("0.{frac}").parse::<f64>().unwrap_or(0.0)
    };
    // the whole part exact in f64, the fraction added last
    Some(match whole.trim_start_matches('0').len() {
        0..=10 => n.map(|n| n * 1000.0 + f * 1000.0),
        13 => n.map(|n| n + f),
        _ => None,
    })
}

/// A time of day and its zone's offset from UTC, minutes: `18:15:46.1` (none: 0),
/// `...Z` (0), `...+02:00` / `...-0700` / `...+05` (the offset). `None`: a malformed offset.
fn split_zone(time: &str) -> Option<(&str, i32)> {
    if let Some(t) = time.strip_suffix(['Z', 'z']) {
        return Some((t, 0));
    }
    let Some(k) = time.rfind(['+', '-']) else {
        return Some((time, 0));
    };
    let (t, zone) = time.split_at(k);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    let ok = matches!(digits.len(), 2 | 4) && digits.bytes().all(|b| b.is_ascii_digit());
    if !ok {
        return None;
    }
    let hours: i32 = digits[..2].parse().ok()?;
    let minutes: i32 = digits
        .get(2..)
        .filter(|m| !m.is_empty())
        .map_or(Some(0), |m| m.parse().ok())?;
    (hours <= 23 && minutes <= 59).then_some((t, sign * (hours * 60 + minutes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOONCAKE: &str = "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n{\"timestamp\": 30535, \"input_length\": 6472, \"output_length\": 26, \"hash_ids\": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}\n{\"timestamp\": 32160, \"input_length\": 100, \"output_length\": 0}\n";

    #[test]
    fn mooncake_by_hand() {
        let Parsed {
            format: f,
            entries: e,
            ..
        } = parse(MOONCAKE, "m.jsonl", None, 512).unwrap();
        assert_eq!(f, TraceFormat::Mooncake);
        assert_eq!(e.len(), 3);
        // times from the first entry: 0, 3053, 4678 ms
        assert_eq!(
            e.iter().map(|x| x.at_ms).collect::<Vec<_>>(),
            [0.0, 3053.0, 4678.0]
        );
        // 6955 tokens = 13 full blocks of 512 + 299: 14 hash ids
        assert_eq!((e[0].input_tokens, e[0].hash_ids.len()), (6955, 14));
        assert_eq!(e[1].hash_ids[..12], e[0].hash_ids[..12]);
        assert_eq!(e[2].output_tokens, 1);
        let err = parse(MOONCAKE, "m.jsonl", None, 256).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "m.jsonl:1: 14 hash_ids for input_length 6955: blocks of 256 tokens need 28"
            ),
            "{err}"
        );
    }

    /// AIPerf's mooncake_trace as its docs give it: session turns (`session_id`, `delay` after
    /// the previous turn completes) are not arrival times: load.trace sends them to
    /// request.conversation, which replays them (src/config/sessions.rs); exact-text lines
    /// (`text_input`) are refused, each naming `file:line`, what load.trace replays and what
    /// to do; a line with a `timestamp` is replayed at it whatever else it holds.
    #[test]
    fn aiperf_sessions_go_to_request_conversation_and_texts_are_refused() {
        let e = |t: &str| parse(t, "a.jsonl", None, 512).unwrap_err().to_string();
        let first = "{\"timestamp\": 0, \"input_length\": 300, \"output_length\": 40}\n";
        // a first turn (no delay) and a later one (with delay), on line 2
        for turn in [
            "{\"session_id\": \"abc-123\", \"input_length\": 300, \"output_length\": 40}",
            "{\"session_id\": \"abc-123\", \"delay\": 2, \"input_length\": 150, \"output_length\": 20}",
            "{\"delay\": 2, \"input_length\": 150, \"output_length\": 20}",
        ] {
            let m = e(&format!("{first}{turn}\n"));
            assert!(m.starts_with("a.jsonl:2: a line with `session_id` or `delay` and no `timestamp` is a turn of an AIPerf mooncake_trace session, which AIPerf sends `delay` ms after the previous turn of its session completes"), "{m}");
            assert!(m.contains("give each line a `timestamp` in ms"), "{m}");
            assert!(
                m.contains("Replay the sessions closed loop with `request.conversation: {file: <this file>, turns: N}`"),
                "{m}"
            );
        }
        let m = e("{\"text_input\": \"What is the capital of France?\", \"output_length\": 20}\n");
        assert!(m.starts_with("a.jsonl:1: a line with `text_input` and no `input_length` (AIPerf's exact-payload trace)"), "{m}");
        assert!(m.contains("give each line `input_length`"), "{m}");
        let m = e("{\"input_length\": 300, \"output_length\": 40}\n");
        assert!(
            m.starts_with(
                "a.jsonl:1: no `timestamp`: load.trace replays each line at its `timestamp`"
            ),
            "{m}"
        );
        let m = e("{\"timestamp\": \"5\", \"input_length\": 300, \"output_length\": 40}\n");
        assert!(
            m.starts_with("a.jsonl:1: `timestamp` must be a number of ms >= 0, not \"5\""),
            "{m}"
        );
        // with a timestamp, session_id and text_input are not read: arrivals 0 and 1500 ms
        let ok = "{\"timestamp\": 1000, \"session_id\": \"a\", \"input_length\": 300, \"output_length\": 40}\n{\"timestamp\": 2500, \"session_id\": \"a\", \"text_input\": \"hi\", \"input_length\": 150, \"output_length\": 20}\n";
        let p = parse(ok, "a.jsonl", None, 512).unwrap();
        let got: Vec<(f64, u32)> = p
            .entries
            .iter()
            .map(|x| (x.at_ms, x.input_tokens))
            .collect();
        assert_eq!(got, [(0.0, 300), (1500.0, 150)]);
    }

    #[test]
    fn azure_by_hand() {
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:16:00.0000000,879,0\n";
        let Parsed {
            format: f,
            entries: e,
            ..
        } = parse(csv, "a.csv", None, 512).unwrap();
        assert_eq!(f, TraceFormat::Azure);
        // 4.314579 s, then 13.31941 s after the first
        let want = [0.0, 4314.579, 13319.41];
        for (x, w) in e.iter().zip(want) {
            assert!((x.at_ms - w).abs() < 1e-3, "{} vs {w}", x.at_ms);
        }
        assert_eq!((e[0].input_tokens, e[0].output_tokens), (374, 44));
        assert_eq!(e[2].output_tokens, 1);
        assert!(e.iter().all(|x| x.hash_ids.is_empty()));
        // 2023-11-16 is day 19677 after 1970-01-01
        assert_eq!(
            azure_time("2023-11-16 00:00:01.5").unwrap(),
            (19677.0 * 86_400.0 + 1.5) * 1000.0
        );
        // the columns by their names, in any order
        let e = parse(
            "GeneratedTokens,TIMESTAMP,ContextTokens\n5,2023-11-16 18:15:46,7\n",
            "a.csv",
            Some(TraceFormat::Azure),
            512,
        )
        .unwrap()
        .entries;
        assert_eq!((e[0].input_tokens, e[0].output_tokens), (7, 5));
    }

    /// The 2024 release (AzureLLMInferenceTrace_code_1week.csv): the same header, times with a
    /// UTC offset and 6 fraction digits, or none.
    #[test]
    fn azure_2024_times_with_an_offset() {
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2048,21\n2024-05-10 00:00:01+00:00,1200,0\n2024-05-10 00:00:01.5+00:00,512,33\n";
        let p = parse(csv, "a.csv", None, 512).unwrap();
        assert_eq!(p.format, TraceFormat::Azure);
        // 1 s - 9.930 ms, 1.5 s - 9.930 ms (to the microsecond: ms since 1970 in an f64)
        let want = [0.0, 990.07, 1490.07];
        for (x, w) in p.entries.iter().zip(want) {
            assert!((x.at_ms - w).abs() < 1e-3, "{} vs {w}", x.at_ms);
        }
        // 2024-05-10 is day 19853 after 1970-01-01; an offset is taken off to UTC
        let midnight = 19853.0 * 86_400_000.0;
        assert_eq!(azure_time("2024-05-10 00:00:00+00:00").unwrap(), midnight);
        assert_eq!(azure_time("2024-05-10T00:00:00Z").unwrap(), midnight);
        assert_eq!(azure_time("2024-05-10 02:30:00+02:30").unwrap(), midnight);
        assert_eq!(azure_time("2024-05-09 17:00:00-0700").unwrap(), midnight);
        assert_eq!(azure_time("2024-05-10 05:00:00+05").unwrap(), midnight);
        for bad in [
            "2024-05-10 00:00:00+1",
            "2024-05-10 00:00:00+24:00",
            "2024-05-10 00:00:00+ab:cd",
        ] {
            assert!(azure_time(bad).is_err(), "{bad}");
        }
    }

    /// A `TIMESTAMP` column of numbers since the Unix epoch: seconds (whole or fractional) or,
    /// with 13 whole digits, ms; offsets from the first row as for datetimes.
    #[test]
    fn azure_epoch_seconds_and_ms() {
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n1700158546.68059,374,44\n1700158550.995169,396,109\n1700158560,879,0\n";
        let p = parse(csv, "a.csv", None, 512).unwrap();
        assert_eq!(p.format, TraceFormat::Azure);
        // 1700158550.995169 - 1700158546.68059 = 4.314579 s; 1700158560 - ... = 13.31941 s
        let want = [0.0, 4314.579, 13319.41];
        for (x, w) in p.entries.iter().zip(want) {
            assert!((x.at_ms - w).abs() < 1e-3, "{} vs {w}", x.at_ms);
        }
        assert_eq!(
            (p.entries[2].input_tokens, p.entries[2].output_tokens),
            (879, 1)
        );
        // 13 digits are ms: 4315 and 13320 ms after the first
        let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n1700158546680,374,44\n1700158550995,396,109\n1700158560000.5,879,1\n";
        let at: Vec<f64> = parse(csv, "a.csv", None, 512)
            .unwrap()
            .entries
            .iter()
            .map(|e| e.at_ms)
            .collect();
        assert_eq!(at, [0.0, 4315.0, 13320.5]);
        // 1700158546 s is 2023-11-16 18:15:46 UTC: 19677 days * 86400 + 65746 s
        assert_eq!(
            azure_time("1700158546").unwrap(),
            azure_time("2023-11-16 18:15:46").unwrap()
        );
        assert_eq!(azure_time("1700158546680").unwrap(), 1_700_158_546_680.0);
        assert_eq!(azure_time("0.5").unwrap(), 500.0);
        // 11, 12 or 14 whole digits: seconds past the year 5000 or ms before 1973, refused
        for bad in [
            "17001585466",
            "170015854668",
            "17001585466800",
            "-1700158546",
            "1.7e9",
            ".5",
        ] {
            let e = azure_time(bad).unwrap_err().to_string();
            assert!(e.contains("seconds since the Unix epoch"), "{bad}: {e}");
        }
        let e = parse(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1700158546,1,1\n170015854668,1,1\n",
            "t.csv",
            None,
            512,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("t.csv:3: TIMESTAMP `170015854668` is not like 2023-11-16 18:15:46.6805900, 2024-05-10 00:00:00.009930+00:00, seconds since the Unix epoch (1700158546.68059, up to 10 whole digits) or ms since it (1700158546680, 13 whole digits)"),
            "{e}"
        );
    }

    /// BurstGPT_1.csv's header and rows: seconds from the first day's midnight; the failed
    /// requests (`Response tokens` 0) left out and counted.
    #[test]
    fn burstgpt_by_hand() {
        let csv = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n118,GPT-4,417,276,693,API log\n118.25,GPT-4,56,1023,1079,Conversation log\n";
        let p = parse(csv, "b.csv", None, 512).unwrap();
        assert_eq!((p.format, p.failed), (TraceFormat::Burstgpt, 1));
        let got: Vec<(f64, u32, u32)> = p
            .entries
            .iter()
            .map(|e| (e.at_ms, e.input_tokens, e.output_tokens))
            .collect();
        assert_eq!(
            got,
            [(0.0, 472, 18), (113_000.0, 417, 276), (113_250.0, 56, 1023)]
        );
        let e = parse(
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,0,472,API log\n",
            "b.csv",
            None,
            512,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "b.csv: holds no requests (1 failed ones, `Response tokens` 0, left out)"
        );
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = |t: &str| parse(t, "t", None, 512).unwrap_err().to_string();
        for (t, starts) in [
            ("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}\n{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n", "t:2: the time goes back (1 ms"),
            ("{\"timestamp\": 1, \"input_length\": -5, \"output_length\": 1}", "t:1: `input_length` must be"),
            ("{\"session_id\": \"s1\", \"input_length\": 5, \"output_length\": 1, \"delay\": 500}", "t:1: a line with `session_id` or `delay` and no `timestamp` is a turn of an AIPerf mooncake_trace session"),
            ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-16 18:15:46,1,1\n", "t:2: TIMESTAMP `2023-13-16 18:15:46` is not like"),
            ("Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,1,1\n4,ChatGPT,1,1\n", "t:3: the time goes back (1000 ms"),
            ("Timestamp,Model,Request tokens,Response tokens\n-5,ChatGPT,1,1\n", "t:2: `Timestamp` must be seconds"),
            ("a,b\n", "t:1: neither a Mooncake"),
        ] {
            assert!(e(t).starts_with(starts), "{t}: {}", e(t));
        }
        assert!(e("TIMESTAMP,ContextTokens,Generated\n").contains("no `GeneratedTokens` column"));
        assert!(e("TIMESTAMP,ContextTokens,GeneratedTokens\n").contains("holds no requests"));
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,300}") {
            let _ = parse(&s, "x", None, 512);
            let _ = parse(&s, "x", Some(TraceFormat::Mooncake), 1);
            let _ = parse(&format!("TIMESTAMP,ContextTokens,GeneratedTokens\n{s}"), "x", None, 512);
            let _ = parse(&format!("Timestamp,Model,Request tokens,Response tokens\n{s}"), "x", None, 512);
            let _ = azure_time(&s);
        }
    }
}
