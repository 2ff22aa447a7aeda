"""One rank of tests/test_ranks.py, started by ``torchrun --nproc-per-node 2``.

Joins a gloo process group from torchrun's environment, runs ``%%stance``
cells in a real InteractiveShell (rank 1 fed different shapes, a
``fail_on_recompile`` refusal on rank 1 only, a graph break on rank 1 only)
and writes what each rank saw to ``OUT/rank<N>.json``. Not a test module.

Usage: ``python -m torch.distributed.run --nproc-per-node 2 tests/rank_worker.py OUT``
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
import traceback
from pathlib import Path


def main(out: Path) -> None:
    import torch
    import torch.distributed as dist
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    import stance_magic

    rank = int(os.environ["RANK"])
    result: dict = {"rank": rank, "package": stance_magic.__file__, "cells": {}}
    calls = {"gather_object": 0, "all_gather_object": 0}
    for name in calls:
        original = getattr(dist, name)

        def counted(*a, _name=name, _original=original, **k):
            calls[_name] += 1
            return _original(*a, **k)

        setattr(dist, name, counted)

    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    sh.display_formatter.active_types = list(sh.display_formatter.format_types)

    def cell(key: str, code: str) -> None:
        before = dict(calls)
        with capture_output() as cap:
            res = sh.run_cell(code, store_history=True)
        err = res.error_in_exec or res.error_before_exec
        result["cells"][key] = {
            "success": res.success,
            "error": f"{type(err).__name__}: {err}" if err else None,
            "stdout": cap.stdout,
            "stderr": cap.stderr,
            "text": [o.data.get("text/plain", "") for o in cap.outputs],
            "html": [o.data.get("text/html", "") for o in cap.outputs if "text/html" in o.data],
            "images": sum("image/png" in o.data for o in cap.outputs),
            "collectives": {k: calls[k] - before[k] for k in calls},
        }

    sh.run_cell("%load_ext stance_magic")
    # What the history's observers (an open panel) see when a report is
    # published: it must already carry the combined view, or the rank note.
    published: list[dict] = []

    def on_report(event: str, value) -> None:
        if event == "report":
            gathered = None if value.gathered is None else dataclasses.asdict(value.gathered)
            published.append({"ranks": value.ranks is not None, "gathered": gathered})

    stance_magic.get_engine().observe(on_report)
    cell("no_group", "%%stance --ranks\npass")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    sh.user_ns.update(rank=rank, torch=torch, stance_magic=stance_magic)
    sh.run_cell(
        "def fn(x):\n    return x.sin() + 1\n"
        "f = torch.compile(fn, backend='eager')\n"
        "def gfn(x):\n    y = x.cos()\n    if rank == 1:\n        torch._dynamo.graph_break()\n"
        "    return y + 1\n"
        "g = torch.compile(gfn, backend='eager')\n"
    )
    # a plain cell and a plain line in a process group: no collective
    cell("plain", "%%stance -q\ny = f(torch.randn(8, 4))")
    cell("plain_line", "%stance default")
    # rank 1 fed a different shape
    cell("shapes", "%%stance --ranks\ny = f(torch.randn(16 if rank == 1 else 8, 4))")
    # the same stance on every rank, checked in one line
    cell("session", "%stance fail_on_recompile --ranks")
    cell(
        "refused",
        "%%stance --ranks\ny = f(torch.randn(8, 4, 2) if rank == 1 else torch.randn(8, 4))",
    )
    cell("session_back", "%stance default --ranks -q")
    # a graph break on rank 1 only, whole reports gathered
    cell("breaks", "%%stance --ranks --full\nz = g(torch.randn(8, 4))")
    # the Python API
    f = sh.user_ns["f"]
    with stance_magic.measure(ranks=True) as rep:
        f(torch.randn(8, 4))
    view = rep.ranks
    result["api"] = {
        "view": None if view is None else str(view),
        "divergent": None if view is None else len(view.divergent),
        "gathered": None if rep.gathered is None else dataclasses.asdict(rep.gathered),
        "report_text": str(rep),
    }
    hist = [r for r in stance_magic.history() if r.ranks is not None]
    result["views"] = [
        {
            "rows": [dataclasses.asdict(r) for r in r.ranks.rows],
            "flags": [dataclasses.asdict(f) for f in r.ranks.flags],
            "mode": r.ranks.mode,
            "reports": None if r.ranks.reports is None else len(r.ranks.reports),
            "png": len(_png(r.ranks)),
        }
        for r in hist
    ]
    result["own_gathered"] = [
        None if r.gathered is None else dataclasses.asdict(r.gathered)
        for r in stance_magic.history()
    ]
    result["own_text"] = [str(r) for r in stance_magic.history()]
    result["published"] = published
    dist.barrier()
    dist.destroy_process_group()
    (out / f"rank{rank}.json").write_text(json.dumps(result, indent=1, default=str))


def _png(view) -> bytes:
    from stance_magic.plots import figure_png

    return figure_png(view.figure())


if __name__ == "__main__":
    target = Path(sys.argv[1])
    try:
        main(target)
    except BaseException:
        (target / f"error{os.environ.get('RANK', '')}.txt").write_text(traceback.format_exc())
        raise
