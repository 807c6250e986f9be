//! Consistency of the Docker action's files, checked without a Docker engine (none is available
//! here): the image's build context holds every file the build embeds, the entry point reads the
//! variables action.yml sets, and every input and output is documented in the README.
//! The linters (actionlint, action-validator, zizmor, hadolint) run in scripts/test.sh.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(root().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Normalises `a/b/../c` without touching the file system.
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_image_build_context_has_every_file_the_build_embeds() {
    let dockerfile = read("Dockerfile");
    // Sources the build stage copies (before the runtime stage starts).
    let build_stage = dockerfile.split("\nFROM ").nth(1).unwrap_or("");
    let copied: Vec<String> = build_stage
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            parts[..parts.len() - 1]
                .iter()
                .map(|s| s.trim_end_matches('/').to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(copied.contains(&"src".to_string()), "{copied:?}");
    let ignore = read(".dockerignore");
    let allowed: Vec<&str> = ignore
        .lines()
        .filter_map(|l| l.strip_prefix('!'))
        .map(|l| l.trim_end_matches('/'))
        .collect();
    assert!(
        ignore.lines().any(|l| l.trim() == "*"),
        "the context is an allow-list"
    );
    for c in &copied {
        assert!(
            allowed
                .iter()
                .any(|a| c == a || c.starts_with(&format!("{a}/"))),
            "Dockerfile copies {c}, which .dockerignore leaves out"
        );
    }

    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for mac in ["include_str!(\"", "include_bytes!(\""] {
            for (i, _) in text.match_indices(mac) {
                let rest = &text[i + mac.len()..];
                let arg = &rest[..rest.find('"').unwrap()];
                let target = normalise(&f.parent().unwrap().join(arg));
                let rel = target
                    .strip_prefix(root())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                assert!(
                    copied
                        .iter()
                        .any(|c| rel == *c || rel.starts_with(&format!("{c}/"))),
                    "{} embeds {rel}, which the Dockerfile's build stage does not copy",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn the_entry_point_reads_what_action_yml_sets_and_the_readme_documents_it() {
    let action = read("action.yml");
    let entry = read("scripts/action-entrypoint.sh");
    let readme = read("README.md");
    let dockerfile = read("Dockerfile");
    assert!(action.contains("  using: docker\n  image: Dockerfile\n"));
    assert!(dockerfile.contains("COPY scripts/action-entrypoint.sh /usr/local/bin/perfgate-action"));
    assert!(dockerfile.contains("ENTRYPOINT [\"/usr/local/bin/perfgate-action\"]"));
    assert!(dockerfile.contains("\nUSER "), "runs as a non-root user");
    // runs.env: each PERFGATE_* variable maps one input, and the entry point reads it.
    let env_block = action.split("  env:\n").nth(1).expect("runs.env");
    let mut inputs_mapped = Vec::new();
    for line in env_block.lines().filter(|l| l.starts_with("    ")) {
        let (var, value) = line.trim().split_once(": ").unwrap();
        let input = value
            .strip_prefix("${{ inputs.")
            .and_then(|v| v.strip_suffix(" }}"))
            .unwrap_or_else(|| panic!("{line}"));
        inputs_mapped.push(input.to_string());
        if var != "GITHUB_TOKEN" {
            assert!(
                entry.contains(&format!("${{{var}")),
                "the entry point ignores {var}"
            );
        }
    }
    let inputs_block = action
        .split("\ninputs:\n")
        .nth(1)
        .unwrap()
        .split("\noutputs:\n")
        .next()
        .unwrap();
    let inputs: Vec<&str> = inputs_block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':'))
        .collect();
    assert_eq!(
        inputs,
        [
            "command",
            "scenarios",
            "baselines",
            "github-token",
            "comment",
            "fail-on",
            "args"
        ]
    );
    let mut sorted_inputs = inputs.clone();
    sorted_inputs.sort();
    inputs_mapped.sort();
    assert_eq!(
        sorted_inputs, inputs_mapped,
        "every input reaches the container"
    );
    let outputs_block = action
        .split("\noutputs:\n")
        .nth(1)
        .unwrap()
        .split("\nruns:\n")
        .next()
        .unwrap();
    let outputs: Vec<&str> = outputs_block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':'))
        .collect();
    assert_eq!(
        outputs,
        ["verdict", "regressions", "report-json", "report-path"]
    );
    let section = readme
        .split("## Use in GitHub Actions")
        .nth(1)
        .expect("README section");
    for name in inputs.iter().chain(outputs.iter()) {
        assert!(
            section.contains(&format!("| `{name}` |")),
            "README does not document `{name}`"
        );
    }
    for wf in std::fs::read_dir(root().join("examples/workflows")).unwrap() {
        let name = wf.unwrap().file_name().to_string_lossy().into_owned();
        assert!(section.contains(&name), "README does not mention {name}");
    }
    assert!(section.contains("No Docker engine"));
}

#[test]
fn example_workflows_are_least_privilege() {
    for wf in std::fs::read_dir(root().join("examples/workflows")).unwrap() {
        let p = wf.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.display();
        assert!(
            text.contains("\npermissions: {}\n"),
            "{name}: no top-level `permissions: {{}}`"
        );
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
            assert!(text.contains("persist-credentials: false"), "{name}");
        }
    }
}
