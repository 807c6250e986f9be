#!/usr/bin/env python3
"""The nightly verdict end to end (issue 43): 40 nights through the real binary.

Per series: a bare `remote.git` and a work repository whose scenario points at a `perfgate sim`
started for each night with that night's speed (TTFT and TPOT times the night's factor: log-sd
`--tau` night-to-night drift, a slow walk, `--outlier-p` outlier nights x`--outlier`, and for a
stepped series x`--step` from `--step-night` on); `perfgate bless` once (night 0, factor 1),
committed; then every night a commit and `perfgate check --history perfgate-history
--history-local`, whose exit code is recorded. `--neighbour` runs a busy loop (`timeout 900 sh -c
'while :; do :; done'`) beside each series, started and killed by its PID.

Bounded: every command has a timeout, the sim of a night is stopped by its PID after the night,
and the whole trial stops at `--deadline` seconds. Prints each series' exit codes night by night
and the counts (red nights before the step, the nights to the first red after it).

    python3 scripts/nightly_trial.py --bin target/release/perfgate --neighbour
    python3 scripts/nightly_trial.py --smoke --bin target/release/perfgate   # scripts/test.sh
"""

import argparse
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

SCENARIO = """\
defaults:
  endpoint: {base_url: "http://127.0.0.1:${SIM_PORT}/v1", model: perfgate-sim}
  request: {prompt: "Say something.", max_tokens: 16, ignore_eos: true}
  load: {samples: 20, warmup: 1, concurrency: 2}
scenarios:
  - name: nightly
    gate: {metrics: [ttft, tpot]}
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


class Deadline(Exception):
    pass


def git(cwd, *args):
    env = dict(os.environ, **GIT_ENV)
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"git {args}: {out.stderr}")
    return out.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    """Stops a process we started, by its PID (its own process group), and reaps it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def start_sim(binary, factor, seed, port):
    """`perfgate sim` on `port` (the same every night: the port is part of the scenario's
    fingerprint)."""
    proc = subprocess.Popen(
        [binary, "sim", "--port", str(port), "--ttft-ms", f"{20 * factor:.3f}",
         "--tpot-ms", f"{15 * factor:.3f}", "--ttft-sigma", "0.03", "--tpot-sigma", "0.03",
         "--seed", str(seed)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # ready when it accepts a connection (bounded)
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("perfgate sim exited before listening")
            time.sleep(0.05)
    stop(proc)
    raise RuntimeError("perfgate sim did not listen within 5 s")


def factors(nights, tau, walk, outlier_p, outlier, step, step_night, rng):
    """Night i's speed factor (1..=nights): drift, walk, outliers, step."""
    w = 0.0
    out = []
    for i in range(1, nights + 1):
        w += rng.gauss(0.0, walk)
        f = math.exp(rng.gauss(0.0, tau) + w)
        if rng.random() < outlier_p:
            f *= outlier
        if step_night and i >= step_night:
            f *= step
        out.append(f)
    return out


def perfgate(binary, work, args, port, timeout):
    env = dict(os.environ, SIM_PORT=str(port))
    for k in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_EVENT_PATH", "GITHUB_TOKEN"):
        env.pop(k, None)
    return subprocess.run([binary, *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=timeout)


def one_series(a, name, step, seed, deadline):
    rng = random.Random(seed)
    fs = factors(a.nights, a.tau, a.walk, a.outlier_p, a.outlier, step, a.step_night if step != 1.0 else 0, rng)
    neighbour = None
    if a.neighbour:
        neighbour = subprocess.Popen(["timeout", "900", "sh", "-c", "while :; do :; done"],
                                     start_new_session=True)
    codes, rows = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="perfgate-trial-") as d:
            git(d, "init", "-q", "--bare", "remote.git")
            work = os.path.join(d, "work")
            git(d, "init", "-q", "work")
            git(work, "remote", "add", "origin", "../remote.git")
            os.makedirs(os.path.join(work, "scenarios"))
            with open(os.path.join(work, "scenarios", "s.yaml"), "w") as f:
                f.write(SCENARIO)
            git(work, "add", "-A")
            git(work, "commit", "-qm", "scenarios")
            port = free_port()
            sim, port = start_sim(a.bin, 1.0, seed * 1000, port)
            try:
                o = perfgate(a.bin, work, ["bless"], port, 300)
            finally:
                stop(sim)
            if o.returncode != 0:
                raise RuntimeError(f"bless exited {o.returncode}: {o.stderr[-2000:]}")
            git(work, "add", "-A")
            git(work, "commit", "-qm", "baseline")
            for i, f in enumerate(fs, start=1):
                if time.monotonic() > deadline:
                    raise Deadline()
                with open(os.path.join(work, "change.txt"), "w") as fh:
                    fh.write(f"night {i}\n")
                git(work, "add", "change.txt")
                git(work, "commit", "-qm", f"change {i}")
                sim, port = start_sim(a.bin, f, seed * 1000 + i, port)
                try:
                    o = perfgate(a.bin, work, ["check", "--history", "perfgate-history", "--history-local",
                                               "--output", "r.json"], port, 300)
                finally:
                    stop(sim)
                codes.append(o.returncode)
                step_rows = [ln.strip() for ln in o.stdout.splitlines() if "nightly step" in ln]
                row = {"night": i, "factor": round(f, 4), "exit": o.returncode, "rows": step_rows}
                if o.returncode not in (0, 1):
                    row["stderr"] = o.stderr[-1500:]
                rows.append(row)
                if a.verbose:
                    print(f"  {name} night {i:2d} x{f:.3f} exit {o.returncode}", flush=True)
                    for r in step_rows:
                        print(f"      {r}", flush=True)
                    if "stderr" in row:
                        print(row["stderr"], flush=True)
            lines = git(work, "show", "perfgate-history:nightly.jsonl").splitlines()
            if len(lines) != len(fs):
                raise RuntimeError(f"{name}: the branch holds {len(lines)} nights, not {len(fs)}")
    finally:
        stop(neighbour)
    return fs, codes, rows


def main():
    # a SIGTERM unwinds like an exception, so each series' `finally` stops its sim and neighbour
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "perfgate"))
    p.add_argument("--nights", type=int, default=40)
    p.add_argument("--series", type=int, default=2, help="series of each kind (unchanged, stepped)")
    p.add_argument("--tau", type=float, default=0.05)
    p.add_argument("--walk", type=float, default=0.005)
    p.add_argument("--outlier-p", type=float, default=0.05)
    p.add_argument("--outlier", type=float, default=1.3)
    p.add_argument("--step", type=float, default=1.2)
    p.add_argument("--step-night", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--neighbour", action="store_true", help="a busy loop beside each series")
    p.add_argument("--deadline", type=float, default=3600.0, help="seconds for the whole trial")
    p.add_argument("--smoke", action="store_true", help="one series of 4 nights (scripts/test.sh)")
    p.add_argument("--json", help="write the nights here")
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    if a.smoke:
        a.nights, a.series, a.deadline = 4, 1, min(a.deadline, 600.0)
    if not os.path.exists(a.bin):
        sys.exit(f"no perfgate binary at {a.bin}: build it (cargo build --release) or pass --bin")
    deadline = time.monotonic() + a.deadline
    kinds = [("unchanged", 1.0)] if a.smoke else [("unchanged", 1.0), (f"+{(a.step - 1) * 100:.0f}% at night {a.step_night}", a.step)]
    results = []
    try:
        for k, (kind, step) in enumerate(kinds):
            for j in range(a.series):
                seed = a.seed + 100 * k + j
                name = f"{kind} #{j + 1}"
                fs, codes, rows = one_series(a, name, step, seed, deadline)
                results.append({"series": name, "step": step, "seed": seed, "nights": rows})
                print(f"{name:<24} exit codes nights 1..{len(codes)}: {''.join(str(c) for c in codes)}", flush=True)
    except Deadline:
        print(f"stopped at the deadline ({a.deadline:.0f} s); the series so far are above", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    # the counts
    for r in results:
        codes = [n["exit"] for n in r["nights"]]
        if r["step"] == 1.0:
            red = sum(1 for c in codes if c == 1)
            print(f"{r['series']}: red on {red} of {len(codes)} nights; other codes: {sorted(set(codes) - {0, 1})}")
        else:
            s = a.step_night
            before = sum(1 for c in codes[: s - 1] if c == 1)
            after = next((i + 1 for i, c in enumerate(codes[s - 1:]) if c == 1), None)
            print(f"{r['series']}: red on {before} of {s - 1} nights before the step; first red on the step's night {after}")
    if a.smoke:
        codes = [n["exit"] for r in results for n in r["nights"]]
        bad = [c for c in codes if c not in (0, 1)]
        if len(codes) != a.nights or bad:
            sys.exit(f"smoke: expected {a.nights} nights exiting 0 or 1, got {codes}")
        print("nightly trial smoke: ok")


if __name__ == "__main__":
    main()
