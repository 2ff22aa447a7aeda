"""What the extension leaves in torch, across cells, resets and unloads (issue 10)."""

from __future__ import annotations

import torch
from torch._C._dynamo import eval_frame as c_eval_frame
from torch._dynamo import eval_frame, utils

import stance_magic
from stance_magic import probe
from stance_magic.engine import get_engine

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
    rec = get_engine()._recorder
    assert rec is None or rec.open_windows == 0
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
    rec = get_engine()._recorder
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
    assert get_engine()._recorder.open_windows == 0
    run(shell, "%stance default")
