"""Do the test lanes hold on a busy shared machine? Each lane, many times, beside a hog.

Run from the repository root::

    make test-stress                        # both lanes, 10 runs each, beside the hog
    STRESS_RUNS=3 make test-stress          # 3 runs each
    .venv/bin/python benchmarks/stress.py --runs 3 --lanes timing
    .venv/bin/python benchmarks/stress.py --no-hog --runs 2      # a quiet baseline
    .venv/bin/python benchmarks/stress.py --runs 1 --lanes fast --pytest-args tests/test_layout.py

The lanes are those of the Makefile, each run a fresh ``pytest`` subprocess:

- ``fast``: ``pytest -q -p no:randomly -m "not slow and not integration and not
  browser and not inductor and not timing" tests`` (``make test-fast``);
- ``timing``: ``pytest -q -m timing tests`` (``make test-timing``).

Every run of the first lane comes before any run of the next. ``-rfE`` is added
so that pytest names each failed test (and each error) in its short summary;
``--pytest-args`` is appended after everything else (``-x``, ``-k EXPR``); a
test path among them replaces the lane's ``tests`` (the lane's ``-m`` still
applies). A run passes on exit code 0, or 5 (no tests collected: a
pass, with a note); a run past ``--timeout-s`` is killed, with its process
group, and fails.

The hog is what a shared machine does to the tests beside them: processes
(default 2) each running ``torch.mm`` on 512x512 matrices in a loop on torch's
own intra-op threads (``torch.set_num_threads(2)``), and processes (default 2)
each spinning a plain Python loop (``while True: x += 1``): about 6 runnable
threads, a load average of about 6 on two cores. It starts before the first
run (and is given ``--warmup-s`` to raise the load average) and is stopped
when the script ends however it ends: on return, an exception, Ctrl-C,
SIGTERM or SIGHUP (``finally`` blocks, ``atexit``). Each hog process also ends
by itself after ``--hog-max-s`` seconds, or as soon as this script's process is
gone, so none is left running even after a ``kill -9``.

As it goes, one line per run: lane, run i/N, exit code, pytest's counts (from
its last summary line), seconds, the 1-minute load average while it ran (the
mean of ``os.getloadavg()`` sampled each second) and the failed tests. At the
end, a table per lane: runs, failed runs, median seconds, median load, and each
failed test with the number of runs it failed in; the same as JSON in
``OUT/stress.json`` (rewritten after every run), every run's output in
``OUT/<lane>-<i>.log``. The exit status is 0 if no run failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import select
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

FAST_MARK = "not slow and not integration and not browser and not inductor and not timing"
#: lane -> pytest's arguments (after ``python -m pytest``), as in the Makefile
LANES: dict[str, list[str]] = {
    "fast": ["-q", "-p", "no:randomly", "-m", FAST_MARK, "tests"],
    "timing": ["-q", "-m", "timing", "tests"],
}
#: name each failed test and each error in pytest's short summary (a bare
#: ``-rf`` would drop the ``E`` of pytest's default ``-r fE``)
REPORT_ARGS = ["-rfE"]


def lane_cmd(lane: str, extra: list[str]) -> list[str]:
    """The command of one run of ``lane``: its pytest arguments, ``-rfE``, then
    ``extra``. Where ``extra`` names a test path (``tests/test_x.py``,
    ``tests/test_x.py::test_y``: an argument naming a file or folder of the
    repository), it replaces the lane's own ``tests``, so the run is narrowed
    to it (the lane's ``-m`` still applies)."""
    args = list(LANES[lane])
    if any(not a.startswith("-") and (REPO / a.split("::")[0]).exists() for a in extra):
        args.remove("tests")
    return [sys.executable, "-m", "pytest", *args, *REPORT_ARGS, *extra]


# --------------------------------------------------------------------------
# the hog
# --------------------------------------------------------------------------

#: The code each hog process runs: ``python -c HOG_CODE KIND MAX_S PARENT_PID
#: THREADS SIZE``. It prints ``ready`` once set up, then spins until MAX_S have
#: passed or its parent is gone (it was reparented), checking a few times a
#: second.
HOG_CODE = r"""
import os, sys, time
kind, max_s, parent, threads, size = sys.argv[1:6]
deadline = time.monotonic() + float(max_s)
parent, threads, size = int(parent), int(threads), int(size)

def alive():
    return time.monotonic() < deadline and os.getppid() == parent

try:
    if kind == "torch":
        import torch
        torch.set_num_threads(threads)
        a = torch.randn(size, size)
        b = torch.randn(size, size)
        torch.mm(a, b)
        print("ready", flush=True)
        while alive():
            t = time.monotonic() + 0.1
            while time.monotonic() < t:
                torch.mm(a, b)
    else:
        print("ready", flush=True)
        x = 0
        while alive():
            for _ in range(200_000):
                x += 1
except (KeyboardInterrupt, BrokenPipeError):
    pass
"""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a live process has used; None if it is gone
    (or reaped) or this platform has no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            import psutil  # type: ignore[import-untyped]

            t = psutil.Process(pid).cpu_times()
            return float(t.user + t.system)
        except Exception:
            return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # a zombie: exited, not yet reaped
        return None
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass
class Hog:
    """Processes that keep the cores busy: ``torch_procs`` torch matmul loops
    on ``threads`` intra-op threads each, ``python_procs`` plain Python loops.
    Each ends by itself after ``max_s`` seconds or when this process is gone;
    :meth:`stop` ends them all now (and is safe to call again)."""

    torch_procs: int = 2
    python_procs: int = 2
    threads: int = 2
    size: int = 512
    max_s: float = 4 * 3600.0
    log: Path | None = None
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    started: float | None = None
    cpu_s: dict[int, float] = field(default_factory=dict)
    wall_s: float | None = None

    def start(self, ready_timeout_s: float = 180.0) -> None:
        """Start every hog process, and wait until each has said ``ready``
        (torch imported, first product made)."""
        atexit.register(self.stop)
        err = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            kinds = ["torch"] * self.torch_procs + ["python"] * self.python_procs
            for kind in kinds:
                p = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        HOG_CODE,
                        kind,
                        repr(self.max_s),
                        str(os.getpid()),
                        str(self.threads),
                        str(self.size),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # Ctrl-C is ours to handle, not theirs
                    env={**os.environ, "OMP_NUM_THREADS": str(self.threads)},
                )
                self.procs.append((kind, p))
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        self.started = time.monotonic()
        deadline = self.started + ready_timeout_s
        for kind, p in self.procs:
            assert p.stdout is not None
            while True:
                left = deadline - time.monotonic()
                if p.poll() is not None or left <= 0:
                    self.stop()
                    raise RuntimeError(
                        f"a {kind} hog process did not start (exit code {p.returncode})"
                        + (f"; see {self.log}" if self.log else "")
                    )
                if select.select([p.stdout], [], [], min(left, 1.0))[0]:
                    line = p.stdout.readline()
                    if line.strip() == b"ready":
                        break
            p.stdout.close()  # it writes nothing more

    @property
    def pids(self) -> list[int]:
        return [p.pid for _, p in self.procs]

    def alive(self) -> list[int]:
        return [p.pid for _, p in self.procs if p.poll() is None]

    def cpu(self) -> dict[int, float]:
        """CPU seconds so far of each live hog process."""
        out = {}
        for pid in self.pids:
            c = cpu_seconds(pid)
            if c is not None:
                out[pid] = c
        return out

    def stop(self, grace_s: float = 5.0) -> None:
        """End every hog process: SIGTERM, then SIGKILL after ``grace_s``; reap them."""
        if not self.procs:
            return
        if self.started is not None and self.wall_s is None:
            self.wall_s = time.monotonic() - self.started
            self.cpu_s.update(self.cpu())
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    p.terminate()
                except OSError:
                    pass
        deadline = time.monotonic() + grace_s
        for _, p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self.procs.clear()
        atexit.unregister(self.stop)

    def config(self) -> dict[str, Any]:
        return {
            "torch_procs": self.torch_procs,
            "python_procs": self.python_procs,
            "threads": self.threads,
            "size": self.size,
            "max_s": self.max_s,
            "log": str(self.log) if self.log else None,
        }

    def describe(self) -> str:
        return (
            f"{self.torch_procs} torch.mm loop(s) ({self.size}x{self.size}, "
            f"{self.threads} thread(s) each) + {self.python_procs} Python loop(s)"
        )


# --------------------------------------------------------------------------
# pytest's output
# --------------------------------------------------------------------------

_COUNT = re.compile(
    r"(\d+) (failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?|rerun)\b"
)
_SUMMARY = re.compile(r"\bin \d+(?:\.\d+)?s\b")
_FAILED = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$")


def parse_summary(text: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``3 failed, 318 passed, 15
    skipped, 60 deselected, 20 warnings in 51.38s``, with or without the
    ``=`` rule around it): ``{"failed": 3, "passed": 318, ...}``; plurals as
    ``warnings`` and ``errors``. Empty if there is no such line."""
    for line in reversed(text.splitlines()):
        if _SUMMARY.search(line) and (_COUNT.search(line) or "no tests ran" in line):
            counts: dict[str, int] = {}
            for n, what in _COUNT.findall(line):
                what = {"warning": "warnings", "error": "errors"}.get(what, what)
                counts[what] = counts.get(what, 0) + int(n)
            return counts
    return {}


def parse_failed(text: str) -> list[str]:
    """The tests of pytest's ``FAILED tests/x.py::name - reason`` lines, in
    order; an ``ERROR`` line's as ``name (error)``."""
    out = []
    for line in text.splitlines():
        m = _FAILED.match(line.rstrip())
        if m:
            out.append(m.group(2) if m.group(1) == "FAILED" else f"{m.group(2)} (error)")
    return out


def verdict(rc: int | None) -> tuple[bool, str]:
    """Whether an exit code is a pass, and a note."""
    if rc == 0:
        return True, ""
    if rc == 5:
        return True, "no tests collected"
    if rc is None:
        return False, "timed out"
    return False, {1: "", 2: "interrupted", 3: "internal error", 4: "usage error"}.get(
        rc, f"exit code {rc}"
    )


# --------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------


@dataclass
class Run:
    lane: str
    i: int
    n: int
    rc: int | None
    ok: bool
    note: str
    counts: dict[str, int]
    failed: list[str]
    seconds: float
    load: float
    load_max: float
    log: str


def _kill_group(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM a run's process group (pytest and whatever it started), then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_one(lane: str, i: int, n: int, cmd: list[str], out: Path, timeout_s: float) -> Run:
    """One pytest run: output to ``out/<lane>-<i>.log``, the load sampled each second."""
    log = out / f"{lane}-{i:02d}.log"
    loads = [os.getloadavg()[0]]
    t0 = time.monotonic()
    rc: int | None = None
    with open(log, "wb") as f:
        p = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout or Ctrl-C ends all it started
        )
        try:
            while True:
                try:
                    rc = p.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    loads.append(os.getloadavg()[0])
                    if time.monotonic() - t0 > timeout_s:
                        break
        finally:
            if p.poll() is None:
                _kill_group(p)
    seconds = time.monotonic() - t0
    text = log.read_text(errors="replace")
    ok, note = verdict(rc)
    if rc is None:
        note = f"timed out after {timeout_s:.0f} s"
    return Run(
        lane=lane,
        i=i,
        n=n,
        rc=rc,
        ok=ok,
        note=note,
        counts=parse_summary(text),
        failed=parse_failed(text),
        seconds=seconds,
        load=statistics.fmean(loads),
        load_max=max(loads),
        log=str(log),
    )


def format_run(r: Run) -> str:
    counts = ", ".join(
        f"{r.counts[k]} {k}" for k in ("failed", "errors", "passed", "skipped") if r.counts.get(k)
    )
    line = (
        f"{r.lane:<7} run {r.i:>2}/{r.n:<2}  {'ok  ' if r.ok else 'FAIL'}  "
        f"rc={'-' if r.rc is None else r.rc:<3} {counts or '(no summary)':<34} "
        f"{r.seconds:7.1f} s  load {r.load:5.2f}"
    )
    if r.note:
        line += f"  ({r.note})"
    if r.failed:
        line += "\n" + "\n".join(f"    FAILED {t}" for t in r.failed)
    elif not r.ok:
        line += f"\n    see {r.log}"
    return line


def summarize(runs: list[Run]) -> dict[str, Any]:
    """Per lane: runs, failed runs, failed tests with the number of runs each
    failed in, median seconds, median load."""
    out: dict[str, Any] = {}
    for lane in dict.fromkeys(r.lane for r in runs):
        rs = [r for r in runs if r.lane == lane]
        failed = Counter(t for r in rs for t in dict.fromkeys(r.failed))
        out[lane] = {
            "runs": len(rs),
            "failed_runs": sum(not r.ok for r in rs),
            "failed_tests": dict(failed.most_common()),
            "median_s": statistics.median(r.seconds for r in rs),
            "median_load": statistics.median(r.load for r in rs),
        }
    return out


def format_summary(summary: dict[str, Any], hog: str) -> str:
    lines = [
        f"stress: {hog}",
        f"{'lane':<8}{'runs':>6}{'failed runs':>13}{'median s':>11}{'median load':>13}",
    ]
    for lane, s in summary.items():
        lines.append(
            f"{lane:<8}{s['runs']:>6}{s['failed_runs']:>13}{s['median_s']:>11.1f}"
            f"{s['median_load']:>13.2f}"
        )
    for lane, s in summary.items():
        if s["failed_tests"]:
            lines.append(f"\n{lane}: failed tests (runs failed in, of {s['runs']})")
            lines.extend(f"  {n:>3}  {t}" for t, n in s["failed_tests"].items())
        elif s["failed_runs"]:
            lines.append(f"\n{lane}: {s['failed_runs']} run(s) failed naming no test (see logs)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def _on_signal(signum: int, frame: object) -> None:
    # SystemExit unwinds through every finally block (the run's process group,
    # the hog), then atexit runs; a second signal is not to cut that short
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--runs", type=int, default=10, help="runs of each lane")
    p.add_argument(
        "--lanes",
        default="fast,timing",
        help=f"comma-separated lanes, run in this order (of: {', '.join(LANES)})",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=REPO / "build" / "stress",
        help="folder for each run's log and stress.json (created)",
    )
    p.add_argument("--timeout-s", type=float, default=1200.0, help="seconds a run may take")
    p.add_argument(
        "--pytest-args",
        default="",
        help="extra pytest arguments, appended: one string, shell-split "
        '("-x tests/test_x.py"; a lone option as --pytest-args=-x)',
    )
    p.add_argument("--no-hog", action="store_true", help="no hog: a quiet baseline")
    p.add_argument("--hog-torch", type=int, default=2, help="hog processes running torch.mm")
    p.add_argument(
        "--hog-threads", type=int, default=2, help="torch intra-op threads of each torch hog"
    )
    p.add_argument("--hog-size", type=int, default=512, help="side of the hog's square matrices")
    p.add_argument("--hog-python", type=int, default=2, help="hog processes running a Python loop")
    p.add_argument(
        "--hog-max-s",
        type=float,
        default=4 * 3600.0,
        help="seconds after which each hog process ends by itself",
    )
    p.add_argument(
        "--warmup-s",
        type=float,
        default=30.0,
        help="seconds the hog runs before the first run (to raise the load average)",
    )
    args = p.parse_args(argv)
    lanes = [x.strip() for x in args.lanes.split(",") if x.strip()]
    unknown = [x for x in lanes if x not in LANES]
    if unknown or not lanes or args.runs < 1:
        p.error(f"unknown lane(s) {unknown}" if unknown else "need a lane and --runs >= 1")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.pytest_args)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)

    hog = Hog(
        torch_procs=args.hog_torch,
        python_procs=args.hog_python,
        threads=args.hog_threads,
        size=args.hog_size,
        max_s=args.hog_max_s,
        log=out / "hog.log",
    )
    hog_text = "no hog" if args.no_hog else f"hog: {hog.describe()}"
    result: dict[str, Any] = {
        "command": " ".join(
            ["benchmarks/stress.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "python": sys.executable,
        "cpus": os.cpu_count(),
        "hog": None if args.no_hog else hog.config(),
        "lanes": {},
        "runs": [],
    }
    runs: list[Run] = []

    def save() -> None:
        result["runs"] = [asdict(r) for r in runs]
        result["summary"] = summarize(runs) if runs else {}
        (out / "stress.json").write_text(json.dumps(result, indent=1))

    t0 = time.monotonic()
    interrupted: int | None = None
    try:
        if not args.no_hog:
            print(f"{hog_text}; starting", flush=True)
            hog.start()
            print(f"hog: pids {hog.pids}; warming up {args.warmup_s:.0f} s", flush=True)
            time.sleep(args.warmup_s)
        print(f"load before the first run: {os.getloadavg()[0]:.2f} (cpus: {os.cpu_count()})")
        for lane in lanes:
            cmd = lane_cmd(lane, extra)
            result["lanes"][lane] = cmd
            print(f"\n{lane}: {shlex.join(cmd)}", flush=True)
            for i in range(1, args.runs + 1):
                r = run_one(lane, i, args.runs, cmd, out, args.timeout_s)
                runs.append(r)
                print(format_run(r), flush=True)
                save()
                if not args.no_hog and len(hog.alive()) < len(hog.pids):
                    print("hog: some hog processes have ended (--hog-max-s?)", flush=True)
    except KeyboardInterrupt:
        interrupted = 128 + signal.SIGINT
    except SystemExit as e:  # SIGTERM, SIGHUP (_on_signal)
        interrupted = e.code if isinstance(e.code, int) else 1
    finally:
        hog.stop()
        if hog.wall_s and hog.cpu_s and result["hog"] is not None:
            result["hog"]["pids"] = list(hog.cpu_s)
            result["hog"]["cores_used"] = sum(hog.cpu_s.values()) / hog.wall_s
        if runs:
            save()
    summary = summarize(runs)
    print()
    print(format_summary(summary, hog_text))
    if result["hog"] and "cores_used" in result["hog"]:
        print(f"the hog used {result['hog']['cores_used']:.2f} cores on average")
    print(f"\n{out / 'stress.json'}; took {time.monotonic() - t0:.0f} s")
    if interrupted is not None:
        print(f"interrupted after {len(runs)} run(s)")
        return interrupted
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
