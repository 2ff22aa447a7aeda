"""Two measured cells compared (``%stance diff``, ``stance_magic.diff``).

Each scenario has a known cause, checked against what torch itself says
(a CompileCounter backend counts the frames torch compiled, torch's guard
failure text, torch's graph-break counter, torch's config), in a real
shell; every figure of a diff is its two reports' own (B minus A); the
noise rule's arithmetic is tested with exact figures.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from torch._dynamo.utils import counters

from stance_magic.builder.diff import DiffError, diff_cells, pick
from stance_magic.report import CellDiff, CellReport
from stance_magic.session.engine import get_engine

from conftest import run

SETUP = """\
import torch, stance_magic
from torch._dynamo.testing import CompileCounter
cnt = CompileCounter()
def helper(x):
    return x.sin()
def f(x):
    return helper(x) + 1
cf = torch.compile(f, backend=cnt)
"""


def _cell(sh, body: str, line: str = "%%stance -q") -> CellReport:
    result, _ = run(sh, f"{line}\n{body}")
    assert result.error_in_exec is None, result.error_in_exec
    return get_engine().history[-1]


def _diff(sh, line: str = "%stance diff") -> CellDiff:
    result, _ = run(sh, line)
    assert result.error_in_exec is None, result.error_in_exec
    assert isinstance(result.result, CellDiff)
    return result.result


def _frames(sh) -> int:
    return sh.user_ns["cnt"].frame_count


def _assert_from_reports(d: CellDiff, a: CellReport, b: CellReport) -> None:
    """Every figure of the diff is the reports' own: a row's A and B are
    the reports' values, its change B's minus A's."""
    ra, rb = a.summary_row(), b.summary_row()
    for row in d.rows:
        if row.key in ra and row.unit != "text":
            assert (row.a, row.b) == (ra[row.key], rb[row.key]), row
        if row.key == "per_lookup_s":
            assert (row.a, row.b) == (a.lookups.per_lookup_s, b.lookups.per_lookup_s)
        if row.change is not None:
            assert row.change == pytest.approx(row.b - row.a, abs=0), row
    assert d.wall_change_s == b.wall_s - a.wall_s
    # the diff is kept out of the history
    assert all(isinstance(r, CellReport) for r in get_engine().history)


def test_a_shape_change_that_recompiles(shell):
    run(shell, SETUP)
    a = _cell(shell, "cf(torch.ones(3))")
    before = _frames(shell)
    b = _cell(shell, "cf(torch.ones(4))")
    torch_frames = _frames(shell) - before  # torch compiled this many in B
    assert before == torch_frames == 1  # one frame each: A's compile, B's recompile
    d = _diff(shell)
    assert (d.a, d.b) == (f"In [{a.execution_count}]", f"In [{b.execution_count}]")
    rec = d.row("recompiles")
    assert rec is not None and (rec.a, rec.b, rec.change) == (0, 1, 1)
    assert d.row("compiles") is None  # 1 and 1, as torch counted them
    # torch's own words for the guard that failed, in B only
    assert any(
        x.startswith("+ ") and "size mismatch at index 0. expected 3, actual 4" in x
        for x in rec.details
    )
    assert "1 recompile more (x.size(0) 3 → 4)" in d.headline or "1 recompile more (x" in d.headline
    assert d.headline.startswith(f"In [{b.execution_count}] vs In [{a.execution_count}]: ")
    assert not d.same
    _assert_from_reports(d, a, b)
    assert d.text().splitlines()[0] == d.headline
    assert "size mismatch" in d.html() and "<script" not in d.html()
    json.dumps(d.to_dict())


def test_the_same_code_under_another_stance(shell):
    run(shell, SETUP)
    _cell(shell, "cf(torch.ones(3))")
    a = _cell(shell, "cf(torch.ones(3))")
    b = _cell(shell, "cf(torch.ones(3))", "%%stance force_eager -q")
    d = _diff(shell)
    assert d.row("stance").a == "default" and d.row("stance").b == "force_eager"  # type: ignore[union-attr]
    assert d.row("calls_eager").change == 1  # type: ignore[union-attr]
    assert d.row("cache_hits").change == -1  # type: ignore[union-attr]
    assert "stance default → force_eager" in d.headline
    _assert_from_reports(d, a, b)


def test_a_graph_break_added_by_editing_the_function(shell):
    run(shell, SETUP)
    a = _cell(shell, "cf(torch.ones(3))")
    run(
        shell,
        "def f(x):\n    y = helper(x)\n    torch._dynamo.graph_break()\n    return y + 1\n"
        "cf = torch.compile(f, backend=cnt)",
    )
    breaks_before = sum(counters["graph_break"].values())
    b = _cell(shell, "cf(torch.ones(3))")
    torch_breaks = sum(counters["graph_break"].values()) - breaks_before
    assert torch_breaks >= 1
    d = _diff(shell)
    br = d.row("graph breaks")
    assert br is not None and br.a == 0 and br.b == b.graph_break_count >= 1
    # the user's place of the break, in B only
    assert any(x.startswith("+ ") and f"In [{b.execution_count - 1}]" in x for x in br.details)
    assert "graph break more" in d.headline
    # f's code changed: the diff of its two definitions
    src = next(s for s in d.sources if s.name == "f")
    assert "+    torch._dynamo.graph_break()" in src.lines
    assert src.b_where == f"In [{b.execution_count - 1}]"
    _assert_from_reports(d, a, b)


def test_a_setting_changed_between_the_cells(shell):
    run(shell, SETUP)
    a = _cell(shell, "cf(torch.ones(3))")
    run(shell, "torch._dynamo.config.recompile_limit = 3")
    try:
        b = _cell(shell, "cf(torch.ones(3))")
        d = _diff(shell)
        row = d.row("torch._dynamo.config.recompile_limit")
        default = torch._dynamo.config._config["recompile_limit"].default
        assert row is not None and (row.a, row.b) == (repr(default), "3")
        assert "recompile_limit" in d.headline
        _assert_from_reports(d, a, b)
    finally:
        del torch._dynamo.config.recompile_limit
        torch._dynamo.config._config["recompile_limit"].hide = False


def test_an_edited_helper_that_the_function_inlines(shell):
    run(shell, SETUP)
    a = _cell(shell, "cf(torch.ones(3))")
    helper_cell = run(shell, "def helper(x):\n    return x.cos()")[0].execution_count
    before = _frames(shell)
    b = _cell(shell, "cf(torch.ones(3))")
    assert _frames(shell) - before == 1  # torch compiled f again
    d = _diff(shell)
    # torch's guard names helper (redefined, or its old code gone)
    assert "helper" in d.row("recompiles").details[-1]  # type: ignore[union-attr]
    assert "1 recompile more" in d.headline and "helper edited" in d.headline
    src = next(s for s in d.sources if s.name == "helper")
    assert src.a_where == "In [1]" or src.a_where.startswith("In [")
    assert src.b_where == f"In [{helper_cell}]"
    assert "-    return x.sin()" in src.lines and "+    return x.cos()" in src.lines
    assert "helper" in d.text() and "x.cos()" in d.html()
    _assert_from_reports(d, a, b)


def test_two_identical_runs_say_so(shell):
    """Two runs of one cell differ in no count, place, setting or code; only
    their times may (a busy machine can stretch a tiny cell past the noise
    rule: the rule itself is tested with exact figures below), and the
    headline says "the same" exactly when no row is left."""
    run(shell, SETUP)
    _cell(shell, "cf(torch.ones(3))")
    a = _cell(shell, "for _ in range(3): cf(torch.ones(3))")
    b = _cell(shell, "for _ in range(3): cf(torch.ones(3))")
    d = _diff(shell)
    assert d.sources == []
    assert {r.key for r in d.rows} <= {"wall_s", "compile_s", "per_lookup_s"}, d.rows
    head = f"In [{b.execution_count}] vs In [{a.execution_count}]: "
    assert d.same is (d.rows == [])
    if d.same:
        assert d.headline.startswith(head + "the same") and "within noise" in d.headline
    assert d.noise in d.text()


def test_the_lookup_cost_is_compared_only_over_enough_lookups():
    from stance_magic.builder.diff import LOOKUP_MIN_TIMED
    from stance_magic.report import Lookups

    def rep(per: float, timed: int, n: int) -> CellReport:
        return _rep(index=n, execution_count=n, lookups=Lookups(per_lookup_s=per, timed=timed))

    # 8 µs against 15 µs: over 1.25× and 5 µs apart
    few = diff_cells(rep(8e-6, 3, 1), rep(15e-6, 3, 2))
    assert few.row("per_lookup_s") is None and few.same  # 3 lookups: the first, cold ones
    many = diff_cells(rep(8e-6, LOOKUP_MIN_TIMED, 1), rep(15e-6, LOOKUP_MIN_TIMED, 2))
    row = many.row("per_lookup_s")
    assert row is not None and row.change == pytest.approx(7e-6) and not many.same
    close = diff_cells(rep(8e-6, 50, 1), rep(12e-6, 50, 2))  # 4 µs apart
    assert close.row("per_lookup_s") is None


def test_names_and_mistakes(shell):
    run(shell, SETUP)
    result, _ = run(shell, "%stance diff")
    assert "nothing to compare: 0 measured cells" in str(result.error_in_exec)
    a = _cell(shell, "cf(torch.ones(3))")
    b = _cell(shell, "cf(torch.ones(4))")
    n, m = a.execution_count, b.execution_count
    for line in (f"%stance diff {n} {m}", f"%stance diff In [{n}] In [{m}]", "%stance diff -2 -1"):
        d = _diff(shell, line)
        assert (d.a, d.b) == (f"In [{n}]", f"In [{m}]"), line
    # one name: that cell against the measured cell before it
    d = _diff(shell, f"%stance diff {m}")
    assert (d.a, d.b) == (f"In [{n}]", f"In [{m}]")
    result, _ = run(shell, "%stance diff 999")
    msg = str(result.error_in_exec)
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "In [999] is no measured cell" in msg and f"({n}, {m})" in msg and "-1 to -2" in msg
    assert "\n" not in msg
    result, _ = run(shell, "%stance diff 1 2 3")
    assert "usage: %stance diff [A [B]]" in str(result.error_in_exec)
    result, _ = run(shell, f"%stance diff {n}")
    assert "has no measured cell before it" in str(result.error_in_exec)
    # the function: the same diff, and the same names
    api = shell.user_ns["stance_magic"].diff(n, m)
    assert api.rows == d.rows
    with pytest.raises(DiffError, match="names no measured cell"):
        shell.user_ns["stance_magic"].diff("nonsense")


def test_a_sweeps_cells_are_named_by_their_stance(shell):
    run(shell, SETUP)
    result, _ = run(shell, "%%stance --sweep default,force_eager --no-plot -q\ncf(torch.ones(3))")
    assert result.error_in_exec is None, result.error_in_exec
    hist = get_engine().history
    sweep = [r for r in hist if (r.label or "").startswith("sweep: ")]
    assert [r.stance for r in sweep] == ["default", "force_eager"]
    d = _diff(shell, "%stance diff default force_eager")
    assert d.row("stance") is not None
    n = sweep[0].execution_count
    d2 = _diff(shell, f"%stance diff {n}:default {n}:force_eager")
    assert d2.rows == d.rows
    result, _ = run(shell, f"%stance diff {n} -1")
    assert f"measured 2 runs: name one ({n}:default, {n}:force_eager)" in str(result.error_in_exec)


# -- the rule, with exact figures ------------------------------------------------
def _rep(**kw) -> CellReport:
    return CellReport(**{"index": 1, "execution_count": 1, **kw})


@pytest.mark.parametrize(
    ("a_s", "b_s", "differs"),
    [
        (0.010, 0.0125, False),  # 1.25×: within
        (0.010, 0.0126, True),  # over 1.25× and 2.6 ms apart
        (0.0002, 0.0009, False),  # 4.5× but 0.7 ms apart
        (0.0, 0.0011, True),  # from nothing, over 1 ms
        (2.0, 2.4, False),  # 0.4 s, but 1.2×
    ],
)
def test_the_noise_rule_for_times(a_s, b_s, differs):
    a = _rep(wall_s=a_s)
    b = replace(_rep(wall_s=b_s), index=2, execution_count=2)
    d = diff_cells(a, b)
    assert (d.row("wall_s") is not None) is differs
    assert d.same is not differs
    assert d.wall_change_s == b_s - a_s


def test_counts_always_differ_and_settings_read_their_defaults():
    a = _rep(cache_hits=3, settings={})
    b = _rep(
        index=2,
        execution_count=2,
        cache_hits=4,
        settings={"torch._dynamo.config.recompile_limit": ("3", "8")},
    )
    d = diff_cells(a, b)
    assert d.row("cache_hits").change == 1  # type: ignore[union-attr]
    row = d.row("torch._dynamo.config.recompile_limit")
    assert row is not None and (row.a, row.b) == ("8", "3")
    assert not d.same
    # a report that did not read the settings compares none
    unread = diff_cells(replace(a, settings=None), b)
    assert unread.row("torch._dynamo.config.recompile_limit") is None


def test_pick_defaults():
    reps = [_rep(index=i, execution_count=i + 10) for i in (1, 2, 3)]
    assert pick(reps) == (reps[1], reps[2])
    assert pick(reps, 12) == (reps[0], reps[1])
    assert pick(reps, reps[0], -1) == (reps[0], reps[2])
    with pytest.raises(DiffError, match="past the history's 3 measured cells"):
        pick(reps, -4)


def test_the_settings_are_torchs_own(shell):
    """The snapshot a report keeps is torch's non-default settings, read
    from torch's config modules themselves."""
    from stance_magic import probe

    torch._dynamo.config.recompile_limit = 5
    torch._dynamo.config.capture_scalar_outputs = True
    try:
        got = probe.compile_settings()
        mod = torch._dynamo.config
        values = mod._get_dict(skip_default=True)
        want = {f"torch._dynamo.config.{k}": repr(v) for k, v in values.items()}
        assert {k: v[0] for k, v in got.items() if k.startswith("torch._dynamo")} == want
        default = repr(mod._config["recompile_limit"].default)
        assert got["torch._dynamo.config.recompile_limit"] == ("5", default)
        assert got["torch._dynamo.config.capture_scalar_outputs"][0] == "True"
    finally:
        del torch._dynamo.config.recompile_limit
        del torch._dynamo.config.capture_scalar_outputs
        for k in ("recompile_limit", "capture_scalar_outputs"):
            torch._dynamo.config._config[k].hide = False
    assert "torch._dynamo.config.recompile_limit" not in probe.compile_settings()


def test_the_settings_snapshot_sees_every_change(shell):
    """A setting changed between two reads is seen, also after torch itself
    recomputed its hash in between (a compile does), in a ``patch`` block
    and after ``del``; unchanged, the snapshot is the last one again."""
    from stance_magic import probe

    dyn = torch._dynamo.config
    name = "torch._dynamo.config.recompile_limit"
    first = probe.compile_settings()
    assert probe.compile_settings() is first  # nothing changed: shared
    dyn.recompile_limit = 4
    dyn.get_hash()  # torch's own read clears its dirty flag
    assert probe.compile_settings()[name][0] == "4"
    with dyn.patch(recompile_limit=6):
        assert probe.compile_settings()[name][0] == "6"
    assert probe.compile_settings()[name][0] == "4"
    dyn.capture_scalar_outputs = True  # a setting in torch's cache key
    dyn.get_hash()
    assert probe.compile_settings()["torch._dynamo.config.capture_scalar_outputs"][0] == "True"
    del dyn.recompile_limit, dyn.capture_scalar_outputs
    for k in ("recompile_limit", "capture_scalar_outputs"):
        dyn._config[k].hide = False
    after = probe.compile_settings()
    assert name not in after and "torch._dynamo.config.capture_scalar_outputs" not in after
