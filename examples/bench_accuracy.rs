//! Measurement-accuracy benchmark: perfgate's streaming client, in process, against the
//! in-process simulator, whose own send time of every event is the ground truth (same monotonic
//! `Instant` clock). Prints per concurrency level: median and P99 absolute TTFT error (measured
//! first-token arrival minus the simulator's send of that event), median and P99 absolute ITL
//! error (measured gap minus sent gap), achieved request and token-event rates, the process's CPU
//! seconds (getrusage) and peak RSS. Then times the gate: 20 checks with 1,000 samples per side.
//!
//! ```sh
//! cargo run --release --example bench_accuracy              # levels 1 64 256 1024
//! cargo run --release --example bench_accuracy -- 1 64      # chosen levels
//! ```
//!
//! Bounded: at most max(2 x level, 64) requests per level, each level under a 120 s timeout.
//! Loopback only (the simulator binds 127.0.0.1). Numbers, never assertions.

use anyhow::Context;
use perfgate::client::body;
use perfgate::client::http::StreamClient;
use perfgate::config::scenario::{Metric, Quantile};
use perfgate::gate::{self, Samples, ScenarioSamples};
use perfgate::sim::{SimConfig, SimServer};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKENS: u64 = 64;
const SIM: &str = "ttft_ms=20&ttft_sigma=0.1&tpot_ms=5&tpot_sigma=0.1&seed=7";

#[repr(C)]
struct Rusage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss_kb: i64,
    rest: [i64; 13],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// (CPU seconds user + system, peak RSS MB) of this process so far.
#[allow(unsafe_code)] // getrusage: see SAFETY below
fn usage() -> (f64, f64) {
    let mut r = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss_kb: 0,
        rest: [0; 13],
    };
    // SAFETY: getrusage(RUSAGE_SELF = 0) fills a struct rusage, which on 64-bit Linux is 2
    // timevals followed by 14 longs: the layout of `Rusage`.
    let rc = unsafe { getrusage(0, &mut r) };
    if rc != 0 {
        return (f64::NAN, f64::NAN);
    }
    let tv = |t: [i64; 2]| t[0] as f64 + t[1] as f64 / 1e6;
    (tv(r.utime) + tv(r.stime), r.maxrss_kb as f64 / 1024.0)
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Signed a - b in ms.
fn diff_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        ms(a - b)
    } else {
        -ms(b - a)
    }
}

struct Level {
    ttft_err: Vec<f64>,
    itl_err: Vec<f64>,
    requests: usize,
    failed: usize,
    unmatched: usize,
    events: u64,
    wall_s: f64,
}

async fn level(conc: usize) -> anyhow::Result<Level> {
    let cfg = SimConfig::from_query(SIM).context("the simulator settings")?;
    let srv = SimServer::start(cfg, 0)
        .await
        .context("starting the in-process simulator")?;
    let yaml = format!(
        "scenarios:\n  - name: bench\n    endpoint: {{base_url: 'sim://?{SIM}'}}\n    request: {{prompt: hi, max_tokens: {TOKENS}, ignore_eos: true}}\n    load: {{concurrency: {conc}}}\n"
    );
    let sc = perfgate::config::parse_str(&yaml, "bench.yaml", &|_| None)
        .context("the benchmark scenario")?
        .remove(0);
    let client = Arc::new(
        StreamClient::new(&sc.endpoint, &srv.base_url(), conc).context("the HTTP client")?,
    );
    let total = (2 * conc).max(64);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let run_start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (client, next, sc) = (Arc::clone(&client), Arc::clone(&next), sc.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < total {
                let b = body::build(sc.endpoint.api, &sc.endpoint.model, &sc.request, true, None);
                out.push(client.send(&b, run_start).await);
            }
            out
        }));
    }
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.context("a load task")?);
    }
    let wall_s = run_start.elapsed().as_secs_f64();
    let mut l = Level {
        ttft_err: Vec::new(),
        itl_err: Vec::new(),
        requests: sent.len(),
        failed: 0,
        unmatched: 0,
        events: 0,
        wall_s,
    };
    for s in &sent {
        let r = &s.record;
        let (Some(ttft), true) = (r.ttft_ms, r.ok()) else {
            l.failed += 1;
            continue;
        };
        let Some(truth) = s.sim_request.and_then(|n| srv.timings(n)) else {
            l.unmatched += 1;
            continue;
        };
        l.events += r.token_events;
        let t0 = run_start + Duration::from_secs_f64(r.start_ms / 1000.0);
        // client arrival of each token event: t_first, then the ITL gaps (per event here: the
        // simulator reports usage only at the end)
        let mut arrivals = vec![t0 + Duration::from_secs_f64(ttft / 1000.0)];
        for g in &r.itl_ms {
            let last = *arrivals.last().unwrap_or(&t0);
            arrivals.push(last + Duration::from_secs_f64(g / 1000.0));
        }
        let sends: Vec<Instant> = truth.token_times().collect();
        if sends.len() != arrivals.len() {
            l.unmatched += 1;
            continue;
        }
        l.ttft_err.push(diff_ms(arrivals[0], sends[0]).abs());
        for i in 1..sends.len() {
            let measured = diff_ms(arrivals[i], arrivals[i - 1]);
            let sent_gap = diff_ms(sends[i], sends[i - 1]);
            l.itl_err.push((measured - sent_gap).abs());
        }
    }
    Ok(l)
}

fn gate_timing() -> f64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut side = |scale: f64| Samples {
        ok: (0..1000)
            .map(|_| scale * (10.0 + rng.random::<f64>() * 5.0))
            .collect(),
        failed: 0,
    };
    // 5 scenarios x (2 metrics x 2 quantiles) = 20 quantile checks (plus each scenario's
    // error-rate and tail checks, as a real run has)
    let scenarios: Vec<ScenarioSamples> = (0..5)
        .map(|i| ScenarioSamples {
            client_delay: None,
            pairing: perfgate::gate::Pairing::default(),
            scenario: format!("s{i}"),
            gate: perfgate::config::scenario::GateSpec {
                metrics: vec![Metric::Ttft, Metric::Tpot],
                quantiles: vec![Quantile::P50, Quantile::P99],
                ..Default::default()
            },
            metrics: vec![
                (Metric::Ttft, side(1.0), side(1.02)),
                (Metric::Tpot, side(1.0), side(1.0)),
            ],
            errors: perfgate::gate::ErrorCounts::new((0, 1000), (0, 1000)),
            stopped: perfgate::gate::ErrorCounts::default(),
            spread: Default::default(),
            looks: 1,
            slo: Vec::new(),
            design: gate::Design::Committed,
            itl: None,
            quality: Default::default(),
        })
        .collect();
    let t = Instant::now();
    let (checks, family) = gate::evaluate(&scenarios);
    let took = ms(t.elapsed());
    println!(
        "gate::evaluate: {} checks ({family} in the Holm family), 1000 samples per side: {took:.1} ms (target < 200 ms)",
        checks.len()
    );
    took
}

fn main() {
    let levels: Vec<usize> = {
        let a: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if a.is_empty() {
            vec![1, 64, 256, 1024]
        } else {
            a
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "perfgate client vs in-process simulator ({SIM}, {TOKENS} tokens/request), {} CPU(s)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>6} {:>6} {:>5} | {:>9} {:>9} | {:>9} {:>9} | {:>8} {:>9} | {:>6} {:>7}",
        "conc",
        "reqs",
        "bad",
        "TTFTe p50",
        "TTFTe p99",
        "ITLe p50",
        "ITLe p99",
        "req/s",
        "events/s",
        "CPU s",
        "peakMB"
    );
    for &c in &levels {
        let (cpu0, _) = usage();
        let r =
            rt.block_on(async { tokio::time::timeout(Duration::from_secs(120), level(c)).await });
        let (cpu1, rss) = usage();
        match r {
            Ok(Ok(mut l)) => println!(
                "{:>6} {:>6} {:>5} | {:>9.3} {:>9.3} | {:>9.3} {:>9.3} | {:>8.1} {:>9.0} | {:>6.2} {:>7.1}",
                c,
                l.requests,
                l.failed + l.unmatched,
                pct(&mut l.ttft_err, 0.5),
                pct(&mut l.ttft_err, 0.99),
                pct(&mut l.itl_err, 0.5),
                pct(&mut l.itl_err, 0.99),
                (l.requests - l.failed) as f64 / l.wall_s,
                l.events as f64 / l.wall_s,
                cpu1 - cpu0,
                rss
            ),
            Ok(Err(e)) => println!("{c:>6}: error: {e:#}"),
            Err(_) => println!("{c:>6}: timed out after 120 s"),
        }
    }
    println!("(errors in ms, absolute; CPU s = this process, client and simulator together; peak RSS is the process peak so far)");
    gate_timing();
}
