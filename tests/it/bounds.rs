//! Issue 15 bounds at the command line: file size limits hold while reading (`/dev/zero`, a
//! FIFO: no length to check), and a baseline value near f64::MAX is refused with the file and
//! field instead of making `--html` spin. Each command runs under a 60 s kill timeout: on the
//! code before issue 15 each of these read or spun forever, so the timeout was the failure.
//! No assertion is on timing: only on the exit, the message and the outputs.

use std::path::Path;
use std::time::Duration;

fn perfgate(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = crate::support::perfgate()
        .current_dir(dir)
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = crate::support::output_text(&o);
    (o.status.code(), text)
}

/// `-s /dev/zero`: length 0, endless. Read to the 1 MiB limit and refused.
#[test]
fn an_endless_scenario_file_is_refused_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = perfgate(dir.path(), &["validate", "-s", "/dev/zero"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("larger than 1048576 bytes"), "{out}");
}

/// A FIFO streaming 50 MB as a scenario file: refused at 1 MiB, the writer sees a broken pipe.
#[test]
fn a_fifo_scenario_is_refused_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("s.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let f2 = fifo.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&f2) else {
            return 0usize;
        };
        let line = "# x\n".repeat(16_384); // 64 KiB
        let mut sent = 0;
        while sent < 50 << 20 {
            if f.write_all(line.as_bytes()).is_err() {
                break;
            }
            sent += line.len();
        }
        sent
    });
    let (code, out) = perfgate(dir.path(), &["validate", "-s", fifo.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("larger than 1048576 bytes"), "{out}");
    let sent = writer.join().unwrap();
    assert!(sent < 50 << 20, "the whole 50 MB was read ({sent} bytes)");
}

/// A hand-edited baseline with TTFT 1.7e308 ms (finite, so JSON accepts it): `report --html`
/// says which file and field are invalid and still writes the page (before: the plot's axis
/// spun forever and SIGTERM was ignored).
#[test]
fn an_absurd_baseline_value_is_refused_and_the_html_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let bdir = dir.path().join("baselines");
    std::fs::create_dir_all(&bdir).unwrap();
    for f in ["chat-long.json", "chat-short.json", "flaky.json"] {
        std::fs::copy(fixtures.join("baselines").join(f), bdir.join(f)).unwrap();
    }
    let p = bdir.join("chat-long.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["runs"][0]["records"][0]["ttft_ms"] = serde_json::json!(1.7e308);
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    let results = fixtures.join("results.json");
    let (_, out) = perfgate(
        dir.path(),
        &[
            "report",
            results.to_str().unwrap(),
            "--baseline-dir",
            bdir.to_str().unwrap(),
            "--html",
            "r.html",
        ],
    );
    let html = std::fs::read_to_string(dir.path().join("r.html"))
        .unwrap_or_else(|e| panic!("no HTML ({e}): {out}"));
    let said = format!("{out}{html}");
    assert!(
        said.contains("runs[0].records[0].ttft_ms"),
        "the invalid field is not named: {out}"
    );
    assert!(said.contains("chat-long.json"), "the file is not named");
}

/// A baseline is refused when a key is duplicated (the last one won silently) or when its
/// `summary` is not the summary of its records (a reviewer reads the summary, the gate the
/// records). The committed fixture passes both checks.
#[test]
fn duplicate_keys_and_a_summary_that_lies_are_refused() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/baselines");
    let text = std::fs::read_to_string(fixtures.join("chat-long.json")).unwrap();
    perfgate::baseline::parse(&text, &Default::default()).expect("the fixture is consistent");

    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["summary"]["ttft_ms"]["p50"] = serde_json::json!(1.0);
    let e = perfgate::baseline::parse(&v.to_string(), &Default::default()).unwrap_err();
    assert!(e.contains("summary.ttft_ms.p50 is 1"), "{e}");

    let dup = text.replacen("\"ttft_ms\": ", "\"ttft_ms\": 1.0, \"ttft_ms\": ", 1);
    assert_ne!(dup, text);
    let e = perfgate::baseline::parse(&dup, &Default::default()).unwrap_err();
    assert!(e.contains("duplicate key `ttft_ms`"), "{e}");
}

/// A literal `user:password@` in base_url is never shown or stored (before: only `${ENV}`
/// values were masked), and `${A:-${B}}` is refused instead of becoming the literal `${B}`.
#[test]
fn userinfo_is_redacted_and_nested_defaults_are_refused() {
    let yaml = "scenarios:\n  - name: s\n    endpoint: {base_url: 'http://alice:hunter22@127.0.0.1:9/v1', model: m}\n    request: {prompt: hi, max_tokens: 4}\n";
    let scs = perfgate::config::parse_str(yaml, "s.yaml", &|_| None).unwrap();
    let shown = scs[0].endpoint.shown_url();
    assert_eq!(shown, "http://<redacted>@127.0.0.1:9/v1");
    let public = perfgate::baseline::public_config(&scs[0]).to_string();
    assert!(
        !public.contains("hunter22") && !public.contains("alice"),
        "{public}"
    );
    assert!(scs[0].endpoint.secrets().contains(&"hunter22".to_string()));

    let nested = "scenarios:\n  - name: s\n    endpoint: {base_url: 'http://${NOPE:-${HOST}}/v1', model: m}\n    request: {prompt: hi, max_tokens: 4}\n";
    let e = perfgate::config::parse_str(nested, "s.yaml", &|_| None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("nesting is not supported"), "{e}");
}

/// `--baselines <a regular file>` is refused before measuring (the endpoint here does not
/// exist, so a run that measured would say so instead); before, perfgate measured every
/// scenario and then said "File exists".
#[test]
fn a_file_as_baselines_dir_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("afile"), "x").unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "scenarios:\n  - name: s\n    endpoint: {base_url: 'http://127.0.0.1:9/v1', model: m}\n    request: {prompt: hi, max_tokens: 4}\n",
    )
    .unwrap();
    for cmd in ["bless", "check"] {
        let (code, out) = perfgate(dir.path(), &[cmd, "-s", "s.yaml", "--baselines", "afile"]);
        assert_eq!(code, Some(2), "{cmd}: {out}");
        assert!(
            out.contains("--baselines afile is a file, not a directory"),
            "{cmd}: {out}"
        );
        assert!(!out.contains("measuring"), "{cmd} measured: {out}");
    }
}
