#!/usr/bin/env bash
# The run step of the perfgate composite action (action.yml), on the runner's host after
# scripts/install.sh: turns the action's inputs, passed as PERFGATE_* environment variables (never
# interpolated into a script), into one perfgate command line, and applies `fail-on` (`warn` as
# perfgate's own --fail-on, `never` to perfgate's exit code). No eval: extra args are split on whitespace (blanks and line breaks), never interpreted. PERFGATE_BIN is the binary
# the install step verified (default: perfgate on PATH). Bash 3.2 compatible (macOS runners).
set -euo pipefail
set -f # no globbing of the split inputs

cmd="${PERFGATE_COMMAND:-check}"
case "$cmd" in
  check | bless | validate) ;;
  ab) echo "::error title=perfgate::input command must be check, bless or validate: run \`perfgate ab\` in a step of its own after this action installed perfgate (examples/workflows/perfgate-ab.yml)"; exit 2 ;;
  *) echo "::error title=perfgate::input command must be check, bless or validate, not '${cmd//[^A-Za-z0-9_.-]/?}'"; exit 2 ;;
esac
fail_on="${PERFGATE_FAIL_ON:-fail}"
case "$fail_on" in
  fail | warn | never) ;;
  *) echo "::error title=perfgate::input fail-on must be fail, warn or never"; exit 2 ;;
esac
allow_missing="${PERFGATE_ALLOW_MISSING_BASELINE:-false}"
case "$allow_missing" in
  true | false) ;;
  *) echo "::error title=perfgate::input allow-missing-baseline must be true or false"; exit 2 ;;
esac

history="${PERFGATE_HISTORY_BRANCH:-}"
case "$history" in
  "") ;;
  -* | *..* | *[!A-Za-z0-9._/-]*) echo "::error title=perfgate::input history must be a branch name ([A-Za-z0-9._/-]), e.g. perfgate-history"; exit 2 ;;
esac
unset PERFGATE_HISTORY # only the input decides

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
  [ "$allow_missing" = false ] || args+=(--allow-missing-baseline)
  [ -z "$history" ] || args+=(--history "$history")
elif [ "$allow_missing" = true ]; then
  echo "perfgate: allow-missing-baseline applies to check only; $cmd runs without it"
fi
# Every line of the input, not only the first: line breaks separate words like blanks (IFS),
# so a second line's `--id` is not dropped. read -a splits without globbing or expansion; -d ''
# reads to the end (it returns 1 there, hence || true).
extra=()
IFS=$' \t\n' read -r -d '' -a extra <<<"${PERFGATE_ARGS:-}" || true
# ${a[@]+...}: an empty array is "unbound" under set -u in bash before 4.4 (macOS ships 3.2).
args+=(${extra[@]+"${extra[@]}"})

# fail-on: warn is perfgate's own `check --fail-on warn`, given as PERFGATE_FAIL_ON (its
# environment variable, so the command line stays as it was): a WARN verdict exits 1, decided by
# perfgate from the verdict it holds. fail-on: never is this step's: a regression's exit 1 becomes
# 0 below. perfgate refuses a PERFGATE_FAIL_ON it does not know, so it never sees `never`.
if [ "$cmd" = check ] && [ "$fail_on" = warn ]; then
  export PERFGATE_FAIL_ON=warn
else
  unset PERFGATE_FAIL_ON
fi

rc=0
"${PERFGATE_BIN:-perfgate}" "${args[@]}" || rc=$?
if [ "$cmd" = check ] && [ "$fail_on:$rc" = never:1 ]; then
  echo "perfgate: fail-on: never, so the regression does not fail this step"; rc=0
fi
exit "$rc"
