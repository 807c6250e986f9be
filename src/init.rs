//! `perfgate init [DIR]`: scaffolds a starting point in DIR (default `.`): a commented
//! `scenarios/example.yaml` showing every key (on the built-in simulator, so it runs with no key
//! and no network), an empty `baselines/` (with `.gitkeep`) and a pull-request workflow
//! `.github/workflows/perfgate.yml` (from `examples/workflows/perfgate-pr.yml`). Never
//! overwrites: when any of the files exists, nothing is written and the exit code is 2.

use crate::exit::{self, ExitError};
use std::path::{Path, PathBuf};

/// The example scenario file.
pub const EXAMPLE_YAML: &str = r#"# perfgate scenarios (written by `perfgate init`). Every key is shown: those commented out are
# optional, with their defaults. `perfgate validate` checks this file offline.
#
# Out of the box this file measures perfgate's built-in simulator (sim://), so it runs with no key
# and no network. To measure your endpoint, swap the two base_url lines (and the model) below.
#
#   perfgate validate        # offline: keys, values, env vars
#   perfgate bless           # measure; write baselines/<scenario>.json (commit them)
#   perfgate check --html report.html    # measure again, compare with the baselines, gate
#
# Try a regression on the simulator: PERFGATE_SIM_TPOT_MS=5.2 perfgate check  (TPOT 30% slower: exit 1)
# (Reports then show the URL as tpot_ms=<redacted>: values from the environment are never printed,
# since a URL may carry a secret.)

defaults:
  endpoint:
    # The built-in simulator: median TTFT and per-token gap in ms, lognormal noise, fixed seed.
    base_url: "sim://?ttft_ms=${PERFGATE_SIM_TTFT_MS:-40}&tpot_ms=${PERFGATE_SIM_TPOT_MS:-4}&seed=1"
    model: perfgate-sim
    # Your endpoint instead: the base URL with its version segment; perfgate appends the route.
    # ${ENV} and ${ENV:-default} are expanded.
    # base_url: http://127.0.0.1:8000/v1
    # model: my-model                     # required for http(s) endpoints
    # api_key_env: OPENAI_API_KEY         # the NAME of the variable holding the key, never the key
    # headers: {X-Team: perf}             # extra headers; ${ENV} values are redacted everywhere
    api: openai-chat                      # openai-chat | openai-completions | anthropic-messages
    connect_timeout: 10s
    first_token_timeout: 60s
    idle_timeout: 30s                     # longest gap between events
    request_timeout: 300s
    include_usage: true                   # send stream_options.include_usage

  request:
    prompt: "Write a haiku about latency."
    # messages: [{role: user, content: "Write a haiku about latency."}]   # instead of prompt
    # system: "You are terse."
    max_tokens: 64                        # required
    temperature: 0
    seed: 1
    ignore_eos: true                      # ask for exactly max_tokens (vLLM, llama.cpp, SGLang)
    # min_tokens: 64                      # the same, where supported
    # extra_body: {cache_prompt: false}   # merged into the JSON body verbatim
    cache: warm                           # warm (same prompt each time) | cold (unique per request)

  load:
    concurrency: 1                        # closed loop: a slot is refilled as its request ends
    samples: 20                           # measured requests per run, at least 20
    warmup: 2                             # sent first and discarded
    # max_samples: 100                    # sequential sampling: stop early once every check is decided

  gate:
    metrics: [ttft, tpot]                 # ttft, tpot, e2e
    quantiles: [p50, p99]                 # p50, p90, p99. A tail quantile is gated only when the
                                          # baseline can bound it (P99 needs 459 samples, P90 44);
                                          # until then it is reported as INFO, never failing
    tolerances:                           # relative bands; keys p50/p90/p99 or ttft_p50, tpot_p99...
      p50: {warn: 5%, fail: 10%}
      p90: {warn: 10%, fail: 20%}
      p99: {warn: 25%, fail: 50%}
    min_delta: {ttft: 5ms, tpot: 0.5ms, e2e: 10ms}   # smaller absolute changes never FAIL
    alpha: 0.01                           # false-alarm rate of the whole check (Holm)
    max_error_rate: 0%                    # more failed requests than this: "could not measure" (exit 3)
    confirm: 0                            # re-measure a failing scenario N times (0-5); a FAIL must hold

# The three classic shapes, each isolating one part of the latency. (On the simulator TTFT does
# not depend on the prompt's length; on a real server the long prompt measures prefill.)
scenarios:
  - name: short-prompt-short-answer       # [A-Za-z0-9._-]; names baselines/<name>.json
    description: TTFT-dominated
    request: {max_tokens: 8}

  - name: short-prompt-long-answer
    description: TPOT-dominated (decode)
    request: {max_tokens: 128}

  - name: long-prompt-short-answer
    description: prefill-dominated
    request:
      prompt: "Summarise in one sentence: perfgate streams a fixed workload at an OpenAI-compatible endpoint, measures every request (time to first token, time per output token, inter-token latency, end-to-end latency), compares the median and the tail with a baseline committed in the repository using statistical tolerance bands, prints a report, and exits non-zero on a regression. Baselines are plain JSON files reviewed like code; the gate controls its false-alarm rate over every check of a run, and a tail quantile the samples cannot bound is reported, never gated."
      max_tokens: 8
"#;

/// The workflow example this command copies (kept in step with the GitHub Action's examples).
const PR_WORKFLOW: &str = include_str!("../examples/workflows/perfgate-pr.yml");

/// What replaces the example's `uses: ./` (the action's own repository in the examples).
pub const USES_PLACEHOLDER: &str =
    "uses: OWNER/perfgate@REF  # set this: the perfgate action's repository and a release tag or commit SHA";

/// The workflow `init` writes: the PR example, with its self-reference made a placeholder.
pub fn workflow() -> String {
    let mut out = String::from(
        "# Written by `perfgate init` from perfgate's examples/workflows/perfgate-pr.yml.\n",
    );
    for line in PR_WORKFLOW.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("uses: ./") {
            let indent = &line[..line.len() - trimmed.len()];
            out.push_str(indent);
            out.push_str(USES_PLACEHOLDER);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The files `init` writes under `dir`, with their contents.
pub fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    // `init` in the current directory names the files as a user would type them.
    let dir = if dir == Path::new(".") {
        Path::new("")
    } else {
        dir
    };
    vec![
        (dir.join("scenarios/example.yaml"), EXAMPLE_YAML.to_string()),
        (dir.join("baselines/.gitkeep"), String::new()),
        (dir.join(".github/workflows/perfgate.yml"), workflow()),
    ]
}

/// Writes the scaffold into `dir`; refuses (exit 2, nothing written) when any file exists.
pub fn init(dir: &Path) -> Result<i32, ExitError> {
    let files = files(dir);
    for (p, _) in &files {
        if p.exists() {
            return Err(ExitError::invalid(format!(
                "init: {} already exists; nothing was written (perfgate init never overwrites: move it away, or init another directory)",
                p.display()
            )));
        }
    }
    for (p, text) in &files {
        crate::fsutil::write_atomic(p, text)
            .map_err(|e| ExitError::invalid(format!("init: cannot write {}: {e}", p.display())))?;
        println!("wrote {}", p.display());
    }
    let cd = if dir == Path::new(".") || dir.as_os_str().is_empty() {
        String::new()
    } else {
        format!("  cd {}\n", dir.display())
    };
    println!(
        "\nNext:\n{cd}  perfgate validate                    # offline check of scenarios/\n  perfgate bless                       # measure, write baselines/ (commit them)\n  perfgate check --html report.html    # measure again, compare, gate; open report.html\n\nThe example measures the built-in simulator; edit scenarios/example.yaml for your endpoint,\nand set `uses:` in .github/workflows/perfgate.yml to the perfgate action."
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workflow_points_at_a_placeholder_not_at_itself() {
        let w = workflow();
        assert!(w.contains(USES_PLACEHOLDER), "{w}");
        assert!(!w.lines().any(|l| l.trim_start().starts_with("uses: ./")));
        assert!(w.contains("pull_request"));
    }
}
