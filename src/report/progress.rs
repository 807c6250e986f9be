//! The live progress line while measuring (indicatif, on stderr): requests done / total, the
//! current P50 TTFT and the errors so far. Only on an interactive terminal: never when stderr
//! is not a TTY, `CI` is set, or `TERM=dumb`, so CI logs stay clean. Cleared when a scenario's
//! session ends, before anything else is printed.

use crate::config::Scenario;
use crate::record::RequestRecord;
use crate::runner::{Phase, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// True when a live display may be drawn on stderr.
pub fn enabled() -> bool {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    std::io::stderr().is_terminal()
        && var("CI").is_none()
        && var("TERM").is_none_or(|t| t != "dumb")
}

#[derive(Default)]
struct State {
    bar: Option<ProgressBar>,
    warmup: usize,
    warm_done: usize,
    failed: usize,
    ttft: Vec<f64>,
}

/// The terminal progress display. Build it with [`TerminalProgress::stderr`].
pub struct TerminalProgress {
    state: Mutex<State>,
}

impl TerminalProgress {
    /// A display on stderr, or `None` when [`enabled`] says no.
    pub fn stderr() -> Option<Arc<dyn Progress>> {
        enabled().then(|| {
            Arc::new(TerminalProgress {
                state: Mutex::new(State::default()),
            }) as Arc<dyn Progress>
        })
    }
}

/// The message after the bar: warmup, or the current P50 TTFT and the errors so far.
fn message(st: &State) -> String {
    if st.ttft.is_empty() && st.failed == 0 {
        if st.warmup > 0 {
            return format!("warming up ({}/{})", st.warm_done, st.warmup);
        }
        return "starting".into();
    }
    let mut s = st.ttft.clone();
    s.sort_by(f64::total_cmp);
    let p50 = crate::stats::quantile::quantile_type7(&s, 0.5)
        .map(super::fmt_ms)
        .unwrap_or_else(|| "-".into());
    format!(
        "P50 TTFT {p50}, {} error{}",
        st.failed,
        if st.failed == 1 { "" } else { "s" }
    )
}

impl Progress for TerminalProgress {
    fn start(&self, sc: &Scenario) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if let Some(b) = st.bar.take() {
            b.finish_and_clear();
        }
        let total = sc.load.max_samples.unwrap_or(sc.load.samples) as u64;
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("  {prefix} [{bar:20}] {pos}/{len} requests, {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(sc.name.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        *st = State {
            bar: None,
            warmup: sc.load.warmup as usize,
            ..State::default()
        };
        bar.set_message(message(&st));
        st.bar = Some(bar);
    }

    fn request(&self, phase: Phase, record: &RequestRecord) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        match phase {
            Phase::Warmup => st.warm_done += 1,
            Phase::Measured if record.ok() => st.ttft.extend(record.ttft_ms),
            Phase::Measured => st.failed += 1,
            Phase::Unmeasured => {}
        }
        let msg = message(&st);
        if let Some(b) = &st.bar {
            if phase == Phase::Measured {
                b.inc(1);
            }
            b.set_message(msg);
        }
    }

    fn finish(&self) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(b) = st.bar.take() {
                b.finish_and_clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shows_warmup_then_p50_and_errors() {
        let mut st = State {
            warmup: 2,
            warm_done: 1,
            ..State::default()
        };
        assert_eq!(message(&st), "warming up (1/2)");
        st.ttft = vec![40.0, 50.0, 45.0];
        st.failed = 1;
        assert_eq!(message(&st), "P50 TTFT 45.0 ms, 1 error");
    }
}
