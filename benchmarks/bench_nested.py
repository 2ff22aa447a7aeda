"""Nested lookups after graph breaks: the figure against the profiler, and what
timing them from their call costs (Python 3.12+, ``sys.monitoring``).

Run from the repository root::

    .venv/bin/python benchmarks/bench_nested.py            # about 30 s on 2 cores
    .venv/bin/python benchmarks/bench_nested.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_nested.py --json out.json

GPT-2 (2 blocks, 64 wide, ``backend="eager"``) with a forward hook that
prints on every block: each generation step breaks the graph in every block,
so most cache lookups are nested (resume functions, frames compiled on
their own). Warmed up (compiled, and each caller seen once in a measured
cell), then in interleaved rounds, in one process:

* **plain**: the generation in an unmeasured cell;
* **measured**: the same under ``%%stance default -q``;
* **measured, events off**: the same with the recorder's ``sys.monitoring``
  events left off (nested lookups then counted, not timed);
* **profiler**: the median ``TorchDynamo Cache Lookup`` event of a plain run
  under ``torch.profiler``, against the report's median lookup.

On Python 3.10/3.11 there are no such events; the script says so and prints
the rest. Ratios are paired per round; the exit status is always 0.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

import jsonenv

REPO = Path(__file__).resolve().parent.parent

SETUP = """
import io, contextlib, torch, models, stance_magic
gpt = models.gpt2()
def loud(mod, args, out):
    print('block out', out[0].shape)
for block in gpt.transformer.h:
    block.register_forward_hook(loud)
cgpt = torch.compile(gpt, backend='eager')
ids = torch.randint(0, 256, (1, 8))
"""
GEN = "with contextlib.redirect_stdout(io.StringIO()):\n    out = models.generate(cgpt, ids, 3)"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds (a smoke run)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    rounds = 3 if args.quick else args.rounds
    sys.path.insert(0, str(REPO / "tests"))
    import torch
    from IPython.core.interactiveshell import InteractiveShell

    import stance_magic
    from stance_magic import probe

    torch.set_num_threads(1)
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext stance_magic")
    assert sh.run_cell(SETUP).success
    measured = f"%%stance default -q\n{GEN}"
    for _ in range(2):  # compile, then each caller seen once while measured
        assert sh.run_cell(measured).success
    rec = stance_magic.get_engine().recorder
    events_on = rec._resume.start

    def run(cell: str, events: bool = True) -> float:
        rec._resume.start = events_on if events else (lambda: False)
        try:
            t0 = time.perf_counter()
            assert sh.run_cell(cell).success
            return time.perf_counter() - t0
        finally:
            rec._resume.start = events_on

    res: dict[str, list[float]] = {"plain": [], "measured": [], "events_off": []}
    medians: list[float] = []
    untimed: list[int] = []
    for r in range(rounds):
        order = ["plain", "measured", "events_off"]
        order = order[r % 3 :] + order[: r % 3]
        for k in order:
            cell = GEN if k == "plain" else measured
            res[k].append(run(cell, events=k != "events_off"))
            if k == "measured":
                rep = stance_magic.history()[-1]
                medians.append(rep.lookups.per_lookup_s or 0.0)
                untimed.append(rep.lookups.untimed)
    from torch.profiler import ProfilerActivity, profile

    with probe.quiet_fd2(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with contextlib.redirect_stdout(io.StringIO()):
            sh.user_ns["models"].generate(sh.user_ns["cgpt"], sh.user_ns["ids"], 3)
    events = [e.cpu_time_total / 1e6 for e in prof.events() if e.name == probe.CACHE_LOOKUP_EVENT]

    def paired(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(res[a], res[b]))

    print("stance_magic: nested lookups after graph breaks (GPT-2 with a printing hook per block)")
    print(
        f"  python {sys.version.split()[0]}, torch {torch.__version__}, {rounds} interleaved rounds"
    )
    for k, label in (
        ("plain", "plain cell"),
        ("measured", "%%stance default -q"),
        ("events_off", "%%stance default -q, sys.monitoring events off"),
    ):
        print(f"  {label:50s} {statistics.median(res[k]) * 1e3:8.2f} ms")
    w = 50
    print(f"  {'measured / plain (paired)':{w}s} {paired('measured', 'plain'):.3f}×")
    if probe.monitoring.AVAILABLE:
        on_off = paired("measured", "events_off")
        print(f"  {'events on / off (what timing nested lookups costs)':{w}s} {on_off:.3f}×")
        print(f"  {'lookups left untimed per measured cell':{w}s} {max(untimed)}")
    else:
        print("  nested lookups timed from their call: needs Python 3.12+ (sys.monitoring)")
    ours = statistics.median(medians)
    prof_med = statistics.median(events) if events else float("nan")
    which = "every lookup" if probe.monitoring.AVAILABLE else "the top-level lookups only"
    print(
        f"  median lookup: report {ours * 1e6:.1f} µs ({which}), profiler "
        f"{prof_med * 1e6:.1f} µs ({len(events)} events): {ours / prof_med:.2f}×"
    )
    if args.json:
        out = {
            "rounds": rounds,
            "monitoring": probe.monitoring.AVAILABLE,
            "median_s": {k: statistics.median(v) for k, v in res.items()},
            "measured_vs_plain": paired("measured", "plain"),
            "events_on_vs_off": (
                paired("measured", "events_off") if probe.monitoring.AVAILABLE else None
            ),
            "untimed_max": max(untimed) if probe.monitoring.AVAILABLE else None,
            "report_lookup_s": ours,
            "profiler_lookup_s": prof_med if events else None,
            "profiler_events": len(events),
            "env": jsonenv.environment(),
            "command": jsonenv.command("bench_nested.py", argv),
            "seconds": time.perf_counter() - t_start,
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    torch.compiler.reset()  # before the interpreter's teardown frees torch's scopes


if __name__ == "__main__":
    main()
