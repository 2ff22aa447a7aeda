"""The installed torch, whichever release it is: the release constants say
what it has, every hook the recorder puts in torch takes torch's own call,
and an unsupported torch is refused in one line. Run on each pair of
``make test-matrix``."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo.guards as guards
import torch._dynamo.utils as dynamo_utils
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from torch._C._dynamo import eval_frame as c_eval_frame
from traitlets.config import Config

import stance_magic
from stance_magic import probe
from stance_magic.causes import failure_kind

from conftest import HAS_CONTEXTS, HAS_PER_CALL_LIMIT, html_outputs, last, run


class Named(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1


def test_installed_torch_is_in_the_declared_range():
    v = probe.torch_version()
    assert probe.MIN_TORCH <= v <= probe.TESTED_UP_TO, torch.__version__
    assert probe.torch_problem() is None


def test_the_release_constants_match_this_torch():
    """Each constant says what the installed torch has."""
    fields = {f.name for f in dynamo_utils.CompilationMetrics.__dataclass_fields__.values()}
    has_hooks = hasattr(dynamo_utils, "register_hook_for_recompile_user_context")
    assert has_hooks == ("recompile_user_contexts" in fields)
    assert HAS_CONTEXTS == has_hooks, torch.__version__
    assert (probe.torch_version() >= probe.RECORD_STACK_TRACE_SINCE) == ("stack_trace" in fields)
    if probe.torch_version() >= probe.PER_CALL_RECOMPILE_LIMIT_SINCE:
        assert HAS_PER_CALL_LIMIT
    if probe.torch_version() < probe.RECOMPILE_USER_CONTEXTS_SINCE:  # 2.8
        assert not HAS_PER_CALL_LIMIT


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
        if len(graphs) > 1 and probe.torch_version() < probe.DELAYED_CALLBACK_LINKED_SINCE:
            # torch 2.8 serves these stances' later calls only when a freed
            # callback's address is reused (probe.callback_ref): it may
            # recompile, measured or not. Then each recompile says so.
            assert stance in probe.DELAYED_STANCES, (stance, rep.frames)
            assert [c.kind for c in rep.causes] == ["callback"], (stance, rep.causes)
            assert rep.causes[0].count == len(rep.recompiles) == len(graphs) - 1
            continue
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

    from stance_magic.builder import Closed, build_report
    from stance_magic.spec import MeasureSpec
    from stance_magic.stance import make_stance

    rec = types.SimpleNamespace(
        compile_id="0/0",
        co_name="f",
        co_filename="/tmp/f.py",
        co_firstlineno=3,
        entire_frame_compile_time_s=0.25,
        backend_compile_time_s=0.05,
    )
    window = probe.Window(records=[rec], misses=1)
    stance = make_stance("default", False, None)
    spec = MeasureSpec(stance=stance, source="f(x)")
    closed = Closed(
        spec, stance, execution_count=None, window=window, wall_s=0.3, error=None, t0=0.0
    )
    rep = build_report(closed, index=1)
    assert rep.compiles == 1 and rep.graphs == 1 and rep.recompiles == []
    (frame,) = rep.frames
    assert (frame.name, frame.line, frame.failed, frame.guard_count) == ("f", 3, None, None)
    assert rep.compile_s == pytest.approx(0.25)
    assert "f (<tmp>/f.py:3)" in str(rep)


def _hold_every_callback(monkeypatch) -> list:
    """Keep every callback torch builds for a call alive (the recorder never
    does: see probe.callback_ref), so no freed address can be reused."""
    from torch._dynamo import eval_frame

    held: list = []
    orig = eval_frame._callback_from_stance

    def holding(callback):
        result = orig(callback)
        held.append(result)
        return result

    monkeypatch.setattr(eval_frame, "_callback_from_stance", holding)
    return held


@pytest.mark.unpinned_callbacks  # (it holds every callback itself: none is freed)
@pytest.mark.parametrize("stance", ["eager_then_compile", "aot_eager_then_compile"])
def test_a_recompile_with_no_failed_guard_under_a_delayed_stance_is_explained(
    sh, monkeypatch, stance
):
    """torch 2.8 tells cache entries apart by the address of the callback it
    builds for every call under these stances: with each call's callback kept
    alive, every call after the first compiled one recompiles, with no failed
    guard, and the report says why. From 2.9 the callbacks are linked and
    torch does not recompile at all."""
    sh.run_cell(
        "from torch._dynamo.testing import CompileCounterWithBackend\n"
        "cnt = CompileCounterWithBackend('eager')\n"
        "g = torch.compile(lambda x: x.cos() * 2, backend=cnt)\n"
        "stance_magic.probe.reset_compiled_code()\n"
    )
    held = _hold_every_callback(monkeypatch)
    res, out = run(sh, f"%%stance {stance}\nys = [g(torch.ones(2)) for _ in range(5)]")
    assert res.success, res.error_in_exec
    assert sum(callable(c) for c in held) >= 5  # one per call at least
    rep = last(sh)
    compiled = [f for f in rep.frames if f.graph and f.backend == "CompileCounterWithBackend"]
    # torch's own count of the graphs it compiled with the user's backend
    assert len(compiled) == sh.user_ns["cnt"].frame_count
    if probe.torch_version() >= probe.DELAYED_CALLBACK_LINKED_SINCE:
        # (aot_eager_then_compile's first, aot_eager, entry serves the rest)
        assert len(rep.frames) == 1 and rep.recompiles == [] and rep.causes == []
        return
    first = 1 if stance == "eager_then_compile" else 0
    assert len(rep.recompiles) == len(rep.frames) - 1 == 4 - first, rep.frames
    kinds = {failure_kind(f.reason) for r in rep.recompile_details for f in r.failures}
    assert kinds == {"backend"}, rep.recompile_details
    (cause,) = rep.causes
    assert cause.kind == "callback" and cause.count == len(rep.recompiles)
    assert stance in cause.what and "2.9" in cause.fix
    head = str(rep).splitlines()[0]
    assert f"{len(rep.recompiles)} recompiles (no guard failed: torch 2.8's callbacks)" in head
    text = " ".join(rep.text(verbose=True).split())
    assert f"why it recompiled {cause.what}" in text and "torch 2.9 or later" in text
    assert "torch 2.8 matches" in " ".join(html_outputs(out))


def test_a_recompile_for_another_backend_is_explained(sh):
    """Two torch.compile calls of one function with different backends share
    its cache: the second one's first call finds entries compiled for the
    other backend. No guard failed (2.8 says nothing; later torch says
    BACKEND_MATCH); the report names the backend as the cause."""
    sh.run_cell(
        "def twice(x):\n"
        "    return x.sin() * 2\n"
        "a = torch.compile(twice, backend='eager')\n"
        "b = torch.compile(twice, backend='aot_eager')\n"
    )
    res, out = run(sh, "%%stance default\na(torch.ones(3)); b(torch.ones(3)); a(torch.ones(3))")
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert len(rep.recompiles) == 1, rep.frames
    (cause,) = rep.causes
    assert cause.kind == "backend", rep.causes
    assert "backend" in cause.what and "one backend" in cause.fix
    assert cause.what in " ".join(str(rep).split())
    assert "no guard failed" in " ".join(html_outputs(out))


def test_a_delayed_stance_on_torch_2_8_warns_once(sh):
    """On torch 2.8 the user is told, once a session, what its delayed-compile
    stances may do (recompile with no guard failed, crash); not elsewhere."""
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')")
    outs = []
    for _ in range(2):
        res, out = run(sh, "%%stance eager_then_compile -q\nf(torch.ones(2))")
        assert res.success, res.error_in_exec
        outs.append(out.stderr)
    res, out = run(sh, "%stance aot_eager_then_compile -q")
    outs.append(out.stderr)
    sh.run_cell("%stance default -q")
    if probe.torch_version() < probe.DELAYED_CALLBACK_LINKED_SINCE:
        assert "under eager_then_compile: torch matches its cache entries" in outs[0]
        assert "torch 2.9 fixed it" in outs[0]
        assert "can crash the process (its cache entries keep that callback" in outs[0]
        assert "eager_then_compile" not in outs[1]  # once
        assert "under aot_eager_then_compile" in outs[2]
    else:
        assert not any("torch matches its cache entries" in o for o in outs)


def test_torch_replaces_its_stance_value_and_current_stance_follows():
    """stance_magic keeps what it made of torch's stance value while torch
    holds the same value (probe.torch_stance_value): set_stance, as a
    function, a context manager and a decorator, puts a new value in place,
    gives the prior one back and never changes a value, on this torch."""
    from torch._dynamo import eval_frame

    fields = probe.stance_of
    before = eval_frame._stance
    seen = fields(before)
    first = stance_magic.current_stance()
    assert (first.name, first.skip_guard_eval_unsafe, first.backend) == seen
    assert stance_magic.current_stance() is first  # the same value: the same Stance
    with torch.compiler.set_stance("force_eager"):
        inside = eval_frame._stance
        assert inside is not before and fields(inside) == ("force_eager", False, None)
        assert stance_magic.current_stance().name == "force_eager"
    assert eval_frame._stance is before and fields(before) == seen
    assert stance_magic.current_stance() == first

    @torch.compiler.set_stance("fail_on_recompile")
    def decorated():
        return stance_magic.current_stance().name

    assert decorated() == "fail_on_recompile"
    assert eval_frame._stance is before and stance_magic.current_stance() == first
    torch.compiler.set_stance("eager_on_recompile")
    try:
        assert eval_frame._stance is not before and fields(before) == seen
        assert stance_magic.current_stance().name == "eager_on_recompile"
    finally:
        torch.compiler.set_stance(seen[0], skip_guard_eval_unsafe=seen[1])
    # the stance set again: a new value of torch's, an equal Stance of ours
    assert eval_frame._stance is not before and fields(before) == seen
    again = stance_magic.current_stance()
    assert again == first and stance_magic.current_stance() is again
