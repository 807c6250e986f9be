//! CPU-bound prefill (`prefill_cpu`): the simulator's model of an engine with one compute thread
//! (`llama-server -t 1`). A request's prefill is its TTFT's worth of CPU time burnt on the
//! simulator's own compute thread (one request after another, in arrival order), so its wall
//! time is its own while a core is free, and longer while other processes want the same cores:
//! two simulators on one core slow each other as two servers on one machine do (issue 43).
//! The token gaps after the first token are timed as usual.

use std::io;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// Where the compute thread runs (`prefill_cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrefillCpu {
    /// The prefill is a wait, not CPU work (`off`).
    #[default]
    Off,
    /// CPU work on one thread the OS places anywhere (`any`).
    Any,
    /// CPU work on one thread pinned to this core (`N`, Linux): simulators pinned to one core
    /// share it whatever the machine's core count.
    Core(u32),
}

impl PrefillCpu {
    /// `off`, `any` or a core number.
    pub fn parse(s: &str) -> Option<PrefillCpu> {
        match s {
            "off" => Some(PrefillCpu::Off),
            "any" => Some(PrefillCpu::Any),
            n => n.parse().ok().map(PrefillCpu::Core),
        }
    }
}

/// One prefill: its CPU time, and who waits for its end.
struct Job {
    cpu_ms: f64,
    done: oneshot::Sender<()>,
}

/// The compute thread of one simulator; the thread ends when this is dropped.
#[derive(Debug)]
pub(super) struct CpuEngine {
    jobs: mpsc::Sender<Job>,
}

impl CpuEngine {
    /// Starts the compute thread, pinned to `where_`'s core if it names one; `None` for
    /// [`PrefillCpu::Off`]. Errors: the thread cannot be spawned or pinned (a core this process
    /// may not use).
    pub(super) fn start(where_: PrefillCpu) -> io::Result<Option<CpuEngine>> {
        let pin = match where_ {
            PrefillCpu::Off => return Ok(None),
            PrefillCpu::Any => None,
            PrefillCpu::Core(n) => Some(n),
        };
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        std::thread::Builder::new()
            .name("perfgate-sim-cpu".into())
            .spawn(move || {
                let pinned = pin.map_or(Ok(()), pin_this_thread);
                let ok = pinned.is_ok();
                let _ = ready_tx.send(pinned);
                if !ok {
                    return;
                }
                while let Ok(job) = rx.recv() {
                    burn(job.cpu_ms, &job.done);
                    let _ = job.done.send(());
                }
            })?;
        ready_rx
            .recv()
            .map_err(|_| io::Error::other("the simulator's compute thread ended at start"))??;
        Ok(Some(CpuEngine { jobs: tx }))
    }

    /// Runs a prefill of `cpu_ms` of CPU time on the compute thread (after the ones queued
    /// before it) and returns when it is done.
    pub(super) async fn prefill(&self, cpu_ms: f64) {
        let (done, wait) = oneshot::channel();
        if self.jobs.send(Job { cpu_ms, done }).is_ok() {
            let _ = wait.await;
        }
    }
}

/// Spins until this thread has used `cpu_ms` of CPU time (its own clock, so a thread that shares
/// its core takes longer in wall time), or until nobody waits for it any more.
fn burn(cpu_ms: f64, done: &oneshot::Sender<()>) {
    let target_ns = (cpu_ms.max(0.0) * 1e6) as u128;
    let wall = std::time::Instant::now();
    let start = thread_cpu_ns();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        for i in 0..4096u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        }
        std::hint::black_box(x);
        let used = match (start, thread_cpu_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            // no thread CPU clock: the wall clock (then the model shares nothing)
            _ => wall.elapsed().as_nanos(),
        };
        if used >= target_ns || done.is_closed() {
            return;
        }
    }
}

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`); `None` where the clock fails.
#[allow(unsafe_code)]
fn thread_cpu_ns() -> Option<u128> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) only writes one `timespec` into the struct it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128)
}

/// Pins the calling thread to core `n` (sched_setaffinity(2)).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn pin_this_thread(n: u32) -> io::Result<()> {
    let bits = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if n as usize >= bits {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("prefill_cpu: core {n} is beyond the {bits} cores a CPU set holds"),
        ));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes bit n (< its size, checked
    // above); sched_setaffinity(2) reads the set given with its size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(n as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("prefill_cpu: cannot run the compute thread on core {n} ({e}); name a core this process may use (0 to {}), or `any`", crate::machine::cores().saturating_sub(1)),
        ));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn pin_this_thread(n: u32) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("prefill_cpu: pinning to core {n} is Linux only; use `any`"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_where() {
        assert_eq!(PrefillCpu::parse("off"), Some(PrefillCpu::Off));
        assert_eq!(PrefillCpu::parse("any"), Some(PrefillCpu::Any));
        assert_eq!(PrefillCpu::parse("1"), Some(PrefillCpu::Core(1)));
        assert_eq!(PrefillCpu::parse("-1"), None);
        assert_eq!(PrefillCpu::parse("all"), None);
    }

    /// The burn is CPU time of its own thread: 30 ms of it takes at least 30 ms of wall time,
    /// and the thread's clock advanced by at least 30 ms.
    #[test]
    fn burns_its_cpu_time() {
        let (done, _wait) = oneshot::channel();
        let t = std::time::Instant::now();
        let before = thread_cpu_ns().unwrap();
        burn(30.0, &done);
        let cpu_ms = (thread_cpu_ns().unwrap() - before) as f64 / 1e6;
        assert!(cpu_ms >= 30.0, "{cpu_ms}");
        assert!(t.elapsed().as_secs_f64() * 1000.0 >= 30.0);
    }

    #[test]
    fn a_core_out_of_range_is_refused() {
        let e = CpuEngine::start(PrefillCpu::Core(100_000)).unwrap_err();
        assert!(e.to_string().contains("core 100000"), "{e}");
    }
}
