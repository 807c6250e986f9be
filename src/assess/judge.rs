//! One scenario's measured run judged against a [`Reference`]: its [`ScenarioResult`] (status,
//! notes, figures), the gate's input and the reference's server-side figures. The one place the
//! status cascade is written, for `check` (a committed baseline) and `ab` (the base arm) alike:
//! why the run cannot be compared, whether the reference can be used, workload drift, the
//! `gate.slo`-only input, the `max_error_rate` rule, over the reference resolved once into plain
//! facts (`resolve`; no step asks its kind). Pure: the commands measure and load.

use super::arm::{baseline_spread, gate_input, slo_only_input, Arm};
use super::cold_start::StartsOf;
use super::drift::{minority_source_note, workload_drift, Words};
use super::figures::measured;
use super::notes::{run_notes, schedule_notes};
use super::problem::run_problem;
use super::{server_notes, UnlistedModel};
use crate::baseline::Baseline;
use crate::config::{Metric, Scenario};
use crate::execute::MeasureError;
use crate::gate::{ClientDelay, Design, ScenarioSamples, Side, Spread};
use crate::results::{AbBlock, BaselineInfo, Measured, Note, NoteKind, ScenarioResult, Status};
use crate::runner::RunOutput;
use crate::server::start::ServerStart;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What a measured run is judged against.
#[derive(Debug, Clone, Copy)]
pub enum Reference<'a> {
    /// A committed baseline file, as `check` found it.
    Baseline(CommittedBaseline<'a>),
    /// The base arm of an A/B run, measured in the same job.
    BaseArm(BaseArm<'a>),
}

/// A scenario's baseline file as the check loaded it.
#[derive(Debug, Clone, Copy)]
pub struct CommittedBaseline<'a> {
    /// Where it lives (shown in the report).
    pub path: &'a std::path::Path,
    /// The file, when it was read and parsed (a stale one included).
    pub loaded: Option<&'a Baseline>,
    /// Why it cannot be compared with (missing, broken, stale), with the status that says so;
    /// `None` when it is usable.
    pub unusable: Option<&'a (Status, String)>,
    /// `check --history`: the scenario's nights. Their night-to-night spread replaces the bless
    /// runs' in the drift widening (where there are enough nights), and tonight's run is judged
    /// against them too (a `nightly step` check per gated metric, deciding those metrics).
    pub nights: Option<super::nightly::Nights<'a>>,
}

/// The base arm of an A/B run.
#[derive(Debug, Clone, Copy)]
pub struct BaseArm<'a> {
    /// The base arm's scenario.
    pub scenario: &'a Scenario,
    /// The scenario as written (its name, fingerprint, source and family name the result).
    pub written: &'a Scenario,
    /// How the two arms ran, and the base arm's figures.
    pub ab: &'a crate::results::AbResult,
    /// Its run, or why it was not measured.
    pub run: Result<&'a RunOutput, &'a MeasureError>,
    /// Notes known before measuring (e.g. both arms on one endpoint).
    pub notes: &'a [String],
    /// A blocked run's blocks, each with its records (the gate compares them block by block).
    pub blocks: &'a [(AbBlock, Vec<crate::record::RequestRecord>)],
}

/// One scenario judged.
#[derive(Debug, Clone)]
pub struct Judged {
    pub result: ScenarioResult,
    /// The gate's input, when the run could be compared (or checked against `gate.slo` alone).
    pub gate_input: Option<ScenarioSamples>,
    /// The reference's server-side figures, to say where a FAIL's time went.
    pub base_figures: Option<BTreeMap<String, f64>>,
    /// Tonight against its nights, settled once the gate has judged the rows they decide.
    pub night: Option<super::nightly::JudgedNight>,
}

/// What the judgement is given besides the run and its reference.
#[derive(Debug, Clone, Copy, Default)]
pub struct Given<'a> {
    /// What a configured model that the server does not list means.
    pub unlisted_model: UnlistedModel,
    /// This machine's CPU and host: a baseline blessed on another CPU is said.
    pub here: (Option<&'a str>, Option<&'a str>),
    /// `perfgate report`: the load-shard workers the run was merged from.
    pub workers: Option<&'a crate::results::MergedWorkers>,
}

/// Judges `sc`'s measured `run` (or why it was not measured) against `reference`, with what
/// else it is `given`; a load-shard worker's run is marked as its part of the load, not gated.
pub fn judge(
    sc: &Scenario,
    run: Result<&RunOutput, &MeasureError>,
    reference: &Reference,
    given: &Given,
) -> Judged {
    let r = resolve(sc, reference);
    let mut j = judge_run(sc, run, &r, given.unlisted_model);
    let res = &mut j.result;
    if let Some(w) = given.workers {
        res.notes
            .insert(0, Note::new(NoteKind::LoadShard, workers_note(w)));
        res.workers = Some(w.clone());
    }
    let (cpu, host) = given.here;
    let differs = r
        .environment
        .and_then(|e| crate::machine::difference(e.cpu.as_deref(), e.host.as_deref(), cpu, host));
    res.notes.extend(notes_of(NoteKind::Machine, differs));
    if let (Some(share), Ok(run)) = (sc.load.share, run) {
        // a load-shard worker measures, `perfgate report` gates the merged workers
        worker_part(res, share, run);
        j.gate_input = None;
    }
    if let Some(n) = r
        .nights
        .filter(|_| j.result.status != Status::Misconfigured)
    {
        j.night = Some(super::nightly::judge_night(&j.result, sc, &n));
    }
    j
}

/// A load-shard worker's judged run as its part of the load: `load_shard` status (measured,
/// not gated) unless it could not be measured, and what the merge needs beside the records.
fn worker_part(
    res: &mut ScenarioResult,
    share: crate::config::load_shard::LoadShare,
    run: &RunOutput,
) {
    let (i, n) = (share.shard.index, share.shard.count);
    // measured: whatever the worker's baseline said, the merge judges the merged run afresh
    if matches!(
        res.status,
        Status::Compared | Status::NoBaseline | Status::Stale
    ) {
        res.status = Status::LoadShard;
        res.status_detail = format!(
            "worker {i}/{n} of this scenario's load: measured, not gated; `perfgate report` merges the {n} workers' requests and gates them"
        );
    }
    if let Some(late) = run.late_ms.filter(|l| *l > LATE_NOTE_MS) {
        res.notes.push(Note::new(NoteKind::LoadShard, format!(
            "worker {i}/{n}: its measured requests started {} after --start-at (its warmup ended only then): give the workers more lead time, or the merge may refuse them",
            crate::units::fmt_ms(late)
        )));
    }
    let share_of = |total| crate::config::load_shard::share(total, share.shard);
    res.load_shard = Some(crate::results::LoadShardRun {
        index: i,
        count: n,
        concurrency: share_of(share.total_concurrency),
        samples: share_of(share.total_samples),
        started_unix_ms: run.started_unix_ms,
        start_at_unix_ms: share.start_at_unix_ms,
        late_ms: run.late_ms,
        steady: run.steady,
        unmeasured_spans: run
            .unmeasured_spans
            .iter()
            .map(|&(s, e)| (crate::units::round3(s), crate::units::round3(e)))
            .collect(),
        retried: run.retried,
        warmup_failures: run.warmup_failures,
    });
}

/// The merged scenario's note: `4 load-shard workers merged (1,200 requests); every worker was
/// measuring during 97% of the longest window (started within 12 ms of each other)`.
fn workers_note(m: &crate::results::MergedWorkers) -> String {
    let starts = m.windows.iter().map(|w| w.started_unix_ms);
    let spread =
        starts.clone().fold(f64::NEG_INFINITY, f64::max) - starts.fold(f64::INFINITY, f64::min);
    format!(
        "{} load-shard workers merged ({} requests); every worker was measuring during {:.0}% of the longest window (measured phases started within {} of each other)",
        m.windows.len(),
        m.windows.iter().map(|w| w.requests).sum::<usize>(),
        m.overlap * 100.0,
        crate::units::fmt_ms(spread)
    )
}

/// How late after `--start-at` a worker's measured phase may start before its results say so,
/// ms.
pub const LATE_NOTE_MS: f64 = 100.0;

/// The judgement of the run against its resolved reference, before what it is given beside.
fn judge_run(
    sc: &Scenario,
    run: Result<&RunOutput, &MeasureError>,
    r: &Resolved,
    unlisted_model: UnlistedModel,
) -> Judged {
    let empty = RunOutput::empty();
    let cand = run.unwrap_or(&empty);
    let mut j = Judged {
        result: header(sc, r.beside.map_or(sc, |a| a.written), cand),
        gate_input: None,
        base_figures: r.figures.cloned(),
        night: None,
    };
    let res = &mut j.result;
    res.ab = r.beside.map(|a| a.ab.clone());
    if let (None, Err(e)) = (r.beside, run) {
        // a run judged alone that could not be measured is reported with the reason alone
        res.status = Status::Unmeasurable;
        res.status_detail = e.to_string();
        return j;
    }
    if run.is_ok() {
        res.measured.target_rate = sc.load.rate;
    }
    res.notes = notes_of(NoteKind::Scenario, sc.warnings());

    // What the runs say about themselves, and why one cannot be compared.
    if let Some(base) = &r.beside {
        arm_problems(res, sc, run, base, unlisted_model);
    } else {
        let server = cand.server_side.as_ref().map(|s| s.note());
        res.notes.extend(notes_of(NoteKind::ServerFigures, server));
        res.notes.extend(run_notes(sc, cand));
        res.notes.extend(schedule_notes(&res.measured));
        if let Some((status, why)) = run_problem(sc, cand, &res.measured, unlisted_model) {
            res.status = status;
            res.status_detail = why;
        }
    }

    // Whether the reference can be used, and what it says about the server.
    if let (Some(env), Some(s)) = (r.environment, &cand.server_side) {
        let mut said = vec![server_notes::identity_drift(
            &env.server_identity,
            &s.identity,
        )];
        // (gated by gate.cold_start: the check's row says it, against every stored start)
        if s.started_here && sc.gate.cold_start.is_none() {
            said.push(server_notes::ready_note(env.server_time_to_ready_ms, s));
        }
        res.notes.extend(notes_of(
            NoteKind::ServerFigures,
            said.into_iter().flatten(),
        ));
    }
    res.baseline = r.info.clone();
    if let Some((status, why)) = r.unusable.filter(|_| res.status == Status::Compared) {
        res.status = *status;
        res.status_detail = why.clone();
    }
    // Nights that move too much to gate at the configured tolerance: not comparable (the gate
    // still runs, at the capped tolerance, so the rows say what was measured).
    if res.status == Status::Compared && !r.too_wide.is_empty() {
        res.status = Status::Unmeasurable;
        res.status_detail = r
            .too_wide
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
    }

    // Workload drift, then the gate's input: a usable reference, while the run was compared or
    // (judged alone) measured something despite a problem; a base arm's only when both arms were.
    let compared = res.status == Status::Compared
        || (res.status == Status::Unmeasurable && r.beside.is_none());
    if let Some(cmp) = r
        .usable
        .as_ref()
        .filter(|_| compared && res.measured.ok > 0)
    {
        let drifts = workload_drift(sc, &cmp.as_baseline, cand);
        let skip: Vec<Metric> = drifts.iter().flat_map(|d| d.metrics.clone()).collect();
        let whys: Vec<String> = drifts.iter().map(|d| d.why.say(r.words)).collect();
        if !drifts.is_empty() && sc.gate.metrics.iter().all(|m| skip.contains(m)) {
            if res.status == Status::Compared {
                (res.status, res.status_detail) = nothing_compared(r.words, &whys);
            }
        } else {
            for (d, why) in drifts.iter().zip(&whys) {
                let names = d.gated_labels(&sc.gate.metrics);
                let label = match r.words {
                    Words::Baseline => "workload drift",
                    Words::Arms => "workload drift between the arms",
                };
                if !names.is_empty() {
                    res.notes.push(Note::new(NoteKind::WorkloadDrift, format!(
                        "{label}: {why}; {} not compared (the other metrics and the error rate are)",
                        names.join(" and ")
                    )));
                }
            }
            if drifts.is_empty() && r.beside.is_none() {
                // Only a run judged alone notes a minority token source (kept as it has always
                // been: the note describes the candidate run alone; an A/B run's arms are
                // measured by one client in one job, which the note's proxy cause does not
                // single out).
                res.notes
                    .extend(notes_of(NoteKind::Workload, minority_source_note(cand)));
            }
            let mut input = gate_input(
                sc,
                &cmp.arm,
                &Arm::from_records(&cand.records),
                cmp.spread.clone(),
                &skip,
            );
            input.design = match &r.blocks {
                Some(blocks) => Design::Blocked(blocks.iter().map(|b| block(b, &input)).collect()),
                None => r.design.clone(),
            };
            // perfgate's own delay while measuring: the candidate's, and the base arm's too
            let base_delay = r.beside.and_then(|a| a.run.ok()).and_then(client_delay);
            input.client_delay = match (client_delay(cand), base_delay) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            input.quality = super::quality::samples(sc, &cmp.outputs, cand);
            res.notes.extend(notes_of(
                NoteKind::Reference,
                super::quality::parse_not_compared(&cmp.outputs, r.words.reference(), cand),
            ));
            j.gate_input = Some(input);
        }
    }

    // gate.slo needs no baseline: a scenario that could not be compared still has its
    // absolute objectives checked (a gate on day one).
    if !sc.gate.slo.is_empty()
        && res.measured.ok > 0
        && matches!(
            res.status,
            Status::NoBaseline | Status::Stale | Status::InvalidBaseline
        )
        && j.gate_input.is_none()
    {
        j.gate_input = Some(slo_only_input(sc, &Arm::from_records(&cand.records)));
        // (a missing baseline's status detail says so already)
        let why = match res.status {
            Status::Stale => Some("the baseline is stale"),
            Status::InvalidBaseline => Some("the baseline file is broken"),
            _ => None,
        };
        res.notes.extend(notes_of(
            NoteKind::Reference,
            why.map(|why| {
                format!(
                    "{why}: only the gate.slo objectives were checked; bless to gate regressions too"
                )
            }),
        ));
    }
    if matches!(
        res.status,
        Status::Compared | Status::NoBaseline | Status::Stale
    ) {
        if let Some((status, why)) = error_rate_problem(sc, &res.measured) {
            res.status = status;
            res.status_detail = why;
        }
    }
    if let Some(why) = &cand.stop_reason {
        res.notes.push(Note::new(
            NoteKind::Sequential,
            format!("sequential sampling: {why}"),
        ));
    }
    if run.is_ok() {
        let usable = r.usable.as_ref();
        judge_cache(sc, cand, usable.and_then(|u| u.cache.as_ref()), res);
        res.speculative = super::quality::sides(usable.map(|u| &u.outputs), cand);
        res.structured = super::quality::parse_summary(cand);
        if let Some((base, of, theirs)) = &r.starts {
            // `gate.cold_start`: this run's server starts against the reference's
            let mine = theirs.clone().unwrap_or_else(|| starts_of(cand));
            super::cold_start::judge(sc, base, *of, &mine, res);
        }
    }
    res.records = cand
        .records
        .iter()
        .map(|r| super::outputs::written(r, sc))
        .collect();
    j
}

/// The `max_error_rate` rule: a run whose share of failed requests is above the scenario's
/// `gate.max_error_rate` cannot be measured. `m` is the run's [`measured`] figures.
pub fn error_rate_problem(sc: &Scenario, m: &Measured) -> Option<(Status, String)> {
    let rate = m.failed as f64 / m.requests.max(1) as f64;
    (rate > sc.gate.max_error_rate).then(|| {
        (
            Status::Unmeasurable,
            format!(
                "error rate {:.1}% is above max_error_rate {:.1}% (first failure: {})",
                rate * 100.0,
                sc.gate.max_error_rate * 100.0,
                m.first_error.clone().unwrap_or_default()
            ),
        )
    })
}

/// The prefix cache of a conversation scenario (or one with `gate.cache.hit_rate`): its
/// summary and notes, and the `gate.cache.hit_rate` check (a scenario with no hit rate to
/// check could not be measured: that gate never passes silently); `base` is the reference's
/// summary, whose rate the check shows beside the candidate's.
fn judge_cache(
    sc: &Scenario,
    cand: &RunOutput,
    base: Option<&crate::stats::cache::CacheSummary>,
    res: &mut ScenarioResult,
) {
    let Some(summary) = super::cache::summary(sc, cand) else {
        return;
    };
    res.notes
        .extend(notes_of(NoteKind::Cache, super::cache::notes(&summary)));
    match super::cache::check(sc, &summary, base) {
        Some(Ok(c)) => res.checks.push(c),
        Some(Err(why)) => {
            if matches!(res.status, Status::Compared | Status::NoBaseline) {
                res.status = Status::Unmeasurable;
                res.status_detail = why;
            }
        }
        None => {}
    }
    res.cache = Some(summary);
}

/// The result's fields that say which scenario it is and what was measured, before judging.
/// `names`: the scenario whose name, fingerprint, source and family the result carries.
fn header(sc: &Scenario, names: &Scenario, run: &RunOutput) -> ScenarioResult {
    ScenarioResult {
        name: names.name.clone(),
        fingerprint: names.fingerprint.clone(),
        source: names.source.clone(),
        endpoint: sc.endpoint.shown_url(),
        api: sc.endpoint.api.as_str().to_string(),
        model: sc.endpoint.model.clone(),
        concurrency: sc.load.total_concurrency(),
        family: names.family.clone(),
        status: Status::Compared,
        status_detail: String::new(),
        baseline: None,
        measured: measured(run),
        checks: Vec::new(),
        notes: Vec::new(),
        server: run.server_side.clone(),
        records: Vec::new(),
        ab: None,
        nightly: None,
        load_shard: None,
        workers: None,
        cache: None,
        outputs: None,
        speculative: None,
        structured: None,
    }
}

/// The notes of both arms' runs and the first arm problem (not measured, [`run_problem`], the
/// `max_error_rate` rule), each said of its arm. The arm found unreachable is why the run
/// stopped: its reason comes first, before the other arm's "no request was sent".
fn arm_problems(
    res: &mut ScenarioResult,
    sc: &Scenario,
    run: Result<&RunOutput, &MeasureError>,
    base: &BaseArm,
    unlisted_model: UnlistedModel,
) {
    let empty = RunOutput::empty();
    let base_run = base.run.unwrap_or(&empty);
    let cand_run = run.unwrap_or(&empty);
    res.notes
        .extend(notes_of(NoteKind::Arms, base.notes.iter().cloned()));
    for (label, r) in [("base", base_run), ("candidate", cand_run)] {
        let server = r.server_side.as_ref();
        let said = server.map(|s| format!("{label} arm: {}", s.note()));
        res.notes.extend(notes_of(NoteKind::ServerFigures, said));
    }
    // what the A/B compares, first: the reader needs it before anything measured
    if let Some(n) = super::arms_diff::arms_difference(base_run, cand_run) {
        res.notes.insert(0, Note::new(NoteKind::Arms, n));
    }
    let mut arms = [("base", base.scenario, base.run), ("candidate", sc, run)];
    // The arm that failed speaks first: its own error (a server's exit and log lines), not the
    // other arm's "not measured: the candidate arm could not start".
    let unreached =
        |r: Result<&RunOutput, &MeasureError>| matches!(r, Ok(r) if r.unreachable.is_some());
    let waited =
        |r: Result<&RunOutput, &MeasureError>| matches!(r, Err(MeasureError::OtherArm { .. }));
    if (unreached(run) && !unreached(base.run)) || (waited(base.run) && !waited(run)) {
        arms.swap(0, 1);
    }
    for (label, arm_sc, r) in arms {
        let problem = match r {
            Err(e) => Some((Status::Unmeasurable, e.to_string())),
            Ok(r) => {
                let m = measured(r);
                run_problem(arm_sc, r, &m, unlisted_model)
                    .or_else(|| error_rate_problem(arm_sc, &m))
            }
        };
        if let Some((status, why)) = problem {
            if res.status == Status::Compared {
                res.status = status;
                res.status_detail = format!("{label} arm: {why}");
            }
        }
        if let Ok(r) = r {
            for n in run_notes(arm_sc, r) {
                res.notes
                    .push(Note::new(n.kind, format!("{label} arm: {}", n.text)));
            }
        }
    }
}

/// A [`Reference`] resolved ([`resolve`]): the facts the judgement reads, whatever its kind.
struct Resolved<'a> {
    /// How notes and reasons name the reference and the run.
    words: Words,
    /// The reference's own run, measured beside the candidate's (an A/B base arm, with the
    /// scenario as written that names the result, and the design): its problems are checked
    /// like the candidate's, said of each arm, and a problem on either side leaves nothing
    /// compared. `None`: the run is judged alone.
    beside: Option<BaseArm<'a>>,
    /// A baseline file's environment (usable or not): its machine, server identity and start.
    environment: Option<&'a crate::baseline::Environment>,
    /// A baseline file as the report shows it.
    info: Option<BaselineInfo>,
    /// Why it cannot be compared with, and the status that says so.
    unusable: Option<&'a (Status, String)>,
    /// The metrics whose learned nights move too much to gate at the configured tolerance.
    too_wide: Vec<super::nightly::TooWide>,
    /// The nights tonight's run is also judged against.
    nights: Option<super::nightly::Nights<'a>>,
    /// Its server-side figures, to say where a FAIL's time went.
    figures: Option<&'a BTreeMap<String, f64>>,
    /// `gate.cold_start`'s reference starts and whose they are, and the candidate's when the
    /// reference holds them (a blocked A/B run's blocks); `None`: a baseline not usable.
    starts: Option<(Vec<ServerStart>, StartsOf, Option<Vec<ServerStart>>)>,
    /// How it and the run were measured, for the gate: [`Design::Blocked`] over `blocks`.
    design: Design,
    blocks: Option<Vec<(Side, Arm)>>,
    /// What is read of it when it is usable.
    usable: Option<Comparable<'a>>,
}

/// What the judgement of `sc` reads of `reference`: the one place its kind is asked.
fn resolve<'a>(sc: &Scenario, reference: &Reference<'a>) -> Resolved<'a> {
    match *reference {
        Reference::Baseline(b) => {
            let usable = b.loaded.filter(|_| b.unusable.is_none());
            let learned = b.nights.map_or_else(BTreeMap::new, |n| {
                super::nightly::learned_spread(sc, n.past, n.rule)
            });
            Resolved {
                words: Words::Baseline,
                beside: None,
                environment: b.loaded.map(|base| &base.environment),
                info: b.loaded.map(|base| BaselineInfo {
                    path: b.path.display().to_string(),
                    created_at: base.created_at.clone(),
                    perfgate_version: base.perfgate_version.clone(),
                    requests: base.records().count(),
                    summary: base.summary.clone(),
                }),
                unusable: b.unusable,
                too_wide: b.loaded.map_or_else(Vec::new, |base| {
                    super::nightly::too_wide(sc, &learned, base.runs.len().max(1))
                }),
                nights: b.nights,
                figures: b.loaded.map(|base| &base.environment.server_metrics),
                design: Design::Committed,
                blocks: None,
                starts: usable.map(|base| {
                    let starts = base.environment.server_starts.clone();
                    (starts, StartsOf::Baseline, None)
                }),
                usable: usable.map(|base| {
                    // each metric the history learned: tau from the nights, k still the bless
                    // runs (docs/history.md "A tolerance learned from real nights")
                    let (mut spread, runs) = (baseline_spread(sc, base), base.runs.len().max(1));
                    for (&m, l) in &learned {
                        let (tau, nights) = (l.tau, Some(l.nights));
                        spread.insert(m, Spread { tau, runs, nights });
                    }
                    Comparable {
                        as_baseline: Cow::Borrowed(base),
                        arm: Arm::from_baseline(base),
                        spread,
                        outputs: super::quality::BaseSide::of_baseline(base),
                        cache: base.cache.clone(),
                    }
                }),
            }
        }
        Reference::BaseArm(a) => {
            let run = a.run.ok();
            let side = |s: Side| -> Vec<ServerStart> {
                let blocks = a.ab.blocks.iter().filter(|x| x.side == s);
                blocks
                    .filter_map(|x| x.server.as_ref().and_then(ServerStart::of))
                    .collect()
            };
            let starts = match a.ab.blocks.is_empty() {
                true => (run.map(starts_of).unwrap_or_default(), None),
                false => (side(Side::Base), Some(side(Side::Candidate))),
            };
            Resolved {
                words: Words::Arms,
                beside: Some(a),
                environment: None,
                info: None,
                unusable: None,
                too_wide: Vec::new(),
                nights: None,
                figures: run.and_then(|r| r.server_side.as_ref()).map(|s| &s.metrics),
                starts: Some((starts.0, StartsOf::BaseArm, starts.1)),
                design: Design::Interleaved,
                blocks: (a.ab.design == crate::results::AbDesign::Blocked).then(|| {
                    let arm = |(b, recs): &(AbBlock, Vec<_>)| (b.side, Arm::from_records(recs));
                    a.blocks.iter().map(arm).collect()
                }),
                usable: run.map(|run| Comparable {
                    as_baseline: Cow::Owned(crate::baseline::from_runs(
                        a.scenario,
                        std::slice::from_ref(run),
                        None,
                    )),
                    arm: Arm::from_records(&run.records),
                    spread: BTreeMap::new(),
                    outputs: super::quality::BaseSide::of_run(run),
                    cache: super::cache::summary(a.scenario, run),
                }),
            }
        }
    }
}

/// A blocked A/B run's block as the gate reads it: its samples of each metric `input` compares.
fn block((side, arm): &(Side, Arm), input: &ScenarioSamples) -> crate::gate::Block {
    let metrics = input.metrics.iter().map(|(m, _, _)| (*m, arm.samples(*m)));
    crate::gate::Block {
        side: *side,
        metrics: metrics.collect(),
    }
}

/// perfgate's own delay while measuring `r`.
fn client_delay(r: &RunOutput) -> Option<ClientDelay> {
    let l = r.client_lag.as_ref()?;
    Some(ClientDelay::from_lag(l.p50, l.p99, l.cpu_share))
}

/// The server starts `r` made.
fn starts_of(r: &RunOutput) -> Vec<ServerStart> {
    r.server_side.iter().filter_map(ServerStart::of).collect()
}

/// A usable reference, as the drift rules, the gate and the output checks read it.
struct Comparable<'a> {
    /// The reference as a baseline (the base arm as a one-run baseline), for the drift rules.
    as_baseline: Cow<'a, Baseline>,
    arm: Arm,
    spread: BTreeMap<Metric, Spread>,
    /// Its side of the output checks.
    outputs: super::quality::BaseSide,
    /// Its prefix-cache summary.
    cache: Option<crate::stats::cache::CacheSummary>,
}

/// Notes of one kind.
fn notes_of<T: Into<String>>(kind: NoteKind, texts: impl IntoIterator<Item = T>) -> Vec<Note> {
    texts.into_iter().map(|t| Note::new(kind, t)).collect()
}

/// The status when every gated metric drifted: a stale baseline (bless again once the change
/// is understood), or arms that ran different workloads (a misconfigured A/B run).
fn nothing_compared(words: Words, whys: &[String]) -> (Status, String) {
    match words {
        Words::Baseline => (
            Status::Stale,
            format!(
                "workload drift: {}; every gated metric depends on it, so nothing was compared (find out why the workload changed before blessing anything)",
                whys.join("; ")
            ),
        ),
        Words::Arms => (
            Status::Misconfigured,
            format!(
                "the arms ran different workloads: {}; every gated metric depends on it, so nothing was compared",
                whys.join("; ")
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{evaluate, CheckKind, Verdict};
    use crate::record::{Failure, FailureClass, RequestRecord, TokenSource};

    fn scenario(gate: &str) -> Scenario {
        let yaml = format!(
            "scenarios:\n  - name: s\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi there, max_tokens: 8, ignore_eos: true}}\n{gate}"
        );
        crate::config::parse_str(&yaml, "t.yaml", &|_| None)
            .unwrap()
            .remove(0)
    }

    /// A successful request whose latencies grow with `i` (so the samples have a spread).
    fn ok(i: usize, slower: f64, prompt: u64) -> RequestRecord {
        let k = 1.0 + i as f64 / 100.0;
        RequestRecord {
            ttft_ms: Some(10.0 * k * slower),
            tpot_ms: Some(2.0 * k * slower),
            e2e_ms: Some(24.0 * k * slower),
            t_done_ms: Some(25.0 * k * slower),
            itl_ms: vec![2.0 * k * slower; 7],
            output_tokens: Some(8),
            token_source: Some(TokenSource::Usage),
            prompt_tokens: Some(prompt),
            token_events: 8,
            ..RequestRecord::new(i as f64)
        }
    }

    fn failed(i: usize) -> RequestRecord {
        RequestRecord {
            error: Some(Failure {
                class: FailureClass::HttpStatus,
                status: Some(500),
                message: "HTTP 500: boom".into(),
            }),
            ..RequestRecord::new(i as f64)
        }
    }

    fn run_of(recs: Vec<RequestRecord>) -> RunOutput {
        let mut run = RunOutput::empty();
        run.wall_ms = 1000.0;
        run.started_at = "2026-11-30T00:00:00Z".into();
        run.records = recs;
        run
    }

    fn against_baseline(sc: &Scenario, base: &Baseline, run: &RunOutput) -> Judged {
        let reference = Reference::Baseline(CommittedBaseline {
            path: std::path::Path::new("baselines/s.json"),
            loaded: Some(base),
            unusable: None,
            nights: None,
        });
        judge(sc, Ok(run), &reference, &Given::default())
    }

    fn against_arm(sc: &Scenario, base: &RunOutput, run: &RunOutput) -> Judged {
        let ab = crate::results::AbResult {
            design: crate::results::AbDesign::Interleaved,
            order: "ABBA".into(),
            alternations: 2,
            seed: Some(1),
            blocks: Vec::new(),
            base_endpoint: "sim://".into(),
            base_model: "m".into(),
            base_measured: measured(base),
            base_server: None,
            base_records: Vec::new(),
            overlap: None,
        };
        let reference = Reference::BaseArm(BaseArm {
            scenario: sc,
            written: sc,
            ab: &ab,
            run: Ok(base),
            notes: &[],
            blocks: &[],
        });
        judge(sc, Ok(run), &reference, &Given::default())
    }

    /// Issue 42: what the judgement is given is judged, not added to its result afterwards: the
    /// machine the baseline was blessed on, a load-shard worker's share.
    #[test]
    fn the_machine_and_a_workers_share_are_inputs_of_the_judgement() {
        let sc = scenario("");
        let run = run_of((0..20).map(|i| ok(i, 1.0, 12)).collect());
        let mut base = crate::baseline::from_runs(&sc, std::slice::from_ref(&run), None);
        base.environment.cpu = Some("CPU A".into());
        let reference = Reference::Baseline(CommittedBaseline {
            path: std::path::Path::new("baselines/s.json"),
            loaded: Some(&base),
            unusable: None,
            nights: None,
        });
        let given = Given {
            here: (Some("CPU B"), None),
            ..Given::default()
        };
        let j = judge(&sc, Ok(&run), &reference, &given);
        let machine: Vec<&Note> = j
            .result
            .notes
            .iter()
            .filter(|n| n.kind == NoteKind::Machine)
            .collect();
        assert_eq!(machine.len(), 1, "{:?}", j.result.notes);
        assert!(
            machine[0].text.contains("CPU A") && machine[0].text.contains("CPU B"),
            "{}",
            machine[0]
        );
        // worker 2 of 4: measured, not gated, its share of 20 samples
        let mut worker = sc.clone();
        worker.load.share = Some(crate::config::load_shard::LoadShare {
            shard: crate::config::shard::Shard::new(2, 4).unwrap(),
            total_concurrency: 4,
            total_samples: 20,
            total_rate: None,
            start_at_unix_ms: None,
        });
        let j = judge(&worker, Ok(&run), &reference, &Given::default());
        assert_eq!(j.result.status, Status::LoadShard);
        assert!(j.gate_input.is_none());
        let ls = j.result.load_shard.unwrap();
        assert_eq!(
            (ls.index, ls.count, ls.samples, ls.concurrency),
            (2, 4, 5, 1)
        );
    }

    #[test]
    fn a_baseline_and_a_base_arm_of_the_same_samples_judge_alike() {
        let sc = scenario("");
        let base_run = run_of((0..30).map(|i| ok(i, 1.0, 12)).collect());
        let cand = run_of((0..30).map(|i| ok(i, 1.5, 12)).collect());
        let base = crate::baseline::from_runs(&sc, std::slice::from_ref(&base_run), None);
        let by_file = against_baseline(&sc, &base, &cand);
        let by_arm = against_arm(&sc, &base_run, &cand);
        for j in [&by_file, &by_arm] {
            assert_eq!(j.result.status, Status::Compared);
            assert_eq!(j.result.measured.ok, 30);
        }
        let checks = |j: &Judged| evaluate(std::slice::from_ref(j.gate_input.as_ref().unwrap())).0;
        let (file, arm) = (checks(&by_file), checks(&by_arm));
        assert!(!file.is_empty());
        assert_eq!(file.len(), arm.len());
        for (f, a) in file.iter().zip(&arm) {
            assert_eq!((f.metric, f.kind, f.verdict), (a.metric, a.kind, a.verdict));
            // (a baseline file stores rounded values: the ratios agree to rounding)
            match (f.ratio, a.ratio) {
                (Some(x), Some(y)) => assert!((x - y).abs() < 1e-9, "{f:?} vs {a:?}"),
                (x, y) => assert_eq!(x, y),
            }
        }
        // every latency is 1.5x the reference's: the P50 checks see it and fail
        let p50_ttft = file
            .iter()
            .find(|c| {
                c.metric == Some(Metric::Ttft)
                    && c.kind == CheckKind::Quantile(crate::config::Quantile::P50)
            })
            .unwrap();
        assert!((p50_ttft.ratio.unwrap() - 1.5).abs() < 1e-6, "{p50_ttft:?}");
        assert_eq!(p50_ttft.verdict, Verdict::Fail);
        // the baseline is shown as such; the base arm is not a baseline file
        assert_eq!(
            by_file.result.baseline.as_ref().map(|b| b.requests),
            Some(30)
        );
        assert!(by_arm.result.baseline.is_none());
    }

    #[test]
    fn an_error_rate_above_max_error_rate_cannot_be_measured() {
        let sc = scenario("    gate: {max_error_rate: 0.1}\n");
        let base_run = run_of((0..20).map(|i| ok(i, 1.0, 12)).collect());
        let base = crate::baseline::from_runs(&sc, std::slice::from_ref(&base_run), None);
        // 3 failures in 20 (15 %) is above 10 %
        let cand = run_of(
            (0..20)
                .map(|i| if i < 3 { failed(i) } else { ok(i, 1.0, 12) })
                .collect(),
        );
        let want = "error rate 15.0% is above max_error_rate 10.0% (first failure: HTTP 500: boom)";
        let j = against_baseline(&sc, &base, &cand);
        assert_eq!(j.result.status, Status::Unmeasurable);
        assert_eq!(j.result.status_detail, want);
        assert_eq!(
            error_rate_problem(&sc, &j.result.measured),
            Some((Status::Unmeasurable, want.to_string()))
        );
        let j = against_arm(&sc, &base_run, &cand);
        assert_eq!(j.result.status, Status::Unmeasurable);
        assert_eq!(j.result.status_detail, format!("candidate arm: {want}"));
        assert!(j.gate_input.is_none());
        // 2 in 20 (10 %) is not above it
        let cand = run_of(
            (0..20)
                .map(|i| if i < 2 { failed(i) } else { ok(i, 1.0, 12) })
                .collect(),
        );
        assert_eq!(
            against_baseline(&sc, &base, &cand).result.status,
            Status::Compared
        );
    }

    #[test]
    fn workload_drift_is_a_note_or_makes_the_baseline_stale() {
        // the prompt grew: TTFT and E2E depend on it, TPOT does not
        let sc = scenario("");
        let base_run = run_of((0..20).map(|i| ok(i, 1.0, 12)).collect());
        let base = crate::baseline::from_runs(&sc, std::slice::from_ref(&base_run), None);
        let cand = run_of((0..20).map(|i| ok(i, 1.0, 30)).collect());
        let j = against_baseline(&sc, &base, &cand);
        assert_eq!(j.result.status, Status::Compared);
        let note = j
            .result
            .notes
            .iter()
            .find(|n| n.kind == NoteKind::WorkloadDrift)
            .expect("a drift note");
        assert!(
            note.text
                .starts_with("workload drift: median prompt tokens 12 in the baseline vs 30 now"),
            "{note}"
        );
        // (the default gate.metrics are TTFT and TPOT)
        assert!(note.text.contains("; TTFT not compared"), "{note}");
        let compared: Vec<Metric> = j
            .gate_input
            .unwrap()
            .metrics
            .iter()
            .map(|(m, _, _)| *m)
            .collect();
        assert_eq!(compared, vec![Metric::Tpot]);
        // against the base arm, the same drift in the words of two arms
        let j = against_arm(&sc, &base_run, &cand);
        assert!(
            j.result.notes.iter().any(|n| n.text.starts_with(
                "workload drift between the arms: median prompt tokens 12 in the base arm vs 30 in the candidate arm"
            )),
            "{:?}",
            j.result.notes
        );

        // every gated metric depends on it: nothing compared, the baseline stale
        let sc = scenario("    gate: {metrics: [ttft, e2e]}\n");
        let base = crate::baseline::from_runs(&sc, std::slice::from_ref(&base_run), None);
        let j = against_baseline(&sc, &base, &cand);
        assert_eq!(j.result.status, Status::Stale);
        assert!(
            j.result
                .status_detail
                .starts_with("workload drift: median prompt tokens 12 in the baseline vs 30 now"),
            "{}",
            j.result.status_detail
        );
        assert!(j.gate_input.is_none());
        let j = against_arm(&sc, &base_run, &cand);
        assert_eq!(j.result.status, Status::Misconfigured);
        assert!(j
            .result
            .status_detail
            .starts_with("the arms ran different workloads: "));
    }
}
