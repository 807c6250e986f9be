//! The client-lag probe: how late the tokio runtime wakes a task while measuring, so a client
//! too busy to read its sockets on time is reported instead of passing as a slow server.

use crate::summary::ClientLag;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Interval of the client-lag probe's sleeps (one wakeup per interval while measuring).
pub const LAG_PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// P99 client lag above which a scenario gets the "client busy" note, ms: a client that wakes
/// its tasks this late may stamp tokens this late, which shows up as TTFT/ITL the server did
/// not cause.
pub const CLIENT_LAG_WARN_MS: f64 = 10.0;
/// Lag samples kept per session for the quantiles (all up to this many, about 2.7 minutes of
/// wakeups; a uniform reservoir sample beyond), so a long run stays bounded in memory.
pub const LAG_RESERVOIR: usize = 16_384;

/// The lag samples of one probe.
struct LagRecorder {
    kept: Vec<f64>,
    seen: u64,
    max: f64,
    rng: rand::rngs::StdRng,
    /// Wall and process CPU seconds over the probe's start/stop cycles.
    wall_s: f64,
    cpu_s: f64,
}

impl LagRecorder {
    fn push(&mut self, lag_ms: f64) {
        use rand::Rng;
        self.seen += 1;
        self.max = self.max.max(lag_ms);
        if self.kept.len() < LAG_RESERVOIR {
            self.kept.push(lag_ms);
        } else {
            // Algorithm R: every wakeup so far is kept with the same probability.
            let j = self.rng.random_range(0..self.seen);
            if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.kept.get_mut(j)) {
                *slot = lag_ms;
            }
        }
    }
}

/// Event-loop lag probe: a task on the current tokio runtime sleeps `interval` in a loop and
/// records how late each wakeup was (actual minus due time, ms). A runtime whose threads are
/// busy (too many streams to parse, a blocked thread, a starved machine) wakes it late, and
/// wakes the measuring tasks just as late, so their timestamps then carry client-side delay.
/// The probe's own cost is one timer per interval. Samples accumulate over `start`/`stop`
/// cycles (the looks of a session); memory is bounded by [`LAG_RESERVOIR`].
pub struct LagProbe {
    interval: Duration,
    rec: Arc<Mutex<LagRecorder>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// When the running cycle started: wall clock and the process's CPU seconds.
    since: Option<(Instant, Option<f64>)>,
}

impl LagProbe {
    /// A stopped probe that will sleep `interval` (at least 1 ms) between wakeups.
    pub fn new(interval: Duration) -> LagProbe {
        use rand::SeedableRng;
        LagProbe {
            interval: interval.max(Duration::from_millis(1)),
            rec: Arc::new(Mutex::new(LagRecorder {
                kept: Vec::new(),
                seen: 0,
                max: 0.0,
                rng: rand::rngs::StdRng::seed_from_u64(0x1a9),
                wall_s: 0.0,
                cpu_s: 0.0,
            })),
            task: None,
            since: None,
        }
    }

    /// Starts probing on the current tokio runtime (must be called inside one); no-op when
    /// already running.
    pub fn start(&mut self) {
        if self.task.is_some() {
            return;
        }
        self.since = Some((Instant::now(), crate::machine::process_cpu_s()));
        let rec = Arc::clone(&self.rec);
        let interval = self.interval;
        self.task = Some(tokio::spawn(async move {
            loop {
                let due = Instant::now() + interval;
                tokio::time::sleep_until(due.into()).await;
                let late = Instant::now().saturating_duration_since(due);
                if let Ok(mut r) = rec.lock() {
                    r.push(late.as_secs_f64() * 1000.0);
                }
            }
        }));
    }

    /// Stops probing (the samples are kept).
    pub fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some((at, Some(cpu0))) = self.since.take() {
            if let (Some(cpu1), Ok(mut r)) = (crate::machine::process_cpu_s(), self.rec.lock()) {
                r.wall_s += at.elapsed().as_secs_f64();
                r.cpu_s += (cpu1 - cpu0).max(0.0);
            }
        }
    }

    /// P50, P99 (type 7 over the kept samples), max and count of the wakeup lags, ms rounded to
    /// 0.001; `None` before the first wakeup.
    pub fn summary(&self) -> Option<ClientLag> {
        let r = self.rec.lock().ok()?;
        if r.seen == 0 {
            return None;
        }
        let mut xs = r.kept.clone();
        xs.sort_by(f64::total_cmp);
        let q = |p: f64| crate::stats::quantile::quantile_type7(&xs, p).unwrap_or(r.max);
        Some(ClientLag {
            p50: crate::units::round3(q(0.5)),
            p99: crate::units::round3(q(0.99)),
            max: crate::units::round3(r.max),
            samples: r.seen,
            cpu_share: cpu_share(r.cpu_s, r.wall_s, crate::machine::cores()),
        })
    }
}

/// Process CPU seconds over wall seconds x `cores`, rounded to 0.001; `None` without wall time.
pub fn cpu_share(cpu_s: f64, wall_s: f64, cores: usize) -> Option<f64> {
    (wall_s > 0.0 && cores > 0).then(|| crate::units::round3(cpu_s / (wall_s * cores as f64)))
}

impl Drop for LagProbe {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::{cpu_share, LagProbe, LAG_RESERVOIR};

    #[test]
    fn the_cpu_share_is_cpu_time_over_wall_time_and_cores() {
        // 7.5 CPU seconds over 6 s on 1 core: more than one core's worth (other threads' time
        // counts too) reads as 1.25; 3 s of 12 core-seconds is 0.25
        assert_eq!(cpu_share(7.5, 6.0, 1), Some(1.25));
        assert_eq!(cpu_share(3.0, 6.0, 2), Some(0.25));
        assert_eq!(cpu_share(1.0, 0.0, 2), None);
    }

    #[test]
    fn lag_samples_are_bounded_and_summarised() {
        let p = LagProbe::new(std::time::Duration::from_millis(10));
        assert_eq!(p.summary(), None);
        let n = 3 * LAG_RESERVOIR as u64;
        if let Ok(mut r) = p.rec.lock() {
            // 1 % of the wakeups 20 ms late, the rest 1 ms; one 250 ms stall
            for i in 0..n {
                r.push(if i % 100 == 0 { 20.0 } else { 1.0 });
            }
            r.push(250.0);
            assert_eq!(r.kept.len(), LAG_RESERVOIR);
        }
        let s = p.summary().unwrap();
        assert_eq!(s.samples, n + 1);
        assert_eq!(s.max, 250.0);
        assert_eq!(s.p50, 1.0);
        // the reservoir keeps ~1 % of 20 ms values: P99 falls near the boundary
        assert!((1.0..=20.0).contains(&s.p99), "{s:?}");
    }
}
