"""Every call accounted for: a call that compiled, then ran its compiled
code, is neither an eager call nor a steady compiled one; the calls that ran
eagerly are those torch ran without compiled code, as the profiler's
``Torch-Compiled Region`` events tell (an outside source: the same calls,
bare, under the same stance)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from conftest import last, run

CELL = "for n in (2, 3, 4):\n    f(torch.ones(n))"
#: a new function each time (torch keeps a code's first inputs across resets:
#: the same lambda again would not be "first" under eager_then_compile)
SETUP = "f = torch.compile(lambda x: (x.sin() + {k}).cos(), backend='aot_eager')"


def _regions_bare(sh, stance: str) -> int:
    """Calls of the cell that ran compiled code, bare: the profiler's events."""
    torch.compiler.reset()
    sh.run_cell(SETUP.format(k=1))
    with torch.compiler.set_stance(stance), profile(activities=[ProfilerActivity.CPU]) as p:
        exec(CELL, sh.user_ns)
    return sum(1 for e in p.events() if e.name.startswith("Torch-Compiled Region"))


@pytest.mark.parametrize("stance", ["eager_then_compile", "aot_eager_then_compile", "default"])
def test_a_call_that_compiled_is_not_counted_as_eager(sh, stance):
    """Three calls, three sizes: under eager_then_compile torch runs the
    first eagerly and compiles on the second; under aot_eager_then_compile
    the first compiles with aot_eager; under default the first compiles.
    The call that compiled ran its compiled code."""
    compiled = _regions_bare(sh, stance)
    torch.compiler.reset()
    sh.run_cell(SETUP.format(k=2))
    res, _ = run(sh, f"%%stance {stance} -q\n{CELL}")
    assert res.success, res.error_in_exec
    rep = last(sh)
    eager = 3 - compiled
    assert rep.call_parts is not None
    assert rep.call_parts.eager_calls == eager, (stance, compiled, rep.call_parts)
    assert rep.eager_first_calls == (1 if stance == "eager_then_compile" else 0)
