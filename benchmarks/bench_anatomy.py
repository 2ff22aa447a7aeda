"""The anatomy of a compiled call against sources that do not go through
stance_magic.

Run from the repository root::

    .venv/bin/python benchmarks/bench_anatomy.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/bench_anatomy.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_anatomy.py --json out.json

Three compiled functions (``backend="eager"``, one intra-op thread), warmed
up, then in each of several rounds, in one process:

* **calibration**: the recorder forgets its lookup bounds and measures the
  loop three times, as a session's first three cells that call a function
  (where torch's profiler bounds its lookup);
* **report**: a loop of calls measured by ``stance_magic.measure``; its
  ``call_parts``: the whole call, torch.compile's wrapper, Dynamo's cache
  lookup (as torch's profiler bounds it) and the compiled code, medians;
* **outside clock**: the same loop bare, each call timed on its own, the median;
* **profiler**: the same loop under ``torch.profiler``: the median
  ``TorchDynamo Cache Lookup`` event and the median outermost
  ``Torch-Compiled Region`` event (the compiled code; the profiler slows the
  ops inside it, so this one reads high on a model);
* **eager**: a loop under ``force_eager`` measured (the report's eager part)
  and bare (the outside clock).

Each ratio is the median over the rounds of report / independent source
(a burst of load moves one round, not the figure). Target: every part within
1.5x; printed as met or missed, never fatal (tests/test_call_anatomy.py
asserts it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

TARGET_RATIO = 1.5


def per_call(step: Callable[[], Any], n: int) -> float:
    """The median of ``n`` calls, each timed on its own: the statistic the
    report's parts are (a call the OS preempted moves a mean, not a median)."""
    clock = time.perf_counter
    times = []
    for _ in range(n):
        t0 = clock()
        step()
        times.append(clock() - t0)
    return statistics.median(times)


def profiled(step: Callable[[], Any], n: int) -> tuple[float, float]:
    """The median lookup event and the median outermost compiled-region event
    of ``n`` calls under torch's profiler."""
    from torch.profiler import ProfilerActivity, profile

    from stance_magic import probe

    with probe.quiet_fd2():
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    try:
        for _ in range(n):
            step()
    finally:
        with probe.quiet_fd2():
            prof.__exit__(None, None, None)
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    lookups, regions, end = [], [], -1.0
    for e in events:
        if e.name == probe.CACHE_LOOKUP_EVENT:
            lookups.append(e.time_range.elapsed_us() / 1e6)
        elif e.name.startswith(probe.COMPILED_REGION_EVENT) and e.time_range.start > end:
            regions.append(e.time_range.elapsed_us() / 1e6)
            end = e.time_range.end
    return statistics.median(lookups), statistics.median(regions)


def _paired(measured: Callable[[], Any], bare: Callable[[], float], bare_first: bool) -> tuple:
    """(measured(), bare()), run in the order asked."""
    if bare_first:
        b = bare()
        return measured(), b
    m = measured()
    return m, bare()


def anatomy(step: Callable[[], Any], n: int, rounds: int) -> dict:
    """Report against independent sources, ``rounds`` rounds of ``n`` calls."""
    import torch

    import stance_magic
    from stance_magic.probe.anatomy import CALIBRATIONS
    from stance_magic.session.engine import get_engine

    for _ in range(3):
        step()
    with stance_magic.measure("default"):  # warmed up with the recorder's hooks in
        for _ in range(n):
            step()
    rows: dict[str, list[tuple[float, float]]] = {
        "whole call": [],
        "lookup": [],
        "compiled code": [],
        "eager call": [],
    }
    wrapper, bounded = [], True
    # what the hooks add to a call of the measured loop, by the outside clock
    # (the loop's mean under measure() less the bare median): the own work a
    # timed call's parts cannot all leave out shows on a tiny call
    hooks: dict[str, list[float]] = {"default": [], "force_eager": []}

    def measured(stance: str) -> Any:
        with stance_magic.measure(stance) as rep:
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            loop = (time.perf_counter() - t0) / n
        return rep, loop

    recorder = get_engine().recorder
    for i in range(rounds):
        # each round bounds the lookup afresh (a burst of load over the
        # calibrations moves its round, not every round after it), in
        # windows of their own before the measured one, as a session's
        # first cells do
        recorder.forget_lookup_bounds()
        for _ in range(CALIBRATIONS):
            with stance_magic.measure("default"):
                for _ in range(n):
                    step()
        # each pair in alternating order, round to round: a drift in the
        # machine's speed moves both sides of a pair, not one
        first = i % 2 == 1
        (rep, loop), outside = _paired(
            lambda: measured("default"), lambda: per_call(step, n), first
        )
        hooks["default"].append(max(loop - outside, 0.0))
        p = rep.call_parts
        bounded = bounded and p is not None and p.lookup_bounded
        lookup, region = profiled(step, n)
        rows["whole call"].append((p.call_s, outside))
        rows["lookup"].append((p.lookup_s, lookup))
        rows["compiled code"].append((p.compiled_s, region))
        wrapper.append(p.wrapper_s)
        with torch.compiler.set_stance("force_eager"):
            (eager, loop), outside_eager = _paired(
                lambda: measured("force_eager"), lambda: per_call(step, n), first
            )
        hooks["force_eager"].append(max(loop - outside_eager, 0.0))
        rows["eager call"].append((eager.call_parts.eager_s, outside_eager))
    med = statistics.median
    return {
        "bounded": bounded,
        "wrapper_s": med(wrapper),
        "hooks_s": med(hooks["default"]),
        "eager_hooks_s": med(hooks["force_eager"]),
        "parts": {
            name: {
                "report_s": med(r for r, _ in pairs),
                "independent_s": med(i for _, i in pairs),
                "ratio": med(r / i for r, i in pairs),
                "round_ratios": [r / i for r, i in pairs],
            }
            for name, pairs in rows.items()
        },
    }


SOURCES = {
    "whole call": "outside clock",
    "lookup": "profiler lookup event",
    "compiled code": "profiler compiled region",
    "eager call": "outside clock, force_eager",
}


def workloads(quick: bool) -> list[tuple[str, Callable[[], Any], int]]:
    """(name, a step calling the compiled function, calls a loop)."""
    import models
    import torch

    out = []
    for nargs in (1, 64):
        ns: dict[str, Any] = {}
        names = ", ".join(f"a{i}" for i in range(nargs))
        exec(f"def f({names}):\n    return {' + '.join(f'a{i}' for i in range(nargs))} + 1\n", ns)
        cf = torch.compile(ns["f"], backend="eager")
        xs = [torch.ones(3) for _ in range(nargs)]
        what = "a tiny function, 1 argument" if nargs == 1 else "a function of 64 arguments"
        out.append((what, lambda cf=cf, xs=xs: cf(*xs), 200 if quick else 2000))
    torch.manual_seed(0)
    gpt = models.gpt2(layers=2 if quick else 4, dim=64 if quick else 128)
    cgpt = torch.compile(gpt, backend="eager")
    ids = torch.randint(0, 256, (1, 8))

    def gpt_step() -> Any:
        with torch.no_grad():
            return cgpt(ids, use_cache=False)

    out.append(("GPT-2 (forward, no KV cache)", gpt_step, 20 if quick else 50))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny counts (a smoke run)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    import torch

    from stance_magic.render import fmt_s

    torch.set_num_threads(1)  # on two busy cores the thread pool swings per-call times
    rounds = 2 if args.quick else 5
    print(
        f"the anatomy of a compiled call (Python {platform.python_version()}, torch "
        f"{torch.__version__}, 1 intra-op thread; medians of {rounds} rounds)"
    )
    results = []
    for name, step, n in workloads(args.quick):
        r = anatomy(step, n, rounds)
        r["workload"], r["calls_per_loop"] = name, n
        results.append(r)
        bound = "" if r["bounded"] else " (lookup not bounded by the profiler)"
        print(f"\n{name}: {n:,} calls a loop{bound}")
        print(f"  {'part':<14} {'report':>10} {'independent':>12}  {'ratio':>6}  source")
        for part, f in r["parts"].items():
            ok = 1 / TARGET_RATIO <= f["ratio"] <= TARGET_RATIO
            print(
                f"  {part:<14} {fmt_s(f['report_s']):>10} {fmt_s(f['independent_s']):>12}  "
                f"{f['ratio']:>5.2f}x  {SOURCES[part]} (within {TARGET_RATIO}x: "
                f"{'met' if ok else 'missed'})"
            )
        print(f"  {'wrapper':<14} {fmt_s(r['wrapper_s']):>10}  (the call less lookup and code)")
        print(
            f"  (the hooks add {fmt_s(r['hooks_s'])} to a call of the measured loop, "
            f"{fmt_s(r['eager_hooks_s'])} under force_eager: outside clock, loop mean less "
            "bare median)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"workloads": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
