"""Robust under misuse, honest in the small things (issue 10)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

import stance_magic
from stance_magic import probe

from conftest import run

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


# -- 4: another thread compiling ---------------------------------------------


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


# -- 5: %reload_ext -----------------------------------------------------------


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


# -- 8: absurd --repeat --------------------------------------------------------


@pytest.mark.parametrize("count", ["99999999999999999999", "10001"])
def test_absurd_repeat_is_refused_before_the_cell_runs(shell, count):
    res, _ = run(shell, f"%%stance default --compare --repeat {count}\nside_effect = 1")
    err = res.error_in_exec
    assert type(err).__name__ == "UsageError"
    assert "10,000" in str(err) and "\n" not in str(err)
    assert "side_effect" not in shell.user_ns


# -- 9: a cell ending in a call to an async def ---------------------------------


def test_a_coroutine_call_is_shown_not_run_as_in_a_plain_cell(shell):
    import inspect

    shell.run_cell("ran = []\nasync def job():\n    ran.append(1)\n    return 5")
    plain, _ = run(shell, "job()")
    magic, cap = run(shell, "%%stance -q\njob()")
    try:
        assert inspect.iscoroutine(plain.result)
        assert inspect.iscoroutine(magic.result), magic.result
        assert "coroutine object" in cap.stdout
        assert shell.user_ns["ran"] == []
    finally:
        for r in (plain.result, magic.result):
            if inspect.iscoroutine(r):
                r.close()
    # only a top-level await is awaited
    res, _ = run(shell, "%%stance -q\nawait job()")
    assert res.result == 5 and shell.user_ns["ran"] == [1]


# -- 10: exports: odd text, links, device nodes, descriptors -------------------


def _fds() -> set[str]:
    """The process's open descriptors (by number): a leak is one left open
    that was not before; another thread may close one meanwhile."""
    import os

    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def odd_error(shell):
    """A history whose one report's error text holds a surrogate-escaped byte."""
    res, _ = run(
        shell, "%%stance -q\nraise ValueError(b'bad \\xff byte'.decode('utf-8', 'surrogateescape'))"
    )
    assert isinstance(res.error_in_exec, ValueError)
    assert "\udcff" in stance_magic.get_engine().history[-1].error
    return shell


def test_export_escapes_a_surrogate_byte(odd_error, tmp_path):
    import json

    csv_p, json_p = tmp_path / "h.csv", tmp_path / "h.json"
    res, cap = run(odd_error, f"%stance history --csv {csv_p} --json {json_p}")
    assert res.success, res.error_in_exec
    text = csv_p.read_bytes().decode("utf-8")  # valid UTF-8, whole
    assert "ValueError: bad \\udcff byte" in text and text.count("\n") == 2
    assert json.loads(json_p.read_text())[0]["error"] == "ValueError: bad \udcff byte"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv", "h.json"]


def test_export_writes_through_a_symlink_to_a_regular_file(shell, tmp_path):
    run(shell, "%%stance -q\nx = 1")
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    res, _ = run(shell, f"%stance history --csv {link}")
    assert res.success, res.error_in_exec
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text().startswith("cell,")
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    res, _ = run(shell, f"%stance history --json {dangling}")
    assert res.success, res.error_in_exec
    assert dangling.is_symlink() and (tmp_path / "new.csv").read_text().startswith("[")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dangling.csv",
        "link.csv",
        "new.csv",
        "real.csv",
    ]


def test_export_refuses_a_device_node_or_fifo_in_one_line(shell, tmp_path):
    import os
    import stat

    run(shell, "%%stance -q\nx = 1")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_dev = tmp_path / "to_null"
    to_dev.symlink_to("/dev/null")
    for target in (fifo, to_dev):
        res, _ = run(shell, f"%stance history --csv {target}")
        err = res.error_in_exec
        assert type(err).__name__ == "UsageError", err
        assert "not a regular file" in str(err) and "\n" not in str(err)
        assert str(target) in str(err)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert to_dev.is_symlink() and os.readlink(to_dev) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "to_null"]


def test_no_descriptor_leaks_when_an_export_fails(shell, tmp_path, monkeypatch):
    import os

    run(shell, "%%stance -q\nx = 1")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = [tmp_path / "nodir" / "h.csv", tmp_path, fifo]
    for target in bad:  # warm-up: IPython's own first-time descriptors
        run(shell, f"%stance history --csv {target}")
    before = _fds()
    for target in bad:
        res, _ = run(shell, f"%stance history --csv {target}")
        assert type(res.error_in_exec).__name__ == "UsageError"

    def refuse(*args, **kwargs):
        raise OSError(24, "Too many open files")

    for name in ("fdopen", "replace"):
        with monkeypatch.context() as m:
            m.setattr(os, name, refuse)
            res, _ = run(shell, f"%stance history --csv {tmp_path / 'h.csv'}")
        assert "Too many open files" in str(res.error_in_exec), name
    assert _fds() - before == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # no temp file left


# -- 11: watch mode: what is reported and what is kept agree -------------------


def test_watch_keeps_in_the_history_only_cells_where_torch_compile_did_something(shell):
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
    assert not any("stance_magic report" in str(o.data) for o in cap.outputs)
    run(shell, "%stance force_eager -q")
    run(shell, "w(torch.ones(2))")  # a compiled function, run eagerly: kept
    assert len(hist) == n + 3 and hist[-1].stance == "force_eager"
    run(shell, "b = 2 * 2")  # nothing of torch.compile's: not kept
    assert len(hist) == n + 3
    run(shell, "%stance watch off")
    # the counting is undone when the cell ends: nothing stays wrapped
    from torch._dynamo import eval_frame

    assert eval_frame._callback_from_stance.__module__ == "torch._dynamo.eval_frame"


# -- 12: --compare: a steady state by default, its spread, "1 run" -------------


def test_compare_defaults_to_a_steady_state_and_flags_a_wide_spread(shell):
    # eager runs alternate 2 ms / 20 ms: no steady state to trust
    shell.run_cell(
        "import time, torch\n"
        "ticks = []\n"
        "def jumpy(x):\n"
        "    if not torch.compiler.is_compiling():\n"
        "        ticks.append(1)\n"
        "        time.sleep(0.02 if len(ticks) % 2 else 0.002)\n"
        "    return x + 1\n"
        "cj = torch.compile(jumpy, backend='eager')\n"
    )
    res, _ = run(shell, "%%stance default --compare --no-plot -q\ncj(torch.ones(2))")
    assert res.success, res.error_in_exec
    rep = stance_magic.get_engine().history[-1]
    assert len(rep.compare.runs["eager"]) == len(rep.compare.runs["compiled"]) == 5
    assert any("eager: spread too wide" in n for n in rep.notes), rep.notes


def test_a_wide_spread_over_few_runs_is_flagged():
    from stance_magic.compare import Steady

    few = Steady.of([5.0, 1.0, 1.5], "eager")  # two steady runs, 50 % apart
    assert few.warning and "spread too wide" in few.warning
    assert Steady.of([5.0, 1.0, 1.02, 1.01], "eager").warning is None


def test_break_even_of_one_run_is_singular():
    from dataclasses import replace

    from stance_magic.report import CellReport, Comparison

    rep = CellReport(
        compare=Comparison(eager_s=2.0, compiled_s=1.0, speedup=2.0, break_even_calls=1)
    )
    text = str(rep)
    assert "break-even           1 run" in text and "1 runs" not in text
    rep = replace(rep, compare=replace(rep.compare, break_even_calls=3))
    assert "3 runs" in str(rep)


# -- 13: --compare/--sweep notices are notices, not errors ---------------------


@pytest.mark.parametrize("opts", ["default --compare --repeat 2", "--sweep default,force_eager"])
def test_repeat_notices_are_displayed_not_written_to_stderr(shell, opts):
    shell.run_cell("import torch\nnt = torch.compile(lambda x: x + 5, backend='eager')")
    res, cap = run(shell, f"%%stance {opts} --no-plot\nnt(torch.ones(2))")
    assert res.success, res.error_in_exec
    assert "repeat" not in cap.stderr
    notices = [o.data for o in cap.outputs if "side effects repeat" in o.data["text/plain"]]
    assert len(notices) == 1
    assert notices[0]["text/plain"].startswith("stance_magic: ")
    assert "side effects repeat" in notices[0]["text/html"]
    _, cap = run(shell, f"%%stance {opts} -q\nnt(torch.ones(2))")
    assert not cap.outputs and "repeat" not in cap.stdout + cap.stderr


# -- 14: reports numbered as IPython numbers the cells --------------------------


def test_reports_carry_ipythons_cell_number(shell, tmp_path):
    from conftest import html_outputs, text_outputs

    shell.run_cell("import torch\nec = torch.compile(lambda x: x * 7, backend='eager')")
    for _ in range(3):
        run(shell, "pass")  # unmeasured cells: IPython's numbers run ahead
    res, cap = run(shell, "%%stance default --no-plot\nec(torch.ones(2))")
    n = res.execution_count
    hist = stance_magic.get_engine().history
    rep = hist[-1]
    assert rep.execution_count == n and rep.index == len(hist) and n != rep.index
    assert any(t.startswith(f"stance_magic report, In [{n}]") for t in text_outputs(cap))
    assert any(f"In [{n}]" in h for h in html_outputs(cap))
    assert rep.summary_row()["execution_count"] == n
    # --compare, --sweep and watched cells too
    res, _ = run(shell, "%%stance default --compare --repeat 2 -q\nec(torch.ones(3))")
    assert hist[-1].execution_count == res.execution_count
    res, _ = run(shell, "%%stance --sweep default,force_eager -q\nec(torch.ones(4))")
    assert [r.execution_count for r in hist[-2:]] == [res.execution_count] * 2
    run(shell, "%stance watch on -q")
    res, _ = run(shell, "ec(torch.ones(5))")
    assert hist[-1].execution_count == res.execution_count
    run(shell, "%stance watch off -q")
    # the history table and the CSV show the number too
    _, cap = run(shell, "%stance history")
    lines = cap.stdout.split("Out[", 1)[1].splitlines()[1:]
    assert lines[0].split()[:2] == ["cell", "In"]
    assert [ln.split()[:2] for ln in lines[2:]][rep.index - 1] == [str(rep.index), str(n)]
    p = tmp_path / "h.csv"
    run(shell, f"%stance history --csv {p} -q")
    assert p.read_text().splitlines()[0].startswith("cell,execution_count,")


# -- 15: history in a terminal, and exports ------------------------------------


def test_history_plot_in_a_terminal_says_why_there_is_no_chart(shell):
    shell.display_formatter.active_types = ["text/plain"]  # as a terminal IPython
    run(shell, "%%stance -q\nx = 1")
    _, cap = run(shell, "%stance history --plot")
    why = [ln for ln in cap.stdout.splitlines() if "chart" in ln]
    assert len(why) == 1 and "text only" in why[0], cap.stdout
    assert "cell  In" in cap.stdout  # the table itself still shows
    assert not [o for o in cap.outputs if "image/png" in o.data]


def test_an_export_prints_one_line_not_the_table(shell, tmp_path):
    run(shell, "%%stance -q\nx = 1")
    p = tmp_path / "h.csv"
    res, cap = run(shell, f"%stance history --csv {p}")
    assert res.success and res.result is None
    assert cap.stdout.splitlines() == [f"wrote 1 row to {p}"]
    assert not cap.outputs
    _, cap = run(shell, f"%stance history --csv {p} -q")
    assert not cap.stdout and not cap.outputs


# -- 16: the README and pyproject say what is true ------------------------------


def _repo() -> Path:
    return Path(__file__).resolve().parent.parent


def test_readme_code_blocks_paste_as_cells():
    import re

    text = (_repo() / "README.md").read_text()
    pages = [text] + [p.read_text() for p in sorted((_repo() / "docs").glob("*.md"))]
    blocks = [b for page in pages for b in re.findall(r"```python\n(.*?)```", page, flags=re.S)]
    assert blocks
    for block in blocks:
        lines = block.splitlines()
        # a cell magic works only on the first line of a cell: one block per cell
        # (or on the first line of the body of another cell magic: %%px runs
        # its body, %%stance first, on the engines)
        body = lines[2:] if lines and lines[0].startswith("%%px") else lines[1:]
        assert not [ln for ln in body if ln.startswith("%%")], block
    assert "first Inductor compile" in text and "20–30 s" in text


def test_pyproject_names_files_that_exist():
    import re

    text = (_repo() / "pyproject.toml").read_text()
    named = re.findall(r"\(([\w./-]+\.txt)\)", text)
    assert named
    for name in named:
        assert (_repo() / name).is_file(), name


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
