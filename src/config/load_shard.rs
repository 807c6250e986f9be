//! `check --load-shard I/N`: worker I's part of each scenario's load (pure), so N workers
//! (a CI matrix, a Kubernetes Indexed Job) load one server together and `perfgate report`
//! merges their requests into one sample (docs/load-shards.md).
//!
//! Worker I (1-based) of N takes the global request indices I-1, I-1+N, I-1+2N, ... of the
//! scenario: its share of `samples`, `concurrency` and `warmup` (at least one warmup request
//! when the scenario has any) is the count of those indices below the total (the totals split
//! as evenly as they go, the first workers taking one more), and of
//! `rate` exactly 1/N, its arrivals being the unsharded schedule's every N-th (so the merged
//! arrivals are the unsharded run's). A steady-state ramp-up starts the global stream g at
//! g x step, worker I owning the streams I-1, I-1+N, ... The fingerprint stays the scenario's:
//! the merged sample is compared with the unsharded baseline.

pub use super::scenario::LoadShare;
use super::scenario::{Scenario, Target};
use super::shard::Shard;
use crate::config::common::{ensure, Invalid};

/// Worker `index` (1-based)'s count of the indices `index-1, index-1+count, ...` below `total`.
pub fn share(total: u32, shard: Shard) -> u32 {
    let (n, i) = (shard.count as u32, shard.index as u32 - 1);
    total / n + u32::from(i < total % n)
}

/// Why a scenario cannot be split over workers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scenario {scenario}: --load-shard {index}/{count}: {problem}")]
pub struct CannotSplit {
    pub scenario: String,
    pub index: usize,
    pub count: usize,
    pub problem: String,
}

/// `sc` as worker `shard.index` of `shard.count` runs it: its share of samples, concurrency and
/// rate (see the module comment), the totals kept in `load.share`.
///
/// Errors: a scenario every worker would measure on its own server (`sim://` or `server:`), a
/// concurrency or sample count smaller than the workers, or sequential looks
/// (`load.max_samples`, which stop each worker at its own look).
pub fn split(
    mut sc: Scenario,
    shard: Shard,
    start_at_unix_ms: Option<f64>,
) -> Result<Scenario, CannotSplit> {
    let refuse = |problem: String| CannotSplit {
        scenario: sc.name.to_string(),
        index: shard.index,
        count: shard.count,
        problem,
    };
    if matches!(sc.endpoint.target, Target::Sim(_)) {
        return Err(refuse(
            "endpoint.base_url is sim://, a simulator inside each worker: load shards must load one server; start `perfgate sim --port P` once and point the scenario at http://127.0.0.1:P/v1".into(),
        ));
    }
    if sc.server.is_some() {
        return Err(refuse(
            "its `server:` block would start a server in each worker: load shards must load one server; start it once and point endpoint.base_url at it".into(),
        ));
    }
    if sc.request.conversation.is_some() {
        return Err(refuse(
            "request.conversation: load shards split requests, not conversations; run a conversation scenario in one process (its conversations are closed-loop streams of their own)".into(),
        ));
    }
    // the scenario's totals (copies of numbers, not of the load: a trace stays where it is)
    let l = Totals {
        concurrency: sc.load.concurrency,
        samples: sc.load.samples,
        warmup: sc.load.warmup,
        rate: sc.load.rate,
        max_samples: sc.load.max_samples,
    };
    let workers = shard.count as u32;
    if l.max_samples.is_some() {
        return Err(refuse(
            "load.max_samples (sequential looks) would stop each worker at its own look: remove it for a load-sharded run".into(),
        ));
    }
    if l.concurrency < workers {
        return Err(refuse(format!(
            "load.concurrency {} is fewer streams than {workers} workers: use at most {} workers",
            l.concurrency, l.concurrency
        )));
    }
    let fewest = share(
        l.samples,
        Shard {
            index: shard.count,
            ..shard
        },
    );
    if fewest == 0 {
        return Err(refuse(format!(
            "load.samples {} is fewer than {workers} workers",
            l.samples
        )));
    }
    let total = (l.concurrency, l.samples);
    sc.load.concurrency = share(total.0, shard);
    sc.load.samples = share(total.1, shard);
    // the workers warm up together: their shares add up to the scenario's warmup load (at least
    // one each, which finds a server that closes its connection after every stream)
    sc.load.warmup = share(l.warmup, shard).max(1.min(l.warmup));
    sc.load.rate = l.rate.map(|r| r / f64::from(workers));
    sc.load.share = Some(LoadShare {
        shard,
        total_concurrency: total.0,
        total_samples: total.1,
        total_rate: l.rate,
        start_at_unix_ms,
    });
    Ok(sc)
}

/// The load figures of a scenario that [`split`] shares out.
struct Totals {
    concurrency: u32,
    samples: u32,
    warmup: u32,
    rate: Option<f64>,
    max_samples: Option<u32>,
}

/// Parses `--start-at`: RFC 3339 (`2026-12-04T07:30:00Z`), or seconds since the Unix epoch
/// (`1796369400`, what `date +%s` prints), or `+SECONDS` from now. Returns ms since the epoch.
///
/// Errors: text in none of these forms, or a time more than a day away from `now_unix_ms`.
pub fn parse_start_at(text: &str, now_unix_ms: f64) -> Result<f64, Invalid> {
    let t = text.trim();
    let at = if let Some(rel) = t.strip_prefix('+') {
        let s: f64 = rel
            .parse()
            .ok()
            .filter(|s: &f64| *s >= 0.0)
            .ok_or_else(|| format!("`{text}`: +SECONDS wants seconds from now, e.g. +120"))?;
        now_unix_ms + s * 1000.0
    } else if let Ok(secs) = t.parse::<f64>() {
        secs * 1000.0
    } else {
        let dt = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .map_err(|_| {
                format!(
                    "`{text}`: use RFC 3339 (2026-12-04T07:30:00Z), seconds since the epoch (date +%s) or +SECONDS from now"
                )
            })?;
        dt.unix_timestamp_nanos() as f64 / 1e6
    };
    const DAY_MS: f64 = 86_400_000.0;
    let then = "give the time the workers start together";
    ensure!(
        at.is_finite() && at - now_unix_ms <= DAY_MS,
        "`{text}` is more than a day from now: {then}"
    );
    ensure!(
        now_unix_ms - at <= DAY_MS,
        "`{text}` is more than a day in the past: {then}"
    );
    Ok(at)
}

/// `ms` since the Unix epoch as RFC 3339 UTC, to the millisecond.
pub fn utc(ms: f64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos((ms * 1e6) as i128)
        .ok()
        .and_then(|t| {
            t.replace_nanosecond(t.nanosecond() / 1_000_000 * 1_000_000)
                .ok()
        })
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms:.3e} ms after the epoch (not a time)"))
}

/// Now, ms since the Unix epoch.
pub fn now_unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(index: usize, count: usize) -> Shard {
        Shard { index, count }
    }

    #[test]
    fn shares_add_up_to_the_total_and_take_every_nth_index() {
        // 10 over 4: indices 0,4,8 | 1,5,9 | 2,6 | 3,7
        let got: Vec<u32> = (1..=4).map(|i| share(10, sh(i, 4))).collect();
        assert_eq!(got, vec![3, 3, 2, 2]);
        for (total, n) in [(20u32, 3usize), (7, 7), (1000, 6), (33, 4)] {
            let sum: u32 = (1..=n).map(|i| share(total, sh(i, n))).sum();
            assert_eq!(sum, total);
            // every index below `total` belongs to exactly one worker
            let mut seen = vec![0; total as usize];
            for i in 1..=n {
                let ls = LoadShare {
                    shard: sh(i, n),
                    total_concurrency: 1,
                    total_samples: total,
                    total_rate: None,
                    start_at_unix_ms: None,
                };
                for local in 0..share(total, sh(i, n)) as usize {
                    seen[ls.global_index(local)] += 1;
                }
            }
            assert!(seen.iter().all(|&k| k == 1), "{total} over {n}");
        }
    }

    fn scenario(yaml_load: &str, url: &str) -> Scenario {
        let text = format!(
            "scenarios:\n  - name: s\n    endpoint: {{base_url: {url}, model: m}}\n    request: {{prompt: hi, max_tokens: 8}}\n    load: {yaml_load}\n"
        );
        let mut v = crate::config::parse_str(&text, "s.yaml", &|_| None).unwrap();
        v.remove(0)
    }

    #[test]
    fn a_worker_runs_its_share_and_keeps_the_fingerprint() {
        let sc = scenario("{concurrency: 10, samples: 41}", "http://127.0.0.1:9/v1");
        let w = split(sc.clone(), sh(2, 4), Some(5.0)).unwrap();
        assert_eq!((w.load.concurrency, w.load.samples), (3, 10));
        // warmup 2 over 4: workers 1 and 2 take one each, 3 and 4 one too (at least one)
        assert_eq!(w.load.warmup, 1);
        assert_eq!(split(sc.clone(), sh(4, 4), None).unwrap().load.warmup, 1);
        let cold = scenario(
            "{concurrency: 8, samples: 40, warmup: 0}",
            "http://127.0.0.1:9/v1",
        );
        assert_eq!(split(cold, sh(3, 4), None).unwrap().load.warmup, 0);
        assert_eq!(w.fingerprint, sc.fingerprint);
        let share = w.load.share.unwrap();
        assert_eq!((share.total_concurrency, share.total_samples), (10, 41));
        assert_eq!(share.start_at_unix_ms, Some(5.0));
        let open = scenario(
            "{rate: 8, concurrency: 64, samples: 40}",
            "http://127.0.0.1:9/v1",
        );
        let w = split(open, sh(4, 4), None).unwrap();
        assert_eq!(
            (w.load.rate, w.load.concurrency, w.load.samples),
            (Some(2.0), 16, 10)
        );
    }

    #[test]
    fn what_cannot_be_split_says_why() {
        let http = "http://127.0.0.1:9/v1";
        let cases = [
            ("{concurrency: 2, samples: 40}", http, "at most 2 workers"),
            (
                "{concurrency: 8, samples: 20, max_samples: 200}",
                http,
                "load.max_samples",
            ),
            (
                "{concurrency: 8, samples: 40}",
                "sim://",
                "perfgate sim --port",
            ),
        ];
        for (load, url, want) in cases {
            let e = split(scenario(load, url), sh(1, 4), None).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
            assert!(
                e.to_string().starts_with("scenario s: --load-shard 1/4: "),
                "{e}"
            );
        }
    }

    #[test]
    fn start_at_takes_rfc3339_epoch_seconds_or_an_offset() {
        let now = 1_796_369_400_000.0; // 2026-12-04T07:30:00Z
        assert_eq!(
            parse_start_at("2026-12-04T07:31:00Z", now),
            Ok(now + 60_000.0)
        );
        assert_eq!(parse_start_at("1796369430", now), Ok(now + 30_000.0));
        assert_eq!(parse_start_at("+90", now), Ok(now + 90_000.0));
        for bad in [
            "tomorrow",
            "+x",
            "+-5",
            "2027-12-04T07:31:00Z",
            "+1e20",
            "NaN",
        ] {
            assert!(parse_start_at(bad, now).is_err(), "{bad}");
        }
        assert_eq!(utc(now + 123.4), "2026-12-04T07:30:00.123Z");
        // a hostile worker file's start: a short number, not 300 digits
        assert_eq!(utc(1e300), "1.000e300 ms after the epoch (not a time)");
        let past = parse_start_at("2020-01-01T00:00:00Z", now).unwrap_err();
        assert!(past.to_string().contains("in the past"), "{past}");
        // a start a minute ago: measure at once (the worker says how late it is)
        assert_eq!(parse_start_at("1796369340", now), Ok(now - 60_000.0));
    }
}
