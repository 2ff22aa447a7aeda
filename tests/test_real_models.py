"""Figures on real models, each against a source that does not go through
stance_magic.

GPT-2 (transformers, small config, random weights), a ResNet-18-like CNN, a
transformer block and a module that prints, calls ``.item()`` and branches
on a tensor, on the ``eager`` / ``aot_eager`` backends. The independent
sources: ``CompileCounterWithBackend``, ``get_compilation_metrics()``,
torch's own ``recompiles`` / ``graph_breaks`` log records
(``torch._logging.set_logs``), the profiler's cache-lookup events, the
number of calls made, and an outside clock.
"""

from __future__ import annotations

import contextlib
import logging
import re
import statistics
import time

import pytest
import torch
from torch._dynamo.utils import get_compilation_metrics
from torch.profiler import ProfilerActivity, profile

from stance_magic import probe
from stance_magic.render import lookup_bound, lookup_method

from conftest import SHAPES_LOGGER, last, run, steady_timed, torch_log
from timing import agree

pytest.importorskip("transformers")

pytestmark = pytest.mark.integration  # real models, seconds each

SETUP = """
import torch, stance_magic, models
from torch._dynamo.testing import CompileCounterWithBackend
"""


#: GPT-2 compiled with a backend that counts the graphs handed to it.
COUNTED_GPT2 = """
cc = CompileCounterWithBackend('eager')
gpt = models.gpt2()
cgpt = torch.compile(gpt, backend=cc)
ids = torch.randint(0, 256, (1, 8))
"""


@pytest.fixture
def sh(shell):
    shell.run_cell(SETUP)
    return shell


class TorchLogs(logging.Handler):
    """torch's own recompiles / graph_breaks records, as TORCH_LOGS prints them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: dict[str, list[str]] = {"recompiles": [], "graph_breaks": []}

    def emit(self, record: logging.LogRecord) -> None:
        for kind in self.records:
            if record.name.endswith(f"__{kind}"):
                self.records[kind].append(record.getMessage())


@contextlib.contextmanager
def torch_logs():
    """``torch._logging.set_logs(recompiles=True, graph_breaks=True)``, with a
    handler on torch's artifact loggers (their parents do not propagate)."""
    from torch._logging._internal import log_registry

    handler = TorchLogs()
    torch._logging.set_logs(recompiles=True, graph_breaks=True)
    loggers = [
        logging.getLogger(q)
        for q in log_registry.get_artifact_log_qnames()
        if q.endswith(("__recompiles", "__graph_breaks"))
    ]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.records
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        torch._logging.set_logs()


@contextlib.contextmanager
def lookup_events():
    """The profiler's 'TorchDynamo Cache Lookup' events of a block."""
    out: list[float] = []
    with probe.quiet_fd2():
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    try:
        yield out
    finally:
        with probe.quiet_fd2():
            prof.__exit__(None, None, None)
        out.extend(
            e.cpu_time_total / 1e6 for e in prof.events() if e.name == probe.CACHE_LOOKUP_EVENT
        )


def profiler_agrees(lookups: int, events: list[float]) -> bool:
    """Our lookup count against the profiler's events of a block that compiles.

    Up to torch probe.PROFILER_EMPTY_LOOKUPS_UNTIL the profiler also emits an
    event for each frame with nothing compiled (the cold call, torch's own
    frames run by a fresh graph), so it counts more there."""
    if probe.torch_version() <= probe.PROFILER_EMPTY_LOOKUPS_UNTIL:
        return len(events) >= lookups
    return len(events) == lookups


def records_between(t0_us: int, t1_us: int) -> list:
    return [r for r in get_compilation_metrics() if t0_us <= (r.start_time_us or 0) <= t1_us]


def frame_records(recs):
    return [r for r in recs if r.is_forward is not False and not r.is_runtime]


# --------------------------------------------------------------------------
# GPT-2 generating 8 -> 20 tokens
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cache", [False, True], ids=["no-kv-cache", "kv-cache"])
def test_gpt2_generation_every_figure_against_torch(sh, cache):
    sh.run_cell(COUNTED_GPT2)
    t0 = time.time_ns() // 1000
    with torch_logs() as logs, lookup_events() as events:
        res, _ = run(
            sh, f"%%stance default -q\nout = models.generate(cgpt, ids, 12, cache={cache})"
        )
    t1 = time.time_ns() // 1000
    assert res.success, res.error_in_exec
    assert sh.user_ns["out"].shape == (1, 20)
    rep = last(sh)
    recs = frame_records(records_between(t0, t1))
    cc = sh.user_ns["cc"]
    # compiles: frames traced = torch's records; graphs = backend calls
    assert rep.compiles == len(recs) >= 2
    assert rep.graphs == cc.frame_count
    assert rep.compile_s == pytest.approx(sum(probe.record_total_s(r) for r in recs), rel=0.02)
    # recompiles and their reasons = torch's recompiles log
    assert len(rep.recompiles) == len(logs["recompiles"]) >= 1
    for r in rep.recompile_details:
        assert any(r.reason in msg for msg in logs["recompiles"]), r.reason
    # graph breaks = torch's graph_breaks log (none from 2.10; torch 2.8 breaks in
    # transformers' cache code)
    assert sum(g.count for g in rep.graph_break_details) == len(logs["graph_breaks"])
    lookups = rep.cache_hits + rep.cache_misses - (rep.compiles - len(rep.recompiles))
    assert profiler_agrees(lookups, events), (lookups, len(events))
    if logs["graph_breaks"]:
        # torch 2.8 breaks inside transformers' KV cache: resume functions and
        # frames compiled on their own look up too; every lookup is counted
        assert probe.torch_version() < (2, 10)
        assert rep.cache_hits + rep.cache_misses > 12
        assert rep.lookups.timed + rep.lookups.untimed + rep.lookups.waited == lookups
        assert (lookup_bound(rep.lookups) is None) == (rep.lookups.untimed == 0)
        assert rep.frames[0].name.split(" ")[0] == "GPT2LMHeadModel.forward"
        return
    # every call is a cache lookup or a compile from an empty cache
    assert rep.cache_hits + rep.cache_misses == 12
    # the model is named, not transformers' decorator
    assert {f.name.split(" ")[0] for f in rep.frames} == {"GPT2LMHeadModel.forward"}
    # (a lookup that waited for the CPU on a busy machine: counted, not timed)
    assert rep.lookups.timed + rep.lookups.waited == lookups and lookup_bound(rep.lookups) is None


def _calls(f, n: int) -> list[float]:
    """The time of each of n calls of f, each timed on its own."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return out


def _outside_clock(step, n: int, rounds: int = 15) -> float:
    """Per call under ``default`` minus under ``skip_guard_eval_unsafe``: the
    fastest single call on each side, of interleaved rounds in alternating
    order. Each call is timed on its own: a round of n calls (~35 ms) is
    longer than a scheduler's time slice, so on two busy cores every round
    is preempted and the fastest round's mean moves by more than the guards
    cost (seen: -760 to +900 µs against ~100 µs quiet, two CPU hogs), while a
    single call (~1.7 ms) mostly runs undisturbed: the fastest one stayed
    within 90-134 µs quiet, with one hog and with two."""
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        for skip in (i % 2 == 1, i % 2 == 0):
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=skip):
                (b if skip else a).extend(_calls(step, n))
    return min(a) - min(b)


@pytest.fixture
def one_thread():
    """One intra-op thread: on two busy cores, torch's thread pool makes
    per-call times swing by 10x, which no outside clock survives."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.timing
def test_gpt2_guard_figure_in_situ_against_profiler_and_outside_clock(sh, one_thread):
    """The cache-lookup figure is timed where lookups happen, inside the model loop.

    Independent: the profiler's cache-lookup events (separate runs, each after
    a measured cell) and an outside clock: the per-call time under ``default`` minus under
    ``skip_guard_eval_unsafe`` (a lower bound: the latter still runs the
    guards that tell entries apart), the fastest call on each side, of
    interleaved rounds.
    """
    sh.run_cell(
        "gpt = models.gpt2(layers=4, dim=128)\n"
        "cgpt = torch.compile(gpt, backend='eager')\n"
        "ids = torch.randint(0, 256, (2, 16))\n"
        "step = lambda: cgpt(ids, use_cache=False)\n"
        "with torch.no_grad():\n    step(); step()\n"
    )
    step = sh.user_ns["step"]
    # once the lookup is bounded, a cell of 20 times its first two and one spot
    # check (probe.STEADY_FIRST, STEADY_FIRST_SPOT), which is the cell's
    # figure: a round's ratio ranged 0.34-1.54 (torch 2.15), the rounds decide
    n = 20
    # interleaved rounds, each a measured cell then the profiler on the same
    # loop: under load a round's lookups move together, 110-330 µs a lookup
    # from round to round here with one or two CPU hogs, and the two figures of
    # one round were seen 0.57-1.39x apart; the median of the rounds' ratios
    # decide (the band's medians: below)
    ours_s, prof_s = [], []

    def one_round() -> dict[str, float]:
        res, _ = run(
            sh,
            f"%%stance default -q\nwith torch.no_grad():\n    for _ in range({n}):\n        step()",
        )
        assert res.success
        rep = last(sh)
        lk = rep.lookups
        # every lookup counted; the first SAMPLE_FIRST and then 1 in
        # SAMPLE_EVERY (once the lookup is bounded, STEADY_FIRST and then 1 in
        # STEADY_EVERY) timed, but the few torch's profiler ran over in the
        # first three rounds (to bound the lookup: see test_call_anatomy) and
        # any that waited for the CPU (counted, not timed)
        assert rep.cache_hits == n == lk.timed + lk.sampled
        rest = n - lk.calibrated
        first = min(rest, probe.SAMPLE_FIRST)
        timed = {first + (rest - first) // probe.SAMPLE_EVERY, steady_timed(rest)}
        assert lk.timed + lk.waited in timed, (lk, timed)
        assert lookup_bound(lk) is None
        with torch.no_grad(), lookup_events() as events:
            for _ in range(n):
                step()
        assert len(events) == n
        ours_s.append(rep.lookups.per_lookup_s)
        prof_s.append(statistics.median(events))
        return {"ours / profiler": ours_s[-1] / prof_s[-1]}

    # The band is narrower than 2x, so that a figure off by 2x leaves it from
    # anywhere inside it (tests/test_timing_lane.py). Lopsided: torch's
    # profiler, recording every operator of the loop, slows the lookups it
    # times more than it speeds them: on torch 2.15 with Python 3.13.0 (whose
    # guards walk each module's __dict__, no dict versions to shortcut them)
    # its events read up to 1.4x the outside clock's lookup (152 µs in situ,
    # 153 µs outside, 216 µs profiled). The medians seen: 0.72-0.97 (torch
    # 2.8, 2.13, 2.15, beside another test process), 0.67-0.75 (2.15, quiet),
    # 1.10 (2.13, quiet, before the steady sampling).
    got = agree(
        one_round,
        {"ours / profiler": (0.6, 1.18)},
        why="the same lookups, timed in situ and by torch's profiler over the same loop "
        "(which slows them: ours reads 0.67-1.10 of it), in a band under 2x wide",
        rounds=5,
        max_rounds=11,
    )
    ours = statistics.median(ours_s)
    prof = statistics.median(prof_s)
    with torch.no_grad():
        # the outside clock is a difference of two noisy call times: load
        # inflates it, never deflates it for long; measured up to three times,
        # the smallest is kept
        outside = _outside_clock(step, n)
        for _ in range(2):
            if ours >= outside / 1.5:
                break
            outside = min(outside, _outside_clock(step, n))
    print(
        f"guard per lookup: ours {ours * 1e6:.0f} µs, profiler {prof * 1e6:.0f} µs, "
        f"outside clock {outside * 1e6:.0f} µs; ours / profiler: median "
        f"{got.medians['ours / profiler']:.2f} of {len(got.rounds)} rounds"
    )
    # the warm check timed at compile time was 3-6x too low here: in situ is
    # not below the outside clock's lower bound by more than noise allows
    assert ours >= outside / 1.5


@pytest.mark.timing
@pytest.mark.parametrize("how", ["%%stance -q", "measure()"])
def test_the_wall_time_of_a_calibrating_cell_is_what_the_user_waited(sh, one_thread, how):
    """GPT-2 (aot_eager: every operator of its compiled code an event, where
    torch's profiler records them), in cells where torch's profiler bounds
    its lookup (the bounds forgotten before each round, so every round's cell
    calibrates): the report's wall time against an outside clock around the
    whole cell (IPython's run_cell). What the report leaves out is IPython's
    and the front end's own work around the block and building the report:
    a millisecond or two of a 40-90 ms cell. The calibration's own time is in
    the wall time, and the report says how long it took. Before, the
    profiler's data was read outside the wall time: 104 ms against 255 ms
    waited (0.41) in a first cell, 47 against 65 ms (0.72) in the next."""
    from stance_magic.session.engine import get_engine

    sh.run_cell(
        "gpt = models.gpt2()\n"
        "cgpt = torch.compile(gpt, backend='aot_eager')\n"
        "ids = torch.randint(0, 256, (1, 8))\n"
        "with torch.no_grad():\n    cgpt(ids); cgpt(ids)\n"
    )
    loop = "with torch.no_grad():\n    for _ in range(100):\n        cgpt(ids)"
    if how == "measure()":
        cell = "with stance_magic.measure():\n" + "".join(
            f"    {line}\n" for line in loop.splitlines()
        )
    else:
        cell = f"{how}\n{loop}"
    recorder = get_engine().recorder

    def one_round() -> dict[str, float]:
        recorder.forget_lookup_bounds()  # (between cells): this one calibrates
        t0 = time.perf_counter()
        res = sh.run_cell(cell)
        outside = time.perf_counter() - t0
        assert res.success, res.error_in_exec
        rep = last(sh)
        lk = rep.lookups
        assert lk.calibrated > 0 and lk.calibration_s > 0 and lk.bounded
        return {
            "report's wall time / outside clock": rep.wall_s / outside,
            "the calibration's share of the wall time": lk.calibration_s / rep.wall_s,
        }

    agree(
        one_round,
        {
            "report's wall time / outside clock": (0.9, 1.0),
            "the calibration's share of the wall time": (None, 0.1),
        },
        why="what the report leaves out is IPython's and the front end's own work around "
        "the block (a millisecond or two); torch's profiler records only the profiled "
        "calls' lookups, in the wall time",
    )


# --------------------------------------------------------------------------
# Graph breaks: every one, with file:line and the source line
# --------------------------------------------------------------------------


def test_graph_breaks_match_torch_logs_with_place_and_source(sh):
    sh.run_cell(
        "cc = CompileCounterWithBackend('eager')\nm = torch.compile(models.Chatty(), backend=cc)"
    )
    with torch_logs() as logs:
        res, _ = run(
            sh,
            "%%stance default -q\ntorch.manual_seed(1)\n"
            "for _ in range(3):\n    m(torch.randn(2, 4))",
        )
    assert res.success
    rep = last(sh)
    n = sum(g.count for g in rep.graph_break_details)
    assert n == len(logs["graph_breaks"]) >= 3
    assert rep.graphs == sh.user_ns["cc"].frame_count
    places = {(g.line, g.source) for g in rep.graph_break_details}
    src = {line: text.strip() for line, text in enumerate(_source_of(models_file()), start=1)}
    kinds = {}
    for g in rep.graph_break_details:
        assert g.filename == models_file()
        assert g.source == src[g.line]
        kinds[g.source] = g.summary
    assert any("print" in s for s in kinds)
    assert any(".item()" in s for s in kinds)
    assert any(s.startswith("if y.sum() > 0") for s in kinds)  # the data-dependent branch
    assert "Data-dependent branching" in kinds[next(s for s in kinds if s.startswith("if "))]
    # torch's logs name the same places
    logged = {
        int(m.group(1)) for msg in logs["graph_breaks"] for m in [re.search(r":(\d+)\n", msg)] if m
    }
    assert logged == {line for line, _ in places}
    text = str(rep)
    assert "models.py" in text and "`v = y.sum().item()`" in text


def _source_of(path):
    with open(path) as fh:
        return fh.read().splitlines()


def models_file():
    import models

    return models.__file__


def test_gpt2_with_a_printing_hook_counts_every_break(sh):
    sh.run_cell(
        "gpt = models.gpt2()\n"
        "def loud(mod, args, out):\n    print('block out', out[0].shape)\n"
        "for block in gpt.transformer.h:\n    block.register_forward_hook(loud)\n"
        "cgpt = torch.compile(gpt, backend='eager')\n"
        "ids = torch.randint(0, 256, (1, 8))\n"
    )
    with torch_logs() as logs:
        res, _ = run(sh, "%%stance default -q\nout = models.generate(cgpt, ids, 3)")
    assert res.success
    rep = last(sh)
    n = sum(g.count for g in rep.graph_break_details)
    assert n == len(logs["graph_breaks"]) >= 2
    assert any(g.source.startswith("print('block out'") for g in rep.graph_break_details)
    # lookups made after a graph break (resume functions) are not timed: a bound
    assert rep.lookups.untimed > 0 and lookup_bound(rep.lookups)


@pytest.mark.timing
@pytest.mark.skipif(not probe.monitoring.AVAILABLE, reason="sys.monitoring: Python 3.12+")
def test_nested_lookups_timed_from_their_call_against_the_profiler(sh):
    """Python 3.12+: the nested lookups (resume functions after graph breaks,
    frames compiled on their own) are timed from their call (sys.monitoring)
    once their caller ran in a measured cell; the figure is then whole, not a
    lower bound, and agrees with the profiler's lookup events (count, and
    the median lookup within 2x)."""
    sh.run_cell(
        "gpt = models.gpt2()\n"
        "def loud(mod, args, out):\n    print('block out', out[0].shape)\n"
        "for block in gpt.transformer.h:\n    block.register_forward_hook(loud)\n"
        "cgpt = torch.compile(gpt, backend='eager')\n"
        "ids = torch.randint(0, 256, (1, 8))\n"
    )
    gen = "out = models.generate(cgpt, ids, 3)"
    res, _ = run(sh, f"%%stance default -q\n{gen}")  # compiles; first sight of each caller
    assert res.success, res.error_in_exec
    first = last(sh)
    assert first.lookups.untimed > 0 and lookup_bound(first.lookups)

    def one_round() -> dict[str, float]:
        # unmeasured first: the run after a compile, or after the profiler's
        # teardown, is the slowest (1.5-1.9x here on torch 2.15 / Python
        # 3.13, against 1.03-1.28x after a warm-up run)
        assert sh.run_cell(gen).success
        res, _ = run(sh, f"%%stance default -q\n{gen}")
        assert res.success, res.error_in_exec
        rep = last(sh)
        assert rep.compiles == 0 and rep.cache_misses == 0
        assert "(resume functions after graph breaks, frames compiled on their own) timed" in (
            lookup_method(rep.lookups)
        )
        if probe.monitoring.EX_CALLS_SEEN:
            assert rep.lookups.untimed == 0 and lookup_bound(rep.lookups) is None
        else:
            # 3.12: no event for torch's forward_call(*args, **kwargs): those stay untimed
            assert 0 < rep.lookups.untimed < rep.lookups.timed + rep.lookups.untimed
            assert "on Python 3.12 those made by a call with *args/**kwargs" in lookup_bound(
                rep.lookups
            )
        with lookup_events() as events:
            assert sh.run_cell(gen).success
        looked_up = rep.lookups.timed + rep.lookups.untimed + rep.lookups.waited
        assert len(events) == looked_up == rep.cache_hits
        return {"ours / profiler": rep.lookups.per_lookup_s / statistics.median(events)}

    # per lookup, median against median (one lookup preempted moves neither),
    # over three interleaved rounds (one round moves neither either), within
    # 2x: this VM's lookups flip between a fast and a slow state (~2.8 and
    # ~4.8 us for a tiny function, 1.7x) for whole cells at a time, which a
    # 1.5x bound measured (1 of 28 local runs failed it, even with the rounds):
    # the counts above are exact, and test_sampling checks the arithmetic on an
    # exact clock
    agree(
        one_round,
        {"ours / profiler": (1 / 2, 2)},
        why="the same lookups in situ and as torch's profiler times them; this VM's "
        "lookups flip between a fast and a slow state (1.7x) for whole cells",
    )


# --------------------------------------------------------------------------
# Reset inside a cell, misses that compile nothing, first calls run eagerly
# --------------------------------------------------------------------------


def test_reset_inside_a_cell_keeps_every_figure(sh):
    sh.run_cell(COUNTED_GPT2)
    t0 = time.time_ns() // 1000
    res, _ = run(
        sh,
        "%%stance default -q\n"
        "models.generate(cgpt, ids, 2)\n"
        "torch._dynamo.reset()\n"
        "out = models.generate(cgpt, ids, 3)\n",
    )
    t1 = time.time_ns() // 1000
    assert res.success
    rep = last(sh)
    recs = frame_records(records_between(t0, t1))
    assert rep.compiles == len(recs) == sh.user_ns["cc"].frame_count >= 3
    assert rep.compile_s == pytest.approx(sum(probe.record_total_s(r) for r in recs), rel=0.02)
    assert len(rep.recompiles) == sum(1 for r in recs if r.recompile_reason) >= 1
    assert any("reset" in n for n in rep.notes)
    assert rep.cache_hits + rep.cache_misses == 5
    # a plain cell after a reset: its lookups are timed, nothing "before the probe"
    run(sh, "%%stance default -q\nout = models.generate(cgpt, ids, 1)")
    after = last(sh)
    assert after.lookups.timed + after.lookups.waited == 1
    assert after.lookups.waited or after.lookups.seconds > 0  # (None: its one lookup waited)
    assert "before the probe" not in str(after)


def test_misses_that_compile_nothing_stay_in_their_cell(sh):
    sh.run_cell(
        "f = torch.compile(lambda x: x * 2, backend='eager', dynamic=False)\nf(torch.ones(2))"
    )
    with lookup_events() as ev1:
        run(sh, "%%stance eager_on_recompile -q\nfor n in (3, 4, 5):\n    f(torch.ones(n))")
    fallback = last(sh)
    assert fallback.eager_fallbacks == 3 and fallback.cache_misses == 3 == len(ev1)
    res, _ = run(sh, "%%stance fail_on_recompile -q\nf(torch.ones(6))")
    refused = last(sh)
    assert not res.success and refused.refused_recompiles == 1
    # the guard that failed, in torch's words (torch 2.8's refusal names none:
    # the report has it from torch's guard check)
    assert any("size mismatch" in g for g in refused.refused_guards)
    sh.run_cell("g = torch.compile(lambda x: x + 1, backend='eager')")
    with lookup_events() as ev3:
        run(sh, "%%stance default -q\nfor n in (2, 2, 3):\n    g(torch.ones(n))")
    cold = last(sh)
    # 3 calls: 1 cold compile (no lookup), a hit, a miss that recompiled
    assert (cold.cache_hits, cold.cache_misses) == (1, 2)
    assert profiler_agrees(cold.cache_hits + cold.cache_misses - 1, ev3)
    # --sweep rows too
    run(
        sh, "%%stance --sweep default,eager_on_recompile -q\nfor n in (2, 3):\n    g(torch.ones(n))"
    )
    for r in sh.user_ns["stance_magic"].history()[-2:]:
        assert r.cache_hits + r.cache_misses <= 2


def test_eager_then_compile_counts_calls_not_frames(sh):
    sh.run_cell(
        "gpt = models.gpt2()\n"
        "cgpt = torch.compile(gpt, backend='eager')\n"
        "ids = torch.randint(0, 256, (1, 8))\n"
    )
    res, _ = run(sh, "%%stance eager_then_compile -q\nout = models.generate(cgpt, ids, 1)")
    assert res.success
    rep = last(sh)
    assert rep.eager_first_calls == 1
    assert "1 call ran eagerly (first call)" in str(rep).splitlines()[0]  # the headline
    text = rep.text(verbose=True)
    assert "1 ran eagerly: eager_then_compile runs a function's first call eagerly" in text
    assert rep.calls.total == rep.compiled_calls, rep.calls
    if rep.compiles_during_eager_calls:
        assert "nested frames" in text
    sh.run_cell("cnn = torch.compile(models.ResNet18(), backend='eager')")
    run(sh, "%%stance eager_then_compile -q\ny = cnn(torch.randn(2, 3, 16, 16))")
    assert last(sh).eager_first_calls == 1


# --------------------------------------------------------------------------
# Failed compiles, names, backends, hints
# --------------------------------------------------------------------------


def test_failed_compiles_are_marked_with_torchs_reason(sh):
    sh.run_cell(
        "def bad(gm, example_inputs):\n    raise ValueError('backend exploded')\n"
        "fb = torch.compile(lambda x: x.sin(), backend=bad)\n"
    )
    res, _ = run(sh, "%%stance default -q\nfb(torch.ones(2))")
    assert not res.success
    rep = last(sh)
    assert rep.failed_compiles == 1 and rep.graphs == 0 and rep.compiles == 1
    assert "BackendCompilerFailed" in rep.frames[0].failed
    assert "FAILED" in str(rep)
    # suppressed: the frame runs eagerly, the record keeps fail_type
    sh.run_cell("fb2 = torch.compile(lambda x: x.cos(), backend=bad)")
    with torch._dynamo.config.patch(suppress_errors=True):
        res, _ = run(sh, "%%stance default -q\ny = fb2(torch.ones(2))")
    assert res.success
    rep = last(sh)
    recs = [r for r in get_compilation_metrics() if r.fail_type]
    assert rep.failed_compiles == 1 and rep.graphs == 0
    assert rep.frames[0].failed.startswith(recs[-1].fail_type)


def test_aot_eager_then_compile_says_which_backend_compiled_what(sh):
    sh.run_cell(
        "cc = CompileCounterWithBackend('eager')\n"
        "h = torch.compile(lambda x: x.sin() * 2, backend=cc)"
    )
    run(sh, "%%stance aot_eager_then_compile -q\nfor n in (2, 3, 4):\n    h(torch.ones(n))")
    rep = last(sh)
    backends = [f.backend for f in rep.frames]
    assert backends[0] == "aot_eager"
    assert "CompileCounterWithBackend" in backends[1:]
    assert "[backend aot_eager]" in str(rep)


def test_recompile_reason_keeps_the_guard_source(sh):
    sh.run_cell(
        "class Scale(torch.nn.Module):\n"
        "    def forward(self, x, n):\n"
        "        return x * n\n"
        "sm = torch.compile(Scale(), backend='eager')\n"
    )
    run(sh, "%%stance default -q\nsm(torch.ones(2), 2)\nsm(torch.ones(2), 3)")
    rep = last(sh)
    (rc,) = rep.recompile_details
    assert "n == 2" in rc.reason
    if probe.torch_version() >= probe.GUARD_SOURCE_SINCE:
        assert rc.guard_source.startswith("return x * n") and "In [" in rc.guard_source
    else:  # torch gives the guard without its source line
        assert rc.guard_source == ""
    assert rep.frames[0].name == "Scale.forward"


@pytest.mark.parametrize(
    "second", ["torch.ones(2, 3)", "torch.ones(3, dtype=torch.float64)"], ids=["rank", "dtype"]
)
def test_rank_or_dtype_change_gets_no_dynamic_shape_hint(sh, second):
    sh.run_cell("k = torch.compile(lambda x: x + 1, backend='eager')")
    run(sh, f"%%stance default\nk(torch.ones(3))\nk({second})")
    rep = last(sh)
    assert len(rep.recompiles) == 1
    hints = rep.advice()
    assert not any("try %%stance eager_then_compile" in h or "mark_dynamic" in h for h in hints)
    assert any("rank" in h or "dtype" in h for h in hints)


def test_cnn_and_transformer_block_forward_and_train_step(sh):
    sh.run_cell(
        "cnn = models.ResNet18()\n"
        "blk = models.TransformerBlock()\n"
        "cc_cnn = CompileCounterWithBackend('aot_eager')\n"
        "cc_blk = CompileCounterWithBackend('aot_eager')\n"
        "ccnn = torch.compile(cnn, backend=cc_cnn)\n"
        "cblk = torch.compile(blk, backend=cc_blk)\n"
        "opt = torch.optim.SGD(list(cnn.parameters()) + list(blk.parameters()), lr=0.01)\n"
    )
    t0 = time.time_ns() // 1000
    res, _ = run(
        sh,
        "%%stance default -q\n"
        "for _ in range(2):\n"
        "    loss = ccnn(torch.randn(4, 3, 16, 16)).sum() + cblk(torch.randn(2, 5, 64)).sum()\n"
        "    loss.backward(); opt.step(); opt.zero_grad()\n",
    )
    t1 = time.time_ns() // 1000
    assert res.success, res.error_in_exec
    rep = last(sh)
    recs = records_between(t0, t1)
    fwd = frame_records(recs)
    bwd = [r for r in recs if r.is_forward is False]
    assert rep.compiles == len(fwd) and rep.backward_compiles == len(bwd) >= 1
    assert rep.graphs == sh.user_ns["cc_cnn"].frame_count + sh.user_ns["cc_blk"].frame_count + len(
        bwd
    )
    assert rep.compile_s == pytest.approx(sum(probe.record_total_s(r) for r in recs), rel=0.02)
    names = {f.name for f in rep.frames if f.kind == "frame"}
    assert {"ResNet18.forward", "TransformerBlock.forward"} <= names
    assert rep.cache_hits + rep.cache_misses == 4


# --------------------------------------------------------------------------
# One workload against TORCH_TRACE, read by tlparse
# --------------------------------------------------------------------------

TRACE_WORKLOAD = """
import json, sys, torch
import models, stance_magic
m = torch.compile(models.Chatty(), backend="eager")
gpt = torch.compile(models.gpt2(), backend="eager")
torch.manual_seed(1)
with stance_magic.measure("default") as rep:
    for n in (2, 2, 3):
        m(torch.randn(n, 4))
    models.generate(gpt, torch.randint(0, 256, (1, 8)), 3)
print("\\n" + json.dumps({
    "compiles": rep.compiles,
    "graph_breaks": sum(g.count for g in rep.graph_break_details),
}))
"""


def test_compiles_and_graph_breaks_against_torch_trace_read_by_tlparse(tmp_path):
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    if not Path(tlparse).exists():
        pytest.skip("tlparse is not installed (pip install tlparse)")
    trace = tmp_path / "trace"
    env = dict(os.environ, TORCH_TRACE=str(trace))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(models_file()).parent), *sys.path])
    done = subprocess.run(
        [sys.executable, "-c", TRACE_WORKLOAD],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    (log,) = trace.iterdir()
    out = tmp_path / "tl_out"
    parsed = subprocess.run(
        [tlparse, str(log), "-o", str(out), "--no-browser", "--overwrite"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert parsed.returncode == 0, parsed.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    names = [a["name"] for entry in directory.values() for a in entry["artifacts"]]
    compiles = sum(1 for n in names if n.startswith("compilation_metrics_"))
    breaks = sum(1 for n in names if n.startswith("dynamo_graph_break_reason_"))
    assert ours == {"compiles": compiles, "graph_breaks": breaks}
    assert compiles >= 5 and breaks >= 3


def test_gpt2_at_its_recompile_limit_against_torch(sh):
    """GPT-2 compiled with dynamic=False generating 8 -> 14 tokens with a limit
    of 3: torch compiles 3 graphs, refuses the 4th and runs the rest eagerly."""
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 3
    try:
        sh.run_cell(COUNTED_GPT2.replace("backend=cc)", "backend=cc, dynamic=False)"))
        t0 = time.time_ns() // 1000
        with torch_logs() as logs:
            res, _ = run(sh, "%%stance default -q\nout = models.generate(cgpt, ids, 6)")
        t1 = time.time_ns() // 1000
    finally:
        torch._dynamo.config.recompile_limit = old
    assert res.success, res.error_in_exec
    rep = last(sh)
    recs = frame_records(records_between(t0, t1))
    refused = [r for r in recs if r.co_name is None]
    assert len(refused) == 1  # 2.13: fail_type Unsupported, 2.8: RecompileLimitExceeded
    assert refused[0].fail_type in ("Unsupported", "RecompileLimitExceeded")
    assert sh.user_ns["cc"].frame_count == rep.graphs == 3
    # every recompile torch logged, and each entry's failed guard
    assert len(rep.recompiles) == len(logs["recompiles"]) == 3
    last_log = logs["recompiles"][-1]
    (lim,) = rep.recompile_limits
    assert len(lim.failures) == 3
    for f in lim.failures:
        assert f.reason.split(": ", 1)[1] in last_log
    # calls 4-6 ran eagerly: 6 calls, 3 of them into compiled graphs
    assert lim.eager_calls == rep.limit_eager_calls == 6 - 3
    assert lim.where.startswith("GPT2LMHeadModel.forward")
    assert lim.limit == 3 and lim.config == "recompile_limit"
    assert any("mark_dynamic" in h for h in rep.advice())


def test_gpt2_dynamic_length_named_as_torch_names_it(sh):
    """GPT-2 generating without a KV cache: the first graph is static, the
    recompile makes the sequence length a symbol (automatic dynamic); the
    symbol's name and source are torch's own (its create_symbol records)."""
    sh.run_cell(COUNTED_GPT2)
    with torch_log(SHAPES_LOGGER, dynamic=logging.DEBUG) as log:
        res, _ = run(sh, "%%stance default -q\nout = models.generate(cgpt, ids, 4)")
    created = {m.split()[1]: m.split()[5] for m in log.messages if m.startswith("create_symbol ")}
    assert res.success, res.error_in_exec
    rep = last(sh)
    first, second = rep.dynamic_shapes[:2]
    assert not first.symbols and first.inputs[0].endswith("[1, 8]")
    (sym_line,) = [s for s in second.symbols if "size()[1]" in s]
    sym = sym_line.split(" ", 1)[0]
    assert created[sym].endswith(".size()[1]")
    assert "automatic dynamic" in sym_line
    assert f"[1, {sym}]" in second.inputs[0]
