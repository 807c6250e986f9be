#!/usr/bin/env bash
# Installs a prebuilt perfgate: the first step of the composite action (action.yml), also usable
# on its own. Picks the release asset for the runner's OS and architecture, checks it against the
# release's SHA256SUMS before anything from it runs, unpacks it into the runner's tool cache and
# puts it on PATH for the job's later steps.
#
# Which release (first that applies):
#   PERFGATE_VERSION      a release tag such as v0.2.0 (the action's `version` input); missing: exit 4
#   PERFGATE_ACTION_REF   the action's ref (github.action_ref): a release tag names that release; a
#                         commit SHA is the release named by the action's Cargo.toml when that
#                         release's COMMIT asset is this SHA. Any other ref, or a tag with no
#                         release, is built with `cargo install --locked --git` (minutes, with a
#                         ::notice:: saying so).
#   neither               a local action (`uses: ./`) is built from its own checkout with cargo
# Other settings (all optional):
#   PERFGATE_ACTION_REPOSITORY  OWNER/NAME the releases belong to (github.action_repository;
#                               default GITHUB_REPOSITORY)
#   PERFGATE_ACTION_PATH        the action's checkout (default GITHUB_ACTION_PATH, else this
#                               script's repository)
#   PERFGATE_OS, PERFGATE_ARCH  override RUNNER_OS (Linux, macOS, Windows) and RUNNER_ARCH (X64,
#                               ARM64, X86, ARM); without either, uname decides
#   PERFGATE_DOWNLOAD_BASE      where the releases are: an asset is BASE/TAG/NAME (default
#                               GITHUB_SERVER_URL/OWNER/NAME/releases/download; file:// works)
#   RUNNER_TOOL_CACHE           cache root: perfgate/VERSION/ARCH (default ~/.cache/perfgate/tools)
#   PERFGATE_RETRIES            curl --retry count for each download (default 4: 1+2+4+8 s backoff)
# Outputs: `path`, `dir` and `version` lines to $GITHUB_OUTPUT; the directory to $GITHUB_PATH.
# Limits: SHA256SUMS and COMMIT at most 64 KiB, the archive at most 64 MiB, the binary in it at
# most 256 MiB; a larger download is cut off at the limit and refused (a broken or hostile mirror
# cannot fill the disk). The archive's members must all be regular files or directories under
# relative paths without `..`: a link, a device or an escaping path is refused before extraction.
# Exit codes: 0 installed; 1 a download, checksum, archive or build failure; 2 invalid input;
#             3 no build for this OS/architecture; 4 no such release.
set -euo pipefail

ERR_DOWNLOAD=1
ERR_INPUT=2
ERR_PLATFORM=3
ERR_NO_RELEASE=4
MAX_LIST_BYTES=65536                    # SHA256SUMS, COMMIT: a few lines each
MAX_ASSET_BYTES=$((64 * 1024 * 1024))   # the .tar.gz (the dist build's is about 4 MB)
MAX_BINARY_BYTES=$((256 * 1024 * 1024)) # the binary unpacked from it (about 9 MB)
# The cargo fallback's package (Cargo.toml's name; crates.io's `perfgate` is another project). Its
# binary, and the release archives, are named perfgate.
PACKAGE=llm-perfgate

say() { echo "perfgate install: $*"; }
die() {
  local code=$1
  shift
  echo "::error title=perfgate install::$*"
  exit "$code"
}
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
is_version() { printf '%s' "$1" | grep -Eq '^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'; }
is_sha() { printf '%s' "$1" | grep -Eq '^[0-9a-f]{40}$'; }
# Refs, repository names and URLs end up in messages and command lines: refuse anything unusual.
is_plain() { printf '%s' "$1" | grep -Eq '^[A-Za-z0-9._/+:@-]+$'; }
now_ms() { # GNU date has %N; BSD date (macOS) prints it literally, so whole seconds there
  local t
  t=$(date +%s%N)
  case "$t" in *N) echo $(($(date +%s) * 1000)) ;; *) echo "${t%??????}" ;; esac
}
t0=$(now_ms)

# --- platform -----------------------------------------------------------------------------------
os="${PERFGATE_OS:-${RUNNER_OS:-}}"
arch="${PERFGATE_ARCH:-${RUNNER_ARCH:-}}"
if [ -z "$os" ]; then
  case "$(uname -s)" in
    Linux) os=Linux ;;
    Darwin) os=macOS ;;
    MINGW* | MSYS* | CYGWIN*) os=Windows ;;
    *) os="$(uname -s)" ;;
  esac
fi
if [ -z "$arch" ]; then
  case "$(uname -m)" in
    x86_64 | amd64) arch=X64 ;;
    aarch64 | arm64) arch=ARM64 ;;
    *) arch="$(uname -m)" ;;
  esac
fi
if ! is_plain "$os" || ! is_plain "$arch"; then die "$ERR_INPUT" "unreadable OS or architecture name"; fi
# The targets .github/workflows/release.yml builds (tests/it/github_action.rs keeps the two in step).
case "$os/$arch" in
  Linux/X64) target=x86_64-unknown-linux-musl ;;
  Linux/ARM64) target=aarch64-unknown-linux-musl ;;
  macOS/X64) target=x86_64-apple-darwin ;;
  macOS/ARM64) target=aarch64-apple-darwin ;;
  Windows/*)
    die "$ERR_PLATFORM" "no perfgate build for $os/$arch: perfgate does not build for Windows yet (its Ctrl-C/SIGTERM handling is Unix-only); run the job on a Linux or macOS runner" ;;
  *)
    die "$ERR_PLATFORM" "no perfgate build for $os/$arch: there are builds for Linux (X64, ARM64) and macOS (X64, ARM64)" ;;
esac
arch_dir=$(lower "$arch")

# --- where things are ---------------------------------------------------------------------------
action_path="${PERFGATE_ACTION_PATH:-${GITHUB_ACTION_PATH:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}}"
repo="${PERFGATE_ACTION_REPOSITORY:-${GITHUB_REPOSITORY:-}}"
server="${GITHUB_SERVER_URL:-https://github.com}"
base="${PERFGATE_DOWNLOAD_BASE:-}"
if [ -z "$base" ] && [ -n "$repo" ]; then base="$server/$repo/releases/download"; fi
base="${base%/}"
for v in "$repo" "$server" "$base"; do
  [ -z "$v" ] || is_plain "$v" || die "$ERR_INPUT" "unreadable repository or download URL"
done
cache_root="${RUNNER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/perfgate/tools}/perfgate"
retries="${PERFGATE_RETRIES:-4}"
case "$retries" in '' | *[!0-9]*) die "$ERR_INPUT" "PERFGATE_RETRIES must be a number" ;; esac

stage=""
cleanup() { if [ -n "$stage" ]; then rm -rf "$stage"; fi; }
trap cleanup EXIT

# capped BYTES COMMAND...: runs COMMAND with the files it writes limited to about BYTES (the
# kernel's file-size limit, ulimit -f in KiB, soft only): a write past it fails (EFBIG; SIGXFSZ is
# ignored so nothing dumps core), whatever the sender declared. The caller compares the size.
capped() {
  local kib=$((($1 + 1023) / 1024 + 1))
  shift
  (
    trap '' XFSZ
    ulimit -S -f "$kib" 2>/dev/null || true
    exec "$@"
  )
}

size_of() { wc -c <"$1" | tr -d ' '; }

# fetch URL FILE LIMIT: 0 fetched; 4 not there (HTTP 404/410, or no such file://); 1 anything
# else, after curl's retries (timeouts, refused connections, HTTP 408/429/5xx), with the reason
# printed. At most LIMIT bytes: --max-filesize refuses a larger declared length before anything
# is downloaded, and a response of no declared length (chunked, or read to the close) is cut
# off by the file-size limit ([capped]) once it passes LIMIT.
fetch() {
  local url=$1 out=$2 limit=$3 code rc=0
  code=$(capped "$limit" curl --silent --show-error --location --fail --proto '=https,http,file' \
    --retry "$retries" --retry-connrefused --retry-max-time 120 \
    --connect-timeout 15 --max-time 300 --max-filesize "$limit" \
    --output "$out" --write-out '%{http_code}' "$url") || rc=$?
  if [ "$rc" -eq 63 ] || { [ -f "$out" ] && [ "$(size_of "$out")" -gt "$limit" ]; }; then
    rm -f "$out"
    say "download refused: $url is larger than $limit bytes (a broken or hostile mirror?); stopped at the limit"
    return 1
  fi
  [ "$rc" -eq 0 ] && return 0
  rm -f "$out"
  case "$rc:$code" in
    22:404 | 22:410 | 37:*) return 4 ;;
  esac
  say "download failed: $url (curl exit $rc, HTTP ${code:-none})"
  return 1
}

# check_archive ARCHIVE MEMBER: refuses (exit 1) an archive with any member that is not a regular
# file or a directory (a symlink or hard link could point the installed binary, or the chmod
# after it, at any file; a device or FIFO is no binary), or with an absolute path or a `..`
# component, and one whose MEMBER is not a regular file. Read from the listing, before anything
# is extracted. A refused member's name is printed with unusual characters replaced by `?`.
check_archive() {
  local archive=$1 member=$2 listing names bad
  listing=$(tar -tvzf "$archive" 2>/dev/null) || die "$ERR_DOWNLOAD" "${archive##*/} is not a readable .tar.gz"
  names=$(tar -tzf "$archive" 2>/dev/null) || die "$ERR_DOWNLOAD" "${archive##*/} is not a readable .tar.gz"
  # ls-style lines: the first character is the type (- file, d directory, l symlink, h hard
  # link, c/b devices, p FIFO); GNU and BSD tar write " -> " or " link to " after a link's name.
  bad=$(printf '%s\n' "$listing" | awk 'NF && (!/^[-d]/ || / -> | link to /) { print; exit }')
  [ -z "$bad" ] || die "$ERR_DOWNLOAD" "${archive##*/} holds a member that is not a regular file or directory (${bad//[^A-Za-z0-9_.\/: -]/?}): refusing it (nothing was installed)"
  bad=$(printf '%s\n' "$names" | awk '/^\// || /(^|\/)\.\.(\/|$)/ { print; exit }')
  [ -z "$bad" ] || die "$ERR_DOWNLOAD" "${archive##*/} holds a member outside its directory (${bad//[^A-Za-z0-9_.\/: -]/?}): refusing it (nothing was installed)"
  printf '%s\n' "$listing" | awk -v m="$member" '/^-/ && substr($0, length($0) - length(m) + 1) == m && substr($0, length($0) - length(m), 1) == " " { f = 1 } END { exit !f }' \
    || die "$ERR_DOWNLOAD" "${archive##*/} has no regular file $member"
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d ' ' -f 1
  else
    shasum -a 256 "$1" | cut -d ' ' -f 1
  fi
}

# Puts DIR on PATH for the job's later steps and writes the step outputs.
publish() {
  local dir=$1 version=$2
  local bin="$dir/perfgate"
  local ran
  ran=$("$bin" --version 2>&1) || die "$ERR_DOWNLOAD" "$bin does not run on $os/$arch: $ran"
  if [ -n "${GITHUB_PATH:-}" ]; then echo "$dir" >>"$GITHUB_PATH"; fi
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
      echo "path=$bin"
      echo "dir=$dir"
      echo "version=$version"
    } >>"$GITHUB_OUTPUT"
  fi
  say "$ran ready at $bin ($(($(now_ms) - t0)) ms)"
}

# A cache entry is DIR plus DIR.complete holding the binary's SHA-256: a hit re-hashes it (a few
# ms), so a damaged or tampered entry is installed afresh instead of run.
cache_hit() {
  local dir=$1
  [ -f "$dir.complete" ] && [ -x "$dir/perfgate" ] || return 1
  [ "$(sha256_of "$dir/perfgate")" = "$(cat "$dir.complete")" ] && return 0
  say "cached $dir/perfgate does not match its recorded checksum; installing it again"
  rm -rf "$dir" "$dir.complete"
  return 1
}

# Moves the verified binary STAGED into the cache entry DIR (same file system: a rename).
commit_to_cache() {
  local staged=$1 dir=$2
  rm -rf "$dir" "$dir.complete"
  mkdir -p "$(dirname "$dir")"
  mkdir "$stage/entry"
  mv "$staged" "$stage/entry/perfgate"
  chmod 755 "$stage/entry/perfgate"
  mv "$stage/entry" "$dir"
  sha256_of "$dir/perfgate" >"$dir.complete"
}

new_stage() {
  mkdir -p "$cache_root"
  stage=$(mktemp -d "$cache_root/.stage.XXXXXX")
}

# --- the prebuilt release -----------------------------------------------------------------------
# install_release TAG STRICT: installs it, or sets no_release=1 when there is no such release
# (STRICT=1: exits 4 instead). Every failure exits; results go through globals, never through a
# return status, since `f || ...` would switch `set -e` off inside f.
no_release=0
install_release() {
  local tag=$1 strict=$2
  local version="${tag#v}"
  local dir="$cache_root/$version/$arch_dir"
  if cache_hit "$dir"; then
    say "perfgate $tag for $target from the tool cache ($dir)"
    publish "$dir" "$tag"
    return 0
  fi
  [ -n "$base" ] || die "$ERR_INPUT" "no download location: set PERFGATE_ACTION_REPOSITORY (OWNER/NAME) or PERFGATE_DOWNLOAD_BASE"
  local asset="perfgate-$tag-$target.tar.gz"
  new_stage
  local rc=0
  fetch "$base/$tag/SHA256SUMS" "$stage/SHA256SUMS" "$MAX_LIST_BYTES" || rc=$?
  if [ "$rc" -eq 4 ]; then
    # No checksums: either no such release, or a release this installer must not trust.
    rc=0
    fetch "$base/$tag/$asset" "$stage/$asset" "$MAX_ASSET_BYTES" || rc=$?
    if [ "$rc" -eq 0 ]; then
      die "$ERR_DOWNLOAD" "release $tag has $asset but no SHA256SUMS: refusing to install a binary that cannot be verified"
    elif [ "$rc" -eq 4 ]; then
      [ "$strict" = 1 ] && die "$ERR_NO_RELEASE" "no perfgate release $tag at $base/$tag (neither SHA256SUMS nor $asset): check the version input"
      no_release=1
      return 0
    fi
    die "$ERR_DOWNLOAD" "could not download $base/$tag/$asset"
  elif [ "$rc" -ne 0 ]; then
    die "$ERR_DOWNLOAD" "could not download $base/$tag/SHA256SUMS"
  fi
  # "HASH  NAME" (text mode) or "HASH *NAME" (binary mode), as sha256sum writes them.
  local expected
  expected=$(awk -v n="$asset" '($2 == n || $2 == "*" n) && $1 ~ /^[0-9a-fA-F]+$/ && length($1) == 64 { print tolower($1); exit }' "$stage/SHA256SUMS")
  if [ -z "$expected" ]; then
    local have
    have=$(awk -v p="perfgate-$tag-" '{ n = $2; sub(/^\*/, "", n) }
      index(n, p) == 1 && n ~ /\.tar\.gz$/ { printf "%s ", substr(n, length(p) + 1, length(n) - length(p) - 7) }' "$stage/SHA256SUMS")
    have="${have% }"
    die "$ERR_PLATFORM" "release $tag has no build for $os/$arch ($target); it has: ${have:-none}"
  fi
  say "downloading $base/$tag/$asset"
  rc=0
  fetch "$base/$tag/$asset" "$stage/$asset" "$MAX_ASSET_BYTES" || rc=$?
  [ "$rc" -eq 0 ] || die "$ERR_DOWNLOAD" "could not download $base/$tag/$asset, which SHA256SUMS lists"
  local actual
  actual=$(sha256_of "$stage/$asset")
  if [ "$actual" != "$expected" ]; then
    rm -f "$stage/$asset"
    die "$ERR_DOWNLOAD" "checksum mismatch for $asset: SHA256SUMS says $expected, the download is $actual; refusing to run it (nothing was installed)"
  fi
  say "sha256 $actual matches SHA256SUMS"
  # Only the one expected member is extracted, a regular file checked in the listing first:
  # nothing else in the archive reaches the disk, and no link is followed.
  local member="perfgate-$tag-$target/perfgate"
  check_archive "$stage/$asset" "$member"
  capped "$MAX_BINARY_BYTES" tar -xzf "$stage/$asset" -C "$stage" "$member" 2>/dev/null \
    || die "$ERR_DOWNLOAD" "could not extract $member from $asset (missing, or larger than $MAX_BINARY_BYTES bytes)"
  if [ ! -f "$stage/$member" ] || [ -L "$stage/$member" ] || [ "$(size_of "$stage/$member")" -gt "$MAX_BINARY_BYTES" ]; then
    die "$ERR_DOWNLOAD" "$member in $asset is not a regular file of at most $MAX_BINARY_BYTES bytes"
  fi
  commit_to_cache "$stage/$member" "$dir"
  publish "$dir" "$tag"
}

# --- the cargo fallback -------------------------------------------------------------------------
# build_with_cargo WHAT LABEL CACHE_KEY ARGS...: `cargo install --locked ARGS llm-perfgate`, cached
# under CACHE_KEY when it names one commit (empty: not cached); LABEL is the `version` output.
build_with_cargo() {
  local what=$1 label=$2 key=$3
  shift 3
  local dir=""
  if [ -n "$key" ]; then
    dir="$cache_root/$key/$arch_dir"
    if cache_hit "$dir"; then
      say "perfgate built from $what, from the tool cache ($dir)"
      publish "$dir" "$label"
      return 0
    fi
  fi
  echo "::notice title=perfgate install::no prebuilt perfgate for $what: building it with cargo install --locked $*, which takes about 5-6 minutes on a 2-core runner, in every job that uses the action. Pin the action to a release tag, or set its version input, to install a prebuilt, checksum-verified binary in seconds."
  command -v cargo >/dev/null 2>&1 \
    || die "$ERR_DOWNLOAD" "cargo is not on PATH, so perfgate cannot be built from $what; pin the action to a release tag or set the version input"
  new_stage
  cargo install --locked --root "$stage/root" "$@" "$PACKAGE" \
    || die "$ERR_DOWNLOAD" "cargo install --locked $* $PACKAGE failed"
  [ -x "$stage/root/bin/perfgate" ] || die "$ERR_DOWNLOAD" "cargo install left no $stage/root/bin/perfgate"
  if [ -z "$dir" ]; then dir="${RUNNER_TEMP:-$cache_root}/perfgate-build-$$"; fi
  commit_to_cache "$stage/root/bin/perfgate" "$dir"
  publish "$dir" "$label"
}

cargo_version() {
  [ -f "$action_path/Cargo.toml" ] || return 0
  sed -n 's/^version = "\([^"]*\)"$/\1/p' "$action_path/Cargo.toml" | head -n 1
}

# --- which release ------------------------------------------------------------------------------
requested="${PERFGATE_VERSION:-}"
ref="${PERFGATE_ACTION_REF:-}"
if [ -n "$requested" ]; then
  is_version "$requested" \
    || die "$ERR_INPUT" "input version must be a release tag such as v0.2.0, not '${requested//[^A-Za-z0-9_.-]/?}'"
  install_release "v${requested#v}" 1
elif [ -n "$ref" ]; then
  is_plain "$ref" || die "$ERR_INPUT" "unreadable action ref"
  [ -n "$repo" ] || die "$ERR_INPUT" "the action's repository is unknown: set PERFGATE_ACTION_REPOSITORY (OWNER/NAME)"
  git="$server/$repo"
  if is_version "$ref"; then
    install_release "v${ref#v}" 0
    if [ "$no_release" = 1 ]; then
      build_with_cargo "tag $ref (no release $ref)" "$ref" "" --git "$git" --tag "$ref"
    fi
  elif is_sha "$ref"; then
    # A commit pinned by SHA is the release named by its own Cargo.toml if that release was built
    # from this very commit (the release's COMMIT asset). Both answers are kept in the tool cache,
    # so a warm runner asks nothing: refs/SHA names the release, git-SHA holds a build.
    known="$cache_root/refs/$ref"
    version=$(cargo_version)
    released=""
    if [ -f "$known" ] && is_version "$(cat "$known")"; then
      version=$(cat "$known")
      released=$ref
    elif [ -f "$cache_root/git-$ref/$arch_dir.complete" ]; then
      released=""
    elif [ -n "$version" ] && is_version "$version" && [ -n "$base" ]; then
      new_stage
      rc=0
      fetch "$base/v$version/COMMIT" "$stage/COMMIT" "$MAX_LIST_BYTES" || rc=$?
      if [ "$rc" -eq 0 ]; then released=$(tr -d '[:space:]' <"$stage/COMMIT"); fi
      rm -rf "$stage"
      stage=""
    fi
    if [ "$released" = "$ref" ]; then
      say "action ref $ref is the commit of release v$version"
      mkdir -p "$cache_root/refs"
      echo "$version" >"$known"
      install_release "v$version" 1
    else
      build_with_cargo "commit $ref (not a release)" "$ref" "git-$ref" --git "$git" --rev "$ref"
    fi
  else
    case "$ref" in
      v[0-9]*) build_with_cargo "tag $ref (not a release)" "$ref" "" --git "$git" --tag "$ref" ;;
      *) build_with_cargo "branch $ref (not a release)" "$ref" "" --git "$git" --branch "$ref" ;;
    esac
  fi
elif [ -f "$action_path/Cargo.toml" ]; then
  build_with_cargo "the local action's checkout ($action_path)" "local" "" --path "$action_path"
else
  die "$ERR_INPUT" "no version to install: set PERFGATE_VERSION (e.g. v0.2.0)"
fi
