//! `perfgate init [DIR]`: scaffolds a starting point in DIR (default `.`): a commented
//! `scenarios/example.yaml` showing every key (on the built-in simulator, so it runs with no key
//! and no network), an empty `baselines/` (with `.gitkeep`) and a pull-request workflow
//! `.github/workflows/perfgate.yml` (from `examples/workflows/perfgate-pr.yml`). Never
//! overwrites: when any of the files exists, nothing is written and the exit code is 2. A
//! `.gitignore` for what runs leave behind (server logs, reports, results) is written only when
//! there is none; an existing one is left alone and the lines to add are printed. With
//! `--server NAME` the scenario file is `scenarios/NAME.yaml`, that server's template
//! ([`ServerTemplate`]), instead of the simulator example.

use crate::exit::{self, Error};
use clap::Args;
use std::path::{Path, PathBuf};

mod template;
pub use template::ServerTemplate;

/// The example scenario file.
pub const EXAMPLE_YAML: &str = include_str!("init/example.yaml");

/// The workflow examples this command copies (kept in step with the GitHub Action's examples):
/// the endpoint's PR workflow, and with a server template the one whose runner starts the server.
const PR_WORKFLOW: &str = include_str!("../examples/workflows/perfgate-pr.yml");
const LOCAL_SERVER_WORKFLOW: &str = include_str!("../examples/workflows/perfgate-local-server.yml");

/// What replaces the example's `uses: ./` (the action's own repository in the examples).
pub const USES_PLACEHOLDER: &str =
    "uses: OWNER/perfgate@REF  # set this: the perfgate action's repository and a release tag or commit SHA";

/// The workflow `init` writes, with its self-reference made a placeholder: the PR example, or
/// with a server template the local-server example (perfgate starts the server on the runner)
/// pointed at `init`'s own scenarios/ and baselines/ and the template's model variable.
pub fn workflow(server: Option<ServerTemplate>) -> String {
    let (name, text) = match server {
        None => ("perfgate-pr.yml", PR_WORKFLOW),
        Some(_) => ("perfgate-local-server.yml", LOCAL_SERVER_WORKFLOW),
    };
    let mut out =
        format!("# Written by `perfgate init` from perfgate's examples/workflows/{name}.\n");
    let vars = server.map_or(&[][..], |t| t.vars());
    let mut lines = text.lines().peekable();
    if let Some(t) = server {
        // the example's header describes its own llama-server scenarios: say what this one does
        while lines.next_if(|l| l.starts_with('#')).is_some() {}
        out.push_str(&format!(
            "# perfgate starts {} on the runner's 127.0.0.1 from the server: block of scenarios/{}.yaml,\n# waits until it is ready, measures, and stops it. Have {} on the runner (a self-hosted\n# runner with its model), {}, and point `uses:` at perfgate\n# (docs/github-actions.md, \"Use in GitHub Actions\").\n",
            t.name(),
            t.name(),
            t.name(),
            match vars {
                [] => "pull the scenario's model there".to_string(),
                [v] => format!("set the repository variable {v} (docs/servers.md)"),
                [vs @ .., last] => format!(
                    "set the repository variables {} and {last} (docs/servers.md)",
                    vs.join(", ")
                ),
            }
        ));
    }
    for line in lines {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        if server.is_some() {
            match trimmed {
                "scenarios: scenarios/local" => {
                    out.push_str(&format!("{indent}scenarios: scenarios\n"));
                    continue;
                }
                "baselines: baselines/local" => {
                    out.push_str(&format!("{indent}baselines: baselines\n"));
                    continue;
                }
                "LLAMA_MODEL: ${{ vars.LLAMA_MODEL }}" => {
                    for v in vars {
                        out.push_str(&format!("{indent}{v}: ${{{{ vars.{v} }}}}\n"));
                    }
                    continue;
                }
                "env:" if vars.is_empty() => continue,
                t if t.starts_with("runs-on: [self-hosted, linux, gpu]") => {
                    // a custom label actionlint does not know: the runner with the server
                    out.push_str(&format!(
                        "{indent}runs-on: [self-hosted, linux]  # a runner with the server and its model\n"
                    ));
                    continue;
                }
                "- name: perfgate check (starts, waits for and stops llama-server)" => {
                    out.push_str(&format!(
                        "{indent}- name: perfgate check (starts, waits for and stops {})\n",
                        server.map(|t| t.name()).unwrap_or_default()
                    ));
                    continue;
                }
                _ => {}
            }
        }
        // already where it belongs: the example's "copy it there" line would mislead
        if trimmed.starts_with("# Copy to .github/workflows/") {
            out.push_str("# Point `uses:` at perfgate (docs/github-actions.md, \"Use in GitHub Actions\").\n");
            continue;
        }
        if trimmed.starts_with("uses: ./") {
            out.push_str(indent);
            out.push_str(USES_PLACEHOLDER);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The `.gitignore` `init` writes: the server logs (`ab` writes `.base`/`.candidate` beside the
/// scenario's `log:`) and the report and results files the docs name. Never the scenarios or
/// baselines, which are committed.
pub const GITIGNORE: &str = "\
# Written by `perfgate init`: what perfgate runs leave in the tree. Commit scenarios/ and baselines/.
perfgate-server*.log
perfgate-results.json
perfgate-report.md
perfgate-report.html
perfgate-junit.xml
report.md
report.html
results.json
";

/// The files `init` writes under `dir`, with their contents: the scenario file is `server`'s
/// template, or the simulator example without one.
pub fn files(dir: &Path, server: Option<ServerTemplate>) -> Vec<(PathBuf, String)> {
    let dir = as_typed(dir);
    let scenario = match server {
        Some(t) => (
            dir.join(format!("scenarios/{}.yaml", t.name())),
            t.yaml().to_string(),
        ),
        None => (dir.join("scenarios/example.yaml"), EXAMPLE_YAML.to_string()),
    };
    vec![
        scenario,
        (dir.join("baselines/.gitkeep"), String::new()),
        (dir.join(".github/workflows/perfgate.yml"), workflow(server)),
    ]
}

/// `init` in the current directory names the files as a user would type them.
fn as_typed(dir: &Path) -> &Path {
    if dir == Path::new(".") {
        Path::new("")
    } else {
        dir
    }
}

/// Writes the scaffold into `dir` (with `server`'s template as its scenario file); refuses
/// (exit 2, nothing written) when any file exists.
pub fn init(dir: &Path, server: Option<ServerTemplate>) -> Result<i32, Error> {
    let files = files(dir, server);
    for (p, _) in &files {
        if p.exists() {
            return Err(Error::Usage(format!(
                "init: {} already exists; nothing was written (perfgate init never overwrites: move it away, or init another directory)",
                p.display()
            )));
        }
    }
    for (p, text) in &files {
        crate::fsutil::write_atomic(p, text).map_err(|source| Error::Write {
            context: "init: ",
            path: p.clone(),
            source,
        })?;
        println!("wrote {}", p.display());
    }
    let gitignore = as_typed(dir).join(".gitignore");
    if gitignore.exists() {
        let lines: String = GITIGNORE
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("  {l}\n"))
            .collect();
        println!(
            "{} exists, left as it is; add these lines to it:\n{lines}",
            gitignore.display()
        );
    } else {
        crate::fsutil::write_atomic(&gitignore, GITIGNORE).map_err(|source| Error::Write {
            context: "init: ",
            path: gitignore.clone(),
            source,
        })?;
        println!("wrote {}", gitignore.display());
    }
    let cd = if dir == Path::new(".") || dir.as_os_str().is_empty() {
        String::new()
    } else {
        format!("  cd {}\n", dir.display())
    };
    let edit = match server {
        Some(t) => format!(
            "perfgate starts {} itself (the server: block); {},\nand set `uses:` in .github/workflows/perfgate.yml to the perfgate action.",
            t.name(),
            t.next_step()
        ),
        None => "The example measures the built-in simulator; edit scenarios/example.yaml for your endpoint\n(or run `perfgate init --server llama-server|vllm|sglang|ollama` in another directory),\nand set `uses:` in .github/workflows/perfgate.yml to the perfgate action.".to_string(),
    };
    println!(
        "\nNext:\n{cd}  perfgate validate                    # offline check of scenarios/\n  perfgate bless                       # measure, write baselines/ (commit them)\n  perfgate check --html report.html    # measure again, compare, gate; open report.html\n\n{edit}"
    );
    Ok(exit::OK)
}

/// `perfgate init`'s flags.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory to scaffold (created if needed).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Write scenarios/NAME.yaml, a scenario whose `server:` block starts this server (its
    /// model name, threads or GPU, metrics, readiness probe, log), instead of the simulator
    /// example.
    #[arg(long, value_name = "NAME")]
    pub server: Option<ServerTemplate>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_template_gets_the_workflow_that_starts_its_server() {
        let w = workflow(Some(ServerTemplate::Vllm));
        assert!(w.starts_with("# Written by `perfgate init` from perfgate's examples/workflows/perfgate-local-server.yml.\n"), "{w}");
        assert!(
            w.contains("          scenarios: scenarios\n          baselines: baselines\n"),
            "{w}"
        );
        assert!(
            w.contains("          VLLM_MODEL: ${{ vars.VLLM_MODEL }}\n"),
            "{w}"
        );
        assert!(!w.contains("LLAMA_MODEL: ${{"), "{w}");
        assert!(w.contains(USES_PLACEHOLDER), "{w}");
        assert!(w.contains("# perfgate starts vllm on the runner's 127.0.0.1 from the server: block of scenarios/vllm.yaml,\n"), "{w}");
        assert!(w.contains("set the repository variable VLLM_MODEL"), "{w}");
        assert!(!w.contains("llama-server"), "{w}");
        assert!(w.contains("    runs-on: [self-hosted, linux]  #"), "{w}");
        // llama-server's: its model and its threads, as the baseline was blessed with
        let w = workflow(Some(ServerTemplate::LlamaServer));
        assert!(
            w.contains("          LLAMA_MODEL: ${{ vars.LLAMA_MODEL }}\n          LLAMA_THREADS: ${{ vars.LLAMA_THREADS }}\n"),
            "{w}"
        );
        assert!(
            w.contains(
                "set the repository variables LLAMA_MODEL and LLAMA_THREADS (docs/servers.md)"
            ),
            "{w}"
        );
        // Ollama's scenario names its model: no env block at all
        let w = workflow(Some(ServerTemplate::Ollama));
        assert!(!w.contains("        env:\n"), "{w}");
        assert!(!w.contains("_MODEL: ${{"), "{w}");
        assert!(w.contains("          scenarios: scenarios\n"), "{w}");
        // without a template: the PR workflow
        assert!(workflow(None).contains("examples/workflows/perfgate-pr.yml"));
    }

    #[test]
    fn the_workflow_points_at_a_placeholder_not_at_itself() {
        let w = workflow(None);
        assert!(w.contains(USES_PLACEHOLDER), "{w}");
        // written where it belongs: not told to copy itself there
        assert!(!w.contains("Copy to .github/workflows/"), "{w}");
        assert!(w.contains("# Point `uses:` at perfgate"), "{w}");
        assert!(!w.lines().any(|l| l.trim_start().starts_with("uses: ./")));
        assert!(w.contains("pull_request"));
    }
}
