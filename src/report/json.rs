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
    let text = crate::limits::read_text(path, crate::limits::MAX_RESULTS_BYTES)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{shown}: not JSON ({e}); expected a results file from `perfgate check --output`")
    })?;
    crate::limits::check_times(&v).map_err(|e| format!("{shown}: {e}"))?;
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

/// Merges the results of several checks (e.g. one per CI matrix job) into one: scenarios in
/// order, Holm families added up and Holm redone over the union (see [`reholm`]), and the
/// verdict and exit code decided again from the scenarios ([`crate::verdict::decide`]), never
/// taken from the files' `verdict`/`exit_code` fields. The baseline policy is the strictest of
/// the files'. A scenario name seen twice is an error naming both files. `files` are the labels
/// used in messages. A single file is decided again too.
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
        reholm(&mut out);
    }
    out.decide();
    Ok(out)
}

/// Holm over the union of merged shards: each shard adjusted its p-values over its own family
/// only, so a FAIL there may not survive the larger family. Re-adjusts every check's `p_value`
/// over all merged checks (the same family an unsharded check would use), and turns a FAIL whose
/// new Holm p-value is no longer below its `alpha` into WARN, as the gate would have (a FAIL was
/// significant before adjustment and beyond its fail band, hence beyond its warn band). Checks
/// without a recorded `alpha` (older files) keep their verdict. IMPROVED is left as it is (its
/// p-value is not saved; it never changes the exit code).
fn reholm(out: &mut Results) {
    use crate::gate::Verdict;
    let ps: Vec<f64> = out
        .scenarios
        .iter()
        .flat_map(|s| s.checks.iter())
        .filter_map(|c| c.p_value)
        .collect();
    let adj = crate::stats::holm::holm_adjust(&ps);
    for (c, &p) in out
        .scenarios
        .iter_mut()
        .flat_map(|s| s.checks.iter_mut())
        .filter(|c| c.p_value.is_some())
        .zip(adj.iter())
    {
        c.p_holm = Some(p);
        if let (Verdict::Fail, Some(alpha)) = (c.verdict, c.alpha) {
            if p >= alpha {
                c.verdict = Verdict::Warn;
                c.reason = format!(
                    "slowdown beyond the {:.0}% fail tolerance, but not significant over the merged shards' Holm family (Holm p = {p:.3} >= alpha {alpha}): WARN, not FAIL",
                    c.fail * 100.0
                );
            }
        }
    }
}

#[cfg(test)]
mod reholm_tests {
    use super::*;
    use crate::gate::Verdict;

    /// The fixture's `chat-long` scenario alone, its FAIL check given raw p-value `p`.
    fn shard(name: &str, p: f64) -> Results {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.json"),
        )
        .unwrap();
        let mut r: Results = serde_json::from_str(&text).unwrap();
        r.scenarios.retain(|s| s.name == "chat-long");
        let s = &mut r.scenarios[0];
        s.name = name.into();
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
