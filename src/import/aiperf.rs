//! AIPerf's `profile_export.jsonl` (docs/tutorials/working-with-profile-exports.md of
//! ai-dynamo/aiperf): one `MetricRecordInfo` a line, `{"metadata": {...}, "metrics": {NAME:
//! {"value": V, "unit": U}}, "error": null | {"code", "type", "message"}}`. Pure.
//!
//! Read: `metadata.request_start_ns` (epoch ns), `x_request_id`; metrics `time_to_first_token`,
//! `inter_token_latency`, `request_latency`, `inter_chunk_latency` (a list), the token counts
//! `output_sequence_length` (else `output_token_count`) and `input_sequence_length`; `error`.
//! Left out, and said: requests AIPerf cancelled on purpose (`was_cancelled`,
//! `--request-cancellation-rate`) and records of a phase other than `profiling` (a warmup).

use super::{failure, time_ms, Format, ImportError, Parsed, Request};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
struct Line {
    metadata: Option<Metadata>,
    #[serde(default)]
    metrics: Option<BTreeMap<String, MetricValue>>,
    #[serde(default)]
    error: Option<ErrorDetails>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    request_start_ns: Option<f64>,
    #[serde(default)]
    x_request_id: Option<String>,
    #[serde(default)]
    benchmark_phase: Option<String>,
    #[serde(default)]
    was_cancelled: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct MetricValue {
    value: serde_json::Value,
    #[serde(default)]
    unit: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ErrorDetails {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Milliseconds per one of AIPerf's time units.
fn ms_per(unit: &str) -> Option<f64> {
    match unit {
        "ms" => Some(1.0),
        "ns" => Some(1e-6),
        "us" | "µs" => Some(1e-3),
        "s" | "sec" => Some(1000.0),
        _ => None,
    }
}

/// A time metric in ms (`None` when the record does not have it).
fn time_metric(m: &BTreeMap<String, MetricValue>, name: &str) -> Result<Option<f64>, String> {
    let Some(v) = m.get(name) else {
        return Ok(None);
    };
    let unit = v.unit.as_deref().unwrap_or("ms");
    let k = ms_per(unit).ok_or_else(|| format!("metric {name} has unit `{unit}`, not a time"))?;
    match v.value.as_f64() {
        Some(x) => time_ms(x * k, name).map(Some),
        None if v.value.is_null() => Ok(None),
        None => Err(format!("metric {name}: value {} is not a number", v.value)),
    }
}

/// The per-chunk gaps of `inter_chunk_latency`, ms.
fn gaps(m: &BTreeMap<String, MetricValue>) -> Result<Vec<f64>, String> {
    let name = "inter_chunk_latency";
    let Some(v) = m.get(name) else {
        return Ok(Vec::new());
    };
    let unit = v.unit.as_deref().unwrap_or("ms");
    let k = ms_per(unit).ok_or_else(|| format!("metric {name} has unit `{unit}`, not a time"))?;
    let list = v
        .value
        .as_array()
        .ok_or_else(|| format!("metric {name}: value is not a list of gaps"))?;
    list.iter()
        .enumerate()
        .map(|(i, g)| {
            let x = g
                .as_f64()
                .ok_or_else(|| format!("metric {name}[{i}]: {g} is not a number"))?;
            time_ms(x * k, &format!("{name}[{i}]"))
        })
        .collect()
}

/// A token count metric (a whole number, not negative).
fn count_metric(m: &BTreeMap<String, MetricValue>, name: &str) -> Result<Option<u64>, String> {
    match m.get(name) {
        None => Ok(None),
        Some(v) if v.value.is_null() => Ok(None),
        Some(v) => v
            .value
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("metric {name}: {} is not a whole token count", v.value)),
    }
}

/// Whether a JSON document is AIPerf's aggregated statistics (`profile_export_aiperf.json`:
/// per metric `{"unit", "avg", "p50", ...}`).
fn is_aggregate(v: &serde_json::Value) -> bool {
    let stats = |k: &str| {
        v.get(k)
            .is_some_and(|m| m.get("avg").is_some() || m.get("p50").is_some())
    };
    v.get("metadata").is_none()
        && ["time_to_first_token", "request_latency"]
            .iter()
            .any(|k| stats(k))
}

/// Parses a `profile_export.jsonl`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Parsed, ImportError> {
    // The aggregated JSON (pretty-printed over many lines) or CSV passed by mistake.
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if is_aggregate(&v) {
            return Err(ImportError::NoRecords {
                file: file.into(),
                why: "this is AIPerf's aggregated statistics (profile_export_aiperf.json): pass profile_export.jsonl from the same artifact directory".into(),
            });
        }
    }
    let mut requests = Vec::new();
    let (mut cancelled, mut other_phase) = (0usize, BTreeMap::<String, usize>::new());
    let mut first_start: Option<f64> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |why: String| ImportError::Line {
            file: file.into(),
            line,
            why,
        };
        let rec: Line =
            serde_json::from_str(raw).map_err(|e| bad(format!("not an AIPerf record ({e})")))?;
        let Some(meta) = rec.metadata else {
            if serde_json::from_str::<serde_json::Value>(raw).is_ok_and(|v| is_aggregate(&v)) {
                return Err(ImportError::NoRecords {
                    file: file.into(),
                    why: "this is AIPerf's aggregated statistics (profile_export_aiperf.json): pass profile_export.jsonl from the same artifact directory".into(),
                });
            }
            return Err(bad(
                "no `metadata`: not a record of AIPerf's profile_export.jsonl".into(),
            ));
        };
        if meta.was_cancelled == Some(true) {
            cancelled += 1;
            continue;
        }
        if let Some(p) = meta
            .benchmark_phase
            .as_deref()
            .filter(|p| *p != "profiling")
        {
            *other_phase.entry(p.to_string()).or_default() += 1;
            continue;
        }
        let start_ns = meta
            .request_start_ns
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| bad("metadata.request_start_ns is missing or not a time".into()))?;
        let start_ms = start_ns / 1e6;
        first_start = Some(first_start.map_or(start_ms, |f: f64| f.min(start_ms)));
        let mut req = Request {
            start_ms: Some(start_ms),
            id: meta.x_request_id,
            ..Request::default()
        };
        let metrics = rec.metrics.unwrap_or_default();
        req.prompt_tokens = count_metric(&metrics, "input_sequence_length").map_err(bad)?;
        if let Some(e) = rec.error {
            let text = format!(
                "{}{}",
                e.kind.map(|k| format!("{k}: ")).unwrap_or_default(),
                e.message.unwrap_or_default()
            );
            let status = e.code.and_then(|c| u16::try_from(c).ok());
            req.error = Some(failure(Format::Aiperf, status, &text));
            requests.push(req);
            continue;
        }
        req.ttft_ms = time_metric(&metrics, "time_to_first_token").map_err(bad)?;
        req.e2e_ms = time_metric(&metrics, "request_latency").map_err(bad)?;
        req.tpot_ms = time_metric(&metrics, "inter_token_latency").map_err(bad)?;
        req.itl_ms = gaps(&metrics).map_err(bad)?;
        req.output_tokens = match count_metric(&metrics, "output_sequence_length").map_err(bad)? {
            Some(n) => Some(n),
            None => count_metric(&metrics, "output_token_count").map_err(bad)?,
        };
        if req.ttft_ms.is_none() && req.e2e_ms.is_none() {
            return Err(bad(
                "a successful record without time_to_first_token or request_latency: nothing to gate".into(),
            ));
        }
        requests.push(req);
    }
    let mut left_out = Vec::new();
    if cancelled > 0 {
        left_out.push(format!(
            "{cancelled} request(s) AIPerf cancelled on purpose (was_cancelled, --request-cancellation-rate)"
        ));
    }
    for (phase, n) in other_phase {
        left_out.push(format!("{n} record(s) of AIPerf's `{phase}` phase"));
    }
    Ok(Parsed {
        requests,
        left_out,
        model: None,
        started_unix_ms: first_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"metadata":{"session_num":0,"x_request_id":"r-1","turn_index":0,"request_start_ns":1759813207532900363,"request_ack_ns":1759813207650730976,"request_end_ns":1759813207838764604,"benchmark_phase":"profiling","was_cancelled":false,"cancellation_time_ns":null},"metrics":{"input_sequence_length":{"value":550,"unit":"tokens"},"time_to_first_token":{"value":255.886568,"unit":"ms"},"request_latency":{"value":297.525228,"unit":"ms"},"inter_chunk_latency":{"value":[4.898437,5.316006],"unit":"ms"},"output_sequence_length":{"value":9,"unit":"tokens"},"inter_token_latency":{"value":5.2048325,"unit":"ms"}},"error":null}"#;

    #[test]
    fn a_record_reads_its_documented_fields() {
        let p = parse(LINE, "x.jsonl").unwrap();
        let r = &p.requests[0];
        assert_eq!(r.ttft_ms, Some(255.886568));
        assert_eq!(r.e2e_ms, Some(297.525228));
        assert_eq!(r.tpot_ms, Some(5.2048325));
        assert_eq!(r.itl_ms, vec![4.898437, 5.316006]);
        assert_eq!((r.prompt_tokens, r.output_tokens), (Some(550), Some(9)));
        assert_eq!(r.id.as_deref(), Some("r-1"));
    }

    #[test]
    fn units_other_than_ms_are_converted() {
        let line = LINE.replace(
            r#""time_to_first_token":{"value":255.886568,"unit":"ms"}"#,
            r#""time_to_first_token":{"value":255886568,"unit":"ns"}"#,
        );
        let p = parse(&line, "x.jsonl").unwrap();
        assert!((p.requests[0].ttft_ms.unwrap() - 255.886568).abs() < 1e-9);
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        let text = format!("{LINE}\n\n{{\"metadata\": 3}}\n");
        let e = parse(&text, "x.jsonl").unwrap_err().to_string();
        assert!(e.starts_with("x.jsonl:3: not an AIPerf record"), "{e}");
        let neg = LINE.replace("255.886568", "-3");
        let e = parse(&neg, "x.jsonl").unwrap_err().to_string();
        assert!(e.contains("x.jsonl:1: time_to_first_token = -3 ms"), "{e}");
    }

    #[test]
    fn the_aggregated_statistics_are_refused() {
        let agg = "{\n  \"time_to_first_token\": {\"unit\": \"ms\", \"avg\": 250.1, \"p50\": 249.0},\n  \"request_latency\": {\"unit\": \"ms\", \"avg\": 300.0}\n}\n";
        let e = parse(agg, "agg.json").unwrap_err();
        assert!(matches!(e, ImportError::NoRecords { .. }), "{e}");
        assert!(e.to_string().contains("profile_export_aiperf.json"), "{e}");
    }

    #[test]
    fn cancelled_requests_are_left_out_and_errors_kept() {
        let cancelled = LINE.replace(r#""was_cancelled":false"#, r#""was_cancelled":true"#);
        let failed = r#"{"metadata":{"request_start_ns":1759813207600000000,"benchmark_phase":"profiling","was_cancelled":false},"metrics":{"error_isl":{"value":550,"unit":"tokens"}},"error":{"code":500,"type":"HTTPError","message":"Internal Server Error"}}"#;
        let p = parse(&format!("{LINE}\n{cancelled}\n{failed}\n"), "x").unwrap();
        assert_eq!(p.requests.len(), 2);
        let e = p.requests[1].error.as_ref().unwrap();
        assert_eq!(e.class, crate::record::FailureClass::HttpStatus);
        assert_eq!(e.status, Some(500));
        assert_eq!(p.left_out.len(), 1);
    }
}
