//! Renderers of the one [`crate::results::Results`] model: terminal text, markdown (the PR
//! comment body), the results JSON, JUnit XML and a self-contained HTML page. Shared number
//! formatting lives here so the renderers agree; [`Report`] adds, for the HTML plots only, the
//! per-request values of each compared baseline.

pub mod escape;
pub mod footnotes;
pub mod html;
pub mod json;
pub mod junit;
pub mod last_resort;
pub mod markdown;
pub mod plot;
pub mod progress;
pub mod safe_text;
pub mod series_plot;
pub mod sweep_plot;
pub mod terminal;

use crate::baseline::{Baseline, BaselineRecord, LoadError};
use crate::config::ScenarioName;
use crate::gate::{Check, CheckKind};
use crate::record::RequestRecord;
use crate::results::{DecidedBy, DriftBlind, Results};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A value of a check in its unit: ms for latency quantiles and a nightly level, a percentage for
/// shares.
pub fn fmt_value(c: &Check, v: Option<f64>) -> String {
    match (c.kind, v) {
        (_, None) => "-".into(),
        (
            CheckKind::Quantile(_)
            | CheckKind::Slo(_)
            | CheckKind::ItlTail(_)
            | CheckKind::ChangePoint
            | CheckKind::ColdStart(_),
            Some(x),
        ) => fmt_ms(x),
        (_, Some(x)) => format!("{:.1}%", x * 100.0),
    }
}

pub use crate::units::fmt_ms;

/// A conversation scenario's prefix-cache lines (docs/scenarios.md "Conversations"): the
/// reported and measured hit rates, then TTFT P50 by turn position.
pub fn cache_lines(c: &crate::stats::cache::CacheSummary) -> Vec<String> {
    let mut out = vec![format!("prefix cache: {}", c.describe())];
    if !c.by_turn.is_empty() {
        let turns: Vec<String> = c
            .by_turn
            .iter()
            .map(|t| {
                let hit = t
                    .reported_hit_rate
                    .map_or(String::new(), |h| format!(", {:.0}% cached", h * 100.0));
                format!("{}: {}{hit}", t.turn, fmt_ms(t.ttft_p50_ms))
            })
            .collect();
        out.push(format!("TTFT P50 by turn: {}", turns.join(" | ")));
    }
    out
}

/// The failures of a run by class, `class xN` joined by commas (stops have their own note).
pub fn failure_classes(m: &crate::results::Measured) -> String {
    let classes: Vec<String> = m
        .errors_by_class
        .iter()
        .filter(|(k, _)| !k.is_stop())
        .map(|(k, v)| format!("{k} x{v}"))
        .collect();
    classes.join(", ")
}

/// A scenario's speculative-decoding line (docs/metrics.md "Speculative decoding"):
/// `speculative decoding: acceptance 72.0% (180/250 draft tokens, 20 requests), mean acceptance
/// length 3.10 tokens; reference 80.0%, 3.50`.
pub fn speculative_line(s: &crate::speculative::AcceptanceSides) -> String {
    let one = |a: &crate::speculative::Acceptance| {
        let rate = a
            .rate
            .map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0));
        let len = a.mean_length.map_or("-".to_string(), |l| format!("{l:.2}"));
        (rate, len)
    };
    let c = &s.candidate;
    let (rate, len) = one(c);
    let whose = match c.source {
        crate::speculative::AcceptanceSource::Requests => format!("{} requests", c.requests),
        crate::speculative::AcceptanceSource::Metrics => "server /metrics".to_string(),
    };
    let reference = s.reference.as_ref().map_or(String::new(), |r| {
        let (rate, len) = one(r);
        format!("; reference {rate}, {len}")
    });
    format!(
        "speculative decoding: acceptance {rate} ({}/{} draft tokens, {whose}), mean acceptance length {len} tokens{reference}",
        c.accepted, c.drafted
    )
}

/// A scenario's structured-output line: `structured output: 18 of 20 answers parsed (90.0%);
/// not: arguments_not_json 2`.
pub fn structured_line(s: &crate::structured::ParseSummary) -> String {
    let not = if s.failures.is_empty() {
        String::new()
    } else {
        let f: Vec<String> = s
            .failures
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        format!("; not: {}", f.join(", "))
    };
    format!(
        "structured output: {} of {} answers parsed ({:.1}%){not}",
        s.parsed,
        s.checked,
        s.rate * 100.0
    )
}

/// The baseline column: the baseline's estimate; for `gate.cache.hit_rate` the baseline's
/// measured hit rate (`-` without one), its least rate being in the tolerance column.
pub fn fmt_baseline(c: &Check) -> String {
    fmt_value(c, shown_baseline(c))
}

/// The baseline value a row compares with: [`Check::baseline_hit_rate`] for the cache hit
/// rate (its `baseline` is the objective), else `baseline`.
fn shown_baseline(c: &Check) -> Option<f64> {
    match c.kind {
        CheckKind::CacheHitRate => c.baseline_hit_rate,
        _ => c.baseline,
    }
}

/// The n column: `20/20` (baseline/candidate); `8 pairs` for a cache hit rate measured by
/// the cold reference's pairs.
pub fn fmt_n(c: &Check) -> String {
    match c.reference_pairs {
        Some(p) => format!("{p} pairs"),
        None => format!("{}/{}", c.n_baseline, c.n_candidate),
    }
}

/// The change column: `+30.1% [+25.0%, +35.2%]` for quantiles (ratio with its CI); the
/// difference in percentage points for shares (error rate, requests above the pooled P90).
pub fn fmt_change(c: &Check) -> String {
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    match (c.kind, c.ratio) {
        (
            CheckKind::ErrorRate
            | CheckKind::StoppedRate
            | CheckKind::TailExceedance
            | CheckKind::ErrorSlo
            | CheckKind::CacheHitRate
            | CheckKind::Outputs
            | CheckKind::AcceptanceRate
            | CheckKind::ParseRate,
            _,
        ) => match (shown_baseline(c), c.candidate) {
            (Some(b), Some(x)) => format!("{:+.1} pp", (x - b) * 100.0),
            _ => "-".into(),
        },
        (_, None) => "-".into(),
        // A baseline at or below min_delta (TPOT 0 ms when a gateway sends every token in one
        // chunk): the gate judges the change in ms, and a ratio to ~0 is no figure (it printed
        // +20163335899900.0%).
        (CheckKind::Quantile(_) | CheckKind::ItlTail(_), Some(_))
            if c.baseline.is_some_and(|b| b <= 0.0 || b <= c.min_delta_ms) =>
        {
            match (c.baseline, c.candidate) {
                (Some(b), Some(x)) => format!(
                    "{}{} vs a {} baseline",
                    if x >= b { "+" } else { "-" },
                    fmt_ms((x - b).abs()),
                    fmt_ms(b)
                ),
                _ => "-".into(),
            }
        }
        (_, Some(r)) => {
            let ci = match c.ci {
                Some(crate::gate::RatioCi {
                    lower: lo,
                    upper: hi,
                }) => format!(
                    " [{}, {}]",
                    lo.map(pct).unwrap_or_else(|| "?".into()),
                    hi.map(pct).unwrap_or_else(|| "?".into())
                ),
                None => String::new(),
            };
            // The paired test says so: its interval is of another kind (docs/gate.md "Paired
            // requests"); the unpaired one, the default, says nothing.
            let paired = match c.test {
                Some(crate::gate::P50Test::PairedSignedRank) => " paired",
                _ => "",
            };
            format!("{}{ci}{paired}", pct(r))
        }
    }
}

/// The tolerance column: `5% / 10%, >0.50 ms`; a fail tolerance widened to the baseline's
/// run-to-run spread is marked `*`.
pub fn fmt_tolerance(c: &Check) -> String {
    let fail = match c.fail_configured {
        Some(_) => format!("{:.1}%*", c.fail * 100.0),
        None => format!("{:.0}%", c.fail * 100.0),
    };
    let catches = match c.min_detectable_change {
        Some(m) if c.verdict != crate::gate::Verdict::Info && m.is_finite() => {
            format!("; catches {:+.0}%", m * 100.0)
        }
        _ => String::new(),
    };
    match c.kind {
        CheckKind::ErrorRate | CheckKind::StoppedRate | CheckKind::ParseRate => {
            "significant increase".into()
        }
        CheckKind::AcceptanceRate => format!("significant drop > {:.0} pp", c.fail * 100.0),
        CheckKind::Slo(_) | CheckKind::ErrorSlo => "objective (SLO)".into(),
        CheckKind::CacheHitRate => format!(">= {:.0}%", c.fail * 100.0),
        CheckKind::Outputs => "beyond its own repeats".into(),
        CheckKind::ChangePoint => format!("band; step >= {:.0}%", c.fail * 100.0),
        _ if c.min_delta_ms > 0.0 => format!(
            "{:.0}% / {fail}, >{}{catches}",
            c.warn * 100.0,
            fmt_ms(c.min_delta_ms)
        ),
        _ => format!("{:.0}% / {fail}{catches}", c.warn * 100.0),
    }
}

/// When the drift widening made some gated check nearly blind (a fail tolerance more than twice
/// the configured one) and nothing failed: what the verdict line must say first, with the
/// largest widened tolerance (docs/gate.md "Detection limits").
pub fn drift_blind(r: &Results) -> Option<String> {
    let DriftBlind {
        check: c,
        configured: conf,
        hides,
        decided_by,
    } = r.drift_blind()?;
    let from = match c.tau_nights {
        Some(n) => format!("{n} nights of history"),
        None => "the baseline's run-to-run spread".into(),
    };
    // Already keeping the history: say what it does here, not to start keeping one.
    let instead = match decided_by {
        DecidedBy::Nights => "the nights decide this run's verdict instead (the `nightly step` rows: a step of 5% or more beyond their band is red once confirmed, on its second or third night; docs/history.md), or compare base and candidate in one job with `perfgate ab`".to_string(),
        DecidedBy::FirstNight => "the nights decide from the second night of this configuration on; tonight, its first, these rows gate, or compare base and candidate in one job with `perfgate ab`".to_string(),
        DecidedBy::Baseline => "compare base and candidate in one job with `perfgate ab`, or keep a nightly history (`check --history`, docs/history.md)".to_string(),
    };
    Some(format!(
        "this runner's drift hides regressions below {:+.0}%: {} of {} had its fail tolerance widened from {:.0}% to {:.0}% by {from}{}; {instead}",
        hides * 100.0,
        fmt_check_name(c),
        c.scenario,
        conf * 100.0,
        c.fail * 100.0,
        match hides > c.fail {
            true => format!(" (at its n it catches {:+.0}%)", hides * 100.0),
            false => String::new(),
        }
    ))
}

/// The metric column: `TTFT P50`, `errors`.
pub fn fmt_check_name(c: &Check) -> String {
    match c.metric {
        Some(m) => format!("{} {}", m.label(), c.kind.label()),
        None => c.kind.label().to_string(),
    }
}

/// Per-request values of one side (baseline or candidate), successes only, ms: what the HTML
/// plots draw. Both sides go through [`BaselineRecord`], so they are defined identically.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distributions {
    pub ttft_ms: Vec<f64>,
    pub tpot_ms: Vec<f64>,
    /// Each request's own ITL P99 (its worst gaps; the baseline keeps only this summary).
    pub itl_p99_ms: Vec<f64>,
    /// Each request's prompt tokens (the server's count): the length distribution of a varied
    /// workload.
    pub prompt_tokens: Vec<f64>,
    /// Each request's output tokens.
    pub output_tokens: Vec<f64>,
    /// A conversation's TTFTs by turn position (1-based).
    pub ttft_by_turn: BTreeMap<u32, Vec<f64>>,
}

impl Distributions {
    /// From stored baseline records.
    pub fn from_baseline<'a>(recs: impl IntoIterator<Item = &'a BaselineRecord>) -> Self {
        let mut d = Distributions::default();
        for r in recs.into_iter().filter(|r| r.error.is_none()) {
            d.ttft_ms.extend(r.ttft_ms);
            d.tpot_ms.extend(r.tpot_ms);
            d.itl_p99_ms.extend(r.itl_ms.as_ref().map(|i| i.p99));
            d.prompt_tokens.extend(r.prompt_tokens.map(|t| t as f64));
            d.output_tokens.extend(r.output_tokens.map(|t| t as f64));
            if let (Some(t), Some(w)) = (r.ttft_ms, r.work.as_ref().and_then(|w| w.turn)) {
                d.ttft_by_turn.entry(w).or_default().push(t);
            }
        }
        d
    }
    /// From measured records.
    pub fn from_records(recs: &[RequestRecord]) -> Self {
        let b: Vec<BaselineRecord> = recs.iter().map(BaselineRecord::from_record).collect();
        Self::from_baseline(&b)
    }
}

/// The model every renderer reads: the results, and for the plots the baseline each compared
/// scenario was compared with (or why it is not available).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub results: Results,
    /// Per scenario name with a baseline in the results. `Err` holds the sentence the HTML
    /// report shows in place of the baseline's plot (a value to render, not an error to handle).
    pub baselines: BTreeMap<ScenarioName, Result<Distributions, String>>,
}

impl Report {
    /// Loads the baseline of every scenario that has one in `results`: from `dir/<name>.json`
    /// when `dir` is given, else from the path recorded in the results. A file whose
    /// `created_at` differs from the recorded one is not the baseline that was compared, so
    /// its values are not used (the page says why).
    pub fn new(results: Results, dir: Option<&Path>) -> Report {
        let mut baselines = ab_bases(&results);
        for s in &results.scenarios {
            let Some(info) = &s.baseline else { continue };
            let path = match dir {
                Some(d) => crate::baseline::path_for(d, &s.name),
                None => PathBuf::from(&info.path),
            };
            let loaded = crate::baseline::load(&path, &Default::default());
            let got = distributions(&path, info, loaded.as_ref().map_err(Clone::clone));
            baselines.insert(s.name.clone(), got);
        }
        Report { results, baselines }
    }

    /// As [`Report::new`], with baselines already loaded (by the check that produced
    /// `results`): `lookup` gives each scenario's baseline path and file.
    pub fn with_loaded<'a>(
        results: Results,
        lookup: impl Fn(&str) -> (PathBuf, Result<&'a Baseline, LoadError>),
    ) -> Report {
        let mut baselines = ab_bases(&results);
        for s in &results.scenarios {
            let Some(info) = &s.baseline else { continue };
            let (path, loaded) = lookup(&s.name);
            baselines.insert(s.name.clone(), distributions(&path, info, loaded));
        }
        Report { results, baselines }
    }
}

/// The base arm's values of every `perfgate ab` scenario (they play the baseline's part in the
/// plots), from the results themselves.
fn ab_bases(results: &Results) -> BTreeMap<ScenarioName, Result<Distributions, String>> {
    results
        .scenarios
        .iter()
        .filter_map(|s| {
            let ab = s.ab.as_ref()?;
            Some((
                s.name.clone(),
                Ok(Distributions::from_records(&ab.base_records)),
            ))
        })
        .collect()
}

/// The line that says how a `perfgate ab` scenario was measured: the design, its alternations
/// or blocks, the base arm, and each server start's time to ready. `None` for `check`.
pub fn ab_line(s: &crate::results::ScenarioResult) -> Option<String> {
    let ab = s.ab.as_ref()?;
    let m = &ab.base_measured;
    let how = match ab.design {
        crate::results::AbDesign::Interleaved => format!(
            "A/B interleaved: {} alternations (each an AB or BA pair of requests, seed {}){}",
            ab.alternations,
            ab.seed.unwrap_or_default(),
            ab.overlap.as_ref().map(overlap_words).unwrap_or_default()
        ),
        crate::results::AbDesign::Blocked => {
            let starts: Vec<String> = ab
                .blocks
                .iter()
                .filter_map(|b| b.server.as_ref()?.time_to_ready_ms)
                .map(|t| format!("{:.2} s", t / 1000.0))
                .collect();
            format!(
                "A/B blocked {}: {} blocks per arm{}",
                safe_text::field(&ab.order),
                ab.alternations,
                if starts.is_empty() {
                    String::new()
                } else {
                    format!(", server ready after {} (per start)", starts.join(", "))
                }
            )
        }
    };
    Some(format!(
        "{how}; base {} model {} ({} requests, {} failed)",
        safe_text::field(&ab.base_endpoint),
        safe_text::field(&ab.base_model),
        m.requests,
        m.failed
    ))
}

/// How much the arms of an interleaved run overlapped: `, the arms taking turns (both on this
/// machine): in flight at once 0.0 % of the time`.
fn overlap_words(o: &crate::results::AbOverlap) -> String {
    let how = match (o.alternated, o.one_host) {
        (true, true) => ", the arms taking turns (both on this machine)",
        (true, false) => ", the arms taking turns",
        (false, true) => ", both arms on this machine at their own concurrency",
        (false, false) => ", each arm at its own concurrency",
    };
    format!(
        "{how}: in flight at once {:.1} % of the time",
        100.0 * o.share
    )
}

/// One line for the head of a `perfgate ab` report: which designs ran, with their alternations
/// or blocks. `None` for `check`.
pub fn ab_summary(results: &Results) -> Option<String> {
    let mut designs: Vec<String> = results
        .scenarios
        .iter()
        .filter_map(|s| s.ab.as_ref())
        .map(|ab| match ab.design {
            crate::results::AbDesign::Interleaved => {
                format!("interleaved, {} alternations", ab.alternations)
            }
            crate::results::AbDesign::Blocked => {
                // only the letters: a hand-edited results file cannot put markup here
                let order: String = ab
                    .order
                    .chars()
                    .filter(|c| matches!(c, 'A' | 'B'))
                    .collect();
                format!("blocked {order}, {} blocks per arm", ab.alternations)
            }
        })
        .collect();
    if designs.is_empty() {
        return None;
    }
    designs.dedup();
    Some(format!(
        "A/B run (perfgate ab): each candidate arm against its base arm, measured in the same job ({})",
        designs.join("; ")
    ))
}

/// The word for the side compared against: `baseline` for `check`, `base` for `perfgate ab`.
pub fn base_word(results: &Results) -> &'static str {
    if results.is_ab() {
        "base"
    } else {
        "baseline"
    }
}

/// The baseline values to draw for a scenario compared with the baseline `info` describes, or
/// why they are not available (the file at `path` is missing, broken, or another bless).
fn distributions(
    path: &Path,
    info: &crate::results::BaselineInfo,
    loaded: Result<&Baseline, LoadError>,
) -> Result<Distributions, String> {
    match loaded {
        Ok(b) if b.created_at == info.created_at => Ok(Distributions::from_baseline(b.records())),
        Ok(b) => Err(format!(
            "{} was blessed at {}, not at {} like the baseline these results were compared with; pass --baseline-dir with the compared baselines",
            path.display(),
            b.created_at,
            info.created_at
        )),
        Err(LoadError::Missing(p)) => Err(format!(
            "baseline values not drawn: no file at {} (pass --baseline-dir)",
            p.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Where to write each format (`None`: not written).
#[derive(Debug, Clone, Copy, Default)]
pub struct Outputs<'a> {
    pub json: Option<&'a Path>,
    pub markdown: Option<&'a Path>,
    pub junit: Option<&'a Path>,
    pub html: Option<&'a Path>,
}

/// The one line that stands for every INFO check of a scenario (tails its sample size cannot
/// judge): their values and the sample size that would gate them. `None` without INFO checks.
pub fn info_line(info: &[&crate::gate::Check], word: &str) -> Option<String> {
    // checks perfgate's own delay took out of the gate say so, apart from the tails
    let (busy, info): (Vec<&crate::gate::Check>, Vec<&crate::gate::Check>) = info
        .iter()
        .partition(|c| c.reason_kind == crate::gate::ReasonKind::ClientBusy);
    let busy_line = busy.first().map(|b| {
        let names: Vec<String> = busy.iter().map(|c| fmt_check_name(c)).collect();
        format!("{}: {}", names.join(", "), b.reason)
    });
    let Some(first) = info.first() else {
        return busy_line;
    };
    // the tails grouped by the samples they need, each group's need beside it: a P99's need is
    // not a tail>P90's
    let needs = info.iter().fold(Vec::new(), |mut seen, c| {
        if !seen.contains(&c.samples_needed) {
            seen.push(c.samples_needed);
        }
        seen
    });
    let vals: Vec<String> = needs
        .iter()
        .map(|need| {
            let group: Vec<String> = info
                .iter()
                .filter(|c| c.samples_needed == *need)
                .map(|c| {
                    format!(
                        "{} {word} {}, candidate {}",
                        fmt_check_name(c),
                        fmt_baseline(c),
                        fmt_value(c, c.candidate)
                    )
                })
                .collect();
            let note = need.map_or_else(String::new, |n| {
                let them = if group.len() == 1 { "it" } else { "them" };
                format!(" (gating {them} needs at least {n} samples per side)")
            });
            group.join("; ") + &note
        })
        .collect();
    let tails = format!(
        "not gated at n = {}, too few samples to bound these tails, shown for information (Harrell-Davis estimates, as in the table): {}",
        first.n_baseline.min(first.n_candidate),
        vals.join("; "),
    );
    Some(match busy_line {
        Some(b) => format!("{tails}. {b}"),
        None => tails,
    })
}

/// What [`write_outputs`] did: one line per file written (`results JSON: out/results.json`) and
/// one [`crate::exit::Error::Report`] per file that could not be written (naming the file and
/// the reason).
#[derive(Debug, Default)]
pub struct Written {
    pub written: Vec<String>,
    /// The paths of the files written, in [`Written::written`]'s order.
    pub paths: Vec<PathBuf>,
    pub failed: Vec<crate::exit::Error>,
}

impl Written {
    /// `path` when it was written now, else `None` (what the step outputs may name: never a
    /// file that is not there, or an older run's).
    pub fn written_path<'a>(&self, path: Option<&'a Path>) -> Option<&'a Path> {
        path.filter(|p| self.paths.iter().any(|w| w == p))
    }

    /// Says on stderr which report files could not be written.
    pub fn print_failures(&self) {
        for f in &self.failed {
            eprintln!("perfgate: error: {f}");
        }
    }

    /// The run's exit code `code`, made 2 when a report file could not be written and nothing
    /// worse happened (docs/design.md "Exit codes").
    pub fn exit_code(&self, code: i32) -> i32 {
        match self.failed.first() {
            None => code,
            Some(f) => crate::verdict::with_write_failure(code, f),
        }
    }
}

/// What `check`, `ab` and `report` all do with a finished run: the terminal report on stdout,
/// then every requested file, each one written named on stderr.
pub fn print_and_write(r: &Report, o: &Outputs) -> Written {
    print!(
        "{}",
        terminal::render_styled(&r.results, terminal::use_color())
    );
    let written = write_outputs(r, o);
    for w in &written.written {
        eprintln!("perfgate: wrote {w}");
    }
    written
}

/// Writes every requested format (atomically; a missing directory is created). A file that
/// cannot be written does not stop the others: every output that can be written is.
pub fn write_outputs(r: &Report, o: &Outputs) -> Written {
    type Render<'a> = &'a dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>;
    let text = |s: String| move |w: &mut dyn std::io::Write| w.write_all(s.as_bytes());
    let jobs: [(&str, Option<&Path>, Render); 4] = [
        // the results JSON is streamed: at 100,000 requests it is ~160 MB
        ("results JSON", o.json, &|w| json::write(w, &r.results)),
        ("markdown report", o.markdown, &|w| {
            text(markdown::render(&r.results))(w)
        }),
        ("JUnit XML", o.junit, &|w| {
            text(junit::render(&r.results))(w)
        }),
        ("HTML report", o.html, &|w| text(html::render(r))(w)),
    ];
    let mut out = Written::default();
    for (what, path, render) in jobs {
        if let Some(p) = path {
            match crate::fsutil::write_atomic_with(p, render) {
                Ok(()) => {
                    out.written.push(format!("{what}: {}", p.display()));
                    out.paths.push(p.to_path_buf());
                }
                Err(source) => out.failed.push(crate::exit::Error::Report {
                    what,
                    path: p.to_path_buf(),
                    source,
                }),
            }
        }
    }
    out
}

/// The least half-height of a sparkline, relative to the middle of its range: the default P50
/// fail tolerance, so nights within +-10 % never fill the bars from ▁ to █.
pub const SPARK_MIN_HALF_SPAN: f64 = 0.10;

/// The scale a sparkline of `values` is drawn on, `(bottom, top)` in the values' unit: the
/// finite values' range, widened to at least +-[`SPARK_MIN_HALF_SPAN`] of its middle. `None`
/// without a finite value.
pub fn spark_scale(values: &[f64]) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return None;
    }
    let mid = (lo + hi) / 2.0;
    let half = ((hi - lo) / 2.0).max(mid.abs() * SPARK_MIN_HALF_SPAN);
    Some((mid - half, mid + half))
}

/// A sparkline of `values` (oldest first) in eight block heights on [`spark_scale`]: each bar
/// an eighth of it, so a step beyond +-10 % spans ▁ to █ and noise within it does not; a night
/// without a value is a space.
pub fn sparkline(values: &[f64]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let scale = spark_scale(values);
    values
        .iter()
        .map(|&v| match scale {
            Some((bottom, top)) if v.is_finite() => {
                let half = (top - bottom) / 2.0;
                if half <= 0.0 {
                    return BLOCKS[4];
                }
                // from the middle, so the middle itself is exactly bar 4
                let k = (((v - (bottom + half)) / half + 1.0) * 4.0).floor();
                BLOCKS[(k.max(0.0) as usize).min(7)]
            }
            _ => ' ',
        })
        .collect()
}

/// The nightly series of a scenario in one line per gated metric: `TPOT P50, last 33 of 33
/// nights: ▁▂▁▃█▇█ (bars 4.96 ms .. 6.06 ms; lowest 5.01 ms, tonight 6.02 ms; step up on night
/// 30)`: the bars' scale is said beside them, a full bar being its top.
pub fn nightly_lines(s: &crate::results::NightlySeries) -> Vec<String> {
    let first_shown = s.first_shown();
    s.metrics()
        .into_iter()
        .map(|m| {
            let v = s.values(m);
            let ok: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            let lo = ok.iter().copied().fold(f64::INFINITY, f64::min);
            let tonight = v.last().copied().unwrap_or(f64::NAN);
            let steps: Vec<String> = s
                .steps
                .iter()
                .filter(|st| st.metric == m)
                .map(|st| {
                    format!(
                        "step {} on night {}",
                        if st.up { "up" } else { "down" },
                        first_shown + st.night
                    )
                })
                .collect();
            let bars = match spark_scale(&v) {
                Some((bottom, top)) => format!("bars {} .. {}; ", fmt_ms(bottom), fmt_ms(top)),
                None => String::new(),
            };
            format!(
                "{} P50, last {} of {} nights: {} ({bars}lowest {}, tonight {}{})",
                m.label(),
                s.nights.len(),
                s.total,
                sparkline(&v),
                if lo.is_finite() {
                    fmt_ms(lo)
                } else {
                    "-".into()
                },
                if tonight.is_finite() {
                    fmt_ms(tonight)
                } else {
                    "-".into()
                },
                if steps.is_empty() {
                    String::new()
                } else {
                    format!("; {}", steps.join(", "))
                }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46 (a fresh reader's walk): the drift warning says what decides the nearly blind
    /// metric: the committed baseline without a history, and with one, the baseline until 7
    /// nights came before tonight (the nights' `deciding` is empty), then the nights.
    #[test]
    fn the_drift_warning_names_what_decides_the_metric() {
        let mut r = crate::results::fixture();
        r.verdict = crate::verdict::Overall::Pass;
        r.scenarios.truncate(1);
        let s = &mut r.scenarios[0];
        s.checks = vec![Check {
            fail: 0.25,
            fail_configured: Some(0.10),
            verdict: crate::gate::Verdict::Pass,
            ..Check::blank(
                "chat",
                Some(crate::config::Metric::Ttft),
                CheckKind::Quantile(crate::config::Quantile::P50),
                0.10,
            )
        }];
        let series = |deciding| crate::results::NightlySeries {
            branch: "perfgate-history".into(),
            total: 3,
            nights: vec![],
            steps: vec![],
            deciding,
        };
        let head = "this runner's drift hides regressions below +25%: TTFT P50 of chat had its fail tolerance widened from 10% to 25% by the baseline's run-to-run spread; ";
        let said = |r: &Results| drift_blind(r).unwrap();
        assert_eq!(said(&r), format!("{head}compare base and candidate in one job with `perfgate ab`, or keep a nightly history (`check --history`, docs/history.md)"));
        r.scenarios[0].nightly = Some(series(vec![]));
        assert_eq!(said(&r), format!("{head}the nights decide from the second night of this configuration on; tonight, its first, these rows gate, or compare base and candidate in one job with `perfgate ab`"));
        // the nights decide TPOT only: TTFT is still the baseline's
        r.scenarios[0].nightly = Some(series(vec![crate::config::Metric::Tpot]));
        assert!(said(&r).contains("tonight, its first, these rows gate"));
        r.scenarios[0].nightly = Some(series(vec![crate::config::Metric::Ttft]));
        assert!(
            said(&r).starts_with(&format!(
                "{head}the nights decide this run's verdict instead"
            )),
            "{}",
            said(&r)
        );
        // issue 46: the figure is what the row says it catches (+84 %), not a tail row's wider
        // fail tolerance (+65 %) next to it
        r.scenarios[0].nightly = None;
        r.scenarios[0].checks[0].min_detectable_change = Some(0.84);
        r.scenarios[0].checks.push(Check {
            fail: 0.65,
            fail_configured: Some(0.20),
            verdict: crate::gate::Verdict::Pass,
            ..Check::blank(
                "chat",
                Some(crate::config::Metric::Ttft),
                CheckKind::TailExceedance,
                0.20,
            )
        });
        assert_eq!(said(&r), "this runner's drift hides regressions below +84%: TTFT P50 of chat had its fail tolerance widened from 10% to 25% by the baseline's run-to-run spread (at its n it catches +84%); compare base and candidate in one job with `perfgate ab`, or keep a nightly history (`check --history`, docs/history.md)");
    }

    fn p50(baseline: f64, candidate: f64, ratio: f64, upper: f64) -> Check {
        serde_json::from_value(serde_json::json!({
            "scenario": "s", "metric": "tpot", "kind": {"quantile": "p50"},
            "baseline": baseline, "candidate": candidate, "ratio": ratio,
            "ci": [1.0, upper], "p_value": 0.5, "p_holm": 0.5,
            "warn": 0.05, "fail": 0.1, "min_delta_ms": 0.5, "n_baseline": 20, "n_candidate": 20,
            "verdict": "FAIL", "reason": "",
        }))
        .unwrap()
    }

    fn cache(base_rate: Option<f64>, pairs: Option<usize>) -> Check {
        let mut c: Check = serde_json::from_value(serde_json::json!({
            "scenario": "chat", "kind": "cache_hit_rate",
            "baseline": 0.4, "candidate": 0.875, "ratio": null,
            "ci": null, "p_value": null, "p_holm": null,
            "warn": 0.4, "fail": 0.4, "min_delta_ms": 0.0, "n_baseline": 0, "n_candidate": 20,
            "verdict": "PASS", "reason": "",
        }))
        .unwrap();
        c.baseline_hit_rate = base_rate;
        c.reference_pairs = pairs;
        c
    }

    /// Issue 46: the cache row showed the objective (40 %) as the baseline and the change from
    /// it (+47.5 pp), and n as 0/20; the baseline column is the baseline's measured rate, the
    /// objective is the tolerance, the change is from the baseline's rate, n is the pairs.
    #[test]
    fn the_cache_row_shows_the_baselines_rate_and_the_objective_apart() {
        let c = cache(Some(0.87), Some(8));
        assert_eq!(fmt_change(&c), "+0.5 pp");
        assert_eq!(fmt_tolerance(&c), ">= 40%");
        assert_eq!(fmt_baseline(&c), "87.0%");
        assert_eq!(fmt_n(&c), "8 pairs");
        // without a baseline (or its rate), no change from the objective either
        let c = cache(None, None);
        assert_eq!(fmt_change(&c), "-");
        assert_eq!(fmt_baseline(&c), "-");
        assert_eq!(fmt_n(&c), "0/20");
    }

    /// Issue 26: against a 0 ms baseline the change read `+20163335899900.0%`; a baseline at
    /// or below min_delta is judged in ms, and so is its change shown.
    #[test]
    fn a_change_from_a_zero_baseline_is_shown_in_ms() {
        assert_eq!(
            fmt_change(&p50(0.0, 201.6, 201633358999.0, 3e11)),
            "+202 ms vs a 0.00 ms baseline"
        );
        assert_eq!(
            fmt_change(&p50(0.4, 0.1, 0.25, 1.0)),
            "-0.30 ms vs a 0.40 ms baseline"
        );
        assert_eq!(
            fmt_change(&p50(10.0, 13.0, 1.3, 1.4)),
            "+30.0% [+0.0%, +40.0%]"
        );
    }

    /// Issue 43: a P50 tested paired says so in its change column; the unpaired one says
    /// nothing (as before); the JSON names either.
    #[test]
    fn a_paired_p50_says_paired_in_its_change() {
        let mut c = p50(10.0, 13.0, 1.3, 1.4);
        c.test = Some(crate::gate::P50Test::PairedSignedRank);
        assert_eq!(fmt_change(&c), "+30.0% [+0.0%, +40.0%] paired");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["test"], "paired_signed_rank");
        c.test = Some(crate::gate::P50Test::UnpairedRankSum);
        assert_eq!(fmt_change(&c), "+30.0% [+0.0%, +40.0%]");
        assert_eq!(
            serde_json::to_value(&c).unwrap()["test"],
            "unpaired_rank_sum"
        );
    }

    /// Issue 46: `perfgate ab` at n = 20 listed the not-gated tails and then "gating them
    /// needs at least 459 samples per side", the P99s' figure, read as tail>P90's (which
    /// needs 31): the tails are grouped by what they need, each group's need beside it.
    #[test]
    fn each_not_gated_tail_says_its_own_sample_size() {
        let tail = |metric: &str, kind: serde_json::Value, b: f64, c: f64, need| -> Check {
            let mut c = p50(b, c, c / b, 1.0);
            c.metric = serde_json::from_value(serde_json::json!(metric)).unwrap();
            c.kind = serde_json::from_value(kind).unwrap();
            c.verdict = crate::gate::Verdict::Info;
            c.samples_needed = need;
            c
        };
        let p99 = || serde_json::json!({"quantile": "p99"});
        let share = || serde_json::json!("tail_exceedance");
        let ttft99 = tail("ttft", p99(), 25.4, 27.4, Some(459));
        let ttft90 = tail("ttft", share(), 0.10, 0.10, Some(31));
        let tpot99 = tail("tpot", p99(), 8.84, 3.19, Some(459));
        let tpot90 = tail("tpot", share(), 0.15, 0.05, Some(31));
        assert_eq!(
            info_line(&[&ttft99, &ttft90, &tpot99, &tpot90], "base").unwrap(),
            "not gated at n = 20, too few samples to bound these tails, shown for information (Harrell-Davis estimates, as in the table): TTFT P99 base 25.4 ms, candidate 27.4 ms; TPOT P99 base 8.84 ms, candidate 3.19 ms (gating them needs at least 459 samples per side); TTFT tail>P90 base 10.0%, candidate 10.0%; TPOT tail>P90 base 15.0%, candidate 5.0% (gating them needs at least 31 samples per side)"
        );
        assert_eq!(
            info_line(&[&tpot90], "baseline").unwrap(),
            "not gated at n = 20, too few samples to bound these tails, shown for information (Harrell-Davis estimates, as in the table): TPOT tail>P90 baseline 15.0%, candidate 5.0% (gating it needs at least 31 samples per side)"
        );
    }

    /// A nightly step's levels are latencies: a 21.9 ms level read "2192.3%" (CI of f8b18f4).
    #[test]
    fn a_nightly_level_is_shown_in_ms_and_a_sparkline_spans_min_to_max() {
        let mut c = p50(5.0, 6.0, 1.2, 1.3);
        c.kind = CheckKind::ChangePoint;
        assert_eq!(fmt_value(&c, Some(21.923)), "21.9 ms");
        assert_eq!(sparkline(&[1.0, 2.0, f64::NAN, 8.0]), "▁▂ █");
        assert_eq!(sparkline(&[3.0, 3.0]), "▅▅");
    }

    /// Issue 46: nights within +-5 % (37.0-40.6 ms) drew `▁..█`, a trend to the eye. The bars
    /// span at least +-10 % of the middle of the range: mid 38.8 ms, half-height 3.88 ms, bar
    /// floor(((v - 38.8) / 3.88 + 1) * 4): 37.0 -> 2.14, 38.6 -> 3.79, 39.5 -> 4.72, 40.6 -> 5.86,
    /// 40.2 -> 5.44.
    #[test]
    fn a_sparkline_of_noise_stays_in_the_middle_and_a_step_spans_the_bars() {
        let noise = sparkline(&[37.0, 38.6, 39.5, 40.6, 40.2]);
        assert_eq!(noise, "▃▄▅▆▆");
        assert!(!noise.contains('▁') && !noise.contains('█'), "{noise}");
        // +50 %: mid 50, half-height max(10, 5) = 10: 40 -> 0 (▁), 60 -> 8, the top bar (█)
        assert_eq!(
            sparkline(&[40.0, 40.0, 40.0, 40.0, 60.0, 60.0, 60.0]),
            "▁▁▁▁███"
        );
        // what a full bar means, in ms: the scale the bars were drawn on
        let (lo, hi) = spark_scale(&[37.0, 38.6, 39.5, 40.6, 40.2]).unwrap();
        assert!(
            (lo - 34.92).abs() < 1e-9 && (hi - 42.68).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!(spark_scale(&[40.0, 60.0]), Some((40.0, 60.0)));
        assert_eq!(spark_scale(&[f64::NAN]), None);
        // the nightly line says that scale beside the bars
        let nights = [37.0, 38.6, 39.5, 40.6, 40.2]
            .iter()
            .enumerate()
            .map(|(i, &v)| crate::results::NightPoint {
                time: format!("2026-11-0{}T03:00:00Z", i + 1),
                commit: None,
                p50_ms: [(crate::config::Metric::Tpot, v)].into(),
            })
            .collect();
        let series = crate::results::NightlySeries {
            branch: "perfgate-history".into(),
            total: 5,
            nights,
            steps: vec![],
            deciding: vec![],
        };
        assert_eq!(
            nightly_lines(&series),
            ["TPOT P50, last 5 of 5 nights: ▃▄▅▆▆ (bars 34.9 ms .. 42.7 ms; lowest 37.0 ms, tonight 40.2 ms)"]
        );
    }
}
