"""On the GPU: synchronized timings, CUDA graphs, Inductor's named compile parts.

What a CPU can check runs here everywhere: that nothing synchronizes without
CUDA; that with CUDA in use (``torch.cuda.is_initialized`` and
``synchronize`` replaced, since this machine has no device) the window and
every ``--compare`` run synchronize at their start and end and the report says
so; torch's real "skipping cudagraphs" reason on CPU tensors
(``mode="reduce-overhead"``, marked ``inductor``); the builder, views and
hints from CUDA-graph figures. The tests that need a device are marked
``cuda`` and skip without one (``benchmarks/gpu_check.py`` runs them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

import stance_magic
from stance_magic import probe
from stance_magic.builder import Closed, build_report
from stance_magic.probe import cudagraphs as probe_cudagraphs
from stance_magic.probe.cudagraphs import (
    CudagraphPending,
    CudagraphRecording,
    CudagraphSkip,
    CudagraphWindow,
)
from stance_magic.probe.records import read_record, record_kernel_phases
from stance_magic.render import advice
from stance_magic.report import Recompile
from stance_magic.spec import MeasureSpec
from stance_magic.stance import Stance

from conftest import (
    cuda_test,
    has_row,
    html_outputs,
    last,
    run,
    steady_timed,
    text_outputs,
)
from timing import agree

ROOT = Path(__file__).resolve().parent.parent
GPU_CHECK = ROOT / "benchmarks" / "gpu_check.py"


class SyncCounter:
    """``torch.cuda.synchronize`` replaced: each call's ``perf_counter()``."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, device=None) -> None:
        self.calls.append(time.perf_counter())


@pytest.fixture
def syncs(monkeypatch):
    counter = SyncCounter()
    monkeypatch.setattr(torch.cuda, "synchronize", counter)
    return counter


# --------------------------------------------------------------------------
# synchronized timings
# --------------------------------------------------------------------------


def test_without_cuda_nothing_synchronizes(sh, syncs):
    assert not torch.cuda.is_initialized()
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')")
    res, cap = run(sh, "%%stance default --no-plot\ny = f(torch.ones(3))")
    assert res.success
    rep = last(sh)
    res, _ = run(sh, "%%stance default --compare --repeat 3 --no-plot\ny = f(torch.ones(3))")
    assert res.success
    cmp = last(sh)
    assert syncs.calls == []
    assert not rep.synchronized and not cmp.synchronized and not cmp.compare.synchronized
    assert "synchronized" not in "\n".join(text_outputs(cap)) + str(cmp)
    assert rep.summary_row()["synchronized"] is False
    assert not probe.sync_if_cuda() and not probe.cuda_in_use()


def test_with_cuda_in_use_the_window_and_every_compare_run_synchronize(sh, syncs, monkeypatch):
    """The clock starts after a synchronize and stops after one, for the
    cell's window and for each --compare run; the report says so in its
    data, its text, its HTML and its CSV row."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    res, cap = run(
        sh,
        "%%stance default --no-plot\n"
        "import time\ninside = [time.perf_counter()]\ny = torch.ones(3) + 1\n"
        "inside.append(time.perf_counter())",
    )
    assert res.success
    rep = last(sh)
    t_in, t_out = sh.user_ns["inside"]
    assert len(syncs.calls) == 2
    start, end = syncs.calls
    assert start < t_in and t_out < end
    # the clock starts after the first synchronize and stops after the last
    # (read just after it returns: it may hold a few ns past ``end``)
    assert t_out - t_in <= rep.wall_s <= time.perf_counter() - start
    assert rep.synchronized and rep.summary_row()["synchronized"] is True
    text = "\n".join(text_outputs(cap))
    assert "(CUDA synchronized):" in text.splitlines()[0]  # the headline
    assert "CUDA synchronized at its start and end" in rep.text(verbose=True)
    assert "CUDA synchronized at its start and end" in html_outputs(cap)[0]

    sh.user_ns["marks"] = []
    syncs.calls.clear()
    res, cap = run(
        sh,
        "%%stance default --compare --repeat 3 --no-plot\n"
        "marks.append(time.perf_counter())\ny = torch.ones(3) + 1",
    )
    assert res.success, res.error_in_exec
    marks = sh.user_ns["marks"]
    assert len(marks) == 6  # 3 eager runs, 3 compiled runs
    # 2 per run, 2 for the window around the compiled runs
    assert len(syncs.calls) == 2 * 6 + 2
    for m in marks:  # each run lies between a synchronize before it and one after it
        before = [c for c in syncs.calls if c < m]
        after = [c for c in syncs.calls if c > m]
        assert before and after
    cmp = last(sh)
    assert cmp.compare.synchronized and cmp.synchronized
    assert "every run timed from and to a synchronized CUDA device" in cmp.text(verbose=True)


class FakeEvent:
    """``torch.cuda.Event`` replaced: ``record()`` reads ``perf_counter()``
    (a GPU that keeps up with the host), every instance kept in ``made``."""

    made: ClassVar[list[FakeEvent]] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t: float | None = None
        FakeEvent.made.append(self)

    def record(self, stream=None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.t is not None and end.t is not None
        return (end.t - self.t) * 1e3


def test_with_cuda_each_timed_call_is_marked_on_the_stream(sh, syncs, monkeypatch):
    """With CUDA in use, each timed compiled call (the first ones and the
    spot checks, not the counted-only ones, not the profiled ones) gets a
    CUDA event where its compiled code starts and one where it returns; the
    report's compiled code on the GPU is the median of their intervals,
    computed here from the events themselves. Without CUDA: no events, no
    figure, no words."""
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')\nx = torch.ones(3)\nf(x)")
    run(sh, "%%stance default -q\nfor _ in range(300):\n    y = f(x)")
    plain = last(sh)
    assert plain.call_parts.device_s is None and plain.call_parts.device_calls == 0
    assert "on the GPU" not in str(plain) and plain.summary_row()["call_device_s"] is None

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    FakeEvent.made = []
    for _ in range(3):  # past the lookup's calibrations (torch's profiler: no marks)
        res, cap = run(sh, "%%stance default\nfor _ in range(300):\n    y = f(x)")
        assert res.success, res.error_in_exec
    rep = last(sh)
    (t,) = rep.lookups.targets
    p = t.parts
    # past the calibrations, the first STEADY_FIRST calls, one
    # STEADY_FIRST_SPOT calls later and 1 in STEADY_EVERY after it are timed:
    # every one marked (but a call that waited for the CPU: no parts)
    timed = steady_timed(300)
    assert p.device_calls == p.calls == timed - rep.lookups.waited_calls
    events = FakeEvent.made[-2 * p.device_calls :]
    spans = [b.t - a.t for a, b in zip(events[::2], events[1::2])]
    assert all(s > 0 for s in spans)
    assert p.device_s == pytest.approx(statistics.median(spans))
    # the marks lie where the compiled code starts (after the lookup's hook)
    # and where it returns, outside the host parts
    assert p.compiled_s < p.device_s < p.call_s + p.compiled_s
    assert rep.call_parts.device_s == pytest.approx(p.device_s)
    assert rep.summary_row()["call_device_s"] == pytest.approx(p.device_s)
    text = rep.text(verbose=True)
    assert "(host time); compiled code on the GPU" in text
    assert "CUDA events on the current stream" in text


def test_gpu_bound_calls_hide_the_hosts_parts():
    """Compiled code whose time on the GPU is 1.25x its time on the host or
    more is GPU-bound: the report says so, and gives neither the -u hint nor
    the overhead hint (the host's lookup and wrapper run while earlier
    kernels do); code whose GPU waits for the host's launches keeps them."""
    from stance_magic import render
    from stance_magic.report import GPU_BOUND, HOST_BOUND, CallParts

    host = dict(calls=20, before_s=4e-6, into_s=1e-6, lookup_s=30e-6, compiled_s=20e-6)
    host["after_s"] = 1e-6
    code = host["compiled_s"]
    host.update(lookup_bounded=True, device_calls=20)
    waits = CallParts(**host, device_s=1.1 * code)
    bound = CallParts(**host, device_s=1.01 * GPU_BOUND * code)
    # between the two: the last kernel's launch latency can be all of it
    unclear = CallParts(**host, device_s=1.55 * code)
    assert waits.gpu_bound is False and bound.gpu_bound is True
    assert unclear.gpu_bound is None and CallParts(**host).gpu_bound is None
    assert HOST_BOUND * code < unclear.device_s < GPU_BOUND * code
    assert "neither side clearly sets the pace" in render.device_text(unclear)
    assert advice._lookup_matters(unclear)
    assert advice._lookup_matters(waits) and not advice._lookup_matters(bound)
    assert advice._overhead_hint(waits, None, None) is not None
    assert advice._overhead_hint(bound, None, None) is None


def test_a_failing_synchronize_is_left_to_the_user(monkeypatch):
    """An asynchronous CUDA error surfacing at our synchronize is not raised
    by stance_magic (the user's next synchronization raises it): the span is
    then not synchronized."""

    def broken(device=None):
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", broken)
    assert probe.sync_if_cuda() is False


@pytest.mark.timing
def test_the_check_costs_next_to_nothing_without_cuda():
    """On a machine without CUDA the check is a dictionary lookup and one
    call to torch.cuda.is_initialized(): well under a microsecond (bounded
    here at 5 µs), the best of five loops in each round."""
    import timeit

    n = 20_000

    def one_round() -> dict[str, float]:
        best = min(timeit.repeat(probe.sync_if_cuda, number=n, repeat=5)) / n
        return {"check / 5 us": best / 5e-6}

    agree(
        one_round,
        {"check / 5 us": (None, 1.0)},
        why="a dictionary lookup and torch.cuda.is_initialized(), under a microsecond quiet",
    )


@pytest.mark.timing
@cuda_test
def test_wall_time_holds_a_long_gpu_kernel(sh):  # pragma: no cover - needs a GPU
    """A cell that launches ~100 ms of matrix products: its wall time
    includes them (CUDA events time the kernels), where the launches alone
    take well under a millisecond."""
    run(sh, "x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()")
    res, _ = run(
        sh,
        "%%stance default -q\n"
        "start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))\n"
        "start.record()\nfor _ in range(40):\n    y = x @ x\nend.record()",
    )
    assert res.success
    rep = last(sh)
    end = sh.user_ns["end"]
    end.synchronize()
    gpu_s = sh.user_ns["start"].elapsed_time(end) / 1e3
    assert gpu_s > 0.02
    assert rep.synchronized
    assert rep.wall_s >= 0.95 * gpu_s


@pytest.mark.timing
@cuda_test
def test_compare_times_the_gpu_work(sh):  # pragma: no cover - needs a GPU
    """--compare's eager median holds the kernels of each run."""
    run(sh, "x = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()")
    sh.run_cell("def work(x):\n    for _ in range(10):\n        x = x @ x * 1e-3\n    return x")
    sh.run_cell("cwork = torch.compile(work)")
    res, _ = run(sh, "%%stance default --compare --repeat 4 -q\ny = cwork(x)")
    assert res.success
    c = last(sh).compare
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    sh.user_ns["work"](sh.user_ns["x"])
    end.record()
    end.synchronize()
    eager_gpu = start.elapsed_time(end) / 1e3
    assert c.synchronized
    assert c.eager_s >= 0.9 * eager_gpu


# --------------------------------------------------------------------------
# Inductor's named parts of the compile time
# --------------------------------------------------------------------------


def test_kernel_parts_absent_or_zero_add_nothing():
    old_torch = SimpleNamespace(co_name="f", entire_frame_compile_time_s=1.0)
    assert record_kernel_phases(old_torch) == {}
    zeros = SimpleNamespace(
        triton_compile_time_us=0,
        compile_time_autotune_time_us=None,
        runtime_triton_autotune_time_us=0,
        runtime_cudagraphify_time_us=None,
    )
    assert record_kernel_phases(zeros) == {}
    some = SimpleNamespace(triton_compile_time_us=2_500_000, compile_time_autotune_time_us=1000)
    assert record_kernel_phases(some) == {"kernel_compile": 2.5, "autotune": 0.001}
    rec = read_record(SimpleNamespace(co_name="f", is_runtime=True, runtime_cudagraphify_time_us=7))
    assert rec.runtime and rec.kernel_phases == {"cudagraph_record": 7e-6}


def test_a_compile_without_kernels_shows_no_kernel_line(sh):
    """aot_eager compiles no kernel: torch's records leave the fields empty,
    and the compile time row has no detail line."""
    sh.run_cell("g = torch.compile(lambda x: x.sin() + 1, backend='aot_eager')")
    res, cap = run(sh, "%%stance default --no-plot\ny = g(torch.ones(3))")
    assert res.success
    rep = last(sh)
    assert rep.compile_s > 0
    assert rep.kernel_breakdown == {} and rep.first_run_breakdown == {}
    text = "\n".join(text_outputs(cap))
    assert "of which" not in text and "first runs after compiling" not in text
    row = rep.summary_row()
    assert row["kernel_compile_s"] == 0.0 and row["autotune_s"] == 0.0


# --------------------------------------------------------------------------
# CUDA graphs: torch's real reason on CPU tensors
# --------------------------------------------------------------------------


REDUCE_OVERHEAD = """
def scaled(x):
    y = torch.sin(x) * 2
    return y + 1

cscaled = torch.compile(scaled, mode="reduce-overhead")
"""


def _skips_now() -> int:
    from torch._dynamo.utils import counters

    return counters["inductor"]["cudagraph_skips"]


def _our_wrappers_in_torch() -> list[str]:
    """Any of the watch's wrappers still in torch (there should be none
    between windows)."""
    found = []
    for name in probe_cudagraphs.LOG_MODULES:
        mod = sys.modules.get(name)
        fn = getattr(mod, probe_cudagraphs.LOG_FN, None) if mod else None
        if hasattr(fn, "_stance_magic_wraps"):
            found.append(name)
    oc = sys.modules.get(probe_cudagraphs.OUTPUT_CODE)
    if oc is not None:
        for method in ("__init__", "post_compile"):
            if hasattr(oc.CompiledFxGraph.__dict__[method], "_stance_magic_wraps"):
                found.append(method)
    return found


@pytest.mark.inductor
def test_reduce_overhead_on_cpu_tensors_is_skipped_with_torchs_reason(sh, tmp_path, monkeypatch):
    """torch skips CUDA graphs for a graph of CPU tensors and only counts it
    (no log): the report names the skip with torch's own reason (read from
    the graph), the compile and frame it belongs to, the graph's devices; a
    compile loaded from the FX graph cache is skipped again and named again.
    torch's counter is the independent count. The compile's kernel build is
    named in the compile time."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    sh.run_cell(REDUCE_OVERHEAD)
    for attempt in ("generated", "loaded"):
        torch.compiler.reset()
        before = _skips_now()
        res, cap = run(sh, "%%stance default --no-plot\ny = cscaled(torch.ones(8))")
        assert res.success, res.error_in_exec
        rep = last(sh)
        assert _skips_now() - before == 1
        cg = rep.cudagraphs
        assert (cg.skipped, cg.recorded, cg.replayed) == (1, 0, 0)
        (skip,) = cg.skips
        assert skip.reason.startswith("skipping cudagraphs due to "), skip.reason
        # 2.8 names the CPU node and the user's line; from 2.10 graph
        # partitioning sets the CPU nodes aside and torch names no device
        assert "cpu device" in skip.reason or skip.reason.rstrip(": ").endswith("multiple devices")
        assert skip.devices == ["cpu"] and not skip.logged
        assert skip.compile_id == rep.frames[0].compile_id
        assert skip.frame == rep.frames[0].where and "scaled" in skip.frame
        if "cpu device" in skip.reason:
            assert skip.where.startswith("In [") and "torch.sin(x)" in skip.source
        text = "\n".join(text_outputs(cap))
        assert has_row(text, "CUDA graphs", "1 skipped")
        assert f"skipped: {skip.reason}" in text and "the graph's devices: cpu" in text
        assert "CUDA graphs" in html_outputs(cap)[0]
        assert any("ran without CUDA graphs" in h for h in rep.advice())
        row = rep.summary_row()
        assert row["cudagraphs_skipped"] == 1 and row["cudagraph_skip_reasons"] == skip.reason
        assert list(row)[-1] == "tracing_top_s"  # the CSV grows at its end
        fx = rep.compile_caches
        assert (fx.fx_misses, fx.fx_hits) == ((1, 0) if attempt == "generated" else (0, 1))
        if attempt == "generated":
            # the compile workers built the C++ kernel: inside the compile time
            k = rep.kernel_breakdown.get("kernel_compile", 0.0)
            assert 0 < k <= rep.compile_s
            assert "of which kernel compilation" in rep.text(verbose=True)
    assert _our_wrappers_in_torch() == []
    # a cell that only calls the compiled code again skips nothing more
    before = _skips_now()
    run(sh, "%%stance default -q\ny = cscaled(torch.ones(8))")
    assert last(sh).cudagraphs.empty and _skips_now() == before


SAME_CELL = """
import json, sys, torch, stance_magic
from torch._dynamo.utils import counters
# nothing of Dynamo or Inductor is imported yet: the watch wraps Inductor at
# the compile's start, inside the block
assert "torch._inductor.output_code" not in sys.modules

def scaled(x):
    return torch.sin(x) * 2 + 1

with stance_magic.measure() as rep:
    torch.compile(scaled, mode="reduce-overhead")(torch.ones(8))
skip = rep.cudagraphs.skips[0]
print("RESULT " + json.dumps({
    "skipped": rep.cudagraphs.skipped,
    "counter": counters["inductor"]["cudagraph_skips"],
    "reason": skip.reason, "devices": skip.devices, "frame": skip.frame,
}))
"""


@pytest.mark.inductor
@pytest.mark.integration
def test_reduce_overhead_compiled_in_the_measured_block_is_seen(tmp_path):
    """A fresh process whose measured block first imports Dynamo and Inductor
    (the torch.compile call is inside it): the watch wraps torch's code at
    the compile's start, so the skip has its reason, not only torch's count."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SAME_CELL], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    res = json.loads(line[len("RESULT ") :])
    assert res["skipped"] == res["counter"] == 1
    assert res["reason"].startswith("skipping cudagraphs due to ") and res["devices"] == ["cpu"]
    assert "scaled" in res["frame"]


# --------------------------------------------------------------------------
# the builder, views and hints from CUDA-graph figures
# --------------------------------------------------------------------------


def _closed(window: CudagraphWindow) -> Closed:
    spec = MeasureSpec()
    win = probe.Window(compiled_calls=3, hits=2)
    return Closed(
        spec=spec,
        stance=Stance("default"),
        execution_count=4,
        window=win,
        wall_s=0.1,
        error=None,
        t0=0.0,
        cudagraphs=window,
    )


def test_graphs_recorded_for_new_sizes_become_a_hint_in_recompile_terms():
    """A graph with dynamic shapes recorded for four batch sizes: three of
    the recordings are for new sizes (torch held graphs for other sizes),
    which the report counts, shows with the sizes, and turns into a hint."""
    recs = [
        CudagraphRecording("0/1", "scaled", sizes=(n,), mode="INFERENCE", others=i)
        for i, n in enumerate((8, 16, 32, 64))
    ]
    window = CudagraphWindow(recordings=recs, replays={"0/1": 12}, warmups={"0/1": 4})
    rep = build_report(_closed(window), index=1)
    cg = rep.cudagraphs
    assert (cg.recorded, cg.for_new_sizes, cg.rerecorded, cg.replayed, cg.warmups) == (
        4,
        3,
        0,
        12,
        4,
    )
    (frame,) = cg.frames
    assert frame.sizes == [[8], [16], [32], [64]] and "compile 0/1" in frame.frame
    text = str(rep)
    assert has_row(text, "CUDA graphs", "4 recorded (3 for new input sizes), 12 replayed")
    assert "sizes 8; 16; 32; 64" in text
    hints = advice.advise(rep)
    assert any("re-recorded 3 times: the batch size changes; pad it" in h for h in hints), hints


def test_graphs_recorded_after_a_size_recompile_count_as_new_sizes():
    """Without dynamic shapes each batch size is a recompile (a new compile
    id of the same frame) and a recording of its own."""
    recs = [CudagraphRecording("0/0", "f"), CudagraphRecording("0/1", "f")]
    size = Recompile(
        reason="tensor 'x' size mismatch at index 0. expected 8, actual 16",
        where="f (In [2], line 1)",
        compile_id="0/1",
    )
    closed = _closed(CudagraphWindow(recordings=recs))
    from stance_magic.builder import cudagraphs as build

    cg = build._cudagraphs(closed, [], [size])
    assert (cg.recorded, cg.for_new_sizes) == (2, 1)
    assert cg.frames[0].compile_ids == ["0/0", "0/1"]


def test_a_rerecord_names_the_invariant_that_failed():
    recs = [
        CudagraphRecording("0/0", "f", rerecord=True, why="static input data pointer changed"),
        CudagraphRecording("0/0", "f", rerecord=True, why="static input data pointer changed"),
    ]
    rep = build_report(_closed(CudagraphWindow(recordings=recs)), index=1)
    assert rep.cudagraphs.rerecorded == 2 and rep.cudagraphs.for_new_sizes == 0
    assert "2 re-recorded (static input data pointer changed)" in str(rep)
    assert any(
        "re-recorded 2 times because torch could not replay them (static input" in h
        for h in rep.advice()
    )


def test_skips_are_grouped_with_the_users_line_and_unseen_ones_counted():
    reason = (
        "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
        '   File "/tmp/nb.py", line 3, in step\n    x.add_(1)\n'
    )
    skip = CudagraphSkip(
        reason=reason,
        compile_id="1/0",
        filename="/tmp/nb.py",
        line=3,
        function="step",
        source="x.add_(1)",
    )
    window = CudagraphWindow(skips=[skip, skip], unexplained_skips=1)
    rep = build_report(_closed(window), index=1)
    cg = rep.cudagraphs
    assert cg.skipped == 3
    first, unseen = cg.skips
    assert first.count == 2 and first.reason == (
        "skipping cudagraphs due to mutated inputs (1 instances)"
    )
    assert first.where.endswith("3") and first.source == "x.add_(1)"
    assert unseen.reason == "" and unseen.count == 1
    text = str(rep)
    assert "2× skipping cudagraphs due to mutated inputs (1 instances)" in text
    assert "`x.add_(1)`" in text and "torch counted 1 skip whose reason" in text
    assert rep.summary_row()["cudagraph_skip_reasons"] == first.reason


STALE_SKIP = (
    "skipping cudagraphs due to mutated inputs (1 instances). Found from : \n"
    '   File "/tmp/ipykernel_1/3161.py", line 2, in bump\n    x.add_(1)\n'
)


def test_a_run_time_skip_from_a_cached_graph_names_the_line_compiled_here(sh):
    """torch checks a graph for mutated inputs when it first runs it, inside
    its CUDA-graph tree manager's run (which holds the function's compile id),
    and names the line from the graph's stack: for a graph loaded from the FX
    graph cache, the stack of the process that compiled it first (another
    kernel's file, as a GPU run of gpu_check.py showed: its pytest named the
    benchmark's own function). The report ties the skip to the frame compiled
    in the cell and names the line there that holds the same code. Torch's
    own logger is called as it calls it, with a tree manager in its
    thread-local trees standing for the one a GPU would run."""
    from torch._inductor import cudagraph_trees as trees

    defined, _ = run(
        sh,
        "def bump(x):\n    x.add_(1)\n    return x * 2\n"
        "seen = []\n"
        "def backend(gm, example_inputs):\n"
        "    seen.append(str(torch._guards.CompileContext.current_compile_id()))\n"
        "    return gm.forward\n"
        "cbump = torch.compile(bump, backend=backend)",
    )
    n = defined.execution_count
    containers = trees.get_obj(trees.local, "tree_manager_containers")
    sh.user_ns.update(containers=containers, SimpleNamespace=SimpleNamespace, msg=STALE_SKIP)
    try:
        res, _ = run(
            sh,
            "%%stance default -q\n"
            "y = cbump(torch.ones(3))\n"
            "containers[99] = SimpleNamespace(tree_manager=SimpleNamespace(compile_id=seen[0]))\n"
            "from torch._inductor import cudagraph_trees\n"
            "cudagraph_trees.log_cudagraph_skip_and_bump_counter(msg)",
        )
    finally:
        containers.pop(99, None)
    assert res.success, res.error_in_exec
    rep = last(sh)
    (skip,) = rep.cudagraphs.skips
    assert skip.compile_id == sh.user_ns["seen"][0] == rep.frames[0].compile_id
    assert skip.frame == rep.frames[0].where and skip.frame.startswith(f"bump (In [{n}]")
    assert skip.where == f"In [{n}], line 2" and skip.source == "x.add_(1)"


def test_a_skip_inside_a_helper_of_another_file_keeps_torchs_line(tmp_path):
    """The line torch names is kept when the frame compiled here does not hold
    that code (a helper inlined from another file, or code that changed)."""
    from stance_magic.builder.locating import _line_in_frame

    f = tmp_path / "model.py"
    f.write_text(
        "import torch\n\n@torch.compile\ndef step(x):\n    y = helper(x)\n"
        "    x.add_(1)\n    return y\n\ndef after(x):\n    x.add_(1)\n"
    )
    assert _line_in_frame(str(f), 3, "x.add_(1)") == 6
    assert _line_in_frame(str(f), 3, "helper_mutates(x)") is None
    assert _line_in_frame(str(f), 9, "x.add_(1)") == 10
    assert _line_in_frame(str(f), 99, "x.add_(1)") is None


def test_skip_reason_parsing_keeps_torchs_text_once():
    doubled = "skipping cudagraphs due to skipping cudagraphs due to cpu device (arg0_1)"
    assert (
        probe_cudagraphs.clean_reason(doubled) == "skipping cudagraphs due to cpu device (arg0_1)"
    )
    text = 'x. Found from : \n   File "<ipython-input-3>", line 2, in f\n    y = x.sin()\n'
    assert probe_cudagraphs.user_line(text) == ("<ipython-input-3>", 2, "f", "y = x.sin()")
    assert probe_cudagraphs.user_line("no frame here") == ("", None, "", "")


def test_a_cell_without_cuda_graphs_shows_no_row(sh):
    sh.run_cell("h = torch.compile(lambda x: x * 3, backend='eager')")
    res, cap = run(sh, "%%stance default --no-plot\ny = h(torch.ones(2))")
    assert res.success and last(sh).cudagraphs.empty
    assert "CUDA graphs" not in "\n".join(text_outputs(cap))
    row = last(sh).summary_row()
    assert (row["cudagraphs_recorded"], row["cudagraphs_skipped"]) == (0, 0)
    assert row["cudagraph_skip_reasons"] == ""
    assert _our_wrappers_in_torch() == []
    from torch._dynamo.callback import callback_handler

    names = [
        getattr(c, "__name__", "")
        for c in callback_handler.start_callbacks + callback_handler.end_callbacks
    ]
    assert "stance_magic_cudagraphs" not in names


def test_a_pending_backward_is_a_row_line_and_a_hint():
    window = CudagraphWindow(
        pending_backward=[CudagraphPending("0/0", "forward")], warmups={"0/0": 5}
    )
    rep = build_report(_closed(window), index=1)
    cg = rep.cudagraphs
    assert cg.pending_backward == ["forward (compile 0/0)"] and not cg.empty
    text = str(rep)
    assert has_row(text, "CUDA graphs", "5 warm-up runs, 1 graph held back by a pending backward")
    assert "forward (compile 0/0): torch kept running its warm-up (eagerly)" in text
    assert any(
        "stayed in warm-up: outputs of an earlier call still wait for their backward" in h
        for h in rep.advice()
    )
    row = rep.summary_row()
    assert row["cudagraphs_pending_backward"] == 1 and row["cudagraph_output_overwritten"] is False


def _tree_manager_for(fn, compile_id: str):
    """A CUDA-graph tree manager with a path of three nodes of one function
    (CUDA cannot run here, so torch cannot build one): enough state for
    torch's own ``check_warn_on_unable_to_start_executing`` to decide."""
    trees = pytest.importorskip("torch._inductor.cudagraph_trees")
    fid = trees.FunctionID(0)
    a = SimpleNamespace(wrapped_function=SimpleNamespace(id=fid), parent=None)
    b = SimpleNamespace(wrapped_function=SimpleNamespace(id=fid), parent=a)
    c = SimpleNamespace(wrapped_function=SimpleNamespace(id=fid), parent=b)
    c._path_from_root = [a, b, c]
    manager = object.__new__(trees.CUDAGraphTreeManager)
    manager.__dict__.update(
        warned_functions=set(),
        in_new_torch_compile_invocation=lambda: True,
        ids_to_funcs={fid: SimpleNamespace(model=fn)},
        id_to_compile_id={fid: compile_id},
    )
    manager.current_node = c  # a property over _current_node in newer releases
    return manager, fid


def test_torchs_pending_backward_warning_is_seen_once_per_function():
    """torch's own check, run on a path that repeats one function (the
    loop that never calls backward): torch warns once and notes the
    function; the window names it, and nothing of ours stays in torch."""
    import warnings

    trees = pytest.importorskip("torch._inductor.cudagraph_trees")
    check = trees.CUDAGraphTreeManager.check_warn_on_unable_to_start_executing

    def forward(x):
        return x

    manager, fid = _tree_manager_for(forward, "2/0")
    with stance_magic.measure() as rep:
        wrapped = trees.CUDAGraphTreeManager.check_warn_on_unable_to_start_executing
        assert getattr(wrapped, "_stance_magic_wraps", None) is check
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                manager.check_warn_on_unable_to_start_executing(fid)
    assert trees.CUDAGraphTreeManager.check_warn_on_unable_to_start_executing is check
    assert len(caught) == 1 and "Unable to hit fast path of CUDAGraphs" in str(caught[0].message)
    assert fid in manager.warned_functions
    assert rep.cudagraphs.pending_backward == ["forward (compile 2/0)"]
    # warned before the window: torch says nothing more, nor does the report
    with stance_magic.measure() as again:
        manager.check_warn_on_unable_to_start_executing(fid)
    assert again.cudagraphs.empty


def _dealloc_msg():
    trees = pytest.importorskip("torch._inductor.cudagraph_trees")
    fmt = getattr(trees.CUDAGraphTreeManager, "format_dealloc_msg", None)
    if fmt is None:  # pragma: no cover - a torch that writes it inline
        pytest.skip(f"torch {torch.__version__} has no format_dealloc_msg")
    return fmt


def test_reading_an_overwritten_output_is_named_with_torchs_own_error(sh):
    """torch's error for an output of an earlier CUDA-graph run read after a
    later run overwrote it (its text made by torch's own formatter, with the
    stack trace torch keeps for the output): the report names it and the
    user's line that made the output, and hints how to keep it."""
    sh.user_ns["dealloc_msg"] = _dealloc_msg()
    res, _ = run(sh, "def step(x):\n    y = x @ x\n    return y")
    n = res.execution_count
    raise_it = (
        "%%stance default --no-plot\n"
        "stack = f'  File \"{step.__code__.co_filename}\", line 2, in step\\n    y = x @ x\\n'\n"
        "raise RuntimeError(dealloc_msg(stack))"
    )
    res, cap = run(sh, raise_it)
    assert not res.success
    rep = last(sh)
    cg = rep.cudagraphs
    assert cg.overwritten_output and cg.overwritten_made_at == f"In [{n}], line 2 `y = x @ x`"
    text = "\n".join(text_outputs(cap))
    assert has_row(text, "CUDA graphs", "an overwritten output read")
    assert f"after a later run overwrote it (the output made at In [{n}], line 2" in text
    assert any("was read after a later run overwrote it: clone" in h for h in rep.advice())
    assert rep.summary_row()["cudagraph_output_overwritten"] is True
    # torch without a stack trace for the output; any other error
    run(sh, "%%stance default -q\nraise RuntimeError(dealloc_msg(None))")
    assert last(sh).cudagraphs.overwritten_made_at == "(torch found no stack trace)"
    run(sh, "%%stance default -q\nraise RuntimeError('output of a CUDA graph')")
    assert last(sh).cudagraphs.empty


# --------------------------------------------------------------------------
# CUDA graphs on a GPU
# --------------------------------------------------------------------------


def _outside_events(sh, call: str, n: int) -> float:
    """The median of ``n`` calls on the GPU, CUDA events recorded around each
    by the test (nothing of stance_magic's), read after one synchronize."""
    sh.user_ns["_n"] = n
    sh.run_cell(
        "_pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))"
        " for _ in range(_n)]\n"
        "torch.cuda.synchronize()\n"
        f"for _a, _b in _pairs:\n    _a.record()\n    {call}\n    _b.record()\n"
        "torch.cuda.synchronize()\n"
        "_gpu = sorted(_a.elapsed_time(_b) / 1e3 for _a, _b in _pairs)"
    )
    spans = sh.user_ns["_gpu"]
    return statistics.median(spans)


@pytest.mark.timing
@cuda_test
def test_a_launch_bound_call_on_the_gpu_waits_for_the_host(sh):  # pragma: no cover - GPU
    """A tiny kernel: the GPU waits for the host's launches. The report's
    compiled code on the GPU within 1.5x of torch's profiler's compiled
    region (the host's launching of it, which the stream follows, plus the
    kernel's launch latency: on an H200 1.55x the host's compiled part), so
    not called GPU-bound."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_anatomy", ROOT / "benchmarks" / "bench_anatomy.py"
    )
    assert spec is not None and spec.loader is not None
    bench_anatomy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_anatomy)

    sh.run_cell("f = torch.compile(lambda x: x + 1)\nx = torch.ones(3, device='cuda')\nf(x); f(x)")
    for _ in range(4):  # the lookup's calibrations, then one measured cell
        res, cap = run(sh, "%%stance default\nfor _ in range(300):\n    y = f(x)")
        assert res.success, res.error_in_exec
    p = last(sh).call_parts
    f, x = sh.user_ns["f"], sh.user_ns["x"]
    _lookup, region = bench_anatomy.profiled(lambda: f(x), 300)
    assert p.device_calls >= 64 and 1 / 1.5 <= p.device_s / region <= 1.5, (p, region)
    assert p.gpu_bound is not True, p
    assert "the GPU sets the pace" not in "\n".join(text_outputs(cap))


@pytest.mark.timing
@cuda_test
def test_a_gpu_bound_call_is_named_and_gets_no_host_hints(sh):  # pragma: no cover - GPU
    """Three 4096x4096 matrix products a call: the GPU sets the pace. The
    report's compiled code on the GPU within 1.5x of the test's own CUDA
    events around each call, at least 1.25x the host's compiled part; no -u
    or overhead hint."""
    sh.run_cell(
        "g = torch.compile(lambda a: ((a @ a).relu() @ a) @ a)\n"
        "a = torch.randn(4096, 4096, device='cuda') / 64\ng(a); g(a)"
    )
    for _ in range(4):
        res, cap = run(sh, "%%stance default\nfor _ in range(20):\n    y = g(a)")
        assert res.success, res.error_in_exec
    rep = last(sh)
    p = rep.call_parts
    outside = _outside_events(sh, "g(a)", 20)
    assert 1 / 1.5 <= p.device_s / outside <= 1.5, (p, outside)
    assert p.gpu_bound is True, p
    assert "the GPU sets the pace" in "\n".join(text_outputs(cap))
    assert not any("skip_guard_eval_unsafe" in h or "own work" in h for h in rep.advice())


@cuda_test
def test_reduce_overhead_records_then_replays(sh):  # pragma: no cover - needs a GPU
    sh.run_cell(
        "def step(x):\n    return (x.sin() * 2 + 1).sum(0)\n"
        "cstep = torch.compile(step, mode='reduce-overhead')\n"
        "x = torch.randn(64, 64, device='cuda')"
    )
    res, cap = run(sh, "%%stance default --no-plot\nfor _ in range(6):\n    y = cstep(x)")
    assert res.success
    cg = last(sh).cudagraphs
    assert cg.recorded >= 1 and cg.warmups >= 1 and cg.replayed >= 3
    assert cg.skipped == 0 and cg.for_new_sizes == 0 and cg.rerecorded == 0
    assert "CUDA graphs" in "\n".join(text_outputs(cap))
    res, _ = run(sh, "%%stance default -q\nfor _ in range(5):\n    y = cstep(x)")
    cg = last(sh).cudagraphs
    assert (cg.recorded, cg.replayed) == (0, 5)


@cuda_test
def test_a_changing_batch_size_is_named(sh):  # pragma: no cover - needs a GPU
    sh.run_cell(
        "def step(x):\n    return x.sin() * 2 + 1\n"
        "cstep = torch.compile(step, mode='reduce-overhead')"
    )
    res, _ = run(
        sh,
        "%%stance default -q\nfor n in (8, 16, 24, 32, 40):\n"
        "    for _ in range(3):\n        y = cstep(torch.randn(n, 64, device='cuda'))",
    )
    assert res.success
    rep = last(sh)
    cg = rep.cudagraphs
    assert cg.recorded >= 4 and cg.for_new_sizes >= 3
    assert any("the batch size changes" in h for h in rep.advice()), rep.advice()


@cuda_test
def test_a_mutated_input_skip_names_the_users_line(sh):  # pragma: no cover - needs a GPU
    sh.run_cell(
        "def bump(x):\n    x.add_(1)\n    return x * 2\n"
        "cbump = torch.compile(bump, mode='reduce-overhead')"
    )
    res, _ = run(
        sh, "%%stance default -q\nfor _ in range(3):\n    y = cbump(torch.ones(8, device='cuda'))"
    )
    assert res.success
    cg = last(sh).cudagraphs
    assert cg.skipped >= 1
    skip = cg.skips[0]
    assert "mutat" in skip.reason and skip.logged
    assert skip.where.startswith("In [") and "x.add_(1)" in skip.source


FIRST_PROCESS = """import torch

def bump(x):
    x.add_(1)
    return x * 2

cbump = torch.compile(bump, mode="reduce-overhead")
for _ in range(3):
    cbump(torch.ones(8, device="cuda"))
"""


@cuda_test
def test_a_skip_of_a_graph_from_another_processs_cache_names_the_cell(
    sh, tmp_path, monkeypatch
):  # pragma: no cover - needs a GPU
    """The same function compiled first by another process (a file of its
    own) into the FX graph cache, then in a cell: torch loads the graph and
    names the other process's line in its skip; the report names the cell's."""
    cache = tmp_path / "inductor"
    first = tmp_path / "first.py"
    first.write_text(FIRST_PROCESS)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, str(first)], env=env, check=True, timeout=300)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    torch.compiler.reset()
    defined, _ = run(
        sh,
        "def bump(x):\n    x.add_(1)\n    return x * 2\n"
        "cbump = torch.compile(bump, mode='reduce-overhead')",
    )
    res, _ = run(
        sh, "%%stance default -q\nfor _ in range(3):\n    y = cbump(torch.ones(8, device='cuda'))"
    )
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.compile_caches.fx_hits >= 1  # the graph came from the other process
    (skip,) = rep.cudagraphs.skips
    assert "mutat" in skip.reason and skip.compile_id == rep.frames[0].compile_id
    assert skip.where == f"In [{defined.execution_count}], line 2", skip
    assert skip.source == "x.add_(1)"


@cuda_test
def test_cuda_tensors_on_one_device_are_not_skipped(sh):  # pragma: no cover - needs a GPU
    sh.run_cell(
        "def g(x):\n    return x.cos() + 1\ncg = torch.compile(g, mode='reduce-overhead')\n"
        "x = torch.randn(32, device='cuda')"
    )
    run(sh, "%%stance default -q\nfor _ in range(4):\n    y = cg(x)")
    rep = last(sh)
    assert rep.cudagraphs.skipped == 0 and rep.cudagraphs.recorded >= 1
    assert rep.synchronized


@cuda_test
def test_a_training_loop_without_backward_is_held_in_warm_up(sh):  # pragma: no cover - GPU
    sh.run_cell(
        "lin = torch.nn.Linear(64, 64, device='cuda')\n"
        "clin = torch.compile(lin, mode='reduce-overhead')\n"
        "x = torch.randn(8, 64, device='cuda')"
    )
    res, _ = run(sh, "%%stance default -q\nfor _ in range(6):\n    out = clin(x)")
    assert res.success
    rep = last(sh)
    assert len(rep.cudagraphs.pending_backward) == 1, rep.cudagraphs
    assert any("stayed in warm-up" in h for h in rep.advice()), rep.advice()


@cuda_test
def test_an_overwritten_output_read_is_named(sh):  # pragma: no cover - needs a GPU
    """torch's documented example (the CUDA graphs page of torch.compile's
    docs): the first call's output (a warm-up run) read after the second call
    (which records the graph into the same memory). torch raises only there:
    a replay does not invalidate the outputs of earlier replays (on an H200
    with torch 2.11 they read the next replay's values, without an error)."""
    res, _ = run(
        sh,
        "def mm(x):\n    y = x @ x\n    return y\n"
        "cmm = torch.compile(mm, mode='reduce-overhead')\n"
        "x = torch.randn(16, 16, device='cuda')",
    )
    n = res.execution_count
    res, _ = run(sh, "%%stance default -q\ny1 = cmm(x)\ny2 = cmm(x)\nprint(y1 + 1)")
    assert not res.success
    assert "overwritten by a subsequent" in str(res.error_in_exec)
    cg = last(sh).cudagraphs
    assert cg.overwritten_output and cg.overwritten_made_at.startswith(f"In [{n}], line 2"), cg


# --------------------------------------------------------------------------
# the GPU check script
# --------------------------------------------------------------------------


def test_gpu_check_says_there_is_nothing_to_check_without_cuda(tmp_path):
    if torch.cuda.is_available():  # pragma: no cover - a GPU machine runs the script itself
        pytest.skip("this machine has a CUDA device: benchmarks/gpu_check.py checks it")
    proc = subprocess.run(
        [sys.executable, str(GPU_CHECK), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA device: nothing to check" in proc.stdout
    summary = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert summary["cuda"] is False and summary["checked"] == []


def test_history_keeps_working_with_cuda_fields(sh):
    run(sh, "%%stance default -q\ny = torch.ones(2)")
    assert "synchronized" in stance_magic.history()[-1].to_dict()


def test_a_window_inside_another_sees_only_its_own_cuda_graph_skips():
    """The watch's windows overlap (a measure() inside a measured cell):
    each sees what torch did since it opened, the outer one everything,
    and a window after them starts from nothing."""
    pytest.importorskip(probe_cudagraphs.TREES)
    utils = pytest.importorskip("torch._inductor.cudagraph_utils")
    watch = probe_cudagraphs.watch()
    before = _skips_now()
    outer = watch.start()
    utils.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to first")
    inner = watch.start()
    utils.log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to second")
    seen_inner = watch.stop(inner)
    seen_outer = watch.stop(outer)
    assert _skips_now() == before + 2  # torch's own count
    assert [s.reason for s in seen_inner.skips] == ["skipping cudagraphs due to second"]
    assert [s.reason for s in seen_outer.skips] == [
        "skipping cudagraphs due to first",
        "skipping cudagraphs due to second",
    ]
    assert seen_inner.unexplained_skips == seen_outer.unexplained_skips == 0
    assert not watch.installed
    assert watch.stop(watch.start()) is None


def test_a_window_without_cuda_graphs_gets_what_the_whole_builder_makes(sh, monkeypatch):
    """The builder's short way for a window that saw no CUDA graph (the
    steady cell) gives what the whole of it makes of the same window."""
    from stance_magic import builder
    from stance_magic.builder import cudagraphs as cg
    from stance_magic.session import measurement

    seen = []
    whole = builder.build_report

    def keep(closed, **kw):
        seen.append(closed)
        return whole(closed, **kw)

    monkeypatch.setattr(measurement.builder, "build_report", keep)
    sh.run_cell("f = torch.compile(lambda x: x * 2, backend='eager')\nf(torch.ones(2))")
    run(sh, "%%stance default -q\nfor _ in range(5):\n    f(torch.ones(2))")
    (closed,) = seen
    assert cg._cudagraphs(closed, [], []) is cg._NO_CUDAGRAPHS
    assert cg._seen(closed, [], []) == cg._NO_CUDAGRAPHS
