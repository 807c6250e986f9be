//! Unit tests of the gate's stages and check kinds.

use super::*;
use crate::config::scenario::default_band;

fn gate(quantiles: Vec<Quantile>) -> GateSpec {
    let mut bands = BTreeMap::new();
    for m in [Metric::Ttft, Metric::Tpot] {
        for q in [Quantile::P50, Quantile::P90, Quantile::P99] {
            bands.insert((m, q), default_band(q));
        }
    }
    GateSpec {
        metrics: vec![Metric::Tpot],
        quantiles,
        bands,
        min_delta_ms: BTreeMap::from([(Metric::Tpot, 0.5)]),
        // an empty `gate:`'s: alpha 0.01, no error budget, confirmation, SLO, ITL, cache, acceptance
        // or cold-start check; outputs compared
        ..GateSpec::default()
    }
}

/// Deterministic pseudo-lognormal sample: median `med`, log-sd ~0.1, via a fixed grid of
/// normal quantiles (so tests are exact and repeatable).
fn sample(med: f64, n: usize, phase: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let u = ((i as f64 + 0.5 + phase) / n as f64).clamp(0.001, 0.999);
            med * (0.1 * stats::normal::normal_quantile(u)).exp()
        })
        .collect()
}

/// Scenario "s" of the committed design with no metric sample: `errors` the requests a side;
/// no stop, spread, client delay, SLO, ITL or quality sample.
fn scenario(gate: GateSpec, errors: ErrorCounts) -> ScenarioSamples {
    ScenarioSamples {
        client_delay: None,
        pairing: Pairing::default(),
        scenario: "s".into(),
        gate,
        metrics: vec![],
        errors,
        stopped: ErrorCounts::default(),
        spread: BTreeMap::new(),
        looks: 1,
        slo: Vec::new(),
        design: Design::Committed,
        itl: None,
        quality: Default::default(),
    }
}

/// Metric `m`'s samples, no request failed on either side.
fn ok(m: Metric, b: Vec<f64>, c: Vec<f64>) -> (Metric, Samples, Samples) {
    (
        m,
        Samples { ok: b, failed: 0 },
        Samples { ok: c, failed: 0 },
    )
}

/// TPOT of `n` requests a side gated at `qs`: median 10 ms against median `cand` ms.
fn tpot_vs(cand: f64, n: usize, qs: Vec<Quantile>) -> ScenarioSamples {
    ScenarioSamples {
        metrics: vec![ok(Metric::Tpot, sample(10.0, n, 0.0), sample(cand, n, 0.3))],
        ..scenario(gate(qs), ErrorCounts::new((0, n), (0, n)))
    }
}

/// [`run`] of `n` requests a side: median 10 ms against median `cand` ms at grid `phase`.
fn run_vs(n: usize, cand: f64, phase: f64, qs: Vec<Quantile>) -> Vec<Check> {
    run(sample(10.0, n, 0.0), sample(cand, n, phase), qs)
}

fn run(b: Vec<f64>, c: Vec<f64>, qs: Vec<Quantile>) -> Vec<Check> {
    let s = ScenarioSamples {
        metrics: vec![ok(Metric::Tpot, b, c)],
        ..scenario(gate(qs), ErrorCounts::new((0, 20), (0, 20)))
    };
    evaluate(&[s]).0
}

#[test]
fn thirty_percent_slower_tpot_fails() {
    let checks = run_vs(20, 13.0, 0.3, vec![Quantile::P50]);
    let p50 = &checks[0];
    assert_eq!(p50.verdict, Verdict::Fail, "{p50:?}");
    assert!((p50.ratio.unwrap() - 1.3).abs() < 0.03, "{:?}", p50.ratio);
}

#[test]
fn unchanged_passes_and_p99_is_info_at_n20() {
    let checks = run_vs(20, 10.0, 0.4, vec![Quantile::P50, Quantile::P99]);
    assert_eq!(checks[0].verdict, Verdict::Pass, "{:?}", checks[0]);
    assert_eq!(checks[1].verdict, Verdict::Info);
    assert_eq!(checks[1].samples_needed, Some(459)); // ln(0.01)/ln(0.99) = 458.2
    assert!(checks.iter().all(|c| c.verdict != Verdict::Fail));
}

#[test]
fn faster_is_improved() {
    let checks = run_vs(20, 7.0, 0.2, vec![Quantile::P50]);
    assert_eq!(checks[0].verdict, Verdict::Improved, "{:?}", checks[0]);
}

#[test]
fn p99_gates_with_large_n() {
    let checks = run_vs(600, 20.0, 0.1, vec![Quantile::P99]);
    assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
    // The smallest detectable change is shown: with a log-sd of 0.1 the baseline's 99 %
    // bounds of P99 at n = 600 are close, so it is a little above the 50 % tolerance.
    let mdc = checks[0].min_detectable_change.unwrap();
    assert!((0.5..0.7).contains(&mdc), "{mdc}");
    let same = run_vs(600, 10.0, 0.5, vec![Quantile::P99]);
    assert_eq!(same[0].verdict, Verdict::Pass, "{:?}", same[0]);
}

#[test]
fn run_spread_widens_the_fail_tolerance() {
    // +12 % on TPOT: FAIL at the default 10 %; with tau = 0.05 from a 5-run baseline the fail
    // tolerance becomes exp(2.33 * 0.05 * sqrt(1.2)) - 1 = 13.6 %, so it is not a FAIL.
    let mk = |spread: BTreeMap<Metric, Spread>| ScenarioSamples {
        spread,
        ..tpot_vs(11.2, 100, vec![Quantile::P50])
    };
    let (plain, _) = evaluate(&[mk(BTreeMap::new())]);
    assert_eq!(plain[0].verdict, Verdict::Fail, "{:?}", plain[0]);
    let (wide, _) = evaluate(&[mk(BTreeMap::from([(
        Metric::Tpot,
        Spread {
            tau: 0.05,
            runs: 5,
            nights: None,
        },
    )]))]);
    assert_ne!(wide[0].verdict, Verdict::Fail, "{:?}", wide[0]);
    assert!((wide[0].fail - 0.1361).abs() < 0.0005);
    assert_eq!(wide[0].fail_configured, Some(0.10));
    assert!(
        wide[0].reason.contains("widened from 10% to 13.6%"),
        "{}",
        wide[0].reason
    );
    // An A/B design measures both arms in one run: drift cancels, nothing is widened even
    // if a spread is passed.
    let mut ab = mk(BTreeMap::from([(
        Metric::Tpot,
        Spread {
            tau: 0.05,
            runs: 5,
            nights: None,
        },
    )]));
    ab.design = Design::Interleaved;
    let (ab, _) = evaluate(&[ab]);
    assert_eq!(ab[0].verdict, Verdict::Fail, "{:?}", ab[0]);
    assert_eq!(ab[0].fail, 0.10);
    assert_eq!(ab[0].fail_configured, None);
}

/// Issue 41: nothing capped a tolerance learned from the nightly history: nights alternating
/// 1.0x and 1.5x learned tau 0.614 and a 4x TPOT passed a 477 % fail tolerance.
#[test]
fn a_tolerance_learned_from_nights_is_capped_at_three_times_the_configured() {
    let mk = |nights: Option<usize>| ScenarioSamples {
        spread: BTreeMap::from([(
            Metric::Tpot,
            Spread {
                tau: 0.6144,
                runs: 2,
                nights,
            },
        )]),
        ..tpot_vs(40.0, 100, vec![Quantile::P50])
    };
    // learned from 30 nights: exp(2.33 x 0.6144 x sqrt 1.5) - 1 = 477 %, capped at 3 x 10 %
    let (c, _) = evaluate(&[mk(Some(30))]);
    assert!((c[0].fail - 0.30).abs() < 1e-12, "{}", c[0].fail);
    assert_eq!(c[0].verdict, Verdict::Fail, "{:?}", c[0]);
    assert!(
        c[0].reason.contains("(fail tolerance widened from 10% to 30.0% because 30 nights of history move by tau 61.4% from night to night; a tolerance learned from the nights is at most 3x the configured one)"),
        "{}",
        c[0].reason
    );
    // bless's runs are not the nights: their widening is as it was
    let (c, _) = evaluate(&[mk(None)]);
    assert!((c[0].fail - 4.773).abs() < 0.001, "{}", c[0].fail);
}

#[test]
fn run_spread_widens_the_tail_exceedance_check_too() {
    // A P90 1.3x the baseline's (every request 1.3x slower): tail>P90 FAILs at its 20 %
    // band; with tau = 0.15 from a 5-run baseline the band is
    // exp(2.33 * 0.15 * sqrt(1.2)) - 1 = 46.6 %, and a drift of 1.3x is not a FAIL there.
    let mk = |spread: BTreeMap<Metric, Spread>| ScenarioSamples {
        spread,
        ..tpot_vs(13.0, 100, vec![Quantile::P50, Quantile::P99])
    };
    let tail = |checks: &[Check]| {
        checks
            .iter()
            .find(|c| c.kind == CheckKind::TailExceedance)
            .cloned()
            .unwrap()
    };
    let plain = tail(&evaluate(&[mk(BTreeMap::new())]).0);
    assert_eq!(plain.verdict, Verdict::Fail, "{plain:?}");
    let wide = tail(
        &evaluate(&[mk(BTreeMap::from([(
            Metric::Tpot,
            Spread {
                tau: 0.15,
                runs: 5,
                nights: None,
            },
        )]))])
        .0,
    );
    assert_ne!(wide.verdict, Verdict::Fail, "{wide:?}");
    assert!((wide.fail - 0.4665).abs() < 0.0005, "{}", wide.fail);
    assert_eq!(wide.fail_configured, Some(0.20));
    assert!(wide.reason.contains("widened from 20%"), "{}", wide.reason);
}

/// A blocked A/B scenario of TPOT: blocks of `per_block` requests in `order` (A base, B
/// candidate), the candidate `change` times slower, and a drift that makes the machine
/// `drift` times slower by the end of the run, linearly in time (request by request).
fn blocked(order: &str, per_block: usize, change: f64, drift: f64) -> ScenarioSamples {
    let total = (order.len() * per_block) as f64;
    let mut blocks = Vec::new();
    let (mut base, mut cand) = (Vec::new(), Vec::new());
    for (k, side) in order.chars().enumerate() {
        let grid = sample(10.0, per_block, 0.1 * k as f64);
        // A fixed permutation so the grid's order is not the time order.
        let vals: Vec<f64> = (0..per_block)
            .map(|j| {
                let u = (k * per_block + j) as f64 / total;
                let x = grid[(j * 7 + 3) % per_block] * drift.powf(u);
                if side == 'B' {
                    x * change
                } else {
                    x
                }
            })
            .collect();
        if side == 'B' {
            cand.extend_from_slice(&vals);
        } else {
            base.extend_from_slice(&vals);
        }
        blocks.push(Block {
            side: if side == 'B' {
                Side::Candidate
            } else {
                Side::Base
            },
            metrics: vec![(
                Metric::Tpot,
                Samples {
                    ok: vals,
                    failed: 0,
                },
            )],
        });
    }
    let (nb, nc) = (base.len(), cand.len());
    ScenarioSamples {
        metrics: vec![ok(Metric::Tpot, base, cand)],
        design: Design::Blocked(blocks),
        ..scenario(
            gate(vec![Quantile::P50]),
            ErrorCounts::new((0, nb), (0, nc)),
        )
    }
}

#[test]
fn blocked_abba_cancels_a_linear_drift() {
    // ABBA, 20 TPOT requests per block (40 per arm), the machine 10 % slower by the end of
    // the run, no change: the drift-corrected ratio is 1.00 and the check is not a FAIL.
    let (checks, _) = evaluate(&[blocked("ABBA", 20, 1.0, 1.10)]);
    let p50 = &checks[0];
    assert!((p50.ratio.unwrap() - 1.0).abs() < 0.005, "{p50:?}");
    assert_eq!(p50.verdict, Verdict::Pass, "{p50:?}");
    assert!(
        p50.reason.contains("blocked ABBA: 4 blocks"),
        "{}",
        p50.reason
    );
    // The same drift with the candidate 20 % slower: FAIL, at 1.20.
    let (checks, _) = evaluate(&[blocked("ABBA", 20, 1.2, 1.10)]);
    let p50 = &checks[0];
    assert_eq!(p50.verdict, Verdict::Fail, "{p50:?}");
    assert!((p50.ratio.unwrap() - 1.2).abs() < 0.01, "{p50:?}");
}

#[test]
fn a_pooled_comparison_of_blocks_is_biased_by_drift() {
    // ABAB, the machine 10 % slower by the end, no change: each candidate block ran one block
    // after its base block, so pooling the blocks sees about a quarter of the drift
    // (ln 1.1 / 4 = +2.4 %); the blocked estimate removes it.
    let mut s = blocked("ABAB", 20, 1.0, 1.10);
    let (blocked_checks, _) = evaluate(std::slice::from_ref(&s));
    s.design = Design::Interleaved;
    let (pooled, _) = evaluate(&[s]);
    let (rb, rp) = (blocked_checks[0].ratio.unwrap(), pooled[0].ratio.unwrap());
    assert!((rb - 1.0).abs() < 0.005, "blocked {rb}");
    assert!((rp - 1.024).abs() < 0.01, "pooled {rp}");
    // A throttling machine, 60 % slower by the end of ABAB: pooling reads it as a +12.5 %
    // regression and FAILs; the blocked estimate says 1.00 and passes.
    let mut s = blocked("ABAB", 20, 1.0, 1.6);
    let (blocked_checks, _) = evaluate(std::slice::from_ref(&s));
    s.design = Design::Interleaved;
    let (pooled, _) = evaluate(&[s]);
    assert_eq!(pooled[0].verdict, Verdict::Fail, "{:?}", pooled[0]);
    assert!(
        (blocked_checks[0].ratio.unwrap() - 1.0).abs() < 0.01,
        "{:?}",
        blocked_checks[0]
    );
    assert_ne!(
        blocked_checks[0].verdict,
        Verdict::Fail,
        "{:?}",
        blocked_checks[0]
    );
}

#[test]
fn a_blocked_order_that_cannot_separate_drift_is_not_compared() {
    let mut s = blocked("ABBA", 20, 1.3, 1.0);
    if let Design::Blocked(b) = &mut s.design {
        b.truncate(2);
    }
    let (checks, _) = evaluate(&[s]);
    assert_eq!(checks[0].verdict, Verdict::Info, "{:?}", checks[0]);
    assert!(checks[0]
        .reason
        .starts_with("not compared: the blocked order AB"));
}

#[test]
fn zero_baseline_cannot_hide_a_regression() {
    // A gateway that delivered every token in one chunk: TPOT 0 in the baseline. 20 ms now.
    let checks = run(
        vec![0.0; 20],
        sample(20.0, 20, 0.3),
        vec![Quantile::P50, Quantile::P99],
    );
    assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
    let same = run(vec![0.0; 20], vec![0.0; 20], vec![Quantile::P50]);
    assert_eq!(same[0].verdict, Verdict::Pass, "{:?}", same[0]);
}

#[test]
fn error_rate_increase_fails_below_max_error_rate_too() {
    let mut g = gate(vec![Quantile::P50]);
    g.max_error_rate = 0.6;
    let s = scenario(g, ErrorCounts::new((2, 40), (21, 40)));
    let (checks, _) = evaluate(&[s]);
    assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
    assert!(
        checks[0]
            .reason
            .starts_with("significantly more failed requests"),
        "{}",
        checks[0].reason
    );
}

/// Issue 41 "also found" A: requests a provider stopped on purpose (a refusal, a content filter)
/// are not failures: the error rate is untouched, and their own share gets the error rate's test.
/// 0 of 40 baseline vs 10 of 40 candidate requests stopped: one-sided Fisher p = C(40,10) /
/// C(80,10) (all 10 stops on the candidate side) = 0.000514828...
#[test]
fn more_stopped_requests_fail_their_own_share_check_not_the_error_rate() {
    let s = |stopped: ErrorCounts| ScenarioSamples {
        stopped,
        ..scenario(
            gate(vec![Quantile::P50]),
            ErrorCounts::new((0, 40), (0, 40)),
        )
    };
    let (checks, _) = evaluate(&[s(ErrorCounts::new((0, 40), (10, 40)))]);
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(checks[0].kind, CheckKind::ErrorRate);
    assert_eq!(checks[0].verdict, Verdict::Pass, "{:?}", checks[0]);
    let c = &checks[1];
    assert_eq!(c.kind, CheckKind::StoppedRate);
    assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
    assert_eq!((c.baseline, c.candidate), (Some(0.0), Some(0.25)));
    assert!(
        (c.p_value.unwrap() - 0.000514828174875).abs() < 1e-12,
        "{c:?}"
    );
    assert!(
        c.reason
            .starts_with("significantly more requests stopped by the provider"),
        "{}",
        c.reason
    );
    // no stop on either side: no such check (the Holm family of other scenarios is unchanged)
    let (checks, _) = evaluate(&[s(ErrorCounts::new((0, 40), (0, 40)))]);
    assert_eq!(checks.len(), 1, "{checks:?}");
}

/// 20 requests of 63 gaps: request speeds exp(0.15 z) on a grid, gap noise log-sd 0.1;
/// with `stall`, every 16th gap of each request twice as long.
fn itl_run(phase: f64, stall: bool) -> Vec<GapCluster> {
    (0..20)
        .map(|i| {
            let u = ((i as f64 + 0.5 + phase) / 20.0).clamp(0.01, 0.99);
            let speed = (0.15 * stats::normal::normal_quantile(u)).exp();
            let mut g = sample(20.0 * speed, 63, (i % 7) as f64 * 0.1);
            if stall {
                g.iter_mut().skip(15).step_by(16).for_each(|x| *x *= 2.0);
            }
            GapCluster::exact(g)
        })
        .collect()
}

fn itl_scenario(b: Vec<GapCluster>, c: Vec<GapCluster>, design: Design) -> ScenarioSamples {
    let mut g = gate(vec![Quantile::P50]);
    g.itl = Some(crate::config::scenario::ITL_BAND);
    ScenarioSamples {
        design,
        itl: Some(ItlSamples {
            baseline: b,
            candidate: c,
            spread: Some(Spread {
                tau: 0.15,
                runs: 5,
                nights: None,
            }),
        }),
        ..scenario(g, ErrorCounts::new((0, 20), (0, 20)))
    }
}

fn itl_of(checks: &[Check]) -> Check {
    checks
        .iter()
        .find(|c| c.kind == CheckKind::ItlTail(Quantile::P99))
        .cloned()
        .unwrap()
}

#[test]
fn itl_p99_fails_on_a_stall_every_16th_gap_and_passes_unchanged() {
    // Interleaved: no run-spread widening, the 20 % band as configured.
    let (checks, family) = evaluate(&[itl_scenario(
        itl_run(0.0, false),
        itl_run(0.3, true),
        Design::Interleaved,
    )]);
    let c = itl_of(&checks);
    assert_eq!(family, 2); // ITL P99 and errors
    assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
    assert_eq!(c.kind.label(), "ITL P99");
    assert_eq!((c.n_baseline, c.n_candidate), (1260, 1260));
    assert!(c.ratio.is_some_and(|r| r > 1.3), "{c:?}");
    assert_eq!(c.fail, 0.20);
    assert!(c.reason.contains("design effect"), "{}", c.reason);
    let same = itl_of(
        &evaluate(&[itl_scenario(
            itl_run(0.0, false),
            itl_run(0.3, false),
            Design::Interleaved,
        )])
        .0,
    );
    assert_eq!(same.verdict, Verdict::Pass, "{same:?}");
    // A committed baseline with TPOT's run spread tau 0.15 (k 5) widens the band to 46.6 %.
    let wide = itl_of(
        &evaluate(&[itl_scenario(
            itl_run(0.0, false),
            itl_run(0.3, true),
            Design::Committed,
        )])
        .0,
    );
    assert!((wide.fail - 0.4665).abs() < 0.0005, "{wide:?}");
    assert_eq!(wide.fail_configured, Some(0.20));
}

#[test]
fn itl_p99_is_info_with_too_few_gaps_or_requests() {
    let short = |phase| -> Vec<GapCluster> {
        itl_run(phase, false)
            .into_iter()
            .map(|g| GapCluster::exact(g.points[..10].to_vec()))
            .collect()
    };
    // 200 gaps cannot bound a P99 at alpha 0.01 (459 needed).
    let c = itl_of(&evaluate(&[itl_scenario(short(0.0), short(0.3), Design::Interleaved)]).0);
    assert_eq!(c.verdict, Verdict::Info, "{c:?}");
    assert!(c.p_value.is_none());
    assert!(c.reason.contains("459 baseline gaps"), "{}", c.reason);
    // 8 requests a side: too few to estimate the variance between requests.
    let few = |phase| itl_run(phase, true)[..8].to_vec();
    let c = itl_of(&evaluate(&[itl_scenario(few(0.0), few(0.3), Design::Interleaved)]).0);
    assert_eq!(c.verdict, Verdict::Info, "{c:?}");
    // A baseline without stored gaps: not compared, said so.
    let c = itl_of(
        &evaluate(&[itl_scenario(
            vec![],
            itl_run(0.3, true),
            Design::Interleaved,
        )])
        .0,
    );
    assert_eq!(c.verdict, Verdict::Info, "{c:?}");
    assert!(c.reason.contains("bless again"), "{}", c.reason);
}

#[test]
fn error_rate_increase_fails() {
    let s = scenario(
        gate(vec![Quantile::P50]),
        ErrorCounts::new((0, 100), (12, 100)),
    );
    let (checks, fam) = evaluate(&[s]);
    assert_eq!(fam, 1);
    assert_eq!(checks[0].verdict, Verdict::Fail, "{:?}", checks[0]);
}

/// Issue 32 item 6: at 20 requests a side with no failures, 4 of the 40 pooled requests lie above
/// the pooled P90 (type 7: 35.1 of 0..39), and even all 4 on the candidate side give the
/// one-sided Fisher p = C(20,4)/C(40,4) = 4845/91390 = 0.0530: above the default alpha 0.01 (and
/// 0.05), so the row cannot fail; it is INFO, out of the Holm family, and says how many a side
/// would do: at alpha 0.05, 21 (5 of 42 above 36.9: C(21,5)/C(42,5) = 20349/850668 = 0.0239); at
/// 0.01, 31 (7 of 62 above 54.9: C(31,7)/C(62,7) = 2629575/491796152 = 0.0053; 30 a side give 6 of 60,
/// C(30,6)/C(60,6) = 0.0119).
#[test]
fn a_tail_exceedance_row_that_cannot_fail_is_not_gated() {
    assert!((tail::best_exceedance_p(4, 20, 20) - 4845.0 / 91390.0).abs() < 1e-12);
    assert!((tail::best_exceedance_p(5, 21, 21) - 20349.0 / 850668.0).abs() < 1e-12);
    assert_eq!(tail::exceedance_samples_needed(0.05), Some(21));
    assert!((tail::best_exceedance_p(6, 30, 30) - 593775.0 / 50063860.0).abs() < 1e-12);
    assert_eq!(tail::exceedance_samples_needed(0.01), Some(31));
    // the 31 is for equal sides (issue 46, a fresh reader's walk: 100 baseline requests against
    // 20 gate it): 12 of 120 above, all on the candidate's 20: C(20,12)/C(120,12) = 1.19e-11
    let c = |n: u64, k: u64| (0..k).fold(1.0, |a, i| a * (n - i) as f64 / (i + 1) as f64);
    let p = tail::best_exceedance_p(12, 100, 20);
    assert!((p / (c(20, 12) / c(120, 12)) - 1.0).abs() < 1e-9, "{p}");
    assert!(p < 1.2e-11 && p > 1.19e-11, "{p}");
    let mk = |n: usize| tpot_vs(13.0, n, vec![Quantile::P50, Quantile::P99]);
    let tail_of = |n: usize| {
        evaluate(&[mk(n)])
            .0
            .into_iter()
            .find(|c| c.kind == CheckKind::TailExceedance)
            .unwrap()
    };
    let c20 = tail_of(20);
    assert_eq!(c20.verdict, Verdict::Info, "{c20:?}");
    assert_eq!(c20.p_value, None, "out of the Holm family");
    assert_eq!(c20.samples_needed, Some(31));
    assert!(
        c20.reason
            .starts_with("not gated at n = 20: with 4 of 40 requests above the pooled P90")
            && c20.reason.contains("p = 0.053 > alpha 0.01")
            && c20
                .reason
                .ends_with("gating it needs at least 31 requests per side"),
        "{}",
        c20.reason
    );
    // at 31 a side it is gated: the 7 above the pooled P90 are all candidates, p = 0.0053, in
    // the Holm family (x 2 there: 0.0107, a WARN, not a FAIL, at alpha 0.01)
    assert_eq!(tail_of(30).verdict, Verdict::Info);
    let c31 = tail_of(31);
    assert!(
        (c31.p_value.unwrap() - 2629575.0 / 491796152.0).abs() < 1e-9,
        "{c31:?}"
    );
    assert_eq!(c31.verdict, Verdict::Warn, "{c31:?}");
}

/// Issue 30: a client too busy to stamp tokens on time takes the TTFT checks its delay could
/// explain out of the gate (INFO, out of the Holm family); TPOT (a difference of two stamps)
/// stays gated; a client that kept up changes nothing.
#[test]
fn a_client_delay_over_half_the_fail_move_ungates_ttft_not_tpot() {
    // the probe's lag beyond the timer's 1 ms: an idle client reads ~1.15 ms -> 0.15 ms
    let d = ClientDelay::from_lag(1.15, 3.0, Some(0.3));
    assert!((d.p50_ms - 0.15).abs() < 1e-12 && (d.p99_ms - 2.0).abs() < 1e-12);
    assert_eq!(d.busy, None);
    assert_eq!(ClientDelay::from_lag(0.4, f64::NAN, None).p50_ms, 0.0);
    // a CPU-bound client (the bench's 1,024 streams on one core: lag P50 1.43, P99 52.25 ms,
    // every cycle of its core used): its delay is the lag's P99 beyond the timer, 51.25 ms
    let bound = ClientDelay::from_lag(1.425, 52.25, Some(0.97));
    assert!((bound.p50_ms - 51.25).abs() < 1e-12, "{bound:?}");
    assert_eq!(bound.busy, Some(crate::gate::Busy::Cpu(0.97)));
    // its lag's P99 alone past the client-busy note's 10 ms: busy too (the same run measured
    // a CPU share of 0.72 once: the simulator's core was saturated as well)
    let tail = ClientDelay::from_lag(1.287, 185.794, Some(0.716));
    assert_eq!(tail.busy, Some(crate::gate::Busy::LagTail));
    assert!((tail.p50_ms - 184.794).abs() < 1e-9);
    let mk = |delay: Option<ClientDelay>| {
        let mut g = gate(vec![Quantile::P50]);
        g.metrics = vec![Metric::Ttft, Metric::Tpot];
        g.min_delta_ms.insert(Metric::Ttft, 1.0);
        let s = ScenarioSamples {
            client_delay: delay,
            metrics: vec![
                ok(Metric::Ttft, sample(40.0, 20, 0.0), sample(40.0, 20, 0.4)),
                ok(Metric::Tpot, sample(4.0, 20, 0.0), sample(4.0, 20, 0.4)),
            ],
            ..scenario(g, ErrorCounts::new((0, 20), (0, 20)))
        };
        evaluate(&[s])
    };
    let find = |cs: &[Check], m: Metric| {
        cs.iter()
            .find(|c| c.metric == Some(m) && c.kind == CheckKind::Quantile(Quantile::P50))
            .unwrap()
            .clone()
    };
    // TTFT P50 fails at 10 % of ~40 ms = ~4 ms: half is ~2 ms
    let (busy, family) = mk(Some(ClientDelay {
        p50_ms: 2.5,
        p99_ms: 9.0,
        busy: None,
    }));
    let ttft = find(&busy, Metric::Ttft);
    assert_eq!(ttft.verdict, Verdict::Info, "{}", ttft.reason);
    assert_eq!(ttft.p_value, None);
    assert!(
        ttft.reason.starts_with("not gated: perfgate itself was late by 2.5 ms (event-loop lag median beyond the timer's 1 ms)"),
        "{}",
        ttft.reason
    );
    let tpot = find(&busy, Metric::Tpot);
    assert_eq!(tpot.verdict, Verdict::Pass, "{}", tpot.reason);
    let (calm, calm_family) = mk(Some(ClientDelay {
        p50_ms: 0.15,
        p99_ms: 2.0,
        busy: None,
    }));
    assert_eq!(find(&calm, Metric::Ttft).verdict, Verdict::Pass);
    // the ungated check left the Holm family
    assert_eq!(family + 1, calm_family);
    let (none, _) = mk(None);
    assert_eq!(find(&none, Metric::Ttft).verdict, Verdict::Pass);
    // a CPU-bound client whose lag median looked calm (1.425 ms) is judged by its P99
    let (bound, _) = mk(Some(ClientDelay::from_lag(1.425, 52.25, Some(0.97))));
    let ttft = find(&bound, Metric::Ttft);
    assert_eq!(ttft.verdict, Verdict::Info, "{}", ttft.reason);
    assert_eq!(ttft.reason_kind, crate::gate::ReasonKind::ClientBusy);
    assert!(
        ttft.reason.starts_with("not gated: perfgate itself was late by 51.2 ms (its process kept 97% of its cores busy, so the event-loop lag's P99 beyond the timer's 1 ms)"),
        "{}",
        ttft.reason
    );
    // such a client delays tokens unevenly: TPOT is weighed against the delay too
    assert_eq!(find(&bound, Metric::Tpot).verdict, Verdict::Info);
    // a calm tail (a shared runner: P99 2-5 ms) and half the cores: gated as before
    let (idle, _) = mk(Some(ClientDelay::from_lag(1.425, 5.0, Some(0.5))));
    assert_eq!(find(&idle, Metric::Ttft).verdict, Verdict::Pass);
    let measured = crate::gate::ReasonKind::Measured;
    assert_eq!(find(&idle, Metric::Ttft).reason_kind, measured);
    // a late tail on a busy machine while perfgate itself idles: the note, still gated
    let (machine, _) = mk(Some(ClientDelay::from_lag(1.3, 40.0, Some(0.1))));
    assert_eq!(find(&machine, Metric::Ttft).verdict, Verdict::Pass);
}

/// 24 prompts whose TTFT spans 20 to 400 ms, each with a ~5 % log-sd of its own noise (a
/// deterministic grid of normal quantiles in two permutations), the candidate `change` slower.
fn prompt_mix(change: f64) -> (Vec<f64>, Vec<f64>) {
    let z = |k: usize| stats::normal::normal_quantile((k as f64 + 0.5) / 24.0);
    (0..24)
        .map(|i| {
            let typical = 20.0 * 20f64.powf(i as f64 / 23.0);
            (
                typical * (0.05 * z(i * 7 % 24)).exp(),
                typical * change * (0.05 * z(i * 11 % 24)).exp(),
            )
        })
        .unzip()
}

fn run_mix(b: Vec<f64>, c: Vec<f64>, pairing: Pairing) -> Check {
    run_mix_spread(b, c, pairing, BTreeMap::new())
}

fn run_mix_spread(
    b: Vec<f64>,
    c: Vec<f64>,
    pairing: Pairing,
    spread: BTreeMap<Metric, Spread>,
) -> Check {
    let mut g = gate(vec![Quantile::P50]);
    g.metrics = vec![Metric::Ttft];
    let s = ScenarioSamples {
        pairing,
        metrics: vec![ok(Metric::Ttft, b, c)],
        spread,
        ..scenario(g, ErrorCounts::new((0, 24), (0, 24)))
    };
    evaluate(&[s]).0.remove(0)
}

fn matched(b: &[f64], c: &[f64]) -> Pairing {
    let d = b.iter().zip(c).map(|(b, c)| c.ln() - b.ln()).collect();
    Pairing::Matched(BTreeMap::from([(Metric::Ttft, Paired { d, tau: None })]))
}

#[test]
fn a_prompt_mix_thirty_percent_slower_fails_paired_and_only_warns_unpaired() {
    let (b, c) = prompt_mix(1.3);
    let unpaired = run_mix(b.clone(), c.clone(), Pairing::NoIdentities);
    assert_eq!(unpaired.verdict, Verdict::Warn, "{unpaired:?}");
    assert_eq!(unpaired.test, Some(P50Test::UnpairedRankSum));
    let paired = run_mix(b.clone(), c.clone(), matched(&b, &c));
    assert_eq!(paired.verdict, Verdict::Fail, "{paired:?}");
    assert_eq!(paired.test, Some(P50Test::PairedSignedRank));
    assert!(
        (paired.ratio.unwrap() - 1.3).abs() < 0.03,
        "{:?}",
        paired.ratio
    );
    // Every difference positive (24 of 24): T+ = 300. Requests 0, 6, 12, 18 have the same noise
    // on both sides (7i = 11i mod 24), so four equal differences: a tie, the normal
    // approximation: mu = 150, var = 24 * 25 * 49 / 24 - (4^3 - 4) / 48 = 1223.75,
    // z = (300 - 150 - 0.5) / 34.982 = 4.2737, p = 9.673e-6.
    assert!(
        (paired.p_value.unwrap() - 9.673e-6).abs() < 1e-9,
        "{:?}",
        paired.p_value
    );
    assert!(
        paired.reason.ends_with("; paired over 24 matched requests"),
        "{}",
        paired.reason
    );
}

#[test]
fn a_prompt_mix_unchanged_passes_paired() {
    let (b, c) = prompt_mix(1.0);
    let paired = run_mix(b.clone(), c.clone(), matched(&b, &c));
    assert_eq!(paired.verdict, Verdict::Pass, "{paired:?}");
    assert_eq!(paired.test, Some(P50Test::PairedSignedRank));
    // The interval is as narrow as the per-request noise: within +-6 %.
    let ci = paired.ci.unwrap();
    assert!(
        ci.lower.unwrap() > 0.94 && ci.upper.unwrap() < 1.06,
        "{ci:?}"
    );
}

#[test]
fn unmatched_requests_are_tested_unpaired_and_say_why() {
    let (b, c) = prompt_mix(1.0);
    let plain = run_mix(b.clone(), c.clone(), Pairing::NoIdentities);
    let ch = run_mix(b, c, Pairing::Unmatched(Unmatched::Differs { index: 3 }));
    assert_eq!(ch.test, Some(P50Test::UnpairedRankSum));
    assert_eq!(
        (ch.ratio, ch.ci, ch.p_value),
        (plain.ratio, plain.ci, plain.p_value)
    );
    assert!(
        ch.reason
            .ends_with("; unpaired: request 3 sent another prompt than the reference"),
        "{}",
        ch.reason
    );
}

/// The bless runs' tau of a prompt mix (from run medians, which jump between prompts) is
/// replaced in the paired P50's widening by the runs' spread measured request by request.
#[test]
fn the_paired_p50_is_widened_by_the_paired_spread_of_the_bless_runs() {
    let (b, c) = prompt_mix(1.3);
    let spread = BTreeMap::from([(
        Metric::Ttft,
        Spread {
            tau: 0.3,
            runs: 5,
            nights: None,
        },
    )]);
    let with = |tau: Option<f64>| {
        let d = b.iter().zip(&c).map(|(b, c)| c.ln() - b.ln()).collect();
        let pairing = Pairing::Matched(BTreeMap::from([(Metric::Ttft, Paired { d, tau })]));
        run_mix_spread(b.clone(), c.clone(), pairing, spread.clone())
    };
    // Median tau 0.3, k 5: exp(2.33 x 0.3 x sqrt(1.2)) - 1 = 115.05 %: a WARN.
    let medians = with(None);
    assert_eq!(medians.verdict, Verdict::Warn, "{medians:?}");
    assert!((medians.fail - 1.15053).abs() < 1e-4, "{}", medians.fail);
    // Paired tau 0.02: exp(2.33 x 0.02 x sqrt(1.2)) - 1 = 5.2 % < 10 %: the configured 10 %.
    let paired = with(Some(0.02));
    assert_eq!(paired.verdict, Verdict::Fail, "{paired:?}");
    assert_eq!((paired.fail, paired.tau), (0.1, None));
}

/// Issue 42: the nearly-blind rule is the gate's: a gated check whose fail tolerance the drift
/// widening took past twice the configured one (10 % -> 25 %), not at twice (20 %) nor INFO.
#[test]
fn a_fail_tolerance_widened_past_twice_the_configured_one_is_nearly_blind() {
    let widened = |fail: f64, verdict: Verdict| Check {
        fail,
        fail_configured: Some(0.10),
        verdict,
        ..Check::blank(
            "s",
            Some(Metric::Ttft),
            CheckKind::Quantile(Quantile::P50),
            0.10,
        )
    };
    assert_eq!(widened(0.25, Verdict::Pass).nearly_blind(), Some(0.10));
    assert_eq!(widened(0.20, Verdict::Pass).nearly_blind(), None);
    assert_eq!(widened(0.25, Verdict::Info).nearly_blind(), None);
    let configured = Check::blank(
        "s",
        Some(Metric::Ttft),
        CheckKind::Quantile(Quantile::P50),
        0.1,
    );
    assert_eq!(configured.nearly_blind(), None);
}
