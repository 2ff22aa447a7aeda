"""What memory measuring (``%%stance -m``) costs, and what it measures.

Run from the repository root::

    .venv/bin/python benchmarks/bench_memory.py            # about a minute on 2 cores
    .venv/bin/python benchmarks/bench_memory.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_memory.py --json out.json

Three workloads, each run inside ``stance_magic.measure()`` with and without
``memory=True``, interleaved round by round (medians of paired ratios):

* GPT-2 (small config, random weights) generating 12 tokens, compiled, warm;
* a training step of 8 chained ``tanh(sin·cos)`` blocks on a 256×1024 input
  (the ``aot_eager_then_compile`` example), compiled with ``aot_eager``, warm;
* a Python loop of 20,000 small tensor operations (many allocations: the
  worst case for the method, which reads one event per allocation and free).

For each: the block's own time (what the report shows as wall time) with
memory on / off, the time until the report is ready (reading the profiler's
events back included), the allocation events read, and the peak measured.
Then the training step's first-call peak under ``eager_then_compile`` and
``aot_eager_then_compile`` (each from cold), the figure torch's
documentation gives the latter's reason to exist for.
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

import jsonenv

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def workloads(quick: bool) -> list[tuple[str, Callable[[], Any]]]:
    import models
    import torch

    torch.manual_seed(0)
    gpt = torch.compile(models.gpt2(), backend="eager")
    ids = torch.randint(0, 256, (1, 8))

    def generation() -> Any:
        return models.generate(gpt, ids, 4 if quick else 12)

    w = torch.randn(256, 1024, requires_grad=True)
    blocks = torch.compile(_blocks, backend="aot_eager")

    def train_step() -> None:
        blocks(w).sum().backward()
        w.grad = None

    n = 2000 if quick else 20000

    def small_ops() -> Any:
        a = torch.ones(64)
        for _ in range(n):
            a = a * 1.0001 + 0.0001
        return a

    return [
        ("GPT-2 generation, 12 tokens (compiled, warm)", generation),
        ("training step, 8 tanh(sin·cos) blocks 256×1024 (aot_eager, warm)", train_step),
        (f"Python loop of {n:,} small ops (allocation-heavy)", small_ops),
    ]


def _blocks(x: Any) -> Any:
    import torch

    for _ in range(8):
        x = torch.tanh(x.sin() * x.cos())
    return x


def measure(name: str, work: Callable[[], Any], rounds: int) -> dict[str, Any]:
    import stance_magic

    for _ in range(2):
        work()
    off, on, on_total, events, peaks = [], [], [], [], []
    for i in range(rounds):
        for memory in (False, True) if i % 2 == 0 else (True, False):
            t0 = time.perf_counter()
            with stance_magic.measure("default", memory=memory) as rep:
                work()
            total = time.perf_counter() - t0
            if memory:
                on.append(rep.wall_s)
                on_total.append(total)
                events.append(rep.memory[0].events)
                peaks.append(rep.peak_bytes)
            else:
                off.append(rep.wall_s)
    pairs = list(zip(on, off))
    return {
        "workload": name,
        "off_s": statistics.median(off),
        "on_s": statistics.median(on),
        "on_until_report_s": statistics.median(on_total),
        "ratio": statistics.median(a / b for a, b in pairs),
        "ratio_until_report": statistics.median(a / b for a, b in zip(on_total, off)),
        "events": statistics.median(events),
        "peak_bytes": statistics.median(peaks),
    }


def first_call_peaks() -> dict[str, int]:
    import torch

    import stance_magic
    from stance_magic import probe

    out = {}
    w = torch.randn(256, 1024, requires_grad=True)
    blocks = torch.compile(_blocks, backend="aot_eager")
    for stance in ("force_eager", "eager_then_compile", "aot_eager_then_compile"):
        probe.reset_compiled_code()
        with stance_magic.measure(stance, memory=True) as rep:
            blocks(w).sum().backward()
        w.grad = None
        out[stance] = rep.peak_bytes
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny counts (a smoke run)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    import torch

    from stance_magic.render import fmt_bytes, fmt_s

    t_start = time.perf_counter()
    rounds = 3 if args.quick else 21
    results = [measure(name, work, rounds) for name, work in workloads(args.quick)]
    peaks = first_call_peaks()
    print(
        f"memory measuring (-m) cost (Python {platform.python_version()}, torch "
        f"{torch.__version__}, {rounds} interleaved rounds, medians of paired ratios)"
    )
    for r in results:
        print(f"\n{r['workload']}")
        print(f"  without -m                 {fmt_s(r['off_s'])}")
        print(f"  with -m (cell)             {fmt_s(r['on_s'])}   ratio {r['ratio']:.3f}x")
        print(
            f"  with -m (until the report) {fmt_s(r['on_until_report_s'])}   "
            f"ratio {r['ratio_until_report']:.3f}x  ({r['events']:,.0f} allocation events read)"
        )
        print(f"  peak measured              {fmt_bytes(r['peak_bytes'])}")
    print("\ntraining step, first call from cold (peak above the start):")
    for stance, peak in peaks.items():
        print(f"  {stance:<24} {fmt_bytes(peak)}")
    etc, aot = peaks["eager_then_compile"], peaks["aot_eager_then_compile"]
    print(f"  aot_eager_then_compile vs eager_then_compile: {aot / etc - 1:+.0%}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "workloads": results,
                    "first_call_peaks": peaks,
                    "rounds": rounds,
                    "env": jsonenv.environment(),
                    "command": jsonenv.command("bench_memory.py", argv),
                    "seconds": time.perf_counter() - t_start,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
