"""The anatomy of a compiled call: torch.compile's wrapper, Dynamo's cache
lookup as torch's profiler bounds it, the compiled code, and a call that ran
eagerly, each against a source that does not go through stance_magic (the
profiler's ``TorchDynamo Cache Lookup`` and ``Torch-Compiled Region`` events,
the outside clock around a bare loop), on a tiny function, one of 64
arguments and GPT-2 (benchmarks/bench_anatomy.py is the procedure, and
prints the figures)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest
import torch

from stance_magic import advice, probe
from stance_magic.probe import anatomy
from stance_magic.render import lookup_method

from conftest import html_outputs, last, run, text_outputs

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_anatomy.py"
_spec = importlib.util.spec_from_file_location("bench_anatomy", BENCH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


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


@pytest.mark.integration
@pytest.mark.parametrize(
    "which, calls",
    [("a tiny function", 500), ("a function of 64", 300), ("GPT-2", 20)],
)
def test_each_part_within_1_5x_of_the_profiler_and_the_outside_clock(sh, one_thread, which, calls):
    """Each part of the report's call, over five rounds (the median of each
    round's ratio): the whole call against the bare loop's clock, the lookup
    against the profiler's lookup events, the compiled code against its
    outermost compiled-region events, a call under force_eager against the
    bare loop under force_eager."""
    r = bench.anatomy(_workload(which), calls, rounds=5)
    assert r["bounded"]  # torch's profiler bounded the lookup
    for part, f in r["parts"].items():
        assert 1 / 1.5 <= f["ratio"] <= 1.5, (which, part, r["parts"])
    # the wrapper is what is left of the call: positive, and below the call
    call = r["parts"]["whole call"]["report_s"]
    assert 0 < r["wrapper_s"] < call


SETUP = "f = torch.compile(lambda x: x + 1, backend='eager')\nx = torch.ones(3)\nf(x); f(x)\n"


def test_parts_add_up_and_show_in_text_html_and_csv(sh):
    sh.run_cell(SETUP)
    for _ in range(anatomy.CALIBRATIONS):  # torch's profiler bounds the lookup in each
        run(sh, "%%stance default -q\nfor _ in range(100):\n    f(x)")
        first = last(sh)
        assert 0 < first.lookups.calibrated <= anatomy.CALIBRATION_CALLS
        assert first.lookups.bounded
    res, cap = run(sh, "%%stance default --no-plot\nfor _ in range(100):\n    f(x)")
    assert res.success
    rep = last(sh)
    p = rep.call_parts
    # every lookup counted (past the first 64 of the function, 1 in 16 timed);
    # none under the profiler (it ran in the first cells)
    lk = rep.lookups
    assert rep.cache_hits == 100 == lk.timed + lk.sampled and lk.calibrated == 0
    assert p.calls == lk.timed and p.lookup_bounded and p.eager_calls == 0
    assert p.call_s == pytest.approx(p.wrapper_s + p.lookup_s + p.compiled_s)
    assert p.wrapper_s == pytest.approx(p.before_s + p.into_s + p.after_s)
    # the lookup part is the lookups' own figure
    (target,) = rep.lookups.targets
    assert p.lookup_s == pytest.approx(target.per_lookup_s) == rep.lookups.per_lookup_s
    text = "\n".join(text_outputs(cap))
    (html,) = [h for h in html_outputs(cap) if "sm-report" in h]
    for out in (text, html.replace("&#x27;", "'")):
        assert "a compiled call" in out and "torch.compile's wrapper" in out
        assert "-u (skip_guard_eval_unsafe) can save part of the lookup" in out
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
        "guard_lookups_calibrated",
    ]
    assert row["call_s"] == p.call_s and row["call_lookup_s"] == p.lookup_s
    assert row["call_lookup_bounded"] is True and row["guard_lookups_calibrated"] == 0


def test_eager_calls_are_a_part_of_their_own(sh):
    """Calls that run without compiled code (force_eager inside the cell) are
    timed whole, apart from the compiled ones."""
    sh.run_cell(SETUP)
    run(
        sh,
        "%%stance default -q\nfor _ in range(60):\n    f(x)\n"
        "with torch.compiler.set_stance('force_eager'):\n    for _ in range(20):\n        f(x)",
    )
    p = last(sh).call_parts
    assert p.eager_calls == 20 and p.eager_s > 0
    assert p.calls > 0 and p.call_s > 0


def test_u_hint_only_where_the_lookup_is_a_real_share_of_a_call(sh, one_thread):
    """A 1-argument function doing some work (a 64x64 matmul): the lookup is
    well under LOOKUP_SHARE of a call (the profiler's events against the
    outside clock agree: 0.06-0.09 on torch 2.8 to 2.15) and -u gets no hint
    (the wrapper's share may); a function of a list of 128 tensors
    concatenated: the lookup is about 0.3 of a call, and -u gets its hint."""
    sh.run_cell(
        "f = torch.compile(lambda x: (x @ x).relu().sum(), backend='eager')\n"
        "x = torch.ones(64, 64)\nf(x); f(x)\n"
        "xs = [torch.ones(2) for _ in range(128)]\n"
    )
    sh.run_cell("cat = torch.compile(lambda xs: torch.cat(xs), backend='eager')\ncat(xs); cat(xs)")
    cell = "%%stance default -q\nfor _ in range(300):\n    {}"
    for call in ("f(x)", "cat(xs)"):
        run(sh, cell.format(call))  # torch's profiler bounds each lookup here
    run(sh, cell.format("f(x)"))
    tiny = last(sh)
    run(sh, cell.format("cat(xs)"))
    wide = last(sh)
    # independent: the profiler's lookup events against the bare call, each
    # call timed on its own; the median of three rounds (a burst of load moves
    # one round, not the share)
    shares = {}
    for name, step in (
        ("tiny", lambda: sh.user_ns["f"](sh.user_ns["x"])),
        ("wide", lambda: sh.user_ns["cat"](sh.user_ns["xs"])),
    ):
        rounds = [bench.profiled(step, 300)[0] / bench.per_call(step, 300) for _ in range(3)]
        shares[name] = statistics.median(rounds)
    assert shares["tiny"] < advice.LOOKUP_SHARE < shares["wide"], shares

    def u_hints(rep):
        return [h for h in rep.advice() if "skip_guard_eval_unsafe" in h]

    for rep in (tiny, wide):
        assert rep.call_parts.lookup_bounded and rep.call_parts.calls >= advice.MIN_LOOKUPS
    assert tiny.call_parts.lookup_s < advice.LOOKUP_SHARE * tiny.call_parts.call_s
    assert not u_hints(tiny)
    # the wrapper's hint follows its share (about 0.45 of a call on torch 2.13
    # here, 0.35 on 2.8, whose compiled code is slower)
    own = tiny.call_parts.wrapper_s + tiny.call_parts.lookup_s
    wrapper_hint = any("torch.compile's own work" in h for h in tiny.advice())
    assert wrapper_hint == (own >= advice.OVERHEAD_SHARE * tiny.call_parts.call_s)
    assert wide.call_parts.lookup_s >= advice.LOOKUP_SHARE * wide.call_parts.call_s
    assert u_hints(wide)


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
        assert rep.lookups.timed == 50
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
    monkeypatch.setattr(anatomy, "_profiler_stop", lambda: list(events))
    bounds.new_cell()
    assert bounds.wanted(fn) and bounds.start(fn, 0)
    for i, span in enumerate(spans):
        if i:
            assert bounds.profiling()
        bounds.note(fn, span, i + 1)
    return bounds.stop(len(spans))


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


def test_the_clock_leaves_out_its_own_work_on_the_calls_it_passes_on():
    """Inside a timed call's compiled code torch's disable wrappers call
    set_eval_frame too (6 times a call of a 1-argument function on 2.13, 12
    on 2.8), through the clock's wrapper: the compiled code's part is handed
    their count times the wrapper's own cost, measured once against a bare
    builtin, to leave out."""
    import time

    def compile_wrapper_like(fn):
        return fn(None)

    clk = anatomy.CallClock(time.perf_counter, compile_wrapper_like.__code__)
    seen = []
    clk.tail(1, lambda back, end, own, inner: seen.append(inner))
    wrapped = clk._wrap(id)
    for _ in range(14):
        wrapped(None)  # called from here: passed on
    assert clk._passes == 14 and 0 < clk._pass_s < 2e-6
    clk._on_wrapper(1, time.perf_counter())  # the compiled code returned
    clk._on_wrapper(1, time.perf_counter())  # the call ended
    assert seen == [pytest.approx(14 * clk._pass_s)]
    clk.tail(2, lambda *a: None)
    assert clk._passes == 0  # counted per timed call
