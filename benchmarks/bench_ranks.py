"""What gathering reports across ranks costs, measured for 2 ranks, projected for more.

Run from the repository root::

    .venv/bin/python benchmarks/bench_ranks.py                  # about 70 s on 2 cores
    .venv/bin/python benchmarks/bench_ranks.py --quick          # a smoke run
    .venv/bin/python benchmarks/bench_ranks.py --baseline ../other-checkout
    .venv/bin/python benchmarks/bench_ranks.py --json out.json

Three parts:

1. **Two ranks** (two processes on this machine, a gloo group over loopback):
   the per-cell cost of ``%%stance -q --ranks`` over ``%%stance -q`` (an empty
   cell, both ranks aligned by a barrier before every cell, so that no rank
   waits for the other's work), one ``gather`` alone (summary and full
   report of a real cell: two compiles, a recompile), the payload sizes, and
   torch's two collectives under ``gather_object`` (an ``all_gather`` of the
   sizes, a ``gather`` of the bytes) timed bare.
2. **Rank 0's own work for N ranks**, measured in this process for N = 2, 64,
   1024: turning N received payloads back into objects (torch's
   ``_tensor_to_object``, as ``gather_object`` does), building the
   :class:`~stance_magic.report.ranks.RankReport` (rows, flags) and rendering it
   (text, HTML, chart).
3. **Nothing added without a process group**: an empty ``%%stance -q`` cell
   in a process with no group, with this checkout (and with ``--baseline
   PATH``'s package, in alternating fresh processes).

The projection for N ranks adds the network part, from the 2-rank figures:
``gather_object`` at rank 0 is an ``all_gather`` of one integer per rank (gloo's
ring: N-1 steps) plus a ``gather`` of N payloads padded to the largest
(rank 0 receives N-1 messages), so it grows as ``(N-1) × (a ring step + one
receive of the payload)``; loopback steps are a floor: a real network's
per-message latency (tens of µs) takes their place. Figures are medians.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import pickle
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jsonenv

REPO = Path(__file__).resolve().parent.parent
PROJECT_N = (2, 64, 1024)
#: An assumed step on a cluster network (a ring step and a receive, ~50 µs each)
NET_STEP_S = 100e-6


def _fmt_s(s: float | None) -> str:
    from stance_magic.render import fmt_s

    return fmt_s(s)


def _fmt_b(n: float) -> str:
    from stance_magic.render import fmt_bytes

    return fmt_bytes(int(n))


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def _iqr(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child_env(pythonpath: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = "1"
    env["IPYTHONDIR"] = tempfile.mkdtemp(prefix="bench_ranks_ipython_")
    return env


# --------------------------------------------------------------------------
# 1. two ranks
# --------------------------------------------------------------------------


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    sh.display_formatter.active_types = list(sh.display_formatter.format_types)
    return sh


def _run(sh: Any, src: str) -> float:
    from IPython.utils.capture import capture_output

    with capture_output():
        t0 = time.perf_counter()
        res = sh.run_cell(src, store_history=False)
        dt = time.perf_counter() - t0
    if not res.success:
        res.raise_error()
    return dt


def worker(out: Path, rounds: int, cells: int) -> None:
    """One rank (RANK, WORLD_SIZE, MASTER_* in the environment)."""
    import torch
    import torch.distributed as dist

    from stance_magic.builder.ranks import gather, summarize
    from stance_magic.session.engine import get_engine

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    sh = _shell()
    _run(sh, "%load_ext stance_magic")
    sh.user_ns["torch"] = torch
    _run(
        sh,
        "model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), "
        "torch.nn.Linear(64, 8))\ncmodel = torch.compile(model, backend='eager')",
    )
    _run(sh, "%%stance -q\nfor n in (8, 16, 32):\n    y = cmodel(torch.randn(n, 64))")
    rep = get_engine().history[-1]
    summary_bytes = len(pickle.dumps(summarize(rep, rank).to_wire()))
    full_bytes = len(pickle.dumps((summarize(rep, rank).to_wire(), rep)))
    res: dict[str, Any] = {
        "summary_bytes": summary_bytes,
        "full_bytes": full_bytes,
        "report": {"compiles": rep.compiles, "recompiles": len(rep.recompiles)},
    }

    def gather_times(mode: str) -> list[float]:
        out_t = []
        for _ in range(rounds):
            dist.barrier()
            t0 = time.perf_counter()
            gather(rep, mode)
            out_t.append(time.perf_counter() - t0)
        return out_t

    gather_times("summary")  # warm
    res["gather_summary"] = gather_times("summary")
    res["gather_full"] = gather_times("full")

    # torch's two collectives inside gather_object, bare
    one = torch.ones(1, dtype=torch.long)
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(2)]
    ag = []
    for _ in range(rounds):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_gather(sizes, one)
        ag.append(time.perf_counter() - t0)
    res["all_gather_1"] = ag
    for label, own in (
        ("gather_summary_bytes", summary_bytes),
        ("gather_full_bytes", full_bytes),
    ):
        # one size on every rank (a gather of unequal buffers aborts gloo):
        # the ranks' reports differ by a byte now and then (their timings)
        size = torch.tensor([own], dtype=torch.long)
        dist.all_reduce(size, op=dist.ReduceOp.MAX)
        nbytes = int(size.item())
        buf = torch.zeros(nbytes, dtype=torch.uint8)
        bufs = [torch.empty(nbytes, dtype=torch.uint8) for _ in range(2)] if rank == 0 else None
        ts = []
        for _ in range(rounds):
            dist.barrier()
            t0 = time.perf_counter()
            dist.gather(buf, bufs, dst=0)
            ts.append(time.perf_counter() - t0)
        res[label] = ts

    # per cell: %%stance -q vs %%stance -q --ranks, aligned by a barrier
    plain, gathered = [], []
    variants = [
        ("plain", "%%stance -q\npass", plain),
        ("ranks", "%%stance -q --ranks\npass", gathered),
    ]
    for _ in range(20):  # warm
        for _, src, _ in variants:
            dist.barrier()
            _run(sh, src)
    for i in range(cells):
        order = variants if i % 2 == 0 else variants[::-1]
        for _, src, store in order:
            dist.barrier()
            store.append(_run(sh, src))
        get_engine().history.clear()
    res["cell_plain"] = plain
    res["cell_ranks"] = gathered
    dist.barrier()
    dist.destroy_process_group()
    (out / f"rank{rank}.json").write_text(json.dumps(res))


def two_ranks(rounds: int, cells: int, timeout: float = 300) -> dict[int, dict[str, Any]]:
    out = Path(tempfile.mkdtemp(prefix="bench_ranks_"))
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = _child_env(REPO)
        env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        cmd = [sys.executable, __file__, "--worker", str(out), "--rounds", str(rounds)]
        cmd += ["--cells", str(cells)]
        procs.append(subprocess.Popen(cmd, env=env, start_new_session=True))
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    if any(p.returncode for p in procs):
        raise SystemExit(f"a rank failed: {[p.returncode for p in procs]}")
    return {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}


# --------------------------------------------------------------------------
# 2. rank 0's own work for N ranks
# --------------------------------------------------------------------------


def _real_report() -> Any:
    """A report of a real cell (two compiles, one recompile), as the workers make."""
    import torch

    import stance_magic

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    cmodel = torch.compile(model, backend="eager")
    with stance_magic.measure("default") as rep:
        for n in (8, 16, 32):
            cmodel(torch.randn(n, 64))
    return rep.report


def _to_object(payloads: list[bytes]) -> Any:
    """What gather_object does with N received payloads at rank 0."""
    import torch
    from torch.distributed import distributed_c10d as c10d

    conv = getattr(c10d, "_tensor_to_object", None)
    n = len(payloads)
    size = max(len(p) for p in payloads)
    flat = torch.zeros(size * n, dtype=torch.uint8)
    for i, p in enumerate(payloads):
        flat[i * size : i * size + len(p)] = torch.frombuffer(bytearray(p), dtype=torch.uint8)
    sizes = [torch.tensor([len(p)], dtype=torch.long) for p in payloads]
    t0 = time.perf_counter()
    int(max(sizes).item())
    if conv is not None:
        try:
            objs = [conv(flat[i * size : (i + 1) * size], sizes[i], None) for i in range(n)]
        except TypeError:  # another torch's signature
            conv = None
    if conv is None:
        objs = [pickle.loads(p) for p in payloads]
    return objs, time.perf_counter() - t0


def rank0_work(reps: int = 5) -> dict[str, Any]:
    from stance_magic.builder.ranks import summarize
    from stance_magic.plots import figure_png
    from stance_magic.report.ranks import RankReport, RankSummary

    rep = _real_report()
    figure_png(RankReport(world_size=1, rows=[summarize(rep, 0)]).figure())  # warm
    out: dict[str, Any] = {}
    for n in PROJECT_N:
        wire = [summarize(rep, i).to_wire() for i in range(n)]
        # one rank in 37 fed another shape, as a divergence to flag
        odd = summarize(rep, 0)
        odd.recompiles += 1
        wire[n // 2] = RankSummary(**{**odd.__dict__, "rank": n // 2}).to_wire()
        payloads = [pickle.dumps(w) for w in wire]
        full_payloads = [pickle.dumps((w, rep)) for w in wire[: min(n, 64)]]
        fig = []
        unpickle, build, text, page, full_unpickle = [], [], [], [], []
        for _ in range(reps):
            gc.collect()
            objs, dt = _to_object(payloads)
            unpickle.append(dt)
            t0 = time.perf_counter()
            view = RankReport(world_size=n, rows=[RankSummary.from_wire(w) for w in objs])
            build.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            str(view)
            text.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            view._repr_html_()
            page.append(time.perf_counter() - t0)
            _, dt = _to_object(full_payloads)
            full_unpickle.append(dt * n / len(full_payloads))
        t0 = time.perf_counter()
        figure_png(view.figure())
        fig.append(time.perf_counter() - t0)
        out[str(n)] = {
            "unpickle_s": _med(unpickle),
            "build_s": _med(build),
            "text_s": _med(text),
            "html_s": _med(page),
            "chart_s": fig[0],
            "full_unpickle_s": _med(full_unpickle),
            "flags": [f.kind for f in view.flags],
        }
    return out


# --------------------------------------------------------------------------
# 3. no process group: a plain %%stance cell
# --------------------------------------------------------------------------

_NOGROUP = r"""
import json, sys, time, statistics
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config
c = Config(); c.HistoryAccessor.enabled = False
sh = InteractiveShell.instance(config=c)
sh.display_formatter.active_types = list(sh.display_formatter.format_types)
sh.run_cell("%load_ext stance_magic")
import stance_magic, torch.distributed as dist
from stance_magic.session.engine import get_engine
assert not dist.is_initialized()
n, batch = int(sys.argv[1]), 50
out = []
with capture_output():
    for _ in range(20):
        sh.run_cell("%%stance -q\npass", store_history=False)
    for _ in range(n):
        t0 = time.perf_counter()
        for _ in range(batch):
            sh.run_cell("%%stance -q\npass", store_history=False)
        out.append((time.perf_counter() - t0) / batch)
        get_engine().history.clear()
print(json.dumps({"median": statistics.median(out), "package": stance_magic.__file__}))
"""


def no_group(paths: dict[str, Path], rounds: int, batches: int) -> dict[str, Any]:
    """Seconds per empty ``%%stance -q`` cell, no process group, per checkout
    (fresh processes, alternating between checkouts round by round)."""
    out: dict[str, Any] = {name: [] for name in paths}
    package: dict[str, str] = {}
    for i in range(rounds):
        order = list(paths.items())
        for name, path in order if i % 2 == 0 else order[::-1]:
            proc = subprocess.run(
                [sys.executable, "-c", _NOGROUP, str(batches)],
                env=_child_env(path),
                cwd=tempfile.gettempdir(),  # not a checkout: its package would come first
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            out[name].append(res["median"])
            package[name] = res["package"]
    return {
        name: {"median": _med(v), "runs": v, "package": package[name]} for name, v in out.items()
    }


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: few rounds")
    p.add_argument("--rounds", type=int, default=None, help="gathers per figure (200)")
    p.add_argument("--cells", type=int, default=None, help="cells per variant (300)")
    p.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    rounds = args.rounds or (10 if args.quick else 200)
    cells = args.cells or (10 if args.quick else 300)
    if args.worker is not None:
        worker(args.worker, rounds, cells)
        return 0

    import torch

    import stance_magic

    print(
        f"stance_magic {stance_magic.__version__} ({stance_magic.__file__}), torch "
        f"{torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    t_start = time.perf_counter()
    two = two_ranks(rounds, cells)
    r0 = two[0]
    s_bytes, f_bytes = r0["summary_bytes"], r0["full_bytes"]
    g_sum, g_full = _med(r0["gather_summary"]), _med(r0["gather_full"])
    ag = _med(r0["all_gather_1"])
    gb_sum, gb_full = _med(r0["gather_summary_bytes"]), _med(r0["gather_full_bytes"])
    diffs = {r: [b - a for a, b in zip(two[r]["cell_plain"], two[r]["cell_ranks"])] for r in (0, 1)}
    print("\n1. two ranks (2 processes, gloo over loopback)")
    print(
        f"  the cell measured: {r0['report']['compiles']} compiles, "
        f"{r0['report']['recompiles']} recompile; payload per rank: summary "
        f"{_fmt_b(s_bytes)}, full report {_fmt_b(f_bytes)}"
    )
    for r in (0, 1):
        plain, gathered = _med(two[r]["cell_plain"]), _med(two[r]["cell_ranks"])
        lo, hi = _iqr(diffs[r])
        print(
            f"  rank {r}: empty cell %%stance -q {_fmt_s(plain)}, with --ranks "
            f"{_fmt_s(gathered)}: +{_fmt_s(_med(diffs[r]))} per cell "
            f"(paired IQR {_fmt_s(lo)} to {_fmt_s(hi)})"
        )
    print(f"  gather alone at rank 0: summary {_fmt_s(g_sum)}, full {_fmt_s(g_full)}")
    print(
        f"  torch's collectives bare: all_gather of 1 integer {_fmt_s(ag)}; gather of "
        f"{_fmt_b(s_bytes)} {_fmt_s(gb_sum)}, of {_fmt_b(f_bytes)} {_fmt_s(gb_full)}"
    )

    print("\n2. rank 0's own work for N ranks (this process; one rank flagged)")
    work = rank0_work(2 if args.quick else 5)
    print("  N      unpickle  RankReport  text     HTML     chart    (full: unpickle)")
    for n in PROJECT_N:
        w = work[str(n)]
        print(
            f"  {n:<6} {_fmt_s(w['unpickle_s']):<9} {_fmt_s(w['build_s']):<11} "
            f"{_fmt_s(w['text_s']):<8} {_fmt_s(w['html_s']):<8} {_fmt_s(w['chart_s']):<8} "
            f"({_fmt_s(w['full_unpickle_s'])})"
        )

    # the model: anchored on the 2-rank gather; each further rank adds one ring step
    # of the size all_gather and one receive of its payload (measured bare here),
    # and rank 0's Python work grows as measured in part 2
    step_sum = ag + gb_sum
    step_full = ag + gb_full
    print("\n  projection of one gather at rank 0, per cell (the view's rendering not included):")
    print(
        "  N      bytes at rank 0 (summary / full)   time (summary / full)   "
        f"with a {_fmt_s(NET_STEP_S)} step (summary / full)"
    )
    projection = {}
    w2 = work["2"]
    for n in PROJECT_N:
        w = work[str(n)]
        t_sum = g_sum + (n - 2) * step_sum + (w["unpickle_s"] + w["build_s"])
        t_sum -= w2["unpickle_s"] + w2["build_s"]
        t_full = g_full + (n - 2) * step_full + (w["full_unpickle_s"] + w["build_s"])
        t_full -= w2["full_unpickle_s"] + w2["build_s"]
        net_sum = t_sum - (n - 2) * (step_sum - NET_STEP_S)
        net_full = t_full - (n - 2) * (step_full - NET_STEP_S)
        projection[str(n)] = {
            "summary_bytes": n * s_bytes,
            "full_bytes": n * f_bytes,
            "summary_s": t_sum,
            "full_s": t_full,
            "summary_s_net_step": net_sum,
            "full_s_net_step": net_full,
        }
        print(
            f"  {n:<6} {_fmt_b(n * s_bytes):>9} / {_fmt_b(n * f_bytes):<22} "
            f"{_fmt_s(t_sum):>9} / {_fmt_s(t_full):<11} {_fmt_s(net_sum):>9} / "
            f"{_fmt_s(net_full)}"
        )
    print(
        f"  model: t(N) = t(2) + (N-2) × step + rank 0's extra unpickling and view (part 2); "
        f"step = one ring step of the all_gather of sizes ({_fmt_s(ag)} here) + one receive "
        f"of a payload ({_fmt_s(gb_sum)} summary, {_fmt_s(gb_full)} full here). Here a step "
        "is loopback between two processes on shared cores (scheduling included); on a "
        "cluster it is the network's per-message time, and t(N) scales with it: the last "
        f"columns take {_fmt_s(NET_STEP_S)} a step (two small TCP messages in a data centre)."
    )

    paths = {"this checkout": REPO}
    if args.baseline is not None:
        paths["baseline"] = args.baseline.resolve()
    print("\n3. no process group: an empty %%stance -q cell (fresh processes, alternating)")
    nog = no_group(paths, 2 if args.quick else 6, 10 if args.quick else 40)
    for name, res in nog.items():
        runs = ", ".join(_fmt_s(x) for x in res["runs"])
        print(f"  {name}: {_fmt_s(res['median'])} per cell ({runs}; {res['package']})")
    if "baseline" in nog:
        pairs = [a - b for a, b in zip(nog["this checkout"]["runs"], nog["baseline"]["runs"])]
        d = _med(pairs)
        lo, hi = _iqr(pairs)
        print(
            f"  difference (paired by round): {'+' if d >= 0 else ''}{_fmt_s(d)} per cell "
            f"(IQR {_fmt_s(lo)} to {_fmt_s(hi)})"
        )
    print(f"\n(ran in {time.perf_counter() - t_start:.0f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "two_ranks": two,
                    "rank0_work": work,
                    "projection": projection,
                    "no_group": nog,
                    "net_step_s": NET_STEP_S,
                    "env": jsonenv.environment(),
                    "command": jsonenv.command("bench_ranks.py", argv),
                    "seconds": time.perf_counter() - t_start,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
