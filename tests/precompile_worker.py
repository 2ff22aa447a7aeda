"""A "kernel" for the precompiled-frames tests: a real IPython shell in a
process of its own (its cache directory from ``TORCHINDUCTOR_CACHE_DIR``)
that runs the cells given as a JSON list on the command line, then prints one
JSON object: each cell's error (or None), the values of ``y`` and ``notes``
in the user namespace, torch's Dynamo-cache counters, and the last measured cell's
compiles, graphs, calls and precompiled-frame lookups.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    cells = json.loads(sys.argv[1])
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    errors = []
    raised_in = []
    for cell in cells:
        res = sh.run_cell(cell, store_history=True)
        err = res.error_in_exec or res.error_before_exec
        errors.append(None if err is None else f"{type(err).__name__}: {err}")
        raised_in.append(None if err is None else _innermost(err))
    import torch
    from torch._dynamo.utils import counters

    import stance_magic

    history = stance_magic.history()
    rep = history[-1] if history else None
    y = sh.user_ns.get("y")
    out = {
        "errors": errors,
        # the function each error was raised in (the innermost frame)
        "raised_in": raised_in,
        "y": y.tolist() if isinstance(y, torch.Tensor) else None,
        "dynamo_cache": dict(counters["dynamo_cache"]),
        "notes": sh.user_ns.get("notes"),
        "report": None
        if rep is None
        else {
            "compiles": rep.compiles,
            "graphs": rep.graphs,
            "calls": {"cached": rep.calls.cached, "compiled": rep.calls.compiled},
            "precompiled": [(p.name, p.outcome, p.why) for p in rep.precompiled],
            "failed_guards": [list(p.failed_guards) for p in rep.precompiled],
            "text": str(rep),
        },
    }
    print("RESULT " + json.dumps(out))


def _innermost(err: BaseException) -> str:
    tb = err.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return getattr(code, "co_qualname", code.co_name)


if __name__ == "__main__":
    main()
