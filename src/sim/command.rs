//! `perfgate sim`: the simulator's flags, and serving until Ctrl-C.

use crate::exit::{self, Error};
use crate::sim::{ReplayCase, SimConfig, SimServer};
use clap::Args;
use std::path::PathBuf;

fn parse_prefill_cpu(s: &str) -> Result<crate::sim::PrefillCpu, String> {
    crate::sim::PrefillCpu::parse(s)
        .ok_or_else(|| format!("{s:?} is not `off`, `any` or a core number"))
}

fn parse_cache_report(s: &str) -> Result<crate::sim::CacheReport, String> {
    crate::sim::CacheReport::parse(s).ok_or_else(|| {
        format!(
            "`{s}`: use one of {}",
            crate::sim::CacheReport::NAMES.join(", ")
        )
    })
}

/// `perfgate sim`'s flags.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Port on 127.0.0.1 (0 = any free port; the address is printed).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Model id the simulator reports.
    #[arg(long, conflicts_with = "replay", default_value = "perfgate-sim")]
    model: String,
    /// Median time to first token, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 40.0)]
    ttft_ms: f64,
    /// Lognormal log-sd of TTFT (0 = fixed).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.10)]
    ttft_sigma: f64,
    /// Median gap between output tokens, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 8.0)]
    tpot_ms: f64,
    /// Lognormal log-sd of each gap (0 = fixed).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.10)]
    tpot_sigma: f64,
    /// Cap on output tokens per request.
    #[arg(long, conflicts_with = "replay", default_value_t = 4096)]
    max_output: u32,
    /// Seed of the latency draws.
    #[arg(long, conflicts_with = "replay", default_value_t = 42)]
    seed: u64,
    /// Share of requests answered with HTTP 500 (fault injection).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    error_rate: f64,
    /// Tokens per event after the first (bursts, as multi-step scheduling or speculative
    /// decoding send them); each burst is sent when its last token is due.
    #[arg(long, conflicts_with = "replay", default_value_t = 1)]
    burst: u32,
    /// Stall after every Nth token (0 = never): the next gap is --stall-ms longer.
    #[arg(long, conflicts_with = "replay", default_value_t = 0)]
    stall_every: u32,
    /// Extra delay of a stalled gap, ms.
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    stall_ms: f64,
    /// Request n generates min(max_tokens, max_output) - (n mod N) tokens (0 = off), so
    /// another tool's per-request records can be matched to the simulator's by output length.
    #[arg(long, conflicts_with = "replay", default_value_t = 0)]
    vary_output: u32,
    /// An exact-repeat cache: a prompt served before gets this TTFT, ms, applied before
    /// --prefix-cache-block (unset = off).
    #[arg(long, conflicts_with = "replay")]
    cached_ttft_ms: Option<f64>,
    /// Batched prefill: prefills arriving within this many ms of a batch's first run as one
    /// batch taking the sum of their TTFTs (unset = independent prefills).
    #[arg(long, conflicts_with = "replay")]
    prefill_window_ms: Option<f64>,
    /// Prefill time per uncached prompt token, ms: TTFT grows with the prompt's length
    /// (default 0).
    #[arg(long, conflicts_with = "replay", default_value_t = 0.0)]
    ttft_per_token_ms: f64,
    /// A block prefix cache of N words per block (0 = off): a request reuses the leading blocks
    /// of its prompt already served, which --ttft-per-token-ms does not charge.
    #[arg(long, value_name = "N", conflicts_with = "replay", default_value_t = 0)]
    prefix_cache_block: u32,
    /// The cached tokens usage reports: honest, none (no field), all (every prompt token) or
    /// zero (fault injection: a server misreporting its cache).
    #[arg(long, value_name = "MODE", conflicts_with = "replay", default_value = "honest", value_parser = parse_cache_report)]
    cache_report: crate::sim::CacheReport,
    /// The prefill as CPU work: off (a wait), any (the TTFT's worth of CPU time on one compute
    /// thread, so simulators sharing the cores slow each other, as two servers on one machine),
    /// or a core number to pin that thread to (Linux).
    #[arg(long, value_name = "WHERE", conflicts_with = "replay", default_value = "off", value_parser = parse_prefill_cpu)]
    prefill_cpu: crate::sim::PrefillCpu,
    /// Speculative decoding: draft tokens per step (0 = none); the usage chunk then carries
    /// llama.cpp's `timings.draft_n` / `draft_n_accepted`.
    #[arg(long, value_name = "K", conflicts_with = "replay", default_value_t = 0)]
    draft_n: u32,
    /// Speculative decoding: the chance each draft token is accepted (seeded draws).
    #[arg(
        long,
        value_name = "P",
        conflicts_with = "replay",
        default_value_t = 0.7
    )]
    accept_rate: f64,
    /// Structured output: the share of requests asking for JSON or a tool call whose answer is
    /// cut before its closing brace (seeded).
    #[arg(
        long,
        value_name = "SHARE",
        conflicts_with = "replay",
        default_value_t = 0.0
    )]
    malformed: f64,
    /// Share of requests whose answer diverges from token --diverge-at on (` alt{i}` instead
    /// of ` tok{i}`), spread evenly over the requests from a phase set by --seed: a candidate
    /// that answers otherwise (`gate.outputs`), or a server that is not batch-invariant.
    #[arg(
        long,
        value_name = "SHARE",
        conflicts_with = "replay",
        default_value_t = 0.0
    )]
    diverge_share: f64,
    /// The first token (1-based) a diverging answer changes.
    #[arg(
        long,
        value_name = "TOKEN",
        conflicts_with = "replay",
        default_value_t = 1
    )]
    diverge_at: u32,
    /// Serve a recorded stream (tests/cases format) instead, with its timing.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Wait this many ms before listening, as a server loading its model does: a server
    /// perfgate starts (`server.command`) becomes ready that much later (a slow cold start,
    /// `gate.cold_start`). Deterministic: a plain wait, no randomness.
    #[arg(long, value_name = "N", default_value_t = 0)]
    ready_delay_ms: u64,
}

/// Runs `perfgate sim`: serves the simulator (or a recorded stream) on 127.0.0.1 until Ctrl-C.
pub async fn cmd_sim(a: SimArgs) -> Result<i32, Error> {
    if a.ready_delay_ms > 0 {
        // bounded: a u64 of ms is at most what the user asked for, and Ctrl-C ends it
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(a.ready_delay_ms)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(exit::OK),
        }
    }
    let server = if let Some(p) = &a.replay {
        let case = ReplayCase::load(p).map_err(|e| Error::Sim {
            context: "",
            source: e.into(),
        })?;
        SimServer::start_replay(case, a.port).await
    } else {
        let cfg = SimConfig {
            seed: a.seed,
            model: a.model.clone(),
            ttft_ms: a.ttft_ms,
            ttft_sigma: a.ttft_sigma,
            tpot_ms: a.tpot_ms,
            tpot_sigma: a.tpot_sigma,
            max_output: a.max_output,
            error_rate: a.error_rate,
            burst: a.burst,
            stall_every: a.stall_every,
            stall_ms: a.stall_ms,
            vary_output: a.vary_output,
            cached_ttft_ms: a.cached_ttft_ms,
            prefill_window_ms: a.prefill_window_ms,
            ttft_per_token_ms: a.ttft_per_token_ms,
            prefix_cache_block: a.prefix_cache_block,
            cache_report: a.cache_report,
            prefill_cpu: a.prefill_cpu,
            diverge_share: a.diverge_share,
            diverge_at: a.diverge_at,
            draft_n: a.draft_n,
            accept_rate: a.accept_rate,
            malformed: a.malformed,
        };
        cfg.validate().map_err(|e| Error::Sim {
            context: "sim: ",
            source: Box::new(e),
        })?;
        SimServer::start(cfg, a.port).await
    }
    .map_err(|source| Error::Listen {
        port: a.port,
        source,
    })?;
    println!("perfgate sim listening on {}", server.base_url());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown();
    Ok(exit::OK)
}
