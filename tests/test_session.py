"""The session: what the extension leaves in torch across cells, resets,
reloads and unloads, and the session stance it keeps there: while another
thread compiles, and when giving it back after a cell fails."""

from __future__ import annotations

import threading

import pytest
import torch
from torch._C._dynamo import eval_frame as c_eval_frame
from torch._dynamo import eval_frame, utils

import stance_magic
from stance_magic import probe
from stance_magic.session.engine import get_engine

from conftest import run


def _ours(fn) -> bool:
    """A recorder's bound method, or one of its per-call hooks (closures that
    name their recorder)."""
    owner = getattr(fn, "__self__", None) or getattr(fn, "_stance_magic_recorder", None)
    return isinstance(owner, probe.Recorder)


def _our_hooks_in_torch() -> dict[str, bool]:
    hook = c_eval_frame.set_guard_complete_hook(None)
    c_eval_frame.set_guard_complete_hook(hook)
    import torch._dynamo.guards as guards

    return {
        "guard hook": _ours(hook),
        "dispatcher": _ours(eval_frame._callback_from_stance),
        "records": _ours(utils.add_compilation_metrics_to_chromium),
        "testing hook": _ours(guards.guard_manager_testing_hook_fn),
    }


def test_hooks_are_in_torch_only_while_a_cell_is_measured(shell):
    shell.run_cell(
        "import torch\nf = torch.compile(lambda x: x + 1, backend='eager')\nf(torch.ones(2))"
    )
    assert not any(_our_hooks_in_torch().values())
    shell.user_ns["probe_hooks"] = _our_hooks_in_torch
    run(shell, "%%stance default -q\nf(torch.ones(2))\ninside = probe_hooks()")
    assert all(shell.user_ns["inside"].values()), shell.user_ns["inside"]
    assert not any(_our_hooks_in_torch().values())
    # a plain cell, watch off: nothing of ours runs per call
    run(shell, "for _ in range(3):\n    f(torch.ones(2))\nplain = probe_hooks()")
    assert not any(shell.user_ns["plain"].values())
    # watch on: hooked during each cell, and out again after it
    run(shell, "%stance watch on")
    run(shell, "f(torch.ones(2))\nwatched = probe_hooks()")
    assert all(shell.user_ns["watched"].values())
    run(shell, "%stance watch off")
    assert not any(_our_hooks_in_torch().values())


def test_module_names_do_not_outlive_a_reset(shell):
    shell.run_cell(
        "import torch\n"
        "class Named(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 3\n"
        "cm = torch.compile(Named(), backend='eager')\n"
    )
    run(shell, "%%stance default -q\ncm(torch.ones(2))")
    assert stance_magic.history()[-1].frames[0].name == "Named.forward"
    run(shell, "%stance reset")
    # the same compile id (0/0) again, now for a plain function
    shell.run_cell("def plain(x):\n    return x - 1\ncp = torch.compile(plain, backend='eager')")
    run(shell, "%%stance default -q\ncp(torch.ones(2))")
    (frame,) = stance_magic.history()[-1].frames
    assert frame.compile_id == "0/0" and frame.name == "plain"


def test_unload_with_a_measure_block_still_open_gives_torch_back(shell):
    shell.run_cell(
        "import torch, stance_magic\n"
        "f = torch.compile(lambda x: x * 5, backend='eager')\n"
        "def gen():\n"
        "    with stance_magic.measure('default'):\n"
        "        f(torch.ones(2))\n"
        "        yield 1\n"
        "        yield 2\n"
        "g = gen()\n"
        "next(g)\n"
    )
    run(shell, "%unload_ext stance_magic")
    assert get_engine().recorder.open_windows == 0
    assert not any(_our_hooks_in_torch().values())
    assert utils._compilation_metrics.maxlen == 64
    shell.run_cell("%load_ext stance_magic")


def test_nothing_of_ours_stays_after_unload(shell):
    run(shell, "import torch\nf = torch.compile(lambda x: x * 7, backend='eager')")
    run(shell, "%%stance default -q\nf(torch.ones(2))")
    run(shell, "%unload_ext stance_magic")
    assert not any(_our_hooks_in_torch().values())
    import logging

    from torch._logging._internal import log_registry

    for q in log_registry.get_artifact_log_qnames():
        assert not any(
            type(h).__module__.startswith("stance_magic") for h in logging.getLogger(q).handlers
        )
    shell.run_cell("%load_ext stance_magic")
    assert torch.compiler.is_compiling() is False


def test_reload_keeps_the_session_stance_and_watch(shell):
    run(shell, "%stance force_eager -q")
    run(shell, "%stance watch on")
    res, _ = run(shell, "%reload_ext stance_magic")
    assert res.success, res.error_in_exec
    assert stance_magic.current_stance().name == "force_eager"
    assert stance_magic.get_engine().session.name == "force_eager"
    assert stance_magic.get_engine().watch is True
    _, cap = run(shell, "%stance")
    assert "session stance: force_eager" in cap.stdout
    run(shell, "%stance watch off")
    # unloading still gives back the stance from before the first load
    run(shell, "%unload_ext stance_magic")
    assert stance_magic.current_stance().name == "default"
    run(shell, "%load_ext stance_magic")
    assert stance_magic.current_stance().name == "default"


def test_a_failed_restore_keeps_the_session_stance_and_says_so(shell, monkeypatch):
    run(shell, "%stance eager_on_recompile -q")
    real = probe.set_stance
    fails = {"n": 1}

    def flaky(name, skip, backend):
        if name == "eager_on_recompile" and fails["n"]:
            fails["n"] -= 1
            raise probe.CompiledRegionError(probe.COMPILED_REGION_MESSAGE)
        return real(name, skip, backend)

    monkeypatch.setattr(probe, "set_stance", flaky)
    res, cap = run(shell, "%%stance force_eager -q\nx = 1")
    assert res.success, res.error_in_exec  # the cell's own result stands
    assert "eager_on_recompile" in cap.stderr and "could not" in cap.stderr
    # the session stance is not lost: the engine still means it, and it is
    # applied again before the next cell
    assert stance_magic.get_engine().session.name == "eager_on_recompile"
    shell.run_cell("import stance_magic")
    res, _ = run(shell, "now = stance_magic.current_stance().name")
    assert shell.user_ns["now"] == "eager_on_recompile"
    assert stance_magic.current_stance().name == "eager_on_recompile"


def test_watch_measurements_nest_when_a_cell_runs_cells(shell):
    shell.run_cell("import torch\nf = torch.compile(lambda x: x * 11, backend='eager')")
    run(shell, "%stance watch on")
    res, _ = run(
        shell,
        "f(torch.ones(2))\n"
        'get_ipython().run_cell(\'g = torch.compile(lambda x: x + 2, backend="eager")\\n'
        "g(torch.ones(2))')\n"
        "f(torch.ones(3))\n",
    )
    assert res.success
    inner, outer = stance_magic.history()[-2:]
    assert (inner.compiles, outer.compiles) == (1, 3)  # the outer cell includes the inner
    assert outer.execution_count == res.execution_count
    rec = get_engine().recorder
    assert rec.open_windows == 0 and not any(_our_hooks_in_torch().values())
    assert utils._compilation_metrics.maxlen == 64
    run(shell, "%stance watch off")
    run(shell, "%unload_ext stance_magic")
    assert utils._compilation_metrics.maxlen == 64
    shell.run_cell("%load_ext stance_magic")


def test_a_block_left_open_in_a_suspended_generator_does_not_wedge_the_session(shell):
    shell.run_cell(
        "import torch, stance_magic\n"
        "f = torch.compile(lambda x: x * 5, backend='eager')\n"
        "def gen():\n"
        "    with stance_magic.measure('force_eager') as rep:\n"
        "        f(torch.ones(2))\n"
        "        yield rep\n"
        "        yield rep\n"
    )
    res, cap = run(shell, "g = gen()\nrep = next(g)")
    assert res.success
    assert "did not close" in cap.stderr and "default" in cap.stderr
    # the session is not wedged: a %stance change applies at once
    assert probe.torch_stance()[0] == "default"
    res, cap = run(shell, "%stance eager_on_recompile")
    assert "after this cell" not in cap.stdout
    assert probe.torch_stance()[0] == "eager_on_recompile"
    rep = shell.user_ns["rep"]
    assert rep.stance == "force_eager" and any("still open" in n for n in rep.notes)
    assert rep in stance_magic.history()
    # the generator ending later changes nothing and blames no cell
    res, cap = run(shell, "g.close()\ndel g")
    assert res.success and "stance_magic" not in cap.stderr
    assert probe.torch_stance()[0] == "eager_on_recompile"
    assert get_engine().recorder.open_windows == 0
    run(shell, "%stance default")


# -- the session stance while another thread compiles ------------------------


WAIT_S = 10  # every wait on another thread is bounded


class CompilingThread:
    """A background thread held inside a torch.compile (its backend waits)."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.errors: list[BaseException] = []

        def held_backend(gm, example_inputs):
            self.inside.set()
            self.release.wait(WAIT_S)
            return gm.forward

        fn = torch.compile(lambda x: x * 3 - 1, backend=held_backend)

        def target() -> None:
            try:
                fn(torch.ones(2))
            except BaseException as exc:  # pragma: no cover - reported by the test
                self.errors.append(exc)

        self.thread = threading.Thread(target=target, daemon=True)

    def start(self) -> CompilingThread:
        self.thread.start()
        assert self.inside.wait(WAIT_S), "the background thread never started compiling"
        # torch 2.13+ set is_compiling() process-wide while any thread compiles
        # (torch.compiler._compile_session_context): True in this thread too;
        # older releases leave it False outside the compiling thread
        process_wide = hasattr(torch.compiler, "_compile_session_context")
        assert torch.compiler.is_compiling() is process_wide
        return self

    def finish(self) -> None:
        self.release.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        assert not self.errors, self.errors


@pytest.fixture
def compiling():
    made: list[CompilingThread] = []

    def start() -> CompilingThread:
        t = CompilingThread()
        made.append(t)
        return t.start()

    yield start
    for t in made:
        t.finish()


def test_a_thread_compiling_elsewhere_does_not_block_this_threads_stance(shell, compiling):
    # torch refuses set_stance only inside a compiled region of the calling
    # thread; is_compiling() is process-wide and must not decide it.
    compiling()
    res, cap = run(shell, "%stance eager_on_recompile")
    assert res.success, res.error_in_exec
    shell.run_cell("import stance_magic")
    res, _ = run(shell, "%%stance force_eager -q\ninside = stance_magic.current_stance().name")
    assert res.success, res.error_in_exec
    assert shell.user_ns["inside"] == "force_eager"
    assert stance_magic.current_stance().name == "eager_on_recompile"


def test_a_thread_still_compiling_when_the_cell_ends_keeps_the_session(shell, compiling):
    # The thread starts compiling inside the cell (under its stance) and is
    # still compiling when the cell ends and the session stance comes back.
    run(shell, "%stance force_eager -q")
    shell.user_ns["start_compiling"] = compiling
    res, _ = run(shell, "%%stance default -q\nstart_compiling()")
    assert res.success, res.error_in_exec
    assert stance_magic.current_stance().name == "force_eager"
    assert stance_magic.get_engine().session.name == "force_eager"


def test_compiled_region_of_this_thread_is_still_refused():
    @torch.compile(backend="eager")
    def inner(x):
        stance_magic.set_session_stance("force_eager")
        return x + 1

    with pytest.raises(probe.CompiledRegionError):
        inner(torch.ones(1))
    assert stance_magic.current_stance().name == "default"
