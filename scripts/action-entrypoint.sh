#!/usr/bin/env bash
# Entry point of the perfgate Docker action (action.yml, Dockerfile): turns the action's inputs,
# passed as PERFGATE_* environment variables, into one perfgate command line, and applies
# `fail-on` to its exit code. No eval: extra args are split on whitespace, never interpreted.
set -euo pipefail
set -f # no globbing of the split inputs

cmd="${PERFGATE_COMMAND:-check}"
case "$cmd" in
  check | bless | validate) ;;
  *) echo "::error title=perfgate::input command must be check, bless or validate, not '${cmd//[^A-Za-z0-9_.-]/?}'"; exit 2 ;;
esac
fail_on="${PERFGATE_FAIL_ON:-fail}"
case "$fail_on" in
  fail | warn | never) ;;
  *) echo "::error title=perfgate::input fail-on must be fail, warn or never"; exit 2 ;;
esac

args=("$cmd")
while IFS= read -r line; do
  line="${line#"${line%%[![:space:]]*}"}"
  line="${line%"${line##*[![:space:]]}"}"
  [ -n "$line" ] && args+=(--scenarios "$line")
done <<<"${PERFGATE_SCENARIOS:-scenarios}"
if [ "$cmd" != validate ]; then
  args+=(--baselines "${PERFGATE_BASELINES:-baselines}")
fi
json=perfgate-results.json
md=perfgate-report.md
if [ "$cmd" = check ]; then
  args+=(--output "$json" --markdown "$md")
  [ "${PERFGATE_COMMENT:-true}" = true ] || args+=(--no-comment)
fi
read -r -a extra <<<"${PERFGATE_ARGS:-}"
args+=("${extra[@]}")

rc=0
perfgate "${args[@]}" || rc=$?
if [ "$cmd" = check ]; then
  case "$fail_on:$rc" in
    never:1) echo "perfgate: fail-on: never, so the regression does not fail this step"; rc=0 ;;
    warn:0)
      if grep -q '^  "verdict": "WARN",$' "$json" 2>/dev/null; then
        echo "perfgate: fail-on: warn, and the verdict is WARN"; rc=1
      fi ;;
  esac
fi
exit "$rc"
