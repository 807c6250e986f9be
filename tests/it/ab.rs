//! `perfgate ab` (issue 17): base and candidate measured in one job. Two built-in simulators as
//! the arms (a candidate 30 % slower per token fails on TPOT; identical arms pass), the
//! interleaved order recorded and balanced, the blocked design swapping scripted servers in ABBA
//! order with every server PID gone afterwards, two servers side by side, `bless --from --arm`,
//! `perfgate report` on ab results, and the inputs refused before anything is measured. The
//! results JSON is validated against schema/results.schema.json each time.
//!
//! No assertion on perfgate's own speed; time bounds only stop a hung run.

use crate::support::perfgate_in;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SIM_BASE: &str = "sim://?ttft_ms=30&tpot_ms=4&seed=7";
const SIM_SLOWER: &str = "sim://?ttft_ms=30&tpot_ms=5.2&seed=8";

/// One TPOT-dominated scenario on the simulator (its URL is replaced by the arms').
const SCENARIO: &str = "defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 32}\n  load: {samples: 20, warmup: 2}\nscenarios:\n  - name: tpot\n";

pub(crate) fn dir_with(yaml: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("s.yaml"), yaml).unwrap();
    d
}

pub(crate) fn schema_errors(r: &Value) -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/results.schema.json"),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let v = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    v.iter_errors(r)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Runs perfgate with `args` in `dir` (at most 180 s): exit code, stdout + stderr, and the
/// results JSON at `r.json` (checked against the schema; `null` when none was written).
pub(crate) fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String, Value) {
    let _ = std::fs::remove_file(dir.join("r.json"));
    let o = perfgate_in(dir, 180).args(args).output().unwrap();
    let text = crate::support::output_text(&o);
    eprintln!("{text}");
    let r: Value = std::fs::read_to_string(dir.join("r.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    if !r.is_null() {
        let errors = schema_errors(&r);
        assert!(errors.is_empty(), "{errors:?}");
    }
    (o.status.code(), text, r)
}

/// The P50 check of `metric` (`ttft`, `tpot`) of the first scenario.
fn p50<'a>(r: &'a Value, metric: &str) -> &'a Value {
    r["scenarios"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == metric && c["kind"]["quantile"] == "p50")
        .unwrap_or_else(|| panic!("no {metric} P50 check in {r}"))
}

#[test]
fn a_candidate_30_percent_slower_per_token_fails_on_tpot_against_the_base_arm() {
    let d = dir_with(SCENARIO);
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            SIM_BASE,
            "--candidate-url",
            SIM_SLOWER,
            "--output",
            "r.json",
            "--markdown",
            "r.md",
            "--junit",
            "r.xml",
            "--html",
            "r.html",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(r["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    let tpot = p50(&r, "tpot");
    assert_eq!(tpot["verdict"], "FAIL", "{tpot}");
    let ratio = tpot["ratio"].as_f64().unwrap();
    assert!((1.2..1.4).contains(&ratio), "TPOT ratio {ratio}");
    // the base arm played the baseline: its median is the simulator's 4 ms, the candidate's 5.2
    assert!(
        (3.8..4.4).contains(&tpot["baseline"].as_f64().unwrap()),
        "{tpot}"
    );
    assert!(
        (5.0..5.6).contains(&tpot["candidate"].as_f64().unwrap()),
        "{tpot}"
    );
    // both arms' requests are in the results, and the order they ran in
    let ab = &s["ab"];
    assert_eq!(ab["design"], "interleaved");
    assert_eq!(ab["alternations"], 20);
    assert_eq!(ab["seed"], 1);
    assert_eq!(ab["base_records"].as_array().unwrap().len(), 20);
    assert_eq!(s["records"].as_array().unwrap().len(), 20);
    assert_eq!(ab["base_endpoint"], SIM_BASE);
    assert_eq!(s["endpoint"], SIM_SLOWER);
    let order = ab["order"].as_str().unwrap();
    assert_eq!(order.len(), 40);
    for pair in order.as_bytes().chunks(2) {
        assert!(pair == b"AB" || pair == b"BA", "{order}");
    }
    assert!(order.contains("AB") && order.contains("BA"), "{order}");
    // the arms ran at the same moments: request k of each arm started within one pair of the other
    let starts = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x["start_ms"].as_f64().unwrap())
            .collect()
    };
    let (b, c) = (starts(&ab["base_records"]), starts(&s["records"]));
    let span = c.last().unwrap().max(*b.last().unwrap());
    assert!(
        (b[19] - c[19]).abs() < span / 4.0,
        "the arms ended together: base {b:?}, candidate {c:?}"
    );
    // every report says base, not baseline, and which design ran
    let stdout = text.split("\nperfgate: FAIL").next().unwrap();
    assert!(
        stdout.contains("A/B interleaved: 20 alternations"),
        "{text}"
    );
    // the table's head names the sides base and candidate (its widths follow the rows)
    let head = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("| check "))
        .unwrap_or_default();
    assert!(
        head.split_whitespace().take(4).collect::<Vec<_>>() == ["|", "check", "base", "candidate"],
        "{text}"
    );
    let md = std::fs::read_to_string(d.path().join("r.md")).unwrap();
    assert!(
        md.contains("| scenario | check | base | candidate |"),
        "{md}"
    );
    assert!(md.contains("A/B interleaved: 20 alternations"), "{md}");
    assert!(
        md.contains("A/B run (perfgate ab): each candidate arm against its base arm, measured in the same job (interleaved, 20 alternations)"),
        "{md}"
    );
    let html = std::fs::read_to_string(d.path().join("r.html")).unwrap();
    assert!(html.contains("TTFT P50 base &rarr; candidate"));
    assert!(
        html.contains(">base</span>"),
        "the base arm's curves are drawn"
    );
    // and the plots' legends name the base arm as the page does (issue 46: "baseline (n=20)")
    assert!(
        html.contains("base (n=20)") && !html.contains("baseline (n="),
        "a legend says baseline"
    );
    let xml = std::fs::read_to_string(d.path().join("r.xml")).unwrap();
    assert!(
        xml.contains("name=\"ab_order\" value=\"AB")
            || xml.contains("name=\"ab_order\" value=\"BA")
    );
    assert!(
        xml.contains("<failure") && xml.contains("TPOT P50: base "),
        "{xml}"
    );
    // `perfgate report` re-renders ab results with the same verdict and words
    let o = perfgate_in(d.path(), 60)
        .args(["report", "r.json", "--html", "again.html"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("A/B interleaved") && out.contains("TPOT P50"),
        "{out}"
    );
    let again = std::fs::read_to_string(d.path().join("again.html")).unwrap();
    assert!(again.contains(">base</span>"));
}

/// `perfgate ab` of the simulator against itself at concurrency 2 (seed 5, results in r.json),
/// with `extra` flags.
fn a_a_at_concurrency_2(extra: &[&str]) -> (Option<i32>, String, Value) {
    let d = dir_with(&SCENARIO.replace("warmup: 2}", "warmup: 2, concurrency: 2}"));
    let mut args = vec![
        "ab",
        "-s",
        "s.yaml",
        "--base-url",
        SIM_BASE,
        "--candidate-url",
        SIM_BASE,
        "--seed",
        "5",
        "--output",
        "r.json",
    ];
    args.extend(extra);
    run(d.path(), &args)
}

#[test]
fn identical_arms_pass_and_are_called_an_a_a_run() {
    // two streams per arm at once: each arm keeps its own concurrency (overlapping: two
    // in-process simulators on one machine otherwise take turns, each arm half the time)
    let (code, text, r) = a_a_at_concurrency_2(&["--overlap", "allowed"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(r["verdict"], "PASS");
    let s = &r["scenarios"][0];
    assert_eq!(s["ab"]["seed"], 5);
    let notes = s["notes"].to_string();
    assert!(notes.contains("an A/A run"), "{notes}");
    let tpot = p50(&r, "tpot");
    let ratio = tpot["ratio"].as_f64().unwrap();
    assert!((0.95..1.05).contains(&ratio), "TPOT ratio {ratio}");
    for m in [&s["measured"], &s["ab"]["base_measured"]] {
        let c = m["achieved_concurrency"].as_f64().unwrap();
        assert!(c > 1.5 && c <= 2.0, "each arm ran 2 requests at once: {c}");
    }
}

/// Issue 46 (a fresh reader's walk: `ab` throughput half of `check`'s): arms that take turns
/// (two in-process simulators on one machine, the default) report each arm's throughput and
/// achieved concurrency over its own turns: at concurrency 2, 2 requests in flight during a
/// turn, where over the whole run each arm had about 1 (the other arm's turns idle).
#[test]
fn arms_that_take_turns_report_their_own_throughput() {
    let (code, text, r) = a_a_at_concurrency_2(&[]);
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    assert_eq!(s["ab"]["overlap"]["alternated"], true, "{}", s["ab"]);
    for m in [&s["measured"], &s["ab"]["base_measured"]] {
        let c = m["achieved_concurrency"].as_f64().unwrap();
        assert!(c > 1.3 && c <= 2.0, "2 requests at once in its turns: {c}");
        // 20 requests of 32 tokens over the arm's own wall time
        let wall_s = m["wall_ms"].as_f64().unwrap() / 1000.0;
        let tps = m["output_tokens_per_s"].as_f64().unwrap();
        assert!((tps * wall_s - 640.0).abs() < 1.0, "{tps} x {wall_s}: {m}");
    }
}

/// A core this process may run on (the first of /proc/self/status's Cpus_allowed_list), for
/// pinning both simulators' compute threads to one core.
fn a_core() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            let list = t
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
            list.trim().split([',', '-']).next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// Two arms on one machine slow each other when their requests overlap (issue 43). Both arms
/// are in-process simulators whose prefill is CPU work on one compute thread, both pinned to
/// one core (`prefill_cpu`): the candidate's prefill is twice the base's (60 vs 120 ms of CPU,
/// +100 %). With `--overlap allowed` (the interleaved dispatch before issue 43) both arms'
/// requests start together and share the core, which compressed the change to +65.2 % and
/// +64.8 % in two runs (processor sharing predicts +50 % at the first pair: the base done at
/// 120 ms, the candidate at 180); by default the arms are on one machine and take turns: no
/// overlap, and +91.3 %, +103.4 %, +128.1 % measured (the last at load average 16 on 2 cores,
/// where `allowed` measured +71.8 %). Asserted: the default +70 % to +140 % and no overlap; `allowed` in flight at once most of the time, below +85 %, and noted.
#[test]
fn arms_on_one_machine_take_turns_so_a_cpu_bound_change_is_not_compressed() {
    let core = a_core();
    let arm = |ttft: u32, seed: u32| {
        format!("sim://?ttft_ms={ttft}&ttft_sigma=0.05&tpot_ms=2&prefill_cpu={core}&seed={seed}")
    };
    let (base, cand) = (arm(60, 7), arm(120, 8));
    let d = dir_with("defaults:\n  endpoint: {base_url: 'sim://?seed=1', model: perfgate-sim}\n  request: {prompt: hi, max_tokens: 4}\n  load: {samples: 20, warmup: 2}\n  gate: {metrics: [ttft]}\nscenarios:\n  - name: cpu\n");
    let ab = |extra: &[&str]| {
        let mut args = vec![
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &base,
            "--candidate-url",
            &cand,
            "--output",
            "r.json",
        ];
        args.extend(extra);
        run(d.path(), &args)
    };
    let change = |r: &Value| p50(r, "ttft")["ratio"].as_f64().unwrap() - 1.0;

    let (code, text, r) = ab(&[]);
    assert_eq!(code, Some(1), "{text}");
    let o = &r["scenarios"][0]["ab"]["overlap"];
    assert_eq!(
        (&o["alternated"], &o["one_host"], &o["share"]),
        (&true.into(), &true.into(), &0.0.into()),
        "{o}"
    );
    assert!(
        text.contains(
            "the arms taking turns (both on this machine): in flight at once 0.0 % of the time"
        ),
        "{text}"
    );
    let taking_turns = change(&r);
    assert!(
        (0.70..1.40).contains(&taking_turns),
        "taking turns, the candidate's doubled prefill reads +100 % (within -30 / +40 points: a loaded machine's load moves between turns): {taking_turns}"
    );

    let (code, text, r) = ab(&["--overlap", "allowed"]);
    assert_eq!(code, Some(1), "{text}");
    let o = &r["scenarios"][0]["ab"]["overlap"];
    assert_eq!(o["alternated"], false, "{o}");
    let share = o["share"].as_f64().unwrap();
    assert!(share > 0.5, "both arms' requests start together: {o}");
    let overlapping = change(&r);
    assert!(
        overlapping < 0.85,
        "overlapping arms slow each other: {overlapping} (taking turns {taking_turns})"
    );
    let notes = r["scenarios"][0]["notes"].to_string();
    assert!(
        notes.contains("both arms are on this machine and had requests in flight at once"),
        "{notes}"
    );
}

#[test]
fn bless_from_writes_the_base_arm_as_the_baseline_that_check_then_reads() {
    let d = dir_with(SCENARIO);
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            SIM_BASE,
            "--candidate-url",
            SIM_SLOWER,
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    let base_tpot = p50(&r, "tpot")["baseline"].as_f64().unwrap();
    let o = perfgate_in(d.path(), 60)
        .args([
            "bless",
            "--from",
            "r.json",
            "--arm",
            "base",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let b: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("b/tpot.json")).unwrap())
            .unwrap();
    assert_eq!(b["runs"].as_array().unwrap().len(), 1);
    assert_eq!(b["runs"][0]["records"].as_array().unwrap().len(), 20);
    assert!(b.get("run_spread").is_none_or(Value::is_null));
    // how many samples, as a measured bless says it (issue 46 item 1)
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("\n  tpot: TPOT P50 catches about +") && out.contains(" at n = 20"),
        "{out}"
    );
    let blessed_p50 = b["summary"]["tpot_ms"]["p50"].as_f64().unwrap();
    assert!(
        (blessed_p50 - base_tpot).abs() < 0.2,
        "{blessed_p50} vs {base_tpot}"
    );
    // check against it: the scenario file's own sim (seed 1, 8 ms default TPOT) is slower than
    // the base arm's 4 ms, so TPOT fails against the blessed base arm
    let (code, text, r) = run(
        d.path(),
        &[
            "check",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(r["scenarios"][0]["baseline"]["path"]
        .as_str()
        .unwrap()
        .ends_with("tpot.json"));
    assert_eq!(p50(&r, "tpot")["verdict"], "FAIL");
}

#[test]
fn bless_from_refuses_a_results_file_without_the_arm_or_of_another_scenario() {
    let d = dir_with(SCENARIO);
    // a check's results have no base arm
    let (code, text, _) = run(
        d.path(),
        &[
            "check",
            "-s",
            "s.yaml",
            "--allow-missing-baseline",
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    std::fs::rename(d.path().join("r.json"), d.path().join("check.json")).unwrap();
    let o = perfgate_in(d.path(), 60)
        .args([
            "bless",
            "--from",
            "check.json",
            "--arm",
            "base",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not from perfgate ab, so it has no base arm"),
        "{err}"
    );
    assert!(!d.path().join("b/tpot.json").exists());
    // the scenario changed since the run (max_tokens 32 -> 48): another fingerprint
    let (code, text, _) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            SIM_BASE,
            "--candidate-url",
            SIM_BASE,
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    std::fs::write(
        d.path().join("s.yaml"),
        SCENARIO.replace("max_tokens: 32", "max_tokens: 48"),
    )
    .unwrap();
    let o = perfgate_in(d.path(), 60)
        .args([
            "bless",
            "--from",
            "r.json",
            "--arm",
            "base",
            "-s",
            "s.yaml",
            "--baselines",
            "b",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the scenario changed since that run"), "{err}");
    assert!(!d.path().join("b/tpot.json").exists());
    // --arm needs --from, and --from needs --arm
    let o = perfgate_in(d.path(), 60)
        .args(["bless", "--from", "r.json", "-s", "s.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn inputs_an_ab_run_cannot_use_are_refused_before_measuring() {
    let d = dir_with(SCENARIO);
    let refused = |args: &[&str], want: &str| {
        let o = perfgate_in(d.path(), 60).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("measuring"), "nothing measured: {err}");
    };
    refused(
        &["ab", "-s", "s.yaml"],
        "perfgate ab needs two arms, and nothing sets them",
    );
    // Issue 41 finding 4: --no-server starts no server and sets no arm, so it alone ran an
    // A/A run and exited 0; so did a `server:` block without arms whose shared log is renamed
    // per arm (the two arms' servers then differed only by their log file).
    refused(
        &["ab", "-s", "s.yaml", "--no-server"],
        "perfgate ab needs two arms, and nothing sets them",
    );
    std::fs::write(
        d.path().join("s.yaml"),
        SCENARIO
            .replace("sim://?seed=1", "http://127.0.0.1:9/v1")
            .replace(
                "  load:",
                "  server: {command: [no-such-server, --port, '9'], log: srv.log}\n  load:",
            ),
    )
    .unwrap();
    for extra in [&["--no-server"][..], &["--design", "blocked"], &[]] {
        let mut args = vec!["ab", "-s", "s.yaml"];
        args.extend_from_slice(extra);
        refused(&args, "perfgate ab needs two arms, and nothing sets them");
    }
    std::fs::write(d.path().join("s.yaml"), SCENARIO).unwrap();
    let arms = ["--base-url", SIM_BASE, "--candidate-url", SIM_SLOWER];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = vec!["ab", "-s", "s.yaml"];
        v.extend(arms);
        v.extend_from_slice(extra);
        v
    };
    refused(
        &with(&["--design", "blocked", "--blocks", "1"]),
        "use 2 to 50 blocks per arm",
    );
    refused(
        &with(&["--blocks", "3"]),
        "--blocks 3 applies to --design blocked",
    );
    refused(&with(&["--design", "sideways"]), "invalid value 'sideways'");
    refused(
        &with(&["--base-server-cmd", "llama-server 'x"]),
        "--base-server-cmd: unterminated '",
    );
    std::fs::write(
        d.path().join("s.yaml"),
        SCENARIO.replace("warmup: 2}", "warmup: 2, max_samples: 100}"),
    )
    .unwrap();
    refused(
        &with(&[]),
        "load.max_samples (100, sequential sampling) is not supported by perfgate ab",
    );
    std::fs::write(
        d.path().join("s.yaml"),
        SCENARIO.replace("warmup: 2}", "warmup: 2, rate: 5}"),
    )
    .unwrap();
    refused(
        &with(&[]),
        "load.rate (open loop) is not supported by perfgate ab",
    );
    // two servers on one port cannot run side by side
    std::fs::write(d.path().join("s.yaml"), SCENARIO).unwrap();
    refused(
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--candidate-url",
            "http://127.0.0.1:9/v1",
            "--base-server-cmd",
            "server-a",
            "--candidate-server-cmd",
            "server-b",
        ],
        "each needs its own port",
    );
}

/// Issue 26 finding 6: `--base-server-cmd` without a candidate server measured the base
/// arm's server on both arms and passed with no A/A note. One arm with a server and both arms
/// on one endpoint is refused; `localhost`, `127.0.0.1` and `[::1]` are one endpoint.
#[test]
fn one_server_for_both_arms_is_refused_and_localhost_is_127_0_0_1() {
    let port = closed_port();
    let d = dir_with(&SCENARIO.replace("sim://?seed=1", &format!("http://127.0.0.1:{port}/v1")));
    let refused = |args: &[&str], want: &str| {
        let mut all = vec!["ab", "-s", "s.yaml", "--output", "r.json"];
        all.extend_from_slice(args);
        let o = perfgate_in(d.path(), 60).args(&all).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("measuring"), "nothing measured: {err}");
        assert!(!d.path().join("r.json").exists());
    };
    let both = format!("both arms are the endpoint http://127.0.0.1:{port}/v1");
    refused(
        &["--base-server-cmd", "server-a"],
        &format!("scenario tpot: only the base arm starts a server, and {both}: the candidate arm would measure the base arm's server (an A/A run, not an A/B); give the candidate arm its own server (--candidate-server-cmd"),
    );
    refused(
        &["--candidate-server-cmd", "server-b"],
        "only the candidate arm starts a server",
    );
    let localhost = format!("http://localhost:{port}/v1/");
    refused(
        &["--base-url", &localhost, "--base-server-cmd", "server-a"],
        "only the base arm starts a server",
    );
    refused(
        &[
            "--base-url",
            &format!("http://[::1]:{port}/v1"),
            "--base-server-cmd",
            "server-a",
            "--design",
            "blocked",
        ],
        "only the base arm starts a server",
    );

    // One simulator reached as localhost by one arm and as 127.0.0.1 by the other: an A/A run,
    // and said so.
    // (under `timeout`, so a failed assertion cannot leave it running; SIGTERM to `timeout`
    // reaches the simulator)
    let sim = crate::support::Sim::start(120, &["--ttft-ms", "5", "--tpot-ms", "1"]);
    let url = sim.url.clone();
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/v1");
    let via_localhost = format!("http://localhost:{port}/v1");
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &via_localhost,
            "--candidate-url",
            &url,
            "--output",
            "r.json",
        ],
    );
    drop(sim);
    assert_eq!(code, Some(0), "{text}");
    let notes = r["scenarios"][0]["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "both arms are the same endpoint ({via_localhost} and {url}, model perfgate-sim) and server: an A/A run"
        )),
        "{notes}"
    );
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Issue 26 finding 18: an unreachable arm said "base arm: every request failed; first: " (no
/// reason, and the wrong arm): the interleaved run stopped before the base arm sent anything,
/// and the candidate's warmup reason was replaced by "none". The unreachable arm and its
/// connection failure are named, in either position.
#[test]
fn an_unreachable_arm_is_named_with_its_connection_failure() {
    let d = dir_with(SCENARIO);
    let port = closed_port();
    let dead = format!("http://127.0.0.1:{port}/v1");
    for (base, cand, arm) in [
        (SIM_BASE, dead.as_str(), "candidate"),
        (dead.as_str(), SIM_BASE, "base"),
    ] {
        let (code, text, r) = run(
            d.path(),
            &[
                "ab",
                "-s",
                "s.yaml",
                "--base-url",
                base,
                "--candidate-url",
                cand,
                "--output",
                "r.json",
            ],
        );
        assert_eq!(code, Some(3), "{text}");
        let detail = r["scenarios"][0]["status_detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!(
                "{arm} arm: could not connect to 127.0.0.1:{port}: "
            )),
            "{detail}"
        );
        assert!(
            detail.to_lowercase().contains("connection refused"),
            "{detail}"
        );
        assert!(!detail.contains("first: \n") && !detail.ends_with("first: "));
        assert!(
            text.contains(&format!(
                "could not measure tpot: {arm} arm: could not connect"
            )),
            "{text}"
        );
    }
}

// ---- servers: the scripted server of tests/server_support as the arms' `server:` ----

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/server_support/scripted_server.py")
}

fn has_python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True while `pid` runs (a zombie or a missing /proc entry is dead).
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

fn gone_within(pid: u64, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end && alive(pid) {
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive(pid)
}

/// The scripted server on `port` as one command line (3 ms per token, build `same-1`).
fn scripted_cmd(port: u16) -> String {
    format!(
        "python3 '{}' --port {port} --token-ms 3 --build same-1",
        script().display()
    )
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/v1")
}

/// A scenario file of one scenario `pair` (8 tokens, 20 samples) with `server` as its
/// `server:` block.
fn pair_dir(server: &str) -> tempfile::TempDir {
    dir_with(&format!(
        "defaults:\n  endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: scripted}}\n  request: {{prompt: hi, max_tokens: 8}}\n  load: {{samples: 20, warmup: 2}}\n  server: {server}\nscenarios:\n  - name: pair\n"
    ))
}

fn server_cmd(port: u16, token_ms: &str, build: &str) -> String {
    format!(
        "[python3, {:?}, --port, \"{port}\", --token-ms, \"{token_ms}\", --build, {build}]",
        script().display().to_string()
    )
}

#[test]
fn the_blocked_design_swaps_the_servers_in_abba_order_and_leaves_none_running() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let port = free_port();
    let yaml = format!(
        "defaults:\n  endpoint: {{base_url: 'http://127.0.0.1:{port}/v1', model: scripted}}\n  request: {{prompt: hi, max_tokens: 8}}\n  load: {{samples: 20, warmup: 2}}\n  gate: {{metrics: [ttft, tpot]}}\n  server:\n    ready_timeout: 60s\n    base: {{command: {}}}\n    candidate: {{command: {}}}\nscenarios:\n  - name: swap\n",
        // 5 and 15 ms a token: a loaded machine's scheduling jitter (a few ms on some of the
        // base arm's tokens; at 2 and 6 ms it once put the base's TPOT P99 at the candidate's,
        // and the blocked shift's interval made the TPOT row a WARN) is a small share of them
        server_cmd(port, "5", "old-1"),
        server_cmd(port, "15", "new-2"),
    );
    let d = dir_with(&yaml);
    let (code, text, r) = run(
        d.path(),
        &[
            "ab", "-s", "s.yaml", "--design", "blocked", "--output", "r.json",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(p50(&r, "tpot")["verdict"], "FAIL");
    let ab = &r["scenarios"][0]["ab"];
    assert_eq!(ab["design"], "blocked");
    assert_eq!(ab["order"], "ABBA");
    assert_eq!(ab["alternations"], 2);
    let blocks = ab["blocks"].as_array().unwrap();
    let sides: Vec<&str> = blocks.iter().map(|b| b["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["base", "candidate", "candidate", "base"]);
    let mut pids = Vec::new();
    for b in blocks {
        assert_eq!(b["requests"], 10, "20 samples per arm over 2 blocks");
        let srv = &b["server"];
        assert!(srv["time_to_ready_ms"].as_f64().unwrap() > 0.0, "{srv}");
        let build = srv["identity"]["llama.cpp.build_info"].as_str().unwrap();
        let want = if b["side"] == "base" {
            "old-1"
        } else {
            "new-2"
        };
        assert_eq!(build, want, "block {b}");
        pids.push(srv["pid"].as_u64().unwrap());
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 4, "a fresh start per block: {pids:?}");
    for p in pids {
        assert!(
            gone_within(p, Duration::from_secs(10)),
            "server pid {p} still runs"
        );
    }
    // the records of each arm are on one clock: the base arm's second block started last
    let base_starts: Vec<f64> = ab["base_records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["start_ms"].as_f64().unwrap())
        .collect();
    let cand_last = r["scenarios"][0]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["start_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        base_starts[10] > cand_last,
        "block 4 (A) after blocks 2-3 (B)"
    );
    assert!(text.contains("A/B blocked ABBA: 2 blocks per arm, server ready after"));
    // validate reads the file; check and bless have no server for a block of arms only
    let o = perfgate_in(d.path(), 60)
        .args(["validate", "-s", "s.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let o = perfgate_in(d.path(), 60)
        .args(["check", "-s", "s.yaml", "--allow-missing-baseline"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("has only base: / candidate: arms"), "{err}");
}

#[test]
fn two_servers_side_by_side_on_their_own_ports_are_interleaved_and_stopped() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let (pa, pb) = (free_port(), free_port());
    let d = pair_dir("{ready_timeout: 60s}");
    let (ua, ub) = (url(pa), url(pb));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &ua,
            "--candidate-url",
            &ub,
            "--base-server-cmd",
            &scripted_cmd(pa),
            "--candidate-server-cmd",
            &scripted_cmd(pb),
            "--output",
            "r.json",
        ],
    );
    assert_ne!(code, Some(1), "identical servers do not regress: {text}");
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    let (bs, cs) = (&s["ab"]["base_server"], &s["server"]);
    assert_eq!(s["ab"]["base_endpoint"], ua.as_str());
    assert_eq!(s["endpoint"], ub.as_str());
    let (bp, cp) = (bs["pid"].as_u64().unwrap(), cs["pid"].as_u64().unwrap());
    assert_ne!(bp, cp, "two servers");
    assert!(bs["command"]
        .as_str()
        .unwrap()
        .contains(&format!("--port {pa}")));
    assert!(cs["command"]
        .as_str()
        .unwrap()
        .contains(&format!("--port {pb}")));
    // what the run compares comes first: here nothing (the commands differ in the port only)
    let first = s["notes"][0].as_str().unwrap_or_default();
    assert!(
        first.contains("describe themselves identically")
            && first.contains("run the same command (ports aside): an A/A run"),
        "{first}"
    );
    for p in [bp, cp] {
        assert!(
            gone_within(p, Duration::from_secs(10)),
            "server pid {p} still runs"
        );
    }
}

/// Issue 32 item 3: an arm whose server command listens on another port than its URL is refused
/// before anything starts (it read as a server that never became ready, or measured another
/// one), naming the arm, both ports and what to change.
#[test]
fn an_arm_whose_server_port_is_not_its_url_port_is_refused_before_starting() {
    let d = dir_with(
        "defaults:\n  endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m}\n  request: {prompt: hi, max_tokens: 8}\nscenarios:\n  - name: pair\n",
    );
    let (code, text, _) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            "http://127.0.0.1:18081/v1",
            "--candidate-url",
            "http://127.0.0.1:18082/v1",
            "--base-server-cmd",
            "never-started --port 18081",
            "--candidate-server-cmd",
            "never-started --port 18083",
        ],
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("the candidate arm's server command listens on --port 18083, but the candidate arm measures http://127.0.0.1:18082/v1 (port 18082)"),
        "{text}"
    );
    assert!(!text.contains("the base arm's server command"), "{text}");
}

/// Issue 32 item 3: when the candidate arm's server cannot start (here its port is already
/// held, so the scripted server dies with Python's "Address already in use"), the scenario's
/// reason is that arm's own failure with its log lines, not the base arm's "not measured: the
/// candidate arm could not start" (what it said on main before), and the log lines are printed
/// once per stream (the report on stdout, the closing line on stderr).
#[test]
fn an_arm_that_cannot_start_shows_its_own_error_and_log_lines_once() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (pa, pb) = (free_port(), held.local_addr().unwrap().port());
    let d = pair_dir("{ready_timeout: 60s}");
    let (ua, ub) = (url(pa), url(pb));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &ua,
            "--candidate-url",
            &ub,
            "--base-server-cmd",
            &scripted_cmd(pa),
            "--candidate-server-cmd",
            &scripted_cmd(pb),
            "--output",
            "r.json",
        ],
    );
    drop(held);
    assert_eq!(code, Some(3), "{text}");
    let detail = r["scenarios"][0]["status_detail"].as_str().unwrap();
    assert!(
        detail.starts_with("candidate arm: the server `python3 "),
        "{detail}"
    );
    assert!(detail.contains(&format!("--port {pb}")), "{detail}");
    assert!(detail.contains("Address already in use"), "{detail}");
    // once in the report (stdout) and once in the closing line (stderr), not per arm
    assert_eq!(
        text.matches("Address already in use").count(),
        2,
        "the log lines once per stream: {text}"
    );
    assert!(
        text.contains("perfgate: could not measure pair: candidate arm: the server"),
        "{text}"
    );
    assert!(
        !text.contains("the candidate arm could not start"),
        "{text}"
    );
}

/// The fresh-reader walkthrough: with `server.log` in the scenario both arms' servers wrote
/// the same file and the base server's log was lost (truncated by the candidate's start). Each
/// arm now has its own file, named in the report.
#[test]
fn a_shared_server_log_is_one_file_per_arm() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let (pa, pb) = (free_port(), free_port());
    let d = pair_dir("{ready_timeout: 60s, log: srv.log}");
    let (ua, ub) = (url(pa), url(pb));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &ua,
            "--candidate-url",
            &ub,
            "--base-server-cmd",
            &scripted_cmd(pa),
            "--candidate-server-cmd",
            &scripted_cmd(pb),
            "--output",
            "r.json",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    assert_eq!(s["ab"]["base_server"]["log"], "srv.base.log", "{s}");
    assert_eq!(s["server"]["log"], "srv.candidate.log", "{s}");
    let base = std::fs::read_to_string(d.path().join("srv.base.log")).unwrap();
    let cand = std::fs::read_to_string(d.path().join("srv.candidate.log")).unwrap();
    assert!(
        base.contains(&format!("listening on 127.0.0.1:{pa}")),
        "{base}"
    );
    assert!(
        cand.contains(&format!("listening on 127.0.0.1:{pb}")),
        "{cand}"
    );
    assert!(!d.path().join("srv.log").exists());
}

/// The fresh-reader walkthrough: a scenario file with a `server:` block (as the README's
/// "your endpoint" step suggests) and two servers the user started: `ab --base-url A
/// --candidate-url B` was refused (each arm would start the file's server on its port) with no
/// way to say "just measure these". `--no-server` measures the two URLs and starts nothing; the
/// refusal now names it and counts problems, not scenarios (it said "4 scenario(s)" for 2).
#[test]
fn no_server_measures_servers_the_user_started_despite_a_server_block() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let (pa, pb, pf) = (free_port(), free_port(), free_port());
    let mut servers = [
        start_scripted(pa, "3", "same-1"),
        start_scripted(pb, "3", "same-1"),
    ];
    let d = dir_with(&format!(
        "defaults:\n  endpoint: {{base_url: 'http://127.0.0.1:{pf}/v1', model: scripted}}\n  request: {{prompt: hi, max_tokens: 8}}\n  load: {{samples: 20, warmup: 2}}\n  server: {{command: [python3, '{}', --port, '{pf}'], ready_timeout: 60s}}\nscenarios:\n  - name: pair\n",
        script().display()
    ));
    let (ua, ub) = (
        format!("http://127.0.0.1:{pa}/v1"),
        format!("http://127.0.0.1:{pb}/v1"),
    );
    let base = [
        "ab",
        "-s",
        "s.yaml",
        "--base-url",
        &ua,
        "--candidate-url",
        &ub,
    ];
    let (code, text, _) = run(d.path(), &base);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("cannot run as given (2 problem(s)"), "{text}");
    assert!(text.contains("pass --no-server"), "{text}");
    // wait for the two servers, then measure them as they are
    for p in [pa, pb] {
        let end = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut args = base.to_vec();
    args.extend(["--no-server", "--output", "r.json"]);
    let (code, text, r) = run(d.path(), &args);
    for s in servers.iter_mut() {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert_eq!(code, Some(0), "{text}");
    let s = &r["scenarios"][0];
    assert_eq!(s["endpoint"], ub.as_str());
    assert_eq!(s["ab"]["base_endpoint"], ua.as_str());
    assert!(s["server"]["pid"].is_null(), "no server started: {s}");
    assert!(s["server"]["command"].is_null(), "no server started: {s}");
    assert!(!text.contains("started the server"), "{text}");
}

/// The scripted server on `port` started by the test (as a user starts one), `token_ms` per
/// token, `/props` build `build`; the caller kills it.
fn start_scripted(port: u16, token_ms: &str, build: &str) -> std::process::Child {
    Command::new("python3")
        .arg(script())
        .args([
            "--port",
            &port.to_string(),
            "--token-ms",
            token_ms,
            "--build",
            build,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Issue 41 "also found" B: two servers the user started (`--no-server`) were measured but
/// never asked who they are nor scraped, so an A/B of a new build said neither what differs
/// between the arms nor where the time went. They are now asked as a started server is: the
/// identity difference is a note and the TPOT FAIL (6 ms vs 2 ms per token) is attributed to
/// the candidate server's decode time per token.
#[test]
fn no_server_arms_are_asked_who_they_are_and_where_the_time_went() {
    if !has_python() {
        eprintln!("skipped: no python3");
        return;
    }
    let (pa, pb) = (free_port(), free_port());
    let mut servers = [
        start_scripted(pa, "2", "old-1"),
        start_scripted(pb, "6", "new-2"),
    ];
    for p in [pa, pb] {
        let end = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let d = dir_with(
        "defaults:\n  endpoint: {base_url: 'http://127.0.0.1:1/v1', model: scripted}\n  request: {prompt: hi, max_tokens: 8}\n  load: {samples: 20, warmup: 2}\n  gate: {metrics: [ttft, tpot]}\nscenarios:\n  - name: pair\n",
    );
    let (ua, ub) = (url(pa), url(pb));
    let (code, text, r) = run(
        d.path(),
        &[
            "ab",
            "-s",
            "s.yaml",
            "--base-url",
            &ua,
            "--candidate-url",
            &ub,
            "--no-server",
            "--output",
            "r.json",
        ],
    );
    for s in servers.iter_mut() {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(p50(&r, "tpot")["verdict"], "FAIL");
    let s = &r["scenarios"][0];
    assert_eq!(s["server"]["identity"]["llama.cpp.build_info"], "new-2");
    assert_eq!(
        s["ab"]["base_server"]["identity"]["llama.cpp.build_info"],
        "old-1"
    );
    assert!(s["server"]["pid"].is_null(), "not started: {s}");
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("base -> candidate server: llama.cpp.build_info old-1 -> new-2")),
        "{notes:?}"
    );
    let why = notes
        .iter()
        .find(|n| n.starts_with("where the time went: TPOT"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        why.contains("server side llamacpp_decode_ms_per_token"),
        "{why}"
    );
    // the scripted server sleeps token_ms per token: its own decode time per token is about that
    let per_token = |srv: &Value| {
        srv["metrics"]["llamacpp_decode_ms_per_token"]
            .as_f64()
            .unwrap()
    };
    let (b, c) = (per_token(&s["ab"]["base_server"]), per_token(&s["server"]));
    assert!(
        (1.5..4.0).contains(&b) && (5.0..9.0).contains(&c),
        "{b} {c}"
    );
}

/// Issue 46: the flag's help said "nothing expanded", read as "unlike `server.command`"; the
/// words are expanded as `server.command`'s are (config::arm's test), and the help says so.
#[test]
fn the_server_cmd_flags_say_how_they_expand_variables() {
    let out = crate::support::perfgate()
        .args(["ab", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("then ${VAR} and ${VAR:-default} expanded in each word as in server.command of the scenario file")
            && !help.contains("nothing expanded"),
        "{help}"
    );
}
