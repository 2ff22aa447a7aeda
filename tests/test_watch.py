"""``%stance watch on``: every cell measured, a report for each cell that
compiles, the history keeping only cells where torch.compile did something,
and nothing counted that is not a call into compiled code (the stance probe)
or left wrapped in torch when a cell ends."""

from __future__ import annotations

import stance_magic
from stance_magic import probe

from conftest import run, text_outputs


def test_watch_reports_cells_that_compile(sh):
    sh.run_cell("w = torch.compile(lambda x: x / 2, backend='eager')")
    _, cap = run(sh, "%stance watch on")
    assert "watch on" in cap.stdout
    n = len(stance_magic.history())
    _, cap = run(sh, "w(torch.ones(2))")
    assert any(t.startswith("stance_magic · ") for t in text_outputs(cap))
    _, cap = run(sh, "x = 1 + 1")  # compiles nothing: no report
    assert not any(t.startswith("stance_magic · ") for t in text_outputs(cap))
    # a %%stance cell is reported once, by the cell magic
    _, cap = run(sh, "%%stance default --no-plot\nw(torch.ones(7))")
    assert sum(t.startswith("stance_magic · ") for t in text_outputs(cap)) == 1
    run(sh, "%stance watch off")
    _, cap = run(sh, "w(torch.ones(9))")
    assert not any(t.startswith("stance_magic · ") for t in text_outputs(cap))
    assert len(stance_magic.history()) > n


def test_watch_keeps_in_the_history_only_cells_where_torch_compile_did_something(shell):
    from torch._dynamo import eval_frame

    dispatch = eval_frame._callback_from_stance  # (torch's, or the suite's pin on 2.8)
    shell.run_cell("import torch\nw = torch.compile(lambda x: x - 2, backend='eager')")
    _, cap = run(shell, "%stance watch on")
    assert "compiles gets a report" in cap.stdout and "history" in cap.stdout
    hist = stance_magic.get_engine().history
    n = len(hist)
    for cell in ("a = 1 + 1", "%stance history", "%stance", "import math"):
        run(shell, cell)
    assert len(hist) == n  # torch.compile did nothing in these
    run(shell, "w(torch.ones(2))")  # compiles: reported and kept
    assert len(hist) == n + 1 and hist[-1].compiles == 1
    _, cap = run(shell, "w(torch.ones(2))")  # served from the cache: kept, not reported
    assert len(hist) == n + 2 and hist[-1].cache_hits == 1 and hist[-1].compiles == 0
    assert not any("stance_magic · " in str(o.data) for o in cap.outputs)
    run(shell, "%stance force_eager -q")
    run(shell, "w(torch.ones(2))")  # a compiled function, run eagerly: kept
    assert len(hist) == n + 3 and hist[-1].stance == "force_eager"
    run(shell, "b = 2 * 2")  # nothing of torch.compile's: not kept
    assert len(hist) == n + 3
    run(shell, "%stance watch off")
    # the counting is undone when the cell ends: nothing stays wrapped
    assert eval_frame._callback_from_stance is dispatch


def test_watch_does_not_count_the_stance_probe_as_a_compiled_call(shell, monkeypatch):
    # the first stance name a session checks asks torch's dispatcher about
    # every stance: not a call into compiled code
    monkeypatch.setattr(probe.stances, "_SUPPORTED", None)
    run(shell, "%stance watch on -q")
    n = len(stance_magic.get_engine().history)
    run(shell, "%stance force_eager -q")
    assert probe.stances._SUPPORTED  # probed inside the watched cell
    assert len(stance_magic.get_engine().history) == n
    run(shell, "%stance watch off -q")
