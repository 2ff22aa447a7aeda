"""What newer torch tells about a recompile, used where it has it (issue 18,
item 5): the measured cell named in torch's own records
(``recompile_user_contexts``), the user's line that made a recompiling call,
and a torch.compile call's own ``recompile_limit=``.

Each figure is checked against torch's own records (``CompilationMetrics``:
``recompile_user_contexts``, ``stack_trace``, the refused attempt), torch's
log, its cache entries, IPython's numbering of cells, the cell's source and
a counting backend.
"""

from __future__ import annotations

import html
import inspect
import logging

import pytest
import torch
import torch._dynamo.utils as dynamo_utils
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import get_compilation_metrics

from stance_magic import probe
from stance_magic.build import frame_text
from stance_magic.engine import get_engine

from conftest import html_outputs, last, run

COUNTING_BACKEND = """
graph_runs = [0]
compiled_graphs = [0]
def counting(gm, example_inputs):
    compiled_graphs[0] += 1
    def run(*args):
        graph_runs[0] += 1
        return gm.forward(*args)
    return run
"""

HAS_CONTEXTS = probe.torch_version() >= probe.RECOMPILE_USER_CONTEXTS_SINCE
HAS_PER_CALL_LIMIT = "recompile_limit" in inspect.signature(torch.compile).parameters


def test_the_release_constants_match_this_torch():
    """Each constant says what the installed torch has."""
    fields = {f.name for f in dynamo_utils.CompilationMetrics.__dataclass_fields__.values()}
    has_hooks = hasattr(dynamo_utils, "register_hook_for_recompile_user_context")
    assert has_hooks == ("recompile_user_contexts" in fields)
    assert HAS_CONTEXTS == has_hooks, torch.__version__
    assert (probe.torch_version() >= probe.RECORD_STACK_TRACE_SINCE) == ("stack_trace" in fields)
    if probe.torch_version() >= probe.PER_CALL_RECOMPILE_LIMIT_SINCE:
        assert HAS_PER_CALL_LIMIT
    if probe.torch_version() < probe.RECOMPILE_USER_CONTEXTS_SINCE:  # 2.8
        assert not HAS_PER_CALL_LIMIT


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


# -- a torch.compile call's own recompile_limit= ------------------------------


@pytest.fixture
def limit_log():
    """torch's warning when a frame hits its recompile limit."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    lg = logging.getLogger("torch._dynamo.convert_frame")
    handler = Keep(logging.WARNING)
    lg.addHandler(handler)
    yield records
    lg.removeHandler(handler)


@pytest.mark.skipif(not HAS_PER_CALL_LIMIT, reason="this torch.compile has no recompile_limit=")
def test_a_per_call_recompile_limit_is_the_frames_limit(sh, limit_log):
    sh.run_cell(COUNTING_BACKEND)
    sh.run_cell(
        "def scale(x, n):\n"
        "    return x * n\n"
        "f = torch.compile(scale, backend=counting, dynamic=False, recompile_limit=2)\n"
        "def shift(x, n):\n"
        "    return x + n\n"
        "h = torch.compile(shift, backend=counting, dynamic=False)\n"
        "x = torch.ones(3)\n"
    )
    glob = torch._dynamo.config.recompile_limit
    assert glob != 2  # the global limit is not the one that applies
    res, cap = run(sh, "%%stance default\nfor n in range(1, 5):\n    f(x, n)\nh(x, 1); h(x, 2)")
    assert res.success, res.error_in_exec
    rep = last(sh)
    ns = sh.user_ns
    # the backend: 2 graphs for f, 2 for h; calls 1-2 of f ran compiled
    assert ns["compiled_graphs"][0] == 4
    assert ns["graph_runs"][0] == 2 + 2
    f_eager = 4 - 2
    # torch's records: two compiles of scale, then the attempt torch refused
    recs = [r for r in get_compilation_metrics()[-5:] if r.co_name != "shift"]
    assert [r.co_name for r in recs] == ["scale", "scale", None]
    assert recs[-1].fail_type and "limit" in recs[-1].fail_reason.lower()
    # torch's log names the limit it compared against: 2
    (warn,) = [r for r in limit_log if "hit config" in r.msg]
    assert warn.args[:2] == ("recompile_limit", 2), warn.args
    # the limit hit, with its limit and the calls that ran eagerly
    (lim,) = rep.recompile_limits
    assert lim.limit == 2 and lim.per_call and lim.config == "recompile_limit"
    assert lim.compile_id == str(recs[-1].compile_id)
    assert lim.eager_calls == f_eager == rep.limit_eager_calls
    # the budget: scale's entries (torch's cache) of its own limit; shift's
    # of the global one
    scale_code = ns["scale"].__code__
    entries = len(_debug_get_cache_entry_list(scale_code))
    assert entries == 2
    budgets = {b.where.split(" (")[0]: b for b in rep.recompile_budget}
    assert (budgets["scale"].entries, budgets["scale"].limit) == (entries, 2)
    assert budgets["scale"].per_call and budgets["scale"].left == 0
    shift_entries = len(_debug_get_cache_entry_list(ns["shift"].__code__))
    assert (budgets["shift"].entries, budgets["shift"].limit) == (shift_entries, glob)
    assert not budgets["shift"].per_call
    text = " ".join(str(rep).split())
    assert "2 of 2 entries" in text and "recompile_limit=2 of its torch.compile" in text
    assert f"torch._dynamo.config.recompile_limit = {glob}" not in text
    assert "torch._dynamo.config.recompile_limit = 2" not in text
    (page,) = [h for h in html_outputs(cap) if "sm-report" in h]
    assert "is at the recompile_limit=2 of its torch.compile" in page
    hint = rep.advice()[0]
    assert "recompile_limit= in its torch.compile call (now 2" in hint

    # the next cell: still at its limit; a new value runs eagerly at once
    ns["graph_runs"][0] = 0
    run(sh, "%%stance default -q\nf(x, 7)\nf(x, 1)")
    rep = last(sh)
    assert ns["graph_runs"][0] == 1 and rep.compiles == 0
    (lim,) = rep.recompile_limits
    assert lim.limit == 2 and lim.per_call and lim.eager_calls == 1
    (budget,) = [b for b in rep.recompile_budget if b.where.startswith("scale")]
    assert (budget.entries, budget.limit, budget.per_call) == (2, 2, True)


@pytest.mark.skipif(not HAS_PER_CALL_LIMIT, reason="this torch.compile has no recompile_limit=")
def test_a_frame_compiled_before_the_cell_keeps_its_per_call_limit(sh):
    """Compiled in an unmeasured cell, only looked up in the measured one: the
    budget is still the torch.compile call's own limit."""
    sh.run_cell(
        "def twice(x, n):\n"
        "    return x * n * 2\n"
        "k = torch.compile(twice, backend='eager', dynamic=False, recompile_limit=3)\n"
        "k(torch.ones(2), 1); k(torch.ones(2), 2)\n"
    )
    entries = len(_debug_get_cache_entry_list(sh.user_ns["twice"].__code__))
    assert entries == 2
    res, cap = run(sh, "%%stance default\nk(torch.ones(2), 1)")
    rep = last(sh)
    assert rep.compiles == 0 and rep.cache_hits == 1
    (budget,) = rep.recompile_budget
    assert (budget.entries, budget.limit, budget.per_call) == (entries, 3, True)
    assert "2 of 3 entries (1 left: the next recompile is the last)" in str(rep)
    hint = next(h for h in rep.advice() if "cache entries" in h)
    assert "the recompile_limit=3 of its torch.compile" in hint
