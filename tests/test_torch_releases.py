"""The installed torch, whichever release it is: every hook the recorder puts in
torch takes torch's own call, and an unsupported torch is refused in one line
(issue 18). Run on each pair of ``make test-matrix``."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo.guards as guards
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from torch._C._dynamo import eval_frame as c_eval_frame
from traitlets.config import Config

import stance_magic
from stance_magic import probe

from conftest import last, run


class Named(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1


def test_installed_torch_is_in_the_declared_range():
    v = probe.torch_version()
    assert probe.MIN_TORCH <= v <= probe.TESTED_UP_TO, torch.__version__
    assert probe.torch_problem() is None


def test_testing_hook_takes_the_arguments_this_torch_passes():
    """torch calls guard_manager_testing_hook_fn with 2 arguments (2.8) or 3
    (2.9+): the recorder's hook must take them and pass them on unchanged."""
    seen: list[tuple] = []
    before = guards.guard_manager_testing_hook_fn
    guards.guard_manager_testing_hook_fn = lambda *args: seen.append(args)
    try:
        torch.compiler.reset()
        cm = torch.compile(Named(), backend="eager")
        with stance_magic.measure("default") as rep:
            y = cm(torch.ones(3))
            cm(torch.ones(3))
    finally:
        guards.guard_manager_testing_hook_fn = before
    assert torch.equal(y, torch.full((3,), 4.0))
    assert rep.error is None and rep.compiles == 1 and not any(f.failed for f in rep.frames)
    expected = 3 if probe.torch_version() >= probe.TESTING_HOOK_BUILDER_SINCE else 2
    assert [len(args) for args in seen] == [expected]
    # the hook ran and named the module (the frame compiled is its forward)
    assert rep.frames[0].name == "Named.forward"
    # the guard-complete hook saw the second call's lookup, and chained to none
    assert (rep.cache_hits, rep.cache_misses) == (1, 1)
    assert guards.guard_manager_testing_hook_fn is before


def test_guard_complete_hook_passes_through_and_chains_the_answer():
    """Another tool's guard-complete hook keeps being called, with torch's
    argument, and its return value is what torch gets back."""
    calls: list[bool] = []

    def other(cache_hit: bool) -> bool:
        calls.append(cache_hit)
        return cache_hit

    prev = c_eval_frame.set_guard_complete_hook(other)
    try:
        torch.compiler.reset()
        f = torch.compile(lambda x: x - 1, backend="eager")
        f(torch.ones(2))
        with stance_magic.measure("default") as rep:
            for _ in range(3):
                f(torch.ones(2))
        now = c_eval_frame.set_guard_complete_hook(prev)
    finally:
        c_eval_frame.set_guard_complete_hook(prev)
    assert now is other  # ours took itself out, theirs back in place
    assert rep.cache_hits == 3 and calls == [True, True, True]


def test_every_stance_compiles_user_code_unchanged_under_measurement(sh):
    """A measured cell computes what an unmeasured one does, under every stance
    this torch has, with the backend named as the user gave it."""
    sh.run_cell(
        "from torch._dynamo.testing import CompileCounterWithBackend\n"
        "cnt = CompileCounterWithBackend('eager')\n"
        "f = torch.compile(lambda x, n: x * n + 1, backend=cnt)\n"
    )
    compiling = {"default", "eager_then_compile", "aot_eager_then_compile"}
    for stance in stance_magic.supported_stances():
        # (torch.compiler.reset() keeps eager_then_compile's first inputs)
        sh.run_cell("stance_magic.probe.reset_compiled_code()")
        if stance == "fail_on_recompile":  # it refuses a first compile too
            sh.run_cell("f(torch.ones(2), 2)")
        res, _ = run(sh, f"%%stance {stance} -q\nys = [f(torch.ones(2), 2) for _ in range(3)]")
        assert res.error_in_exec is None, (stance, res.error_in_exec)
        assert [y.tolist() for y in sh.user_ns["ys"]] == [[3.0, 3.0]] * 3
        rep = last(sh)
        assert rep.error is None
        graphs = [f for f in rep.frames if f.graph]
        # one compile, then hits: the recorder must not make torch recompile
        # (on 2.8 holding eager_then_compile's callback did: see probe.callback_ref)
        assert len(graphs) == (stance in compiling), (stance, rep.frames)
        hits = {"default": 2, "fail_on_recompile": 3, "eager_then_compile": 1}
        hits["aot_eager_then_compile"] = 2  # its aot_eager entry serves the later calls
        assert rep.cache_hits == hits.get(stance, 0), (stance, rep.cache_hits)
        expected = "CompileCounterWithBackend"
        if stance == "aot_eager_then_compile":
            expected = "aot_eager"
        assert [f.backend for f in graphs] == [expected] * len(graphs), stance


def test_load_ext_on_a_torch_too_old_says_so_in_one_line(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.7.1+cpu")
    monkeypatch.setattr(probe.version, "_TORCH_CHECKED", False)
    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    try:
        pre = list(sh.events.callbacks["pre_run_cell"])
        with capture_output() as cap:
            sh.run_cell("%load_ext stance_magic")
        lines = cap.stdout.strip().splitlines()
        assert lines == [
            "stance_magic needs torch >= 2.8 (for its guard-complete hook); "
            "this is torch 2.7.1+cpu: pip install 'torch>=2.8'"
        ]
        assert "stance" not in sh.magics_manager.magics["cell"]
        assert "stance" not in sh.magics_manager.magics["line"]
        assert sh.events.callbacks["pre_run_cell"] == pre
    finally:
        InteractiveShell.clear_instance()
    monkeypatch.undo()
    assert probe.torch_problem() is None


def test_a_record_with_only_the_oldest_fields_still_makes_a_report():
    """Records are read with defaults: a record carrying only what every
    supported torch writes (and none of the newer fields) gives a report."""
    import types

    from stance_magic.engine import make_stance
    from stance_magic.report import CellReport, build_report

    rec = types.SimpleNamespace(
        compile_id="0/0",
        co_name="f",
        co_filename="/tmp/f.py",
        co_firstlineno=3,
        entire_frame_compile_time_s=0.25,
        backend_compile_time_s=0.05,
    )
    window = probe.Window(records=[rec], misses=1)
    rep = build_report(
        CellReport(),
        window=window,
        stance=make_stance("default", False, None),
        wall_s=0.3,
        error=None,
        source="f(x)",
        label=None,
        index=1,
    )
    assert rep.compiles == 1 and rep.graphs == 1 and rep.recompiles == []
    (frame,) = rep.frames
    assert (frame.name, frame.line, frame.failed, frame.guard_count) == ("f", 3, None, None)
    assert rep.compile_s == pytest.approx(0.25)
    assert "f (/tmp/f.py:3)" in str(rep)
