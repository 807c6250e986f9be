//! The `calibrate` table: runs every row (or those whose label contains `--only`'s text) and
//! prints it, section by section: committed baselines, ITL P99, A/B designs, paired requests,
//! SLO checks, cold starts. Each row's seed is the run's seed plus an offset of its section and its index.

use super::ab::{run_ab, AbExperiment};
use super::ab_rows::ab_experiments;
use super::committed::{run_experiment, Experiment};
use super::committed_rows::experiments;
use super::itl::{itl_experiments, run_itl, ITL};
use super::noise::TTFT;
use super::paired::{paired_experiments, run_paired, PROMPTS, WITHIN_SIGMA};
use super::parse::{parse_experiments, run_parse};
use super::slo::{run_slo, slo_experiments, true_quantile};
use std::fmt::Write;

/// Runs every experiment and renders the table: the header, then each section that has a row
/// left by `filter`, one blank line between them.
pub fn report(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "perfgate calibrate: {reps} replicates per row, seed {seed}, alpha 0.01 (Holm), default bands");
    let _ = writeln!(
        out,
        "FAIL rate = false-alarm rate for null rows, power otherwise. n/needed: median of (n where a\nsequential null run stopped) / (first look >= the samples the first look's WARN said it needed).\n"
    );
    let sections = [
        committed_section(reps, seed, filter),
        itl_section(reps, seed, filter),
        ab_section(reps, seed, filter),
        paired_section(reps, seed, filter),
        slo_section(reps, seed, filter),
        parse_section(reps, seed, filter),
        outputs_section(reps, seed, filter),
        super::cold_start::section(reps, seed, &|l| kept(filter, l)),
    ];
    let shown: Vec<String> = sections.into_iter().filter(|s| !s.is_empty()).collect();
    out.push_str(&shown.join("\n"));
    out
}

/// True when `label` is a row `filter` keeps (every row without one).
fn kept(filter: Option<&str>, label: &str) -> bool {
    filter.is_none_or(|f| label.contains(f))
}

/// Which index a row's seed offset counts: among every row of its list, or among those kept.
#[derive(Clone, Copy)]
pub(super) enum Index {
    AmongAll,
    AmongKept,
}

/// One section: the `rows` that `keep` keeps, under the `head` lines, then one `line` a row
/// (given the row's [`Index`]); nothing when no row is kept.
pub(super) fn section<E>(
    rows: Vec<E>,
    keep: impl Fn(&E) -> bool,
    index: Index,
    head: &[String],
    line: impl Fn(u64, &E) -> String,
) -> String {
    let rows: Vec<(u64, E)> = (rows.into_iter().enumerate())
        .filter(|(_, e)| keep(e))
        .enumerate()
        .map(|(k, (i, e))| match index {
            Index::AmongAll => (i as u64, e),
            Index::AmongKept => (k as u64, e),
        })
        .collect();
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    for l in head {
        let _ = writeln!(out, "{l}");
    }
    for (i, e) in &rows {
        let _ = writeln!(out, "{}", line(*i, e));
    }
    out
}

/// The committed-baseline section: the gate beside the two comparator rules; each row seeded by
/// its index among every row.
fn committed_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let columns = format!(
        "{:<48} {:>9} {:>10} {:>10} {:>8} {:>10}",
        "experiment", "perfgate", "threshold", "t-test/run", "mean n", "n/needed"
    );
    section(
        experiments(),
        |e| kept(filter, &e.label),
        Index::AmongAll,
        &[columns],
        |i, e| {
            let r = run_experiment(e, reps, seed.wrapping_add(i * 7919));
            format!(
                "{:<48} {:>8.1}% {:>9.1}% {:>10} {:>8.0} {:>10}",
                e.label,
                r.perfgate * 100.0,
                r.threshold * 100.0,
                r.ttest
                    .map(|t| format!("{:.1}%", t * 100.0))
                    .unwrap_or_else(|| "n/a".into()),
                r.mean_n,
                r.need_ratio
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "-".into()),
            )
        },
    )
}

/// The ITL P99 section; each row seeded by its index among the rows kept.
fn itl_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let head = [
        format!(
            "ITL P99 (gate.metrics: [ttft, tpot, itl]): gaps ~20 ms, request speeds log-sd {}, gap noise log-sd {},\n{:.1} % of gaps {}x; each scenario gates TTFT, TPOT (P50, P99; TPOT = a request's mean gap) and ITL P99\n(band {:.0}/{:.0} %). family = any FAIL of the whole family; ITL, TPOT P50 = FAIL per check after Holm;\nclustered, naive = the ITL test alone at alpha 0.01, requests as clusters vs gaps as independent.\n",
            ITL.request_sigma,
            ITL.gap_sigma,
            ITL.hiccup_share * 100.0,
            ITL.hiccup_factor,
            crate::config::scenario::ITL_BAND.warn * 100.0,
            crate::config::scenario::ITL_BAND.fail * 100.0,
        ),
        format!(
            "{:<48} {:>8} {:>8} {:>9} {:>10} {:>8}",
            "experiment", "family", "ITL", "TPOT P50", "clustered", "naive"
        ),
    ];
    section(
        itl_experiments(),
        |e| kept(filter, &e.label),
        Index::AmongKept,
        &head,
        |i, e| {
            let r = run_itl(e, reps, seed.wrapping_add(2_000_003 + i * 7919));
            format!(
                "{:<48} {:>7.1}% {:>7.2}% {:>8.1}% {:>9.2}% {:>7.2}%",
                e.label,
                r.family * 100.0,
                r.itl * 100.0,
                r.tpot * 100.0,
                r.clustered * 100.0,
                r.naive * 100.0
            )
        },
    )
}

/// The A/B section: the A/B rows, then the committed-baseline rows at the same drift; each row
/// seeded by its index among every row of its kind.
fn ab_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let mut out = String::new();
    let (ab, committed) = ab_experiments();
    let ab: Vec<(usize, AbExperiment)> = ab
        .into_iter()
        .enumerate()
        .filter(|(_, e)| kept(filter, &e.label))
        .collect();
    let committed: Vec<(usize, Experiment)> = committed
        .into_iter()
        .enumerate()
        .filter(|(_, e)| kept(filter, &e.label))
        .collect();
    if ab.is_empty() && committed.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "A/B designs (perfgate ab): drift over the run, common to both arms, every scenario and metric;\nn per arm. FAIL = false-alarm rate for null rows, power otherwise; FAIL|sigWARN = a FAIL or a WARN\nfor a significant slowdown beyond the warn tolerance (not an inconclusive WARN).\n"
    );
    let _ = writeln!(
        out,
        "{:<58} {:>9} {:>13} {:>8}",
        "experiment", "FAIL", "FAIL|sigWARN", "mean n"
    );
    for (i, e) in &ab {
        let r = run_ab(e, reps, seed.wrapping_add(2_000_003 + *i as u64 * 7919));
        let _ = writeln!(
            out,
            "{:<58} {:>8.1}% {:>12.1}% {:>8.0}",
            e.label,
            r.fail * 100.0,
            r.flagged * 100.0,
            r.mean_n
        );
    }
    for (i, e) in &committed {
        let r = run_experiment(e, reps, seed.wrapping_add(3_000_017 + *i as u64 * 7919));
        let _ = writeln!(
            out,
            "{:<58} {:>8.1}% {:>13} {:>8.0}",
            e.label,
            r.perfgate * 100.0,
            "-",
            r.mean_n
        );
    }
    out
}

/// The paired section (issue 43): the TTFT P50 on a prompt mix, paired and unpaired on the same
/// replicates; each row seeded by its index among the rows kept.
fn paired_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let head = [
        format!("Paired requests (a prompt set, generated lengths, a trace: the same requests by index): {PROMPTS} prompts,\nTTFT 10 ms + a prefill of 10 to 390 ms (20 to 400 ms), within-request log-sd {WITHIN_SIGMA}; the TTFT P50 check\nalone, paired (signed-rank on per-request log ratios) and unpaired (rank sum), same replicates; FAIL rate.\n"),
        format!("{:<48} {:>9} {:>9}", "experiment", "paired", "unpaired"),
    ];
    section(
        paired_experiments(),
        |e| kept(filter, &e.label),
        Index::AmongKept,
        &head,
        |i, e| {
            let r = run_paired(e, reps, seed.wrapping_add(4_000_037 + i * 7919));
            format!(
                "{:<48} {:>8.1}% {:>8.1}%",
                e.label,
                r.paired * 100.0,
                r.unpaired * 100.0
            )
        },
    )
}

/// The SLO section; each row seeded by its index among the rows kept.
fn slo_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let head = [
        format!("SLO checks (gate.slo, no baseline): TTFT profile, objective on P90, one check at alpha 0.01.\nThe true P90 is {:.1} ms (mixture CDF solved by bisection). FAIL at the true P90 = false FAIL rate.\n", true_quantile(&TTFT, 0.9)),
        format!("{:<48} {:>9} {:>9} {:>9}", "experiment", "FAIL", "PASS", "WARN"),
    ];
    section(
        slo_experiments(),
        |e| kept(filter, &e.label),
        Index::AmongKept,
        &head,
        |i, e| {
            percents(
                &e.label,
                48,
                &run_slo(e, reps, seed.wrapping_add(1_000_003 + i * 7919)),
            )
        },
    )
}

/// A row of rates as percentages: `label` padded to `width`, then each rate 9 wide.
pub(super) fn percents(label: &str, width: usize, rates: &[f64]) -> String {
    let mut line = format!("{label:<width$}");
    for r in rates {
        let _ = write!(line, " {:>8.1}%", r * 100.0);
    }
    line
}

/// The parse-failure section; each row seeded by its index among the rows kept.
fn parse_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    let head = [
        "Structured output (parse failures, issue 44): the share of answers that did not parse, one-sided\nFisher test with the error rate in a Holm family of 2; n per side. FAIL = false-alarm rate for the\nnull rows (5% on both sides), power otherwise.\n".to_string(),
        format!("{:<48} {:>9}", "experiment", "FAIL"),
    ];
    section(
        parse_experiments(),
        |e| kept(filter, &e.label),
        Index::AmongKept,
        &head,
        |i, e| {
            percents(
                &e.label,
                48,
                &[run_parse(e, reps, seed.wrapping_add(2_000_003 + i * 7919))],
            )
        },
    )
}

/// The `gate.outputs` section; each row seeded by its index among the rows kept.
fn outputs_section(reps: usize, seed: u64, filter: Option<&str>) -> String {
    use super::outputs::{outputs_experiments, run_outputs};
    let head = [
        "Answers that changed (gate.outputs, perfgate ab and check at temperature 0): each send perturbed with probability\n\"self\" (a server that is not batch-invariant; a pair of sends then differs 1 - (1 - self)^2 of the time),\nthe candidate answering otherwise in a share of requests; Fisher one-sided against the base's repeats (check: the\nbaseline's other bless runs against its first), alpha 0.01.\n".to_string(),
        format!("{:<80} {:>9} {:>9} {:>9}", "experiment", "FAIL", "WARN", "PASS"),
    ];
    section(
        outputs_experiments(),
        |e| kept(filter, &e.label),
        Index::AmongKept,
        &head,
        |i, e| {
            let r = run_outputs(e, reps, seed.wrapping_add(5_000_011 + i * 7919));
            percents(&e.label, 80, &r)
        },
    )
}
