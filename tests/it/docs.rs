//! The documentation holds what it promises: every relative link resolves (file and heading), the
//! README stays a README (at most 300 lines, the reference in docs/), the release it tells users
//! to pin is this crate's version, every `gate.<key>` the docs name is a key the scenario
//! parser accepts, and every `cargo install`/`cargo binstall` of perfgate names this package.

use crate::support::perfgate;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The user-facing Markdown files: README, CONTRIBUTING, docs/*.md, tests/cases/README.md.
fn markdown_files() -> Vec<PathBuf> {
    let r = root();
    let mut files = vec![
        r.join("README.md"),
        r.join("CONTRIBUTING.md"),
        r.join("tests/cases/README.md"),
    ];
    let mut docs: Vec<PathBuf> = fs::read_dir(r.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fence = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fence = !fence;
                return false;
            }
            !fence
        })
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(file: &Path) -> BTreeSet<String> {
    let text = fs::read_to_string(file).unwrap();
    prose(&text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links in prose.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn slug_matches_githubs_anchors() {
    assert_eq!(
        slug(" Absolute objectives (gate.slo): a gate on day one"),
        "absolute-objectives-gateslo-a-gate-on-day-one"
    );
    assert_eq!(slug("A/B runs: perfgate ab"), "ab-runs-perfgate-ab");
    assert_eq!(slug("1. The simulator demo"), "1-the-simulator-demo");
}

#[test]
fn every_relative_link_resolves_to_a_file_and_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = fs::read_to_string(&file).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            checked += 1;
            if !dest.exists() {
                broken.push(format!("{}: {target} (no such file)", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                if dest.is_file()
                    && dest.extension().is_some_and(|e| e == "md")
                    && !anchors(&dest).contains(a)
                {
                    broken.push(format!("{}: {target} (no such heading)", file.display()));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: the scan is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_at_most_300_lines_and_starts_with_the_two_commands() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(n <= 300, "README.md has {n} lines; move reference to docs/");
    let two = readme
        .find("## The two commands")
        .expect("the two commands section");
    let first_section = readme.find("\n## ").unwrap();
    assert_eq!(two, first_section + 1, "the two commands come first");
    assert!(readme.contains("cargo run --release -- check"));
    assert!(readme.contains("scripts/test.sh"));
}

/// The release tags the docs tell users to pin (`# v0.1.0`, `@v0.1.0`, `version: v0.1.0`).
#[test]
fn the_release_the_docs_pin_is_this_crates_version() {
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let mut files = markdown_files();
    files.push(root().join("action.yml"));
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (i, _) in text.match_indices(" v0.") {
            let tag: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            let tag = tag.trim_end_matches('.');
            seen += 1;
            if tag != version {
                wrong.push(format!("{}: {tag}", file.display()));
            }
        }
        for (i, _) in text.match_indices("@v0.") {
            let tag: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .collect();
            seen += 1;
            if tag.trim_end_matches('.') != version {
                wrong.push(format!("{}: {tag}", file.display()));
            }
        }
    }
    assert!(
        seen >= 5,
        "only {seen} pinned versions found: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "the docs pin another release than {version}:\n{}",
        wrong.join("\n")
    );
}

/// The crate in `cargo install [FLAGS] CRATE` / `cargo binstall [FLAGS] CRATE` on one line, if the
/// command names one (a flag's value is not a crate; the command ends at a closing backtick or a
/// `#` comment).
fn installed_crate(command: &str) -> Option<&str> {
    const WITH_VALUE: [&str; 11] = [
        "--path",
        "--git",
        "--root",
        "--rev",
        "--tag",
        "--branch",
        "--version",
        "--target",
        "--profile",
        "--features",
        "--bin",
    ];
    let command = command.split('`').next().unwrap();
    let command = command.split(" #").next().unwrap();
    let mut words = command.split_whitespace();
    while let Some(w) = words.next() {
        // `--rev/--tag/--branch REF`: one of several flags, each with a value
        if w.split('/').all(|flag| WITH_VALUE.contains(&flag)) {
            words.next();
        } else if !w.starts_with('-') {
            return Some(w);
        }
    }
    None
}

/// `cargo install perfgate` and `cargo binstall perfgate` would fetch another project's crate
/// (crates.io's `perfgate` is not this one): every perfgate the docs install is this package.
#[test]
fn every_cargo_install_in_the_docs_names_this_package() {
    let mut files = markdown_files();
    files.push(root().join("action.yml"));
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            for cmd in ["cargo install ", "cargo binstall "] {
                for (i, _) in line.match_indices(cmd) {
                    let Some(krate) = installed_crate(&line[i + cmd.len()..]) else {
                        continue;
                    };
                    seen += 1;
                    if krate.contains("perfgate") && krate != env!("CARGO_PKG_NAME") {
                        wrong.push(format!("{}: {}", file.display(), line.trim()));
                    }
                }
            }
        }
    }
    assert!(seen >= 3, "only {seen} installs found: the scan is broken");
    assert!(
        wrong.is_empty(),
        "these install a crate other than {}:\n{}",
        env!("CARGO_PKG_NAME"),
        wrong.join("\n")
    );
}

/// Every `gate.<key>` named in the docs is accepted by the scenario parser (`validate` on a
/// scenario with that key set to null refuses unknown keys).
#[test]
fn every_gate_key_the_docs_name_exists() {
    let mut keys = BTreeSet::new();
    for file in markdown_files() {
        let text = fs::read_to_string(&file).unwrap();
        for (i, _) in text.match_indices("`gate.") {
            let key: String = text[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !key.is_empty() {
                keys.insert(key);
            }
        }
    }
    assert!(
        keys.contains("slo") && keys.contains("metrics"),
        "scan found {keys:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    // `gate.md`, `gate.rs`: file names, not keys.
    keys.retain(|k| k != "md" && k != "rs");
    for key in &keys {
        let yaml = format!(
            "scenarios:\n  - name: s\n    endpoint: {{base_url: \"sim://\", model: m}}\n    \
             request: {{prompt: hi, max_tokens: 8}}\n    load: {{samples: 20}}\n    \
             gate: {{{key}: null}}\n"
        );
        let path = dir.path().join("s.yaml");
        fs::write(&path, yaml).unwrap();
        let o = perfgate()
            .current_dir(dir.path())
            .args(["validate", "-s", "s.yaml"])
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "the docs name `gate.{key}`, which the parser refuses: {out}"
        );
    }
}

/// A line with its measured numbers and verdicts taken out: what the README's demo excerpt must
/// share with a real run (the numbers vary from run to run; the rows, names and words do not).
fn skeleton(line: &str) -> String {
    line.split_whitespace()
        .filter(|w| {
            let t = w.trim_start_matches(['(', '[', '>', '+', '-']);
            !t.starts_with(|c: char| c.is_ascii_digit())
                && !w.chars().all(|c| "+-=|".contains(c))
                && !matches!(*w, "PASS" | "WARN" | "FAIL" | "IMPROVED")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Issue 46: the README's demo excerpt (from a test fixture) gated `tail>P90` at n = 20, where
/// the real demo lists those tails as not gated. The excerpt is the first scenario of
/// `perfgate check` on the repository's own scenarios and baselines, line for line but the
/// numbers (the real output may add notes between them).
#[test]
fn the_readme_demo_excerpt_is_what_the_demo_prints() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let demo = &readme[readme.find("### 1. The simulator demo").unwrap()..];
    let block = demo.split("```").nth(3).expect("the demo's output block");
    let excerpt: Vec<String> = block
        .lines()
        .map(skeleton)
        .filter(|l| !l.is_empty())
        .collect();
    let name = block
        .lines()
        .find_map(|l| l.strip_prefix("== "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a scenario heading");
    let out = perfgate()
        .current_dir(root())
        .args(["check", "--only", name])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let real: Vec<String> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("== "))
        .take_while(|l| !l.is_empty())
        .map(skeleton)
        .filter(|l| !l.is_empty())
        .collect();
    // Every excerpt line, in order, is a line of the real output. The real output may carry
    // more: a loaded machine adds its notes (client busy, an inconclusive WARN's explanation).
    let mut rest = real.iter();
    for line in &excerpt {
        assert!(
            rest.any(|r| r == line),
            "README excerpt line {line:?} is not (in order) in the demo's output:\n{stdout}"
        );
    }
}
