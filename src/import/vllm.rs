//! `vllm bench serve --save-result --save-detailed` JSON (vllm/benchmarks/serve.py of
//! vllm-project/vllm, the `result` dict of `benchmark()`): one object whose per-request lists
//! are parallel, one entry per request: `ttfts` (s), `itls` (a list of gaps per request, s),
//! `input_lens`, `output_lens`, `errors` (`""` for a success), and in newer versions
//! `latencies` (s) and `start_times` (s, `time.perf_counter`). Pure.
//!
//! Without `--save-detailed` the file holds only averaged percentiles (`mean_ttft_ms`,
//! `p99_tpot_ms`, ...): refused. A file `--append-result` wrote several results into is
//! refused too (one scenario is one load).

use super::{failure, time_ms, Format, ImportError, Parsed, Request};
use serde_json::Value;

/// Parses a `--save-detailed` result; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Parsed, ImportError> {
    let shape = |why: String| ImportError::Shape {
        file: file.into(),
        why,
    };
    let mut docs = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let doc = match docs.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(shape(format!("not a vllm bench serve result JSON ({e})"))),
        None => {
            return Err(ImportError::NoRecords {
                file: file.into(),
                why: "the file is empty".into(),
            })
        }
    };
    if docs.next().is_some() {
        return Err(shape(
            "it holds several results (written with --append-result): keep one run per file".into(),
        ));
    }
    let Some(obj) = doc.as_object() else {
        return Err(shape(
            "not a JSON object: not a vllm bench serve result".into(),
        ));
    };
    let Some(ttfts) = obj.get("ttfts") else {
        let why = if obj.keys().any(|k| k.ends_with("_ttft_ms")) {
            "it was saved without --save-detailed, so it holds only averaged percentiles (mean_ttft_ms, p99_ttft_ms, ...); run vllm bench serve with --save-result --save-detailed"
        } else {
            "no `ttfts` list: not a vllm bench serve --save-detailed result"
        };
        return Err(ImportError::NoRecords {
            file: file.into(),
            why: why.into(),
        });
    };
    let list = |key: &str| -> Result<Option<&Vec<Value>>, ImportError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(shape(format!("`{key}` is not a list"))),
        }
    };
    let ttfts = ttfts
        .as_array()
        .ok_or_else(|| shape("`ttfts` is not a list".into()))?;
    let n = ttfts.len();
    let same_len = |key: &str| -> Result<Option<&Vec<Value>>, ImportError> {
        match list(key)? {
            Some(a) if a.len() != n => Err(shape(format!(
                "`{key}` has {} entries and `ttfts` {n}: the lists are one entry per request",
                a.len()
            ))),
            other => Ok(other),
        }
    };
    let itls = same_len("itls")?;
    let inputs = same_len("input_lens")?;
    let outputs = same_len("output_lens")?;
    let errors = same_len("errors")?;
    let latencies = same_len("latencies")?;
    let starts = same_len("start_times")?;
    let mut requests = Vec::with_capacity(n);
    for i in 0..n {
        let at = |key: &str, why: String| ImportError::At {
            file: file.into(),
            at: format!("{key}[{i}]"),
            why,
        };
        let secs = |key: &str, v: &Value| -> Result<f64, ImportError> {
            let x = v
                .as_f64()
                .ok_or_else(|| at(key, format!("{v} is not a number of seconds")))?;
            time_ms(x * 1000.0, "time (s) x 1000").map_err(|w| at(key, w))
        };
        let count = |key: &str, l: Option<&Vec<Value>>| -> Result<Option<u64>, ImportError> {
            l.map(|l| {
                l[i].as_u64()
                    .ok_or_else(|| at(key, format!("{} is not a whole token count", l[i])))
            })
            .transpose()
        };
        let mut r = Request {
            prompt_tokens: count("input_lens", inputs)?,
            ..Request::default()
        };
        if let Some(s) = starts {
            r.start_ms = Some(secs("start_times", &s[i])?);
        }
        let error = errors
            .map(|e| match &e[i] {
                Value::String(s) => Ok(s.clone()),
                Value::Null => Ok(String::new()),
                v => Err(at("errors", format!("{v} is not an error text"))),
            })
            .transpose()?
            .unwrap_or_default();
        if !error.is_empty() {
            r.error = Some(failure(Format::Vllm, None, &error));
            requests.push(r);
            continue;
        }
        let ttft = secs("ttfts", &ttfts[i])?;
        let gaps: Vec<f64> = match itls.map(|l| &l[i]) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(g)) => g
                .iter()
                .map(|v| secs("itls", v))
                .collect::<Result<_, _>>()?,
            Some(v) => return Err(at("itls", format!("{v} is not a list of gaps"))),
        };
        let e2e = match latencies {
            Some(l) => secs("latencies", &l[i])?,
            None => ttft + gaps.iter().sum::<f64>(),
        };
        let out = count("output_lens", outputs)?;
        r.ttft_ms = Some(ttft);
        r.e2e_ms = Some(e2e);
        r.tpot_ms = out
            .filter(|&o| o > 1)
            .map(|o| (e2e - ttft).max(0.0) / (o - 1) as f64);
        r.output_tokens = out;
        r.itl_ms = gaps;
        requests.push(r);
    }
    Ok(Parsed {
        requests,
        left_out: Vec::new(),
        model: obj
            .get("model_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        started_unix_ms: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DETAILED: &str = r#"{"date": "20250101-120000", "backend": "openai-chat", "model_id": "m", "num_prompts": 3,
      "completed": 2, "failed": 1, "mean_ttft_ms": 35.0,
      "input_lens": [32, 32, 32], "output_lens": [5, 0, 3],
      "ttfts": [0.04, 0.0, 0.03],
      "itls": [[0.01, 0.012, 0.011, 0.013], [], [0.02, 0.022]],
      "generated_texts": ["a b c d e", "", "x y z"],
      "errors": ["", "Bad Request", ""]}"#;

    #[test]
    fn per_request_lists_become_requests() {
        let p = parse(DETAILED, "v.json").unwrap();
        assert_eq!(p.requests.len(), 3);
        let r = &p.requests[0];
        assert_eq!(r.ttft_ms, Some(40.0));
        // E2E = TTFT + sum(itls) = 40 + 46 = 86 ms; TPOT = (86 - 40) / (5 - 1) = 11.5 ms
        assert!((r.e2e_ms.unwrap() - 86.0).abs() < 1e-9);
        assert!((r.tpot_ms.unwrap() - 11.5).abs() < 1e-9);
        assert_eq!(r.itl_ms.len(), 4);
        assert!(p.requests[1].error.is_some());
        assert_eq!(p.model.as_deref(), Some("m"));
    }

    #[test]
    fn latencies_and_start_times_are_used_when_present() {
        let t = DETAILED.replace(
            r#""errors""#,
            r#""latencies": [0.1, 0.0, 0.08], "start_times": [100.5, 100.6, 100.7], "errors""#,
        );
        let p = parse(&t, "v.json").unwrap();
        assert_eq!(p.requests[0].e2e_ms, Some(100.0));
        // (100 - 40) / 4
        assert_eq!(p.requests[0].tpot_ms, Some(15.0));
        assert_eq!(p.requests[2].start_ms, Some(100700.0));
    }

    #[test]
    fn a_summary_without_save_detailed_is_refused() {
        let s = r#"{"completed": 10, "mean_ttft_ms": 35.0, "p99_ttft_ms": 50.0}"#;
        let e = parse(s, "v.json").unwrap_err();
        assert!(matches!(e, ImportError::NoRecords { .. }), "{e}");
        assert!(e.to_string().contains("--save-detailed"), "{e}");
        let two = format!("{s}\n{s}\n");
        assert!(parse(&two, "v.json")
            .unwrap_err()
            .to_string()
            .contains("--append-result"));
        let short = DETAILED.replace(r#""output_lens": [5, 0, 3]"#, r#""output_lens": [5, 0]"#);
        let e = parse(&short, "v.json").unwrap_err().to_string();
        assert!(
            e.contains("`output_lens` has 2 entries and `ttfts` 3"),
            "{e}"
        );
        let neg = DETAILED.replace("[0.04, 0.0, 0.03]", "[0.04, 0.0, -0.03]");
        let e = parse(&neg, "v.json").unwrap_err().to_string();
        assert!(e.starts_with("v.json: ttfts[2]: "), "{e}");
    }
}
