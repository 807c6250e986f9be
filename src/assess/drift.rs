//! Whether a baseline still measures the same thing as this scenario: configuration changes
//! and metric definitions (known before measuring, [`staleness`]) and the workload the run
//! actually got (known after, [`workload_drift`]).

use crate::baseline::{self, Baseline, BaselineRecord};
use crate::config::metric::Phase;
use crate::config::{Metric, Scenario};
use crate::record::{RequestRecord, TokenSource};
use crate::runner::RunOutput;

/// The leaves that differ between two configurations, as `path: old -> new` (at most 5).
pub fn config_diff(old: &serde_json::Value, new: &serde_json::Value) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(
                        &p,
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        out,
                    );
                }
            }
            _ if a != b => {
                let show = |v: &Value| {
                    let s = v.to_string();
                    if s.chars().count() > 40 {
                        format!("{}…", s.chars().take(40).collect::<String>())
                    } else {
                        s
                    }
                };
                out.push(format!("{path}: {} -> {}", show(a), show(b)));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", old, new, &mut out);
    // the sim's latency settings are not part of the fingerprint
    out.retain(|d| !d.starts_with("endpoint.base_url: \"sim://"));
    out.truncate(5);
    out
}

/// Why a baseline cannot be compared with this scenario at all, if it cannot: it belongs to
/// another scenario, the scenario's configuration changed, or the metric definitions did. Known
/// before measuring.
pub fn staleness(sc: &Scenario, b: &Baseline, hint: &crate::hint::Hint) -> Option<String> {
    if b.scenario.name != sc.name {
        return Some(format!(
            "the file holds the baseline of scenario `{}`, not `{}`",
            b.scenario.name, sc.name
        ));
    }
    if b.scenario.fingerprint != sc.fingerprint {
        if let Some(changed) = prompt_set_change(&b.scenario.config, sc) {
            return Some(format!(
                "{changed}, so the requests are not the ones blessed and nothing was compared; if the change is intended, bless it against the unchanged server (`{}`) and commit the new baseline with the file",
                hint.bless_only(&sc.name)
            ));
        }
        let diff = config_diff(&b.scenario.config, &baseline::public_config(sc));
        return Some(format!(
            "the scenario changed since its baseline was blessed ({}), so nothing was compared; if the change is intended, bless it against the unchanged server (`{}`) and commit the new baseline with the change",
            if diff.is_empty() {
                format!("fingerprint {} vs {}", b.scenario.fingerprint, sc.fingerprint)
            } else {
                diff.join(", ")
            },
            hint.bless_only(&sc.name)
        ));
    }
    if b.metrics_version != baseline::METRICS_VERSION {
        return Some(format!(
            "the baseline uses metrics_version {} and this perfgate {}: bless it again with this perfgate (`{}`) against the unchanged server",
            b.metrics_version,
            baseline::METRICS_VERSION,
            hint.bless_only(&sc.name)
        ));
    }
    None
}

/// When the scenario's prompt-set or trace file is another than the baseline's (same path,
/// other content), what changed: "the prompt set file x changed since its baseline was blessed
/// (sha256 a -> b, 40 -> 41 entries)"; when the same file reads as another number of entries
/// (a perfgate that reads more of its format), that.
fn prompt_set_change(old: &serde_json::Value, sc: &Scenario) -> Option<String> {
    let (section, key, what, file, sha, entries) = match (&sc.request.prompt_set, &sc.load.trace) {
        (Some(p), _) => (
            "request",
            "prompt_set",
            "prompt set",
            &p.file,
            &p.sha256,
            p.entries,
        ),
        (None, Some(t)) => ("load", "trace", "trace", &t.file, &t.sha256, t.entries),
        (None, None) => return None,
    };
    let was = old.get(section)?.get(key)?;
    let was_sha = was.get("sha256")?.as_str()?;
    let was_entries = was.get("entries").and_then(serde_json::Value::as_u64);
    if was.get("file")?.as_str()? != file.as_str() {
        return None;
    }
    if was_sha == sha.as_str() {
        let n = was_entries.filter(|n| *n as usize != entries)?;
        return Some(format!(
            "the {what} file {file} is unchanged (sha256 {sha}) but this perfgate reads {entries} entries from it, not {n} (it reads more of the file's format)"
        ));
    }
    let count = match was_entries {
        Some(n) if n as usize != entries => format!(", {n} -> {entries} entries"),
        _ => String::new(),
    };
    Some(format!(
        "the {what} file {file} changed since its baseline was blessed (sha256 {was_sha} -> {sha}{count})"
    ))
}

/// A difference in the workload between the baseline and this run, found after measuring, and
/// the metrics it makes incomparable. The other metrics and the error rate stay gated.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// The metrics that depend on what drifted.
    pub metrics: Vec<Metric>,
    /// What drifted, with the numbers.
    pub why: DriftWhy,
}

/// What drifted, in pieces: the words, and where the reference and the run are named, so that
/// [`Words`] says it of a baseline and a run or of two arms.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftWhy(Vec<Said>);

/// A piece of a [`DriftWhy`].
#[derive(Debug, Clone, PartialEq)]
enum Said {
    Words(String),
    /// "in the baseline", "in the base arm"
    Reference,
    /// "now", "in the candidate arm"
    Run,
}

impl DriftWhy {
    /// `{lead}{base} <reference>{mid}{now} <run>{tail}`.
    pub(super) fn versus(
        lead: String,
        base: impl std::fmt::Display,
        mid: &str,
        now: impl std::fmt::Display,
        tail: &str,
    ) -> DriftWhy {
        DriftWhy(vec![
            Said::Words(format!("{lead}{base} ")),
            Said::Reference,
            Said::Words(format!("{mid}{now} ")),
            Said::Run,
            Said::Words(tail.to_string()),
        ])
    }

    /// These words in `words`.
    pub fn say(&self, words: Words) -> String {
        let (reference, run) = match words {
            Words::Baseline => ("in the baseline", "now"),
            Words::Arms => ("in the base arm", "in the candidate arm"),
        };
        self.0
            .iter()
            .map(|p| match p {
                Said::Words(w) => w.as_str(),
                Said::Reference => reference,
                Said::Run => run,
            })
            .collect()
    }
}

impl From<String> for DriftWhy {
    fn from(words: String) -> DriftWhy {
        DriftWhy(vec![Said::Words(words)])
    }
}

impl std::fmt::Display for DriftWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.say(Words::Baseline))
    }
}

/// How drift is said: of a baseline and a run, or of two arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    Baseline,
    Arms,
}

impl Words {
    /// The reference named as a subject: "the baseline", "the base arm".
    pub fn reference(self) -> &'static str {
        match self {
            Words::Baseline => "the baseline",
            Words::Arms => "the base arm",
        }
    }
}

impl Drift {
    /// The labels of the metrics this drift removes from those `gated` ("TPOT").
    pub fn gated_labels(&self, gated: &[Metric]) -> Vec<&'static str> {
        self.metrics
            .iter()
            .filter(|m| gated.contains(m))
            .map(|m| m.label())
            .collect()
    }
}

/// The token source most requests used, its count and the number of requests with a source.
fn majority_source(sources: &[TokenSource]) -> Option<(TokenSource, usize, usize)> {
    let total = sources.len();
    // vendor usage is the server's own count too (record.rs `is_reported`)
    let usage = sources.iter().filter(|s| s.is_reported()).count();
    let (src, n) = if usage * 2 > total {
        (TokenSource::Usage, usage)
    } else if (total - usage) * 2 > total {
        (TokenSource::Events, total - usage)
    } else {
        return None;
    };
    Some((src, n, total))
}

fn source_name(t: TokenSource) -> &'static str {
    t.as_str()
}

fn median_of(v: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(f64::total_cmp);
    crate::stats::quantile::quantile_type7(&v, 0.5)
}

/// What drifted in the workload between the baseline and this run (successful requests only):
/// - the median prompt tokens (a different tokenizer, chat template or server): TTFT and E2E;
/// - the median output tokens: TPOT and E2E;
/// - where most requests' output token counts came from (usage or counted events): TPOT. A
///   minority of requests with another source (a proxy dropping the usage chunk now and then)
///   is not a drift when their token counts agree with the others'.
///
/// Never advises a new bless: a run that drifted may also have regressed.
pub fn workload_drift(sc: &Scenario, b: &Baseline, run: &RunOutput) -> Vec<Drift> {
    let mut out = Vec::new();
    let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
    let base_ok: Vec<&BaselineRecord> = b.records().filter(|r| r.error.is_none()).collect();
    // The same prompt gives the same prompt tokens; a cold cache adds a short nonce line.
    let prompt_limit = |bp: f64| match sc.request.cache {
        crate::config::CachePolicy::Warm => 0.0,
        crate::config::CachePolicy::Cold => 0.05 * bp + 16.0,
    };
    let out_limit = if b.workload.fixed_length { 0.0 } else { 0.10 };
    let agrees = |bo: f64, co: f64| (co - bo).abs() <= out_limit * bo + 1e-9;
    let pairs = same_requests(b, run);
    if let Some(p) = &pairs {
        // A varied workload (prompt set): request by request, not median against median (the
        // median of a mix moves with the number of requests).
        out.extend(p.drift(&prompt_limit, out_limit));
    } else {
        let cand_prompt = median_of(ok.iter().filter_map(|r| r.prompt_tokens.map(|t| t as f64)));
        let cand_out = median_of(ok.iter().filter_map(|r| r.output_tokens.map(|t| t as f64)));
        if let (Some(bp), Some(cp)) = (b.workload.prompt_tokens_p50, cand_prompt) {
            if (cp - bp).abs() > prompt_limit(bp) {
                out.push(Drift {
                    metrics: Metric::timing(Phase::Prefill),
                    why: DriftWhy::versus(
                        "median prompt tokens ".into(),
                        bp,
                        " vs ",
                        cp,
                        " (a different tokenizer, chat template or server)",
                    ),
                });
            }
        }
        if let (Some(bo), Some(co)) = (b.workload.output_tokens_p50, cand_out) {
            if !agrees(bo, co) {
                out.push(Drift {
                    metrics: Metric::timing(Phase::Decode),
                    why: DriftWhy::versus("median output tokens ".into(), bo, " vs ", co, ""),
                });
            }
        }
    }
    out.extend(super::cache::drift(sc, b, run));
    let base_sources: Vec<TokenSource> = base_ok.iter().filter_map(|r| r.token_source).collect();
    let cand_sources: Vec<TokenSource> = ok.iter().filter_map(|r| r.token_source).collect();
    if let (false, false) = (base_sources.is_empty(), cand_sources.is_empty()) {
        let bm = majority_source(&base_sources);
        let cm = majority_source(&cand_sources);
        match (bm, cm) {
            (Some((bs, ..)), Some((cs, n, total))) if bs == cs => {
                // A minority counted another way: comparable when its counts agree.
                let majority_out = median_of(
                    ok.iter()
                        .filter(|r| r.token_source == Some(cs))
                        .filter_map(|r| r.output_tokens.map(|t| t as f64)),
                );
                let off = ok
                    .iter()
                    .filter(|r| r.token_source.is_some_and(|s| s != cs))
                    .filter(|r| match (majority_out, r.output_tokens) {
                        (Some(m), Some(t)) => !agrees(m, t as f64),
                        _ => false,
                    })
                    .count();
                if off > 0 {
                    out.push(Drift {
                        metrics: vec![Metric::Tpot],
                        why: format!(
                            "{} of {total} requests counted output tokens from {} instead of {}, and {off} of them got a different count (median {} from {})",
                            total - n,
                            source_name(if cs == TokenSource::Usage { TokenSource::Events } else { TokenSource::Usage }),
                            source_name(cs),
                            majority_out.unwrap_or(0.0),
                            source_name(cs)
                        ).into(),
                    });
                }
            }
            (bm, cm) => {
                let say = |m: Option<(TokenSource, usize, usize)>| match m {
                    Some((s, n, total)) => format!("{} ({n} of {total})", source_name(s)),
                    None => "usage and events equally".to_string(),
                };
                out.push(Drift {
                    metrics: vec![Metric::Tpot],
                    why: DriftWhy::versus(
                        "output tokens were counted from ".into(),
                        say(bm),
                        " but from ",
                        say(cm),
                        "",
                    ),
                });
            }
        }
    }
    out
}

/// A varied workload's requests matched by their index in the run's sequence: the baseline's
/// (its first run: every bless run sends the same sequence) and this run's.
#[derive(Debug, Default)]
struct Pairs {
    /// Requests of the same index that sent different prompts: (index, baseline's id, ours).
    other_prompt: Vec<(u64, String, String)>,
    /// Requests of the same index sent by both.
    matched: usize,
    /// Successful pairs' prompt tokens (baseline, now).
    prompt_tokens: Vec<(f64, f64)>,
    /// Successful pairs' output tokens (baseline, now).
    output_tokens: Vec<(f64, f64)>,
}

/// The pairs when both the baseline and the run recorded what each request sent (a
/// `request.prompt_set`); `None` otherwise.
fn same_requests(b: &Baseline, run: &RunOutput) -> Option<Pairs> {
    let first = b.runs.first()?;
    let base: std::collections::HashMap<u64, &BaselineRecord> = first
        .records
        .iter()
        .filter_map(|r| r.work.as_ref().map(|w| (w.index, r)))
        .collect();
    if base.is_empty() || run.records.iter().all(|r| r.work.is_none()) {
        return None;
    }
    let mut p = Pairs::default();
    for r in &run.records {
        let Some(w) = &r.work else { continue };
        let Some(br) = base.get(&w.index) else {
            continue;
        };
        let Some(bw) = &br.work else { continue };
        p.matched += 1;
        if bw.prompt_id != w.prompt_id {
            p.other_prompt
                .push((w.index, bw.prompt_id.clone(), w.prompt_id.clone()));
            continue;
        }
        if br.error.is_some() || !r.ok() {
            continue;
        }
        if let (Some(x), Some(y)) = (br.prompt_tokens, r.prompt_tokens) {
            p.prompt_tokens.push((x as f64, y as f64));
        }
        if let (Some(x), Some(y)) = (br.output_tokens, r.output_tokens) {
            p.output_tokens.push((x as f64, y as f64));
        }
    }
    Some(p)
}

impl Pairs {
    /// What drifted: other prompts for the same requests (every metric); prompt tokens that
    /// differ beyond `prompt_limit(baseline's)` for more than half the requests (TTFT, E2E);
    /// output tokens beyond `out_limit` (a share) for more than half (TPOT, E2E).
    fn drift(&self, prompt_limit: &dyn Fn(f64) -> f64, out_limit: f64) -> Vec<Drift> {
        let mut out = Vec::new();
        if let Some((i, was, now)) = self.other_prompt.first() {
            out.push(Drift {
                metrics: Metric::ALL.to_vec(),
                why: DriftWhy(vec![
                    Said::Words(format!(
                        "{} of {} requests sent another prompt than the baseline's request of the same index (request {i}: prompt {was} then, {now} ",
                        self.other_prompt.len(),
                        self.matched
                    )),
                    Said::Run,
                    Said::Words("): the prompt set's order or seed changed, so these are other requests".into()),
                ]),
            });
            return out;
        }
        let off = |v: &[(f64, f64)], lim: &dyn Fn(f64) -> f64| {
            v.iter()
                .filter(|(x, y)| (y - x).abs() > lim(*x) + 1e-9)
                .count()
        };
        let median_change =
            |v: &[(f64, f64)]| median_of(v.iter().map(|(x, y)| y - x)).unwrap_or(0.0);
        let p = off(&self.prompt_tokens, prompt_limit);
        if p * 2 > self.prompt_tokens.len() {
            out.push(Drift {
                metrics: Metric::timing(Phase::Prefill),
                why: format!(
                    "prompt tokens differ from the baseline's for {p} of {} of the same requests (median change {:+}; a different tokenizer, chat template or server)",
                    self.prompt_tokens.len(),
                    median_change(&self.prompt_tokens)
                )
                .into(),
            });
        }
        let o = off(&self.output_tokens, &|x| out_limit * x);
        if o * 2 > self.output_tokens.len() {
            out.push(Drift {
                metrics: Metric::timing(Phase::Decode),
                why: format!(
                    "output tokens differ from the baseline's for {o} of {} of the same requests (median change {:+})",
                    self.output_tokens.len(),
                    median_change(&self.output_tokens)
                )
                .into(),
            });
        }
        out
    }
}

/// Notes for the requests whose output tokens came from another source than most (kept gated).
pub fn minority_source_note(run: &RunOutput) -> Option<String> {
    let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.ok()).collect();
    let sources: Vec<TokenSource> = ok.iter().filter_map(|r| r.token_source).collect();
    let (src, n, total) = majority_source(&sources)?;
    (n < total).then(|| {
        format!(
            "{} of {total} requests had no `{}` token count and were counted from {} (e.g. a proxy dropped the usage chunk); their counts agree with the others', so TPOT is still compared",
            total - n,
            source_name(src),
            source_name(if src == TokenSource::Usage { TokenSource::Events } else { TokenSource::Usage })
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TokenSource;

    /// A prompt set blessed when perfgate read fewer of its entries (issue 45: ShareGPT
    /// conversations that start with a reply) is named as read differently, not as changed.
    #[test]
    fn an_unchanged_file_read_as_more_entries_is_named_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("p.jsonl"),
            "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"cut\"}, {\"from\": \"human\", \"value\": \"q\"}]}\n{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}]}\n",
        )
        .unwrap();
        let yaml = "scenarios:\n  - name: s\n    endpoint: {base_url: 'sim://'}\n    request: {prompt_set: {file: p.jsonl, format: sharegpt}, max_tokens: 8}\n";
        let name = dir.path().join("s.yaml").display().to_string();
        let sc = crate::config::parse_str(yaml, &name, &|_| None)
            .map_err(|e| e.to_string())
            .unwrap()
            .remove(0);
        let ps = sc.request.prompt_set.as_ref().unwrap();
        let old = |sha: &str, entries: u64| serde_json::json!({"request": {"prompt_set": {"file": "p.jsonl", "sha256": sha, "entries": entries}}});
        assert_eq!(
            prompt_set_change(&old(&ps.sha256, 1), &sc).unwrap(),
            format!("the prompt set file p.jsonl is unchanged (sha256 {}) but this perfgate reads 2 entries from it, not 1 (it reads more of the file's format)", ps.sha256)
        );
        assert_eq!(prompt_set_change(&old(&ps.sha256, 2), &sc), None);
        assert_eq!(
            prompt_set_change(&old("0123456789abcdef", 1), &sc).unwrap(),
            format!("the prompt set file p.jsonl changed since its baseline was blessed (sha256 0123456789abcdef -> {}, 1 -> 2 entries)", ps.sha256)
        );
    }

    fn scenario() -> Scenario {
        let yaml = "scenarios:\n  - name: s\n    endpoint: {base_url: 'sim://'}\n    request: {prompt: hi there, max_tokens: 8, ignore_eos: true}\n";
        crate::config::parse_str(yaml, "t.yaml", &|_| None)
            .unwrap()
            .remove(0)
    }

    fn record(prompt: u64, out: u64) -> RequestRecord {
        RequestRecord {
            ttft_ms: Some(10.0),
            tpot_ms: Some(2.0),
            e2e_ms: Some(24.0),
            t_done_ms: Some(25.0),
            itl_ms: vec![2.0; 7],
            output_tokens: Some(out),
            token_source: Some(TokenSource::Usage),
            prompt_tokens: Some(prompt),
            token_events: out,
            ..RequestRecord::new(0.0)
        }
    }

    fn baseline_of(sc: &Scenario, prompt: u64, out: u64) -> Baseline {
        let mut run = RunOutput::empty();
        run.records = vec![record(prompt, out); 20];
        run.started_at = "2026-11-30T00:00:00Z".into();
        baseline::from_runs(sc, &[run], None)
    }

    fn run_of(recs: Vec<RequestRecord>) -> RunOutput {
        let mut run = RunOutput::empty();
        run.records = recs;
        run
    }

    #[test]
    fn workload_drift_removes_only_what_depends_on_it() {
        let sc = scenario();
        let b = baseline_of(&sc, 12, 8);
        let same = run_of(vec![record(12, 8); 20]);
        assert_eq!(workload_drift(&sc, &b, &same), vec![]);
        let d = workload_drift(&sc, &b, &run_of(vec![record(30, 8); 20]));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].metrics, vec![Metric::Ttft, Metric::E2e]);
        assert!(
            d[0].why
                .to_string()
                .contains("median prompt tokens 12 in the baseline vs 30 now"),
            "{}",
            d[0].why.to_string()
        );
        let d = workload_drift(&sc, &b, &run_of(vec![record(12, 6); 20]));
        assert_eq!(d[0].metrics, vec![Metric::Tpot, Metric::E2e]);
        assert!(d[0]
            .why
            .to_string()
            .contains("median output tokens 8 in the baseline vs 6 now"));
        let events = RequestRecord {
            token_source: Some(TokenSource::Events),
            ..record(12, 8)
        };
        let d = workload_drift(&sc, &b, &run_of(vec![events.clone(); 20]));
        assert_eq!(d[0].metrics, vec![Metric::Tpot]);
        assert!(
            d[0].why
                .to_string()
                .contains("from usage (20 of 20) in the baseline but from events (20 of 20) now"),
            "{}",
            d[0].why.to_string()
        );
        assert_eq!(
            d[0].why.say(Words::Arms),
            "output tokens were counted from usage (20 of 20) in the base arm but from events (20 of 20) in the candidate arm"
        );
        // One request of twenty without usage, same count: no drift, a note.
        let mut mixed = vec![record(12, 8); 19];
        mixed.push(events.clone());
        let mixed = run_of(mixed);
        assert_eq!(workload_drift(&sc, &b, &mixed), vec![]);
        let note = minority_source_note(&mixed).unwrap();
        assert!(
            note.starts_with("1 of 20 requests had no `usage` token count"),
            "{note}"
        );
        // ... with another count, TPOT is not compared.
        let mut off = vec![record(12, 8); 19];
        off.push(RequestRecord {
            output_tokens: Some(5),
            ..events
        });
        let d = workload_drift(&sc, &b, &run_of(off));
        assert_eq!(d[0].metrics, vec![Metric::Tpot]);
        assert!(d[0].why.to_string().contains("1 of 20 requests counted output tokens from events instead of usage, and 1 of them got a different count"), "{}", d[0].why.to_string());
    }

    fn work(index: u64, id: &str) -> Option<crate::record::WorkItem> {
        Some(crate::record::WorkItem {
            index,
            entry: Some(index),
            prompt_id: id.into(),
            max_tokens: 8,
            input_tokens: None,
            conversation: None,
            turn: None,
        })
    }

    /// A prompt set: requests of the same index are compared one by one, so a longer run (more
    /// requests, another median of the mix) is no drift, and other prompts or other counts are.
    #[test]
    fn a_varied_workload_is_compared_request_by_request() {
        let sc = scenario();
        // the baseline: 20 requests, request i with prompt i and 10 + i prompt tokens
        let rec = |i: u64, id: &str, prompt: u64, out: u64| RequestRecord {
            work: work(i, id),
            ..record(prompt, out)
        };
        let mut run = RunOutput::empty();
        run.records = (0..20)
            .map(|i| rec(i, &format!("p{i}"), 10 + i, 8))
            .collect();
        run.started_at = "2026-11-30T00:00:00Z".into();
        let b = baseline::from_runs(&sc, &[run], None);
        // 40 requests: the first 20 the same, 20 more with long prompts (the median moves)
        let longer = run_of(
            (0..40)
                .map(|i| rec(i, &format!("p{i}"), if i < 20 { 10 + i } else { 500 }, 8))
                .collect(),
        );
        assert_eq!(workload_drift(&sc, &b, &longer), vec![]);
        // other prompts for the same indexes: every metric
        let other = run_of(
            (0..20)
                .map(|i| rec(i, &format!("q{i}"), 10 + i, 8))
                .collect(),
        );
        let d = workload_drift(&sc, &b, &other);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].metrics, vec![Metric::Ttft, Metric::Tpot, Metric::E2e]);
        // said of two arms, from the same value (issue 42: no text replaced)
        assert!(
            d[0].why.say(Words::Arms).contains(
                "(request 0: prompt p0 then, q0 in the candidate arm): the prompt set's order"
            ),
            "{}",
            d[0].why.say(Words::Arms)
        );
        assert!(
            d[0].why.to_string().starts_with(
                "20 of 20 requests sent another prompt than the baseline's request of the same index (request 0: prompt p0 then, q0 now)"
            ),
            "{}",
            d[0].why.to_string()
        );
        // the same prompts counted 3 tokens longer (another chat template): TTFT and E2E
        let counted = run_of(
            (0..20)
                .map(|i| rec(i, &format!("p{i}"), 13 + i, 8))
                .collect(),
        );
        let d = workload_drift(&sc, &b, &counted);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].metrics, vec![Metric::Ttft, Metric::E2e]);
        assert!(
            d[0].why.to_string()
                .contains("prompt tokens differ from the baseline's for 20 of 20 of the same requests (median change +3"),
            "{}",
            d[0].why.to_string()
        );
        // shorter answers for most requests: TPOT and E2E
        let short = run_of(
            (0..20)
                .map(|i| rec(i, &format!("p{i}"), 10 + i, 6))
                .collect(),
        );
        let d = workload_drift(&sc, &b, &short);
        assert_eq!(d[0].metrics, vec![Metric::Tpot, Metric::E2e]);
    }
}
