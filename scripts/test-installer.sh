#!/usr/bin/env bash
# Tests of scripts/install.sh (the composite action's install step) without GitHub: fake release
# assets (tarballs holding a stand-in perfgate, SHA256SUMS, COMMIT) served from 127.0.0.1 by a small
# Python HTTP server that can answer 503 before it serves a file, and from file://.
# The stand-in binary records every run, so "nothing executed" is checked, not assumed.
# With a real perfgate binary (PERFGATE_INSTALLER_REAL_BIN, else the dist, release or debug build in
# $CARGO_TARGET_DIR if there is one) it also times the install of a real release asset, from start
# to a running `perfgate --version`.
# Prints `installer: N passed, M failed`; exits 1 when anything failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
INSTALL="$PWD/scripts/install.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/perfgate-installer-test.XXXXXX")
server_pid=""
sim_pid=""
stop() {
  local pid
  for pid in $server_pid $sim_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap stop EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
sha() { sha256sum "$1" | cut -d ' ' -f 1; }

REL="$work/releases"
TARGETS="x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin"
COMMIT_SHA=0123456789abcdef0123456789abcdef01234567
OTHER_SHA=89abcdef0123456789abcdef0123456789abcdef
RAN="$work/ran" # the stand-in perfgate appends a line here each time it runs

# release TAG [TARGETS...]: a release with the stand-in binary for each target, SHA256SUMS, COMMIT.
release() {
  local tag=$1
  shift
  local targets="${*:-$TARGETS}" t
  mkdir -p "$REL/$tag"
  for t in $targets; do
    local name="perfgate-$tag-$t"
    mkdir -p "$work/pkg/$name"
    printf '#!/bin/sh\necho "%s $*" >> "%s"\necho "perfgate %s (%s)"\n' "$t" "$RAN" "${tag#v}" "$t" >"$work/pkg/$name/perfgate"
    chmod 755 "$work/pkg/$name/perfgate"
    echo "not extracted" >"$work/pkg/$name/README.md"
    tar -C "$work/pkg" -czf "$REL/$tag/$name.tar.gz" "$name"
  done
  echo "$COMMIT_SHA" >"$REL/$tag/COMMIT"
  (cd "$REL/$tag" && sha256sum -- *.tar.gz COMMIT >SHA256SUMS)
}

release v0.1.0
release v0.2.0-badsum x86_64-unknown-linux-musl
# SHA256SUMS lists the hash of other bytes for the asset.
printf '%s  %s\n' "$(echo other bytes | sha256sum | cut -d ' ' -f 1)" \
  perfgate-v0.2.0-badsum-x86_64-unknown-linux-musl.tar.gz >"$REL/v0.2.0-badsum/SHA256SUMS"
release v0.2.1-nosums x86_64-unknown-linux-musl
rm "$REL/v0.2.1-nosums/SHA256SUMS"
release v0.2.2-linux x86_64-unknown-linux-musl
release v0.2.3-flaky x86_64-unknown-linux-musl
echo 2 >"$REL/v0.2.3-flaky/perfgate-v0.2.3-flaky-x86_64-unknown-linux-musl.tar.gz.fail503"
release v0.2.4-down x86_64-unknown-linux-musl
echo 100 >"$REL/v0.2.4-down/SHA256SUMS.fail503"

# Hostile archives (issue 26 finding 16), each listed in a valid SHA256SUMS: the binary a symlink
# (to /bin/echo, which "runs"; to a file outside the cache, which the old chmod 755 changed), a
# hard link, a member with `..`, a FIFO.
VICTIM="$work/victim"
echo "not perfgate" >"$VICTIM"
chmod 600 "$VICTIM"
# hostile TAG KIND: a release for x86_64 Linux whose archive is built by Python's tarfile.
hostile() {
  local tag=$1 kind=$2 name="perfgate-$1-x86_64-unknown-linux-musl"
  mkdir -p "$REL/$tag"
  python3 - "$REL/$tag/$name.tar.gz" "$name" "$kind" "$VICTIM" <<'PY'
import io, sys, tarfile
out, name, kind, victim = sys.argv[1:5]
def entry(n, t=tarfile.REGTYPE, data=b"", link=""):
    i = tarfile.TarInfo(n); i.type = t; i.mode = 0o755; i.linkname = link; i.size = len(data)
    return i, (io.BytesIO(data) if data else None)
binary = b"#!/bin/sh\necho perfgate 0.3.0\n"
with tarfile.open(out, "w:gz") as t:
    t.addfile(*entry(name, tarfile.DIRTYPE))
    if kind == "symlink-echo":
        t.addfile(*entry(name + "/perfgate", tarfile.SYMTYPE, link="/bin/echo"))
    elif kind == "symlink-out":
        t.addfile(*entry(name + "/perfgate", tarfile.SYMTYPE, link=victim))
    elif kind == "hardlink":
        t.addfile(*entry(name + "/real", data=binary))
        t.addfile(*entry(name + "/perfgate", tarfile.LNKTYPE, link=name + "/real"))
    elif kind == "dotdot":
        t.addfile(*entry(name + "/perfgate", data=binary))
        t.addfile(*entry(name + "/../../escaped", data=b"x"))
    elif kind == "fifo":
        t.addfile(*entry(name + "/perfgate", data=binary))
        t.addfile(*entry(name + "/pipe", tarfile.FIFOTYPE))
PY
  (cd "$REL/$tag" && sha256sum -- *.tar.gz >SHA256SUMS)
}
hostile v0.3.0-symecho symlink-echo
hostile v0.3.1-symout symlink-out
hostile v0.3.2-hardlink hardlink
hostile v0.3.3-dotdot dotdot
hostile v0.3.4-fifo fifo

# Downloads with no size limit (issue 26 finding 11): FILE.huge holding "MODE BYTES" serves BYTES
# of filler instead of FILE, MODE `chunked` (no declared length) or `length` (declared). The bytes
# the server managed to send are appended to $LOG.sent, so the cap is checked from its side.
release v0.4.0-hugesums x86_64-unknown-linux-musl
echo "chunked 10485760" >"$REL/v0.4.0-hugesums/SHA256SUMS.huge"
release v0.4.1-hugeasset x86_64-unknown-linux-musl
echo "chunked 209715200" >"$REL/v0.4.1-hugeasset/perfgate-v0.4.1-hugeasset-x86_64-unknown-linux-musl.tar.gz.huge"
release v0.4.2-declared x86_64-unknown-linux-musl
echo "length 209715200" >"$REL/v0.4.2-declared/perfgate-v0.4.2-declared-x86_64-unknown-linux-musl.tar.gz.huge"

# The server: files under $REL; FILE.fail503 holding N makes the first N GETs of FILE a 503;
# FILE.huge as above. Every request path is logged, so "downloads nothing" is checked from the
# server's side.
cat >"$work/server.py" <<'EOF'
import http.server, os, sys
root, portfile, log = sys.argv[1:4]
seen = {}
class H(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n")
        fail = os.path.join(root, self.path.lstrip("/") + ".fail503")
        if os.path.isfile(fail):
            n = seen.get(self.path, 0)
            seen[self.path] = n + 1
            if n < int(open(fail).read()):
                self.send_error(503)
                return
        huge = os.path.join(root, self.path.lstrip("/") + ".huge")
        if os.path.isfile(huge):
            mode, total = open(huge).read().split()
            self.huge(mode, int(total))
            return
        super().do_GET()
    def huge(self, mode, total):
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("Connection", "close")
        if mode == "length":
            self.send_header("Content-Length", str(total))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        block, sent = b"0123456789abcdef" * 4096, 0
        try:
            while sent < total:
                b = block[: total - sent]
                if mode == "length":
                    self.wfile.write(b)
                else:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
                sent += len(b)
            if mode != "length":
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        with open(log + ".sent", "a") as f:
            f.write("%s %d\n" % (self.path, sent))
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
EOF
LOG="$work/requests.log"
: >"$LOG"
timeout 600 python3 "$work/server.py" "$REL" "$work/port" "$LOG" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || { echo "installer: the test server did not start"; exit 1; }
BASE="http://127.0.0.1:$(cat "$work/port")"

# A stand-in cargo for the fallback: records its arguments, installs a stand-in perfgate.
mkdir -p "$work/fakecargo"
cat >"$work/fakecargo/cargo" <<EOF
#!/bin/sh
echo "\$*" >> "$work/cargo.log"
root=""
while [ \$# -gt 0 ]; do [ "\$1" = --root ] && root=\$2; shift; done
mkdir -p "\$root/bin"
printf '#!/bin/sh\necho "perfgate 0.1.0 (built by cargo)"\n' > "\$root/bin/perfgate"
chmod 755 "\$root/bin/perfgate"
EOF
chmod 755 "$work/fakecargo/cargo"
mkdir -p "$work/nocargo"
for tool in timeout bash sh curl tar gzip sha256sum awk sed grep tr cut head mktemp mkdir mv rm chmod cat dirname uname date; do
  ln -s "$(command -v "$tool")" "$work/nocargo/$tool"
done
# The package the cargo fallback must build: this repository's (crates.io's perfgate is another
# project's), with a binary named perfgate.
PACKAGE=$(sed -n 's/^name = "\([^"]*\)"$/\1/p' Cargo.toml | head -n 1)
# An action checkout whose Cargo.toml says 0.1.0 (the SHA-ref lookup reads it).
mkdir -p "$work/action"
printf '[package]\nname = "%s"\nversion = "0.1.0"\n' "$PACKAGE" >"$work/action/Cargo.toml"

# run NAME [VAR=VALUE...]: runs the installer with a fresh runner environment (tool cache, PATH and
# output files) unless CACHE is set; sets rc, out (stdout+stderr), gpath, gout, n_requests.
CACHE=""
run() {
  local name=$1
  shift
  local case_dir="$work/case-$name"
  mkdir -p "$case_dir"
  : >"$case_dir/path"
  : >"$case_dir/output"
  local before
  before=$(wc -l <"$LOG")
  rc=0
  out=$(env -i HOME="$work/home" PATH="$work/fakecargo:$PATH" TMPDIR="$work" \
    RUNNER_TOOL_CACHE="${CACHE:-$case_dir/toolcache}" RUNNER_TEMP="$case_dir" \
    GITHUB_PATH="$case_dir/path" GITHUB_OUTPUT="$case_dir/output" \
    PERFGATE_ACTION_REPOSITORY=octo/perfgate PERFGATE_ACTION_PATH="$work/action" \
    PERFGATE_DOWNLOAD_BASE="$BASE" PERFGATE_OS=Linux PERFGATE_ARCH=X64 PERFGATE_RETRIES=3 \
    "$@" timeout 120 bash "$INSTALL" 2>&1) || rc=$?
  gpath=$(cat "$case_dir/path")
  gout=$(cat "$case_dir/output")
  n_requests=$(($(wc -l <"$LOG") - before))
}
has() { case "$out" in *"$1"*) return 0 ;; esac; return 1; }
ran_count() { if [ -f "$RAN" ]; then wc -l <"$RAN" | tr -d ' '; else echo 0; fi; }
check() { # check NAME CONDITION-DESCRIPTION TEST...
  local name=$1 what=$2
  shift 2
  if "$@"; then ok "$name: $what"; else bad "$name: $what (exit $rc)"; printf '%s\n' "$out" | sed 's/^/     | /'; fi
}

# --- the right asset for each OS/arch -----------------------------------------------------------
for pair in Linux:X64:x86_64-unknown-linux-musl Linux:ARM64:aarch64-unknown-linux-musl \
  macOS:X64:x86_64-apple-darwin macOS:ARM64:aarch64-apple-darwin; do
  IFS=: read -r os arch target <<<"$pair"
  run "asset-$os-$arch" PERFGATE_VERSION=v0.1.0 PERFGATE_OS="$os" PERFGATE_ARCH="$arch"
  arch_l=$(printf '%s' "$arch" | tr '[:upper:]' '[:lower:]')
  dir="$work/case-asset-$os-$arch/toolcache/perfgate/0.1.0/$arch_l"
  check "$os/$arch" "installs $target into the tool cache, on GITHUB_PATH, with outputs" \
    test "$rc" = 0 -a "$gpath" = "$dir" -a -f "$dir.complete"
  check "$os/$arch" "the installed binary is the $target build" \
    test "$("$dir/perfgate" --version 2>/dev/null)" = "perfgate 0.1.0 ($target)"
  check "$os/$arch" "outputs path, dir and version" \
    test "$gout" = "path=$dir/perfgate"$'\n'"dir=$dir"$'\n'"version=v0.1.0"
done
check "archive" "only the binary is extracted from the archive" \
  test ! -e "$work/case-asset-Linux-X64/toolcache/perfgate/0.1.0/x64/README.md"

# --- a checksum mismatch refuses to run ---------------------------------------------------------
before_ran=$(ran_count)
run badsum PERFGATE_VERSION=v0.2.0-badsum
check badsum "exit 1 with a clear message" test "$rc" = 1
check badsum "message names the mismatch" has "::error title=perfgate install::checksum mismatch for perfgate-v0.2.0-badsum-x86_64-unknown-linux-musl.tar.gz"
check badsum "nothing on PATH, nothing in the cache, nothing executed" \
  test -z "$gpath" -a -z "$gout" -a ! -e "$work/case-badsum/toolcache/perfgate/0.2.0-badsum" -a "$(ran_count)" = "$before_ran"
check badsum "no partial download left behind" \
  test -z "$(find "$work/case-badsum/toolcache" -name '*.tar.gz' 2>/dev/null)"

# --- hostile archives: links, devices and escaping paths are refused -----------------------------
for case in symecho:v0.3.0-symecho symout:v0.3.1-symout hardlink:v0.3.2-hardlink; do
  name=${case%%:*}
  run "$name" PERFGATE_VERSION="${case#*:}"
  check "$name" "a link as the binary: exit 1, nothing on PATH or in the cache" \
    test "$rc" = 1 -a -z "$gpath" -a -z "$gout" -a ! -e "$work/case-$name/toolcache/perfgate/${case#*:v}"
  check "$name" "message says the member is not a regular file" has "holds a member that is not a regular file or directory"
done
check symout "the file the symlink points at keeps its mode (600, not chmod 755)" \
  test "$(stat -c %a "$VICTIM")" = 600 -a "$(cat "$VICTIM")" = "not perfgate"
run dotdot PERFGATE_VERSION=v0.3.3-dotdot
check dotdot "a member with .. : exit 1, nothing installed" test "$rc" = 1 -a -z "$gpath"
check dotdot "message says so" has "holds a member outside its directory"
check dotdot "nothing escaped" test ! -e "$work/case-dotdot/escaped" -a ! -e "$work/case-dotdot/toolcache/escaped"
run fifo PERFGATE_VERSION=v0.3.4-fifo
check fifo "a FIFO member: exit 1" test "$rc" = 1 -a -z "$gpath"
check fifo "message names the member" has "not a regular file or directory (p"

# --- downloads are capped ---------------------------------------------------------------------
sent() { awk -v p="$1" '$1 == p { s += $2 } END { print s + 0 }' "$LOG.sent" 2>/dev/null || echo 0; }
run hugesums PERFGATE_VERSION=v0.4.0-hugesums
# cut off before the whole 10 MiB: the server counts what the kernel took, and loopback socket
# buffers can take several MiB after the client stopped at 64 KiB (a 4 MiB bound failed in CI
# on a busy machine); the message below names the 64 KiB limit itself
check hugesums "a 10 MiB SHA256SUMS (chunked): exit 1, refused at 64 KiB" \
  test "$rc" = 1 -a -z "$gpath" -a "$(sent /v0.4.0-hugesums/SHA256SUMS)" -lt 10485760
check hugesums "message names the limit" has "download refused: $BASE/v0.4.0-hugesums/SHA256SUMS is larger than 65536 bytes"
run hugeasset PERFGATE_VERSION=v0.4.1-hugeasset
check hugeasset "a 200 MiB chunked archive: exit 1, cut off near 64 MiB" \
  test "$rc" = 1 -a -z "$gpath" -a "$(sent /v0.4.1-hugeasset/perfgate-v0.4.1-hugeasset-x86_64-unknown-linux-musl.tar.gz)" -lt 104857600
check hugeasset "message names the limit" has "is larger than 67108864 bytes"
check hugeasset "no partial download left behind" \
  test -z "$(find "$work/case-hugeasset/toolcache" -name '*.tar.gz' 2>/dev/null)"
run declared PERFGATE_VERSION=v0.4.2-declared
check declared "a declared 200 MiB archive: refused before downloading it" \
  test "$rc" = 1 -a "$(sent /v0.4.2-declared/perfgate-v0.4.2-declared-x86_64-unknown-linux-musl.tar.gz)" -lt 104857600
check declared "message names the limit" has "is larger than 67108864 bytes"

# --- no SHA256SUMS: refused ---------------------------------------------------------------------
run nosums PERFGATE_VERSION=v0.2.1-nosums
check nosums "exit 1: an unverifiable binary is refused" test "$rc" = 1 -a -z "$gpath"
check nosums "message says SHA256SUMS is missing" has "no SHA256SUMS: refusing"
check nosums "nothing executed" test "$(ran_count)" = "$before_ran"

# --- unsupported platforms ----------------------------------------------------------------------
run x86 PERFGATE_VERSION=v0.1.0 PERFGATE_ARCH=X86
check "Linux/X86" "exit 3 naming the platform" test "$rc" = 3
check "Linux/X86" "message names Linux/X86" has "no perfgate build for Linux/X86"
run windows PERFGATE_VERSION=v0.1.0 PERFGATE_OS=Windows
check "Windows/X64" "exit 3 with the reason" test "$rc" = 3
check "Windows/X64" "message says Windows does not build" has "does not build for Windows"
run freebsd PERFGATE_VERSION=v0.1.0 PERFGATE_OS=FreeBSD
check "FreeBSD/X64" "exit 3" test "$rc" = 3
run notinrelease PERFGATE_VERSION=v0.2.2-linux PERFGATE_OS=macOS PERFGATE_ARCH=ARM64
check "macOS/ARM64 missing" "exit 3 when the release lacks this platform's asset" test "$rc" = 3
check "macOS/ARM64 missing" "message names the target and what the release has" \
  has "release v0.2.2-linux has no build for macOS/ARM64 (aarch64-apple-darwin); it has: x86_64-unknown-linux-musl"

# --- no such release ----------------------------------------------------------------------------
: >"$work/cargo.log"
run norelease PERFGATE_VERSION=v9.9.9
check norelease "an explicit version with no release: exit 4" test "$rc" = 4
check norelease "message names the release" has "no perfgate release v9.9.9"
check norelease "no cargo fallback for an explicit version" test ! -s "$work/cargo.log"
run badversion "PERFGATE_VERSION=latest; rm -rf /"
check badversion "a version that is not a tag: exit 2" test "$rc" = 2

# --- refs: a release tag, a release's commit, and the cargo fallback ----------------------------
run reftag PERFGATE_ACTION_REF=v0.1.0
check "ref v0.1.0" "a release tag as the action ref installs that release" \
  test "$rc" = 0 -a "$gpath" = "$work/case-reftag/toolcache/perfgate/0.1.0/x64"
run refsha PERFGATE_ACTION_REF="$COMMIT_SHA"
check "ref = release commit" "the release built from the pinned SHA is installed, not built" \
  test "$rc" = 0 -a "$gpath" = "$work/case-refsha/toolcache/perfgate/0.1.0/x64" -a ! -s "$work/cargo.log"
run fallback PERFGATE_ACTION_REF="$OTHER_SHA"
check "ref = other commit" "falls back to cargo install, with a notice of the cost" \
  has "::notice title=perfgate install::no prebuilt perfgate for commit $OTHER_SHA (not a release): building it with cargo install --locked"
check "ref = other commit" "cargo builds that exact commit from the action's repository" \
  test "$(sed 's/--root [^ ]* //' "$work/cargo.log")" = "install --locked --git https://github.com/octo/perfgate --rev $OTHER_SHA $PACKAGE"
check "ref = other commit" "the build is on PATH and cached by commit" \
  test "$rc" = 0 -a "$gpath" = "$work/case-fallback/toolcache/perfgate/git-$OTHER_SHA/x64" -a -f "$gpath.complete"
: >"$work/cargo.log"
run tagnorelease PERFGATE_ACTION_REF=v0.0.9
check "ref v0.0.9 (no release)" "falls back to cargo install --tag with a notice" \
  test "$rc" = 0 -a "$(sed 's/--root [^ ]* //' "$work/cargo.log")" = "install --locked --git https://github.com/octo/perfgate --tag v0.0.9 $PACKAGE"
check "ref v0.0.9 (no release)" "the notice" has "::notice title=perfgate install::no prebuilt perfgate for tag v0.0.9"
: >"$work/cargo.log"
run localaction
check "uses: ./" "a local action is built from its own checkout" \
  test "$rc" = 0 -a "$(sed 's/--root [^ ]* //' "$work/cargo.log")" = "install --locked --path $work/action $PACKAGE"
check "uses: ./" "the build is on PATH, version local" \
  test -x "$gpath/perfgate" -a "${gout##*$'\n'}" = "version=local"
run nocargo PERFGATE_ACTION_REF="$OTHER_SHA" PATH="$work/nocargo"
check "no cargo" "a fallback without cargo: exit 1 saying so" \
  test "$rc" = 1 -a -z "$gpath"
check "no cargo" "message" has "cargo is not on PATH"

# --- the tool cache -----------------------------------------------------------------------------
CACHE="$work/shared-cache"
run cache1 PERFGATE_VERSION=v0.1.0
first=$n_requests
run cache2 PERFGATE_VERSION=v0.1.0
check cache "first run downloads (SHA256SUMS + asset), a hit downloads nothing" \
  test "$first" = 2 -a "$n_requests" = 0 -a "$rc" = 0 -a "$gpath" = "$CACHE/perfgate/0.1.0/x64"
check cache "says it came from the tool cache" has "from the tool cache"
run cachesha1 PERFGATE_ACTION_REF="$COMMIT_SHA"
run cachesha2 PERFGATE_ACTION_REF="$COMMIT_SHA"
check cache "a release pinned by commit SHA: a warm cache asks nothing (not even COMMIT)" \
  test "$rc" = 0 -a "$n_requests" = 0 -a "$gpath" = "$CACHE/perfgate/0.1.0/x64"
: >"$work/cargo.log"
run cachegit1 PERFGATE_ACTION_REF="$OTHER_SHA"
run cachegit2 PERFGATE_ACTION_REF="$OTHER_SHA"
check cache "a cargo build of a commit is built once and then asks nothing" \
  test "$rc" = 0 -a "$n_requests" = 0 -a "$(wc -l <"$work/cargo.log")" = 1 -a "$gpath" = "$CACHE/perfgate/git-$OTHER_SHA/x64"
echo "tampered" >>"$CACHE/perfgate/0.1.0/x64/perfgate"
run cache3 PERFGATE_VERSION=v0.1.0
check cache "a tampered cache entry is downloaded and verified again" \
  test "$rc" = 0 -a "$n_requests" = 2 -a "$("$CACHE/perfgate/0.1.0/x64/perfgate" --version)" = "perfgate 0.1.0 (x86_64-unknown-linux-musl)"
CACHE=""

# --- retries ------------------------------------------------------------------------------------
run flaky PERFGATE_VERSION=v0.2.3-flaky
check retries "two 503s on the asset, then success" test "$rc" = 0 -a -n "$gpath"
check retries "the asset was asked for 3 times" \
  test "$(grep -c 'perfgate-v0.2.3-flaky-x86_64-unknown-linux-musl.tar.gz$' "$LOG")" = 3
t_start=$(date +%s)
run down PERFGATE_VERSION=v0.2.4-down PERFGATE_RETRIES=2
check retries "a server that keeps failing: exit 1 after the retries, in bounded time" \
  test "$rc" = 1 -a "$(grep -c 'v0.2.4-down/SHA256SUMS$' "$LOG")" = 3 -a $(($(date +%s) - t_start)) -lt 30
check retries "message names the download" has "could not download $BASE/v0.2.4-down/SHA256SUMS"
run refused PERFGATE_VERSION=v0.1.0 PERFGATE_DOWNLOAD_BASE=http://127.0.0.1:9 PERFGATE_RETRIES=1
check retries "connection refused: exit 1" test "$rc" = 1

# --- file:// ------------------------------------------------------------------------------------
run file PERFGATE_VERSION=v0.1.0 PERFGATE_DOWNLOAD_BASE="file://$REL"
check "file://" "installs from a file:// base" test "$rc" = 0 -a -n "$gpath"
run filemissing PERFGATE_VERSION=v9.9.9 PERFGATE_DOWNLOAD_BASE="file://$REL"
check "file://" "a missing release over file:// is exit 4" test "$rc" = 4

# --- timing with a real binary ------------------------------------------------------------------
real="${PERFGATE_INSTALLER_REAL_BIN:-}"
tdir="${CARGO_TARGET_DIR:-target}"
if [ -z "$real" ]; then
  # the smallest build there is: the debug binary is twice the release one (214 vs 107 MB), and
  # packing it was most of this script's CPU time
  for c in "$tdir/dist/perfgate" "$tdir/release/perfgate" "$tdir/debug/perfgate"; do
    if [ -x "$c" ]; then real=$c; break; fi
  done
fi
if [ -n "$real" ] && [ -x "$real" ]; then
  name=perfgate-v0.9.0-x86_64-unknown-linux-musl
  mkdir -p "$work/pkg/$name" "$REL/v0.9.0"
  cp "$real" "$work/pkg/$name/perfgate"
  # gzip -1: the archive is unpacked by the real install step all the same, in a fraction of
  # the time gzip -6 takes to pack 100 MB
  tar -C "$work/pkg" -cf - "$name" | gzip -1 >"$REL/v0.9.0/$name.tar.gz"
  (cd "$REL/v0.9.0" && sha256sum -- *.tar.gz >SHA256SUMS)
  t0=$(python3 -c 'import time; print(time.time())')
  run real PERFGATE_VERSION=v0.9.0
  version=$("$gpath/perfgate" --version 2>&1 || true)
  ms=$(python3 -c "import time; print(int((time.time() - $t0) * 1000))")
  size=$(du -k "$REL/v0.9.0/$name.tar.gz" | cut -f 1)
  check "real binary" "installed and runs ($version)" test "$rc" = 0 -a -n "$version"
  echo "     install of $real ($((size / 1024)) MB archive) from 127.0.0.1, start to a running '$version': $ms ms"

  # The whole action on the host, as a job runs it: an earlier step's server on 127.0.0.1
  # (perfgate's simulator), then the action's run step with the binary the install step gave.
  installed="$gpath/perfgate"
  ws="$work/workspace"
  mkdir -p "$ws/scenarios" "$ws/baselines"
  # Created first: the loop below may read it before the background job has opened it, and a
  # sed on a missing file would end this script (set -e).
  : >"$work/sim.log"
  timeout 300 "$installed" sim --port 0 >"$work/sim.log" 2>&1 &
  sim_pid=$!
  url=""
  for _ in $(seq 100); do
    url=$(sed -n 's/^perfgate sim listening on //p' "$work/sim.log")
    [ -n "$url" ] && break
    sleep 0.05
  done
  cat >"$ws/scenarios/local.yaml" <<YAML
defaults:
  endpoint:
    base_url: "$url"
    model: perfgate-sim
  request:
    prompt: "Write a haiku about latency."
    max_tokens: 8
    ignore_eos: true
  load:
    concurrency: 1
    samples: 20
    warmup: 1
scenarios:
  - name: on-localhost
YAML
  entry="$PWD/scripts/action-entrypoint.sh"
  step() { # step COMMAND: the action's run step in $ws, as GitHub runs it
    : >"$work/step-output"
    (cd "$ws" && env -i HOME="$work/home" PATH="/usr/bin:/bin" \
      GITHUB_ACTIONS=true GITHUB_OUTPUT="$work/step-output" GITHUB_STEP_SUMMARY="$work/summary" \
      PERFGATE_BIN="$installed" PERFGATE_COMMAND="$1" PERFGATE_COMMENT=false \
      timeout 120 bash "$entry" >"$work/step.log" 2>&1)
  }
  rc=0
  step bless || rc=$?
  if [ "$rc" = 0 ]; then step check || rc=$?; fi
  out=$(cat "$work/step.log")
  check "action on the host" "the run step reaches a server an earlier step started on 127.0.0.1 (${url:-no url})" \
    test "$rc" = 0 -a -n "$url" -a -f "$ws/perfgate-results.json"
  check "action on the host" "step outputs as the action maps them" \
    grep -q '^report-json=perfgate-results.json$' "$work/step-output"
  kill "$sim_pid" 2>/dev/null || true
  wait "$sim_pid" 2>/dev/null || true
else
  echo "skip real binary timing: no PERFGATE_INSTALLER_REAL_BIN and no $tdir/{dist,debug}/perfgate"
fi

echo "installer: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
