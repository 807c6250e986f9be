#!/usr/bin/env bash
# Repeated `perfgate check` against an unchanged real llama.cpp server (issues 4, 14): bless once
# with the default runs (or K), then check N times in a row and count FAILs, printing the tau each
# baseline stored and the widened tolerances each check used.
#   scripts/repeat-check.sh [N] [K]
#   NEIGHBOUR=1 scripts/repeat-check.sh   also starts and stops a CPU-bound process (`yes`) at
#                                         random, 5-20 s on, 5-20 s off, during bless and checks;
#                                         every neighbour is bounded by `timeout` and killed on exit
# Needs scripts/realserver.sh setup first. Starts and stops its own llama-server (1 thread).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-10}"; K="${2:-}"
PG="${PERFGATE_BIN:-target/release/perfgate}"
[ -x "$PG" ] || cargo build --release --locked
PG="$(realpath "$PG")"
work="$(mktemp -d)"
npid=""
cleanup() {
  [ -n "$npid" ] && kill "$npid" 2>/dev/null || true
  pkill -f "timeout [0-9]+ yes" 2>/dev/null || true
  kill "${pid:-0}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
pid="$(THREADS=1 bash scripts/realserver.sh start "$port" | tail -1)"
if [ "${NEIGHBOUR:-0}" = 1 ]; then
  # At most 2 hours of neighbours; each `yes` lives 5-20 s.
  ( end=$(( $(date +%s) + 7200 ))
    while [ "$(date +%s)" -lt "$end" ]; do
      sleep $(( 5 + RANDOM % 16 ))
      on=$(( 5 + RANDOM % 16 ))
      echo "  [neighbour: CPU-bound for ${on}s at $(date -u +%H:%M:%S)]" >&2
      timeout "$on" yes >/dev/null || true
    done ) &
  npid=$!
fi
mkdir -p "$work/scenarios"
cat > "$work/scenarios/llama.yaml" <<YAML
defaults:
  endpoint: {base_url: "http://127.0.0.1:$port/v1", model: gemma-3-270m}
  request: {prompt: "Write a short story about a lighthouse keeper.", max_tokens: 48, temperature: 0, ignore_eos: true}
  load: {samples: 20, warmup: 2}
scenarios:
  - name: llama-c1
  - name: llama-c2
    load: {concurrency: 2}
YAML
(cd "$work" && "$PG" bless ${K:+--runs "$K"})
fails=0
for i in $(seq 1 "$N"); do
  set +e
  out="$(cd "$work" && "$PG" check --output "r$i.json" 2>/dev/null)"; code=$?
  set -e
  line="$(echo "$out" | grep '^perfgate: ' | head -1)"
  echo "check $i: exit $code  $line  (load average $(cut -d' ' -f1 /proc/loadavg))"
  python3 - "$work/r$i.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for s in r["scenarios"]:
    for c in s["checks"]:
        if c.get("metric") and c["kind"] == {"quantile": "p50"} or c["verdict"] in ("FAIL", "WARN"):
            ci = c.get("ci") or [None, None]
            fmt = lambda x: "-" if x is None else f"{(x - 1) * 100:+.1f}%"
            widened = f" (widened from {c['fail_configured']*100:.0f}%, tau {c['tau']*100:.1f}%)" if c.get("fail_configured") is not None else ""
            kind = c["kind"]["quantile"].upper() if isinstance(c["kind"], dict) else c["kind"]
            print(f"    {s['name']} {c.get('metric','errors')} {kind}: {fmt(c.get('ratio'))} [{fmt(ci[0])}, {fmt(ci[1])}] fail tolerance {c['fail']*100:.1f}%{widened} -> {c['verdict']}")
PY
  [ "$code" = 1 ] && fails=$((fails + 1))
done
echo "repeat-check: $N checks against an unchanged llama-server, baseline from ${K:-the default} runs: $fails FAIL"
