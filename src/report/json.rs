//! The results JSON (`--output`): [`Results`] serialised as is, pretty-printed with a trailing
//! newline. Its layout is described by `schema/results.schema.json` (JSON Schema 2020-12), whose
//! `$id` carries [`RESULTS_SCHEMA_VERSION`]; a test validates real output against it. Adding an
//! optional field keeps the version; removing or changing one raises it.

use crate::results::{Results, RESULTS_SCHEMA_VERSION};
use std::path::Path;

/// The results JSON text.
pub fn render(r: &Results) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// Reads a results JSON file. Errors name the file and say what is wrong.
pub fn load(path: &Path) -> Result<Results, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{shown}: not JSON ({e}); expected a results file from `perfgate check --output`")
    })?;
    match v.get("schema_version").and_then(|x| x.as_u64()) {
        Some(n) if n == u64::from(RESULTS_SCHEMA_VERSION) => {}
        Some(n) => {
            return Err(format!(
                "{shown}: results schema_version {n}, but this perfgate reads version {RESULTS_SCHEMA_VERSION}; use the perfgate that wrote it"
            ))
        }
        None => {
            return Err(format!(
                "{shown}: no schema_version; expected a results file from `perfgate check --output`"
            ))
        }
    }
    serde_json::from_value(v).map_err(|e| format!("{shown}: not a perfgate results file: {e}"))
}

/// Rank of an overall verdict, most severe first. As in `check`, scenarios without a usable
/// baseline make the verdict NO_BASELINE only when it is an error (exit 2) or when nothing else
/// was compared.
fn rank(v: &str, code: i32) -> u8 {
    match (v, code) {
        ("INTERRUPTED" | "ERROR", _) => 0,
        ("FAIL", _) => 1,
        ("NO_BASELINE", 2) => 2,
        ("WARN", _) => 3,
        ("IMPROVED", _) => 4,
        ("NO_BASELINE", _) => 6,
        _ => 5,
    }
}

/// Merges the results of several checks (e.g. one per CI matrix job) into one: scenarios in
/// order, the most severe verdict, the exit code `check` would give (130 interrupted over 3 over
/// 2-misconfigured over 1 over 2 over 0), Holm families added up. A scenario name seen twice is an error naming both
/// files. `files` are the labels used in messages.
pub fn merge(mut all: Vec<Results>, files: &[String]) -> Result<Results, String> {
    if all.is_empty() {
        return Err("no results file given".into());
    }
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
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
    let mut out = all.remove(0);
    let key = |code: i32, verdict: &str| match (code, verdict) {
        (crate::exit::INTERRUPTED, _) => 5,
        (3, _) => 4,
        (2, "ERROR") => 3,
        (1, _) => 2,
        (2, _) => 1,
        _ => 0,
    };
    for r in all {
        let worse_code = key(r.exit_code, &r.verdict) > key(out.exit_code, &out.verdict);
        let worse_verdict = rank(&r.verdict, r.exit_code) < rank(&out.verdict, out.exit_code);
        if worse_code {
            out.exit_code = r.exit_code;
        }
        if worse_verdict {
            out.verdict = r.verdict.clone();
        }
        out.family_size += r.family_size;
        out.incomplete |= r.incomplete;
        out.created_at = out.created_at.max(r.created_at);
        out.scenarios.extend(r.scenarios);
    }
    Ok(out)
}
