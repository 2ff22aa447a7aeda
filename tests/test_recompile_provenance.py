"""Where a recompile came from: the measured cell named in torch's own
records (``recompile_user_contexts``, on a torch that has them), the user's
line that made a recompiling call, and which frames count as the user's.

Each figure is checked against torch's own records (``CompilationMetrics``:
``recompile_user_contexts``, ``stack_trace``), torch's list of context hooks,
IPython's numbering of cells and the cell's source.
"""

from __future__ import annotations

import html
import inspect

import pytest
import torch
import torch._dynamo.utils as dynamo_utils
from torch._dynamo.utils import get_compilation_metrics

from stance_magic import probe
from stance_magic.builder import frame_text
from stance_magic.session.engine import get_engine

from conftest import HAS_CONTEXTS, html_outputs, last, run

# -- the measured cell named in torch's records ------------------------------


@pytest.fixture
def torch_context_hooks():
    """torch's list of recompile-user-context hooks, put back as found."""
    before = dynamo_utils._recompile_user_contexts
    saved = list(before) if before is not None else None
    yield
    if before is not None:
        before[:] = saved
    dynamo_utils._recompile_user_contexts = before


def _contexts(rec) -> set[str] | None:
    return rec.recompile_user_contexts


@pytest.mark.skipif(not HAS_CONTEXTS, reason="this torch has no recompile_user_contexts")
def test_a_measured_recompile_names_its_cell_in_torchs_record(sh, torch_context_hooks):
    sh.run_cell("f = torch.compile(lambda x, n: x * n, backend='eager', dynamic=False)")
    sh.run_cell("f(torch.ones(2), 1)")  # compiled outside any measured cell
    assert _contexts(get_compilation_metrics()[-1]) is None
    res, _ = run(sh, "%%stance default -q\nf(torch.ones(2), 2)")
    assert res.success, res.error_in_exec
    rec = get_compilation_metrics()[-1]
    assert rec.recompile_reason  # a recompile, as torch records it
    # the cell's number as IPython gave it, the stance the cell ran under
    assert _contexts(rec) == {f"stance_magic In [{res.execution_count}] (default)"}
    assert last(sh).execution_count == res.execution_count
    # a recompile outside any measured cell: nothing from us, and torch's
    # list is as empty as before (so torch stores no field at all)
    sh.run_cell("f(torch.ones(2), 3)")
    rec = get_compilation_metrics()[-1]
    assert rec.recompile_reason and _contexts(rec) is None
    assert not dynamo_utils.get_hook_for_recompile_user_context()
    assert not get_engine().recorder.installed

    # torch calls the hooks on a first compile too: the stance is the cell's
    sh.run_cell("g = torch.compile(lambda x: x.cos(), backend='eager')")
    res, _ = run(sh, "%%stance eager_then_compile -q\ng(torch.ones(2)); g(torch.ones(2))")
    rec = get_compilation_metrics()[-1]
    assert rec.co_name == "<lambda>" and not rec.recompile_reason
    assert _contexts(rec) == {f"stance_magic In [{res.execution_count}] (eager_then_compile)"}


@pytest.mark.skipif(not HAS_CONTEXTS, reason="this torch has no recompile_user_contexts")
def test_a_users_own_context_hook_keeps_working(sh, torch_context_hooks):
    calls: list[int] = []

    def epoch() -> str:
        calls.append(1)
        return "epoch 3"

    dynamo_utils.register_hook_for_recompile_user_context(epoch)
    sh.run_cell("f = torch.compile(lambda x, n: x + n, backend='eager', dynamic=False)")
    sh.run_cell("f(torch.ones(2), 1)")
    assert _contexts(get_compilation_metrics()[-1]) == {"epoch 3"}
    res, _ = run(sh, "%%stance default -q\nf(torch.ones(2), 2)")
    rec = get_compilation_metrics()[-1]
    assert _contexts(rec) == {"epoch 3", f"stance_magic In [{res.execution_count}] (default)"}
    sh.run_cell("f(torch.ones(2), 3)")
    assert _contexts(get_compilation_metrics()[-1]) == {"epoch 3"}
    assert len(calls) == 3  # once per compile, ours in place or not
    # ours is out of torch's list, the user's is still in it
    assert dynamo_utils.get_hook_for_recompile_user_context() == [epoch]


@pytest.mark.skipif(not HAS_CONTEXTS, reason="this torch has no recompile_user_contexts")
def test_a_watched_cell_is_named_by_its_number(sh, torch_context_hooks):
    """Under %stance watch the cell's number is known only when it ends: the
    name torch stores is read from the running cell when torch compiles."""
    sh.run_cell("f = torch.compile(lambda x, n: x - n, backend='eager', dynamic=False)")
    run(sh, "%stance watch on")
    try:
        res, _ = run(sh, "y = f(torch.ones(2), 1)")
    finally:
        run(sh, "%stance watch off")
    rec = get_compilation_metrics()[-1]
    assert rec.co_name == "<lambda>"
    assert _contexts(rec) == {f"stance_magic In [{res.execution_count}] (default)"}
    assert last(sh).execution_count == res.execution_count


# -- the user's line that made the recompiling call --------------------------


def _line_of(source: str, text: str) -> int:
    """The 1-based line of ``source`` that contains ``text``."""
    (n,) = [i for i, ln in enumerate(source.splitlines(), 1) if text in ln]
    return n


def test_a_recompile_row_names_the_users_calling_line(sh):
    helper = "def helper(g, n):\n    y = torch.ones(2)\n    return g(y, n)\n"
    res_helper, _ = run(sh, helper)
    sh.run_cell("f = torch.compile(lambda x, n: x * n, backend='eager', dynamic=False)")
    sh.run_cell("f(torch.ones(2), 1)")
    body = "x = torch.ones(2)\nhelper(f, 2)\nf(x, 3)"
    res, cap = run(sh, "%%stance default\n" + body)
    assert res.success, res.error_in_exec
    rep = last(sh)
    recs = get_compilation_metrics()[-2:]
    assert [str(r.compile_id) for r in recs] == [r.compile_id for r in rep.recompile_details]
    through, direct = rep.recompile_details
    # the lines, from the sources the cells were run with
    cell, here = f"In [{res_helper.execution_count}]", f"In [{res.execution_count}]"
    helper_line = _line_of(helper, "return g(y, n)")
    assert through.called_from == (
        f"{cell}, line {helper_line} in helper, from {here}, line {_line_of(body, 'helper(f')}"
    )
    assert through.stack[:2] == [
        f"{cell}, line {helper_line} in helper",
        f"{here}, line {_line_of(body, 'helper(f')}",
    ]
    assert direct.called_from == f"{here}, line {_line_of(body, 'f(x, 3)')}"
    assert direct.stack == [direct.called_from]
    text = str(rep)
    assert f"called from {through.called_from}" in text
    assert f"called from {direct.called_from}" in text
    (page,) = [h for h in html_outputs(cap) if "sm-report" in h]
    assert html.escape(f"called from {through.called_from}") in page
    if probe.torch_version() < probe.RECORD_STACK_TRACE_SINCE:
        assert all(not hasattr(r, "stack_trace") for r in recs)
        return
    # torch's own record: the user frames it lists are our outer ones, in
    # order (2.13 and 2.15 cut the calling line itself under this stance)
    for detail, rec in zip(rep.recompile_details, recs):
        theirs = [frame_text(*fr) for fr in probe.record_user_frames(rec)]
        assert detail.stack[len(detail.stack) - len(theirs) :] == theirs, (theirs, detail.stack)
        assert len(detail.stack) - len(theirs) <= 1
    # the call through helper: torch's record has the cell's line
    assert frame_text(*probe.record_user_frames(recs[0])[-1]) == through.stack[-1]


def test_only_user_frames_are_kept():
    torch_dir = torch.__file__.rsplit("/", 1)[0]
    assert not probe.is_user_file(f"{torch_dir}/_dynamo/eval_frame.py")
    assert not probe.is_user_file(inspect.getfile(inspect))  # the standard library
    assert not probe.is_user_file(probe.__file__)  # stance_magic's own
    assert probe.is_user_file("<ipython-input-3-0123456789ab>")
    assert probe.is_user_file(__file__)
