"""--compare, --repeat, --sweep: the steady state and its spread, break-even,
the compiling runs left out, the recorder's overhead left out, where the
clock is read against the device's synchronization, the notices they print,
the limit on --repeat; the per-cell and history plots (and what a terminal
gets instead); the advice read from real cells and from reports.

``--compare``'s arithmetic is checked on a fake clock (tests/fakeclock.py)
that only the cell's own code moves: real torch.compile'd code whose eager
runs, compiled runs and compile each advance it by a set amount, so every
figure is exact on any machine at any load. What only a real clock shows
(our figures against an outside clock, a real speedup, a real spread) is in
the timing lane at the end (``@pytest.mark.timing``, tests/timing.py's
``agree()`` on the median of rounds)."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace

import pytest
import torch

import stance_magic
from stance_magic import probe
from stance_magic.builder import Closed
from stance_magic.builder.compare import break_even, steady
from stance_magic.render.advice import advise
from stance_magic.report import CellReport, Comparison, GraphBreak, Lookups, Recompile
from stance_magic.session import compare

from conftest import has_row, last, run, text_outputs
from fakeclock import FakeClock, on_engine
from timing import agree

# Eager runs sleep 10 ms; Dynamo traces the other branch (is_compiling() is
# True while tracing), so compiled runs skip the sleep: a known speedup.
SLOW_EAGER = """
import time, torch
calls = []
def work(x):
    if not torch.compiler.is_compiling():
        time.sleep(0.01)
    return x * 2
cwork = torch.compile(work, backend="eager")
"""

MS = 1e-3


def images(cap):
    return [o for o in cap.outputs if "image/png" in o.data]


# -- the fake clock ------------------------------------------------------------
#
# ``fw`` is real compiled code (the graph Dynamo captures, compiled by the
# ``eager`` or ``aot_eager`` backend) whose every run says on the fake clock
# ``clk`` what it cost: an eager run (the Python body; Dynamo traces the other
# branch) takes the next of ``cost["eager"]``, a compile ``cost["compile"]``
# (the backend's own work), a run of the compiled code the next of
# ``cost["graph"]``, plus, where ``cost["profiler"]`` has an entry ``(on the
# clock, reported)``, time the recorder's profiler took inside the run and what
# the recorder reports it took (``overhead``, read by a patched
# ``Recorder.overhead_so_far``). The lists are consumed: a run more or less
# than planned fails.
TIMED_WORK = """
from torch._dynamo.backends.registry import lookup_backend
overhead = [0.0]
def timed_backend(gm, example_inputs):
    clk.advance(cost["compile"])
    compiled = lookup_backend(cost["backend"])(gm, example_inputs)
    def graph(*args):
        clk.advance(cost["graph"].pop(0))
        if cost["profiler"]:
            on_clock, reported = cost["profiler"].pop(0)
            clk.advance(on_clock)
            overhead[0] += reported
        return compiled(*args)
    return graph
def work(x):
    if not torch.compiler.is_compiling():
        clk.advance(cost["eager"].pop(0))
    return x * 2
fw = torch.compile(work, backend=timed_backend)
"""


@pytest.fixture
def clk(sh):
    """stance_magic's engine on a fake clock, ``clk`` in the user namespace."""
    with on_engine(FakeClock()) as clock:
        sh.user_ns["clk"] = clock
        yield clock


def timed_work(sh, *, eager, graph, compile_s=100 * MS, backend="eager", profiler=()):
    """Define ``fw`` (see TIMED_WORK) with these costs, in seconds."""
    cost = {
        "eager": list(eager),
        "graph": list(graph),
        "compile": compile_s,
        "backend": backend,
        "profiler": list(profiler),
    }
    sh.user_ns["cost"] = cost
    res = sh.run_cell(TIMED_WORK)
    assert res.success, res.error_in_exec
    return cost


def compared(sh, opts: str, cost, body: str = "fw(torch.ones(2))"):
    """Run ``fw`` under ``%%stance <opts>``; its report, once every planned run ran."""
    res, cap = run(sh, f"%%stance {opts}\n{body}")
    assert res.success, res.error_in_exec
    left = {k: cost[k] for k in ("eager", "graph", "profiler") if cost[k]}
    assert not left, f"the cell ran fewer times than planned: {left} left"
    return last(sh), cap


def approx_list(values):
    return [pytest.approx(v) for v in values]


# -- a real clock: what holds at any load ----------------------------------------


def test_compare_repeat_runs_the_cell_and_its_times_nest_in_an_outside_clock(sh):
    """Side effects, output and the runs on the real clock: only orderings that
    hold however busy the machine is (a run is inside the clock around the
    cell, a 10 ms sleep takes at least 10 ms, a compile is inside the run that
    compiled). The figures' arithmetic: the fake-clock tests below; their
    agreement with an outside clock: the timing lane."""
    sh.run_cell(SLOW_EAGER)
    t0 = time.perf_counter()
    res, cap = run(
        sh, "%%stance default --compare --repeat 5\ncalls.append(1)\ncwork(torch.ones(2))"
    )
    outside = time.perf_counter() - t0
    assert res.success
    assert torch.equal(res.result, torch.full((2,), 2.0))  # last expression still shown
    assert len(sh.user_ns["calls"]) == 10  # side effects repeat: 5 eager + 5 compiled
    assert any("side effects repeat" in t for t in text_outputs(cap))
    rep = stance_magic.history()[-1]
    eager, comp = rep.compare.runs["eager"], rep.compare.runs["compiled"]
    assert len(eager) == len(comp) == 5
    assert sum(eager) + sum(comp) <= outside, "every run is inside the cell's outside clock"
    assert all(t >= 0.01 for t in eager), "an eager run sleeps 10 ms: it takes at least that"
    assert rep.compiles == 1 and rep.compile_s < comp[0], "the compile is inside its run"
    text = "\n".join(text_outputs(cap))
    assert "speedup" in text and "break-even" in text
    assert len(images(cap)) == 1


# -- --compare's arithmetic on the fake clock --------------------------------------


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compare_figures_exact_on_a_fake_clock(sh, clk, backend):
    # eager: a slow warm-up, then 10.4, 9.8, 10.2, 10.0 ms; compiled: the
    # compiling run (100 ms compile + 2 ms), then 2.00, 2.04, 1.98, 2.02 ms
    cost = timed_work(
        sh,
        eager=[15 * MS, 10.4 * MS, 9.8 * MS, 10.2 * MS, 10.0 * MS],
        graph=[2 * MS, 2.00 * MS, 2.04 * MS, 1.98 * MS, 2.02 * MS],
        backend=backend,
    )
    rep, _ = compared(sh, "default --compare --repeat 5 -q", cost)
    c = rep.compare
    assert rep.compiles == 1
    assert c.runs["eager"] == approx_list([15 * MS, 10.4 * MS, 9.8 * MS, 10.2 * MS, 10.0 * MS]), (
        "each eager run is the clock from its start to its end, nothing else"
    )
    assert c.runs["compiled"] == approx_list(
        [102 * MS, 2.00 * MS, 2.04 * MS, 1.98 * MS, 2.02 * MS]
    ), "each compiled run is the clock from its start to its end, its compile included"
    # all five runs' median would be 10.2 ms; the four after the first: 10.1
    assert c.eager_s == pytest.approx(10.1 * MS), (
        "eager_s is the median of the eager runs, the first (warm-up) left out"
    )
    # all five: 2.02 ms; the four after the compiling run: 2.01
    assert c.compiled_s == pytest.approx(2.01 * MS), (
        "compiled_s is the median of the steady runs, the compiling run left out"
    )
    assert c.speedup == pytest.approx(10.1 / 2.01), "speedup is eager_s / compiled_s"
    # ceil((102 - 2.01) / (10.1 - 2.01)) = ceil(12.36) = 13
    assert c.break_even_calls == 13, (
        "break-even is the first k where the compiling run plus (k - 1) steady runs "
        "cost no more than k eager runs"
    )
    assert rep.wall_s == pytest.approx(110.04 * MS), (
        "the report's wall time is the window around the compiled runs: their sum"
    )
    assert not [n for n in rep.notes if "spread" in n or "slowest" in n], (
        "spreads of 5 % (eager) and 2 % (compiled) of the median are under the 10 % flag"
    )


def test_compare_that_never_pays_off_on_a_fake_clock(sh, clk):
    # the compiled code is slower (5 ms) than the eager code (1 ms)
    cost = timed_work(sh, eager=[1 * MS] * 3, graph=[5 * MS] * 3)
    rep, cap = compared(sh, "default --compare --repeat 3 --no-plot", cost)
    c = rep.compare
    assert c.eager_s == pytest.approx(1 * MS) and c.compiled_s == pytest.approx(5 * MS)
    assert c.speedup == pytest.approx(0.2), "speedup is eager_s / compiled_s, below 1 here"
    assert c.break_even_calls is None, (
        "a compiled run no faster than an eager one never pays for its compile"
    )
    text = "\n".join(text_outputs(cap))
    assert "never breaks even" in text.splitlines()[1]  # the headline (after the notice)
    assert "never (compiled is not faster)" in rep.text(verbose=True)
    assert "does not pay off" in text
    assert not images(cap)


def test_compare_eager_then_compile_excludes_the_compiling_run_on_a_fake_clock(sh, clk):
    # 5 eager runs, then eager_then_compile: run 1 eager (10 ms), run 2
    # compiles (100 + 2 ms), runs 3-5 compiled code (2.00, 2.04, 1.98 ms)
    cost = timed_work(sh, eager=[10 * MS] * 6, graph=[2 * MS, 2.00 * MS, 2.04 * MS, 1.98 * MS])
    rep, _ = compared(sh, "eager_then_compile --compare --repeat 5 -q", cost)
    if rep.compiles > 1 and probe.torch_version() < probe.DELAYED_CALLBACK_LINKED_SINCE:
        pytest.skip("torch 2.8 recompiled under eager_then_compile: no steady state to check")
    c = rep.compare
    assert rep.compiles == 1
    assert c.runs["compiled"] == approx_list([10 * MS, 102 * MS, 2.00 * MS, 2.04 * MS, 1.98 * MS])
    # runs 2-5 would give 2.02 ms, all five 2.04 ms
    assert c.compiled_s == pytest.approx(2.00 * MS), (
        "compiled_s is the median of the runs after the last one that compiled: "
        "eager_then_compile's eager first run and its compiling second run left out"
    )
    # ceil((10 + 102 - 2 * 2) / (10 - 2)) = ceil(13.5) = 14
    assert c.break_even_calls == 14, (
        "break-even counts both warm-up runs (the eager one and the compiling one) "
        "against as many eager runs"
    )
    assert not [n for n in rep.notes if "spread" in n or "slowest" in n], rep.notes


# (repeat, eager costs, graph costs with the compiling run's first, the notes expected)
SPREADS = {
    # no --repeat: 5 runs a side; eager alternates 20 / 2 ms: IQR 18 ms, median 11 ms
    "IQR": (
        None,
        [20, 2, 20, 2, 20],
        [2] * 5,
        ["eager: spread too wide to trust (IQR 164% of the median over 4 runs)"],
    ),
    # two steady runs have no quartiles: their range, 1 ms of a 2.5 ms median
    "range": (
        3,
        [10] * 3,
        [2, 2, 3],
        ["compiled: spread too wide to trust (range 40% of the median over 2 runs)"],
    ),
    # IQR 0 over 8 runs, but the slowest 4.5 times the fastest
    "ratio": (9, [10] * 9, [2] * 8 + [9], ["compiled: the slowest run took 4.5× the fastest"]),
    # IQR 5 % and 2 % of the median: under the 10 % flag
    "narrow": (
        5,
        [15, 10.4, 9.8, 10.2, 10.0],
        [2, 2.00, 2.04, 1.98, 2.02],
        [],
    ),
}


@pytest.mark.parametrize("case", list(SPREADS))
def test_compare_flags_a_wide_spread_not_a_narrow_one_on_a_fake_clock(sh, clk, case):
    repeat, eager, graph, expected = SPREADS[case]
    cost = timed_work(sh, eager=[t * MS for t in eager], graph=[t * MS for t in graph])
    opts = "default --compare -q" + (f" --repeat {repeat}" if repeat else "")
    rep, _ = compared(sh, opts, cost)
    assert len(rep.compare.runs["eager"]) == len(rep.compare.runs["compiled"]) == len(eager)
    flags = [n for n in rep.notes if n.startswith(("eager:", "compiled:"))]
    assert flags == expected, (
        "a steady state is flagged when its IQR (the range under 4 runs) is over 10 % of "
        "its median, or its slowest run over 4x its fastest; not otherwise"
    )


def test_compare_subtracts_the_recorders_profiler_overhead_on_a_fake_clock(sh, clk, monkeypatch):
    # the recorder's running total of its own profiler time, as the cell's
    # compiled code advances it
    monkeypatch.setattr(
        probe.Recorder, "overhead_so_far", property(lambda self: sh.user_ns["overhead"][0])
    )
    # compiled runs: 2 ms of code each, plus profiler time on the clock, and
    # what the recorder reports of it; the last reports more than the run took
    cost = timed_work(
        sh,
        eager=[10 * MS] * 4,
        graph=[2 * MS] * 4,
        profiler=[(0, 0), (0.5 * MS, 0.5 * MS), (1.5 * MS, 1.5 * MS), (1 * MS, 4 * MS)],
    )
    rep, _ = compared(sh, "default --compare --repeat 4 -q", cost)
    c = rep.compare
    assert c.runs["compiled"] == approx_list([102 * MS, 2 * MS, 2 * MS, 0.0]), (
        "a compiled run's time is the clock's less the recorder's profiler overhead "
        "during it, never below 0"
    )
    assert c.compiled_s == pytest.approx(2 * MS)
    assert rep.wall_s == pytest.approx(102 * MS + 2.5 * MS + 3.5 * MS + 3 * MS), (
        "the window's wall time is the clock's (the overhead is left out of the runs only)"
    )


def test_compare_once_estimates_the_steady_state_on_a_fake_clock(sh, clk, monkeypatch):
    # torch's own compile time (read on its clock, not ours): the backend's 100 ms
    monkeypatch.setattr(Closed, "compile_s", property(lambda self: 100 * MS))
    cost = timed_work(sh, eager=[10 * MS], graph=[2 * MS])
    rep, _ = compared(sh, "default --compare --repeat 1 -q", cost)
    c = rep.compare
    assert c.runs == {"eager": approx_list([10 * MS]), "compiled": approx_list([102 * MS])}
    assert c.compiled_s == pytest.approx(2 * MS), (
        "with one run a side, compiled_s is that run less its compile time"
    )
    # ceil((102 - 2) / (10 - 2)) = ceil(12.5) = 13
    assert c.break_even_calls == 13
    assert any("one run each" in n for n in rep.notes), rep.notes


# -- where the clock is read against the device's synchronization -------------------


class ReadLog(FakeClock):
    """A fake clock that logs each reading, with the module that took it."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def __call__(self) -> float:
        self.log.append(("read", sys._getframe(1).f_globals["__name__"]))
        return super().__call__()


@pytest.fixture
def events(monkeypatch):
    """A log of the device's synchronizations (``probe.sync_if_cuda``, here
    with no CUDA to wait for) and of the clock's readings."""
    log: list = []

    def sync() -> bool:
        log.append("sync")
        return False

    monkeypatch.setattr(probe, "sync_if_cuda", sync)
    return log


def test_timed_run_syncs_before_each_clock_reading(events):
    clock = ReadLog(events)

    def cell():
        events.append("run")
        clock.advance(3 * MS)
        return "value"

    t, value = compare._timed(cell, clock)
    assert (t, value) == (pytest.approx(3 * MS), "value")
    read = ("read", "stance_magic.session.compare")
    assert events == ["sync", read, "run", "sync", read], (
        "a run is timed from an idle device to an idle device: sync, read, run, sync, read"
    )


def _not_the_recorders(events: list) -> list:
    """The log less the recorder's own readings (stance_magic.probe's, for its
    lookups and calls, taken inside a run): they are not a run's bracket. Any
    other module's reading stays in."""
    return [e for e in events if isinstance(e, str) or not e[1].startswith("stance_magic.probe")]


def test_compare_and_its_window_sync_before_each_clock_reading(sh, events):
    """Through the magic: every eager and compiled run is bracketed as
    _timed's, and the measurement window around the compiled runs syncs
    before its start and before its end; a measured cell's window too."""
    timed = [
        "sync",
        ("read", "stance_magic.session.compare"),
        "run",
        "sync",
        ("read", "stance_magic.session.compare"),
    ]
    window = ["sync", ("read", "stance_magic.session.measurement")]
    with on_engine(ReadLog(events)) as clock:
        sh.user_ns.update(clk=clock, log=events)
        cost = timed_work(sh, eager=[10 * MS] * 2, graph=[2 * MS] * 2)
        events.clear()
        body = "log.append('run')\nfw(torch.ones(2))"
        compared(sh, "default --compare --repeat 2 -q", cost, body=body)
        assert _not_the_recorders(events) == timed * 2 + window + timed * 2 + window, (
            "each run: sync, read, run, sync, read; the compiled runs' window: sync, "
            "read at its start and at its end"
        )
        events.clear()
        res, _ = run(sh, "%%stance default -q\nlog.append('run')\nclk.advance(0.007)")
        assert res.success, res.error_in_exec
        assert _not_the_recorders(events) == [*window, "run", *window], (
            "a measured cell's window: sync, read, the cell, sync, read"
        )
        assert last(sh).wall_s == pytest.approx(7 * MS), "wall time is the window's clock"


# -- no clock in their assertions -----------------------------------------------------------


@pytest.mark.parametrize("count", ["99999999999999999999", "10001"])
def test_absurd_repeat_is_refused_before_the_cell_runs(shell, count):
    res, _ = run(shell, f"%%stance default --compare --repeat {count}\nside_effect = 1")
    err = res.error_in_exec
    assert type(err).__name__ == "UsageError"
    assert "10,000" in str(err) and "\n" not in str(err)
    assert "side_effect" not in shell.user_ns


def test_compare_once_warns_no_steady_state(sh):
    sh.run_cell(SLOW_EAGER)
    res, cap = run(sh, "%%stance default --compare --repeat 1 --no-plot\ncwork(torch.ones(3))")
    rep = stance_magic.history()[-1]
    assert len(rep.compare.runs["compiled"]) == 1
    assert any("--repeat" in n for n in rep.notes)


def test_steady_state_statistics():
    s = steady([5.0, 1.0, 1.0, 1.0, 1.0, 1.0], "x")
    assert s.n == 5 and s.median == 1.0 and s.warning is None  # warm-up excluded
    wide = steady([5.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0], "x")
    assert "spread too wide" in wide.warning
    assert "one run only" in steady([1.0], "x").warning
    assert break_even(10.0, 1.0, 2.0) == 9
    assert break_even(1.0, 2.0, 2.0) is None


def test_a_wide_spread_over_few_runs_is_flagged():
    few = steady([5.0, 1.0, 1.5], "eager")  # two steady runs, 50 % apart
    assert few.warning and "spread too wide" in few.warning
    assert steady([5.0, 1.0, 1.02, 1.01], "eager").warning is None


def test_break_even_of_one_run_is_singular():
    rep = CellReport(
        compare=Comparison(eager_s=2.0, compiled_s=1.0, speedup=2.0, break_even_calls=1)
    )
    text = rep.text(verbose=True)
    assert has_row(text + "\n", "break-even", "1 run\n")
    assert "1 runs" not in text
    assert "breaks even after 1 run" in str(rep) and "1 runs" not in str(rep)
    rep = replace(rep, compare=replace(rep.compare, break_even_calls=3))
    assert "3 runs" in str(rep)


def test_sweep_every_stance_from_cold(sh):
    sh.run_cell("sw = torch.compile(lambda x: x.relu() + 1, backend='eager', dynamic=False)")
    run(sh, "%%stance default -q\nsw(torch.ones(2))")  # warm: the sweep must not reuse it
    run(sh, "%stance eager_on_recompile -q")
    res, cap = run(sh, "%%stance --sweep\nfor n in (2, 3):\n    sw(torch.ones(n))")
    assert res.success
    assert any("torch.compiler.reset()" in t for t in text_outputs(cap))
    reps = stance_magic.history()[-len(probe.supported_stances()) :]
    by = {r.stance: r for r in reps}
    assert set(by) == set(probe.supported_stances())
    assert by["default"].compiles == 2 and len(by["default"].recompiles) == 1
    assert by["force_eager"].compiles == 0
    assert by["fail_on_recompile"].error and "fail_on_recompile" in by["fail_on_recompile"].error
    assert by["eager_then_compile"].compiles == 1 and by["eager_then_compile"].eager_first_calls
    assert stance_magic.current_stance().name == "eager_on_recompile"  # session restored
    text = "\n".join(text_outputs(cap))
    assert "stance_magic sweep" in text and "fail_on_recompile" in text
    assert len(images(cap)) == 1
    # each stance against default: its diff's headline, from the two reports
    assert "each stance against default" in text
    want = stance_magic.diff(by["default"], by["fail_on_recompile"])
    assert want.row("recompiles").change == -1 and want.row("error") is not None  # type: ignore[union-attr]
    assert "fail_on_recompile vs default: " in text and "failed (RuntimeError)" in text
    fe = stance_magic.diff(by["default"], by["force_eager"])
    wall = fe.headline.split(": ", 1)[1].split(": ", 1)[0]  # "-96.0 ms wall"
    assert f"force_eager vs default: {wall}" in text


def test_sweep_with_a_list_and_bad_names(sh):
    sh.run_cell("sl = torch.compile(lambda x: x * 4, backend='eager')")
    res, _ = run(sh, "%%stance --sweep default,force_eager --no-plot\nsl(torch.ones(2))")
    assert res.success
    assert [r.stance for r in stance_magic.history()[-2:]] == ["default", "force_eager"]
    n = len(stance_magic.history())
    res, _ = run(sh, "%%stance --sweep default,forse_eager\nran = 1")
    assert "did you mean 'force_eager'" in str(res.error_in_exec)
    assert "ran" not in sh.user_ns and len(stance_magic.history()) == n
    res, _ = run(sh, "%%stance default --sweep\nran = 1")
    assert type(res.error_in_exec).__name__ == "UsageError"


@pytest.mark.parametrize("opts", ["default --compare --repeat 2", "--sweep default,force_eager"])
def test_repeat_notices_are_displayed_not_written_to_stderr(shell, opts):
    shell.run_cell("import torch\nnt = torch.compile(lambda x: x + 5, backend='eager')")
    res, cap = run(shell, f"%%stance {opts} --no-plot\nnt(torch.ones(2))")
    assert res.success, res.error_in_exec
    assert "repeat" not in cap.stderr
    notices = [o.data for o in cap.outputs if "side effects repeat" in o.data["text/plain"]]
    assert len(notices) == 1
    assert notices[0]["text/plain"].startswith("stance_magic: ")
    assert "side effects repeat" in notices[0]["text/html"]
    _, cap = run(shell, f"%%stance {opts} -q\nnt(torch.ones(2))")
    assert not cap.outputs and "repeat" not in cap.stdout + cap.stderr


def test_plots_once_per_cell_and_off_switch(sh):
    sh.run_cell("pp = torch.compile(lambda x: x - 2, backend='eager')")
    _, cap = run(sh, "%%stance default\npp(torch.ones(2))")
    assert len(images(cap)) == 1
    _, cap = run(sh, "%%stance default --no-plot\npp(torch.ones(2))")
    assert not images(cap)
    _, cap = run(sh, "%stance history --plot")
    assert len(images(cap)) == 1
    text = "\n".join(text_outputs(cap))
    assert "compiles" in text and "pp(torch.ones(2))" in text and "history chart" in text


def test_terminal_without_images_gets_text_only(sh):
    sh.display_formatter.active_types = ["text/plain"]
    sh.run_cell("pt = torch.compile(lambda x: x - 3, backend='eager')")
    _, cap = run(sh, "%%stance default\npt(torch.ones(2))")
    assert not images(cap)
    assert not any("chart]" in t for t in text_outputs(cap))
    assert any(t.startswith("stance_magic · ") for t in text_outputs(cap))


def test_history_plot_in_a_terminal_says_why_there_is_no_chart(shell):
    shell.display_formatter.active_types = ["text/plain"]  # as a terminal IPython
    run(shell, "%%stance -q\nx = 1")
    _, cap = run(shell, "%stance history --plot")
    why = [ln for ln in cap.stdout.splitlines() if "chart" in ln]
    assert len(why) == 1 and "text only" in why[0], cap.stdout
    assert "cell    code" in cap.stdout  # the table itself still shows
    assert not [o for o in cap.outputs if "image/png" in o.data]


def test_recompile_hint_from_a_real_cell(sh):
    sh.run_cell("dyn = torch.compile(lambda x: x * 9, backend='eager', dynamic=False)")
    _, cap = run(sh, "%%stance default --no-plot\nfor n in (2, 3, 4):\n    dyn(torch.ones(n))")
    # the hint is the report's second line, under its headline
    (report,) = [t for t in text_outputs(cap) if t.startswith("stance_magic · ")]
    hints = [ln for ln in report.splitlines() if ln.startswith("hint:")]
    assert report.splitlines()[1] == hints[0]
    assert hints and "eager_then_compile" in hints[0] and "size mismatch" in hints[0]
    _, cap = run(sh, "%%stance default --no-plot\ndyn(torch.ones(2))")
    assert not any("eager_then_compile" in t for t in text_outputs(cap))


# advice logic: each hint appears with its cause and not without it
def recompile(reason: str) -> Recompile:
    return Recompile(reason=reason, where="f (<In [1]>:1)", compile_id="0/1")


def rep_(**kw):
    base = dict(stance="default", wall_s=0.01, cache_hits=0)
    base.update(kw)
    return CellReport(**base)


def test_hint_for_shape_recompiles():
    r = rep_(
        recompile_details=[
            recompile("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3")
        ]
    )
    assert any("eager_then_compile" in h for h in advise(r))
    assert not any("eager_then_compile" in h for h in advise(rep_()))
    r = replace(r, stance="eager_then_compile")
    assert not any("try %%stance eager_then_compile" in h for h in advise(r))


def test_hint_for_guard_share():
    lk = Lookups(method="in situ", seconds=5e-5, per_lookup_s=5e-6, timed=10)
    r = rep_(wall_s=1e-4, lookups=lk, cache_hits=10)
    h = advise(r)
    assert any("skip_guard_eval_unsafe" in x and "50%" in x for x in h)
    # a few lookups say little; an error cell says less
    few = replace(lk, timed=3)
    assert not any("skip_guard" in x for x in advise(rep_(**{**vars(r), "lookups": few})))
    assert not any("skip_guard" in x for x in advise(rep_(**{**vars(r), "error": "RuntimeError"})))
    tiny = Lookups(method="in situ", seconds=1e-6)
    assert not any("skip_guard" in x for x in advise(rep_(wall_s=1.0, lookups=tiny)))
    r = replace(r, skip_guard_eval_unsafe=True)
    assert not any("skip_guard" in x for x in advise(r))


def test_hint_for_break_even_and_graph_breaks_and_warm():
    runs = {"eager": [0.2] * 3, "compiled": [1.0, 0.1, 0.1]}
    c = Comparison(eager_s=0.2, compiled_s=0.1, speedup=2.0, break_even_calls=10, runs=runs)
    r = rep_(compile_s=0.9, cache_hits=3, compare=c)
    assert any("paid back after 10 runs" in h for h in advise(r))
    r = replace(r, compare=replace(c, break_even_calls=2))
    assert not any("paid back" in h for h in advise(r))
    g = rep_(graph_break_details=[GraphBreak("print", 2, "print: a builtin")])
    assert any("2 graph breaks" in h and "print" in h for h in advise(g))
    assert not any("graph break" in h for h in advise(rep_()))
    warm = rep_(cache_hits=5)
    assert any("fail_on_recompile" in h for h in advise(warm))
    assert not any("fail_on_recompile" in h for h in advise(rep_(cache_hits=5, compiles=1)))
    many = rep_(
        recompile_details=[recompile("size mismatch")] * 2,
        graph_break_details=[GraphBreak("x", 1, "x")],
        wall_s=1e-4,
        lookups=Lookups(method="in situ", seconds=9e-5),
        cache_hits=4,
    )
    assert len(advise(many)) <= 3


# -- the timing lane: agreement with a real clock, on the median of rounds ----------


def _outside(fn, x, stance: str, n: int = 5) -> float:
    """``fn(x)`` ``n`` times under ``stance``, each on perf_counter: the median
    of all but the first (--compare's steady state, measured without it)."""
    times = []
    with torch.compiler.set_stance(stance):
        for _ in range(n):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


@pytest.mark.timing
def test_compare_agrees_with_an_outside_clock(sh):
    """Our eager figure against a bare perf_counter loop of the same call,
    and the compiled code's real speedup (it skips the 10 ms sleep)."""
    sh.run_cell(SLOW_EAGER)
    cwork, x = sh.user_ns["cwork"], torch.ones(2)

    def one_round() -> dict[str, float]:
        res, _ = run(sh, "%%stance default --compare --repeat 5 -q\ncwork(torch.ones(2))")
        assert res.success, res.error_in_exec
        c = last(sh).compare
        return {
            "eager_s / outside loop": c.eager_s / _outside(cwork, x, "force_eager"),
            "(eager_s - compiled_s) / eager_s": (c.eager_s - c.compiled_s) / c.eager_s,
        }

    agree(
        one_round,
        {"eager_s / outside loop": (0.8, 1.25), "(eager_s - compiled_s) / eager_s": (0.5, None)},
        why="the same call on the same clock: --compare adds two clock readings a run "
        "(and no sync without CUDA), microseconds against a 10 ms sleep; the compiled "
        "code skips that sleep, so it saves far more than half of an eager run",
    )


@pytest.mark.timing
def test_compare_eager_then_compile_steady_state_on_a_real_clock(sh):
    """The steady state left after eager_then_compile's eager first run and
    its compiling second run is the compiled code's: it skips the sleep."""

    def one_round() -> dict[str, float]:
        sh.run_cell(SLOW_EAGER)  # a new function: it compiles in this round
        res, _ = run(
            sh, "%%stance eager_then_compile --compare --repeat 5 -q\ncwork(torch.ones(2))"
        )
        assert res.success, res.error_in_exec
        rep = last(sh)
        if rep.compiles > 1 and probe.torch_version() < probe.DELAYED_CALLBACK_LINKED_SINCE:
            pytest.skip("torch 2.8 recompiled under eager_then_compile: no steady state")
        comp = rep.compare.runs["compiled"]
        # orderings that hold at any load: the first run is eager (it sleeps)
        assert comp[0] >= 0.01 and rep.compiles == 1, (comp, rep.compiles)
        c = rep.compare
        return {"(eager_s - compiled_s) / eager_s": (c.eager_s - c.compiled_s) / c.eager_s}

    agree(
        one_round,
        {"(eager_s - compiled_s) / eager_s": (0.5, None)},
        why="the steady state is runs 3-5, the compiled code, which skips the 10 ms sleep "
        "of every eager run: it saves far more than half of one (with the eager first "
        "run or the compiling run in, it would save nothing)",
    )


SLOW_BACKEND = """
import time
def slow_backend(gm, example_inputs):
    def run(*args):
        time.sleep(0.005)
        return gm.forward(*args)
    return run
cs = torch.compile(lambda x: x + 1, backend=slow_backend)
"""


@pytest.mark.timing
def test_compare_never_pays_off_on_a_real_clock(sh):
    """Compiled code that really is slower than the eager code: --compare's
    steady states say so (its verdict, never, is the fake-clock test's)."""
    sh.run_cell(SLOW_BACKEND)

    def one_round() -> dict[str, float]:
        res, _ = run(sh, "%%stance default --compare --repeat 5 -q\ncs(torch.ones(2))")
        assert res.success, res.error_in_exec
        c = last(sh).compare
        return {"(compiled_s - eager_s) / compiled_s": (c.compiled_s - c.eager_s) / c.compiled_s}

    agree(
        one_round,
        {"(compiled_s - eager_s) / compiled_s": (0.0, None)},
        why="every compiled run sleeps 5 ms in its backend, an eager run is one addition "
        "(microseconds): compiled is the slower, so it never pays off",
    )


JUMPY = """
import time, torch
ticks = []
def jumpy(x):
    if not torch.compiler.is_compiling():
        ticks.append(1)
        time.sleep(0.02 if len(ticks) % 2 else 0.002)
    return x + 1
cj = torch.compile(jumpy, backend='eager')
"""


@pytest.mark.timing
def test_compare_sees_a_real_spread(sh):
    """Eager runs that alternate 20 ms and 2 ms sleeps: the runs on the real
    clock show that spread, and the steady state is flagged."""
    sh.run_cell(JUMPY)

    def one_round() -> dict[str, float]:
        res, _ = run(sh, "%%stance default --compare -q\ncj(torch.ones(2))")
        assert res.success, res.error_in_exec
        rep = last(sh)
        steady = rep.compare.runs["eager"][1:]
        q = statistics.quantiles(steady, n=4)
        return {
            "eager IQR / median": (q[2] - q[0]) / statistics.median(steady),
            "flagged": float(any("eager: spread too wide" in n for n in rep.notes)),
        }

    agree(
        one_round,
        {"eager IQR / median": (0.5, None), "flagged": (1.0, None)},
        why="steady runs of 2, 20, 2, 20 ms: an IQR of about 160 % of the median, far "
        "past the 10 % that flags it (a busy machine lengthens the short sleeps a little)",
    )
