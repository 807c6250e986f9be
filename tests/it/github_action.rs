//! Consistency of the composite Action and the release that feeds it, checked without GitHub
//! (no runner is reachable here): action.yml installs perfgate with scripts/install.sh and runs
//! scripts/action-entrypoint.sh on the host, every input reaches a script through `env:` and is
//! documented in docs/github-actions.md, the entry point maps the inputs to one perfgate command line, the
//! release workflow builds exactly the archives the installer asks for (and cargo-binstall's
//! templates in Cargo.toml name), and the container image
//! only copies a prebuilt binary. The installer itself is tested by scripts/test-installer.sh;
//! the linters (actionlint, action-validator, zizmor, hadolint, shellcheck) run in scripts/test.sh.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn yaml(p: &str) -> Value {
    serde_saphyr::from_str(&read(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// The Actions reference, docs/github-actions.md (the README's "Use in GitHub Actions" section
/// until the README was cut to a page of its own and the reference moved to docs/).
fn actions_doc() -> String {
    read("docs/github-actions.md")
}

const INPUTS: [&str; 10] = [
    "command",
    "scenarios",
    "baselines",
    "github-token",
    "comment",
    "fail-on",
    "allow-missing-baseline",
    "history",
    "args",
    "version",
];
const OUTPUTS: [&str; 4] = ["verdict", "regressions", "report-json", "report-path"];

#[test]
fn the_action_is_composite_and_runs_perfgate_on_the_host() {
    let action = yaml("action.yml");
    let runs = &action["runs"];
    assert_eq!(s(&runs["using"]), "composite");
    assert!(runs.get("image").is_none(), "no container");
    let steps = runs["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "install, then run");
    let (install, run) = (&steps[0], &steps[1]);
    assert_eq!(s(&install["id"]), "install");
    assert_eq!(
        s(&install["run"]),
        "bash \"$GITHUB_ACTION_PATH/scripts/install.sh\""
    );
    assert_eq!(s(&run["id"]), "perfgate");
    assert_eq!(
        s(&run["run"]),
        "bash \"$GITHUB_ACTION_PATH/scripts/action-entrypoint.sh\""
    );
    for step in steps {
        assert_eq!(s(&step["shell"]), "bash");
        // Template injection: expressions only in env:, never inside the script.
        assert!(!s(&step["run"]).contains("${{"), "{step}");
    }
    let env = &install["env"];
    assert_eq!(s(&env["PERFGATE_VERSION"]), "${{ inputs.version }}");
    // Read in env:, where composite actions see their own ref and repository.
    assert_eq!(s(&env["PERFGATE_ACTION_REF"]), "${{ github.action_ref }}");
    assert_eq!(
        s(&env["PERFGATE_ACTION_REPOSITORY"]),
        "${{ github.action_repository }}"
    );
    assert_eq!(
        s(&run["env"]["PERFGATE_BIN"]),
        "${{ steps.install.outputs.path }}",
        "the run step runs the binary the install step verified"
    );
    let installer = read("scripts/install.sh");
    assert!(installer.contains("echo \"path=$bin\""));

    let outputs = action["outputs"].as_object().unwrap();
    assert_eq!(outputs.keys().collect::<Vec<_>>(), OUTPUTS);
    for (name, o) in outputs {
        assert_eq!(
            s(&o["value"]),
            format!("${{{{ steps.perfgate.outputs.{name} }}}}")
        );
    }
}

#[test]
fn every_input_reaches_a_script_through_env_and_the_readme_documents_it() {
    let action = yaml("action.yml");
    let inputs = action["inputs"].as_object().unwrap();
    assert_eq!(inputs.keys().collect::<Vec<_>>(), INPUTS);
    assert_eq!(s(&inputs["allow-missing-baseline"]["default"]), "false");
    assert_eq!(s(&inputs["version"]["default"]), "");
    let args_doc = s(&inputs["args"]["description"]);
    assert!(args_doc.contains("--only my-scenario"), "{args_doc}");
    assert!(!args_doc.contains("--require-baseline"), "a removed flag");

    let scripts = [
        ("install", read("scripts/install.sh")),
        ("perfgate", read("scripts/action-entrypoint.sh")),
    ];
    let mut mapped = Vec::new();
    for step in action["runs"]["steps"].as_array().unwrap() {
        let script = &scripts
            .iter()
            .find(|(id, _)| id == &s(&step["id"]))
            .unwrap()
            .1;
        for (var, value) in step["env"].as_object().unwrap() {
            if let Some(input) = s(value)
                .strip_prefix("${{ inputs.")
                .and_then(|v| v.strip_suffix(" }}"))
            {
                mapped.push(input.to_string());
            }
            // GITHUB_TOKEN is read by perfgate itself (--github-token-env).
            if var != "GITHUB_TOKEN" {
                assert!(
                    script.contains(&format!("${{{var}")),
                    "step {} sets {var}, which its script never reads",
                    s(&step["id"])
                );
            }
        }
    }
    mapped.sort();
    let mut expected: Vec<String> = INPUTS.iter().map(|i| i.to_string()).collect();
    expected.sort();
    assert_eq!(mapped, expected, "every input reaches a script, once");

    let section = actions_doc();
    for name in INPUTS.iter().chain(OUTPUTS.iter()) {
        assert!(
            section.contains(&format!("| `{name}` |")),
            "docs/github-actions.md does not document `{name}`"
        );
    }
    for wf in std::fs::read_dir(root().join("examples/workflows")).unwrap() {
        let name = wf.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            section.contains(&name),
            "docs/github-actions.md does not mention {name}"
        );
    }
    for f in [
        "examples/gitlab-ci.yml",
        "examples/Jenkinsfile",
        "scripts/install.sh",
    ] {
        assert!(
            section.contains(f),
            "docs/github-actions.md does not mention {f}"
        );
    }
    assert!(
        section.contains("What could not be run here"),
        "docs/github-actions.md says what was not run"
    );
}

/// Runs scripts/action-entrypoint.sh with the inputs as environment variables and a stand-in
/// perfgate (PERFGATE_BIN) that records its arguments; returns (exit code, stdout, arguments).
fn entrypoint(inputs: &[(&str, &str)]) -> (i32, String, Option<Vec<String>>) {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("perfgate");
    let argfile = dir.path().join("args");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\n",
            argfile.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut c = Command::new("bash");
    c.arg(root().join("scripts/action-entrypoint.sh"))
        .current_dir(dir.path())
        .env("PERFGATE_BIN", &fake);
    for (k, _) in std::env::vars() {
        if k.starts_with("PERFGATE_") && k != "PERFGATE_BIN" {
            c.env_remove(k);
        }
    }
    for (k, v) in inputs {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let args = std::fs::read_to_string(&argfile)
        .ok()
        .map(|t| t.lines().map(str::to_string).collect());
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        args,
    )
}

#[test]
fn the_entry_point_maps_inputs_to_one_command_line() {
    const DEFAULT: [&str; 9] = [
        "check",
        "--scenarios",
        "scenarios",
        "--baselines",
        "baselines",
        "--output",
        "perfgate-results.json",
        "--markdown",
        "perfgate-report.md",
    ];
    // The defaults: the same command line as the Docker action had.
    let (rc, _, args) = entrypoint(&[]);
    assert_eq!(rc, 0);
    assert_eq!(args.unwrap(), DEFAULT);
    let (_, _, args) = entrypoint(&[("PERFGATE_ALLOW_MISSING_BASELINE", "false")]);
    assert_eq!(args.unwrap(), DEFAULT);

    // allow-missing-baseline: true appends the flag to check.
    let (rc, _, args) = entrypoint(&[("PERFGATE_ALLOW_MISSING_BASELINE", "true")]);
    assert_eq!(rc, 0);
    let mut want: Vec<&str> = DEFAULT.to_vec();
    want.push("--allow-missing-baseline");
    assert_eq!(args.unwrap(), want);

    // Anything else is refused before perfgate runs.
    for bad in ["yes", "TRUE", "1", "true --delete"] {
        let (rc, out, args) = entrypoint(&[("PERFGATE_ALLOW_MISSING_BASELINE", bad)]);
        assert_eq!(rc, 2, "{bad}");
        assert!(
            out.starts_with(
                "::error title=perfgate::input allow-missing-baseline must be true or false"
            ),
            "{out}"
        );
        assert!(
            args.is_none(),
            "perfgate ran with allow-missing-baseline={bad}"
        );
    }

    // history: a branch name is passed to check as --history; anything that is not a plain
    // branch name (an option, a range, a space) is refused before perfgate runs.
    let (rc, _, args) = entrypoint(&[("PERFGATE_HISTORY_BRANCH", "perfgate-history")]);
    assert_eq!(rc, 0);
    let mut want: Vec<&str> = DEFAULT.to_vec();
    want.extend(["--history", "perfgate-history"]);
    assert_eq!(args.unwrap(), want);
    for bad in ["--delete", "a..b", "main perfgate", "x;rm"] {
        let (rc, out, args) = entrypoint(&[("PERFGATE_HISTORY_BRANCH", bad)]);
        assert_eq!(rc, 2, "{bad}");
        assert!(out.contains("input history must be a branch name"), "{out}");
        assert!(args.is_none(), "perfgate ran with history={bad}");
    }

    // bless and validate take no such flag: it is left out, and the log says so.
    let (rc, out, args) = entrypoint(&[
        ("PERFGATE_COMMAND", "validate"),
        ("PERFGATE_ALLOW_MISSING_BASELINE", "true"),
    ]);
    assert_eq!(rc, 0);
    assert_eq!(args.unwrap(), ["validate", "--scenarios", "scenarios"]);
    assert!(out.contains("allow-missing-baseline applies to check only"));

    // Every other input, together.
    let (rc, _, args) = entrypoint(&[
        ("PERFGATE_COMMAND", "check"),
        ("PERFGATE_SCENARIOS", "  scenarios/a.yaml\n\nscenarios/b \n"),
        ("PERFGATE_BASELINES", "perf/baselines"),
        ("PERFGATE_COMMENT", "false"),
        ("PERFGATE_FAIL_ON", "warn"),
        ("PERFGATE_ALLOW_MISSING_BASELINE", "true"),
        ("PERFGATE_ARGS", "--only my-scenario  --id *"),
    ]);
    assert_eq!(rc, 0);
    assert_eq!(
        args.unwrap(),
        [
            "check",
            "--scenarios",
            "scenarios/a.yaml",
            "--scenarios",
            "scenarios/b",
            "--baselines",
            "perf/baselines",
            "--output",
            "perfgate-results.json",
            "--markdown",
            "perfgate-report.md",
            "--no-comment",
            "--allow-missing-baseline",
            "--only",
            "my-scenario",
            "--id",
            "*",
        ]
    );
}

#[test]
fn the_image_only_copies_a_prebuilt_binary() {
    let dockerfile = read("Dockerfile");
    let instructions: Vec<&str> = dockerfile
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.starts_with(' '))
        .collect();
    assert!(!dockerfile.contains("cargo") && !dockerfile.contains("rustc"));
    for l in &instructions {
        assert!(!l.starts_with("FROM rust"), "{l}");
    }
    // The only file from the build context: the binary of the platform being built.
    let copies: Vec<&str> = instructions
        .iter()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from="))
        .collect();
    assert_eq!(
        copies,
        ["dist/linux-${TARGETARCH}/perfgate /usr/local/bin/perfgate"]
    );
    // RUN only in the stage that runs on the build platform (no emulation for arm64).
    let mut stage = "";
    for l in &instructions {
        if l.starts_with("FROM ") {
            stage = l;
        }
        if l.starts_with("RUN ") {
            assert!(stage.starts_with("FROM --platform=$BUILDPLATFORM "), "{l}");
        }
    }
    let last_user = instructions
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("USER");
    assert!(!last_user.starts_with("root") && !last_user.starts_with('0'));
    assert!(instructions.contains(&"ENTRYPOINT [\"/usr/local/bin/perfgate\"]"));

    // The build context is an allow-list of exactly those binaries, which release.yml stages.
    let ignore = read(".dockerignore");
    let allowed: Vec<&str> = ignore.lines().filter_map(|l| l.strip_prefix('!')).collect();
    assert!(ignore.lines().any(|l| l.trim() == "*"));
    assert_eq!(
        allowed,
        ["dist/linux-amd64/perfgate", "dist/linux-arm64/perfgate"]
    );
    let release = read(".github/workflows/release.yml");
    assert!(release.contains("for pair in amd64:x86_64 arm64:aarch64; do"));
    assert!(release.contains("mv \"artifacts/$name/perfgate\" \"dist/linux-$arch/perfgate\""));
    assert!(release.contains("--platform linux/amd64,linux/arm64"));
}

/// The targets scripts/install.sh maps RUNNER_OS/RUNNER_ARCH to.
fn installer_targets() -> Vec<String> {
    let installer = read("scripts/install.sh");
    let mut t: Vec<String> = installer
        .lines()
        .filter_map(|l| l.trim().split_once(") target="))
        .map(|(_, rest)| rest.trim_end_matches(" ;;").to_string())
        .collect();
    t.sort();
    t
}

#[test]
fn the_release_builds_every_archive_the_installer_asks_for() {
    let targets = installer_targets();
    assert_eq!(
        targets,
        [
            "aarch64-apple-darwin",
            "aarch64-unknown-linux-musl",
            "x86_64-apple-darwin",
            "x86_64-unknown-linux-musl"
        ]
    );
    let wf = yaml(".github/workflows/release.yml");
    let mut built: Vec<String> = wf["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| s(&e["target"]).to_string())
        .collect();
    built.sort();
    assert_eq!(
        built, targets,
        "release.yml builds what install.sh downloads"
    );

    // One archive name everywhere: perfgate-TAG-TARGET.tar.gz holding perfgate-TAG-TARGET/perfgate.
    let installer = read("scripts/install.sh");
    assert!(installer.contains("local asset=\"perfgate-$tag-$target.tar.gz\""));
    assert!(installer.contains("local member=\"perfgate-$tag-$target/perfgate\""));
    assert!(installer.contains("\"$base/$tag/SHA256SUMS\""));
    assert!(installer.contains("\"$base/v$version/COMMIT\""));
    let release = read(".github/workflows/release.yml");
    for needle in [
        "cargo build --locked --profile dist --target \"$TARGET\" --bin perfgate",
        "name=\"perfgate-$TAG-$TARGET\"",
        "cp \"target/$TARGET/dist/perfgate\" README.md \"dist/$name/\"",
        "tar -C dist -czf \"dist/$name.tar.gz\" \"$name\"",
        "printf '%s\\n' \"$SHA\" > COMMIT",
        "sha256sum -- *.tar.gz COMMIT > SHA256SUMS",
        "dist/*.tar.gz dist/SHA256SUMS dist/COMMIT",
        "if [ \"v$version\" != \"$TAG\" ]; then",
    ] {
        assert!(release.contains(needle), "release.yml lacks {needle}");
    }
    let cargo = read("Cargo.toml");
    let dist = cargo
        .split("\n[profile.dist]\n")
        .nth(1)
        .expect("[profile.dist]")
        .split("\n\n")
        .next()
        .unwrap();
    let mut keys: Vec<&str> = dist.lines().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "codegen-units = 1",
            "debug = 0",
            "inherits = \"release\"",
            "lto = true",
            "strip = true"
        ]
    );
}

/// This package as `cargo metadata` reads Cargo.toml (so the test sees what cargo and
/// cargo-binstall see, not a second TOML parser's idea of it).
fn package_metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"][0].clone()
}

/// A cargo-binstall template rendered as binstall renders it (the `leon` syntax: `{ key }`, the
/// spaces optional). A key without a value fails, as it makes binstall skip the template.
fn render_binstall(template: &str, values: &[(&str, &str)]) -> String {
    assert!(!template.contains('\\'), "no escapes expected: {template}");
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').expect("unclosed {");
        let key = rest[open + 1..close].trim();
        let value = values
            .iter()
            .find(|(k, _)| *k == key)
            .unwrap_or_else(|| panic!("binstall has no value for {{ {key} }} in {template}"));
        out.push_str(value.1);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `cargo binstall` finds the release's archives: Cargo.toml's `[package.metadata.binstall]`,
/// rendered with the values cargo-binstall gives its keys (binstalk-fetchers `gh_crate_meta.rs`
/// for `pkg-url`, binstalk `bins.rs` for `bin-dir`: `name` is the package name, `version` the
/// crate's version without `v`, `repo` `package.repository` without a trailing `/`,
/// `archive-suffix` each of `.tgz` and `.tar.gz` for `pkg-fmt = "tgz"`, tried in turn, `bin` the
/// binary, `binary-ext` empty off Windows), names the asset scripts/install.sh downloads and the
/// binary inside it, for every target the release builds.
#[test]
fn binstall_metadata_names_the_release_archives() {
    let package = package_metadata();
    let name = s(&package["name"]);
    let version = s(&package["version"]);
    // Unset until the repository is public: binstall then skips these templates, and this test
    // checks them with a stand-in repository.
    let repo = package["repository"]
        .as_str()
        .unwrap_or("https://github.com/OWNER/perfgate")
        .trim_end_matches('/');
    let binstall = &package["metadata"]["binstall"];
    assert_eq!(s(&binstall["pkg-fmt"]), "tgz");
    let bins: Vec<&str> = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| s(&t["name"]))
        .collect();
    assert_eq!(bins, ["perfgate"]);

    // The installer's names for TAG and TARGET (its lines are pinned by the test above).
    let installer = read("scripts/install.sh");
    let quoted = |prefix: &str| -> String {
        let line = installer
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .unwrap_or_else(|| panic!("install.sh has no {prefix}"));
        line.trim_matches('"').to_string()
    };
    let (asset, member) = (quoted("local asset="), quoted("local member="));
    let tag = format!("v{version}");
    for target in installer_targets() {
        let ours = |template: &str| template.replace("$tag", &tag).replace("$target", &target);
        let expected_url = format!("{repo}/releases/download/{tag}/{}", ours(&asset));
        let candidates: Vec<String> = [".tgz", ".tar.gz"]
            .iter()
            .map(|suffix| {
                render_binstall(
                    s(&binstall["pkg-url"]),
                    &[
                        ("repo", repo),
                        ("name", name),
                        ("version", version),
                        ("target", &target),
                        ("archive-suffix", suffix),
                    ],
                )
            })
            .collect();
        assert!(
            candidates.contains(&expected_url),
            "binstall tries {candidates:?}, the release has {expected_url}"
        );
        let bin_dir = render_binstall(
            s(&binstall["bin-dir"]),
            &[
                ("repo", repo),
                ("name", name),
                ("version", version),
                ("target", &target),
                ("bin", bins[0]),
                ("binary-ext", ""),
            ],
        );
        assert_eq!(bin_dir, ours(&member));
    }
}

/// Every workflow, shipped or example: `permissions: {}` on top, each job granted only what it
/// names, third-party actions pinned to a full commit SHA, no persisted checkout credentials.
#[test]
fn workflows_are_least_privilege_and_pinned() {
    let mut files = Vec::new();
    for dir in ["examples/workflows", ".github/workflows"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            files.push(e.unwrap().path());
        }
    }
    files.push(root().join("action.yml"));
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.strip_prefix(root()).unwrap().display().to_string();
        if name != "action.yml" {
            assert!(
                text.contains("\npermissions: {}\n"),
                "{name}: no top-level `permissions: {{}}`"
            );
            let wf: Value = serde_saphyr::from_str(&text).unwrap();
            for (job, j) in wf["jobs"].as_object().unwrap() {
                assert!(j.get("permissions").is_some(), "{name}: job {job}");
            }
        }
        assert!(
            !text.contains("write-all") && !text.contains("pull_request_target"),
            "{name}"
        );
        for line in text.lines().filter(|l| {
            l.trim_start().starts_with("- uses:") || l.trim_start().starts_with("uses:")
        }) {
            let uses = line.split("uses:").nth(1).unwrap().trim();
            if uses.starts_with("./") {
                continue;
            }
            let r#ref = uses
                .split('@')
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("");
            assert!(
                r#ref.len() == 40 && r#ref.bytes().all(|b| b.is_ascii_hexdigit()),
                "{name}: `{uses}` is not pinned to a full commit SHA"
            );
        }
        if text.contains("actions/checkout@") {
            // Credentials stay only where a push needs them (the nightly history), and only in a
            // workflow no pull request can run, with the reason next to zizmor's finding.
            let pushes = text.contains("persist-credentials: true  # zizmor: ignore[artipacked]");
            assert!(
                text.contains("persist-credentials: false")
                    || (pushes && !text.contains("pull_request") && text.contains("schedule:")),
                "{name}: checkout keeps credentials without a reason"
            );
        }
    }
}

/// The examples for other CI systems run the published image and keep the JUnit report.
#[test]
fn gitlab_and_jenkins_examples_use_the_image_and_junit() {
    let gitlab = yaml("examples/gitlab-ci.yml");
    let job = &gitlab["perfgate"];
    assert!(s(&job["image"]["name"]).starts_with("ghcr.io/OWNER/perfgate:"));
    assert_eq!(job["image"]["entrypoint"], serde_json::json!([""]));
    assert_eq!(
        s(&job["artifacts"]["reports"]["junit"]),
        "perfgate-junit.xml"
    );
    let script = job["script"].as_array().unwrap();
    assert!(script
        .iter()
        .any(|l| s(l).contains("--junit perfgate-junit.xml")));

    let jenkins = read("examples/Jenkinsfile");
    assert!(jenkins.contains("image 'ghcr.io/OWNER/perfgate:"));
    assert!(jenkins.contains("args '--entrypoint="));
    assert!(jenkins.contains("--junit perfgate-junit.xml"));
    assert!(jenkins.contains("junit testResults: 'perfgate-junit.xml'"));
    // Both use flags perfgate has.
    let help = Command::new(assert_cmd::cargo::cargo_bin("perfgate"))
        .args(["check", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--scenarios",
        "--baselines",
        "--junit",
        "--markdown",
        "--output",
    ] {
        assert!(help.contains(flag), "perfgate check has no {flag}");
    }
}

/// Issue 26 finding 20: `args:` written over several lines (a YAML block scalar) lost every
/// line after the first (`read -r -a` reads one line), so a second line's `--id` was dropped and
/// two perfgate steps shared one PR comment. Every line is split; nothing is globbed or expanded.
#[test]
fn the_entry_point_splits_args_over_every_line() {
    let (rc, _, args) = entrypoint(&[(
        "PERFGATE_ARGS",
        "--only my-scenario\n  --id latency-a100\t\n\n*  $HOME `id` ~\n",
    )]);
    assert_eq!(rc, 0);
    let args = args.unwrap();
    assert_eq!(
        args[9..],
        [
            "--only",
            "my-scenario",
            "--id",
            "latency-a100",
            "*",
            "$HOME",
            "`id`",
            "~"
        ]
    );
    // a blank input adds nothing
    let (rc, _, args) = entrypoint(&[("PERFGATE_ARGS", " \n \n")]);
    assert_eq!(rc, 0);
    assert_eq!(args.unwrap().len(), 9);
}
