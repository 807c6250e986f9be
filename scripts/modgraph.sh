#!/usr/bin/env bash
# The module graph of src/: which top-level module uses which (`crate::x` paths in code, comments
# and doc links ignored, `#[cfg(test)]` code included), then two checks:
#   - no cycle (tsort);
#   - no upward import: every module sits in a layer (LAYERS below, the data flow of
#     docs/architecture.md) and uses only modules of lower layers, or of its own layer;
#   - no command uses another: the modules of the commands layer (COMMANDS) use none of each
#     other (what two commands share lives below them, e.g. in assess).
# Prints the graph and exits 1 on a cycle, an upward import, a command using another command or a
# module missing from LAYERS.
# Usage: scripts/modgraph.sh [--quiet]
set -euo pipefail
cd "$(dirname "$0")/.."

# The commands: a layer whose modules may not use each other.
COMMANDS="check bless calibrate init ab rerender nights validate"

# Lowest first. A module may use modules in its own or lower layers.
LAYERS=(
  "exit units clock fsutil cancel redact hint machine stats api rx_stamp sim synthetic_prompt seeded limits tls wire speculative structured output_text"  # leaves: no crate imports of their own
  "config"                                           # YAML -> validated scenarios
  "record summary cache"                             # per-request records, metric and prefix-cache summaries
  "client"                                           # HTTP, SSE decoding, per-request timing
  "runner execute server prompt_fit import"          # schedules and sessions -> RunOutput; the server under test; another tool's export -> RunOutput
  "baseline gate"                                    # baseline files; the statistical gate
  "verdict"                                          # overall verdict and exit code
  "results"                                          # the results model every renderer reads
  "report github history"                             # renderers; the PR comment; the nightly history store
  "assess"                                           # one scenario judged against a reference
  "compare deliver"                                  # runs judged against the committed baselines and nightly history; reports delivered
  "$COMMANDS"                                        # commands (none uses another)
  "cli"                                              # argument parsing and dispatch
)

layer_of() {
  local i=0
  for l in "${LAYERS[@]}"; do
    for m in $l; do [[ $m == "$1" ]] && { echo $i; return; }; done
    i=$((i + 1))
  done
  echo -1
}

edges=$(
  for f in $(find src -name '*.rs' | sort); do
    m=$(echo "$f" | sed -E 's#^src/##; s#/.*##; s#\.rs$##')
    [[ $m == lib || $m == main ]] && continue
    perl -ne 's#//.*##; print' "$f" \
      | grep -oE 'crate::(\{[^}]*\}|[a-z_0-9]+)' \
      | sed -E 's/crate:://' | tr -d '{}' | tr ',' '\n' \
      | sed -E 's/^ *//; s/::.*//' | grep -E '^[a-z_0-9]+$' | sort -u \
      | sed "s/^/$m /" || true
  done | awk '$1 != $2' | sort -u
)

status=0
[[ ${1:-} == --quiet ]] || {
  echo "module graph (module: modules it uses)"
  modules=$(find src -maxdepth 1 -name '*.rs' -o -maxdepth 1 -mindepth 1 -type d | sed -E 's#^src/##; s#\.rs$##' | grep -vE '^(lib|main)$' | sort -u)
  for m in $modules; do
    printf '  %-10s L%-2s: %s\n' "$m" "$(layer_of "$m")" "$(echo "$edges" | awk -v m="$m" '$1 == m {printf "%s ", $2}')"
  done
}

if ! echo "$edges" | tsort >/dev/null 2>/tmp/modgraph.$$; then :; fi
if [[ -s /tmp/modgraph.$$ ]]; then
  echo "CYCLE:"; sed 's/^/  /' /tmp/modgraph.$$; status=1
else
  echo "cycles: none"
fi
rm -f /tmp/modgraph.$$

upward=0
while read -r from to; do
  [[ -z $from ]] && continue
  lf=$(layer_of "$from"); lt=$(layer_of "$to")
  if [[ $lf == -1 || $lt == -1 ]]; then
    echo "NOT IN LAYERS: $from -> $to"; status=1; upward=1
  elif ((lt > lf)); then
    echo "UPWARD: $from (L$lf) uses $to (L$lt)"; status=1; upward=1
  fi
done <<<"$edges"
((upward)) || echo "upward imports: none"

sideways=0
while read -r from to; do
  [[ -z $from ]] && continue
  if [[ " $COMMANDS " == *" $from "* && " $COMMANDS " == *" $to "* ]]; then
    echo "COMMAND USES COMMAND: $from -> $to (move what they share below the commands)"; status=1; sideways=1
  fi
done <<<"$edges"
((sideways)) || echo "commands using commands: none"
exit $status
