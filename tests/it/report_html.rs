//! The HTML report opened in a real browser: Debian's headless Chromium renders the fixture's
//! report (tests/fixtures/results.json with its baselines), takes a screenshot, and the page must
//! log nothing to the console (the report has no script, so any console line is a blocked
//! request, a CSP violation or a parse error). Two control pages prove the check can fail: one
//! that logs, and one that tries to load an image from another origin.
//!
//! The screenshot is kept at `$CARGO_TARGET_TMPDIR/report-html/report.png` for people to look at.
//! Skips with a message when Chromium is missing, unless PERFGATE_REQUIRE_CHROMIUM=1 (as in
//! scripts/test.sh, which installs it with scripts/report-tools.sh). PERFGATE_CHROMIUM overrides
//! the path (default /usr/bin/chromium).

use perfgate::report::{html, json, Report};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    let p = std::env::var_os("PERFGATE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if p.exists() {
        return Some(p);
    }
    crate::support::missing(
        "PERFGATE_REQUIRE_CHROMIUM",
        &format!(
            "no Chromium at {} (scripts/report-tools.sh setup installs Debian's)",
            p.display()
        ),
    );
    None
}

/// Opens `page` headless, writes a screenshot to `png`, and returns the page's console lines
/// (Chromium logs them to stderr as `...:CONSOLE...] "message", source: ...`).
fn render(chrome: &Path, page: &Path, png: &Path, size: (u32, u32)) -> Vec<String> {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = reader.join().unwrap();
    log.lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect()
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[test]
fn the_html_report_renders_in_chromium_without_console_errors() {
    let Some(chrome) = chromium() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html");
    std::fs::create_dir_all(&dir).unwrap();

    // Controls: the console scan sees a page's messages and a blocked cross-origin request.
    let canary = dir.join("canary.html");
    std::fs::write(
        &canary,
        "<!DOCTYPE html><title>c</title><script>console.error('perfgate-canary')</script>",
    )
    .unwrap();
    let lines = render(&chrome, &canary, &dir.join("canary.png"), (200, 100));
    assert!(
        lines.iter().any(|l| l.contains("perfgate-canary")),
        "the console scan no longer sees console messages: {lines:?}"
    );
    let fetch = dir.join("fetch.html");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">";
    std::fs::write(
        &fetch,
        format!("<!DOCTYPE html><title>f</title>{csp}<img src=\"http://127.0.0.1:9/x.png\">"),
    )
    .unwrap();
    let lines = render(&chrome, &fetch, &dir.join("fetch.png"), (200, 100));
    assert!(
        lines.iter().any(|l| l.contains("Content Security Policy")),
        "a blocked request must show on the console: {lines:?}"
    );

    // The report itself.
    let results = json::load(Path::new("tests/fixtures/results.json")).unwrap();
    let rep = Report::new(results, Some(Path::new("tests/fixtures/baselines")));
    let page = html::render(&rep);
    assert!(page.contains(csp), "the report carries the same policy");
    let file = dir.join("report.html");
    std::fs::write(&file, &page).unwrap();
    let png = dir.join("report.png");
    let _ = std::fs::remove_file(&png);
    let lines = render(&chrome, &file, &png, (1320, 3600));
    assert!(
        lines.is_empty(),
        "console output from the report: {lines:#?}"
    );
    let shot = std::fs::read(&png).expect("a screenshot");
    assert_eq!(png_size(&shot), (1320, 3600));
    // A blank page compresses to a few KB; the plots and tables do not.
    assert!(shot.len() > 100_000, "screenshot of {} bytes", shot.len());
    eprintln!("screenshot: {}", png.display());
}
