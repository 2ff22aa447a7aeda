"""Every call accounted for: a call that compiled, then ran its compiled
code, is neither an eager call nor a steady compiled one; the calls that ran
eagerly are those torch ran without compiled code, as the profiler's
``Torch-Compiled Region`` events tell (an outside source: the same calls,
bare, under the same stance)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from conftest import last, run

CELL = "for n in (2, 3, 4):\n    f(torch.ones(n))"
#: a new function each time (torch keeps a code's first inputs across resets:
#: the same lambda again would not be "first" under eager_then_compile)
SETUP = "f = torch.compile(lambda x: (x.sin() + {k}).cos(), backend='aot_eager')"
_fresh = itertools.count(1)


def _new_function(sh) -> None:
    assert sh.run_cell(SETUP.format(k=next(_fresh))).success


def _regions_bare(sh, stance: str) -> int:
    """Calls of the cell that ran compiled code, bare: the profiler's events."""
    torch.compiler.reset()
    _new_function(sh)
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
    _new_function(sh)
    res, _ = run(sh, f"%%stance {stance} -q\n{CELL}")
    assert res.success, res.error_in_exec
    rep = last(sh)
    eager = 3 - compiled
    assert rep.call_parts is not None
    assert rep.call_parts.eager_calls == eager, (stance, compiled, rep.call_parts)
    assert rep.eager_first_calls == (1 if stance == "eager_then_compile" else 0)


def test_a_stance_set_by_the_cells_own_code_counts_at_each_call(sh):
    """eager_then_compile set by the cell itself (``torch.compiler.set_stance``)
    under a %%stance default cell: its first call ran eagerly, as under
    %%stance eager_then_compile; the report says so."""
    compiled = _regions_bare(sh, "eager_then_compile")
    torch.compiler.reset()
    _new_function(sh)
    res, _ = run(
        sh,
        "%%stance default -q\n"
        "with torch.compiler.set_stance('eager_then_compile'):\n"
        "    for n in (2, 3, 4):\n        f(torch.ones(n))",
    )
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.eager_first_calls == 3 - compiled == 1
    assert rep.call_parts.eager_calls == 1


def test_aot_eager_then_compile_set_by_the_cell_names_the_backend_torch_used(sh):
    """Set by the cell's own code, aot_eager_then_compile compiles the first
    call with aot_eager, not the function's backend (a CompileCounter, which
    sees no graph): the report names aot_eager, as under %%stance."""
    sh.run_cell(
        "from torch._dynamo.testing import CompileCounter\n"
        "cnt = CompileCounter()\n"
        "g = torch.compile(lambda x: (x.sin() + 5).cos(), backend=cnt)"
    )
    res, _ = run(
        sh,
        "%%stance default -q\n"
        "with torch.compiler.set_stance('aot_eager_then_compile'):\n    g(torch.ones(2))",
    )
    assert res.success, res.error_in_exec
    assert sh.user_ns["cnt"].frame_count == 0  # torch's own backend compiled it
    (frame,) = [f for f in last(sh).frames if f.kind == "frame"]
    assert frame.backend == "aot_eager"


@pytest.mark.parametrize("stance", ["fail_on_recompile", "default -u"])
def test_a_refused_call_did_not_run_eagerly(sh, stance):
    """fail_on_recompile, and skip_guard_eval_unsafe (-u), refuse a call that
    needs a recompile: torch raises and the call runs nothing, so it is no
    call that ran eagerly."""
    _new_function(sh)
    assert sh.run_cell("f(torch.ones(2))").success
    res, _ = run(sh, f"%%stance {stance} -q\nf(torch.ones(3, 3))")
    assert isinstance(res.error_in_exec, RuntimeError)
    rep = last(sh)
    if stance == "fail_on_recompile":
        assert rep.refused_recompiles == 1
    assert rep.call_parts is None or rep.call_parts.eager_calls == 0, rep.call_parts


def test_a_call_made_while_handling_an_exception_still_counts(sh):
    """A call made inside an ``except`` block that runs eagerly is an eager
    call (the exception being handled is not its own)."""
    _new_function(sh)
    res, _ = run(
        sh,
        "%%stance force_eager -q\ntry:\n    raise KeyError\nexcept KeyError:\n"
        "    for _ in range(3):\n        f(torch.ones(2))",
    )
    assert res.success, res.error_in_exec
    assert last(sh).call_parts.eager_calls == 3
