//! Measures the two arms of one scenario: interleaved (both endpoints up, one request stream
//! dispatched in seeded AB/BA pairs, [`crate::runner::measure_interleaved`]) or blocked (one
//! arm at a time in Thue-Morse order, a fresh start of the arm's server per block). The
//! per-request measurement is the runner's, unchanged.

use super::plan;
use crate::config::Scenario;
use crate::execute::{self, MeasureError, Opened};
use crate::gate::Side;
use crate::results::{AbBlock, AbOverlap};
use crate::runner::{InFlight, RunOutput, Session};
use crate::server::Others;
use std::time::Instant;

/// Pairs of base requests that sent the same request (`gate.outputs`, the base's own
/// repeatability) an interleaved run of `samples` requests per arm has at least: half as many as
/// the pairs between the arms, at least 8 and at most 100, sent again after the run when the
/// measured requests had fewer (docs/ab.md "Outputs that changed": with a handful the check can
/// tell only a gross change, `perfgate calibrate` shows how much).
pub fn self_repeats(samples: usize) -> usize {
    (samples / 2).clamp(8, 100)
}

/// What the two arms of one scenario produced.
pub struct AbRuns {
    pub base: Result<RunOutput, MeasureError>,
    pub candidate: Result<RunOutput, MeasureError>,
    /// Per request (interleaved) or per block (blocked), in the order they ran.
    pub order: Vec<Side>,
    /// Blocked: each block's records (in the arm's record order) and its start.
    pub blocks: Vec<(AbBlock, Vec<crate::record::RequestRecord>)>,
    /// Interleaved: how much the arms' requests were in flight at once.
    pub overlap: Option<AbOverlap>,
}

impl AbRuns {
    fn failed(side: Side, why: MeasureError, order: Vec<Side>) -> AbRuns {
        let (base, candidate) = match side {
            Side::Base => (Err(why), Err(MeasureError::OtherArm { arm: "base" })),
            Side::Candidate => (Err(MeasureError::OtherArm { arm: "candidate" }), Err(why)),
        };
        AbRuns {
            base,
            candidate,
            order,
            blocks: Vec::new(),
            overlap: None,
        }
    }
}

/// Opens an arm's endpoint (an endpoint perfgate did not start is asked who it is, and its
/// `/metrics` scraped, as a started server's: [`Opened::ask_endpoint`]) and runs its warmup.
async fn open_arm(sc: &Scenario, others: Others) -> Result<(Opened, Session), MeasureError> {
    let mut opened = execute::open(sc, others).await?;
    opened.ask_endpoint(sc).await;
    match Session::start(sc, &opened.base_url).await {
        Ok(s) => {
            opened.scrape_before().await;
            Ok((opened, s))
        }
        Err(e) => {
            opened.shutdown();
            Err(e.into())
        }
    }
}

/// Both arms up at once: base and candidate opened (servers side by side, each on its own
/// port), warmed up, then `samples` requests per arm in seeded AB/BA pairs, each arm at the
/// scenario's concurrency; with [`InFlight::OneArm`] the arms take turns ([`plan::turns`]:
/// one arm's turn of `concurrency` requests, then the other's once the first has none in
/// flight). `one_host` (both arms on this machine) is recorded with the measured overlap.
pub async fn interleaved(
    base: &Scenario,
    cand: &Scenario,
    seed: u64,
    in_flight: InFlight,
    one_host: bool,
) -> AbRuns {
    let keys: Vec<&str> = [base, cand]
        .iter()
        .filter_map(|s| s.server.as_ref().map(|x| x.key.as_str()))
        .collect();
    crate::server::stop_except(&keys).await;
    let n = cand.load.samples as usize;
    let order = match in_flight {
        InFlight::BothArms => plan::interleaved(n, seed),
        InFlight::OneArm => plan::turns(n, cand.load.concurrency as usize, seed),
    };
    let (ob, mut sb) = match open_arm(base, Others::Keep).await {
        Ok(x) => x,
        Err(e) => return AbRuns::failed(Side::Base, e, order),
    };
    let (oc, mut sc) = match open_arm(cand, Others::Keep).await {
        Ok(x) => x,
        Err(e) => {
            ob.shutdown();
            return AbRuns::failed(Side::Candidate, e, order);
        }
    };
    let idx: Vec<usize> = order
        .iter()
        .map(|s| match s {
            Side::Base => 0,
            Side::Candidate => 1,
        })
        .collect();
    let spans = crate::runner::measure_interleaved([&mut sb, &mut sc], &idx, in_flight).await;
    if cand.gate.outputs && crate::assess::outputs::not_deterministic(base, cand).is_none() {
        // gate.outputs: the base's own repeatability, when its requests did not repeat enough
        sb.repeat(self_repeats(n)).await;
    }
    let alternated = in_flight == InFlight::OneArm;
    let mut out_b = sb.output();
    let mut out_c = sc.output();
    if alternated {
        // taking turns, an arm's wall time is its turns (docs/ab.md "Throughput"), so its
        // throughput and achieved concurrency read as a `check` of the same server
        let busy = super::overlap::busy_ms(&spans);
        for (out, b) in [(&mut out_b, busy[0]), (&mut out_c, busy[1])] {
            if b > 0.0 {
                out.wall_ms = b;
            }
        }
    }
    drop((sb, sc));
    ob.close(base, &mut out_b).await;
    oc.close(cand, &mut out_c).await;
    AbRuns {
        base: Ok(out_b),
        candidate: Ok(out_c),
        order,
        blocks: Vec::new(),
        overlap: Some(super::overlap::of(&spans, alternated, one_host)),
    }
}

/// One arm at a time: `k` blocks per arm in [`plan::blocked`] order, each a fresh start of the
/// arm's server (every other server stopped first), its wait until ready, its warmup, then its
/// share of the arm's `samples` ([`plan::split`]). Records are put on one clock (ms since the
/// first block's measured requests began).
pub async fn blocked(base: &Scenario, cand: &Scenario, k: usize) -> AbRuns {
    let order = plan::blocked(k);
    let sizes = [
        plan::split(base.load.samples as usize, k),
        plan::split(cand.load.samples as usize, k),
    ];
    let mut done = [0usize; 2];
    let mut arms: [Vec<RunOutput>; 2] = [Vec::new(), Vec::new()];
    let mut blocks = Vec::with_capacity(order.len());
    let mut origin: Option<Instant> = None;
    for (bi, &side) in order.iter().enumerate() {
        let a = usize::from(side == Side::Candidate);
        let sc = if a == 0 { base } else { cand };
        if crate::cancel::requested() {
            break;
        }
        crate::server::stop_all().await;
        eprintln!(
            "perfgate: {}: block {} of {} ({}): {} requests",
            sc.name,
            bi + 1,
            order.len(),
            plan::letters(&[side]),
            sizes[a][done[a]]
        );
        let (opened, mut session) = match open_arm(sc, Others::Stop).await {
            Ok(x) => x,
            Err(e) => {
                let why = MeasureError::InBlock {
                    block: bi + 1,
                    of: order.len(),
                    source: Box::new(e),
                };
                let mut f = AbRuns::failed(side, why, order);
                f.blocks = blocks;
                return f;
            }
        };
        let t0 = *origin.get_or_insert_with(Instant::now);
        let offset = t0.elapsed().as_secs_f64() * 1000.0;
        session.measure(sizes[a][done[a]]).await;
        let mut out = session.output();
        drop(session);
        opened.close(sc, &mut out).await;
        for r in &mut out.records {
            r.start_ms = crate::units::round3(r.start_ms + offset);
        }
        blocks.push((
            AbBlock {
                side,
                requests: out.records.len(),
                server: out.server_side.clone(),
            },
            out.records.clone(),
        ));
        let stop = out.unreachable.is_some();
        arms[a].push(out);
        done[a] += 1;
        if stop {
            break;
        }
    }
    crate::server::stop_all().await;
    let [b, c] = arms;
    AbRuns {
        base: pool(b),
        candidate: pool(c),
        order,
        blocks,
        overlap: None,
    }
}

/// An arm's blocks as one run: records in block order, counts added up, the first block's
/// identity and server report.
fn pool(runs: Vec<RunOutput>) -> Result<RunOutput, MeasureError> {
    let mut it = runs.into_iter();
    let mut out = it.next().ok_or(MeasureError::Interrupted)?;
    for r in it {
        out.records.extend(r.records);
        out.wall_ms += r.wall_ms;
        out.warmup_failures += r.warmup_failures;
        out.retried += r.retried;
        out.resent_before_close_mode += r.resent_before_close_mode;
        out.warmup_records.extend(r.warmup_records);
        out.repeats.extend(r.repeats);
        out.stream_options_fallback |= r.stream_options_fallback;
        out.closes_after_stream |= r.closes_after_stream;
        if out.unreachable.is_none() {
            out.unreachable = r.unreachable;
        }
        out.client_lag = match (out.client_lag, r.client_lag) {
            (Some(a), Some(b)) => Some(if b.p99 > a.p99 { b } else { a }),
            (a, b) => a.or(b),
        };
    }
    Ok(out)
}
