"""The recompile limit: a frame at its limit, the calls that then run
eagerly, and the hint; under ``%stance watch`` too; the limit that applies
when a torch.compile call sets its own ``recompile_limit=``.

Each figure is checked against a source that does not go through
stance_magic: a counting backend (graphs compiled and graph runs), torch's
``CompilationMetrics`` records (the refused attempt), torch's warning when a
frame hits its limit, and the code object's cache entries.
"""

from __future__ import annotations

import logging

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import get_compilation_metrics

from conftest import HAS_PER_CALL_LIMIT, html_outputs, last, run


@pytest.fixture
def limit_two():
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    yield 2
    torch._dynamo.config.recompile_limit = old


def test_recompile_limit_is_reported_with_every_eager_call(counting, limit_two):
    sh = counting
    sh.run_cell(
        "@torch.compile(dynamic=False, backend=counting)\n"
        "def scale(x, n):\n"
        "    return x * n\n"
        "x = torch.ones(3)\n"
    )
    res, cap = run(sh, "%%stance default --no-plot\nfor n in range(1, 6):\n    scale(x, n)")
    assert res.success
    rep = last(sh)
    ns = sh.user_ns
    # independent: what the backend saw and ran
    assert ns["compiled_graphs"][0] == 2
    assert ns["graph_runs"][0] == 2  # calls 1 and 2 ran compiled graphs
    eager_runs = 5 - ns["graph_runs"][0]
    # torch's records: two compiles and one refused attempt without a code name
    recs = get_compilation_metrics()[-3:]
    assert [r.co_name for r in recs] == ["scale", "scale", None]
    # torch 2.13: Unsupported; 2.8: RecompileLimitExceeded
    assert recs[-1].fail_type in ("Unsupported", "RecompileLimitExceeded")
    assert "recompile" in recs[-1].fail_reason.lower() and "limit" in recs[-1].fail_reason
    assert rep.graphs == 2
    assert rep.compiles == 3 and rep.failed_compiles == 1
    assert len(rep.recompiles) == 2  # 0/0: n == 1 and 0/1: n == 2, as torch logged
    assert rep.cache_hits == 0 and rep.cache_misses == 5
    (lim,) = rep.recompile_limits
    assert lim.config == "recompile_limit" and lim.limit == 2
    assert lim.compile_id == str(recs[-1].compile_id)
    assert lim.where.startswith("scale (In [")
    assert lim.eager_calls == eager_runs == rep.limit_eager_calls == 3
    assert [f.reason for f in lim.failures] == ["0/1: n == 2", "0/0: n == 1"]
    text = str(rep)
    assert "recompile limit" in text and "torch._dynamo.config.recompile_limit = 2" in text
    assert "3 calls ran eagerly" in text
    (html,) = [h for h in html_outputs(cap) if "sm-report" in h]
    assert "recompile limit" in html
    hint = rep.advice()[0]
    assert "recompile_limit" in hint and "`n`" in hint and "dynamic=True" in hint
    assert rep.summary_row()["limit_eager_calls"] == 3

    # the next cell: still at its limit, a new value runs eagerly at once
    ns["graph_runs"][0] = 0
    run(sh, "%%stance default -q\nscale(x, 7)\nscale(x, 1)")
    rep = last(sh)
    assert ns["graph_runs"][0] == 1  # n=1 hit its entry; n=7 ran eagerly
    assert rep.cache_hits == 1 and rep.compiles == 0
    (lim,) = rep.recompile_limits
    assert lim.eager_calls == 1 and lim.compile_id is None
    # after a reset the frame compiles again: no limit reported
    sh.run_cell("torch.compiler.reset()")
    run(sh, "%%stance default -q\nscale(x, 7)")
    assert last(sh).recompile_limits == [] and last(sh).compiles == 1


def test_recompile_limit_on_a_changing_size_suggests_dynamic_shapes(counting, limit_two):
    sh = counting
    sh.run_cell("f = torch.compile(lambda x: x.cos(), backend=counting, dynamic=False)")
    run(sh, "%%stance default -q\nfor n in (2, 3, 4, 5):\n    f(torch.ones(n))")
    rep = last(sh)
    assert sh.user_ns["graph_runs"][0] == 2
    (lim,) = rep.recompile_limits
    assert lim.eager_calls == 2
    hint = next(h for h in rep.advice() if "recompile_limit" in h)
    assert "size mismatch" in hint and "mark_dynamic" in hint


def test_limit_under_watch_mode(counting, limit_two):
    sh = counting
    sh.run_cell("@torch.compile(dynamic=False, backend=counting)\ndef g(x, n):\n    return x + n")
    run(sh, "%stance watch on")
    run(sh, "for n in range(4):\n    g(torch.ones(2), n)")
    run(sh, "%stance watch off")
    rep = last(sh)
    assert rep.recompile_limits and rep.limit_eager_calls == 2


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
def test_a_per_call_recompile_limit_is_the_frames_limit(counting, limit_log):
    sh = counting
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
