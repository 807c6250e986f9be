#!/usr/bin/env bash
# scripts/report-tools.sh setup | env
#
# The outside programs the report tests use to read perfgate's reports as their real consumers
# would, installed once per machine:
#   Debian -> chromium (/usr/bin/chromium): tests/it/report_html.rs opens the HTML report headless,
#             takes a screenshot and checks the page logged nothing to the console
#   PyPI   -> $CACHE/venvs/report-tools: junitparser (the JUnit reader of CI result publishers),
#             which tests/it/report_junit.rs runs on perfgate's JUnit XML
#
#   setup   idempotent: chromium is installed with apt-get only when missing; the venv has a stamp
#           with the pinned version, so a warm run only checks it
#   env     prints `export PERFGATE_CHROMIUM=... PERFGATE_JUNITPARSER_PYTHON=...` for `eval`
# Logs go to stderr; stdout carries only what `env` prints.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
VENV="$CACHE/venvs/report-tools"
PY="${PYTHON:-python3}"
JUNITPARSER_VERSION=5.0.3
CHROMIUM="${PERFGATE_CHROMIUM:-/usr/bin/chromium}"

log() { echo "[report-tools] $*" >&2; }

setup() {
  local t0; t0=$(date +%s)
  if [ -x "$CHROMIUM" ]; then
    log "chromium present: $("$CHROMIUM" --version 2>/dev/null | head -1)"
  else
    log "apt-get install chromium (Debian's; no browser download)"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      chromium fonts-dejavu-core >/dev/null
    log "chromium installed: $("$CHROMIUM" --version 2>/dev/null | head -1)"
  fi
  if [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "junitparser==$JUNITPARSER_VERSION" ] \
     && [ -x "$VENV/bin/python" ]; then
    log "venv present: junitparser==$JUNITPARSER_VERSION"
  else
    log "venv $VENV: pip install junitparser==$JUNITPARSER_VERSION"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "junitparser==$JUNITPARSER_VERSION"
    echo "junitparser==$JUNITPARSER_VERSION" >"$VENV/.stamp"
  fi
  log "setup done in $(( $(date +%s) - t0 )) s"
}

env_() {
  echo "export PERFGATE_CHROMIUM=$CHROMIUM PERFGATE_JUNITPARSER_PYTHON=$VENV/bin/python"
}

case "${1:-}" in
  setup) setup ;;
  env) env_ ;;
  *) echo "usage: $0 setup | env" >&2; exit 2 ;;
esac
