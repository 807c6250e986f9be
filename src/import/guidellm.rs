//! GuideLLM's benchmarks file (`--output kind=json` or `kind=yaml`; `GenerativeBenchmarksReport`
//! in src/guidellm/benchmark/schemas of vllm-project/guidellm): `{"metadata", "benchmarks":
//! [{"metrics", "requests": {"successful": [...], "incomplete": [...], "errored": [...]}}]}`,
//! each request a `GenerativeRequestStats` with its computed fields. Pure.
//!
//! Read per request: `request_start_time` (epoch s), `time_to_first_token_ms`,
//! `inter_token_latency_ms`, `request_latency` (s), `prompt_tokens`, `output_tokens`,
//! `response_id`, and an errored request's `info.error`. Left out, and said: `incomplete`
//! requests (cancelled when the benchmark's constraint ended it). A file of several benchmarks
//! (a sweep) is refused: each is another load, and one scenario is one load.

use super::{failure, time_ms, Format, ImportError, Parsed, Request};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Report {
    benchmarks: Option<Vec<Benchmark>>,
}

#[derive(Debug, Deserialize)]
struct Benchmark {
    #[serde(default)]
    requests: Option<Requests>,
    #[serde(default)]
    metrics: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Requests {
    #[serde(default)]
    successful: Vec<Stats>,
    #[serde(default)]
    incomplete: Vec<serde_json::Value>,
    #[serde(default)]
    errored: Vec<Stats>,
}

#[derive(Debug, Deserialize)]
struct Stats {
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    request_start_time: Option<f64>,
    #[serde(default)]
    request_latency: Option<f64>,
    #[serde(default)]
    time_to_first_token_ms: Option<f64>,
    #[serde(default)]
    inter_token_latency_ms: Option<f64>,
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    info: Option<Info>,
}

#[derive(Debug, Deserialize)]
struct Info {
    #[serde(default)]
    error: Option<String>,
}

/// Parses a GuideLLM benchmarks file (`yaml`: its YAML output); `file` names it in errors.
pub fn parse(text: &str, file: &str, yaml: bool) -> Result<Parsed, ImportError> {
    let shape = |why: String| ImportError::Shape {
        file: file.into(),
        why,
    };
    let report: Report = if yaml {
        serde_saphyr::from_str(text)
            .map_err(|e| shape(format!("not a GuideLLM benchmarks YAML file ({e})")))?
    } else {
        serde_json::from_str(text)
            .map_err(|e| shape(format!("not a GuideLLM benchmarks JSON file ({e})")))?
    };
    let benchmarks = report.benchmarks.ok_or_else(|| {
        shape("no `benchmarks` list: not a GuideLLM benchmarks file (--output kind=json or kind=yaml; the CSV and HTML outputs hold no requests)".into())
    })?;
    let b = match benchmarks.len() {
        1 => benchmarks.into_iter().next().unwrap_or_else(|| unreachable!()),
        0 => {
            return Err(ImportError::NoRecords {
                file: file.into(),
                why: "its `benchmarks` list is empty".into(),
            })
        }
        n => {
            return Err(shape(format!(
                "{n} benchmarks (a sweep or several rates): each is another load, and a scenario gates one; run GuideLLM with one profile (e.g. --profile kind=concurrent,streams=8) per file"
            )))
        }
    };
    let Some(reqs) = b.requests else {
        return Err(ImportError::NoRecords {
            file: file.into(),
            why: "benchmarks[0] has no `requests` (only its summary `metrics`)".into(),
        });
    };
    let mut requests = Vec::with_capacity(reqs.successful.len() + reqs.errored.len());
    let mut first_start: Option<f64> = None;
    for (group, list) in [("successful", &reqs.successful), ("errored", &reqs.errored)] {
        for (i, s) in list.iter().enumerate() {
            let at = |why: String| ImportError::At {
                file: file.into(),
                at: format!("benchmarks[0].requests.{group}[{i}]"),
                why,
            };
            let r = request(s, group == "errored").map_err(at)?;
            if let Some(t) = r.start_ms {
                first_start = Some(first_start.map_or(t, |f: f64| f.min(t)));
            }
            requests.push(r);
        }
    }
    let mut left_out = Vec::new();
    if !reqs.incomplete.is_empty() {
        left_out.push(format!(
            "{} incomplete request(s) (GuideLLM cancelled them when the benchmark's constraint ended it)",
            reqs.incomplete.len()
        ));
    }
    let total = |k: &str| {
        b.metrics
            .as_ref()
            .and_then(|m| m.pointer(&format!("/request_totals/{k}")))
            .and_then(serde_json::Value::as_u64)
    };
    for (k, have) in [
        ("successful", reqs.successful.len()),
        ("errored", reqs.errored.len()),
    ] {
        if let Some(t) = total(k).filter(|&t| t > have as u64) {
            left_out.push(format!(
                "GuideLLM kept {have} of its {t} {k} requests (its sampling, --metrics sample_size)"
            ));
        }
    }
    Ok(Parsed {
        requests,
        left_out,
        model: None,
        started_unix_ms: first_start,
    })
}

/// One `GenerativeRequestStats`.
fn request(s: &Stats, errored: bool) -> Result<Request, String> {
    let opt = |v: Option<f64>, k: f64, what: &str| v.map(|x| time_ms(x * k, what)).transpose();
    let start_ms = match s.request_start_time {
        Some(t) if t.is_finite() && t >= 0.0 => Some(t * 1000.0),
        Some(t) => return Err(format!("request_start_time = {t} is not a time")),
        None => None,
    };
    let mut r = Request {
        start_ms,
        prompt_tokens: s.prompt_tokens,
        id: s.response_id.clone().or_else(|| s.request_id.clone()),
        ..Request::default()
    };
    if errored {
        let text = s
            .info
            .as_ref()
            .and_then(|i| i.error.clone())
            .unwrap_or_else(|| "errored (no error text)".into());
        r.error = Some(failure(Format::Guidellm, status_in(&text), &text));
        return Ok(r);
    }
    r.ttft_ms = opt(s.time_to_first_token_ms, 1.0, "time_to_first_token_ms")?;
    r.tpot_ms = opt(s.inter_token_latency_ms, 1.0, "inter_token_latency_ms")?;
    r.e2e_ms = opt(s.request_latency, 1000.0, "request_latency (s) x 1000")?;
    r.output_tokens = s.output_tokens;
    if r.ttft_ms.is_none() && r.e2e_ms.is_none() {
        return Err(
            "a successful request without time_to_first_token_ms or request_latency: nothing to gate"
                .into(),
        );
    }
    Ok(r)
}

/// The HTTP status an httpx error text names (`Server error '503 Service Unavailable'`).
fn status_in(text: &str) -> Option<u16> {
    let i = text.find("error '")? + "error '".len();
    text.get(i..i + 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"{"metadata": {"version": 2, "guidellm_version": "0.8.1"},
      "benchmarks": [{"type_": "generative_benchmark",
        "metrics": {"request_totals": {"successful": 2, "errored": 1, "incomplete": 1, "total": 4}},
        "requests": {
          "successful": [
            {"request_id": "a", "response_id": "chatcmpl-1", "info": {"error": null},
             "request_start_time": 1759813207.5, "request_end_time": 1759813207.8,
             "request_latency": 0.3, "prompt_tokens": 32, "output_tokens": 11,
             "time_to_first_token_ms": 40.0, "time_per_output_token_ms": 27.2727,
             "inter_token_latency_ms": 25.5},
            {"request_id": "b", "response_id": "chatcmpl-2", "info": {"error": null},
             "request_start_time": 1759813207.25, "request_latency": 0.2,
             "prompt_tokens": 32, "output_tokens": 6,
             "time_to_first_token_ms": 30.0, "inter_token_latency_ms": 34.0}],
          "incomplete": [{"request_id": "c"}],
          "errored": [{"request_id": "d", "request_start_time": 1759813207.9,
             "info": {"error": "HTTPStatusError: Server error '503 Service Unavailable' for url"}}]}}]}"#;

    #[test]
    fn requests_read_their_computed_fields() {
        let p = parse(ONE, "g.json", false).unwrap();
        assert_eq!(p.requests.len(), 3);
        let r = &p.requests[0];
        assert_eq!(r.ttft_ms, Some(40.0));
        assert_eq!(r.tpot_ms, Some(25.5));
        assert_eq!(r.e2e_ms, Some(300.0));
        assert_eq!(r.start_ms, Some(1759813207500.0));
        assert_eq!((r.prompt_tokens, r.output_tokens), (Some(32), Some(11)));
        let e = p.requests[2].error.as_ref().unwrap();
        assert_eq!(e.status, Some(503));
        assert_eq!(e.class, crate::record::FailureClass::HttpStatus);
        assert_eq!(p.started_unix_ms, Some(1759813207250.0));
        assert_eq!(p.left_out.len(), 1, "{:?}", p.left_out);
    }

    #[test]
    fn yaml_reads_the_same() {
        let y = "benchmarks:\n  - requests:\n      successful:\n        - request_start_time: 10.0\n          time_to_first_token_ms: 40.0\n          inter_token_latency_ms: 25.5\n          request_latency: 0.3\n          output_tokens: 11\n      errored: []\n      incomplete: []\n";
        let p = parse(y, "g.yaml", true).unwrap();
        assert_eq!(p.requests[0].ttft_ms, Some(40.0));
        assert_eq!(p.requests[0].e2e_ms, Some(300.0));
    }

    #[test]
    fn summaries_and_sweeps_are_refused() {
        let no_requests = r#"{"benchmarks": [{"metrics": {"time_to_first_token_ms": {"successful": {"mean": 40}}}}]}"#;
        let e = parse(no_requests, "g.json", false).unwrap_err();
        assert!(matches!(e, ImportError::NoRecords { .. }), "{e}");
        let two = r#"{"benchmarks": [{"requests": {}}, {"requests": {}}]}"#;
        let e = parse(two, "g.json", false).unwrap_err().to_string();
        assert!(e.contains("2 benchmarks"), "{e}");
        let bad = ONE.replace(
            "\"time_to_first_token_ms\": 30.0",
            "\"time_to_first_token_ms\": -30.0",
        );
        let e = parse(&bad, "g.json", false).unwrap_err().to_string();
        assert!(
            e.contains("benchmarks[0].requests.successful[1]: time_to_first_token_ms = -30 ms"),
            "{e}"
        );
    }
}
