"""Figures where torch.compile users get stuck (issue 16): the recompile limit,
a stance changed inside a cell, every guard that failed, interrupted compiles,
resume functions, phases of backends without AOTAutograd, half-done exports.

Each figure is checked against a source that does not go through
stance_magic: a counting backend (graphs compiled and graph runs), torch's
``CompilationMetrics`` records, torch's ``recompiles`` log records, the code
object's cache entries, the exceptions the cell caught.
"""

from __future__ import annotations

import os
import re

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import get_compilation_metrics

from stance_magic import probe
from stance_magic.probe import torch_version

from conftest import RECOMPILES_LOGGER, html_outputs, last, run, text_outputs, torch_log

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


@pytest.fixture
def counting(sh):
    sh.run_cell(COUNTING_BACKEND)
    return sh


@pytest.fixture
def limit_two():
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    yield 2
    torch._dynamo.config.recompile_limit = old


def failures(messages: list[str]) -> list[list[str]]:
    """Each recompile's guard failures, as torch's recompiles records list them."""
    entry = re.compile(r"^- \d+/\d+: ")  # torch indents each entry's text with "- "
    out = []
    for msg in messages:
        lines = [ln.strip() for ln in msg.splitlines()]
        out.append([ln[2:] for ln in lines if entry.match(ln)])
    return out


@pytest.fixture
def recompile_log():
    with torch_log(RECOMPILES_LOGGER, recompiles=True) as handler:
        yield handler


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


def test_eager_on_recompile_set_inside_the_cell_counts_fallbacks(counting):
    sh = counting
    sh.run_cell("g = torch.compile(lambda x: x * 2, backend=counting)\ng(torch.ones(2))")
    sh.user_ns["graph_runs"][0] = 0
    res, cap = run(
        sh,
        "%%stance default --no-plot\n"
        "with torch.compiler.set_stance('eager_on_recompile'):\n"
        "    for n in (2, 3, 4, 2):\n"
        "        g(torch.ones(n))",
    )
    assert res.success
    rep = last(sh)
    runs = sh.user_ns["graph_runs"][0]
    assert runs == 2 and sh.user_ns["compiled_graphs"][0] == 1  # no compile in the cell
    assert rep.compiles == 0
    assert rep.eager_fallbacks == 4 - runs == 2
    assert "set inside the cell" in str(rep)


def test_fail_on_recompile_decorator_inside_the_cell_counts_refusals(sh):
    sh.run_cell(
        "h = torch.compile(lambda x: x + 1, backend='eager')\n"
        "h(torch.ones(3))\n"
        "@torch.compiler.set_stance('fail_on_recompile')\n"
        "def strict(x):\n"
        "    return h(x)\n"
    )
    res, cap = run(
        sh,
        "%%stance default --no-plot\n"
        "caught = []\n"
        "try:\n"
        "    strict(torch.ones(7))\n"
        "except RuntimeError as e:\n"
        "    caught.append(str(e))\n",
    )
    assert res.success
    (torch_message,) = sh.user_ns["caught"]  # independent: torch's own refusal
    assert "fail_on_recompile" in torch_message
    rep = last(sh)
    assert rep.refused_recompiles == 1
    # named on every release (torch 2.8's refusal names none: its guard check does)
    (guard,) = rep.refused_guards
    assert "size mismatch at index 0. expected 3, actual 7" in guard
    if torch_version() >= probe.REFUSAL_GUARDS_SINCE:
        assert guard.split(": ", 1)[1] in torch_message


def test_every_failed_guard_is_shown_and_the_hint_follows_the_one_that_matters(sh, recompile_log):
    sh.run_cell(
        "SCALE = 2.0\n"
        "@torch.compile(backend='eager', dynamic=False)\n"
        "def f(x):\n"
        "    return x * SCALE\n"
        "for n in (2, 3, 4):\n"
        "    f(torch.ones(n))\n"
    )
    recompile_log.messages.clear()
    res, cap = run(sh, "%%stance default --no-plot\nSCALE = 5.0\nf(torch.ones(2))")
    assert res.success
    rep = last(sh)
    (torch_failures,) = failures(recompile_log.messages)
    assert len(torch_failures) == 3
    (rc,) = rep.recompile_details
    ours = [f.reason for f in rc.failures]
    # the same three failures, each entry's, in torch's order
    assert [t.split("  #")[0].strip() for t in torch_failures] == ours
    assert any("G['SCALE'] == 2.0" in r for r in ours)
    assert rc.reason == ours[0]  # torch's record keeps only the first
    text = str(rep)
    for r in ours:
        assert r in text
    hints = rep.advice()
    assert not any("eager_then_compile" in h or "mark_dynamic" in h for h in hints)
    assert any("SCALE" in h and "tensor" in h for h in hints)


def test_interrupted_compile_is_not_a_compiled_graph(sh):
    sh.run_cell(
        "def kb(gm, example_inputs):\n"
        "    raise KeyboardInterrupt\n"
        "def body(x):\n"
        "    return x.sin() + 1\n"
        "f = torch.compile(body, backend=kb)\n"
    )
    res, cap = run(sh, "%%stance default --no-plot\nf(torch.ones(3))")
    assert not res.success
    rep = last(sh)
    # independent: torch kept no cache entry, and wrote the record with no fail_type
    assert _debug_get_cache_entry_list(sh.user_ns["body"].__code__) == []
    assert get_compilation_metrics()[-1].fail_type is None
    assert rep.graphs == 0 and rep.failed_compiles == 1
    (frame,) = rep.frames
    assert frame.failed.startswith("KeyboardInterrupt") and frame.raised
    assert "1 graph compiled" not in str(rep) and "0 graphs compiled" in str(rep)


def test_resume_function_lookups_belong_to_the_function_that_broke(sh):
    sh.run_cell(
        "@torch.compile(backend='eager')\n"
        "def inner(x):\n"
        "    return x.cos()\n"
        "@torch.compiler.disable\n"
        "def bridge(x):\n"
        "    return inner(x) + 1\n"
        "@torch.compile(backend='eager')\n"
        "def outer(x):\n"
        "    y = x.sin()\n"
        "    y = bridge(y)\n"
        "    return y * 2\n"
        "outer(torch.ones(3))\n"
    )
    run(sh, "%%stance default -q\nfor _ in range(3):\n    outer(torch.ones(3))")
    rep = last(sh)
    # independent: outer has a resume function of its own (after the disabled
    # call), so each call looks up outer, its resume function, and inner
    outer_code = sh.user_ns["outer"]._torchdynamo_orig_callable.__code__
    codes = {e.code.co_name for e in _debug_get_cache_entry_list(outer_code)}
    assert codes  # outer compiled
    assert rep.cache_hits == 9 and rep.cache_misses == 0
    by_name = {t.name: t.timed + t.untimed for t in rep.guard_targets}
    assert by_name == {"outer": 6, "inner": 3}
    outer = next(t for t in rep.guard_targets if t.name == "outer")
    if probe.monitoring.AVAILABLE and probe.monitoring.EX_CALLS_SEEN:
        # 3.13+: the resume function's lookups are timed from their call,
        # all but the first from its caller (sys.monitoring); 3.12 gives no
        # event for torch's call of it (CALL_FUNCTION_EX): untimed as on 3.11
        assert (outer.timed, outer.untimed) == (5, 1)
    else:
        assert outer.timed == 3 and outer.untimed == 3


def test_phases_are_named_by_what_ran(sh):
    sh.run_cell(
        "def plain_backend(gm, example_inputs):\n"
        "    return gm.forward\n"
        "p = torch.compile(lambda x: x.sin() * 3, backend=plain_backend)\n"
        "q = torch.compile(lambda x: x.cos() * 3, backend='aot_eager')\n"
    )
    run(sh, "%%stance default -q\np(torch.ones(3))")
    rep = last(sh)
    rec = get_compilation_metrics()[-1]
    # torch times the whole backend call under its AOTAutograd column
    assert rec.aot_autograd_cumulative_compile_time_us
    assert rep.compile_breakdown["aot_autograd"] == 0.0
    assert rep.compile_breakdown["backend"] == pytest.approx(rec.backend_compile_time_s, abs=2e-6)
    assert "AOTAutograd" not in str(rep)
    run(sh, "%%stance default -q\nq(torch.ones(3))")
    assert last(sh).compile_breakdown["aot_autograd"] > 0


def test_history_export_writes_both_or_neither(sh, tmp_path):
    sh.run_cell("r = torch.compile(lambda x: x + 1, backend='eager')")
    run(sh, "%%stance default -q\nr(torch.ones(2))")
    good = tmp_path / "good.csv"
    res, cap = run(sh, f"%stance history --csv {good} --json {tmp_path}/nope/x.json")
    assert not res.success
    assert not good.exists()
    err = str(res.error_in_exec)
    assert "nope" in err and "nothing was written" in err
    res, cap = run(sh, f"%stance history --csv {good} --json {tmp_path}/x.json -q")
    assert res.success and good.exists() and (tmp_path / "x.json").exists()


def test_history_export_says_what_was_written_when_the_second_fails(tmp_path, monkeypatch):
    from stance_magic import export

    real = export.atomic_write
    calls = []

    def flaky(path, text):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(export, "atomic_write", flaky)
    with pytest.raises(export.ExportError) as info:
        export.write_exports([], tmp_path / "a.csv", tmp_path / "b.json")
    assert "already written" in str(info.value) and "a.csv" in str(info.value)
    assert os.path.exists(tmp_path / "a.csv")


def test_lookup_figure_is_named_for_what_it_times(sh):
    sh.run_cell("r = torch.compile(lambda x: x + 1, backend='eager')\nr(torch.ones(2))")
    res, cap = run(sh, "%%stance default --no-plot\nfor _ in range(3):\n    r(torch.ones(2))")
    text = "\n".join(text_outputs(cap))
    (html,) = [h for h in html_outputs(cap) if "sm-report" in h]
    for out in (text, html):
        assert "cache lookups" in out
        assert "guard evaluation" not in out and "evaluation" not in out
