//! What a bless will send and about how long it takes, said before it starts, and each run's
//! requests and time as it ends (docs/baselines.md "How long a bless takes"). On stderr only:
//! nothing of it goes into the baseline. The cold reference of a conversation scenario is sent
//! in the first run only ([`run_scenario`]): the baseline keeps one run's cache figures.

use crate::baseline::{Baseline, LoadError};
use crate::config::Scenario;
use std::borrow::Cow;
use std::time::Duration;

/// The requests one scenario's bless sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Runs (`--runs`).
    pub runs: u64,
    /// Warmup requests of each run.
    pub warmup: u64,
    /// Measured requests of each run (`load.max_samples` when set: at most that many).
    pub measured: u64,
    /// A conversation scenario's cold-reference pairs (two requests each), first run only.
    pub reference_pairs: u64,
}

impl Plan {
    /// The plan of `k` runs of `sc`.
    pub fn new(sc: &Scenario, k: usize) -> Plan {
        Plan {
            runs: k as u64,
            warmup: u64::from(sc.load.warmup),
            measured: u64::from(sc.load.max_samples.unwrap_or(sc.load.samples)),
            reference_pairs: sc
                .request
                .conversation
                .as_ref()
                .map_or(0, |c| u64::from(c.reference.min(sc.load.samples))),
        }
    }

    /// Every request the bless sends: each run's warmup and measured requests, and the
    /// reference's cold and floor request of each pair.
    pub fn requests(&self) -> u64 {
        self.runs * (self.warmup + self.measured) + 2 * self.reference_pairs
    }
}

/// Why no time is estimated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoEstimate {
    /// No baseline of the scenario yet.
    #[error("no previous baseline of {0}")]
    NoBaseline(String),
    /// A baseline that could not be read.
    #[error("its previous baseline is unreadable")]
    Unreadable,
    /// A baseline of another configuration (its requests took other times).
    #[error("its previous baseline measured another configuration")]
    OtherConfiguration,
    /// A baseline whose runs recorded no time.
    #[error("its previous baseline recorded no durations")]
    NoDurations,
}

/// The measured time per request of the previous bless of `sc`, and its runs' mean time and
/// requests: from `previous`'s runs (`wall_ms`, the measured requests' wall time) when it is a
/// baseline of the same configuration.
pub fn per_request(
    sc: &Scenario,
    previous: &Result<Baseline, LoadError>,
) -> Result<PreviousBless, NoEstimate> {
    let b = match previous {
        Ok(b) => b,
        Err(LoadError::Missing(_)) => return Err(NoEstimate::NoBaseline(sc.name.to_string())),
        Err(_) => return Err(NoEstimate::Unreadable),
    };
    if b.scenario.fingerprint != sc.fingerprint {
        return Err(NoEstimate::OtherConfiguration);
    }
    let wall_ms: f64 = b.runs.iter().map(|r| r.wall_ms).sum();
    let requests: usize = b.runs.iter().map(|r| r.records.len()).sum();
    if !(wall_ms.is_finite() && wall_ms > 0.0) || requests == 0 {
        return Err(NoEstimate::NoDurations);
    }
    let runs = b.runs.len() as f64;
    Ok(PreviousBless {
        ms_per_request: wall_ms / requests as f64,
        run_s: wall_ms / runs / 1000.0,
        run_requests: (requests as f64 / runs).round() as u64,
    })
}

/// What the previous bless of a scenario took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreviousBless {
    /// Wall time of its measured phase over its measured requests, ms.
    pub ms_per_request: f64,
    /// Its mean run's measured phase, s.
    pub run_s: f64,
    /// Its mean run's measured requests.
    pub run_requests: u64,
}

/// The line said before a scenario's bless: what it sends and about how long its runs take
/// (their requests at the previous bless's time per measured request; the server's start and
/// a conversation's cold reference on top), e.g. `blessing chat: 5 runs x (2 warmup + 20
/// measured) + 8 cold-reference pairs x 2 = 126 requests; about 3.8 min plus the cold
/// reference (the last bless: 41 s a run of 20 requests)`.
pub fn before(name: &str, plan: &Plan, previous: Result<PreviousBless, NoEstimate>) -> String {
    let reference = match plan.reference_pairs {
        0 => String::new(),
        1 => " + 1 cold-reference pair x 2".to_string(),
        n => format!(" + {n} cold-reference pairs x 2"),
    };
    // the reference's cold requests prefill whole prompts: slower than the measured ones, so
    // the estimate is of the runs, the reference said on top
    let runs_requests = plan.runs * (plan.warmup + plan.measured);
    let time = match previous {
        Ok(p) => format!(
            "about {}{} (the last bless: {} a run of {} requests)",
            fmt_secs(p.ms_per_request * runs_requests as f64 / 1000.0),
            if plan.reference_pairs > 0 {
                " plus the cold reference"
            } else {
                ""
            },
            fmt_secs(p.run_s),
            p.run_requests
        ),
        Err(why) => format!("no time estimate: {why}"),
    };
    format!(
        "blessing {name}: {} run{} x ({} warmup + {} measured){reference} = {} requests; {time}",
        plan.runs,
        if plan.runs == 1 { "" } else { "s" },
        plan.warmup,
        plan.measured,
        plan.requests()
    )
}

/// The runs of one scenario's bless so far, for the line said as each ends.
#[derive(Debug, Default)]
pub struct Runs {
    /// The times of the runs that sent no cold reference: what each run left will take.
    plain: Vec<Duration>,
}

impl Runs {
    /// The line said as run `i` (from 0) of `k` ends: its measured requests and reference
    /// pairs, its time (warmup and reference included), and the time left at the mean of the
    /// runs so far without a reference (the first run of a conversation scenario sends it, and
    /// the others do not): `run 2/5 of chat: 20 requests, 42 s; about 2.1 min left`.
    pub fn ended(
        &mut self,
        name: &str,
        (i, k): (usize, usize),
        requests: usize,
        reference_pairs: usize,
        took: Duration,
    ) -> String {
        let reference = match reference_pairs {
            0 => {
                self.plain.push(took);
                String::new()
            }
            1 => " + 1 cold-reference pair".to_string(),
            n => format!(" + {n} cold-reference pairs"),
        };
        let left = k.saturating_sub(i + 1);
        let left = match (left, self.plain.len()) {
            (0, _) | (_, 0) => String::new(),
            (left, n) => {
                let mean = self.plain.iter().map(Duration::as_secs_f64).sum::<f64>() / n as f64;
                format!("; about {} left", fmt_secs(mean * left as f64))
            }
        };
        format!(
            "run {}/{k} of {name}: {requests} requests{reference}, {}{left}",
            i + 1,
            fmt_secs(took.as_secs_f64())
        )
    }
}

/// The scenario run `i` (from 0) measures: `sc` itself for the first, without the cold
/// reference for the others (`reference: 0`). The baseline keeps the cache figures of its
/// first run with a reference (`baseline::from_runs`), so a reference in every run was sent
/// and thrown away; the fingerprint and records are `sc`'s either way.
pub fn run_scenario(sc: &Scenario, i: usize) -> Cow<'_, Scenario> {
    match &sc.request.conversation {
        Some(c) if i > 0 && c.reference > 0 => {
            let mut once = sc.clone();
            if let Some(c) = once.request.conversation.as_mut() {
                c.reference = 0;
            }
            Cow::Owned(once)
        }
        _ => Cow::Borrowed(sc),
    }
}

/// A duration for a person: `41 s`, `6.6 min`, `1.2 h`.
pub fn fmt_secs(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 90.0 * 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        crate::config::parse_str(yaml, "s.yaml", &|_| None)
            .unwrap()
            .remove(0)
    }

    const CONVERSATION: &str = "scenarios:\n  - name: chat\n    endpoint: {base_url: 'sim://', model: m}\n    request: {max_tokens: 8, conversation: {turns: 4, reference: 8}}\n    load: {samples: 20, warmup: 2}\n";

    /// Issue 46 item 7: 5 runs of 20 (2 warmup each) and one reference of 8 pairs: 5 x 22 + 16.
    #[test]
    fn the_plan_counts_every_request_the_bless_sends() {
        let sc = scenario(CONVERSATION);
        let plan = Plan::new(&sc, 5);
        assert_eq!(plan.requests(), 5 * 22 + 16);
        // the last bless measured 41 s a run of 20 requests: 2.05 s a request, x 110 of the
        // runs = 225.5 s
        let prev = PreviousBless {
            ms_per_request: 2050.0,
            run_s: 41.0,
            run_requests: 20,
        };
        assert_eq!(
            before("chat", &plan, Ok(prev)),
            "blessing chat: 5 runs x (2 warmup + 20 measured) + 8 cold-reference pairs x 2 = 126 requests; about 3.8 min plus the cold reference (the last bless: 41 s a run of 20 requests)"
        );
        // without a conversation: every request at that time, 3 x 22 x 2.05 s = 135.3 s
        let mut plain = plan;
        plain.reference_pairs = 0;
        plain.runs = 3;
        assert_eq!(
            before("chat", &plain, Ok(prev)),
            "blessing chat: 3 runs x (2 warmup + 20 measured) = 66 requests; about 2.3 min (the last bless: 41 s a run of 20 requests)"
        );
        assert_eq!(
            before(
                "chat",
                &Plan::new(&sc, 1),
                Err(NoEstimate::NoBaseline("chat".into()))
            ),
            "blessing chat: 1 run x (2 warmup + 20 measured) + 8 cold-reference pairs x 2 = 38 requests; no time estimate: no previous baseline of chat"
        );
    }

    #[test]
    fn each_run_says_its_requests_its_time_and_the_time_left() {
        let s = Duration::from_secs;
        let mut runs = Runs::default();
        // (run index of 5, cold-reference pairs, seconds, the line), in order
        for (i, pairs, secs, want) in [
            // the first run's reference makes it no measure of the others: no time left yet
            (
                0,
                8,
                65,
                "run 1/5 of chat: 20 requests + 8 cold-reference pairs, 65 s",
            ),
            // 3 runs left at 42 s: 126 s
            (
                1,
                0,
                42,
                "run 2/5 of chat: 20 requests, 42 s; about 2.1 min left",
            ),
            // (42 + 44) / 2 = 43 s, 2 runs left: 86 s
            (
                2,
                0,
                44,
                "run 3/5 of chat: 20 requests, 44 s; about 86 s left",
            ),
            (4, 0, 41, "run 5/5 of chat: 20 requests, 41 s"),
        ] {
            assert_eq!(runs.ended("chat", (i, 5), 20, pairs, s(secs)), want);
        }
        // no reference: the first run already says what the others take
        assert_eq!(
            Runs::default().ended("chat", (0, 3), 20, 0, s(10)),
            "run 1/3 of chat: 20 requests, 10 s; about 20 s left"
        );
        assert_eq!(fmt_secs(7200.0), "2.0 h");
    }

    #[test]
    fn only_the_first_run_sends_the_cold_reference() {
        let sc = scenario(CONVERSATION);
        let reference = |i| {
            run_scenario(&sc, i)
                .request
                .conversation
                .as_ref()
                .unwrap()
                .reference
        };
        assert_eq!((reference(0), reference(1), reference(4)), (8, 0, 0));
        assert!(matches!(run_scenario(&sc, 0), Cow::Borrowed(_)));
        assert_eq!(run_scenario(&sc, 3).fingerprint, sc.fingerprint);
    }
}
