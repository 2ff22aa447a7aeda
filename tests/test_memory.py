"""Memory per measured cell (-m), each figure against an independent count."""

from __future__ import annotations

import pytest
import torch
from IPython.core.error import UsageError

import stance_magic
from stance_magic import probe

from conftest import cuda_test, html_outputs, last, run, text_outputs

MB64 = 16 * 1024 * 1024 * 4  # bytes of torch.ones(16 Mi) in float32

TRAIN = """
def blocks(x):
    for _ in range(8):
        x = torch.tanh(x.sin() * x.cos())
    return x

torch.manual_seed(0)
w = torch.randn(256, 1024, requires_grad=True)
cblocks = torch.compile(blocks, backend="aot_eager")
"""


def test_a_freed_64_mb_tensor_is_the_peak_and_nothing_is_left(sh):
    res, cap = run(sh, "%%stance default -m\nx = torch.ones(16 * 1024 * 1024)\ns = x.sum()\ndel x")
    assert res.success
    rep = last(sh)
    (fig,) = rep.memory
    assert fig.device == "cpu" and "profiler memory events" in fig.method
    assert fig.peak_bytes == pytest.approx(MB64, rel=0.03)
    assert abs(fig.end_bytes) < 1024  # the 4-byte sum, and nothing else
    text = "\n".join(text_outputs(cap))
    assert "memory (cpu)" in text and "peak 67.1 MB above the start" in text
    assert "times taken with memory measuring on" in text
    assert "memory (cpu)" in html_outputs(cap)[0]


def test_live_bytes_agree_with_the_tensors_the_cell_keeps(sh):
    sizes = (1000, 12345, 1 << 20, 7)
    run(sh, f"%%stance default -m -q\nkeep = [torch.empty(n) for n in {sizes}]")
    rep = last(sh)
    expected = sum(t.untyped_storage().nbytes() for t in sh.user_ns["keep"])
    assert expected == 4 * sum(sizes)
    assert rep.end_bytes == expected and rep.peak_bytes == expected
    # what the cell freed of what lived before it shows as a negative end
    run(sh, "%%stance default -m -q\ndel keep")
    assert last(sh).end_bytes == -expected and last(sh).peak_bytes == 0


def test_memory_is_off_unless_asked_and_costs_nothing_then(sh):
    run(sh, "%%stance default -q\nx = torch.ones(1000)")
    rep = last(sh)
    assert rep.memory == [] and rep.peak_bytes is None and not rep.memory_on
    assert "memory" not in str(rep)


@pytest.mark.integration
def test_aot_eager_then_compile_first_call_needs_less_memory(sh):
    """The reason aot_eager_then_compile exists, on a training step (torch's
    documentation: its first call runs under AOT eager for its memory savings)."""
    sh.run_cell(TRAIN)
    res, cap = run(
        sh,
        "%%stance --sweep force_eager,eager_then_compile,aot_eager_then_compile -m --no-plot\n"
        "cblocks(w).sum().backward()\nw.grad = None",
    )
    assert res.success
    eager, etc, aot = stance_magic.history()[-3:]
    assert etc.peak_bytes == pytest.approx(eager.peak_bytes, rel=0.02)  # the first call ran eagerly
    assert aot.peak_bytes < 0.8 * etc.peak_bytes
    # the times came from runs without memory measuring
    assert not any(r.memory_on for r in (eager, etc, aot))
    text = "\n".join(text_outputs(cap))
    assert "peak memory" in text
    assert "first-run memory: aot_eager_then_compile peaked at" in text


@pytest.mark.integration
def test_compare_gives_eager_first_and_steady_peaks(sh):
    sh.run_cell(TRAIN)
    res, cap = run(
        sh,
        "%%stance aot_eager_then_compile --compare --repeat 3 -m --no-plot\n"
        "cblocks(w).sum().backward()\nw.grad = None",
    )
    assert res.success
    rep = last(sh)
    c = rep.compare
    assert c.eager_peak_bytes and c.compiled_first_peak_bytes and c.compiled_steady_peak_bytes
    assert c.compiled_first_peak_bytes < c.eager_peak_bytes
    assert c.compiled_steady_peak_bytes <= c.eager_peak_bytes
    text = "\n".join(text_outputs(cap))
    assert "peak memory (-m)" in text and "first compiled run was timed with memory" in text


def test_memory_in_history_and_exports(sh, tmp_path):
    run(sh, "%%stance default -m -q\nx = torch.ones(1000)")
    run(sh, "%%stance default -q\ny = torch.ones(10)")
    hist = stance_magic.history()
    assert "peak memory" in str(hist) and "4.0 kB" in str(hist)
    csv_path, json_path = tmp_path / "h.csv", tmp_path / "h.json"
    run(sh, f"%stance history --csv {csv_path} --json {json_path}")
    head, first, second = csv_path.read_text().splitlines()[:3]
    cols = head.split(",")
    assert first.split(",")[cols.index("peak_bytes")] == "4000"
    assert second.split(",")[cols.index("peak_bytes")] == ""
    import json

    data = json.loads(json_path.read_text())
    assert data[0]["memory"][0]["peak_bytes"] == 4000 and data[1]["memory"] == []


def test_another_profiler_running_is_said_not_hidden(sh):
    from torch.profiler import ProfilerActivity, profile

    with probe.quiet_fd2():
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    try:
        res, _ = run(sh, "%%stance default -m -q\nx = torch.ones(10)")
    finally:
        with probe.quiet_fd2():
            prof.__exit__(None, None, None)
    assert res.success
    rep = last(sh)
    assert rep.memory == [] and any("another torch profiler" in n for n in rep.notes)


def test_memory_and_profile_guards_with_compare_is_refused(sh):
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')")
    res, _ = run(sh, "%%stance default --compare -m -g\nran = True")
    assert isinstance(res.error_in_exec, UsageError) and "ran" not in sh.user_ns


@cuda_test
def test_cuda_memory_from_the_caching_allocator(sh):  # pragma: no cover - needs a GPU
    run(sh, "x0 = torch.ones(1, device='cuda')")
    run(sh, "%%stance default -m -q\nx = torch.ones(16 * 1024 * 1024, device='cuda')\ndel x")
    rep = last(sh)
    cuda = [f for f in rep.memory if f.device.startswith("cuda")]
    assert cuda and cuda[0].peak_bytes == pytest.approx(MB64, rel=0.03)
    assert abs(cuda[0].end_bytes) < 1024


@cuda_test
def test_cuda_reserved_bytes_beside_the_peak(sh):  # pragma: no cover - needs a GPU
    """The caching allocator's pool (reserved) beside the peak allocated:
    read back against torch's own counters, and kept by the allocator after
    the tensor is freed."""
    run(sh, "x0 = torch.ones(1, device='cuda')")
    res, cap = run(
        sh, "%%stance default -m\nx = torch.ones(16 * 1024 * 1024, device='cuda')\ndel x"
    )
    assert res.success
    (cuda,) = [f for f in last(sh).memory if f.device.startswith("cuda")]
    assert cuda.peak_reserved_bytes >= cuda.peak_bytes >= MB64 * 0.97
    assert cuda.reserved_bytes == torch.cuda.memory_reserved()
    assert cuda.peak_reserved_bytes == torch.cuda.max_memory_reserved()
    text = "\n".join(text_outputs(cap))
    assert "reserved by the caching allocator: peak" in text
    row = last(sh).summary_row()
    assert row["cuda_peak_bytes"] == cuda.peak_bytes
    assert row["cuda_peak_reserved_bytes"] == cuda.peak_reserved_bytes


@cuda_test
def test_cuda_first_used_in_the_cell_is_measured(sh):  # pragma: no cover - needs a GPU
    """A cell that initializes CUDA itself still gets its CUDA figure (from
    the allocator's start), unless an earlier cell of this process used CUDA."""
    if torch.cuda.is_initialized():
        pytest.skip("CUDA was initialized by an earlier test of this process")
    run(sh, "%%stance default -m -q\nx = torch.ones(16 * 1024 * 1024, device='cuda')")
    (cuda,) = [f for f in last(sh).memory if f.device.startswith("cuda")]
    assert cuda.peak_bytes == pytest.approx(MB64, rel=0.03)
    assert cuda.note and "first used in this block" in cuda.note


def test_cpu_figures_carry_no_reserved_bytes(sh):
    run(sh, "%%stance default -m -q\nx = torch.ones(1000)")
    (fig,) = last(sh).memory
    assert fig.reserved_bytes is None and fig.peak_reserved_bytes is None
    assert "reserved" not in str(last(sh))
    row = last(sh).summary_row()
    assert row["cuda_peak_bytes"] is None and row["cuda_reserved_bytes"] is None


def test_history_chart_marks_each_cells_peak(sh):
    pytest.importorskip("matplotlib")
    from stance_magic.plots import history_figure

    sh.run_cell("f = torch.compile(lambda x: x * 2, backend='eager')")
    run(sh, "%%stance default -m -q\ny = f(torch.ones(1000))")
    run(sh, "%%stance default -q\ny = f(torch.ones(3, 3))")
    fig = history_figure(stance_magic.history())
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]
    marks = [t for t in texts if t.startswith("◆")]
    assert marks == [f"◆{_fmt(last_with_memory(sh))}"]
    assert any("peak memory (-m)" in t for t in texts)


def _fmt(n):
    from stance_magic.render import fmt_bytes

    return fmt_bytes(n)


def last_with_memory(sh):
    return next(r for r in reversed(stance_magic.history()) if r.memory).peak_bytes
