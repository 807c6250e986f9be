#!/usr/bin/env bash
# scripts/thirdparty.sh setup [NAME...] | bin NAME | list
#
# Third-party OpenAI-compatible mock servers from PyPI, for tests/thirdparty.rs. Each is installed
# into its own venv under $PERFGATE_CACHE/venvs (default ~/.cache/perfgate/venvs), once per machine,
# at a pinned version; the transitive dependencies are pinned too, by the constraint files in
# scripts/thirdparty/ (a `pip freeze` of the venvs that were tested), so a new upstream release
# cannot change what CI runs. Only PyPI is contacted.
#
#   setup [NAME...]  idempotent; installs all servers (or the named ones); prints `NAME BIN_DIR` lines
#   bin NAME         prints the venv's bin directory (exit 1 when it is not installed)
#   list             prints the names
#
# LiteLLM is pinned to 1.82.6 ON PURPOSE: 1.82.7 and 1.82.8 (2026-03, BerriAI/litellm#24518) and
# 1.107.0 were compromised releases. Never change that pin without checking the release.
set -euo pipefail

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
PY="${PYTHON:-python3}"

# name -> pip requirement (exact pins only)
declare -A SPEC=(
  [xpyd-sim]="xpyd-sim==0.5.0"
  [fakellm]="fakellm==0.3.5"
  [mockllm]="mockllm==0.0.8"
  [llm-mock-api]="llm-mock-api==0.1.2"
  [litellm]="litellm[proxy]==1.82.6"
)
NAMES=(xpyd-sim fakellm mockllm llm-mock-api litellm)

log() { echo "[thirdparty] $*" >&2; }

venv_of() { local s="${SPEC[$1]}"; echo "$CACHE/venvs/tp-$1-${s##*==}"; }

installed() { [ -f "$(venv_of "$1")/.perfgate-installed" ]; }

install_one() {
  local name="$1" spec="${SPEC[$1]}" venv
  venv="$(venv_of "$name")"
  if installed "$name"; then
    log "$spec present: $venv"
    return
  fi
  case "$spec" in *==*) ;; *) echo "unpinned spec $spec" >&2; exit 2 ;; esac
  log "installing $spec into $venv"
  local t0; t0=$(date +%s)
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  local cons=()
  [ -f "$DIR/thirdparty/$name.txt" ] && cons=(-c "$DIR/thirdparty/$name.txt")
  "$venv/bin/pip" install -q --disable-pip-version-check "${cons[@]}" "$spec" >&2
  "$venv/bin/pip" freeze --disable-pip-version-check >"$venv/freeze.txt"
  echo "$spec" >"$venv/.perfgate-installed"
  log "$spec installed in $(( $(date +%s) - t0 ))s"
}

case "${1:-}" in
  setup)
    shift
    mkdir -p "$CACHE/venvs"
    [ $# -gt 0 ] || set -- "${NAMES[@]}"
    for n in "$@"; do
      [ -n "${SPEC[$n]:-}" ] || { echo "unknown server $n (known: ${NAMES[*]})" >&2; exit 2; }
      install_one "$n"
      echo "$n $(venv_of "$n")/bin"
    done
    ;;
  bin)
    n="${2:?usage: $0 bin NAME}"
    [ -n "${SPEC[$n]:-}" ] || { echo "unknown server $n" >&2; exit 2; }
    installed "$n" || { echo "$n is not installed: run scripts/thirdparty.sh setup $n" >&2; exit 1; }
    echo "$(venv_of "$n")/bin"
    ;;
  list) printf '%s\n' "${NAMES[@]}" ;;
  *) echo "usage: $0 setup [NAME...] | bin NAME | list" >&2; exit 2 ;;
esac
