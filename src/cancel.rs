//! Cooperative cancellation on Ctrl-C / SIGTERM (issue 8): the first signal stops new requests,
//! lets in-flight ones finish for up to [`GRACE`], and makes `check` write partial results
//! marked incomplete and `bless` write nothing; a second signal, or [`HARD_STOP`], exits at
//! once after the hooks of [`on_force_exit`] (the last-resort results, temporary files removed,
//! servers killed). Exit code [`crate::exit::INTERRUPTED`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

/// How long in-flight requests may run after the first signal.
pub const GRACE: Duration = Duration::from_secs(5);

/// perfgate exits within this long of the first signal whatever it is doing: [`GRACE`] for the
/// requests in flight, then time to write the partial results and stop the servers it started.
/// A phase still running then (a CPU-bound step, a server slow to stop) is cut short as by a
/// second signal.
pub const HARD_STOP: Duration = Duration::from_secs(15);

static FLAG: AtomicBool = AtomicBool::new(false);
static CHANNEL: OnceLock<(watch::Sender<bool>, watch::Receiver<bool>)> = OnceLock::new();

fn channel() -> &'static (watch::Sender<bool>, watch::Receiver<bool>) {
    CHANNEL.get_or_init(|| watch::channel(false))
}

/// Marks the run as cancelled (what the signal handler does).
pub fn request() {
    FLAG.store(true, Ordering::SeqCst);
    let _ = channel().0.send(true);
}

/// True once cancellation was requested.
pub fn requested() -> bool {
    FLAG.load(Ordering::SeqCst)
}

/// Completes when cancellation is requested (never, if it is not).
pub async fn wait() {
    let mut rx = channel().1.clone();
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Completes [`GRACE`] after cancellation is requested (never, if it is not).
pub async fn grace_expired() {
    wait().await;
    tokio::time::sleep(GRACE).await;
}

async fn next_signal(term: &mut Option<tokio::signal::unix::Signal>) {
    match term.as_mut() {
        Some(t) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = t.recv() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// What must run before perfgate exits on a second signal or at [`HARD_STOP`], in the order
/// registered, each under its key: the last-resort results file (`report::last_resort`), the
/// removal of temporary files (`fsutil`), the killing of every started server (`server`).
static ON_FORCE_EXIT: std::sync::Mutex<Vec<Hook>> = std::sync::Mutex::new(Vec::new());

/// A forced-exit hook: its key and what it runs.
type Hook = (&'static str, fn());

/// Registers `f` under `key` to run before a forced exit (a key already registered is kept as
/// it is, so calling this again is harmless). Lets modules above this one clean up without this
/// leaf importing them.
pub fn on_force_exit(key: &'static str, f: fn()) {
    let mut hooks = ON_FORCE_EXIT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !hooks.iter().any(|(k, _)| *k == key) {
        hooks.push((key, f));
    }
}

/// Starts watching for SIGINT and SIGTERM on a thread of its own, with its own small runtime,
/// so no phase keeping the main runtime's workers busy can delay a signal or the
/// [`HARD_STOP`].
pub fn install() {
    let spawned = std::thread::Builder::new()
        .name("perfgate-signals".into())
        .spawn(|| {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(watch_signals()),
                Err(e) => eprintln!("perfgate: warning: cannot watch for signals: {e}"),
            }
        });
    if let Err(e) = spawned {
        eprintln!("perfgate: warning: cannot watch for signals: {e}");
    }
}

/// Runs what must run before a forced exit, then exits with [`crate::exit::INTERRUPTED`].
fn force_exit() -> ! {
    let hooks: Vec<fn()> = ON_FORCE_EXIT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(_, f)| *f)
        .collect();
    for f in hooks {
        f();
    }
    std::process::exit(crate::exit::INTERRUPTED);
}

/// Waits for SIGINT or SIGTERM, requests cancellation, and exits the process on a second one
/// or at [`HARD_STOP`], whichever comes first.
async fn watch_signals() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    next_signal(&mut term).await;
    eprintln!(
        "perfgate: interrupted: no new requests; in-flight ones get {}s; partial results are marked incomplete and no baseline is written (signal again to stop now)",
        GRACE.as_secs()
    );
    request();
    std::thread::spawn(|| {
        std::thread::sleep(HARD_STOP);
        eprintln!(
            "perfgate: still running {}s after the signal: stopping now",
            HARD_STOP.as_secs()
        );
        force_exit();
    });
    next_signal(&mut term).await;
    eprintln!("perfgate: interrupted again: stopping now");
    force_exit();
}
