//! Settings of the lognormal simulator: latency medians (ms), spreads, output cap (tokens) and
//! fault injection, parsed from a `sim://` style query string (`ttft_ms=50&tpot_ms=10&seed=7`).
//!
//! Every value is checked here, once; the server trusts a [`SimConfig`] it is given except for
//! the hard caps it applies itself ([`MAX_DELAY_MS`], [`MAX_OUTPUT_LIMIT`]).

use std::collections::HashSet;

pub use super::cpu::PrefillCpu;

/// The keys [`SimConfig::from_query`] accepts, in documentation order.
pub const ALLOWED_KEYS: &[&str] = &[
    "seed",
    "model",
    "ttft_ms",
    "ttft_sigma",
    "tpot_ms",
    "tpot_sigma",
    "max_output",
    "error_rate",
    "burst",
    "stall_every",
    "stall_ms",
    "vary_output",
    "cached_ttft_ms",
    "prefill_window_ms",
    "ttft_per_token_ms",
    "prefix_cache_block",
    "cache_report",
    "prefill_cpu",
    "diverge_share",
    "diverge_at",
    "draft_n",
    "accept_rate",
    "malformed",
];

/// Why a simulator query (or a [`SimConfig`] built by hand) is refused: the key, and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimConfigError {
    /// `=value` with no key.
    #[error("simulator setting with an empty key (value {value:?}); allowed keys: {}", ALLOWED_KEYS.join(", "))]
    EmptyKey {
        /// The value given.
        value: String,
    },
    /// A key given twice.
    #[error("simulator setting `{key}` is given more than once")]
    Repeated {
        /// The key.
        key: String,
    },
    /// A key not in [`ALLOWED_KEYS`], with the one a typo most likely meant.
    #[error("unknown simulator setting `{key}`{}; allowed keys: {}", hint.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default(), ALLOWED_KEYS.join(", "))]
    Unknown {
        /// The key given.
        key: String,
        /// The allowed key it most likely meant.
        hint: Option<&'static str>,
    },
    /// A value that does not parse or is out of its range.
    #[error("simulator setting `{key}`: {problem}")]
    Value {
        /// The key.
        key: String,
        /// What is wrong with its value (`0 is out of range 1..=1024`).
        problem: String,
    },
}

impl SimConfigError {
    fn value(key: &str, problem: String) -> Self {
        SimConfigError::Value {
            key: key.to_string(),
            problem,
        }
    }
}

/// Largest `prefill_window_ms` accepted: a batch collects its prefills for at most a second.
pub const MAX_PREFILL_WINDOW_MS: f64 = 1000.0;

/// Largest `ttft_per_token_ms` accepted: a second per prompt token.
pub const MAX_PER_TOKEN_MS: f64 = 1000.0;

/// Largest `prefix_cache_block` accepted, tokens per block.
pub const MAX_PREFIX_CACHE_BLOCK: u32 = 65_536;

/// Blocks the simulator's prefix cache (`prefix_cache_block`) remembers; beyond it the least
/// recently used half is evicted.
pub const MAX_CACHED_BLOCKS: usize = 1_000_000;

/// Which cached-token count the simulator reports in usage (`cache_report`): what it reused, or
/// a misreporting server's count (fault injection, for checks that cross-check the report
/// against the TTFT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheReport {
    /// The prompt tokens the cache served (`honest`).
    #[default]
    Honest,
    /// No `cached_tokens` field at all (`none`): a server that does not report its cache.
    Omitted,
    /// Every prompt token, whatever was reused (`all`): a lying server.
    All,
    /// Always 0 (`zero`): a server whose report is stuck.
    Zero,
}

impl CacheReport {
    /// The names `cache_report` and `perfgate sim --cache-report` accept, in this order.
    pub const NAMES: [&'static str; 4] = ["honest", "none", "all", "zero"];

    /// `honest`, `none`, `all` or `zero`.
    pub fn parse(s: &str) -> Option<CacheReport> {
        match s {
            "honest" => Some(CacheReport::Honest),
            "none" => Some(CacheReport::Omitted),
            "all" => Some(CacheReport::All),
            "zero" => Some(CacheReport::Zero),
            _ => None,
        }
    }

    /// The count to report for a request of `prompt_tokens` whose cache served `cached` of
    /// them; `None` = the field is absent.
    pub fn reported(self, cached: u64, prompt_tokens: u64) -> Option<u64> {
        match self {
            CacheReport::Honest => Some(cached),
            CacheReport::Omitted => None,
            CacheReport::All => Some(prompt_tokens),
            CacheReport::Zero => Some(0),
        }
    }
}

/// Largest `burst` accepted, tokens per event.
pub const MAX_BURST: u32 = 1024;

/// Largest median delay (`ttft_ms`, `tpot_ms`) accepted, and the cap on any single drawn
/// delay, in ms (one hour).
pub const MAX_DELAY_MS: f64 = 3_600_000.0;

/// Largest lognormal log-sd accepted (`ttft_sigma`, `tpot_sigma`); exp(5) is a factor of ~150.
pub const MAX_SIGMA: f64 = 5.0;

/// Largest `max_output` accepted, in tokens; the server also clamps to it.
pub const MAX_OUTPUT_LIMIT: u32 = 1_000_000;

/// Longest model name accepted, in bytes.
const MAX_MODEL_LEN: usize = 256;

/// Simulator settings. Delays are lognormal: median `*_ms`, log-sd `*_sigma` (0 = fixed).
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Seed of the per-request RNGs (request n uses a stream derived from `seed` and n). Default 42.
    pub seed: u64,
    /// Model id reported by `/v1/models` and in every chunk. Default `"perfgate-sim"`.
    pub model: String,
    /// Median time to first token, ms (from request arrival to the first content chunk). Default 40.
    pub ttft_ms: f64,
    /// Lognormal log-sd of TTFT (dimensionless; 0 = always `ttft_ms`). Default 0.10.
    pub ttft_sigma: f64,
    /// Median gap between successive tokens, ms (time per output token). Default 8.
    pub tpot_ms: f64,
    /// Lognormal log-sd of each inter-token gap (dimensionless; 0 = fixed). Default 0.10.
    pub tpot_sigma: f64,
    /// Cap on generated tokens per request, tokens: output = min(max_tokens, max_output). Default 4096.
    pub max_output: u32,
    /// Share of generation requests answered HTTP 500 (fault injection), in [0, 1]. Default 0.
    pub error_rate: f64,
    /// Tokens per token-bearing event after the first (the first token always comes alone, as
    /// after a prefill), in 1..=1024. With `burst` K an event carries K tokens and is sent when
    /// its last token is due, so TPOT keeps its median while each ITL gap is ~K x `tpot_ms`
    /// (multi-step scheduling, speculative decoding). Default 1.
    pub burst: u32,
    /// Stall period, tokens: after every `stall_every`-th token the next gap is `stall_ms`
    /// longer (0 = no stalls). Default 0.
    pub stall_every: u32,
    /// Extra delay of a stalled gap, ms (a preemption, a long prefill of another request).
    /// Default 0.
    pub stall_ms: f64,
    /// Output-length variation, tokens: request n generates `min(max_tokens, max_output) -
    /// (n mod vary_output)` tokens (at least 1), so requests can be told apart by their output
    /// length (how `scripts/bench.py` matches another tool's records to the simulator's).
    /// 0 = off. Default 0.
    pub vary_output: u32,
    /// An exact-repeat cache: a request whose prompt (every message's content and `prompt`,
    /// exactly) this simulator already served gets this TTFT, ms, instead of a drawn one (and
    /// reports its whole prompt cached); its token gaps are unchanged. It applies before
    /// `prefix_cache_block`'s TTFT. `None` = off. At most [`MAX_CACHED_PROMPTS`] prompts are
    /// remembered. Default `None`.
    pub cached_ttft_ms: Option<f64>,
    /// Batched prefill, as a compute-bound engine schedules it (see
    /// [`super::prefill::PrefillEngine`]): prefills that arrive within this many ms of a batch's
    /// first (or while the batch before it runs) run as one batch, which takes the sum of their
    /// TTFTs, and all of them get their first token when it ends. A lone request's TTFT is its
    /// own; c requests that start together each wait for all c. `None` = every request's prefill
    /// is independent. Default `None`.
    pub prefill_window_ms: Option<f64>,
    /// Prefill time per prompt token, ms: a request's TTFT is its drawn TTFT plus this times
    /// its uncached prompt tokens (as counted in usage: the words of its messages, less what
    /// `prefix_cache_block` reused), so mixed prompt lengths give mixed TTFTs (a
    /// `cached_ttft_ms` hit's TTFT is `cached_ttft_ms` alone). Default 0.
    pub ttft_per_token_ms: f64,
    /// A block prefix cache, as vLLM's automatic prefix caching (see
    /// [`super::prefix_cache`]): the prompt's words are cut into blocks of this many; a request
    /// reuses its leading blocks already served (a block matches only when everything before
    /// it does), which `ttft_per_token_ms` does not charge. 0 = off. At most
    /// [`MAX_CACHED_BLOCKS`] blocks are remembered. Default 0.
    pub prefix_cache_block: u32,
    /// What usage reports as cached prompt tokens. Default [`CacheReport::Honest`].
    pub cache_report: CacheReport,
    /// Whether the prefill is CPU work (see [`super::cpu`]): `off` (a wait), `any` (the TTFT's
    /// worth of CPU time on one compute thread), or a core number to pin that thread to, so
    /// simulators sharing cores slow each other. Default [`PrefillCpu::Off`].
    pub prefill_cpu: PrefillCpu,
    /// Share of generation requests whose answer diverges (see [`super::diverge`]): from token
    /// `diverge_at` on, their tokens read ` alt{i}` instead of ` tok{i}`. Spread evenly over
    /// the request sequence (any N consecutive requests hold floor or ceil of N x share of
    /// them), the phase set by `seed`. In [0, 1]. Default 0.
    pub diverge_share: f64,
    /// The first token (1-based) a diverging answer changes, in 1..=1000000. Default 1.
    pub diverge_at: u32,
    /// Speculative decoding: draft tokens per step, 0..=64 (0 = none). With it, the usage
    /// chunk carries llama.cpp's `timings.draft_n` / `draft_n_accepted` (see [`super::spec`]).
    /// Default 0.
    pub draft_n: u32,
    /// Speculative decoding: the chance each draft token is accepted, in [0, 1]. Default 0.7.
    pub accept_rate: f64,
    /// Structured output: the share of requests asking for JSON (`response_format`) or a tool
    /// call (`tools`) whose answer is cut before its closing brace (malformed), in [0, 1],
    /// drawn per request from `seed`. Default 0.
    pub malformed: f64,
}

/// Largest `draft_n` accepted, tokens per step.
pub const MAX_DRAFT_N: u32 = 64;

/// Prompts the simulator's prefix cache remembers; beyond it the cache starts empty again.
pub const MAX_CACHED_PROMPTS: usize = 100_000;

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 42,
            model: "perfgate-sim".to_string(),
            ttft_ms: 40.0,
            ttft_sigma: 0.10,
            tpot_ms: 8.0,
            tpot_sigma: 0.10,
            max_output: 4096,
            error_rate: 0.0,
            burst: 1,
            stall_every: 0,
            stall_ms: 0.0,
            vary_output: 0,
            cached_ttft_ms: None,
            prefill_window_ms: None,
            ttft_per_token_ms: 0.0,
            prefix_cache_block: 0,
            cache_report: CacheReport::Honest,
            prefill_cpu: PrefillCpu::Off,
            diverge_share: 0.0,
            diverge_at: 1,
            draft_n: 0,
            accept_rate: 0.7,
            malformed: 0.0,
        }
    }
}

impl SimConfig {
    /// Parses a query string like
    /// `"ttft_ms=50&tpot_ms=10&seed=7&model=m&max_output=64&error_rate=0.1&ttft_sigma=0.2&tpot_sigma=0"`
    /// (a leading `?` is allowed; values may be percent-encoded), starting from the defaults.
    ///
    /// Unknown keys, repeated keys or bad values give `Err(message)` naming the key and the
    /// allowed keys. Ranges: `ttft_ms`, `tpot_ms` in [0, 3600000] ms; sigmas in [0, 5];
    /// `max_output` in [1, 1000000] tokens; `error_rate` in [0, 1]; `burst` in 1..=1024 tokens;
    /// `stall_every`, `vary_output` in 0..=1000000 tokens; `stall_ms` in [0, 3600000] ms; `model`
    /// non-empty, at most 256 bytes, no control characters; `prefix_cache_block` in 0..=65536
    /// words; `cache_report` one of `honest`, `none`, `all`, `zero`.
    pub fn from_query(q: &str) -> Result<SimConfig, SimConfigError> {
        SimConfig::default().with_query(q)
    }

    /// Overlay: like [`SimConfig::from_query`] but starting from `self` (keys not in `q` keep
    /// their value from `self`).
    pub fn with_query(&self, q: &str) -> Result<SimConfig, SimConfigError> {
        let q = q.strip_prefix('?').unwrap_or(q);
        let mut cfg = self.clone();
        let mut seen: HashSet<String> = HashSet::new();
        for (key, value) in url::form_urlencoded::parse(q.as_bytes()) {
            let key = key.into_owned();
            if key.is_empty() {
                if value.is_empty() {
                    continue; // "a=1&&b=2" or a trailing '&'
                }
                return Err(SimConfigError::EmptyKey {
                    value: value.into_owned(),
                });
            }
            if !seen.insert(key.clone()) {
                return Err(SimConfigError::Repeated { key });
            }
            let v = value.trim();
            match key.as_str() {
                "seed" => cfg.seed = parse_u64(&key, v)?,
                "model" => {
                    if v.is_empty() || v.len() > MAX_MODEL_LEN || v.chars().any(char::is_control) {
                        return Err(SimConfigError::value(
                            "model",
                            format!("{v:?} must be 1..={MAX_MODEL_LEN} bytes without control characters"),
                        ));
                    }
                    cfg.model = v.to_string();
                }
                "ttft_ms" => cfg.ttft_ms = parse_f64(&key, v, 0.0, MAX_DELAY_MS, "ms")?,
                "ttft_sigma" => cfg.ttft_sigma = parse_f64(&key, v, 0.0, MAX_SIGMA, "")?,
                "tpot_ms" => cfg.tpot_ms = parse_f64(&key, v, 0.0, MAX_DELAY_MS, "ms")?,
                "tpot_sigma" => cfg.tpot_sigma = parse_f64(&key, v, 0.0, MAX_SIGMA, "")?,
                "max_output" => {
                    let n = parse_u64(&key, v)?;
                    if n == 0 || n > u64::from(MAX_OUTPUT_LIMIT) {
                        return Err(SimConfigError::value(
                            "max_output",
                            format!("{n} is out of range 1..={MAX_OUTPUT_LIMIT} tokens"),
                        ));
                    }
                    cfg.max_output = n as u32;
                }
                "error_rate" => cfg.error_rate = parse_f64(&key, v, 0.0, 1.0, "")?,
                "burst" => cfg.burst = parse_u32(&key, v, 1, MAX_BURST)?,
                "stall_every" => cfg.stall_every = parse_u32(&key, v, 0, MAX_OUTPUT_LIMIT)?,
                "stall_ms" => cfg.stall_ms = parse_f64(&key, v, 0.0, MAX_DELAY_MS, "ms")?,
                "vary_output" => cfg.vary_output = parse_u32(&key, v, 0, MAX_OUTPUT_LIMIT)?,
                "cached_ttft_ms" => {
                    cfg.cached_ttft_ms = Some(parse_f64(&key, v, 0.0, MAX_DELAY_MS, "ms")?)
                }
                "prefill_window_ms" => {
                    cfg.prefill_window_ms =
                        Some(parse_f64(&key, v, 0.0, MAX_PREFILL_WINDOW_MS, "ms")?)
                }
                "ttft_per_token_ms" => {
                    cfg.ttft_per_token_ms = parse_f64(&key, v, 0.0, MAX_PER_TOKEN_MS, "ms")?
                }
                "prefix_cache_block" => {
                    cfg.prefix_cache_block = parse_u32(&key, v, 0, MAX_PREFIX_CACHE_BLOCK)?
                }
                "cache_report" => {
                    cfg.cache_report = CacheReport::parse(v).ok_or_else(|| {
                        SimConfigError::value(
                            "cache_report",
                            format!("{v:?} is not one of {}", CacheReport::NAMES.join(", ")),
                        )
                    })?
                }
                "prefill_cpu" => {
                    cfg.prefill_cpu = PrefillCpu::parse(v).ok_or_else(|| {
                        SimConfigError::value(
                            "prefill_cpu",
                            format!("{v:?} is not `off`, `any` or a core number"),
                        )
                    })?
                }
                "diverge_share" => cfg.diverge_share = parse_f64(&key, v, 0.0, 1.0, "")?,
                "diverge_at" => cfg.diverge_at = parse_u32(&key, v, 1, MAX_OUTPUT_LIMIT)?,
                "draft_n" => cfg.draft_n = parse_u32(&key, v, 0, MAX_DRAFT_N)?,
                "accept_rate" => cfg.accept_rate = parse_f64(&key, v, 0.0, 1.0, "")?,
                "malformed" => cfg.malformed = parse_f64(&key, v, 0.0, 1.0, "")?,
                _ => {
                    let hint = closest_key(&key);
                    return Err(SimConfigError::Unknown { key, hint });
                }
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the ranges [`SimConfig::from_query`] enforces (a struct built by hand may break
    /// them); [`crate::sim::SimServer::start`] refuses a config that fails.
    pub fn validate(&self) -> Result<(), SimConfigError> {
        let ranges = [
            ("ttft_ms", self.ttft_ms, MAX_DELAY_MS),
            ("ttft_sigma", self.ttft_sigma, MAX_SIGMA),
            ("tpot_ms", self.tpot_ms, MAX_DELAY_MS),
            ("tpot_sigma", self.tpot_sigma, MAX_SIGMA),
            ("error_rate", self.error_rate, 1.0),
            ("diverge_share", self.diverge_share, 1.0),
            ("accept_rate", self.accept_rate, 1.0),
            ("malformed", self.malformed, 1.0),
            ("stall_ms", self.stall_ms, MAX_DELAY_MS),
            (
                "cached_ttft_ms",
                self.cached_ttft_ms.unwrap_or(0.0),
                MAX_DELAY_MS,
            ),
            (
                "prefill_window_ms",
                self.prefill_window_ms.unwrap_or(0.0),
                MAX_PREFILL_WINDOW_MS,
            ),
            (
                "ttft_per_token_ms",
                self.ttft_per_token_ms,
                MAX_PER_TOKEN_MS,
            ),
        ];
        for (key, x, hi) in ranges {
            if !x.is_finite() || !(0.0..=hi).contains(&x) {
                return Err(SimConfigError::value(
                    key,
                    format!("{x} is out of range [0, {hi}]"),
                ));
            }
        }
        if self.max_output == 0 || self.max_output > MAX_OUTPUT_LIMIT {
            return Err(SimConfigError::value(
                "max_output",
                format!(
                    "{} is out of range 1..={MAX_OUTPUT_LIMIT} tokens",
                    self.max_output
                ),
            ));
        }
        let ints = [
            ("burst", self.burst, 1, MAX_BURST),
            ("stall_every", self.stall_every, 0, MAX_OUTPUT_LIMIT),
            ("vary_output", self.vary_output, 0, MAX_OUTPUT_LIMIT),
            ("diverge_at", self.diverge_at, 1, MAX_OUTPUT_LIMIT),
            ("draft_n", self.draft_n, 0, MAX_DRAFT_N),
            (
                "prefix_cache_block",
                self.prefix_cache_block,
                0,
                MAX_PREFIX_CACHE_BLOCK,
            ),
        ];
        for (key, x, lo, hi) in ints {
            if !(lo..=hi).contains(&x) {
                return Err(SimConfigError::value(
                    key,
                    format!("{x} is out of range {lo}..={hi}"),
                ));
            }
        }
        let m = &self.model;
        if m.is_empty() || m.len() > MAX_MODEL_LEN || m.chars().any(char::is_control) {
            return Err(SimConfigError::value(
                "model",
                format!("{m:?} must be 1..={MAX_MODEL_LEN} bytes without control characters"),
            ));
        }
        Ok(())
    }
}

fn parse_u64(key: &str, v: &str) -> Result<u64, SimConfigError> {
    v.parse::<u64>()
        .map_err(|_| SimConfigError::value(key, format!("{v:?} is not a non-negative integer")))
}

fn parse_u32(key: &str, v: &str, lo: u32, hi: u32) -> Result<u32, SimConfigError> {
    let n = parse_u64(key, v)?;
    if n < u64::from(lo) || n > u64::from(hi) {
        return Err(SimConfigError::value(
            key,
            format!("{n} is out of range {lo}..={hi}"),
        ));
    }
    Ok(n as u32)
}

fn parse_f64(key: &str, v: &str, lo: f64, hi: f64, unit: &str) -> Result<f64, SimConfigError> {
    let x: f64 = v
        .parse()
        .map_err(|_| SimConfigError::value(key, format!("{v:?} is not a number")))?;
    if !x.is_finite() || x < lo || x > hi {
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        return Err(SimConfigError::value(
            key,
            format!("{v} is out of range [{lo}, {hi}]{unit}"),
        ));
    }
    Ok(x)
}

/// The allowed key a typo most likely meant: a prefix match or an edit distance of at most 2.
fn closest_key(key: &str) -> Option<&'static str> {
    let mut best: Option<(usize, &'static str)> = None;
    for &k in ALLOWED_KEYS {
        let d = if k.starts_with(key) || key.starts_with(k) {
            0
        } else {
            levenshtein(key, k)
        };
        if d <= 2 && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = SimConfig::default();
        assert_eq!(c.seed, 42);
        assert_eq!(c.model, "perfgate-sim");
        assert_eq!(c.ttft_ms, 40.0);
        assert_eq!(c.ttft_sigma, 0.10);
        assert_eq!(c.tpot_ms, 8.0);
        assert_eq!(c.tpot_sigma, 0.10);
        assert_eq!(c.max_output, 4096);
        assert_eq!(c.error_rate, 0.0);
        assert_eq!(SimConfig::from_query("").unwrap(), c);
        assert_eq!(SimConfig::from_query("?").unwrap(), c);
    }

    #[test]
    fn parses_every_key() {
        let c = SimConfig::from_query(
            "ttft_ms=50&tpot_ms=10&seed=7&model=m&max_output=64&error_rate=0.1&ttft_sigma=0.2&tpot_sigma=0&burst=4&stall_every=16&stall_ms=250&vary_output=8&cached_ttft_ms=12.5&prefill_window_ms=3&ttft_per_token_ms=0.25&prefix_cache_block=16&cache_report=all&prefill_cpu=1&diverge_share=0.25&diverge_at=3&draft_n=4&accept_rate=0.5&malformed=0.25",
        )
        .unwrap();
        assert_eq!(
            c,
            SimConfig {
                seed: 7,
                model: "m".into(),
                ttft_ms: 50.0,
                ttft_sigma: 0.2,
                tpot_ms: 10.0,
                tpot_sigma: 0.0,
                max_output: 64,
                error_rate: 0.1,
                burst: 4,
                stall_every: 16,
                stall_ms: 250.0,
                vary_output: 8,
                cached_ttft_ms: Some(12.5),
                prefill_window_ms: Some(3.0),
                ttft_per_token_ms: 0.25,
                prefix_cache_block: 16,
                cache_report: CacheReport::All,
                prefill_cpu: PrefillCpu::Core(1),
                diverge_share: 0.25,
                diverge_at: 3,
                draft_n: 4,
                accept_rate: 0.5,
                malformed: 0.25,
            }
        );
        for bad in [
            "diverge_share=1.5",
            "diverge_at=0",
            "prefill_window_ms=1001",
            "ttft_per_token_ms=1001",
            "prefix_cache_block=65537",
            "prefix_cache_block=-1",
            "cache_report=lying",
            "cache_report=",
            "prefill_cpu=some",
            "burst=0",
            "burst=1025",
            "stall_every=-1",
            "stall_ms=-5",
            "vary_output=x",
        ] {
            let e = SimConfig::from_query(bad).unwrap_err().to_string();
            assert!(e.contains(bad.split('=').next().unwrap()), "{bad}: {e}");
        }
        let e = SimConfig::from_query("burst=0").unwrap_err().to_string();
        assert_eq!(e, "simulator setting `burst`: 0 is out of range 1..=1024");
        let e = SimConfig::from_query("cache_report=lying")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "simulator setting `cache_report`: \"lying\" is not one of honest, none, all, zero"
        );
        for (name, want) in CacheReport::NAMES.iter().zip([
            CacheReport::Honest,
            CacheReport::Omitted,
            CacheReport::All,
            CacheReport::Zero,
        ]) {
            let c = SimConfig::from_query(&format!("cache_report={name}")).unwrap();
            assert_eq!(c.cache_report, want);
        }
        let d = SimConfig::from_query("?model=my%20model&").unwrap();
        assert_eq!(d.model, "my model");
    }

    #[test]
    fn overlay_keeps_other_fields() {
        let base = SimConfig::from_query("seed=9&tpot_ms=3").unwrap();
        let c = base.with_query("ttft_ms=5").unwrap();
        assert_eq!(c.seed, 9);
        assert_eq!(c.tpot_ms, 3.0);
        assert_eq!(c.ttft_ms, 5.0);
    }

    #[test]
    fn rejects_unknown_key_naming_allowed_keys() {
        let e = SimConfig::from_query("tpot=3").unwrap_err().to_string();
        assert!(e.contains("`tpot`"), "{e}");
        assert!(e.contains("did you mean `tpot_ms`"), "{e}");
        for k in ALLOWED_KEYS {
            assert!(e.contains(k), "{e} lacks {k}");
        }
    }

    #[test]
    fn rejects_bad_values() {
        for q in [
            "ttft_ms=-1",
            "ttft_ms=abc",
            "ttft_ms=NaN",
            "ttft_ms=inf",
            "tpot_ms=1e9",
            "ttft_sigma=6",
            "error_rate=1.5",
            "max_output=0",
            "max_output=2000000",
            "seed=-3",
            "model=",
            "seed=1&seed=2",
            "=5",
        ] {
            let e = SimConfig::from_query(q).unwrap_err().to_string();
            let key = q.split('=').next().unwrap();
            if !key.is_empty() {
                assert!(e.contains(key), "{q}: {e}");
            }
        }
    }
}
