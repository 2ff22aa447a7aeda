"""Tracing by function: Dynamo's tracing time by the user's function and
nn.Module, from torch's own ``dynamo_profiler`` (2.13+).

The arithmetic (adding traces up by function and module, recursion, the
compile time put on the function a frame starts at) is tested on exact
figures; the figures themselves against torch: its own ``.prof`` file of the
same compile (exactly), its records' Dynamo time (never exceeded), and a bare
run of the same code in another process (the ``timing`` lane)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pstats
import subprocess
import sys
import types
import unittest.mock
from contextlib import redirect_stdout

import pytest
import torch

import stance_magic
from stance_magic import probe
from stance_magic.builder.tracing import tracing
from stance_magic.probe.records import RecordInfo
from stance_magic.probe.tracing import module_path
from stance_magic.report import FrameCompile
from stance_magic.report.tracing import TRACING_MEASURED, TRACING_OFF, TRACING_UNAVAILABLE

from conftest import html_outputs, run, text_outputs

HAS_PROFILER = probe.tracing_profiler() is not None
needs_profiler = pytest.mark.skipif(
    not HAS_PROFILER, reason="torch before 2.13: no dynamo_profiler"
)

TOY = """
import torch

def heavy(x):
    for _ in range(60):
        x = x.sin() + 1
    return x

def medium(x):
    for _ in range(6):
        x = x.cos()
    return x

def light(x):
    return x + 1

def step(x):
    return heavy(x) + medium(x) + light(x)
"""


def _toy() -> types.ModuleType:
    mod = types.ModuleType("tracing_toy")
    mod.__file__ = "tracing_toy.py"
    exec(compile(TOY, "tracing_toy.py", "exec"), mod.__dict__)
    sys.modules["tracing_toy"] = mod  # (torch 2.8 looks a frame's module up by name)
    return mod


@contextlib.contextmanager
def _profiler_setting(value):
    """torch's dynamo_profiler set for a block, then left exactly as found
    (torch's own ``config.patch`` leaves an override equal to the default)."""
    entry = torch._dynamo.config._config["dynamo_profiler"]
    before = entry.user_override.get()
    torch._dynamo.config.dynamo_profiler = value
    try:
        yield
    finally:
        torch._dynamo.config.dynamo_profiler = False
        entry.user_override.set(before)


def _call(
    name: str, line: int, cum: int, own: int, depth: int = 1, primitive: bool = True, **kw
) -> probe.TracedCall:
    return probe.TracedCall(name, "/u/m.py", line, cum, own, 10, depth, primitive, **kw)


def _record(cid: str, calls: list[probe.TracedCall]):
    rec = types.SimpleNamespace(
        compile_id=cid,
        co_name="f",
        co_filename="/u/m.py",
        co_firstlineno=1,
        entire_frame_compile_time_s=1.0,
    )
    return rec, RecordInfo(traced=calls)


def _frame(cid: str, phases: dict[str, float]) -> FrameCompile:
    return FrameCompile(
        compile_id=cid,
        kind="frame",
        name="f",
        filename="/u/m.py",
        line=1,
        seconds=sum(phases.values()),
        phases=phases,
        guard_count=None,
        recompile_reason=None,
    )


def test_traces_add_up_by_function_and_module_with_exact_figures():
    # frame 0/0: f calls g twice (once recursively inside itself) and the
    # forward of two Attn modules; frame 1/0 traces f again
    a = [
        _call("g", 5, 300, 100, depth=2, primitive=False),
        _call("g", 5, 500, 200, depth=1),
        _call("Attn.forward", 9, 1000, 1000, module_path="self.h[0].attn", module_class="Attn"),
        _call("Attn.forward", 9, 2000, 2000, module_path="self.h[1].attn", module_class="Attn"),
        _call("f", 1, 4000, 500, depth=0),
    ]
    b = [_call("g", 5, 600, 600, depth=1), _call("f", 1, 1000, 300, depth=0)]
    records = [_record("0/0", a), _record("1/0", b)]
    window = probe.Window(records=[r for r, _ in records], info={id(r): i for r, i in records})
    frames = [
        _frame("0/0", {"dynamo": 5e-6, "aot_autograd": 2e-6, "backend": 3e-6, "codegen": 1e-6}),
        _frame("1/0", {"dynamo": 2e-6, "backend": 4e-6, "other": 9e-6}),
    ]
    t = tracing(window, frames, dynamo_s=7e-6)
    assert t.state == TRACING_MEASURED and t.frames == 2
    by = {f.name: f for f in t.functions}
    # a recursive trace adds its own time, not its inclusive time (pstats' rule)
    assert by["g"].traced == 3
    assert by["g"].own_s == pytest.approx(900e-9, abs=1e-15)
    assert by["g"].cumulative_s == pytest.approx(1100e-9, abs=1e-15)
    assert by["Attn.forward"].traced == 2 and by["Attn.forward"].module == "Attn"
    assert by["Attn.forward"].paths == ["self.h[0].attn", "self.h[1].attn"]
    assert by["f"].frames == 2 and by["f"].traced == 2
    assert by["f"].cumulative_s == pytest.approx(5000e-9, abs=1e-15)
    # the backend's compile (AOTAutograd, backend, code generation; not
    # Dynamo's, not "other") goes on the function the frames start at
    assert by["f"].compile_s == pytest.approx(10e-6, abs=1e-15)
    assert by["f"].total_s == pytest.approx(15e-6, abs=1e-15)
    assert by["g"].compile_s == 0.0
    assert t.traced_s == pytest.approx(5000e-9, abs=1e-15)
    assert [m.name for m in t.modules] == ["Attn"]
    assert t.modules[0].cumulative_s == pytest.approx(3000e-9, abs=1e-15)
    # most inclusive first; the top by own time
    assert [f.name for f in t.functions] == ["f", "Attn.forward", "g"]
    assert [f.name for f in t.top(2)] == ["Attn.forward", "g"]
    assert t.share(3.5e-6) == pytest.approx(0.5)


def test_module_paths_read_as_the_users_code_writes_them():
    assert module_path("L['self'].h.0.attn") == "self.h[0].attn"
    assert module_path("G['model'].layers.11.mlp.fc1") == "model.layers[11].mlp.fc1"
    assert module_path("L['self']") == "self"


def test_a_cell_that_traced_nothing_has_no_row():
    rep = stance_magic.measure
    with rep() as m:
        pass
    assert m.report.tracing.state == ""
    assert "tracing by function" not in m.report.text(verbose=True)


def _measured_toy(**kw):
    toy = _toy()
    torch._dynamo.reset()
    f = torch.compile(toy.step, backend="eager")
    out = io.StringIO()
    with redirect_stdout(out), stance_magic.measure(**kw) as m:
        f(torch.randn(8))
    return m.report, out.getvalue()


def test_the_row_is_there_exactly_where_torch_has_the_profiler():
    rep, printed = _measured_toy()
    text = rep.text(verbose=True)
    if HAS_PROFILER:
        assert rep.tracing.state == TRACING_MEASURED
        names = {f.name for f in rep.tracing.functions}
        assert {"step", "heavy", "medium", "light"} <= names
        assert "tracing by function" in text and "heavy (tracing_toy.py:4)" in text
    else:
        assert rep.tracing.state == TRACING_UNAVAILABLE and not rep.tracing.functions
        assert "per frame only (torch 2.13 or later times each function)" in text
        assert rep.summary_row()["traced_s"] is None
    assert "Dynamo Profiler" not in printed


@needs_profiler
def test_nothing_is_printed_and_the_setting_is_put_back():
    config = torch._dynamo.config
    assert config.dynamo_profiler is False
    rep, printed = _measured_toy()
    assert rep.tracing.measured
    assert printed == ""
    assert config.dynamo_profiler is False
    # a compile after the cell is torch's alone: nothing kept, nothing printed
    toy = _toy()
    out = io.StringIO()
    with redirect_stdout(out):
        torch.compile(toy.light, backend="eager")(torch.randn(2))
    assert out.getvalue() == ""


@needs_profiler
def test_trace_functions_false_leaves_the_profiler_off():
    seen = []
    dp = probe.tracing_profiler()
    orig = dp.DynamoProfilerState.record_timing
    rep, _ = _measured_toy(trace_functions=False)
    seen.append(dp.DynamoProfilerState.record_timing is orig)
    assert rep.tracing.state == TRACING_OFF and not rep.tracing.functions
    assert "off (trace_functions=False)" in rep.text(verbose=True)
    assert torch._dynamo.config.dynamo_profiler is False and seen == [True]
    # the next block turns it on again (the default)
    rep, _ = _measured_toy()
    assert rep.tracing.measured


@needs_profiler
def test_the_figures_are_torchs_own_profile_of_the_same_compile(tmp_path, capfd):
    """The user's own dynamo_profiler (a .prof path) stays theirs, and the
    report's figures are that file's, function by function, exactly."""
    prof = tmp_path / "dynamo.prof"
    with _profiler_setting(str(prof)):
        toy = _toy()
        torch._dynamo.reset()
        f = torch.compile(toy.step, backend="eager")
        with stance_magic.measure() as m:
            f(torch.randn(8))
        # the user's setting is theirs still
        assert torch._dynamo.config.dynamo_profiler == str(prof)
    assert "Dynamo Profiler" in capfd.readouterr().out  # torch printed its tables, as asked
    stats = pstats.Stats(str(prof)).stats
    theirs = {(k[0], k[1]): v for k, v in stats.items() if v[1]}
    ours = {(f.filename, f.line): f for f in m.report.tracing.functions}
    assert set(ours) == set(theirs)
    for key, (_pcalls, ncalls, tottime, cumtime, _) in theirs.items():
        f = ours[key]
        assert f.traced == ncalls
        assert f.own_s == pytest.approx(tottime, abs=1e-9)
        assert f.cumulative_s == pytest.approx(cumtime, abs=1e-9)


def _dynamo_s_from_torch() -> float:
    """Dynamo's time of the process's frame compiles, from torch's records."""
    from torch._dynamo.utils import get_compilation_metrics

    total = 0.0
    for r in get_compilation_metrics():
        if r.co_name is None or getattr(r, "is_runtime", False):
            continue
        dynamo = (r.dynamo_cumulative_compile_time_us or 0) / 1e6
        backend = (r.aot_autograd_cumulative_compile_time_us or 0) / 1e6 or (
            r.backend_compile_time_s or 0.0
        )
        total += dynamo - backend
    return total


@needs_profiler
@pytest.mark.slow
@pytest.mark.parametrize("which", ["gpt2", "bert"])
def test_a_real_models_functions_and_modules(which):
    import models

    model = getattr(models, which)(layers=2).eval()
    torch._dynamo.reset()
    torch._dynamo.utils.clear_compilation_metrics()
    f = torch.compile(model, backend="aot_eager")
    ids = torch.randint(0, 256, (1, 16))
    with torch.no_grad(), stance_magic.measure() as m:
        f(ids)
    t = m.report.tracing
    assert t.measured
    dynamo = _dynamo_s_from_torch()
    # the per-function figures never add up to more than torch's own
    # Dynamo time of the cell's compiles
    assert sum(fn.own_s for fn in t.functions) <= dynamo
    assert t.traced_s <= dynamo
    assert t.dynamo_s == pytest.approx(dynamo, rel=1e-6)
    attn = "GPT2Attention" if which == "gpt2" else "BertSelfAttention"
    fn = next(fn for fn in t.functions if fn.module == attn)
    assert fn.name.endswith(".forward") and fn.traced == 2
    layer = ".h" if which == "gpt2" else ".encoder.layer"
    assert any(p.startswith("self.") and f"{layer}[1]." in p for p in fn.paths), fn.paths
    assert attn in {mod.name for mod in t.modules}
    # the frame's own function holds the backend's compile
    root = [fn for fn in t.functions if fn.frames]
    assert len(root) == 1 and root[0].compile_s > 0
    row = m.report.summary_row()
    assert row["tracing_state"] == "measured" and row["traced_s"] == t.traced_s
    data = json.loads(json.dumps(m.report.to_dict()))
    assert data["tracing"]["functions"][0]["name"] == t.functions[0].name


_BARE = """
import os, sys, json, pstats, torch
sys.path.insert(0, {here!r})
torch._dynamo.config.dynamo_profiler = {prof!r}
mod = {{}}
exec(compile({toy!r}, "tracing_toy.py", "exec"), mod)
f = torch.compile(mod["step"], backend="eager")
f(torch.randn(8))
"""


@needs_profiler
@pytest.mark.timing
def test_the_top_functions_agree_with_a_bare_run_of_torchs_profiler(tmp_path):
    """The toy's three functions of very different tracing cost: their own
    times measured agree with a bare process's .prof within 2x each way,
    and their order with it (medians of interleaved rounds)."""
    from timing import agree

    def bare() -> dict[str, float]:
        prof = tmp_path / "bare.prof"
        code = _BARE.format(here=os.path.dirname(__file__), prof=str(prof), toy=TOY)
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)
        stats = pstats.Stats(str(prof)).stats
        return {k[2]: v[2] for k, v in stats.items() if k[0] == "tracing_toy.py"}

    def round_() -> dict[str, float]:
        theirs = bare()
        rep, _ = _measured_toy()
        ours = {f.name: f.own_s for f in rep.tracing.functions}
        return {
            "heavy": ours["heavy"] / theirs["heavy"],
            "medium": ours["medium"] / theirs["medium"],
            "heavy/medium ours": ours["heavy"] / ours["medium"],
            "heavy/medium bare": theirs["heavy"] / theirs["medium"],
        }

    agree(
        round_,
        {
            "heavy": (0.5, 2.0),
            "medium": (0.5, 2.0),
            "heavy/medium ours": (2.0, None),
            "heavy/medium bare": (2.0, None),
        },
        why="the same compile, timed by torch's profiler in both processes",
        rounds=3,
        max_rounds=9,
    )


@needs_profiler
def test_a_graph_break_is_traced_on_both_sides_and_breaks_nothing():
    """torch 2.13-2.15 with dynamo_profiler on fail any frame that
    graph-breaks (their record of the frame reads the OutputGraph's root
    translator after its cleanup dropped it); measured, the compile goes on
    as it does with the profiler off, and both frames are timed."""
    ns: dict = {}
    src = (
        "import torch\n"
        "def before(x):\n    return x.sin()\n"
        "def after(y):\n    return y.cos()\n"
        "def f(x):\n    y = before(x)\n    torch._dynamo.graph_break()\n    return after(y)\n"
    )
    exec(compile(src, "breaking.py", "exec"), ns)
    if probe.torch_version() <= (2, 15):
        # bare torch with the setting on (and its tables silenced), as the docs say
        dp = probe.tracing_profiler()
        torch._dynamo.reset()
        bare = torch.compile(ns["f"], backend="eager")
        with (
            _profiler_setting(True),
            unittest.mock.patch.object(dp.DynamoProfilerState, "dump_stats"),
            pytest.raises(Exception, match="'NoneType' object has no attribute 'f_code'"),
        ):
            bare(torch.ones(3))
    torch._dynamo.reset()
    f = torch.compile(ns["f"], backend="eager")
    with stance_magic.measure() as m:
        out = f(torch.ones(3))
    assert torch.equal(out, torch.ones(3).sin().cos())
    rep = m.report
    assert rep.error is None and rep.graph_break_count == 1
    t = rep.tracing
    names = {fn.name for fn in t.functions}
    assert {"before", "after"} <= names, names
    assert t.frames == 2 and sum(fn.frames for fn in t.functions) == 2
    assert t.traced_s <= t.dynamo_s


@needs_profiler
def test_a_cell_in_a_real_shell_shows_the_row_and_its_details(sh):
    """%%stance in a real shell: the folded row in the text (its line in the
    brief report only for a trace of half a second or more), the details
    with -v and in the HTML, torch's setting put back, nothing of torch's
    tables printed."""
    sh.run_cell(TOY)
    res, cap = run(
        sh, "%%stance -v --no-plot\ncf = torch.compile(step, backend='eager')\ncf(torch.ones(3))"
    )
    assert res.success, res.error_in_exec
    rep = stance_magic.history()[-1]
    assert rep.tracing.measured
    text = "\n".join(text_outputs(cap))
    assert "tracing by function" in text and "Dynamo Profiler" not in cap.stdout
    heavy = next(f for f in rep.tracing.functions if f.name == "heavy")
    assert f"heavy ({heavy.file}, line {heavy.line})" in text, text
    html = html_outputs(cap)[0]
    assert "tracing by function" in html and "heavy" in html
    assert torch._dynamo.config.dynamo_profiler is False
    brief = rep.text()
    if rep.tracing.dynamo_s < 0.5:
        assert "tracing by function  " not in brief and "tracing by function" in brief


@needs_profiler
def test_the_diff_names_the_function_whose_tracing_time_changed():
    toy = _toy()
    torch._dynamo.reset()
    with stance_magic.measure() as a:
        torch.compile(toy.step, backend="eager")(torch.randn(8))
    # heavy made ten times heavier: its own tracing time grows most
    src = TOY.replace("range(60)", "range(600)")
    exec(compile(src, "tracing_toy.py", "exec"), toy.__dict__)
    torch._dynamo.reset()
    with stance_magic.measure() as b:
        torch.compile(toy.step, backend="eager")(torch.randn(8))
    d = stance_magic.diff(a.report, b.report)
    row = next(r for r in d.rows if r.name == "tracing by function")
    assert row.b > row.a and row.details[0].startswith("heavy (tracing_toy.py:4): ")
    assert "tracing by function" in str(d)


@needs_profiler
def test_a_reset_inside_the_cell_says_why_its_compiles_are_not_timed():
    toy = _toy()
    with stance_magic.measure() as m:
        torch.compiler.reset()
        torch.compile(toy.light, backend="eager")(torch.randn(2))
    rep = m.report
    assert rep.compiles == 1 and not rep.tracing.functions
    assert "not timed (torch.compiler.reset() ran in the cell)" in rep.text(verbose=True)
