"""What ``%stance diff`` costs: two cells of a 1,000-cell history compared,
beside rendering one report.

Run from the repository root::

    .venv/bin/python benchmarks/bench_diff.py            # about 20 s on 2 cores
    .venv/bin/python benchmarks/bench_diff.py --quick    # a smoke run

The history is made of real reports: a handful of cells measured with
``stance_magic.measure`` (a compile, a recompile for a new shape, cache
hits, a cell under ``force_eager``, a graph break), repeated with their
numbers changed until the history holds ``--cells`` reports. Then, in
interleaved rounds, the medians of:

- **diff**: naming two cells (``pick``, which scans the history), comparing
  them (``diff_cells``, which parses every cell's code once for the
  functions it compares: a 1,000-cell notebook here) and making its text and
  HTML, as ``%stance diff 2 998`` does (a real diff: a recompile, a stance
  and the counts differ);
- **report**: one report's text and HTML (``rep.views()``), what every
  measured cell shows.

Target: the diff under 50 ms.

Then what the compile-settings snapshot (``rep.settings``, which the diff
compares) adds to a measured cell: a ``%%stance -q`` cell of one cache hit
in a real ``InteractiveShell``, in interleaved batches with the snapshot
read and with it skipped (``probe.compile_settings`` swapped for a function
that returns ``{}``), medians of the batches; target: at most 1.01×.

A missed target is printed, never fatal.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace


def _history(cells: int) -> list:
    import torch

    import stance_magic
    from stance_magic.session.engine import get_engine

    def f(x):
        return x.sin() + 1

    def g(x):
        y = x.cos()
        torch._dynamo.graph_break()
        return y * 2

    cf = torch.compile(f, backend="eager")
    cg = torch.compile(g, backend="eager")
    made = []
    for stance, call in (
        ("default", lambda: cf(torch.ones(3))),
        ("default", lambda: cf(torch.ones(4))),
        ("default", lambda: [cf(torch.ones(4)) for _ in range(20)]),
        ("force_eager", lambda: cf(torch.ones(4))),
        ("default", lambda: cg(torch.ones(3))),
    ):
        with stance_magic.measure(stance) as m:
            call()
        made.append(m.report)
    get_engine().clear_history()
    return [replace(made[i % len(made)], index=i + 1, execution_count=i + 1) for i in range(cells)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.rounds

    from stance_magic.builder.diff import diff_cells, pick

    history = _history(args.cells)
    # the notebook's code: a cell per report, each defining a function, and
    # f redefined now and then (what a diff reads for the functions it shows)
    cells = {
        i + 1: (
            f"def f(x):\n    return x * {i}\n" if i % 50 == 0 else f"def h{i}(x):\n    return x\n"
        )
        for i in range(args.cells)
    }
    a_n, b_n = 2, args.cells - 2  # a recompile (In [2]) against force_eager
    diff_t, report_t = [], []
    rows = 0
    for r in range(rounds):
        for which in ("diff", "report") if r % 2 == 0 else ("report", "diff"):
            t = time.perf_counter()
            if which == "diff":
                a, b = pick(history, a_n, b_n)
                d = diff_cells(a, b, cells)
                d.text(), d.html()
                diff_t.append(time.perf_counter() - t)
                rows = len(d.rows)
            else:
                history[-1].views()
                report_t.append(time.perf_counter() - t)
    diff_ms = statistics.median(diff_t) * 1e3
    report_ms = statistics.median(report_t) * 1e3
    print(f"history: {len(history)} reports; In [{a_n}] vs In [{b_n}]: {rows} rows differ")
    print(f"{'':34}{'median':>8}")
    print(f"{'diff (pick + build + text + HTML)':34}{diff_ms:8.2f} ms")
    print(f"{'one report (text + HTML)':34}{report_ms:8.2f} ms")
    print(f"ratio diff / report: {diff_ms / report_ms:.2f}")
    verdict = "met" if diff_ms < 50 else "MISSED"
    print(f"target: diff under 50 ms: {verdict}")
    _settings_cost(6 if args.quick else 30)


def _settings_cost(rounds: int) -> None:
    """A measured cell with the settings snapshot and without, interleaved."""
    from IPython.core.interactiveshell import InteractiveShell

    from stance_magic import probe

    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext stance_magic")
    sh.run_cell(
        "import torch\nf = torch.compile(lambda x: x + 1, backend='eager')\n"
        "x = torch.ones(3)\ny = f(x)"
    )
    real = probe.compile_settings
    cell = "%%stance -q\ny = f(x)"
    for _ in range(100):
        sh.run_cell(cell)
    times: dict[str, list[float]] = {"read": [], "skipped": []}
    try:
        for r in range(rounds):
            for side in ("read", "skipped") if r % 2 else ("skipped", "read"):
                probe.compile_settings = real if side == "read" else dict  # type: ignore[assignment]
                t = time.perf_counter()
                for _ in range(100):
                    sh.run_cell(cell)
                times[side].append((time.perf_counter() - t) / 100)
    finally:
        probe.compile_settings = real
    on, off = statistics.median(times["read"]), statistics.median(times["skipped"])
    t = time.perf_counter()
    for _ in range(10_000):
        real()
    alone = (time.perf_counter() - t) / 10_000
    print(
        f"a %%stance -q cell of one cache hit: {on * 1e6:.1f} µs with the settings "
        f"snapshot, {off * 1e6:.1f} µs without: {on / off:.3f}× "
        f"(the snapshot alone, unchanged settings: {alone * 1e6:.2f} µs)"
    )
    verdict = "met" if on / off <= 1.01 else "MISSED"
    print(f"target: the snapshot at most 1.01× of the cell: {verdict}")


if __name__ == "__main__":
    main()
