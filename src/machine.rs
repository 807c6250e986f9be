//! The machine perfgate runs on, as a baseline records it and a check compares it: the host
//! name and the CPU (model and how many this process may use). A check on another CPU than its
//! bless measures that machine's speed as much as the server's (issue 32 item 5).

/// The cores this process may run on (its CPU affinity and quota).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// This process's user + system CPU time so far, seconds (every thread); `None` when
/// getrusage(2) fails.
#[allow(unsafe_code)]
pub fn process_cpu_s() -> Option<f64> {
    // SAFETY: getrusage(2) only writes one `rusage` into the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(s(ru.ru_utime) + s(ru.ru_stime))
}

/// The host name (`$HOSTNAME`, else `/etc/hostname`); `None` when neither is readable.
pub fn host() -> Option<String> {
    std::env::var("HOSTNAME").ok().or_else(|| {
        std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|s| s.trim().to_string())
    })
}

/// `model name x N` from /proc/cpuinfo's first `model name` and the CPUs this process may use;
/// `None` where /proc/cpuinfo has no model name (not Linux, some ARM kernels).
pub fn cpu() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    cpu_of(&text, cores())
}

/// [`cpu`] from the text of /proc/cpuinfo and a CPU count. Pure.
pub fn cpu_of(cpuinfo: &str, cpus: usize) -> Option<String> {
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))?
        .split_once(':')?
        .1
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!model.is_empty()).then(|| format!("{} x {cpus}", model.chars().take(120).collect::<String>()))
}

/// The note a check makes when it runs on another CPU than its baseline was blessed on (both
/// known), naming both and the host names when known; `None` on the same CPU or when either
/// side is unknown (a baseline blessed before perfgate recorded it). Host names alone differ on
/// every hosted CI run and say nothing about speed, so they never make a note by themselves.
pub fn difference(
    base_cpu: Option<&str>,
    base_host: Option<&str>,
    cpu: Option<&str>,
    host: Option<&str>,
) -> Option<String> {
    let (b, c) = (base_cpu?, cpu?);
    if b == c {
        return None;
    }
    let hosts = match (base_host, host) {
        (Some(bh), Some(h)) if bh != h => format!(" (host {bh} -> {h})"),
        _ => String::new(),
    };
    Some(format!(
        "this check ran on another CPU than its baseline's bless: {b} -> {c}{hosts}; a different machine's speed reads as a change of the server's, so bless on the runner class that checks, or compare in one job with `perfgate ab`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_and_a_difference_worth_a_note() {
        let info = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t: fpu\n";
        assert_eq!(
            cpu_of(info, 4).as_deref(),
            Some("AMD EPYC 7763 64-Core Processor x 4")
        );
        assert_eq!(cpu_of("processor\t: 0\n", 2), None);
        let (a, b) = ("AMD EPYC 7763 x 4", "Intel Xeon 8370C x 2");
        let n = difference(Some(a), Some("fv-az1"), Some(b), Some("fv-az2")).unwrap();
        assert!(
            n.starts_with("this check ran on another CPU than its baseline's bless: AMD EPYC 7763 x 4 -> Intel Xeon 8370C x 2 (host fv-az1 -> fv-az2);"),
            "{n}"
        );
        // same CPU on another host (every hosted CI run): no note; unknown side: no note
        assert_eq!(difference(Some(a), Some("h1"), Some(a), Some("h2")), None);
        assert_eq!(difference(None, Some("h1"), Some(b), Some("h2")), None);
    }
}
