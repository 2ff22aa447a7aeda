"""The anatomy of a compiled call: torch.compile's wrapper, Dynamo's cache
lookup as torch's profiler bounds it, the compiled code, and a call that ran
eagerly.

Two lanes. The arithmetic (how each part comes out of the clock's readings,
the clock's own work left out, the hints' rules on the parts) runs on a fake
clock that ticks once a reading (``tests/fakeclock.py``), torch's profiler
replaced by lookup events of a chosen length: every figure is exact, on any
machine at any load. What only a real clock can show (each part against a
source that does not go through stance_magic: the profiler's ``TorchDynamo
Cache Lookup`` and ``Torch-Compiled Region`` events, the outside clock
around a bare loop; on a tiny function, one of 64 arguments and GPT-2) is
marked ``timing`` and decided on the median of interleaved rounds
(``tests/timing.py``; benchmarks/bench_anatomy.py is the procedure, and
prints the figures)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import types
from pathlib import Path

import pytest
import torch

from stance_magic import probe
from stance_magic.probe import anatomy
from stance_magic.render import advice, lookup_method
from stance_magic.report import GPU_BOUND, CallParts

from conftest import html_outputs, last, run, steady_timed
from fakeclock import FakeClock, on_engine
from timing import agree

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_anatomy.py"
_spec = importlib.util.spec_from_file_location("bench_anatomy", BENCH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

#: The fake clock's tick: 200 x 2**-27 s (about 1.5 µs). Readings, their
#: differences, a quarter of a tick and the clock's pass cost (a loop's
#: readings over 200) are all exact binary fractions, so the figures below
#: are compared with ==.
TICK = 200 * 2.0**-27
#: The lookup events torch's profiler is replaced by: three quarters of the
#: span from the dispatch to the end of the lookup, which on this clock is
#: one tick (two readings, one after the other). The lookup is then 0.75 of
#: a tick, the wrapper's way into Dynamo the other 0.25.
EVENT = 0.75 * TICK
#: Strictly above 0, strictly below 1 (agree()'s bounds are inclusive).
ABOVE_0 = math.nextafter(0.0, 1.0)
BELOW_1 = math.nextafter(1.0, 0.0)


@pytest.fixture
def one_thread():
    """One intra-op thread: on two busy cores torch's thread pool swings
    per-call times by far more than the parts measured here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _workload(which: str):
    """(a step calling the compiled function, calls a loop)."""
    for name, step, _n in bench.workloads(quick=True):
        if name.startswith(which):
            return step
    raise LookupError(which)


def _fake_profiler(monkeypatch, event: float) -> None:
    """torch's profiler replaced: it starts, and gives one lookup event of
    ``event`` seconds for each lookup it recorded (LookupBounds.seen counts
    them), RecordFunction found on."""
    counted = [0]
    stop = anatomy.LookupBounds.stop

    def counting_stop(self, in_cell=True):
        counted[0] = self._recorded
        return stop(self, in_cell)

    monkeypatch.setattr(anatomy.LookupBounds, "stop", counting_stop)
    monkeypatch.setattr(anatomy, "_profiler_start", lambda: True)
    monkeypatch.setattr(anatomy, "_profiler_stop", lambda: ([event] * counted[0], True))


#: ``f``: a compiled function whose compiled code takes ``W`` seconds of the
#: fake clock (its backend's code advances it: Dynamo does not trace that),
#: compiled outside the measured cells.
TICKING = """
W = 0.0
def ticking(gm, example_inputs):
    def run(*args):
        clock.advance(W)
        return gm.forward(*args)
    return run
f = torch.compile(lambda x: x + 1, backend=ticking)
x = torch.ones(3)
f(x); f(x)
"""


@pytest.fixture
def ticking(sh, monkeypatch):
    """The shell with :data:`TICKING` run, stance_magic's engine on a clock
    that ticks once a reading (:data:`TICK`), torch's profiler replaced by
    :data:`EVENT` a lookup. The clock is ``sh.user_ns["clock"]``."""
    clock = FakeClock(tick=TICK)
    sh.user_ns["clock"] = clock
    assert sh.run_cell(TICKING).success
    _fake_profiler(monkeypatch, EVENT)
    with on_engine(clock):
        yield sh


def _ticks(p: CallParts) -> dict[str, float | None]:
    """A call's parts in ticks of the fake clock."""
    names = ("before", "into", "lookup", "compiled", "after", "wrapper", "call", "eager")
    return {n: None if (v := getattr(p, f"{n}_s")) is None else v / TICK for n in names}


def u_hints(rep) -> list[str]:
    return [h for h in rep.advice() if "skip_guard_eval_unsafe" in h]


def overhead_hints(rep) -> list[str]:
    return [h for h in rep.advice() if "torch.compile's own work" in h]


# -- the timing lane: each part against sources outside stance_magic --------


@pytest.mark.integration
@pytest.mark.timing
@pytest.mark.parametrize(
    "which, calls",
    [("a tiny function", 500), ("a function of 64", 300), ("GPT-2", 20)],
)
def test_each_part_within_1_5x_of_the_profiler_and_the_outside_clock(sh, one_thread, which, calls):
    """Each part of the report's call against a source that does not go
    through stance_magic, round by round (benchmarks/bench_anatomy.py, one
    round each: the report's loop and the bare one in alternating order): the
    whole call against the bare loop's clock, the lookup against the
    profiler's lookup events, the compiled code against its outermost
    compiled-region events, a call under force_eager against the bare loop
    under force_eager; and the wrapper, what is left of the call, above 0 and
    below the whole call. On the tiny function (a call of 10-30 µs) a part
    may read above 1.5x of its source by what the hooks added to a call of
    the same round's measured loop, by the outside clock: the own work a
    timed call cannot leave out (2-4 µs a call on a quiet machine; on a host
    where Python runs slow, 10 µs and more, as seen here in one CI run)."""
    step = _workload(which)
    bounded: list[bool] = []
    tiny = which == "a tiny function"
    low, high = 1 / bench.TARGET_RATIO, bench.TARGET_RATIO

    def one_round() -> dict[str, float]:
        r = bench.anatomy(step, calls, rounds=1)
        bounded.append(r["bounded"])
        figures = {}
        for part, f in r["parts"].items():
            name = f"{part} / {bench.SOURCES[part]}"
            figures[name] = f["ratio"]
            if tiny:
                # a call this small shows the hooks' own work that a timed
                # call's parts cannot all leave out (docs/call-anatomy.md):
                # above, each part may exceed its source by what the hooks
                # added to a call of the same round's measured loop (outside
                # clock), no more
                hooks = r["eager_hooks_s"] if part == "eager call" else r["hooks_s"]
                figures[f"{name}, less the hooks' cost"] = (f["report_s"] - hooks) / f[
                    "independent_s"
                ]
        figures["wrapper / whole call"] = r["wrapper_s"] / r["parts"]["whole call"]["report_s"]
        return figures

    bounds: dict[str, tuple[float | None, float | None]] = {}
    for part, source in bench.SOURCES.items():
        if tiny:
            bounds[f"{part} / {source}"] = (low, None)
            bounds[f"{part} / {source}, less the hooks' cost"] = (None, high)
        else:
            bounds[f"{part} / {source}"] = (low, high)
    bounds["wrapper / whole call"] = (ABOVE_0, BELOW_1)
    agree(
        one_round,
        bounds,
        why=(
            f"{which}: each part within {bench.TARGET_RATIO}x of a source outside "
            "stance_magic (the benchmark's target: the report's parts are medians of "
            "calls its hooks time, their own work left out, so they read what the "
            "profiler and a bare loop read); the wrapper is the call less the lookup "
            "and the compiled code, so above 0 and below the call"
        ),
    )
    assert all(bounded), f"torch's profiler did not bound the lookup in every round: {bounded}"


@pytest.mark.timing
def test_the_lookup_share_agrees_with_the_profiler_on_its_side_of_LOOKUP_SHARE(sh, one_thread):
    """A 1-argument function doing some work (a 64x64 matmul): the lookup
    is well under LOOKUP_SHARE of a call by the profiler's events against
    the bare call, each call timed on its own (0.06-0.09 on torch 2.8 to
    2.15), and the report's share of its own call is on the same side, so
    -u gets no hint. A function of a list of 128 tensors concatenated: about
    0.3 of a call, both ways, and -u may get its hint. Each round's hints
    follow their rules on that round's figures; that they appear exactly
    where the rules say is tested on exact parts, on the fake clock, below.
    (The -u hint also needs the cell's lookups GUARD_SHARE of its wall
    time, which load lengthens: under a hog the wide function's hint was
    gone in 6 of 9 rounds, its lookup still 0.27 of a call.)"""
    sh.run_cell(
        "f = torch.compile(lambda x: (x @ x).relu().sum(), backend='eager')\n"
        "x = torch.ones(64, 64)\nf(x); f(x)\n"
        "xs = [torch.ones(2) for _ in range(128)]\n"
    )
    sh.run_cell("cat = torch.compile(lambda xs: torch.cat(xs), backend='eager')\ncat(xs); cat(xs)")
    cell = "%%stance default -q\nfor _ in range(300):\n    {}"
    for call in ("f(x)", "cat(xs)"):
        run(sh, cell.format(call))  # torch's profiler bounds each lookup here
    ns = sh.user_ns
    functions = [
        ("tiny", "f(x)", lambda: ns["f"](ns["x"])),
        ("wide", "cat(xs)", lambda: ns["cat"](ns["xs"])),
    ]
    turn = [0]

    def one_round() -> dict[str, float]:
        figures = {}
        # the two functions in alternating order, each one's cell right
        # before the profiler's loop and the bare one over the same calls
        order = functions[::-1] if turn[0] % 2 else functions
        turn[0] += 1
        for name, call, step in order:
            run(sh, cell.format(call))
            rep = last(sh)
            p = rep.call_parts
            assert p.lookup_bounded and p.calls >= advice.MIN_LOOKUPS, (name, p)
            # the hints' rules on this round's own figures (the wrapper's share
            # here: about 0.45 of a call on torch 2.13, 0.35 on 2.8)
            own = p.wrapper_s + p.lookup_s
            assert bool(overhead_hints(rep)) == (own >= advice.OVERHEAD_SHARE * p.call_s), (
                f"OVERHEAD_SHARE rule broken on {name}'s parts: {p}: {rep.advice()}"
            )
            lk = rep.lookups
            want_u = p.lookup_s >= advice.LOOKUP_SHARE * p.call_s and (
                lk.timed >= advice.MIN_LOOKUPS and lk.seconds / rep.wall_s >= advice.GUARD_SHARE
            )
            assert bool(u_hints(rep)) == want_u, (
                f"LOOKUP_SHARE or GUARD_SHARE rule broken on {name}'s figures: {p}, lookups "
                f"{lk.seconds:.3g} s of the cell's {rep.wall_s:.3g} s: {rep.advice()}"
            )
            lookup, _ = bench.profiled(step, 300)
            figures[f"{name}: profiler's lookup / bare call"] = lookup / bench.per_call(step, 300)
            figures[f"{name}: report's lookup / its call"] = p.lookup_s / p.call_s
        return figures

    under = (None, math.nextafter(advice.LOOKUP_SHARE, 0.0))
    over = (advice.LOOKUP_SHARE, None)
    agree(
        one_round,
        {
            "tiny: profiler's lookup / bare call": under,
            "tiny: report's lookup / its call": under,
            "wide: profiler's lookup / bare call": over,
            "wide: report's lookup / its call": over,
        },
        why=(
            f"-u saves part of the lookup only, so its hint needs the lookup at least "
            f"LOOKUP_SHARE ({advice.LOOKUP_SHARE}) of a call: by torch's profiler the "
            "matmul's lookup is well under it (0.06-0.09), the concatenation's well over "
            "(about 0.3), and the report's share must fall on the same side"
        ),
    )


# -- the fast lane: each part's arithmetic, on a clock that ticks ------------

SETUP = "f = torch.compile(lambda x: x + 1, backend='eager')\nx = torch.ones(3)\nf(x); f(x)\n"


def test_parts_add_up_and_show_in_text_html_and_csv(ticking):
    """On a clock that ticks once a reading, each part is the readings
    between its ends, less the clock's own: the wrapper before Dynamo (the
    next call's start, the dispatch) 1 tick, the dispatch to the end of the
    lookup 1 tick (0.75 the lookup by the profiler's events, 0.25 the way
    into Dynamo), the compiled code 1 tick however many of torch's calls of
    set_eval_frame the clock passed on inside it (each of their readings is
    the pass cost left out), the wrapper after it 1 tick (its return, the
    call's end, less the clock's own reading between): 4 ticks a call."""
    sh = ticking
    cell = "%%stance default -q\nfor _ in range(100):\n    f(x)"
    for _ in range(anatomy.CALIBRATIONS):  # the profiler bounds the lookup in each
        run(sh, cell)
        lk = last(sh).lookups
        # after its warm-up, until CALIBRATION_HITS hits: counted, not timed
        assert lk.calibrated == anatomy.CALIBRATION_SKIP + anatomy.CALIBRATION_HITS
        assert lk.bounded
    res, cap = run(sh, cell.replace(" -q", " --no-plot"))
    assert res.success
    rep = last(sh)
    p = rep.call_parts
    # every lookup counted (past the first 64 of the function, 1 in 16 timed);
    # none under the profiler (it ran in the first cells)
    lk = rep.lookups
    assert rep.cache_hits == 100 == lk.timed + lk.sampled and lk.calibrated == 0
    assert p.calls == lk.timed and p.lookup_bounded and p.eager_calls == 0
    assert _ticks(p) == {
        "before": 1.0,
        "into": 0.25,
        "lookup": 0.75,
        "compiled": 1.0,
        "after": 1.0,
        "wrapper": 2.25,
        "call": 4.0,
        "eager": None,
    }, "each part is its readings on a clock that ticks once a reading"
    assert p.call_s == p.wrapper_s + p.lookup_s + p.compiled_s
    assert p.wrapper_s == p.before_s + p.into_s + p.after_s
    # the lookup part is the lookups' own figure: the span times the profiler's share
    (target,) = rep.lookups.targets
    assert p.lookup_s == target.per_lookup_s == rep.lookups.per_lookup_s == EVENT
    # the row is folded in the brief report: whole in the verbose text, and in
    # the HTML's folded part
    text = rep.text(verbose=True)
    (html,) = [h for h in html_outputs(cap) if "sm-report" in h]
    for out in (text, html.replace("&#x27;", "'")):
        assert "a compiled call" in out and "torch.compile's wrapper" in out
        # 0.75 of 4 ticks
        assert "-u (skip_guard_eval_unsafe) can save part of the lookup (19% of a call)" in out
    assert "each bounded as torch's profiler bounds a lookup" in lookup_method(rep.lookups)
    row = rep.summary_row()
    keys = list(row)
    # the new columns come after every earlier one (the GPU's follow them)
    at = keys.index("cache_verdict") + 1
    assert keys[at : at + 7] == [
        "call_s",
        "call_wrapper_s",
        "call_lookup_s",
        "call_compiled_s",
        "call_eager_s",
        "call_lookup_bounded",
        "lookups_calibrated",
    ]
    assert row["call_s"] == 4 * TICK == p.call_s and row["call_lookup_s"] == EVENT
    assert row["call_wrapper_s"] == 2.25 * TICK and row["call_compiled_s"] == TICK
    assert row["call_eager_s"] is None
    assert row["call_lookup_bounded"] is True and row["lookups_calibrated"] == 0


def test_torch_s_profiler_bounds_a_functions_lookup_in_its_first_three_cells(sh):
    """torch's own profiler (the ticking tests replace it): in each of a
    function's first CALIBRATIONS cells it runs over a few of its calls,
    counted, not timed, and bounds the lookup; from the next cell on, none.
    Counts and words only: how the figures agree with the profiler is the
    timing lane's."""
    sh.run_cell(SETUP)
    cell = "%%stance default -q\nfor _ in range(100):\n    f(x)"
    for i in range(anatomy.CALIBRATIONS):
        run(sh, cell)
        lk = last(sh).lookups
        assert 0 < lk.calibrated <= anatomy.CALIBRATION_CALLS and lk.bounded
        # (the last calibration ends in its cell: the cell's later calls may
        # already be sampled as a bounded function's)
        assert (lk.sample_first, lk.sample_every) in {
            (probe.SAMPLE_FIRST, probe.SAMPLE_EVERY),
            (probe.STEADY_FIRST, probe.STEADY_EVERY),
        }
        if i == 0:
            assert (lk.sample_first, lk.sample_every) == (probe.SAMPLE_FIRST, probe.SAMPLE_EVERY)
    run(sh, cell)
    rep = last(sh)
    lk = rep.lookups
    assert rep.cache_hits == 100 == lk.timed + lk.sampled and lk.calibrated == 0
    # bounded for the session: the first STEADY_FIRST of a cell timed, then 1
    # in STEADY_EVERY (the calibrating cells timed SAMPLE_FIRST first, then 1
    # in SAMPLE_EVERY), and the report says so
    assert lk.timed + lk.waited == steady_timed(100)
    assert (lk.sample_first, lk.sample_every) == (probe.STEADY_FIRST, probe.STEADY_EVERY)
    assert (
        f"the first {probe.STEADY_FIRST} of each, then 1 in {probe.STEADY_EVERY}"
        in lookup_method(lk)
    )
    # (a call that waited for the CPU on a busy machine gives no parts, and
    # its lookup, where that waited too, is counted, not timed)
    assert lk.bounded and rep.call_parts.lookup_bounded
    assert rep.call_parts.calls == lk.timed + lk.waited - lk.waited_calls
    assert "each bounded as torch's profiler bounds a lookup" in lookup_method(lk)
    # forgotten (between windows only): the next cell bounds it again
    from stance_magic.session.engine import get_engine

    recorder = get_engine().recorder
    sh.run_cell("import stance_magic")
    res = sh.run_cell(
        "with stance_magic.measure():\n"
        "    stance_magic.session.engine.get_engine().recorder.forget_lookup_bounds()"
    )
    assert isinstance(res.error_in_exec, RuntimeError), res.error_in_exec
    recorder.forget_lookup_bounds()
    run(sh, cell)
    lk = last(sh).lookups
    assert 0 < lk.calibrated <= anatomy.CALIBRATION_CALLS and lk.bounded


#: A compiled function whose code runs many operators a call (aot_eager: each
#: one an event of torch's profiler, where RecordFunction is on).
MANY_OPS = (
    "def many_ops(x):\n"
    "    for _ in range(20):\n"
    "        x = x.sin() + 1\n"
    "    return x\n"
    "g = torch.compile(many_ops, backend='aot_eager')\nx = torch.ones(3)\ng(x); g(x)\n"
)


def _counting_profiler_events(monkeypatch) -> list[int]:
    """Each calibration's count of torch's profiler events (all of them, read
    where the profiler stops)."""
    from torch._C import _autograd

    counts: list[int] = []
    disable = _autograd._disable_profiler

    class Counted:
        def __init__(self, result):
            self._events = result.events()
            counts.append(len(self._events))

        def events(self):
            return self._events

    monkeypatch.setattr(_autograd, "_disable_profiler", lambda: Counted(disable()))
    return counts


def test_a_calibration_records_its_lookups_and_not_the_compiled_code(sh, monkeypatch):
    """torch's profiler records the profiled calls' lookups only (RecordFunction
    off from each lookup's end to the next profiled call's dispatch): about one
    event a profiled call, not the 40 operators each call's compiled code runs
    (reading GPT-2's took 15-27 ms a calibration); the bound as before; and
    RecordFunction on again after the cell: a user's profiler sees the
    operators."""
    counts = _counting_profiler_events(monkeypatch)
    sh.run_cell(MANY_OPS)
    run(sh, "%%stance default -q\nfor _ in range(100):\n    g(x)")
    lk = last(sh).lookups
    assert lk.bounded and 0 < lk.calibrated <= anatomy.CALIBRATION_CALLS
    # one event a profiled call's lookup, and the calibration's start mark
    assert counts and counts[-1] <= lk.calibrated + 2, (counts, lk.calibrated)
    monkeypatch.undo()
    sh.run_cell(
        "from torch.profiler import profile\nwith profile() as prof:\n    g(x)\n"
        "names = {e.name for e in prof.events()}"
    )
    assert "aten::sin" in sh.user_ns["names"], sorted(sh.user_ns["names"])[:20]


def test_recordfunction_turned_off_by_the_user_stays_off(sh):
    """torch has no getter for RecordFunction's state: the calibration's mark
    at the profiler's start tells, and RecordFunction is left as it was found
    (off: torch's own tests turn it off), the lookups then unbounded."""
    from torch._C import _autograd

    sh.run_cell(MANY_OPS)
    _autograd._enable_record_function(False)
    try:
        run(sh, "%%stance default -q\nfor _ in range(100):\n    g(x)")
        lk = last(sh).lookups
        assert not lk.bounded and lk.timed > 0
        sh.run_cell(
            "from torch.profiler import profile\nwith profile() as prof:\n    g(x)\n"
            "names = {e.name for e in prof.events()}"
        )
        assert "aten::sin" not in sh.user_ns["names"]  # still off
    finally:
        _autograd._enable_record_function(True)


def test_eager_calls_are_a_part_of_their_own(ticking, monkeypatch):
    """Calls that run without compiled code (force_eager inside the cell) are
    timed whole, apart from the compiled ones: on the ticking clock 3 ticks
    (the wrapper before the dispatch, 1; the dispatch to the call's end less
    the clock's own reading, 2), where a compiled call is 4 plus its code's.
    Every call timed (no sampling: the figures are a timed call's ticks)."""
    import stance_magic.probe.recorder.calls as recorder

    monkeypatch.setattr(recorder, "SAMPLE_FIRST", 10**9)
    monkeypatch.setattr(recorder, "STEADY_FIRST", 10**9)
    sh = ticking
    sh.user_ns["W"] = 5 * TICK  # the compiled code's: not an eager call's
    run(
        sh,
        "%%stance default -q\nfor _ in range(60):\n    f(x)\n"
        "with torch.compiler.set_stance('force_eager'):\n    for _ in range(20):\n        f(x)",
    )
    p = last(sh).call_parts
    assert p.eager_calls == 20 and p.eager_s == 3 * TICK
    # 60 compiled calls, of which the profiler ran over 24 (this cell bounds the lookup)
    assert p.calls == 60 - anatomy.CALIBRATION_SKIP - anatomy.CALIBRATION_HITS
    assert _ticks(p)["compiled"] == 6.0 and p.call_s == 9 * TICK


#: (the compiled code's W, in ticks; the -u hint; the "torch.compile's own
#: work" hint). Each call: the wrapper 2.25 ticks, the lookup 0.75, the
#: compiled code 1 + W: the lookup 0.75 / (4 + W) of a call (LOOKUP_SHARE,
#: 0.15: above it at W = 0, at it at 1, below at 2), the wrapper and the
#: lookup 3 / (4 + W) (OVERHEAD_SHARE, 0.4: above at 3, at it at 3.5, below at 4).
HINT_CASES = [(0, True, True), (1, True, True), (2, False, True)]
HINT_CASES += [(3, False, True), (3.5, False, True), (4, False, False)]


def test_the_hints_follow_their_rules_on_a_cells_exact_parts(ticking):
    """End to end on the ticking clock: a real cell's parts come out at the
    figures the rules' thresholds sit on, and its hints appear exactly where
    LOOKUP_SHARE and OVERHEAD_SHARE say."""
    sh = ticking
    cell = "%%stance default -q\nfor _ in range(300):\n    f(x)"
    for _ in range(anatomy.CALIBRATIONS):  # the profiler bounds the lookup
        run(sh, cell)
    for w, want_u, want_overhead in HINT_CASES:
        sh.user_ns["W"] = w * TICK
        run(sh, cell)
        rep = last(sh)
        p = rep.call_parts
        assert p.lookup_bounded and p.calls >= advice.MIN_LOOKUPS and rep.lookups.calibrated == 0
        assert _ticks(p) == {
            "before": 1.0,
            "into": 0.25,
            "lookup": 0.75,
            "compiled": 1.0 + w,
            "after": 1.0,
            "wrapper": 2.25,
            "call": 4.0 + w,
            "eager": None,
        }, f"W = {w} ticks: each part is its readings on a clock that ticks once a reading"
        share = p.lookup_s / p.call_s
        if w <= 2:
            # the -u hint's other rule holds (lookups GUARD_SHARE of the
            # cell): LOOKUP_SHARE alone decides
            assert rep.lookups.seconds >= advice.GUARD_SHARE * rep.wall_s, (w, rep.lookups)
        assert bool(u_hints(rep)) is want_u, (
            f"LOOKUP_SHARE rule broken: the lookup {share:.4f} of a call (W = {w} ticks), "
            f"LOOKUP_SHARE {advice.LOOKUP_SHARE}: the -u hint "
            f"{'expected' if want_u else 'not expected'}: {rep.advice()}"
        )
        own = (p.wrapper_s + p.lookup_s) / p.call_s
        assert bool(overhead_hints(rep)) is want_overhead, (
            f"OVERHEAD_SHARE rule broken: the wrapper and the lookup {own:.4f} of a call "
            f"(W = {w} ticks), OVERHEAD_SHARE {advice.OVERHEAD_SHARE}: the hint "
            f"{'expected' if want_overhead else 'not expected'}: {rep.advice()}"
        )
        if want_overhead:
            (hint,) = overhead_hints(rep)
            assert hint.startswith(f"{own:.0%} of each compiled call is torch.compile's own work")


def _parts(
    lookup: float, compiled: float, wrapper: tuple[float, float, float], **kw: object
) -> CallParts:
    """A call's parts by hand, in units of 2**-20 s (about 1 µs): exact."""
    u = 2.0**-20
    before, into, after = (v * u for v in wrapper)
    kw.setdefault("calls", advice.MIN_LOOKUPS)
    kw.setdefault("lookup_bounded", True)
    return CallParts(
        before_s=before,
        into_s=into,
        after_s=after,
        lookup_s=lookup * u,
        compiled_s=compiled * u,
        **kw,  # type: ignore[arg-type]
    )


#: the lookup 3 of 20: LOOKUP_SHARE exactly (the wrapper and it 5 of 20)
AT_LOOKUP = dict(lookup=3, compiled=15, wrapper=(1, 0.5, 0.5))
#: the wrapper and the lookup 4 of 10: OVERHEAD_SHARE exactly (the lookup 1 of 10)
AT_OVERHEAD = dict(lookup=1, compiled=6, wrapper=(1, 1, 1))
#: (what, the parts, the -u hint, the "torch.compile's own work" hint)
RULE_CASES = [
    ("LOOKUP_SHARE: at it", _parts(**AT_LOOKUP), True, False),
    ("LOOKUP_SHARE: above (3 of 19)", _parts(**{**AT_LOOKUP, "compiled": 14}), True, False),
    ("LOOKUP_SHARE: below (3 of 21)", _parts(**{**AT_LOOKUP, "compiled": 16}), False, False),
    ("OVERHEAD_SHARE: at it", _parts(**AT_OVERHEAD), False, True),
    ("OVERHEAD_SHARE: above (4 of 9)", _parts(**{**AT_OVERHEAD, "compiled": 5}), False, True),
    ("OVERHEAD_SHARE: below (4 of 11)", _parts(**{**AT_OVERHEAD, "compiled": 7}), False, False),
    # below MIN_LOOKUPS timed calls, or the lookup not bounded by the
    # profiler, the parts are not known well enough: no rule of theirs applies
    # (the -u hint follows the cell's own figures, as without parts)
    (
        "MIN_LOOKUPS: one call fewer",
        _parts(**AT_OVERHEAD, calls=advice.MIN_LOOKUPS - 1),
        True,
        False,
    ),
    ("the lookup not bounded", _parts(**AT_OVERHEAD, lookup_bounded=False), True, False),
    # the GPU sets the pace: its work hides the host's parts, neither hint
    (
        "GPU-bound",
        _parts(**{**AT_LOOKUP, "compiled": 14}, device_s=GPU_BOUND * 14 * 2.0**-20),
        False,
        False,
    ),
]


@pytest.mark.parametrize(
    "what, parts, want_u, want_overhead", RULE_CASES, ids=[c[0] for c in RULE_CASES]
)
def test_the_hints_rules_at_and_either_side_of_their_thresholds(
    ticking, what, parts, want_u, want_overhead
):
    """A cell's report (on the ticking clock: its lookups earn the -u hint
    by their share of the cell) given parts built by hand: the -u hint and
    the "torch.compile's own work" hint appear exactly where the rules
    (advice.LOOKUP_SHARE, OVERHEAD_SHARE, MIN_LOOKUPS, the lookup bounded,
    the GPU's pace) say, at each threshold and either side of it."""
    run(ticking, "%%stance default -q\nfor _ in range(300):\n    f(x)")
    cell = last(ticking)
    # the cell's lookups half its time, whatever the release: the cell-level
    # rule (advice.GUARD_SHARE of the wall time) holds, and the parts' rules
    # decide alone (on the ticking clock torch 2.8's calls read the clock more
    # often than later releases': its lookups are 0.098 of the cell, 2.13's 0.12)
    base = dataclasses.replace(cell, call_parts=None, wall_s=2 * cell.lookups.seconds)
    assert u_hints(base) and not overhead_hints(base), base.advice()
    if what.endswith("at it"):
        # the figures sit on the threshold exactly, as the rule computes it
        share = advice.LOOKUP_SHARE if what.startswith("LOOKUP") else advice.OVERHEAD_SHARE
        part = parts.lookup_s if what.startswith("LOOKUP") else parts.wrapper_s + parts.lookup_s
        assert share * parts.call_s == part, (
            f"{what}: the figures are not on the rule's threshold exactly: {parts}"
        )
    rep = dataclasses.replace(base, call_parts=parts)
    assert bool(u_hints(rep)) is want_u, (
        f"{what}: the lookup {parts.lookup_s / parts.call_s:.4f} of a call: -u hint "
        f"{'expected' if want_u else 'not expected'} (advice._lookup_matters): {rep.advice()}"
    )
    assert bool(overhead_hints(rep)) is want_overhead, (
        f"{what}: the wrapper and the lookup "
        f"{(parts.wrapper_s + parts.lookup_s) / parts.call_s:.4f} of a call: the "
        f"torch.compile's-own-work hint {'expected' if want_overhead else 'not expected'} "
        f"(advice._overhead_hint): {rep.advice()}"
    )
    # a cell that raised: no hint from its parts
    failed = dataclasses.replace(rep, error="RuntimeError: boom")
    assert not overhead_hints(failed) and not u_hints(failed), failed.advice()


def test_no_bound_while_another_profiler_runs(sh):
    """torch runs one profiler at a time: with the user's own running, the
    lookups stay unbounded (the span from the dispatch, said so), and the
    user's profiler sees no stop."""
    sh.run_cell(SETUP)
    sh.run_cell(
        "from torch.profiler import profile, ProfilerActivity\n"
        "prof = profile(activities=[ProfilerActivity.CPU]); prof.__enter__()"
    )
    try:
        run(sh, "%%stance default -q\nfor _ in range(50):\n    f(x)")
        rep = last(sh)
        assert torch.autograd.profiler._is_profiler_enabled
        assert not rep.lookups.bounded and rep.lookups.calibrated == 0
        # every lookup counted, the first ones and then 1 in SAMPLE_EVERY timed
        first = min(50, probe.SAMPLE_FIRST)
        timed = rep.lookups.timed + rep.lookups.waited  # (waited for the CPU: counted)
        assert timed == first + (50 - first) // probe.SAMPLE_EVERY
        assert rep.lookups.timed + rep.lookups.sampled == 50
        assert "not bounded by torch's profiler" in lookup_method(rep.lookups)
    finally:
        sh.run_cell("prof.__exit__(None, None, None)")
    events = [e for e in sh.user_ns["prof"].events() if e.name == probe.CACHE_LOOKUP_EVENT]
    assert len(events) >= 50  # the user's profiler saw the whole cell


def _calibrate(bounds, monkeypatch, fn, events, spans):
    """One calibration in a cell of its own: torch's profiler replaced by
    ``events`` (the one thing not run here: the selection is the subject),
    each profiled call's span from the dispatch given."""
    monkeypatch.setattr(anatomy, "_profiler_start", lambda: True)
    monkeypatch.setattr(anatomy, "_profiler_stop", lambda: (list(events), True))
    bounds.new_cell()
    assert bounds.wanted(fn) and bounds.start(fn)
    for i, span in enumerate(spans):
        if i:
            assert bounds.profiling()
        event = bounds.seen()
        assert event == i
        bounds.note(fn, span, event)
    return bounds.stop()


def test_of_three_calibrations_the_median_share_stands(monkeypatch):
    """Each calibration thrown a different way: all of its events slow (the
    share too high), a burst of load over the cell's steady calls (too low),
    and a quiet one. After two, the faster lookup stands; from three, the
    median share, which neither thrown one moves. The profiled calls past
    the profiler's warm-up come back as measured lookups."""
    bounds = anatomy.LookupBounds(lambda: 0.0)
    n = anatomy.CALIBRATION_SKIP + 8
    spans = [4e-6] * n
    slow = _calibrate(bounds, monkeypatch, "f", [2.3e-6] * n, spans)
    assert slow == [("f", 2.3e-6)] * 8
    assert bounds.bound("f", [4e-6] * 10) == pytest.approx((2.3e-6, 0.575))
    _calibrate(bounds, monkeypatch, "f", [1.3e-6] * n, spans)
    assert bounds.bound("f", [4e-6] * 10) == pytest.approx((1.3e-6, 0.325))
    _calibrate(bounds, monkeypatch, "f", [1.25e-6] * n, spans)
    # the loaded cell's steady spans were twice as long: its share is half
    assert bounds.bound("f", [8e-6] * 10) == pytest.approx((1.3e-6, 0.325))
    assert not bounds.wanted("f")  # three calibrations: done


def test_two_calibrations_with_slow_events_are_outvoted_by_their_events(monkeypatch):
    """Two of three calibrations thrown high (all of their events slow: the
    share too high; the median share would be theirs, and the lookup read
    1.6x the profiler's, as a CI run of torch 2.8 did): calibrations whose
    events are more than SLOW_EVENTS times the fastest are left out, and the
    quiet one stands."""
    bounds = anatomy.LookupBounds(lambda: 0.0)
    n = anatomy.CALIBRATION_SKIP + 8
    spans = [4e-6] * n
    for events in ([2.3e-6] * n, [1.3e-6] * n, [2.2e-6] * n):
        _calibrate(bounds, monkeypatch, "f", events, spans)
        bounds.bound("f", [4e-6] * 10)
    assert bounds.bound("f", [4e-6] * 10) == pytest.approx((1.3e-6, 0.325))
    assert 2.2e-6 > anatomy.SLOW_EVENTS * 1.3e-6


def test_a_cell_without_steady_calls_takes_each_profiled_calls_own_share(monkeypatch):
    """A short cell (GPT-2's 20 calls: no spot checks) has only its first
    calls timed besides the profiled ones, and those are slower: the share
    is each profiled call's event over its own span, the median of them."""
    bounds = anatomy.LookupBounds(lambda: 0.0)
    events = [50e-6] * anatomy.CALIBRATION_SKIP + [48e-6, 49e-6, 47e-6, 48e-6, 90e-6]
    spans = [60e-6] * anatomy.CALIBRATION_SKIP + [55e-6, 56e-6, 54e-6, 55e-6, 100e-6]
    _calibrate(bounds, monkeypatch, "gpt", events, spans)
    event, share = bounds.bound("gpt", None)
    assert event == pytest.approx(48e-6)
    assert share == pytest.approx(48e-6 / 55e-6)


def _eval_frame_like(maybe: str) -> types.ModuleType:
    """A stand-in for ``torch._dynamo.eval_frame``: the three functions
    compile_wrapper calls by their module names, builtins as torch's are
    (``maybe="python"``: ``_maybe_set_eval_frame`` a Python function calling
    ``set_eval_frame``, as on torch 2.8)."""
    m = types.ModuleType("eval_frame_like")
    m.set_eval_frame = id
    m.set_skip_guard_eval_unsafe = bool
    if maybe == "python":
        source = "def _maybe_set_eval_frame(callback):\n    return set_eval_frame(callback)\n"
        exec(source, m.__dict__)
    else:
        m._maybe_set_eval_frame = id
    return m


def _compile_wrapper_like(ef, dispatch, compiled_code):
    """The calls torch.compile's compile_wrapper makes, in its order."""
    prior = ef.set_eval_frame(None)  # the call's start
    dispatch(sys._getframe())  # torch.compile's dispatcher: a timed call is tailed here
    try:
        try:
            return compiled_code(ef)
        finally:
            ef.set_eval_frame(None)  # Dynamo's hook off
            ef.set_skip_guard_eval_unsafe(False)  # torch's settings back: the return
    finally:
        ef._maybe_set_eval_frame(prior)  # the call's end


@pytest.mark.parametrize("maybe", ["builtin", "python"])
def test_the_clock_reads_the_return_the_end_and_the_next_start_and_nothing_in_between(maybe):
    """A timed call's compiled code never meets the clock: torch's disable
    wrappers inside it call set_eval_frame, which is not wrapped while it
    runs; compile_wrapper putting skip_guard_eval_unsafe back is the
    return, its last call the end (through torch 2.8's Python
    _maybe_set_eval_frame too), and the next compile_wrapper's first call
    the next start, where the clock takes itself out. On a clock that ticks
    once a reading the return is read, the clock's own work after it is one
    tick (its one reading there), and the end is the reading after that."""
    clock = FakeClock(tick=TICK)
    ef = _eval_frame_like(maybe)
    clk = anatomy.CallClock(clock, _compile_wrapper_like.__code__, ef)
    seen: list[tuple[float, float, float]] = []
    inside: list[object] = []

    def compiled_code(ef):
        inside.append(ef.set_eval_frame)
        ef.set_eval_frame(None)  # a disable wrapper's calls: not the clock's
        ef.set_eval_frame(None)
        clock.advance(5 * TICK)
        return "result"

    def dispatch(frame):
        clk.tail(id(frame), lambda back, end, own: seen.append((back, end, own)))

    try:
        start = clock.now
        assert _compile_wrapper_like(ef, dispatch, compiled_code) == "result"
        assert inside == [id], "the compiled code runs with set_eval_frame unwrapped"
        back = start + 5 * TICK
        assert seen == [(back, back + 2 * TICK, TICK)]
        assert ef.set_eval_frame is not id, "in, to see where the next call starts"
        assert ef.set_skip_guard_eval_unsafe is bool, "out once the return was read"

        def next_dispatch(frame):
            seen.append(("next", clk.next_frame == id(frame), clk.next_enter))

        t = clock.now
        _compile_wrapper_like(ef, next_dispatch, lambda ef: None)
        # the start read once the wrapper's own work was done: a tick after its reading
        assert seen[1] == ("next", True, t + TICK)
        assert not clk.installed
        assert ef.set_eval_frame is id and ef.set_skip_guard_eval_unsafe is bool
        assert maybe == "python" or ef._maybe_set_eval_frame is id
    finally:
        clk.uninstall()


def test_a_call_whose_return_was_not_seen_ends_no_part():
    """A tail on a call whose compiled code never returned through
    compile_wrapper (a later tail replaced it) gives no part: the end of
    another call is not this one's."""
    clock = FakeClock(tick=TICK)
    ef = _eval_frame_like("builtin")
    clk = anatomy.CallClock(clock, _compile_wrapper_like.__code__, ef)
    seen: list[tuple] = []

    def dispatch(frame):
        clk.tail(12345, lambda *a: seen.append(a))  # another frame's call
        clk.tail(id(frame), lambda *a: seen.append(("own", *a)))

    try:
        _compile_wrapper_like(ef, dispatch, lambda ef: None)
        assert [s[0] for s in seen] == ["own"]
    finally:
        clk.uninstall()
