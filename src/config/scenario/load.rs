//! The validated `load:` section: closed loop (concurrency) or open loop (a Poisson rate), the
//! measured and warmup requests, and the looks of a sequential run.

use crate::config::common::{ensure, names, within, Invalid, Named, Shard};
pub use crate::config::common::{MAX_RATE, MIN_RATE};
use crate::config::file::RawLoad;
use serde::Serialize;

/// The smallest allowed `load.samples` (docs/design.md "Scenarios").
pub const MIN_SAMPLES: u32 = 20;

/// The validated `load:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSpec {
    /// Closed-loop concurrency (in-flight requests).
    pub concurrency: u32,
    /// Measured requests (>= 20).
    pub samples: u32,
    /// Requests sent first and discarded.
    pub warmup: u32,
    /// Sequential sampling: measure up to this many requests, stopping early at a look where
    /// every gated check is decided (PASS, FAIL or IMPROVED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_samples: Option<u32>,
    /// Open loop: requests per second, Poisson arrivals (`concurrency` then caps the requests
    /// in flight). `None` = closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Seed of the open-loop arrival schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How a closed loop at concurrency > 1 reaches its concurrency (docs/scenarios.md
    /// "Steady state").
    pub ramp: Ramp,
    /// `check --load-shard I/N`: this worker's part of the load, with the scenario's totals
    /// (then `concurrency`, `samples` and `rate` above are this worker's share).
    #[serde(skip)]
    pub share: Option<LoadShare>,
    /// Open loop replaying a trace's arrivals and lengths (`rate` is then the measured
    /// window's mean rate, and the warmup's Poisson rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::config::trace::TraceSpec>,
}

/// One worker's part of a scenario's load, kept on its copy of the scenario
/// ([`super::scenario::LoadSpec::share`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadShare {
    /// Which worker (1-based) of how many.
    pub shard: Shard,
    /// The scenario's whole `load.concurrency` over all workers.
    pub total_concurrency: u32,
    /// The scenario's whole `load.samples` over all workers.
    pub total_samples: u32,
    /// The scenario's whole `load.rate` (open loop), requests/s.
    pub total_rate: Option<f64>,
    /// `--start-at`: when the workers start their measured requests together, ms since the
    /// Unix epoch.
    pub start_at_unix_ms: Option<f64>,
}

impl LoadShare {
    /// The global request (or stream) index of this worker's `local`-th one.
    pub fn global_index(&self, local: usize) -> usize {
        local * self.shard.count + self.shard.index - 1
    }
}

/// How a closed-loop look at concurrency c > 1 starts and ends (docs/scenarios.md "Steady
/// state").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ramp {
    /// The steady state: the look starts its c streams one by one, E2E/c apart (E2E the
    /// warmup's median), the first c requests (the ramp-up) are not measured, and unmeasured
    /// requests keep c in flight until the last measured one ends (the drain).
    #[default]
    Steady,
    /// The start-up burst: all c streams start at once and every request is measured, the
    /// falling concurrency of the last wave included (what perfgate measured before 0.2).
    Burst,
}

names!(Ramp { Steady => "steady", Burst => "burst" });

/// Measured requests per stream a steady-state closed loop needs at least: fewer, and a
/// measured request is nearly one per stream, so one wave's shared fate (a slow batch) moves
/// the P50, and the run measures little more than a single wave.
pub const MIN_SAMPLES_PER_STREAM: u32 = 2;

impl LoadSpec {
    /// What `validate` (and each report's notes) says about this load: samples too few for
    /// the concurrency, with the number that would do.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.rate.is_none() && self.concurrency > 1 {
            let need = self.concurrency.saturating_mul(MIN_SAMPLES_PER_STREAM);
            if self.samples < need {
                out.push(format!(
                    "load.samples {} at concurrency {}: about {:.1} measured request(s) per stream, so one wave's shared fate moves the result; use samples >= {need} ({MIN_SAMPLES_PER_STREAM} per stream)",
                    self.samples,
                    self.concurrency,
                    f64::from(self.samples) / f64::from(self.concurrency)
                ));
            }
            if self.ramp == Ramp::Burst {
                out.push(format!(
                    "load.ramp: burst: all {} streams start at once and the start-up burst and the falling concurrency of the last wave are measured; `steady` (the default) measures while the concurrency holds",
                    self.concurrency
                ));
            }
        }
        out
    }

    /// Whether a look runs the steady-state closed loop: ramp-up, measured requests while c are
    /// in flight, drain ([`Ramp::Steady`]); closed loop at concurrency > 1 only.
    pub fn steady(&self) -> bool {
        self.rate.is_none() && self.total_concurrency() > 1 && self.ramp == Ramp::Steady
    }

    /// The scenario's whole concurrency: `concurrency`, or over all workers of a load shard.
    pub fn total_concurrency(&self) -> u32 {
        self.share.map_or(self.concurrency, |s| s.total_concurrency)
    }
}

impl LoadSpec {
    /// The sample counts at which a sequential run is evaluated: `samples`, then 50, then
    /// doubling, ending at `max_samples` (e.g. 20, 50, 100, 200, 300). One look without
    /// `max_samples`. The family-wise alpha is spent evenly over the looks (Bonferroni).
    pub fn looks(&self) -> Vec<usize> {
        let first = self.samples as usize;
        let Some(max) = self.max_samples.map(|m| m as usize).filter(|&m| m > first) else {
            return vec![first];
        };
        let mut looks = vec![first];
        let mut n = first;
        while n < max {
            n = if n < 50 { 50 } else { n * 2 }.min(max);
            looks.push(n);
        }
        looks
    }
}

pub(super) fn build_load(l: &RawLoad) -> Result<LoadSpec, Invalid> {
    // Lists were expanded into one scenario per level before this (config::sweep).
    for (what, many) in [
        (
            "concurrency",
            l.concurrency.as_ref().is_some_and(|c| c.single().is_none()),
        ),
        (
            "rate",
            l.rate.as_ref().is_some_and(|r| r.single().is_none()),
        ),
    ] {
        ensure!(!many, "load.{what}: a list is not allowed here");
    }
    let rate = l.rate.as_ref().and_then(|r| r.single());
    let samples = l.samples.unwrap_or(MIN_SAMPLES);
    ensure!(
        samples >= MIN_SAMPLES,
        "load.samples is {samples}: at least {MIN_SAMPLES} measured requests are needed for a P50 comparison"
    );
    ensure!(
        samples <= 100_000,
        "load.samples is {samples}: at most 100000"
    );
    if let Some(r) = rate {
        ensure!(
            r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r),
            "load.rate is {}: use {MIN_RATE}..={MAX_RATE} requests per second",
            crate::units::Num(r)
        );
    }
    // Open loop without a cap: at most OPEN_LOOP_CONCURRENCY requests in flight.
    let default_concurrency = if rate.is_some() {
        OPEN_LOOP_CONCURRENCY
    } else {
        1
    };
    let concurrency = l.concurrency.as_ref().and_then(|c| c.single());
    let concurrency = within(
        "load.concurrency",
        concurrency.unwrap_or(default_concurrency),
        1..=4096,
        "",
    )?;
    if let Some(m) = l.max_samples {
        ensure!(
            (samples..=100_000).contains(&m),
            "load.max_samples is {m}: it must be between load.samples ({samples}) and 100000"
        );
    }
    let ramp = match l.ramp.as_deref() {
        None => Ramp::Steady,
        Some(r) => Ramp::parse(r).ok_or_else(|| format!(
            "load.ramp is `{r}`: use `steady` (measure while the concurrency holds, the default) or `burst` (measure the start-up burst too)"
        ))?,
    };
    ensure!(
        ramp == Ramp::Steady || rate.is_none(),
        "load.ramp applies to a closed loop; an open loop (load.rate) sends at its arrivals"
    );
    Ok(LoadSpec {
        trace: None,
        ramp,
        concurrency,
        samples,
        warmup: l.warmup.unwrap_or(2).min(10_000),
        max_samples: l.max_samples.filter(|&m| m > samples),
        rate,
        seed: rate.map(|_| l.seed.unwrap_or(DEFAULT_LOAD_SEED)),
        share: None,
    })
}

/// `load.trace`: reads the trace into `load` (built by [`build_load`] from the same `l`) and
/// makes the scenario an open loop at the trace's mean rate; `dir` is the scenario file's
/// directory.
pub(super) fn with_trace(
    mut load: LoadSpec,
    l: &RawLoad,
    dir: &std::path::Path,
) -> Result<LoadSpec, Invalid> {
    let Some(raw) = &l.trace else {
        return Ok(load);
    };
    ensure!(l.rate.is_none(), "load.trace sets the arrival times: leave load.rate out (load.trace.rate or time_scale scales the trace)");
    ensure!(
        l.ramp.is_none(),
        "load.ramp applies to a closed loop; a trace replay sends at the trace's arrivals"
    );
    let needed = load
        .looks()
        .last()
        .copied()
        .unwrap_or(load.samples as usize);
    let t = crate::config::trace::load(raw, dir, needed)?;
    // the replay's own window, not a clamp of it: a trace that would take days (or is faster
    // than the client can send) is refused with what it would take
    let rate = t.rate(needed);
    let span_s = t.offset_ms(0, needed.saturating_sub(1)) / 1000.0;
    ensure!(
        (MIN_RATE..=MAX_RATE).contains(&rate) && span_s <= MAX_TRACE_REPLAY_S,
        "load.trace: its {needed} measured requests would arrive at {} requests/s over {:.1} h: use {MIN_RATE}..={MAX_RATE} requests/s and at most {} h (load.trace.rate or time_scale compresses the trace, start and load.samples take a part of it)",
            crate::units::Num(rate),
            span_s / 3600.0,
        MAX_TRACE_REPLAY_S / 3600.0
    );
    load.rate = Some(rate);
    load.seed = Some(l.seed.unwrap_or(DEFAULT_LOAD_SEED));
    if l.concurrency.is_none() {
        load.concurrency = OPEN_LOOP_CONCURRENCY;
    }
    load.ramp = Ramp::Steady;
    load.trace = Some(t);
    Ok(load)
}

/// Longest replay of a trace's measured requests, seconds.
pub const MAX_TRACE_REPLAY_S: f64 = 24.0 * 3600.0;

/// In-flight cap of an open-loop scenario that sets no `load.concurrency`.
pub const OPEN_LOOP_CONCURRENCY: u32 = 1024;
/// Arrival-schedule seed when `load.seed` is not set.
pub const DEFAULT_LOAD_SEED: u64 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::OneOrMany;

    #[test]
    fn open_loop_rate() {
        let raw = |rate: Option<f64>, conc: Option<u32>, seed: Option<u64>| RawLoad {
            rate: rate.map(OneOrMany::One),
            concurrency: conc.map(OneOrMany::One),
            seed,
            ..RawLoad::default()
        };
        let l = build_load(&raw(Some(50.0), None, None)).unwrap();
        assert_eq!(l.rate, Some(50.0));
        assert_eq!(l.concurrency, OPEN_LOOP_CONCURRENCY);
        assert_eq!(l.seed, Some(DEFAULT_LOAD_SEED));
        let l = build_load(&raw(Some(5.0), Some(2), Some(9))).unwrap();
        assert_eq!((l.concurrency, l.seed), (2, Some(9)));
        let closed = build_load(&raw(None, None, Some(9))).unwrap();
        assert_eq!(
            (closed.rate, closed.seed, closed.concurrency),
            (None, None, 1)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            let e = build_load(&raw(Some(bad), None, None)).unwrap_err();
            assert!(e.to_string().contains("load.rate"), "{e}");
        }
    }

    #[test]
    fn sequential_looks() {
        let l = |samples, max| LoadSpec {
            share: None,
            concurrency: 1,
            samples,
            warmup: 0,
            max_samples: max,
            rate: None,
            seed: None,
            ramp: Ramp::Steady,
            trace: None,
        };
        assert_eq!(l(20, None).looks(), vec![20]);
        // validate's word on samples too few for the concurrency, with the number that would do
        let mut c16 = l(20, None);
        c16.concurrency = 16;
        let w = c16.warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with(
                "load.samples 20 at concurrency 16: about 1.2 measured request(s) per stream"
            ) && w[0].ends_with("use samples >= 32 (2 per stream)"),
            "{w:?}"
        );
        c16.samples = 32;
        assert!(c16.warnings().is_empty());
        c16.ramp = Ramp::Burst;
        assert!(c16.warnings()[0].starts_with("load.ramp: burst"));
        assert_eq!(l(20, Some(300)).looks(), vec![20, 50, 100, 200, 300]);
        assert_eq!(l(100, Some(150)).looks(), vec![100, 150]);
        assert_eq!(
            l(60, Some(1000)).looks(),
            vec![60, 120, 240, 480, 960, 1000]
        );
    }
}
