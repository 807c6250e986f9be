//! `perfgate ab`: base and candidate measured in the same job, so runner drift reaches both and
//! cancels instead of being tolerated by widening (docs/design.md "A/B runs").
//!
//! [`pair`] pairs each scenario's two arms (or refuses it), [`plan`] decides the order (seeded AB/BA pairs, or Thue-Morse blocks), [`measure`] runs the
//! two arms of a scenario, [`compare`] turns them into the [`Results`] model with `check`'s
//! gate, statuses and verdicts; this file checks what an A/B run supports and orchestrates.

mod command;
pub mod compare;
pub mod measure;
pub mod overlap;
pub mod pair;
pub mod plan;

pub use command::{cmd_ab, AbArgs};

use crate::assess::UnlistedModel;
use crate::config::Scenario;
use crate::results::Results;

/// Default blocks per arm of the blocked design (ABBA).
pub const DEFAULT_BLOCKS: usize = 2;

/// Which design runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesignChoice {
    /// Both arms up at once, requests in seeded AB/BA pairs.
    Interleaved,
    /// One arm at a time, `per_arm` blocks each (>= 2).
    Blocked { per_arm: usize },
}

/// Whether the interleaved design may have both arms' requests in flight at once
/// (`--overlap`, docs/ab.md "When the arms overlap").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverlapChoice {
    /// The arms take turns when both are on this machine, and overlap otherwise.
    Auto,
    /// The arms always take turns.
    Never,
    /// Each arm at its own concurrency whatever the other has in flight (measured and noted).
    Allowed,
}

/// Options of one A/B run.
#[derive(Debug, Clone)]
pub struct AbOptions {
    pub design: DesignChoice,
    /// Interleaved: whether the arms' requests may overlap.
    pub overlap: OverlapChoice,
    /// Seed of the interleaved order.
    pub seed: u64,
    /// The check id (comment marker).
    pub id: crate::results::CheckId,
    pub unlisted_model: UnlistedModel,
}

/// One scenario of an A/B run: as written (its name, fingerprint and source, what `bless
/// --from` matches), and its two arms, each an ordinary validated scenario.
#[derive(Debug, Clone)]
pub struct AbScenario {
    pub written: Scenario,
    pub base: Scenario,
    pub candidate: Scenario,
    /// Notes known before measuring (e.g. both arms on one endpoint).
    pub notes: Vec<String>,
    /// Both arms run on this machine ([`pair::one_host`]).
    pub one_host: bool,
}

/// Why `perfgate ab` cannot run this scenario with this design, and what to do instead; `None`
/// when it can. Checked for every scenario before anything is measured.
pub fn unsupported(ab: &AbScenario, design: DesignChoice) -> Option<String> {
    let sc = &ab.candidate;
    let name = &ab.written.name;
    if let Some(m) = sc.load.max_samples {
        return Some(format!(
            "scenario {name}: load.max_samples ({m}, sequential sampling) is not supported by perfgate ab: the two arms are measured with a fixed load.samples each; set `samples: {m}` (or fewer) for the A/B run"
        ));
    }
    if sc.request.conversation.is_some() || ab.base.request.conversation.is_some() {
        return Some(format!(
            "scenario {name}: request.conversation is not supported by perfgate ab: the arms are measured in alternating pieces that would split conversations between them, and the cold reference runs only in check; gate conversations with perfgate check against a baseline (a changed prefix cache is a named drift there, gate.cache.hit_rate a check)"
        ));
    }
    if sc.load.rate.is_some() || ab.base.load.rate.is_some() {
        return Some(format!(
            "scenario {name}: load.rate (open loop) is not supported by perfgate ab yet: the arms are interleaved request by request in a closed loop; use load.concurrency, or perfgate check for open-loop scenarios"
        ));
    }
    if let DesignChoice::Blocked { per_arm } = design {
        if (sc.load.samples as usize) < per_arm {
            return Some(format!(
                "scenario {name}: --blocks {per_arm} needs at least {per_arm} samples per arm (load.samples is {})",
                sc.load.samples
            ));
        }
    }
    if let DesignChoice::Interleaved = design {
        if let (Some(b), Some(c)) = (&ab.base.server, &ab.candidate.server) {
            let place = crate::config::arm::endpoint_place;
            if b.key != c.key && place(&b.origin) == place(&c.origin) {
                return Some(format!(
                    "scenario {name}: both arms start a server at {}, but in the interleaved design both run at once, so each needs its own port: give each arm its endpoint (--base-url / --candidate-url, or base_url inside server.base / server.candidate) and its server that port, or use --design blocked (one server at a time)",
                    b.origin
                ));
            }
        }
    }
    None
}

/// The results of an A/B run stopped before any scenario was measured: each one "not measured:
/// interrupted", marked incomplete (what a forced exit writes until the real results exist,
/// [`crate::report::last_resort`]).
pub fn interrupted_results(scs: &[AbScenario], opts: &AbOptions) -> Results {
    let runs = scs
        .iter()
        .map(|_| measure::AbRuns {
            base: Err(crate::execute::MeasureError::Interrupted),
            candidate: Err(crate::execute::MeasureError::Interrupted),
            order: Vec::new(),
            blocks: Vec::new(),
            overlap: None,
        })
        .collect();
    let mut results = compare::compare(scs, runs, opts);
    results.incomplete = true;
    results.decide();
    results
}

/// Measures both arms of every scenario (sequentially by scenario) and compares them.
pub async fn run_ab(scs: &[AbScenario], opts: &AbOptions) -> Results {
    let mut runs = Vec::with_capacity(scs.len());
    for ab in scs {
        let sc = &ab.candidate;
        if crate::cancel::requested() {
            runs.push(measure::AbRuns {
                base: Err(crate::execute::MeasureError::Interrupted),
                candidate: Err(crate::execute::MeasureError::Interrupted),
                order: Vec::new(),
                blocks: Vec::new(),
                overlap: None,
            });
            continue;
        }
        eprintln!(
            "perfgate: measuring {} as A/B ({}; {} warmup + {} requests per arm, concurrency {} per arm): base {}, candidate {}",
            ab.written.name,
            match opts.design {
                DesignChoice::Interleaved => match plan::in_flight(opts.overlap, ab.one_host) {
                    crate::runner::InFlight::OneArm if ab.one_host => {
                        "interleaved, the arms taking turns: both on this machine".to_string()
                    }
                    crate::runner::InFlight::OneArm => "interleaved, the arms taking turns".to_string(),
                    crate::runner::InFlight::BothArms => "interleaved".to_string(),
                },
                DesignChoice::Blocked { per_arm } => format!(
                    "blocked {}",
                    plan::letters(&plan::blocked(per_arm))
                ),
            },
            sc.load.warmup,
            sc.load.samples,
            sc.load.concurrency,
            ab.base.endpoint.shown_url(),
            sc.endpoint.shown_url(),
        );
        let r = match opts.design {
            DesignChoice::Interleaved => {
                let in_flight = plan::in_flight(opts.overlap, ab.one_host);
                measure::interleaved(&ab.base, sc, opts.seed, in_flight, ab.one_host).await
            }
            DesignChoice::Blocked { per_arm } => measure::blocked(&ab.base, sc, per_arm).await,
        };
        runs.push(r);
    }
    let mut results = compare::compare(scs, runs, opts);
    for s in &mut results.scenarios {
        if let Some(n) =
            s.ab.as_ref()
                .and_then(|a| a.overlap.as_ref())
                .and_then(overlap::note)
        {
            s.notes
                .push(crate::results::Note::new(crate::results::NoteKind::Arms, n));
        }
    }
    results.incomplete = crate::cancel::requested();
    results.decide();
    results
}
