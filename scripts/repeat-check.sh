#!/usr/bin/env bash
# Repeated `perfgate check` against an unchanged real llama.cpp server (issue 4): bless once
# (--runs K), then check N times in a row and count FAILs. Usage: scripts/repeat-check.sh [N] [K]
# Needs scripts/realserver.sh setup first. Starts and stops its own llama-server (1 thread).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-10}"; K="${2:-3}"
PG="${PERFGATE_BIN:-target/release/perfgate}"
[ -x "$PG" ] || cargo build --release --locked
PG="$(realpath "$PG")"
work="$(mktemp -d)"; trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
pid="$(THREADS=1 bash scripts/realserver.sh start "$port" | tail -1)"
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
(cd "$work" && "$PG" bless --runs "$K" >/dev/null)
fails=0
for i in $(seq 1 "$N"); do
  set +e
  out="$(cd "$work" && "$PG" check 2>/dev/null)"; code=$?
  set -e
  line="$(echo "$out" | grep '^perfgate: ' | head -1)"
  echo "check $i: exit $code  $line  (load average $(cut -d' ' -f1 /proc/loadavg))"
  echo "$out" | grep -E '^   (FAIL|WARN) ' | sed 's/^/    /' || true
  [ "$code" = 1 ] && fails=$((fails + 1))
done
echo "repeat-check: $N checks against an unchanged llama-server, baseline from $K runs: $fails FAIL"
[ "$fails" = 0 ]
